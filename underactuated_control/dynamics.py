"""Hybrid dynamics of under-actuated manipulators (Jain & Rodriguez, sections 3-5).

Given the active joints' accelerations and the passive joints' forces, the O(N) recursion returns
the active joints' forces T_a, the passive joints' accelerations qdd_p and every link's spatial
acceleration alpha. Its three steps, each one compiled kernel below:

1. ``velocity_sweep``      (3.1)  base-to-tip: V(k), Coriolis a(k), gyroscopic b(k)
2. ``articulated_sweep``   (4.6)  tip-to-base: P(k), D_p(k), G_p(k), P+(k) (depends on q only)
3. ``residual_force_sweep`` (5.4a) tip-to-base: z(k), eps_p(k), nu_p(k)
   ``outward_sweep``        (5.4b) base-to-tip: alpha(k), T_a(k), qdd_p(k)

With every joint passive it is the articulated-body forward dynamics (ABA); with every joint
active it is composite-body inverse dynamics; ``forward_dynamics``, ``inverse_dynamics`` and
``mass_matrix`` below are exactly those special cases of the same kernels.

Indexing: bodies base-to-tip (``parent[i] < i``), so the paper's tip-to-base "for k = 1..n" is
``for i in reversed(range(nb))``. Spatial vectors are [angular; linear] (see ``spatial.py``);
gravity enters as the base acceleration alpha(n+1) = [0; -g].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, types

from .model import FLOATING, PRISMATIC, RobotModel
from .spatial import (
    FAST,
    axis_angle_matrix,
    block_view,
    cross_force,
    cross_motion,
    quaternion_to_matrix,
    xform_force_transpose,
    xform_inertia_transpose,
    xform_motion,
)

__all__ = [
    "HybridDynamics",
    "HybridResult",
    "SingularPassiveInertiaError",
    "hybrid_dynamics",
    "inverse_dynamics",
    "forward_dynamics",
    "mass_matrix",
]


class SingularPassiveInertiaError(ValueError):
    """D_p(k) = H_p P H_p* is singular: the passive joint moves a subtree without inertia."""


# ================================================================ compiled kernels
@njit(cache=True, error_model="numpy", fastmath=FAST)
def joint_transforms(hinge_type, axis, tree_E, tree_r, q_start, q, E_up, r_up, R_tmp):
    """Parent-to-body transforms (E_up[i], r_up[i]) = X_J(q_i) X_tree[i] for every body."""
    nb = hinge_type.shape[0]
    for i in range(nb):
        qi = q_start[i]
        Et = tree_E[i]
        rt = tree_r[i]
        if hinge_type[i] == PRISMATIC:
            for a in range(3):
                for b in range(3):
                    E_up[i, a, b] = Et[a, b]
                d = q[qi]
                r_up[i, a] = (
                    rt[a]
                    + (Et[0, a] * axis[i, 0] + Et[1, a] * axis[i, 1] + Et[2, a] * axis[i, 2]) * d
                )
            continue
        if hinge_type[i] == FLOATING:
            quaternion_to_matrix(q[qi + 3 : qi + 7], R_tmp)
            for a in range(3):
                r_up[i, a] = rt[a] + (
                    Et[0, a] * q[qi] + Et[1, a] * q[qi + 1] + Et[2, a] * q[qi + 2]
                )
        else:  # revolute: child axes rotated by R(axis, q) in the joint frame
            axis_angle_matrix(axis[i], q[qi], R_tmp)
            for a in range(3):
                r_up[i, a] = rt[a]
        # E_up = R^T Et
        for a in range(3):
            for b in range(3):
                E_up[i, a, b] = (
                    R_tmp[0, a] * Et[0, b] + R_tmp[1, a] * Et[1, b] + R_tmp[2, a] * Et[2, b]
                )


@njit(cache=True, error_model="numpy", fastmath=FAST)
def velocity_sweep(parent, S, nv_joint, v_start, inertia, E_up, r_up, v, vel, coriolis, gyro, tmp):
    """(3.1) base-to-tip: V(k) = phi*(k+1,k) V(k+1) + H*(k) beta(k); a(k) = V(k) x H*(k) beta(k);
    b(k) = V(k) x* M(k) V(k)."""
    nb = parent.shape[0]
    for i in range(nb):
        p = parent[i]
        if p >= 0:
            xform_motion(E_up[i], r_up[i], vel[p], vel[i])
        else:
            for a in range(6):
                vel[i, a] = 0.0
        # relative hinge velocity H*(k) beta(k) -> tmp
        for a in range(6):
            tmp[a] = 0.0
        j0 = v_start[i]
        for c in range(nv_joint[i]):
            vc = v[j0 + c]
            for a in range(6):
                tmp[a] += S[i, a, c] * vc
        for a in range(6):
            vel[i, a] += tmp[a]
        cross_motion(vel[i], tmp, coriolis[i])
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += inertia[i, a, b] * vel[i, b]
            tmp[a] = s
        cross_force(vel[i], tmp, gyro[i])


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _spd_inverse(D, n, tol, out, L, Li):
    """Inverse of the n x n symmetric positive definite D (Cholesky); False if a pivot <= tol.
    ``L`` and ``Li`` are 6x6 scratch arrays."""
    for j in range(n):
        s = D[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not (s > tol):
            return False
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, n):
            s = D[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    # inverse of L (lower triangular), then out = L^-T L^-1
    for j in range(n):
        Li[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * Li[k, j]
            Li[i, j] = s / L[i, i]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for k in range(max(i, j), n):
                s += Li[k, i] * Li[k, j]
            out[i, j] = s
    return True


@njit(cache=True, error_model="numpy", fastmath=FAST)
def articulated_sweep(
    parent, S, nv_joint, passive, inertia, E_up, r_up, tol, P, U, Dinv, G, P_plus, tmp66, D, L,
    Li
):
    """(4.6) tip-to-base articulated quantities of the passive arm.

    P(k) = phi(k,k-1) P+(k-1) phi*(k,k-1) + M(k); for a passive hinge D_p = H P H*,
    G_p = P H* D_p^-1, P+ = (I - G_p H) P; for an active hinge P+ = P (tau_bar = I).
    (The OCR of (4.6) swaps the two branches; this is the published algorithm.)
    Returns -1, or the index of the first body whose D_p(k) is singular.
    """
    nb = parent.shape[0]
    for i in range(nb):
        for a in range(6):
            for b in range(6):
                P[i, a, b] = inertia[i, a, b]
    for i in range(nb - 1, -1, -1):
        r = nv_joint[i]
        if passive[i]:
            # U = P H*, D = H P H*
            for a in range(6):
                for c in range(r):
                    s = 0.0
                    for b in range(6):
                        s += P[i, a, b] * S[i, b, c]
                    U[i, a, c] = s
            for c in range(r):
                for d in range(r):
                    s = 0.0
                    for a in range(6):
                        s += S[i, a, c] * U[i, a, d]
                    D[c, d] = s
            if not _spd_inverse(D, r, tol, Dinv[i], L, Li):
                return i
            # G = U D^-1 ; P+ = P - G U^T
            for a in range(6):
                for c in range(r):
                    s = 0.0
                    for d in range(r):
                        s += U[i, a, d] * Dinv[i, d, c]
                    G[i, a, c] = s
            for a in range(6):
                for b in range(6):
                    s = P[i, a, b]
                    for c in range(r):
                        s -= G[i, a, c] * U[i, b, c]
                    P_plus[a, b] = s
        p = parent[i]
        if p >= 0:  # P+(k) = tau_bar P(k): P itself for an active hinge
            xform_inertia_transpose(E_up[i], r_up[i], P_plus if passive[i] else P[i], tmp66,
                                    P[p])
    return -1


@njit(cache=True, error_model="numpy", fastmath=FAST)
def residual_force_sweep(
    parent,
    S,
    nv_joint,
    v_start,
    passive,
    E_up,
    r_up,
    P,
    G,
    Dinv,
    coriolis,
    gyro,
    qdd,
    tau,
    z,
    nu,
    tmp,
    eps,
):
    """(5.4a) tip-to-base residual forces.

    active:  z(k) = phi z+(k-1) + b(k) + P(k)[H* qdd(k) + a(k)],   z+(k) = z(k)
    passive: z(k) = phi z+(k-1) + b(k) + P(k) a(k),  eps_p = T_p(k) - H z(k),
             z+(k) = z(k) + G_p eps_p,  nu_p(k) = D_p^-1 eps_p
    """
    nb = parent.shape[0]
    for i in range(nb):
        for a in range(6):
            z[i, a] = gyro[i, a]
    for i in range(nb - 1, -1, -1):
        r = nv_joint[i]
        j0 = v_start[i]
        for a in range(6):
            tmp[a] = coriolis[i, a]
        if not passive[i]:
            for c in range(r):
                for a in range(6):
                    tmp[a] += S[i, a, c] * qdd[j0 + c]
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += P[i, a, b] * tmp[b]
            z[i, a] += s
        for a in range(6):
            tmp[a] = z[i, a]  # tmp holds z+(k) from here on
        if passive[i]:
            for c in range(r):
                s = tau[j0 + c]
                for a in range(6):
                    s -= S[i, a, c] * z[i, a]
                eps[c] = s
            for c in range(r):
                s = 0.0
                for d in range(r):
                    s += Dinv[i, c, d] * eps[d]
                nu[j0 + c] = s
                for a in range(6):
                    tmp[a] += G[i, a, c] * eps[c]
        p = parent[i]
        if p >= 0:
            xform_force_transpose(E_up[i], r_up[i], tmp, z[p])


@njit(cache=True, error_model="numpy", fastmath=FAST)
def outward_sweep(
    parent,
    S,
    nv_joint,
    v_start,
    passive,
    E_up,
    r_up,
    P,
    G,
    coriolis,
    z,
    nu,
    alpha_base,
    qdd,
    tau,
    alpha,
    force,
    alpha_plus,
):
    """(5.4b) base-to-tip: alpha+(k) = phi*(k+1,k) alpha(k+1);
    active:  f(k) = P(k) alpha+(k) + z(k),  T_a(k) = H(k) f(k)
    passive: qdd_p(k) = nu_p(k) - G_p*(k) alpha+(k)
    alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)."""
    nb = parent.shape[0]
    for i in range(nb):
        p = parent[i]
        if p >= 0:
            xform_motion(E_up[i], r_up[i], alpha[p], alpha_plus)
        else:
            xform_motion(E_up[i], r_up[i], alpha_base, alpha_plus)
        r = nv_joint[i]
        j0 = v_start[i]
        if passive[i]:
            for c in range(r):
                s = nu[j0 + c]
                for a in range(6):
                    s -= G[i, a, c] * alpha_plus[a]
                qdd[j0 + c] = s
            for a in range(6):
                force[i, a] = 0.0
        else:
            for a in range(6):
                s = z[i, a]
                for b in range(6):
                    s += P[i, a, b] * alpha_plus[b]
                force[i, a] = s
            for c in range(r):
                s = 0.0
                for a in range(6):
                    s += S[i, a, c] * force[i, a]
                tau[j0 + c] = s
        for a in range(6):
            s = alpha_plus[a] + coriolis[i, a]
            for c in range(r):
                s += S[i, a, c] * qdd[j0 + c]
            alpha[i, a] = s


# ================================================================ flat buffers
# The model's constants and the per-cycle workspace live in three flat arrays so that a whole
# step is one compiled call with a handful of arguments (numba unboxes each array argument,
# ~40 ns). ``*_views`` define the layouts once, cut with borrowed ``block_view``s (inlined, no
# reference counts); Python keeps named NumPy views of the same memory (``numpy_view``).


@njit(cache=True, error_model="numpy", fastmath=FAST, inline="always")
def take(buf, o, shape):
    """The block of ``shape`` at offset ``o`` of a flat buffer, and the offset after it."""
    size = 1
    for d in shape:
        size *= d
    return block_view(buf, o, shape), o + size


@njit(cache=True, error_model="numpy", fastmath=FAST, inline="always")
def int_views(ints):
    """ints = [nb, nv, na, np, parent, hinge_type, q_start, v_start, nv_joint, passive,
    active_dofs, passive_dofs]"""
    nb, nv, na, npas = ints[0], ints[1], ints[2], ints[3]
    o = 4
    parent, o = take(ints, o, (nb,))
    hinge_type, o = take(ints, o, (nb,))
    q_start, o = take(ints, o, (nb,))
    v_start, o = take(ints, o, (nb,))
    nv_joint, o = take(ints, o, (nb,))
    passive, o = take(ints, o, (nb,))
    active_dofs, o = take(ints, o, (na,))
    passive_dofs, o = take(ints, o, (npas,))
    return (nb, nv, na, npas, parent, hinge_type, q_start, v_start, nv_joint, passive,
            active_dofs, passive_dofs, o)


@njit(cache=True, error_model="numpy", fastmath=FAST, inline="always")
def const_views(consts, nb):
    """consts = [tree_E, tree_r, axis, H* (S), M (inertia), base acceleration, tolerance]"""
    o = 0
    tree_E, o = take(consts, o, (nb, 3, 3))
    tree_r, o = take(consts, o, (nb, 3))
    axis, o = take(consts, o, (nb, 3))
    S, o = take(consts, o, (nb, 6, 6))
    inertia, o = take(consts, o, (nb, 6, 6))
    gravity_base, o = take(consts, o, (6,))
    tol, o = take(consts, o, (1,))
    return tree_E, tree_r, axis, S, inertia, gravity_base, tol, o


@njit(cache=True, error_model="numpy", fastmath=FAST, inline="always")
def work_views(work, nb, nv, na, npas):
    """The per-cycle workspace: every quantity of (3.1), (4.6), (5.4) plus scratch."""
    o = 0
    E_up, o = take(work, o, (nb, 3, 3))
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
    nu, o = take(work, o, (nv,))
    qdd, o = take(work, o, (nv,))
    tau, o = take(work, o, (nv,))
    tau_active, o = take(work, o, (na,))
    qdd_passive, o = take(work, o, (npas,))
    alpha_base, o = take(work, o, (6,))
    # scratch
    R, o = take(work, o, (3, 3))
    P_plus, o = take(work, o, (6, 6))
    tmp66, o = take(work, o, (6, 6))
    D, o = take(work, o, (6, 6))
    L, o = take(work, o, (6, 6))
    Li, o = take(work, o, (6, 6))
    tmp6, o = take(work, o, (6,))
    tmp6b, o = take(work, o, (6,))
    return (E_up, r_up, vel, coriolis, gyro, P, U, Dinv, G, z, alpha, force, nu, qdd, tau,
            tau_active, qdd_passive, alpha_base, R, P_plus, tmp66, D, L, Li, tmp6, tmp6b, o)


def numpy_view(borrowed: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """The block of ``buffer`` that a compiled ``block_view`` returned, as a NumPy view that
    keeps ``buffer`` alive (the compiled views borrow; see ``spatial.block_view``)."""
    start = (borrowed.ctypes.data - buffer.ctypes.data) // buffer.itemsize
    if not (0 <= start and start + borrowed.size <= buffer.size):
        raise AssertionError("view outside its buffer")  # pragma: no cover
    return buffer[start:start + borrowed.size].reshape(borrowed.shape)


def _work_size(nb: int, nv: int, na: int, npas: int) -> int:
    return nb * (9 + 3 + 6 * 3 + 36 * 4 + 6 * 3) + 3 * nv + na + npas + 6 + 201


# ================================================================ compiled steps
@njit(cache=True, error_model="numpy", fastmath=FAST)
def _all_finite(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


# run_steps flags
CONFIGURATION = 1  # transforms + (4.6)
VELOCITY = 2  # (3.1)
ZERO_VELOCITY = 4  # V = a = b = 0 (Jacobians, mass matrices)
SOLVE = 8  # (5.4a) + (5.4b)
GRAVITY = 16  # with SOLVE: base acceleration [0; -g]


ALL_STEPS = CONFIGURATION | VELOCITY | SOLVE | GRAVITY

# One fixed signature (compiled at import, loaded from the cache): any other argument type
# raises TypeError at dispatch, which costs nothing on the fast path and sends the caller to
# its converting path, instead of silently compiling a new specialization.
_VECTOR = types.float64[::1]
RUN_STEPS_SIGNATURE = types.int64(types.int64[::1], _VECTOR, _VECTOR, _VECTOR, _VECTOR, _VECTOR,
                                  _VECTOR, types.int64)


@njit(RUN_STEPS_SIGNATURE, cache=True, error_model="numpy", fastmath=FAST)
def run_steps(ints, consts, work, q, v, qdd_active, tau_passive, flags):
    """The section-5 algorithm, any subset of its steps, in one compiled call.

    Returns -1 (ok), -2 (non-finite q), -3 (non-finite v), -4 (non-finite qdd_a or T_p),
    -5 (wrong vector length), or the index of a body whose D_p(k) is singular.
    """
    (nb, nv, na, npas, parent, hinge_type, q_start, v_start, nv_joint, passive, active_dofs,
     passive_dofs, _) = int_views(ints)
    tree_E, tree_r, axis, S, inertia, gravity_base, tol, _ = const_views(consts, nb)
    (E_up, r_up, vel, coriolis, gyro, P, U, Dinv, G, z, alpha, force, nu, qdd, tau, tau_active,
     qdd_passive, alpha_base, R, P_plus, tmp66, D, L, Li, tmp6, tmp6b, _) = work_views(
        work, nb, nv, na, npas)
    if ((flags & CONFIGURATION and q.shape[0] != q_start[nb - 1] + (7 if hinge_type[nb - 1] == 2
                                                                   else 1))
            or (flags & VELOCITY and not flags & ZERO_VELOCITY and v.shape[0] != nv)
            or (flags & SOLVE and (qdd_active.shape[0] != na or tau_passive.shape[0] != npas))):
        return -5
    # step 0 + 2: transforms and articulated quantities (4.6), functions of q only
    if flags & CONFIGURATION:
        if not _all_finite(q):
            return -2
        joint_transforms(hinge_type, axis, tree_E, tree_r, q_start, q, E_up, r_up, R)
        bad = articulated_sweep(parent, S, nv_joint, passive, inertia, E_up, r_up, tol[0], P,
                                U, Dinv, G, P_plus, tmp66, D, L, Li)
        if bad >= 0:
            return bad
    # step 1: velocities, Coriolis and gyroscopic terms (3.1)
    if flags & ZERO_VELOCITY:
        vel[:] = 0.0
        coriolis[:] = 0.0
        gyro[:] = 0.0
    elif flags & VELOCITY:
        if not _all_finite(v):
            return -3
        velocity_sweep(parent, S, nv_joint, v_start, inertia, E_up, r_up, v, vel, coriolis,
                       gyro, tmp6)
    # step 3: residual forces (5.4a), then accelerations and forces (5.4b)
    if flags & SOLVE:
        if not (_all_finite(qdd_active) and _all_finite(tau_passive)):
            return -4
        for k in range(na):
            qdd[active_dofs[k]] = qdd_active[k]
        for k in range(npas):
            tau[passive_dofs[k]] = tau_passive[k]
        for a in range(6):
            alpha_base[a] = gravity_base[a] if flags & GRAVITY else 0.0
        residual_force_sweep(parent, S, nv_joint, v_start, passive, E_up, r_up, P, G, Dinv,
                             coriolis, gyro, qdd, tau, z, nu, tmp6, tmp6b)
        outward_sweep(parent, S, nv_joint, v_start, passive, E_up, r_up, P, G, coriolis, z, nu,
                      alpha_base, qdd, tau, alpha, force, tmp6)
        for k in range(na):
            tau_active[k] = tau[active_dofs[k]]
        for k in range(npas):
            qdd_passive[k] = qdd[passive_dofs[k]]
    return -1


# ================================================================ workspace
@dataclass(slots=True)
class HybridResult:
    """Output of the hybrid recursion (arrays in DOF order of the active/passive subsets)."""

    tau_active: np.ndarray
    qdd_passive: np.ndarray
    qdd: np.ndarray  # all DOF
    tau: np.ndarray  # all DOF (passive entries = the given tau_passive)
    alpha: np.ndarray  # (nb, 6) body spatial accelerations, body axes, [angular; linear]


_WORK_NAMES = ("E_up", "r_up", "vel", "coriolis", "gyro", "P", "U", "Dinv", "G", "z", "alpha",
               "force", "nu", "qdd", "tau", "tau_active", "qdd_passive", "alpha_base")


class HybridDynamics:
    """Allocation-free workspace for one model and one passive set (the control-loop path).

    ``compute(q, v, qdd_active, tau_passive)`` runs the three steps of section 5 in one compiled
    call and writes into the preallocated ``self.result`` (overwritten by the next call: copy
    what you keep). The steps are also callable one by one (``set_configuration``,
    ``set_velocity``, ``solve``) so that Jacobians and the mass matrix reuse (4.6).
    Named views of every intermediate quantity (``P``, ``G``, ``Dinv``, ``z``, ``alpha``, ...)
    are attributes, sharing memory with the compiled code.
    """

    def __init__(self, model: RobotModel, passive_mask: np.ndarray | None = None) -> None:
        self.model = model
        nb, nv = model.nb, model.nv
        mask = model.passive_joint_mask if passive_mask is None else np.asarray(passive_mask, bool)
        if mask.shape != (nb,):
            raise ValueError(f"passive_mask must have shape ({nb},)")
        self.passive = np.ascontiguousarray(mask)
        dof_passive = np.repeat(mask, model.nv_joint)
        self.active_dofs = np.flatnonzero(~dof_passive)
        self.passive_dofs = np.flatnonzero(dof_passive)
        na, npas = len(self.active_dofs), len(self.passive_dofs)
        self.singular_tolerance = 1e-12 * model.inertia_scale
        self._ints = np.concatenate([
            [nb, nv, na, npas], model.parent, model.hinge_type, model.q_start, model.v_start,
            model.nv_joint, mask.astype(np.int64), self.active_dofs, self.passive_dofs,
        ]).astype(np.int64)
        gravity_base = np.zeros(6)
        gravity_base[3:] = -model.gravity
        self._consts = np.concatenate([
            model.tree_rotation.ravel(), model.tree_translation.ravel(), model.axis.ravel(),
            model.motion_subspace.ravel(), model.inertia.ravel(), gravity_base,
            [self.singular_tolerance]])
        self._work = np.zeros(_work_size(nb, nv, na, npas))
        views = work_views(self._work, nb, nv, na, npas)
        if views[-1] != self._work.size or const_views(self._consts, nb)[-1] != self._consts.size \
                or int_views(self._ints)[-1] != self._ints.size:
            raise AssertionError("workspace layout mismatch")  # pragma: no cover
        for name, view in zip(_WORK_NAMES, views):
            setattr(self, name, numpy_view(view, self._work))
        self.alpha_base[:] = gravity_base
        self._zero = np.zeros(0)
        self.result = HybridResult(tau_active=self.tau_active, qdd_passive=self.qdd_passive,
                                   qdd=self.qdd, tau=self.tau, alpha=self.alpha)

    # -- step 0 + 2: configuration-dependent quantities (transforms, (4.6)) -----------------
    def set_configuration(self, q: np.ndarray) -> None:
        q = self._vector(q, self.model.nq, "q")
        status = run_steps(self._ints, self._consts, self._work, q, self._zero, self._zero,
                           self._zero, CONFIGURATION)
        if status != -1:
            self._raise(status, q=q)

    # -- step 1: velocity-dependent quantities (3.1) ----------------------------------------
    def set_velocity(self, v: np.ndarray | None) -> None:
        if v is None:
            run_steps(self._ints, self._consts, self._work, self._zero, self._zero, self._zero,
                      self._zero, ZERO_VELOCITY)
            return
        v = self._vector(v, self.model.nv, "v")
        if run_steps(self._ints, self._consts, self._work, self._zero, v, self._zero,
                     self._zero, VELOCITY) != -1:
            self.model.check_state(v=v)

    # -- step 3: (5.4a) + (5.4b) --------------------------------------------------------------
    def solve(self, qdd_active: np.ndarray, tau_passive: np.ndarray, gravity: bool = True
              ) -> HybridResult:
        qa = self._vector(qdd_active, len(self.active_dofs), "qdd_active")
        tp = self._vector(tau_passive, len(self.passive_dofs), "tau_passive")
        flags = SOLVE | GRAVITY if gravity else SOLVE
        if run_steps(self._ints, self._consts, self._work, self._zero, self._zero, qa, tp,
                     flags) != -1:
            self._check_inputs(qa, tp)
        return self.result

    def compute(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                tau_passive: np.ndarray) -> HybridResult:
        """The whole hybrid recursion in one compiled call; results in ``self.result``."""
        try:
            status = run_steps(self._ints, self._consts, self._work, q, v, qdd_active,
                               tau_passive, ALL_STEPS)
        except TypeError:  # not writeable C-contiguous float64 vectors: convert, then retry
            return self._compute_converted(q, v, qdd_active, tau_passive)
        if status != -1:
            self._raise(status, q=q, v=v, qa=qdd_active, tp=tau_passive)
        return self.result

    def _compute_converted(self, q, v, qdd_active, tau_passive) -> HybridResult:
        m = self.model
        return self.compute(self._vector(q, m.nq, "q"), self._vector(v, m.nv, "v"),
                            self._vector(qdd_active, len(self.active_dofs), "qdd_active"),
                            self._vector(tau_passive, len(self.passive_dofs), "tau_passive"))

    # -- input checks (only on the error path) ------------------------------------------------
    def _vector(self, x, n: int, name: str) -> np.ndarray:
        if type(x) is not np.ndarray or x.dtype != np.float64 or not x.flags.c_contiguous \
                or not x.flags.writeable:
            x = np.array(x, dtype=np.float64, order="C")
        if x.shape != (n,):
            if name in ("qdd_active", "tau_passive"):
                idx = self.active_dofs if name == "qdd_active" else self.passive_dofs
                raise ValueError(f"{name} must have shape ({n},) (joints "
                                 f"{[self.model.dof_names[i] for i in idx]}), got {x.shape}")
            raise ValueError(f"{name} must have shape ({n},), got {x.shape}")
        return x

    def _raise(self, status: int, q=None, v=None, qa=None, tp=None) -> None:
        m = self.model
        if status == -5:  # wrong length: the named check raises
            self._vector(q, m.nq, "q")
            self._vector(v, m.nv, "v")
            self._vector(qa, len(self.active_dofs), "qdd_active")
            self._vector(tp, len(self.passive_dofs), "tau_passive")
        if status == -2:
            m.check_state(q=q)
        elif status == -3:
            m.check_state(v=v)
        elif status == -4:
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


def _workspace(model: RobotModel, kind: str = "model") -> HybridDynamics:
    """Cached workspace of ``model`` for its own passive set, all-active or all-passive."""
    ws = model._workspace_cache.get(kind)
    if ws is None:
        mask = {"model": None, "active": np.zeros(model.nb, bool),
                "passive": np.ones(model.nb, bool)}[kind]
        ws = model._workspace_cache[kind] = HybridDynamics(model, mask)
    return ws


# ================================================================ public functions
def hybrid_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                    tau_passive: np.ndarray) -> HybridResult:
    """T_a and qdd_p from qdd_a and T_p (section 5); results are fresh copies."""
    res = _workspace(model).compute(q, v, qdd_active, tau_passive)
    return HybridResult(res.tau_active.copy(), res.qdd_passive.copy(), res.qdd.copy(),
                        res.tau.copy(), res.alpha.copy())


def inverse_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, qdd: np.ndarray
                     ) -> np.ndarray:
    """tau = M(q) qdd + C(q, v) + gravity: the hybrid recursion with every joint active."""
    ws = _workspace(model, "active")
    return ws.compute(q, v, qdd, ws._zero).tau.copy()


def forward_dynamics(model: RobotModel, q: np.ndarray, v: np.ndarray, tau: np.ndarray
                     ) -> np.ndarray:
    """qdd = M^-1 (tau - C - gravity): the hybrid recursion with every joint passive (ABA)."""
    ws = _workspace(model, "passive")
    return ws.compute(q, v, ws._zero, tau).qdd.copy()


def mass_matrix(model: RobotModel, q: np.ndarray) -> np.ndarray:
    """M(q) column by column: all joints active, zero velocity and gravity, unit accelerations.

    (4.6) is run once (all active: P(k) are the composite-body inertias); each column is one
    pass of (5.4a)/(5.4b) with qdd = e_j.
    """
    ws = _workspace(model, "active")
    ws.set_configuration(q)
    ws.set_velocity(None)
    nv = model.nv
    M = np.empty((nv, nv))
    unit = np.zeros(nv)
    for j in range(nv):
        unit[j] = 1.0
        M[:, j] = ws.solve(unit, ws._zero, gravity=False).tau
        unit[j] = 0.0
    return 0.5 * (M + M.T)
