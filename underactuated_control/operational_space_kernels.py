"""Compiled kernels of Khatib's operational space (``operational_space.py``), O(N).

They run on the buffers of a ``HybridDynamics`` workspace (its (4.6) articulated quantities
P(k), G_p(k), D_p⁻¹(k) and transforms), read through the package's named layouts
(``dynamics.int_views``/``const_views``/``work_views``), plus one flat buffer of their own cut
by ``os_views`` (``OsWork``). Spatial vectors inside are [angular; linear] in body axes
(``spatial.py``); task quantities are [linear; angular] of the frame point in root axes.

The inverse operational-space inertia Λ⁻¹ = J A⁻¹ Jᵀ (Khatib eq. 17) is the frame's
acceleration per unit wrench with every joint free (passive), at rest and without gravity.
One force pass of the articulated-body recursion per wrench column gives it; the six passes
collapse into one base-to-tip recursion along the root→frame path of the 6×6 matrix
Ω(k) (Rodriguez, Jain & Kreutz-Delgado's extended operator; cf. Wensing, Featherstone & Orin
2012, "propagation algorithms", O(N + d m²)):

    Ω(k) = τ̄ᵀ(k) φ*(k+1,k) Ω(k+1) φ(k+1,k) τ̄(k) + H*(k) D_p⁻¹(k) H(k),   Ω(root's parent) = 0
    τ̄(k) = I − G_p(k) H(k)   (passive hinges; τ̄ = I and no second term for locked ones)

so that Λ⁻¹ = W Ω(b) Wᵀ with W the pick-off of the frame point of body b. With some hinges
*active* (locked: qdd_a = 0) the same recursion gives the response of the mechanism with those
joints rigid: the mini-manipulator alone (Khatib Lemma 1/2) or J_p M_pp⁻¹ J_pᵀ of the passive
joints (the under-actuated extension).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .buffers import borrow, take
from .dynamics import (
    NONFINITE_Q,
    NONFINITE_V,
    OK,
    all_finite,
    const_views,
    int_views,
    outward_sweep,
    residual_force_sweep,
    velocity_sweep,
    work_views,
)
from .dynamics import configure as configure_at
from .kinematics import (
    acceleration_without_gravity,
    body_placements,
    classical_acceleration,
    frame_jacobian_kernel,
    frame_point,
)
from .spatial import FAST, spd_inverse, xform_force_transpose, xform_motion

# status codes beyond those of dynamics.py (OK = -1, NONFINITE_Q = -2, NONFINITE_V = -3)
SINGULAR_TASK = -10  # S Λ⁻¹ Sᵀ is singular: the frame cannot move along some task direction

__all__ = [
    "SINGULAR_TASK",
    "OsWork",
    "os_views",
    "os_buffer_size",
    "configure_task",
    "masked_inverse_inertia",
    "task_bias_kernel",
    "update_kernel",
    "wrench_response_kernel",
    "null_space_kernel",
    "scaled_spd_inverse",
]


class OsWork(NamedTuple):
    """The operational-space buffer (one flat float array)."""

    E_world: np.ndarray  # (nb, 3, 3): world -> body axes
    p_world: np.ndarray  # (nb, 3): body origins, root coordinates
    J: np.ndarray  # (6, nv): [linear; angular] Jacobian of the frame point, root axes
    W: np.ndarray  # (6, 6): pick-off, body spatial acceleration -> frame [linear; angular]
    S: np.ndarray  # (6, 6): task selection, first k rows used
    offset: np.ndarray  # (3,): frame point in body coordinates
    point: np.ndarray  # (3,): frame point in root coordinates
    Omega: np.ndarray  # (6, 6): Ω(k) of the path recursion
    T: np.ndarray  # (6, 6) scratch
    Z: np.ndarray  # (6, 6) scratch (Ω G_p, force columns)
    C: np.ndarray  # (6, 6) scratch
    Linv6: np.ndarray  # (6, 6): Λ⁻¹ of the whole frame (eq. 33)
    Linv: np.ndarray  # (6, 6): S Λ⁻¹ Sᵀ, first k x k used
    Lam: np.ndarray  # (6, 6): Λ of the task, first k x k used
    L: np.ndarray  # Cholesky scratch
    Li: np.ndarray
    B: np.ndarray
    d: np.ndarray  # (6,): Jacobi scaling
    a_vel: np.ndarray  # (6,): frame acceleration, free motion, velocity terms (and tau)
    a_grav: np.ndarray  # (6,): frame acceleration, free fall from rest
    mu: np.ndarray  # (6,): μ (first k)
    p: np.ndarray  # (6,): p (first k)
    x6: np.ndarray
    y6: np.ndarray
    Y: np.ndarray  # (nv, 6): A⁻¹ J_Sᵀ (first k columns)
    Jbar: np.ndarray  # (nv, 6): J̄ = A⁻¹ J_Sᵀ Λ (first k columns)
    alpha6: np.ndarray  # (nb, 6, 6): body accelerations of the six wrench passes (rows)
    eps: np.ndarray  # (nv, 6): ε of the six wrench passes


@njit(cache=True, inline="always")
def os_views(buf, nb, nv):
    """(OsWork, end) of the operational-space buffer."""
    E_world, o = take(buf, 0, (nb, 3, 3))
    p_world, o = take(buf, o, (nb, 3))
    J, o = take(buf, o, (6, nv))
    W, o = take(buf, o, (6, 6))
    S, o = take(buf, o, (6, 6))
    offset, o = take(buf, o, (3,))
    point, o = take(buf, o, (3,))
    Omega, o = take(buf, o, (6, 6))
    T, o = take(buf, o, (6, 6))
    Z, o = take(buf, o, (6, 6))
    C, o = take(buf, o, (6, 6))
    Linv6, o = take(buf, o, (6, 6))
    Linv, o = take(buf, o, (6, 6))
    Lam, o = take(buf, o, (6, 6))
    L, o = take(buf, o, (6, 6))
    Li, o = take(buf, o, (6, 6))
    B, o = take(buf, o, (6, 6))
    d, o = take(buf, o, (6,))
    a_vel, o = take(buf, o, (6,))
    a_grav, o = take(buf, o, (6,))
    mu, o = take(buf, o, (6,))
    p, o = take(buf, o, (6,))
    x6, o = take(buf, o, (6,))
    y6, o = take(buf, o, (6,))
    Y, o = take(buf, o, (nv, 6))
    Jbar, o = take(buf, o, (nv, 6))
    alpha6, o = take(buf, o, (nb, 6, 6))
    eps, o = take(buf, o, (nv, 6))
    return OsWork(E_world=E_world, p_world=p_world, J=J, W=W, S=S, offset=offset, point=point,
                  Omega=Omega, T=T, Z=Z, C=C, Linv6=Linv6, Linv=Linv, Lam=Lam, L=L, Li=Li, B=B,
                  d=d, a_vel=a_vel, a_grav=a_grav, mu=mu, p=p, x6=x6, y6=y6, Y=Y, Jbar=Jbar,
                  alpha6=alpha6, eps=eps), o


@njit(cache=True)
def os_buffer_size(nb, nv):
    return os_views(np.empty(0), nb, nv)[1]


# ================================================================ 6-D helpers
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def motion_congruence_sym(E, r, Y, T, out):
    """out = X Y Xᵀ for a symmetric Y = [[A, B], [Bᵀ, C]] by blocks, X = diag(E, E) M with
    M = [[I, 0], [−r~, I]]: M Y Mᵀ = [[A, B'], [B'ᵀ, C']] with B' = A r~ + B (row i of
    P r~ is P[i] × r) and C' = C + Bᵀ r~ − r~ B' (column j of r~ P is r × P[:, j]); then
    E (·) Eᵀ per block, symmetric blocks on their upper triangle (~25% fewer products than
    X Y Xᵀ by ``spatial.xform_motion`` of each column, then of each row). T is 6x6 scratch
    (T[:3] = B', T[3:, :3] = C')."""
    r0, r1, r2 = r[0], r[1], r[2]
    for i in range(3):  # B' = A r~ + B
        a0, a1, a2 = Y[i, 0], Y[i, 1], Y[i, 2]
        T[i, 3] = a1 * r2 - a2 * r1 + Y[i, 3]
        T[i, 4] = a2 * r0 - a0 * r2 + Y[i, 4]
        T[i, 5] = a0 * r1 - a1 * r0 + Y[i, 5]
    for a in range(3):  # D = Bᵀ r~ (row a: B[:, a] × r), in T[3:, 3:] for now
        b0, b1, b2 = Y[0, 3 + a], Y[1, 3 + a], Y[2, 3 + a]
        T[3 + a, 3] = b1 * r2 - b2 * r1
        T[3 + a, 4] = b2 * r0 - b0 * r2
        T[3 + a, 5] = b0 * r1 - b1 * r0
    for i in range(3):  # C' = C + D − r~ B' in T[3:, :3]; column i of r~ B' is r × B'[:, i]
        c0, c1, c2 = T[0, 3 + i], T[1, 3 + i], T[2, 3 + i]
        T[3, i] = Y[3, 3 + i] + T[3, 3 + i] - (r1 * c2 - r2 * c1)
        T[4, i] = Y[4, 3 + i] + T[4, 3 + i] - (r2 * c0 - r0 * c2)
        T[5, i] = Y[5, 3 + i] + T[5, 3 + i] - (r0 * c1 - r1 * c0)
    for blk in range(3):  # 0: A, 1: B', 2: C'
        for a in range(3):  # P = E (block), row a
            for c in range(3):
                s = 0.0
                for b in range(3):
                    if blk == 0:
                        x = Y[b, c]
                    elif blk == 1:
                        x = T[b, 3 + c]
                    else:
                        x = T[3 + b, c]
                    s += E[a, b] * x
                T[3 + a, 3 + c] = s  # scratch: the lower-right block is free here
        for a in range(3):  # out block = P Eᵀ
            for c in range(a if blk != 1 else 0, 3):
                s = T[3 + a, 3] * E[c, 0] + T[3 + a, 4] * E[c, 1] + T[3 + a, 5] * E[c, 2]
                if blk == 0:
                    out[a, c] = s
                    out[c, a] = s
                elif blk == 1:
                    out[a, 3 + c] = s
                    out[3 + c, a] = s
                else:
                    out[3 + a, 3 + c] = s
                    out[3 + c, 3 + a] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def pick_off(E_b, offset, W):
    """W = [[-R r~, R], [R, 0]] with R = E_bᵀ (body -> root axes), r = ``offset`` (the frame
    point in body coordinates): [a_point; ω̇] (root axes) = W α(b) at zero velocity."""
    r0, r1, r2 = offset[0], offset[1], offset[2]
    for a in range(3):
        R0, R1, R2 = E_b[0, a], E_b[1, a], E_b[2, a]  # row a of R = column a of E_b
        # row a of −R r~ is −(R[a, :] r~) = −(R[a, :] × r)
        W[a, 0] = -(R1 * r2 - R2 * r1)
        W[a, 1] = -(R2 * r0 - R0 * r2)
        W[a, 2] = -(R0 * r1 - R1 * r0)
        W[a, 3], W[a, 4], W[a, 5] = R0, R1, R2
        W[3 + a, 0], W[3 + a, 1], W[3 + a, 2] = R0, R1, R2
        W[3 + a, 3], W[3 + a, 4], W[3 + a, 5] = 0.0, 0.0, 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def congruence(A, Y, n, m, T, out):
    """out[:n, :n] = A[:n, :m] Y[:m, :m] A[:n, :m]ᵀ (T scratch)."""
    for a in range(n):
        for c in range(m):
            s = 0.0
            for b in range(m):
                s += A[a, b] * Y[b, c]
            T[a, c] = s
    for a in range(n):
        for c in range(n):
            s = 0.0
            for b in range(m):
                s += T[a, b] * A[c, b]
            out[a, c] = s


@njit(cache=True, error_model="numpy", fastmath=FAST)
def scaled_spd_inverse(A, k, rcond, out, L, Li, B, d, reference):
    """out[:k, :k] = A[:k, :k]⁻¹ of a symmetric positive (semi)definite A by Cholesky after a
    Jacobi scaling by the diagonal of ``reference`` (A itself, or a matrix A was cut from:
    d_i = reference_ii^-1/2, so the test is unit-free: linear and angular rows mix kg and
    kg m²); False when a scaled pivot is <= rcond (A singular to that tolerance; against a
    reference, a direction the cut removed counts as singular even when it is the only one)."""
    for i in range(k):
        if not (reference[i, i] > 0.0):
            return False
        d[i] = 1.0 / np.sqrt(reference[i, i])
    for i in range(k):
        for j in range(k):
            B[i, j] = d[i] * A[i, j] * d[j]
    if not spd_inverse(B, k, rcond, out, L, Li):
        return False
    for i in range(k):
        for j in range(k):
            out[i, j] *= d[i] * d[j]
    return True


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def task_rows_move(o, k, rcond):
    """False if a task row's inverse inertia s_iᵀ Λ⁻¹ s_i is <= rcond times its reference
    Σ_j s_ij² max(linear or angular diagonal of Λ⁻¹): a direction the frame cannot move along
    (the Jacobi-scaled test alone cannot see a single near-zero row)."""
    lin = max(o.Linv6[0, 0], o.Linv6[1, 1], o.Linv6[2, 2])
    ang = max(o.Linv6[3, 3], o.Linv6[4, 4], o.Linv6[5, 5])
    for i in range(k):
        ref = 0.0
        for j in range(6):
            ref += o.S[i, j] * o.S[i, j] * (lin if j < 3 else ang)
        if not (o.Linv[i, i] > rcond * ref):
            return False
    return True


# ================================================================ Ω recursion
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def path_omega(m, c, w, path, body, Om, T, Z, C):
    """Ω(body) by the base-to-tip recursion along the root→body path (module docstring):
    the body's spatial acceleration per unit spatial force applied to it, with the workspace's
    passive hinges free and its active hinges locked, at rest, without gravity."""
    n = 0
    j = body
    while j >= 0:  # the path, tip first
        path[n] = j
        n += 1
        j = m.parent[j]
    for a in range(6):
        for b in range(6):
            Om[a, b] = 0.0
    for t in range(n - 1, -1, -1):  # root to body
        i = path[t]
        if t != n - 1:  # φ*(k+1,k) Ω(k+1) φ(k+1,k); Ω above the root is 0 (fixed world)
            motion_congruence_sym(w.E_up[i], w.r_up[i], Om, T, C)
            for a in range(6):
                for b in range(6):
                    Om[a, b] = C[a, b]
        if m.passive[i]:
            # τ̄ᵀ Y τ̄ + H* D_p⁻¹ H with τ̄ = I − G_p H:  Y − Z Hᵀ − H Zᵀ + H (G_pᵀ Z + D_p⁻¹) Hᵀ
            # where Z = Y G_p (Y symmetric)
            r, H, G, Dinv = m.nv_joint[i], c.S[i], w.G[i], w.Dinv[i]
            for a in range(6):
                for q in range(r):
                    s = 0.0
                    for b in range(6):
                        s += Om[a, b] * G[b, q]
                    Z[a, q] = s
            for q in range(r):  # C = G_pᵀ Z + D_p⁻¹ (r x r)
                for u in range(r):
                    s = Dinv[q, u]
                    for b in range(6):
                        s += G[b, q] * Z[b, u]
                    C[q, u] = s
            for q in range(r):  # T = H C (6 x r)
                for a in range(6):
                    s = 0.0
                    for u in range(r):
                        s += H[a, u] * C[u, q]
                    T[a, q] = s
            for a in range(6):
                for b in range(6):
                    s = Om[a, b]
                    for q in range(r):
                        s += (T[a, q] - Z[a, q]) * H[b, q] - H[a, q] * Z[b, q]
                    Om[a, b] = s


# ================================================================ entry points
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def task_configuration(m, c, w, s, o, path, q, configure, body, k, invert, rcond):
    """The body of ``configure_task``."""
    if configure:
        if q.shape[0] != m.nq:
            return NONFINITE_Q
        status = configure_at(m, c, q, w, s)
        if status != OK:
            return status
        body_placements(m.parent, w.E_up, w.r_up, o.E_world, o.p_world)
    Eb = o.E_world[body]
    frame_point(Eb, o.p_world[body], o.offset, o.point)  # the frame point in root coordinates
    frame_jacobian_kernel(m.parent, c.S, m.nv_joint, m.v_start, o.E_world, o.p_world, body,
                          o.point, o.J)
    pick_off(Eb, o.offset, o.W)
    path_omega(m, c, w, path, body, o.Omega, o.T, o.Z, o.C)
    congruence(o.W, o.Omega, 6, 6, o.T, o.Linv6)  # Λ⁻¹ = J A⁻¹ Jᵀ = W Ω Wᵀ  (17), (33)
    congruence(o.S, o.Linv6, k, 6, o.T, o.Linv)  # the task's rows: S Λ⁻¹ Sᵀ
    if invert:
        if not task_rows_move(o, k, rcond):
            return SINGULAR_TASK
        if not scaled_spd_inverse(o.Linv, k, rcond, o.Lam, o.L, o.Li, o.B, o.d, o.Linv):
            return SINGULAR_TASK
    return OK


@njit(cache=True, error_model="numpy", fastmath=FAST)
def configure_task(ints, consts, work, buf, path, q, configure, body, k, invert, rcond):
    """Per configuration, in one call: (with ``configure``) transforms, (4.6) and placements;
    then the frame point, J, the pick-off W, Ω(body) and
        Λ⁻¹ = W Ω Wᵀ (eq. 17, blocks eq. 33),  S Λ⁻¹ Sᵀ,  (with ``invert``) Λ = (S Λ⁻¹ Sᵀ)⁻¹.
    Returns OK, NONFINITE_Q, the body whose D_p(k) is singular, or SINGULAR_TASK (Λ⁻¹, J and
    the rest are then still valid; only Λ is not)."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    return task_configuration(m, c, w, s, o, path, borrow(q), configure, body, k, invert, rcond)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def update_kernel(ints, consts, work, buf, path, q, v, tau, body, k, rcond):
    """``configure_task`` (with Λ) then ``task_bias_kernel`` in one call. Returns the first
    status other than OK (after a SINGULAR_TASK the free accelerations are still computed,
    μ and p are not)."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    status = task_configuration(m, c, w, s, o, path, borrow(q), True, body, k, True, rcond)
    if status != OK and status != SINGULAR_TASK:
        return status
    bias = task_free_motion(m, c, w, s, o, borrow(v), borrow(tau), body,
                            k if status == OK else 0)
    return status if status != OK else bias


@njit(cache=True, error_model="numpy", fastmath=FAST)
def masked_inverse_inertia(ints, consts, work, buf, path, q, body, k, out):
    """out[:k, :k] = S W Ω(body) Wᵀ Sᵀ for another workspace of the same robot (another
    passive set: its passive joints free, its active joints locked), at q; W and S from
    ``buf`` (``configure_task`` at the same q). Returns OK, NONFINITE_Q or a singular body."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    q = borrow(q)
    if q.shape[0] != m.nq:
        return NONFINITE_Q
    status = configure_at(m, c, q, w, s)
    if status != OK:
        return status
    path_omega(m, c, w, path, body, o.Omega, o.T, o.Z, o.C)
    congruence(o.W, o.Omega, 6, 6, o.T, o.B)
    congruence(o.S, o.B, k, 6, o.T, out)
    return OK


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def free_frame_acceleration(m, c, w, s, o, body, out):
    """(5.4a)/(5.4b) with every hinge of the (all-passive) workspace free, then the frame
    point's classical acceleration [linear; angular] in root axes; a fictitious base
    acceleration [0; -g] that carried gravity is removed first."""
    residual_force_sweep(m, c, w, s, False)
    outward_sweep(m, c, w, s)
    Eb, x = o.E_world[body], o.x6
    acceleration_without_gravity(Eb, w.alpha[body], w.alpha_base, x)
    classical_acceleration(Eb, x, w.vel[body], o.offset, out)


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def moving_frame_acceleration(m, c, w, s, o, v, tau, body, with_gravity, out):
    """The frame point's classical acceleration under velocities v, joint forces ``tau``
    and, ``with_gravity``, gravity (every joint free) into ``out``. Returns OK or
    NONFINITE_V."""
    if v.shape[0] != m.nv or tau.shape[0] != m.nv or not (all_finite(v) and all_finite(tau)):
        return NONFINITE_V
    velocity_sweep(m, c, v, w, s)  # (3.1)
    for i in range(m.nv):
        w.tau[i] = tau[i]
    for a in range(6):  # gravity as the base acceleration [0; -g], removed at the frame
        w.alpha_base[a] = c.gravity_base[a] if with_gravity else 0.0
    free_frame_acceleration(m, c, w, s, o, body, out)
    return OK


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def task_free_motion(m, c, w, s, o, v, tau, body, k):
    """The body of ``task_bias_kernel``."""
    status = moving_frame_acceleration(m, c, w, s, o, v, tau, body, False, o.a_vel)
    if status != OK:  # a_v: velocities and tau, no gravity
        return status
    w.vel[:] = 0.0  # at rest, gravity as the base acceleration [0; -g]
    w.coriolis[:] = 0.0
    w.gyro[:] = 0.0
    w.tau[:] = 0.0
    for a in range(6):  # (an element copy: no compiled shape-error message)
        w.alpha_base[a] = c.gravity_base[a]
    free_frame_acceleration(m, c, w, s, o, body, o.a_grav)
    for a in range(k):  # μ = −Λ S a_v,  p = −Λ S a_g  (24), (25)
        sv = 0.0
        sg = 0.0
        for b in range(6):
            sv += o.S[a, b] * o.a_vel[b]
            sg += o.S[a, b] * o.a_grav[b]
        o.x6[a] = sv
        o.y6[a] = sg
    for a in range(k):
        sv = 0.0
        sg = 0.0
        for b in range(k):
            sv += o.Lam[a, b] * o.x6[b]
            sg += o.Lam[a, b] * o.y6[b]
        o.mu[a] = -sv
        o.p[a] = -sg
    return OK


@njit(cache=True, error_model="numpy", fastmath=FAST)
def task_bias_kernel(ints, consts, work, buf, v, tau, body, k):
    """μ and p (eq. 24, 25) by two passes of the articulated-body recursion (every joint free):

    * joint forces ``tau`` (zero for eq. 24), velocities v, no gravity: the frame's classical
      acceleration a_v = J q̈ + J̇ q̇ = −J A⁻¹ (b − tau) + J̇ q̇, so μ = J̄ᵀ b − Λ J̇ q̇ = −Λ S a_v;
    * at rest under gravity: a_g = −J A⁻¹ g, so p = J̄ᵀ g = −Λ S a_g.

    Needs ``configure_task`` (Λ) at the same q first. Returns OK or NONFINITE_V."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    return task_free_motion(m, c, w, s, o, borrow(v), borrow(tau), body, k)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def free_acceleration_kernel(ints, consts, work, buf, v, tau, body):
    """The frame point's classical acceleration under velocities v, joint forces ``tau`` and
    gravity at once, into ``a_vel`` of the buffer: a_v + a_g of ``task_bias_kernel`` in one
    pass (the recursion is affine in the three; every joint free). Needs ``configure_task``
    at the same q first. Returns OK or NONFINITE_V."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    return moving_frame_acceleration(m, c, w, s, o, borrow(v), borrow(tau), body, True,
                                     o.a_vel)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def wrench_response_kernel(ints, consts, work, buf, path, body, k, with_lambda):
    """Y = A⁻¹ J_Sᵀ (nv x k; A⁻¹ with the workspace's passive joints free, active locked) by
    k force passes at once: the unit task wrenches Wᵀ Sᵀ applied at the frame point, the
    residual forces propagated tip-to-base along the path only (nothing else is loaded), the
    accelerations base-to-tip over the whole tree (5.4a/b with z(b) = −f, T = 0, V = 0, no
    gravity). Column j of Y is the joint acceleration of wrench j; W α(b) is column j of
    Λ⁻¹. With ``with_lambda``: J̄ = Y Λ (eq. 22) too (Λ from ``configure_task``)."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    # wrench j's 6-vectors are rows: z in Zc[j], α(i) in A6[i, j] (contiguous, for spatial.py)
    Zc, F, A6, eps = o.Z, o.C, o.alpha6, o.eps
    for j in range(k):  # forces at body b: z(b) = −Wᵀ Sᵀ
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += o.W[b, a] * o.S[j, b]
            Zc[j, a] = -s
    for i in range(m.nv):
        for j in range(6):
            eps[i, j] = 0.0
    i = body
    while i >= 0:  # (5.4a) along the path: ε_p = −H z, z⁺ = z + G_p ε_p, z(k+1) = φ z⁺
        if m.passive[i]:
            r, H, G, e0 = m.nv_joint[i], c.S[i], w.G[i], m.v_start[i]
            for j in range(k):
                for q in range(r):
                    s = 0.0
                    for a in range(6):
                        s -= H[a, q] * Zc[j, a]
                    eps[e0 + q, j] = s
                for a in range(6):
                    s = Zc[j, a]
                    for q in range(r):
                        s += G[a, q] * eps[e0 + q, j]
                    Zc[j, a] = s
        if m.parent[i] >= 0:
            for j in range(k):
                F[j, :] = 0.0
                xform_force_transpose(w.E_up[i], w.r_up[i], Zc[j], F[j])  # φ(k+1,k) z⁺
            Zc, F = F, Zc
        i = m.parent[i]
    for i in range(m.nb):  # (5.4b) over the tree: α⁺ = φ* α(k+1), q̈ = D⁻¹ε − G_pᵀ α⁺
        p, Ai = m.parent[i], A6[i]
        for j in range(k):
            if p >= 0:
                xform_motion(w.E_up[i], w.r_up[i], A6[p, j], Ai[j])
            else:
                Ai[j, :] = 0.0
        r, v0 = m.nv_joint[i], m.v_start[i]
        if m.passive[i]:
            H, G, Dinv = c.S[i], w.G[i], w.Dinv[i]
            for j in range(k):
                for q in range(r):
                    s = 0.0
                    for u in range(r):
                        s += Dinv[q, u] * eps[v0 + u, j]
                    for a in range(6):
                        s -= G[a, q] * Ai[j, a]
                    o.Y[v0 + q, j] = s
                for a in range(6):
                    s = Ai[j, a]
                    for q in range(r):
                        s += H[a, q] * o.Y[v0 + q, j]
                    Ai[j, a] = s
        else:
            for q in range(r):
                for j in range(k):
                    o.Y[v0 + q, j] = 0.0
    if with_lambda:
        for i in range(m.nv):  # J̄ = A⁻¹ J_Sᵀ Λ  (22)
            for j in range(k):
                s = 0.0
                for u in range(k):
                    s += o.Y[i, u] * o.Lam[u, j]
                o.Jbar[i, j] = s


@njit(cache=True, error_model="numpy", fastmath=FAST)
def null_space_kernel(ints, consts, work, buf, tau0, out, body, k):
    """out = [I − J_Sᵀ J̄ᵀ] Γ₀ = Γ₀ − J_Sᵀ Λ J_S A⁻¹ Γ₀ (eq. 27) in O(N): one articulated-body
    pass with joint forces Γ₀ at rest without gravity gives J A⁻¹ Γ₀ as the frame's
    acceleration. Needs ``configure_task`` at the same q. Returns OK or NONFINITE_V."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    o, _ = os_views(buf, m.nb, m.nv)
    tau0, out = borrow(tau0), borrow(out)
    if tau0.shape[0] != m.nv or out.shape[0] != m.nv or not all_finite(tau0):
        return NONFINITE_V
    w.vel[:] = 0.0
    w.coriolis[:] = 0.0
    w.gyro[:] = 0.0
    w.alpha_base[:] = 0.0
    for i in range(m.nv):
        w.tau[i] = tau0[i]
    free_frame_acceleration(m, c, w, s, o, body, o.a_vel)  # J A⁻¹ Γ₀
    for a in range(k):
        sv = 0.0
        for b in range(6):
            sv += o.S[a, b] * o.a_vel[b]
        o.x6[a] = sv
    for a in range(k):  # F = Λ S J A⁻¹ Γ₀ = J̄_Sᵀ Γ₀
        sv = 0.0
        for b in range(k):
            sv += o.Lam[a, b] * o.x6[b]
        o.y6[a] = sv
    for b in range(6):  # Sᵀ F
        sv = 0.0
        for a in range(k):
            sv += o.S[a, b] * o.y6[a]
        o.x6[b] = sv
    for i in range(m.nv):
        sv = tau0[i]
        for b in range(6):
            sv -= o.J[b, i] * o.x6[b]
        out[i] = sv
    return OK
