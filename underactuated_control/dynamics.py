"""Hybrid dynamics of under-actuated manipulators (Jain & Rodriguez, sections 3-5).

Given the active joints' accelerations and the passive joints' forces, the O(N) recursion returns
the active joints' forces T_a, the passive joints' accelerations qdd_p and every link's spatial
acceleration alpha. Its three steps, each one compiled kernel below:

1. ``velocity_sweep``      (3.1)  base-to-tip: V(k), Coriolis a(k), gyroscopic b(k)
2. ``articulated_sweep``   (4.6)  tip-to-base: P(k), D_p(k), G_p(k), P+(k) (depends on q only)
3. ``residual_force_sweep`` (5.4a) tip-to-base: z(k), eps_p(k), nu_p(k)
   ``outward_sweep``        (5.4b) base-to-tip: alpha(k), T_a(k), qdd_p(k)

External wrenches (``f_ext=``: link name -> [force; torque] in the link's frame) enter (5.4a)
as -f_ext(k) on their bodies (doc/theory/external_wrenches.md, (E.1)-(E.4)); without them the
buffer is not read.

With every joint passive it is the articulated-body forward dynamics (ABA); with every joint
active it is composite-body inverse dynamics; ``forward_dynamics``, ``inverse_dynamics`` and
``mass_matrix`` below are exactly those special cases of the same kernels.

Indexing: bodies base-to-tip (``parent[i] < i``), so the paper's tip-to-base "for k = 1..n" is
``for i in reversed(range(nb))``, and the paper's k+1 (the next body toward the base) is
``parent[i]``. Spatial vectors are [angular; linear] (see ``spatial.py``); gravity enters as
the base acceleration alpha(n+1) = [0; -g].

The sweeps read three buffers through named layouts (``Topology``, ``Constants``, ``Work`` and
``Scratch``, cut by ``int_views``, ``const_views`` and ``work_views``) and are inlined into the
one compiled call ``run_steps``, which returns a status code (``OK``, ``NONFINITE_Q``, ...).
Arrays are copied by element loops, never ``x[:] = y`` from another array: numba compiles the
shape-mismatch message of such an assignment, seconds per process on a fresh kernel cache.
``configure`` runs steps 0 and 2 for every kernel of the package and skips them when the buffer
is at that q already; a ``Workspace`` (one per model and cycle) holds one ``HybridDynamics``
per passive set for the dynamics, the Jacobians and the operational space alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, types

# numpy_view: re-exported from its old home (it lives in buffers.py now)
from .buffers import _FLOAT64, block_view, borrow, numpy_view, numpy_views, take  # noqa: F401
from .model import FLOATING, PRISMATIC, RobotModel
from .spatial import (
    FAST,
    add,
    axis_angle_matrix,
    cross_force,
    cross_motion,
    hinge_force,
    hinge_force_sub,
    hinge_mat,
    hinge_motion,
    hinge_motion_add,
    mat_hinge,
    mat_small,
    mat_vec,
    mat_vec_add,
    quaternion_to_matrix,
    small_mat_vec,
    spd_inverse,
    sub_outer,
    xform_force_transpose,
    xform_inertia_transpose,
    xform_motion,
    xform_motion_add,
)

__all__ = [
    "HybridDynamics",
    "Workspace",
    "model_workspace",
    "HybridResult",
    "SingularPassiveInertiaError",
    "hybrid_dynamics",
    "inverse_dynamics",
    "forward_dynamics",
    "mass_matrix",
    "external_body_wrenches",
]


class SingularPassiveInertiaError(ValueError):
    """D_p(k) = H_p P H_p* is singular: the passive joint moves a subtree without inertia."""


# Status codes of the compiled calls (``run_steps``, ``jacobians.generalized_jacobian_sweeps``);
# a status >= 0 is the index of the body whose D_p(k) is singular.
OK = -1
NONFINITE_Q = -2
NONFINITE_V = -3
NONFINITE_INPUT = -4  # qdd_active or tau_passive
WRONG_LENGTH = -5


# ================================================================ buffer layouts
class Topology(NamedTuple):
    """The integer buffer: sizes, the tree, the hinges and the active/passive split."""

    nb: int
    nq: int
    nv: int
    na: int
    npas: int
    parent: np.ndarray
    hinge_type: np.ndarray
    q_start: np.ndarray
    v_start: np.ndarray
    nv_joint: np.ndarray
    passive: np.ndarray  # per body: 1 if its hinge is passive
    active_dofs: np.ndarray
    passive_dofs: np.ndarray


class Constants(NamedTuple):
    """The model's constants: tree transforms, hinge axes, H*(k), M(k), gravity, tolerance."""

    tree_E: np.ndarray  # noqa: N815  (the paper's E)
    tree_r: np.ndarray
    axis: np.ndarray
    S: np.ndarray  # H*(k): (nb, 6, 6), first nv_joint[k] columns used
    inertia: np.ndarray  # M(k)
    gravity_base: np.ndarray  # [0; -g]
    tol: np.ndarray  # (1,): pivot tolerance of D_p(k)
    armature: np.ndarray  # (nb, 6): per hinge DOF, added to the diagonal of M (first nv_joint)


class Work(NamedTuple):
    """Every quantity of (3.1), (4.6), (5.4); HybridDynamics shows each as an attribute."""

    E_up: np.ndarray  # (E, r) of the parent-to-body transform phi*(k+1, k)
    r_up: np.ndarray
    vel: np.ndarray  # V(k)
    coriolis: np.ndarray  # a(k)
    gyro: np.ndarray  # b(k)
    P: np.ndarray
    U: np.ndarray  # P(k) H*(k) (passive hinges)
    Dinv: np.ndarray  # D_p^-1(k)
    G: np.ndarray  # G_p(k)
    z: np.ndarray
    alpha: np.ndarray
    force: np.ndarray  # f(k) (active hinges)
    f_ext: np.ndarray  # (nb, 6) external wrenches f_ext(k), body axes, about the body origin
    nu: np.ndarray  # nu_p, per DOF
    qdd: np.ndarray
    tau: np.ndarray
    tau_active: np.ndarray
    qdd_passive: np.ndarray
    vel_base: np.ndarray  # V(n+1) = 0
    alpha_base: np.ndarray  # alpha(n+1): [0; -g] or 0
    q_at: np.ndarray  # (nq,): the q that E_up ... G are at (see ``configure``)
    q_valid: np.ndarray  # (1,): 1 while q_at holds the q of E_up ... G


class Scratch(NamedTuple):
    """Per-call temporaries, after the Work blocks in the same buffer."""

    R: np.ndarray  # 3x3
    P_plus: np.ndarray  # 6x6
    XtP: np.ndarray  # 6x6, inside phi P+ phi*
    D: np.ndarray  # 6x6: D_p(k) and its Cholesky factors
    L: np.ndarray
    Li: np.ndarray
    x6: np.ndarray  # 6-vectors
    y6: np.ndarray
    e6: np.ndarray


class Buffers(NamedTuple):
    """The three flat arrays every compiled call of a workspace takes."""

    ints: np.ndarray
    consts: np.ndarray
    work: np.ndarray


@njit(cache=True, inline="always")
def int_layout(ints, nb, nq, nv, na, npas):
    o = 5  # header: nb, nq, nv, na, npas
    parent, o = take(ints, o, (nb,))
    hinge_type, o = take(ints, o, (nb,))
    q_start, o = take(ints, o, (nb,))
    v_start, o = take(ints, o, (nb,))
    nv_joint, o = take(ints, o, (nb,))
    passive, o = take(ints, o, (nb,))
    active_dofs, o = take(ints, o, (na,))
    passive_dofs, o = take(ints, o, (npas,))
    return Topology(nb=nb, nq=nq, nv=nv, na=na, npas=npas, parent=parent,
                    hinge_type=hinge_type, q_start=q_start, v_start=v_start, nv_joint=nv_joint,
                    passive=passive, active_dofs=active_dofs, passive_dofs=passive_dofs), o


@njit(cache=True, inline="always")
def int_views(ints):
    """(Topology, end) of an integer buffer; its header holds the sizes."""
    return int_layout(ints, ints[0], ints[1], ints[2], ints[3], ints[4])


@njit(cache=True, inline="always")
def const_views(consts, nb):
    """(Constants, end)."""
    tree_E, o = take(consts, 0, (nb, 3, 3))
    tree_r, o = take(consts, o, (nb, 3))
    axis, o = take(consts, o, (nb, 3))
    S, o = take(consts, o, (nb, 6, 6))
    inertia, o = take(consts, o, (nb, 6, 6))
    gravity_base, o = take(consts, o, (6,))
    tol, o = take(consts, o, (1,))
    armature, o = take(consts, o, (nb, 6))
    return Constants(tree_E=tree_E, tree_r=tree_r, axis=axis, S=S, inertia=inertia,
                     gravity_base=gravity_base, tol=tol, armature=armature), o


@njit(cache=True, inline="always")
def work_views(work, nb, nq, nv, na, npas):
    """(Work, Scratch, end) of the per-cycle buffer."""
    E_up, o = take(work, 0, (nb, 3, 3))
    r_up, o = take(work, o, (nb, 3))
    vel, o = take(work, o, (nb, 6))
    coriolis, o = take(work, o, (nb, 6))
    gyro, o = take(work, o, (nb, 6))
    P, o = take(work, o, (nb, 6, 6))
    U, o = take(work, o, (nb, 6, 6))
    Dinv, o = take(work, o, (nb, 6, 6))
    G, o = take(work, o, (nb, 6, 6))
    z, o = take(work, o, (nb, 6))
    alpha, o = take(work, o, (nb, 6))
    force, o = take(work, o, (nb, 6))
    f_ext, o = take(work, o, (nb, 6))
    nu, o = take(work, o, (nv,))
    qdd, o = take(work, o, (nv,))
    tau, o = take(work, o, (nv,))
    tau_active, o = take(work, o, (na,))
    qdd_passive, o = take(work, o, (npas,))
    vel_base, o = take(work, o, (6,))
    alpha_base, o = take(work, o, (6,))
    q_at, o = take(work, o, (nq,))
    q_valid, o = take(work, o, (1,))
    R, o = take(work, o, (3, 3))
    P_plus, o = take(work, o, (6, 6))
    XtP, o = take(work, o, (6, 6))
    D, o = take(work, o, (6, 6))
    L, o = take(work, o, (6, 6))
    Li, o = take(work, o, (6, 6))
    x6, o = take(work, o, (6,))
    y6, o = take(work, o, (6,))
    e6, o = take(work, o, (6,))
    return (Work(E_up=E_up, r_up=r_up, vel=vel, coriolis=coriolis, gyro=gyro, P=P, U=U,
                 Dinv=Dinv, G=G, z=z, alpha=alpha, force=force, f_ext=f_ext, nu=nu, qdd=qdd,
                 tau=tau, tau_active=tau_active, qdd_passive=qdd_passive, vel_base=vel_base,
                 alpha_base=alpha_base, q_at=q_at, q_valid=q_valid),
            Scratch(R=R, P_plus=P_plus, XtP=XtP, D=D, L=L, Li=Li, x6=x6, y6=y6, e6=e6), o)


@njit(cache=True)
def buffer_sizes(nb, nq, nv, na, npas):
    """Lengths of the (ints, consts, work) buffers: where each layout ends."""
    no_ints, no_floats = np.empty(0, np.int64), np.empty(0)  # the views are never read
    return (int_layout(no_ints, nb, nq, nv, na, npas)[1], const_views(no_floats, nb)[1],
            work_views(no_floats, nb, nq, nv, na, npas)[2])


# ================================================================ compiled kernels
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def joint_transforms(m, c, q, w, s):
    """Parent-to-body transforms (E_up[i], r_up[i]) = X_J(q_i) X_tree[i] for every body."""
    R = s.R
    for i in range(m.nb):
        qi, Et, rt, E, r = m.q_start[i], c.tree_E[i], c.tree_r[i], w.E_up[i], w.r_up[i]
        if m.hinge_type[i] == PRISMATIC:  # E = Et, r = rt + Et^T axis q
            for a in range(3):
                for b in range(3):
                    E[a, b] = Et[a, b]
                r[a] = rt[a] + (Et[0, a] * c.axis[i, 0] + Et[1, a] * c.axis[i, 1]
                                + Et[2, a] * c.axis[i, 2]) * q[qi]
            continue
        if m.hinge_type[i] == FLOATING:  # position, then quaternion (x, y, z, w)
            quaternion_to_matrix(q[qi + 3:qi + 7], R)
            for a in range(3):
                r[a] = rt[a] + Et[0, a] * q[qi] + Et[1, a] * q[qi + 1] + Et[2, a] * q[qi + 2]
        else:  # revolute: child axes rotated by R(axis, q) in the joint frame
            axis_angle_matrix(c.axis[i], q[qi], R)
            for a in range(3):
                r[a] = rt[a]
        for a in range(3):  # E = R^T Et
            for b in range(3):
                E[a, b] = R[0, a] * Et[0, b] + R[1, a] * Et[1, b] + R[2, a] * Et[2, b]


@njit(cache=True, inline="always")
def dofs(x, m, i):
    """Body i's entries of a per-DOF vector (beta, T, nu): ``x[v_start[i]:][:nv_joint[i]]`` as
    a borrowed view (a slice would normalise its bounds, and count a reference if ``x``
    came from Python)."""
    return block_view(x, m.v_start[i], (m.nv_joint[i],))


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def velocity_sweep(m, c, v, w, s):
    """(3.1) base-to-tip: V(k), and the Coriolis and gyroscopic terms a(k), b(k)."""
    E, r, V, Hb, MV = w.E_up, w.r_up, w.vel, s.x6, s.y6
    for i in range(m.nb):
        p, H = m.parent[i], c.S[i]
        V_up = V[p] if p >= 0 else w.vel_base       # V(k+1); V(n+1) = 0
        hinge_motion(H, dofs(v, m, i), Hb)          # H*(k) β(k)
        xform_motion_add(E[i], r[i], V_up, Hb, V[i])  # V(k) = φ*(k+1,k) V(k+1) + H*(k) β(k)  (3.1)
        cross_motion(V[i], Hb, w.coriolis[i])       # a(k) = V(k) × H*(k) β(k)
        mat_vec(c.inertia[i], V[i], MV)             # M(k) V(k)
        cross_force(V[i], MV, w.gyro[i])            # b(k) = V(k) ×* M(k) V(k)


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def articulated_sweep(m, c, w, s):
    """(4.6) tip-to-base articulated quantities of the passive arm; returns OK or the first
    body whose D_p(k) is singular. (The OCR of (4.6) swaps its two branches; this is the
    published algorithm: an active hinge has tau_bar = I, so P+(k) = P(k).)"""
    E, r, P, U, G, Dinv = w.E_up, w.r_up, w.P, w.U, w.G, w.Dinv
    for i in range(m.nb):                           # P(k) = M(k) + the children's terms below
        for a in range(6):
            for b in range(6):
                P[i, a, b] = c.inertia[i, a, b]
    for i in range(m.nb - 1, -1, -1):
        H, n, P_plus = c.S[i], m.nv_joint[i], P[i]  # active: P+(k) = P(k)
        if m.passive[i]:
            mat_hinge(P[i], H, n, U[i])             # U = P(k) H*(k)
            hinge_mat(H, U[i], n, s.D)              # D_p(k) = H(k) P(k) H*(k)  (4.6)
            for a in range(n):                      # + the armature (0 unless set)
                s.D[a, a] += c.armature[i, a]
            if not spd_inverse(s.D, n, c.tol[0], Dinv[i], s.L, s.Li):
                return i
            mat_small(U[i], Dinv[i], n, G[i])       # G_p(k) = P(k) H*(k) D_p⁻¹(k)  (4.6)
            sub_outer(P[i], G[i], U[i], n, s.P_plus)  # P+(k) = [I - G_p(k) H(k)] P(k)  (4.6)
            P_plus = s.P_plus
        if m.parent[i] >= 0:                        # P(k+1) += φ(k+1,k) P+(k) φ*(k+1,k)  (4.6)
            xform_inertia_transpose(E[i], r[i], P_plus, s.XtP, P[m.parent[i]])
    return OK


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def residual_force_sweep(m, c, w, s, external):
    """(5.4a) tip-to-base residual forces z(k); eps_p(k) and nu_p(k) of the passive hinges.
    ``external``: the external wrenches ``w.f_ext`` act on the bodies (doc/theory/
    external_wrenches.md, (E.2)); False: none (not read)."""
    E, r, P, a, z, y, zp = w.E_up, w.r_up, w.P, w.coriolis, w.z, s.x6, s.y6
    for i in range(m.nb):                           # z(k) = b(k) + the terms below
        for a6 in range(6):
            z[i, a6] = w.gyro[i, a6]
    if external:
        for i in range(m.nb):                       # z(k) = b(k) - f_ext(k) + ...  (E.2)
            for a6 in range(6):
                z[i, a6] -= w.f_ext[i, a6]
    for i in range(m.nb - 1, -1, -1):
        H, z_plus = c.S[i], z[i]                    # active: z+(k) = z(k)
        if m.passive[i]:
            T, nu, eps = dofs(w.tau, m, i), dofs(w.nu, m, i), block_view(s.e6, 0, (m.nv_joint[i],))
            mat_vec_add(P[i], a[i], z[i], z[i])     # z(k) += P(k) a(k)  (5.4a)
            hinge_force_sub(T, H, z[i], eps)        # ε_p(k) = T_p(k) - H(k) z(k)  (5.4a)
            hinge_motion_add(w.G[i], eps, z[i], zp)  # z+(k) = z(k) + G_p(k) ε_p(k)  (5.4a)
            small_mat_vec(w.Dinv[i], eps, nu)       # ν_p(k) = D_p⁻¹(k) ε_p(k)  (5.4a)
            z_plus = zp
        else:
            hinge_motion_add(H, dofs(w.qdd, m, i), a[i], y)  # H*(k) β̇_a(k) + a(k)
            mat_vec_add(P[i], y, z[i], z[i])        # z(k) += P(k) [H*(k) β̇_a(k) + a(k)]  (5.4a)
        if m.parent[i] >= 0:                        # z(k+1) += φ(k+1,k) z+(k)  (5.4a)
            xform_force_transpose(E[i], r[i], z_plus, z[m.parent[i]])


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def outward_sweep(m, c, w, s):
    """(5.4b) base-to-tip: alpha(k); T_a(k) of the active hinges, qdd_p(k) of the passive."""
    E, r, alpha, f, ap = w.E_up, w.r_up, w.alpha, w.force, s.x6
    for i in range(m.nb):
        p, H, qdd, tau = m.parent[i], c.S[i], dofs(w.qdd, m, i), dofs(w.tau, m, i)
        alpha_up = alpha[p] if p >= 0 else w.alpha_base  # α(k+1); α(n+1) = [0; -g] or 0
        xform_motion(E[i], r[i], alpha_up, ap)      # α⁺(k) = φ*(k+1,k) α(k+1)  (5.4b)
        if m.passive[i]:
            nu = dofs(w.nu, m, i)
            hinge_force_sub(nu, w.G[i], ap, qdd)    # β̇_p(k) = ν_p(k) - G_p*(k) α⁺(k)  (5.4b)
            f[i, :] = 0.0
        else:
            mat_vec_add(w.P[i], ap, w.z[i], f[i])   # f(k) = P(k) α⁺(k) + z(k)  (5.4b)
            hinge_force(H, f[i], tau)               # T_a(k) = H(k) f(k)  (5.4b)
            for a in range(m.nv_joint[i]):          # + the armature's A(k) β̇_a(k)
                tau[a] += c.armature[i, a] * qdd[a]
        add(ap, w.coriolis[i], alpha[i])
        hinge_motion_add(H, qdd, alpha[i], alpha[i])  # α(k) = α⁺(k) + a(k) + H*(k) β̇(k)  (5.4b)


# ================================================================ compiled steps
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def all_finite(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def configure(m, c, q, w, s):
    """Steps 0 and 2, the transforms and (4.6), at q (length nq), unless the workspace is at
    this q already: they depend on q only, so every kernel that shares this workspace in a
    cycle (dynamics, Jacobians, operational space) reuses them. Returns OK, NONFINITE_Q or
    the body whose D_p(k) is singular. A kernel that writes E_up ... G otherwise clears
    ``w.q_valid``."""
    if w.q_valid[0] == 1.0:
        same = True
        for i in range(m.nq):
            if q[i] != w.q_at[i]:
                same = False
                break
        if same:
            return OK
    w.q_valid[0] = 0.0
    if not all_finite(q):
        return NONFINITE_Q
    joint_transforms(m, c, q, w, s)
    status = articulated_sweep(m, c, w, s)
    if status == OK:
        for i in range(m.nq):
            w.q_at[i] = q[i]
        w.q_valid[0] = 1.0
    return status


# run_steps flags
CONFIGURATION = 1  # transforms + (4.6)
VELOCITY = 2  # (3.1)
ZERO_VELOCITY = 4  # V = a = b = 0 (Jacobians, mass matrices)
SOLVE = 8  # (5.4a) + (5.4b)
GRAVITY = 16  # with SOLVE: base acceleration [0; -g]
EXTERNAL = 32  # with SOLVE: the external wrenches in ``Work.f_ext`` act (E.2)
ALL_STEPS = CONFIGURATION | VELOCITY | SOLVE | GRAVITY

# One fixed signature (compiled or loaded from the cache by ``compile_run_steps``, when the
# first workspace is built, not at import): any other argument type then raises TypeError at
# dispatch, which costs nothing on the fast path and sends the caller to its converting path,
# instead of silently compiling a new specialization.
_VECTOR = types.float64[::1]
RUN_STEPS_SIGNATURE = types.int64(types.int64[::1], _VECTOR, _VECTOR, _VECTOR, _VECTOR, _VECTOR,
                                  _VECTOR, types.int64)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def run_steps(ints, consts, work, q, v, qdd_active, tau_passive, flags):
    """The section-5 algorithm, any subset of its steps, in one compiled call; returns a status
    code (OK, NONFINITE_Q, NONFINITE_V, NONFINITE_INPUT, WRONG_LENGTH) or the index of a body
    whose D_p(k) is singular."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    q, v = borrow(q), borrow(v)  # their slices count no references
    if ((flags & CONFIGURATION and q.shape[0] != m.nq)
            or (flags & VELOCITY and not flags & ZERO_VELOCITY and v.shape[0] != m.nv)
            or (flags & SOLVE and (qdd_active.shape[0] != m.na
                                   or tau_passive.shape[0] != m.npas))):
        return WRONG_LENGTH
    if flags & CONFIGURATION:  # steps 0 and 2: transforms and (4.6), functions of q only
        status = configure(m, c, q, w, s)
        if status != OK:
            return status
    if flags & ZERO_VELOCITY:  # step 1 with V = 0: a = b = 0
        w.vel[:] = 0.0
        w.coriolis[:] = 0.0
        w.gyro[:] = 0.0
    elif flags & VELOCITY:  # step 1: (3.1)
        if not all_finite(v):
            return NONFINITE_V
        velocity_sweep(m, c, v, w, s)
    if flags & SOLVE:  # step 3: (5.4a), then (5.4b)
        if not (all_finite(qdd_active) and all_finite(tau_passive)):
            return NONFINITE_INPUT
        for k in range(m.na):
            w.qdd[m.active_dofs[k]] = qdd_active[k]
        for k in range(m.npas):
            w.tau[m.passive_dofs[k]] = tau_passive[k]
        gravity = (flags & GRAVITY) != 0
        for a in range(6):
            w.alpha_base[a] = c.gravity_base[a] if gravity else 0.0
        residual_force_sweep(m, c, w, s, (flags & EXTERNAL) != 0)
        outward_sweep(m, c, w, s)
        for k in range(m.na):
            w.tau_active[k] = w.tau[m.active_dofs[k]]
        for k in range(m.npas):
            w.qdd_passive[k] = w.qdd[m.passive_dofs[k]]
    return OK


_run_steps_deferred = False  # True while a worker process compiles run_steps (``warmup``)


def defer_run_steps(defer: bool) -> None:
    """While True, ``compile_run_steps`` does nothing (a fresh cache's warm-up compiles
    ``run_steps`` in a worker process meanwhile)."""
    global _run_steps_deferred
    _run_steps_deferred = defer


def compile_run_steps() -> None:
    """Compile ``run_steps``' one signature (or load it from the cache), then refuse any other
    argument type; a no-op once done or while deferred."""
    if run_steps._can_compile and not _run_steps_deferred:
        run_steps.compile(RUN_STEPS_SIGNATURE)
        run_steps.disable_compile()


def _kernel_vector(x) -> bool:
    """``x`` is what ``run_steps``'s fixed signature takes as a vector: a writeable
    C-contiguous float64 ndarray of one dimension (else the call would raise, slowly)."""
    if x.__class__ is not np.ndarray or x.ndim != 1:
        return False
    dtype = x.dtype
    if dtype is not _FLOAT64 and dtype != _FLOAT64:  # ``is``: the common case, fast
        return False
    flags = x.flags  # one flags object (each access builds one)
    return flags.c_contiguous and flags.writeable


# ================================================================ workspace
@dataclass(slots=True)
class HybridResult:
    """Output of the hybrid recursion (arrays in DOF order of the active/passive subsets)."""

    tau_active: np.ndarray
    qdd_passive: np.ndarray
    qdd: np.ndarray  # all DOF
    tau: np.ndarray  # all DOF (passive entries = the given tau_passive)
    alpha: np.ndarray  # (nb, 6) body spatial accelerations, body axes, [angular; linear]


class HybridDynamics:
    """Allocation-free workspace for one model and one passive set (the control-loop path).

    ``compute(q, v, qdd_active, tau_passive)`` runs the three steps of section 5 in one compiled
    call and writes into the preallocated ``self.result`` (overwritten by the next call: copy
    what you keep). The steps are also callable one by one (``set_configuration``,
    ``set_velocity``, ``solve``) so that Jacobians and the mass matrix reuse (4.6).
    Named views of every quantity of ``Work`` (``P``, ``G``, ``Dinv``, ``z``, ``alpha``, ...)
    are attributes, sharing memory with the compiled code; ``buffers`` are the flat arrays that
    compiled calls take (``run_steps(*ws.buffers, ...)``).

    ``armature`` (per DOF, [kg·m²] or [kg], default none) is added to the diagonal of the
    joint-space inertia, M → M + diag(A), as a rotor's reflected inertia is: D_p(k) += A(k) in
    (4.6), T_a(k) += A(k) β̇_a(k) in (5.4b). ``optimal_control.HybridStep`` sets A = Δt d on
    damped passive joints, which makes its step's damping implicit.
    """

    def __init__(self, model: RobotModel, passive_mask: np.ndarray | None = None,
                 armature: np.ndarray | None = None) -> None:
        compile_run_steps()
        self.model = model
        nb = model.nb
        mask = model.passive_joint_mask if passive_mask is None else np.asarray(passive_mask, bool)
        if mask.shape != (nb,):
            raise ValueError(f"passive_mask must have shape ({nb},)")
        self.passive = np.ascontiguousarray(mask)
        dof_passive = np.repeat(mask, model.nv_joint)
        self.active_dofs = np.flatnonzero(~dof_passive)
        self.passive_dofs = np.flatnonzero(dof_passive)
        self.singular_tolerance = 1e-12 * model.inertia_scale
        sizes = (nb, model.nq, model.nv, len(self.active_dofs), len(self.passive_dofs))
        n_ints, n_consts, n_work = buffer_sizes(*sizes)
        self.buffers = Buffers(np.zeros(n_ints, np.int64), np.zeros(n_consts), np.zeros(n_work))
        ints, consts, work = self.buffers
        ints[:5] = sizes
        t = numpy_views(int_views(ints)[0], ints)
        for name in ("parent", "hinge_type", "q_start", "v_start", "nv_joint"):
            getattr(t, name)[:] = getattr(model, name)
        t.passive[:] = mask
        t.active_dofs[:], t.passive_dofs[:] = self.active_dofs, self.passive_dofs
        c = numpy_views(const_views(consts, nb)[0], consts)
        c.tree_E[:], c.tree_r[:] = model.tree_rotation, model.tree_translation
        c.axis[:], c.S[:], c.inertia[:] = model.axis, model.motion_subspace, model.inertia
        c.gravity_base[3:], c.tol[0] = -model.gravity, self.singular_tolerance
        self.armature = np.zeros(model.nv)
        if armature is not None:
            a = np.asarray(armature, float)
            if a.shape != (model.nv,) or not np.all(np.isfinite(a) & (a >= 0.0)):
                raise ValueError(f"armature must be {model.nv} finite values >= 0 (one per "
                                 f"DOF, kg·m² or kg), got {np.array2string(a, precision=3)}")
            self.armature[:] = a
        for k in range(nb):
            start, n = model.v_start[k], model.nv_joint[k]
            c.armature[k, :n] = self.armature[start:start + n]
        self.work = numpy_views(work_views(work, *sizes)[0], work)
        for name, view in zip(Work._fields, self.work):
            setattr(self, name, view)
        self.alpha_base[:] = c.gravity_base
        self._empty = np.zeros(0)
        self.result = HybridResult(tau_active=self.tau_active, qdd_passive=self.qdd_passive,
                                   qdd=self.qdd, tau=self.tau, alpha=self.alpha)

    # -- steps 0 + 2: configuration-dependent quantities (transforms, (4.6)) -----------------
    def set_configuration(self, q: np.ndarray) -> None:
        q = self.as_vector(q, self.model.nq, "q")
        status = run_steps(*self.buffers, q, self._empty, self._empty, self._empty,
                           CONFIGURATION)
        if status != OK:
            self.raise_for_status(status, q=q)

    # -- step 1: velocity-dependent quantities (3.1) ----------------------------------------
    def set_velocity(self, v: np.ndarray | None) -> None:
        e = self._empty
        if v is None:
            run_steps(*self.buffers, e, e, e, e, ZERO_VELOCITY)
            return
        v = self.as_vector(v, self.model.nv, "v")
        if run_steps(*self.buffers, e, v, e, e, VELOCITY) != OK:
            self.model.check_state(v=v)

    # -- external wrenches: into the per-body buffer ``self.f_ext`` (E.1) ----------------------
    def load_external(self, f_ext: Mapping[str, np.ndarray] | None) -> int:
        """Write ``f_ext`` (link name -> [force; torque] in the link's frame about its origin)
        into ``self.f_ext`` as body wrenches (E.1); returns the run_steps flag that makes them
        act (``EXTERNAL``), or 0 for None or an empty mapping."""
        if f_ext is None:
            return 0
        if not isinstance(f_ext, Mapping):
            raise ValueError("f_ext must be a mapping link name -> 6-vector [force; torque], "
                             f"got {type(f_ext).__name__}")
        if not f_ext:
            return 0
        external_body_wrenches(self.model, f_ext, self.f_ext)
        return EXTERNAL

    def external_joint_forces(self, f_ext: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """Σ J_linkᵀ f_link (nv,), the joint forces of the external wrenches ``f_ext`` at the
        configured q (E.3): what they add to the generalised forces. Zero for None."""
        tau = np.zeros(self.model.nv)
        if self.load_external(f_ext):
            external_joint_force_kernel(*self.buffers, np.zeros((self.model.nb, 6)), tau)
        return tau

    # -- step 3: (5.4a) + (5.4b) --------------------------------------------------------------
    def solve(self, qdd_active: np.ndarray, tau_passive: np.ndarray, gravity: bool = True,
              f_ext: Mapping[str, np.ndarray] | None = None) -> HybridResult:
        """(5.4a), (5.4b) at the configured q and velocity; ``f_ext`` as in ``compute``."""
        flags = SOLVE | GRAVITY if gravity else SOLVE
        if f_ext is not None:
            flags |= self.load_external(f_ext)
        if not (_kernel_vector(qdd_active) and _kernel_vector(tau_passive)):  # convert
            qdd_active = self.as_vector(qdd_active, len(self.active_dofs), "qdd_active")
            tau_passive = self.as_vector(tau_passive, len(self.passive_dofs), "tau_passive")
        status = run_steps(*self.buffers, self._empty, self._empty, qdd_active, tau_passive,
                           flags)
        if status != OK:  # a wrong length (checked in the call) or a non-finite entry, named
            self._check_inputs(
                self.as_vector(qdd_active, len(self.active_dofs), "qdd_active"),
                self.as_vector(tau_passive, len(self.passive_dofs), "tau_passive"))
        return self.result

    def compute(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                tau_passive: np.ndarray, f_ext: Mapping[str, np.ndarray] | None = None
                ) -> HybridResult:
        """The whole hybrid recursion in one compiled call; results in ``self.result``.

        ``f_ext``: external wrenches, link name -> [force; torque] (ROS order) in that link's
        frame about its origin, acting on the robot (E.1, E.2); None: none."""
        ints, consts, work = self.buffers
        flags = ALL_STEPS if f_ext is None else ALL_STEPS | self.load_external(f_ext)
        try:
            status = run_steps(ints, consts, work, q, v, qdd_active, tau_passive, flags)
        except TypeError:  # not writeable C-contiguous float64 vectors: convert, then retry
            return self._compute_converted(q, v, qdd_active, tau_passive, f_ext)
        if status != OK:
            self.raise_for_status(status, q=q, v=v, qa=qdd_active, tp=tau_passive)
        return self.result

    def _compute_converted(self, q, v, qdd_active, tau_passive, f_ext=None) -> HybridResult:
        m = self.model
        return self.compute(self.as_vector(q, m.nq, "q"), self.as_vector(v, m.nv, "v"),
                            self.as_vector(qdd_active, len(self.active_dofs), "qdd_active"),
                            self.as_vector(tau_passive, len(self.passive_dofs), "tau_passive"),
                            f_ext)

    # -- input checks (only on the error path) ------------------------------------------------
    def as_vector(self, x, n: int, name: str) -> np.ndarray:
        """``x`` as a writeable C-contiguous float64 vector of length n (what the compiled calls
        take); ValueError naming ``name`` (and its joints) if its shape is not (n,)."""
        if not _kernel_vector(x):
            x = np.array(x, dtype=np.float64, order="C")
        if x.shape != (n,):
            if name in ("qdd_active", "tau_passive"):
                idx = self.active_dofs if name == "qdd_active" else self.passive_dofs
                raise ValueError(f"{name} must have shape ({n},) (joints "
                                 f"{[self.model.dof_names[i] for i in idx]}), got {x.shape}")
            raise ValueError(f"{name} must have shape ({n},), got {x.shape}")
        return x

    def raise_for_status(self, status: int, q=None, v=None, qa=None, tp=None) -> None:
        """Raise the error that a status code other than OK of a compiled call stands for,
        naming the offending input, joint or entry."""
        m = self.model
        if status == WRONG_LENGTH:  # the named check raises
            self.as_vector(q, m.nq, "q")
            self.as_vector(v, m.nv, "v")
            self.as_vector(qa, len(self.active_dofs), "qdd_active")
            self.as_vector(tp, len(self.passive_dofs), "tau_passive")
        if status == NONFINITE_Q:
            m.check_state(q=q)
        elif status == NONFINITE_V:
            m.check_state(v=v)
        elif status == NONFINITE_INPUT:
            self._check_inputs(qa, tp)
        elif status >= 0:
            raise SingularPassiveInertiaError(
                f"passive joint '{m.joint_names[status]}' moves a subtree with (near) zero "
                "inertia about its axis: D_p(k) is singular, its acceleration is undetermined")
        raise AssertionError(f"unexpected status {status}")  # pragma: no cover

    def _check_inputs(self, qdd_active: np.ndarray, tau_passive: np.ndarray) -> None:
        m = self.model
        for name, arr, idx in (("qdd_active", qdd_active, self.active_dofs),
                               ("tau_passive", tau_passive, self.passive_dofs)):
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                raise ValueError(f"{name} has non-finite entries: " + ", ".join(
                    f"{m.dof_names[idx[b]]}={arr[b]}" for b in bad[:6]))


# ================================================================ external wrenches
def external_body_wrenches(model: RobotModel, f_ext: Mapping[str, np.ndarray],
                           out: np.ndarray) -> np.ndarray:
    """``out`` (nb, 6) := the body wrenches [torque; force] (body axes, about the body origin)
    of ``f_ext``: link name -> [force; torque] in the link's frame about its origin (E.1).
    Wrenches on links fixed to the root act on the fixed world and drop out. One-line
    ValueError naming the link for an unknown name, a wrong shape or a non-finite entry."""
    out[:] = 0.0
    frames = model.frames  # link name -> (body, E, r): the model's immutable map
    for name, wrench in f_ext.items():
        frame = frames.get(name)
        if frame is None:
            raise ValueError(f"f_ext: unknown link '{name}': known links are "
                             f"{sorted(frames)}")
        x = np.asarray(wrench, dtype=float)
        if x.shape != (6,):
            raise ValueError(f"f_ext['{name}'] must be a 6-vector [force; torque], got shape "
                             f"{x.shape}")
        if not np.isfinite(x).all():
            raise ValueError(f"f_ext['{name}'] has non-finite entries: {x.tolist()}")
        if frame.body < 0:
            continue
        E, r = frame.rotation, frame.translation
        f = E.T @ x[:3]                            # force in body axes
        n = E.T @ x[3:]                            # torque about the link origin, body axes
        body = out[frame.body]                     # (E.1): [n + r × f; f]
        body[0] += n[0] + r[1] * f[2] - r[2] * f[1]
        body[1] += n[1] + r[2] * f[0] - r[0] * f[2]
        body[2] += n[2] + r[0] * f[1] - r[1] * f[0]
        body[3:] += f
    return out


@njit(cache=True, error_model="numpy", fastmath=FAST)
def external_joint_force_kernel(ints, consts, work, z, tau):
    """tau = Σ_k J_k^T f_ext(k) (E.3): the joint forces of the body wrenches ``Work.f_ext`` by
    one tip-to-base pass, z(k) = f_ext(k) + Σ φ(k+1,k) z(children), T(k) = H(k) z(k), at the
    transforms of the configured q. ``z`` (nb, 6) is scratch."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    for i in range(m.nb):
        for a in range(6):
            z[i, a] = w.f_ext[i, a]
    for i in range(m.nb - 1, -1, -1):
        hinge_force(c.S[i], z[i], dofs(tau, m, i))
        if m.parent[i] >= 0:
            xform_force_transpose(w.E_up[i], w.r_up[i], z[i], z[m.parent[i]])


# ================================================================ one workspace per model
class Workspace:
    """Everything one model needs for a cycle, in one place (Pinocchio's Data to the model's
    Model): one ``HybridDynamics`` per passive set, built on first use, and the front ends
    built on them (``JacobianWorkspace``, ``OperationalSpace``: ``part``). Whatever shares a
    ``Workspace`` shares its per-mask buffers, so the transforms and (4.6) for a q are computed
    once per mask and reused (``configure`` skips them when the buffer is at that q already).

    Not thread-safe (like any workspace): give each thread its own.
    """

    _STANDARD = ("model", "active", "passive")
    _MAX_OTHER_MASKS = 8  # e.g. macro/mini splits; the oldest dropped first

    def __init__(self, model: RobotModel) -> None:
        self.model = model
        self._masks = {"model": model.passive_joint_mask, "active": np.zeros(model.nb, bool),
                       "passive": np.ones(model.nb, bool)}
        self._hybrid: dict[bytes, HybridDynamics] = {}
        self._named: dict[str, HybridDynamics] = {}  # the fast path of "model", ...
        self._other: list[bytes] = []
        self._parts: dict[type, object] = {}

    def mask(self, passive: str | np.ndarray = "model") -> np.ndarray:
        """The per-body passive mask of ``passive``: the model's passive set (``"model"``),
        every joint active (``"active"``), every joint passive (``"passive"``) or a mask."""
        nb = self.model.nb
        if isinstance(passive, str):
            if passive not in self._masks:
                raise ValueError(f"passive must be one of {self._STANDARD} or a mask, "
                                 f"got {passive!r}")
            return self._masks[passive]
        mask = np.array(passive, dtype=bool)  # a copy: the caller may reuse its array
        if mask.shape != (nb,):
            raise ValueError(f"passive_mask must have shape ({nb},)")
        return mask

    def hybrid(self, passive: str | np.ndarray = "model") -> HybridDynamics:
        """The ``HybridDynamics`` of this model with the passive set ``passive`` (see
        ``mask``); one per distinct mask (with no passive joint, ``"model"`` is ``"active"``)."""
        if passive is self.model.passive_joint_mask:
            passive = "model"
        if passive.__class__ is str:
            ws = self._named.get(passive)
            if ws is not None:
                return ws
        mask = self.mask(passive)
        key = mask.tobytes()
        ws = self._hybrid.get(key)
        if ws is None:
            standard = any(np.array_equal(mask, self.mask(k)) for k in self._STANDARD)
            if not standard:
                if len(self._other) >= self._MAX_OTHER_MASKS:
                    self._hybrid.pop(self._other.pop(0), None)
                self._other.append(key)
            ws = HybridDynamics(self.model, mask)
            self._hybrid[key] = ws
        if passive.__class__ is str:
            self._named[passive] = ws
        return ws

    def part(self, kind: type):
        """The ``kind(model, shared=self)`` built on this workspace (one per kind), e.g. the
        ``JacobianWorkspace`` or ``OperationalSpace`` of the free functions."""
        obj = self._parts.get(kind)
        if obj is None:
            obj = self._parts[kind] = kind(self.model, shared=self)
        return obj


# The free functions of this package (here, ``jacobians``, ``operational_space``) use one
# Workspace per model, held here and not in the model (a RobotModel is pure data). A workspace
# refers to its model, so the entries of a WeakKeyDictionary would never die; instead at most
# _CACHED_MODELS models are kept, the oldest dropped first. Not thread-safe for one model:
# give each thread its own ``workspace=``.
_CACHED_MODELS = 16
_workspaces: dict[RobotModel, Workspace] = {}


def model_workspace(model: RobotModel) -> Workspace:
    """The ``Workspace`` the free functions use for ``model`` (the one cache of them)."""
    ws = _workspaces.get(model)
    if ws is None:
        while len(_workspaces) >= _CACHED_MODELS:
            _workspaces.pop(next(iter(_workspaces)), None)
        ws = _workspaces[model] = Workspace(model)
    return ws


def shared_workspace(model: RobotModel, kind: str = "model") -> HybridDynamics:
    """The HybridDynamics that the free functions use for ``model``: its own passive set
    (``"model"``), every joint active (``"active"``) or every joint passive (``"passive"``)."""
    ws = _workspaces.get(model)
    if ws is not None:  # the per-call path of the free functions: two lookups
        hd = ws._named.get(kind)
        if hd is not None:
            return hd
    return model_workspace(model).hybrid(kind)


def _checked(ws: HybridDynamics, model: RobotModel, kind: str) -> HybridDynamics:
    """``ws`` if it is a workspace of ``model``'s robot with the passive set ``kind`` needs."""
    if ws.model is not model and ws.model.inertia is not model.inertia:
        raise ValueError("workspace was built for another robot")
    if kind == "active" and ws.passive_dofs.size:
        raise ValueError("workspace must have every joint active")
    if kind == "passive" and ws.active_dofs.size:
        raise ValueError("workspace must have every joint passive")
    if kind == "model" and ws.passive is not model.passive_joint_mask \
            and not np.array_equal(ws.passive, model.passive_joint_mask):
        raise ValueError("workspace has another passive set than the model")
    return ws


# ================================================================ public functions
def hybrid_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                    tau_passive: np.ndarray, workspace: HybridDynamics | None = None,
                    f_ext: Mapping[str, np.ndarray] | None = None) -> HybridResult:
    """T_a and qdd_p from qdd_a and T_p (section 5); results are fresh copies.

    ``workspace``: a ``HybridDynamics(model)`` to use (default: one shared per model).
    ``f_ext``: external wrenches, link name -> [force; torque] in the link's frame about its
    origin (ROS order), acting on the robot (doc/theory/external_wrenches.md)."""
    ws = shared_workspace(model) if workspace is None else _checked(workspace, model, "model")
    res = ws.compute(q, v, qdd_active, tau_passive, f_ext)
    return HybridResult(res.tau_active.copy(), res.qdd_passive.copy(), res.qdd.copy(),
                        res.tau.copy(), res.alpha.copy())


def inverse_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, qdd: np.ndarray,
                     workspace: HybridDynamics | None = None,
                     f_ext: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """tau = M(q) qdd + C(q, v) + gravity - J^T f_ext: the hybrid recursion with every joint
    active.

    ``workspace``: an all-active ``HybridDynamics`` of the robot (default: a shared one).
    ``f_ext`` as for ``hybrid_dynamics``."""
    ws = (shared_workspace(model, "active") if workspace is None
          else _checked(workspace, model, "active"))
    return ws.compute(q, v, qdd, ws._empty, f_ext).tau.copy()


def forward_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                     workspace: HybridDynamics | None = None,
                     f_ext: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """qdd = M^-1 (tau + J^T f_ext - C - gravity): the hybrid recursion with every joint
    passive (ABA).

    ``workspace``: an all-passive ``HybridDynamics`` of the robot (default: a shared one).
    ``f_ext`` as for ``hybrid_dynamics``."""
    ws = (shared_workspace(model, "passive") if workspace is None
          else _checked(workspace, model, "passive"))
    return ws.compute(q, v, ws._empty, tau, f_ext).qdd.copy()


def mass_matrix(model: RobotModel, q: np.ndarray, workspace: HybridDynamics | None = None
                ) -> np.ndarray:
    """M(q) column by column: all joints active, zero velocity and gravity, unit accelerations.

    (4.6) is run once (all active: P(k) are the composite-body inertias); each column is one
    pass of (5.4a)/(5.4b) with qdd = e_j. Returned as computed (symmetric to rounding, which
    the tests check), not symmetrised. ``workspace`` as for ``inverse_dynamics``.
    """
    ws = (shared_workspace(model, "active") if workspace is None
          else _checked(workspace, model, "active"))
    ws.set_configuration(q)
    ws.set_velocity(None)
    nv = model.nv
    M = np.empty((nv, nv))
    unit = np.zeros(nv)
    for j in range(nv):
        unit[j] = 1.0
        M[:, j] = ws.solve(unit, ws._empty, gravity=False).tau
        unit[j] = 0.0
    return M
