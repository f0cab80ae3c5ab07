"""Analytic derivatives of the hybrid dynamics (doc/theory/derivatives.md, equations (D1)-(D16)).

The hybrid recursion (``dynamics.py``) maps (q, v, qdd_a, T_p) to (T_a, qdd_p). Its partial
derivatives follow from those of inverse dynamics r(q, v, qdd) (Carpentier & Mansard 2018) taken
at the full acceleration, and from the implicit-function theorem on the passive rows
r_p(q, v, qdd_a, qdd_p) = T_p (D12)-(D16). One compiled call does it all:

1. ``kinematic_pass``   (D2)-(D5)   base-to-tip: world placements, H*(k) in world axes, V(k),
   world inertias, and the velocity-variation matrices B(k); tip-to-base their composites.
2. ``mass_matrix_fill`` (D9)        M from the composite inertias (CRBA).
3. ``force_pass``       (D3), (D6)  base-to-tip accelerations, tip-to-base composite forces
   (twice when there are passive joints: first with qdd_p = 0, then at qdd_p of (D12)).
4. ``rnea_partials``    (D7)-(D10)  dr/dq and dr/dv, one O(depth) walk per body.
5. ``hybrid_partials``  (D12)-(D16) the mixed partition: Cholesky of M_pp, products.

Everything is in world (root) axes, where a perturbation of q_j moves the subtree of j rigidly
and the Jacobian columns of joint j are its H*(j) (D1). Columns over q are over the tangent space
(v-space): for a floating joint the perturbation is the body twist of ``RobotModel.integrate``
(Pinocchio's convention). Rows of the ``*_active`` / ``*_passive`` blocks are in the order of
``model.active_dofs`` / ``model.passive_dofs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, types

from .buffers import numpy_views, take
from .dynamics import (
    NONFINITE_INPUT,
    NONFINITE_Q,
    NONFINITE_V,
    OK,
    WRONG_LENGTH,
    HybridDynamics,
    SingularPassiveInertiaError,
    Workspace,
    all_finite,
    const_views,
    int_views,
    joint_transforms,
    model_workspace,
)
from .model import RobotModel
from .spatial import FAST, cross_force, cross_motion, xform_inertia_transpose

__all__ = [
    "HybridDerivatives",
    "DerivativesWorkspace",
    "hybrid_dynamics_derivatives",
    "add_passive_force_derivatives",
    "closed_loop_derivatives",
]


# ================================================================ buffer layout
class DWork(NamedTuple):
    """Per-body world-frame quantities, the RNEA partials, and the results (views of one
    flat buffer)."""

    E_up: np.ndarray  # parent-to-body transforms (joint_transforms writes them)
    r_up: np.ndarray
    E: np.ndarray  # world-to-body rotation
    p: np.ndarray  # body origin in world axes
    S: np.ndarray  # H*(k) in world axes (nb, 6, 6)
    vel: np.ndarray  # V(k), world
    acc: np.ndarray  # alpha(k), world, with the base acceleration [0; -g]
    inertia: np.ndarray  # M(k) in world axes about the world origin
    IC: np.ndarray  # composite inertias (D5)
    BC: np.ndarray  # composite velocity variations (D5)
    F: np.ndarray  # composite forces (D6)
    A: np.ndarray  # IC(k) H*(k)
    Bt: np.ndarray  # BC(k)^T H*(k)
    W: np.ndarray  # (nv, 6) per column: w of (D7)
    U: np.ndarray  # u of (D7)
    C: np.ndarray  # c of (D8)
    Phi: np.ndarray  # ancestor terms of (D7)
    Psi: np.ndarray  # ancestor terms of (D8)
    qdd: np.ndarray
    tau: np.ndarray
    dr_dq: np.ndarray  # (nv, nv)
    dr_dv: np.ndarray
    M: np.ndarray
    L: np.ndarray  # (npas, npas): Cholesky factor of M_pp, then its inverse factor
    tau_active: np.ndarray
    qdd_passive: np.ndarray
    dtau_active_dq: np.ndarray
    dtau_active_dv: np.ndarray
    dtau_active_dqdd_active: np.ndarray
    dtau_active_dtau_passive: np.ndarray
    dqdd_passive_dq: np.ndarray
    dqdd_passive_dv: np.ndarray
    dqdd_passive_dqdd_active: np.ndarray
    dqdd_passive_dtau_passive: np.ndarray
    R: np.ndarray  # scratch 3x3 (joint_transforms)
    T6: np.ndarray  # scratch 6x6
    x6: np.ndarray
    y6: np.ndarray
    rhs: np.ndarray  # (npas,)


@njit(cache=True, inline="always")
def dwork_views(work, nb, nv, na, npas):
    E_up, o = take(work, 0, (nb, 3, 3))
    r_up, o = take(work, o, (nb, 3))
    E, o = take(work, o, (nb, 3, 3))
    p, o = take(work, o, (nb, 3))
    S, o = take(work, o, (nb, 6, 6))
    vel, o = take(work, o, (nb, 6))
    acc, o = take(work, o, (nb, 6))
    inertia, o = take(work, o, (nb, 6, 6))
    IC, o = take(work, o, (nb, 6, 6))
    BC, o = take(work, o, (nb, 6, 6))
    F, o = take(work, o, (nb, 6))
    A, o = take(work, o, (nb, 6, 6))
    Bt, o = take(work, o, (nb, 6, 6))
    W, o = take(work, o, (nv, 6))
    U, o = take(work, o, (nv, 6))
    C, o = take(work, o, (nv, 6))
    Phi, o = take(work, o, (nv, 6))
    Psi, o = take(work, o, (nv, 6))
    qdd, o = take(work, o, (nv,))
    tau, o = take(work, o, (nv,))
    dr_dq, o = take(work, o, (nv, nv))
    dr_dv, o = take(work, o, (nv, nv))
    M, o = take(work, o, (nv, nv))
    L, o = take(work, o, (npas, npas))
    tau_active, o = take(work, o, (na,))
    qdd_passive, o = take(work, o, (npas,))
    ta_q, o = take(work, o, (na, nv))
    ta_v, o = take(work, o, (na, nv))
    ta_a, o = take(work, o, (na, na))
    ta_t, o = take(work, o, (na, npas))
    qp_q, o = take(work, o, (npas, nv))
    qp_v, o = take(work, o, (npas, nv))
    qp_a, o = take(work, o, (npas, na))
    qp_t, o = take(work, o, (npas, npas))
    R, o = take(work, o, (3, 3))
    T6, o = take(work, o, (6, 6))
    x6, o = take(work, o, (6,))
    y6, o = take(work, o, (6,))
    rhs, o = take(work, o, (npas,))
    return DWork(E_up, r_up, E, p, S, vel, acc, inertia, IC, BC, F, A, Bt, W, U, C, Phi, Psi,
                 qdd, tau, dr_dq, dr_dv, M, L, tau_active, qdd_passive, ta_q, ta_v, ta_a, ta_t,
                 qp_q, qp_v, qp_a, qp_t, R, T6, x6, y6, rhs), o


@njit(cache=True)
def dwork_size(nb, nv, na, npas):
    return dwork_views(np.empty(0), nb, nv, na, npas)[1]


# ================================================================ compiled kernels
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def motion_to_world(E, p, m, out):
    """out = X^-1 m: a body motion vector in world axes about the world origin,
    [E^T m_ang; E^T m_lin + p x E^T m_ang]."""
    for a in range(3):
        out[a] = E[0, a] * m[0] + E[1, a] * m[1] + E[2, a] * m[2]
        out[3 + a] = E[0, a] * m[3] + E[1, a] * m[4] + E[2, a] * m[5]
    w0, w1, w2 = out[0], out[1], out[2]
    out[3] += p[1] * w2 - p[2] * w1
    out[4] += p[2] * w0 - p[0] * w2
    out[5] += p[0] * w1 - p[1] * w0


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def dot6(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def col_dot(A, a, y):
    """A[:, a] . y (a column of a 6x6 block with a 6-vector)."""
    return (A[0, a] * y[0] + A[1, a] * y[1] + A[2, a] * y[2] + A[3, a] * y[3] + A[4, a] * y[4]
            + A[5, a] * y[5])


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def col_col(A, a, B, b):
    """A[:, a] . B[:, b]."""
    return (A[0, a] * B[0, b] + A[1, a] * B[1, b] + A[2, a] * B[2, b] + A[3, a] * B[3, b]
            + A[4, a] * B[4, b] + A[5, a] * B[5, b])


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_col_add(Mx, B, b, y, out):
    """out = y + Mx B[:, b] (6x6 times a column)."""
    for a in range(6):
        out[a] = y[a] + (Mx[a, 0] * B[0, b] + Mx[a, 1] * B[1, b] + Mx[a, 2] * B[2, b]
                         + Mx[a, 3] * B[3, b] + Mx[a, 4] * B[4, b] + Mx[a, 5] * B[5, b])


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_vec2(A, x, B, y, out):
    """out += A x + B y (6x6 blocks)."""
    for a in range(6):
        s = 0.0
        for b in range(6):
            s += A[a, b] * x[b] + B[a, b] * y[b]
        out[a] += s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def kinematic_pass(m, c, q, v, w):
    """(D2), (D4), (D5): world placements, H*(k) and V(k) in world axes, world inertias, the
    velocity variations B(k) = V x* M - M V x + (M V) x-bar*, and the composites IC, BC."""
    joint_transforms(m, c, q, w, w)
    E, p, Sx, V, x = w.E, w.p, w.S, w.vel, w.x6
    for i in range(m.nb):
        par, Ei, pi, Eu, ru = m.parent[i], E[i], p[i], w.E_up[i], w.r_up[i]
        if par < 0:  # the root frame is the world
            for a in range(3):
                pi[a] = ru[a]
                for b in range(3):
                    Ei[a, b] = Eu[a, b]
            for a in range(6):
                V[i, a] = 0.0
        else:  # E(k) = E_up(k) E(k+1), p(k) = p(k+1) + E(k+1)^T r_up(k)
            Ep, pp = E[par], p[par]
            for a in range(3):
                pi[a] = pp[a] + Ep[0, a] * ru[0] + Ep[1, a] * ru[1] + Ep[2, a] * ru[2]
                for b in range(3):
                    Ei[a, b] = Eu[a, 0] * Ep[0, b] + Eu[a, 1] * Ep[1, b] + Eu[a, 2] * Ep[2, b]
            for a in range(6):
                V[i, a] = V[par, a]
        vs, Si = m.v_start[i], Sx[i]
        for col in range(m.nv_joint[i]):  # H*(k) in world axes (D1); V(k) (D2)
            for a in range(6):
                x[a] = c.S[i, a, col]
            motion_to_world(Ei, pi, x, Si[:, col])
            for a in range(6):
                V[i, a] += Si[a, col] * v[vs + col]
        Iw = w.inertia[i]  # M(k) in world axes: X^T M X with X the world-to-body transform
        Iw[:] = 0.0
        xform_inertia_transpose(Ei, pi, c.inertia[i], w.T6, Iw)
        w.IC[i][:] = Iw
        B, T = w.BC[i], w.T6  # (D4): B = N + N^T + h x-bar*, N = V x* M
        for col in range(6):
            cross_force(V[i], Iw[:, col], T[:, col])
        h = w.y6
        for a in range(6):
            h[a] = (Iw[a, 0] * V[i, 0] + Iw[a, 1] * V[i, 1] + Iw[a, 2] * V[i, 2]
                    + Iw[a, 3] * V[i, 3] + Iw[a, 4] * V[i, 4] + Iw[a, 5] * V[i, 5])
        for a in range(6):
            for b in range(6):
                B[a, b] = T[a, b] + T[b, a]
        # h x-bar*: the matrix of x -> x x* h = [-h_ang~ , -h_lin~; -h_lin~, 0]
        for a in range(3):
            for b in range(3):
                B[a, b] -= skew_entry(h[0], h[1], h[2], a, b)
                B[a, 3 + b] -= skew_entry(h[3], h[4], h[5], a, b)
                B[3 + a, b] -= skew_entry(h[3], h[4], h[5], a, b)
    for i in range(m.nb - 1, -1, -1):  # composites (D5)
        par = m.parent[i]
        if par >= 0:
            w.IC[par] += w.IC[i]
            w.BC[par] += w.BC[i]
    for i in range(m.nb):  # A(k) = IC(k) H*(k), Bt(k) = BC(k)^T H*(k)
        Si, IC, BC = Sx[i], w.IC[i], w.BC[i]
        for col in range(m.nv_joint[i]):
            for a in range(6):
                s1 = 0.0
                s2 = 0.0
                for b in range(6):
                    s1 += IC[a, b] * Si[b, col]
                    s2 += BC[b, a] * Si[b, col]
                w.A[i, a, col] = s1
                w.Bt[i, a, col] = s2


@njit(cache=True, inline="always")
def skew_entry(x, y, z, a, b):
    """Entry (a, b) of the cross-product matrix of (x, y, z)."""
    if a == b:
        return 0.0
    if a == 0:
        return -z if b == 1 else y
    if a == 1:
        return z if b == 0 else -x
    return -y if b == 0 else x


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mass_matrix_fill(m, w):
    """(D9): M[k, j] = H(k) IC(k) H*(j) for j an ancestor of k (or k), and its transpose."""
    M = w.M
    M[:] = 0.0
    for k in range(m.nb):
        j = k
        while j >= 0:
            for a in range(m.nv_joint[k]):
                ra = m.v_start[k] + a
                for b in range(m.nv_joint[j]):
                    cb = m.v_start[j] + b
                    val = col_col(w.A[k], a, w.S[j], b)
                    M[ra, cb] = val
                    M[cb, ra] = val
            j = m.parent[j]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def force_pass(m, c, w):
    """(D3), (D6): alpha(k) = alpha(k+1) + H*(k) qdd(k) + V(k) x H*(k) v(k) (world axes; the
    base acceleration [0; -g]), f(k) = M(k) alpha(k) + V(k) x* M(k) V(k), F(k) = f(k) + the
    children's F, tau = H F."""
    x, y = w.x6, w.y6
    for i in range(m.nb):
        par, Si, vs = m.parent[i], w.S[i], m.v_start[i]
        alpha = w.acc[i]
        for a in range(6):
            alpha[a] = w.acc[par, a] if par >= 0 else c.gravity_base[a]
            x[a] = w.vel[i, a] - (w.vel[par, a] if par >= 0 else 0.0)  # H*(k) v(k)
        cross_motion(w.vel[i], x, y)
        for a in range(6):
            alpha[a] += y[a]
        for col in range(m.nv_joint[i]):
            for a in range(6):
                alpha[a] += Si[a, col] * w.qdd[vs + col]
        Iw = w.inertia[i]
        for a in range(6):
            y[a] = (Iw[a, 0] * w.vel[i, 0] + Iw[a, 1] * w.vel[i, 1] + Iw[a, 2] * w.vel[i, 2]
                    + Iw[a, 3] * w.vel[i, 3] + Iw[a, 4] * w.vel[i, 4] + Iw[a, 5] * w.vel[i, 5])
        cross_force(w.vel[i], y, w.F[i])
        for a in range(6):
            w.F[i, a] += (Iw[a, 0] * alpha[0] + Iw[a, 1] * alpha[1] + Iw[a, 2] * alpha[2]
                          + Iw[a, 3] * alpha[3] + Iw[a, 4] * alpha[4] + Iw[a, 5] * alpha[5])
    for i in range(m.nb - 1, -1, -1):
        par, vs = m.parent[i], m.v_start[i]
        for col in range(m.nv_joint[i]):
            w.tau[vs + col] = col_dot(w.S[i], col, w.F[i])
        if par >= 0:
            for a in range(6):
                w.F[par, a] += w.F[i, a]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def rnea_partials(m, c, w):
    """(D7), (D8): dr/dq and dr/dv. Per column (joint j, its world column s): w = V(j+1) x s,
    u = alpha(j+1) x s + V(j+1) x w, c = (V(j+1) + V(j)) x s; then for k in the subtree of j
    dr_k = H(k) [IC(k) u + BC(k) w] (q), H(k) [IC(k) c + BC(k) s] (v), and for k an ancestor
    dr_k = H(k) Phi(j), Phi = s x* F(j) + IC(j) u + BC(j) w; Psi = IC(j) c + BC(j) s."""
    x = w.x6
    for j in range(m.nb):
        par, Sj = m.parent[j], w.S[j]
        for b in range(m.nv_joint[j]):
            d = m.v_start[j] + b
            Wd, Ud, Cd, Phd, Psd = w.W[d], w.U[d], w.C[d], w.Phi[d], w.Psi[d]
            s = w.y6
            for a in range(6):
                s[a] = Sj[a, b]
            if par >= 0:
                cross_motion(w.vel[par], s, Wd)          # w = V(j+1) x s
                cross_motion(w.acc[par], s, Ud)          # alpha(j+1) x s
                cross_motion(w.vel[par], Wd, x)
                for a in range(6):
                    Ud[a] += x[a]                        # u (D7)
                    x[a] = w.vel[par, a] + w.vel[j, a]
            else:
                for a in range(6):
                    Wd[a] = 0.0
                    x[a] = w.vel[j, a]
                cross_motion(c.gravity_base, s, Ud)
            cross_motion(x, s, Cd)                       # c (D8)
            cross_force(s, w.F[j], Phd)                  # Phi (D7)
            mat_vec2(w.IC[j], Ud, w.BC[j], Wd, Phd)
            for a in range(6):
                Psd[a] = 0.0
            mat_vec2(w.IC[j], Cd, w.BC[j], s, Psd)       # Psi (D8)
    Rq, Rv = w.dr_dq, w.dr_dv
    Rq[:] = 0.0
    Rv[:] = 0.0
    for k in range(m.nb):
        Ak, Bk = w.A[k], w.Bt[k]
        j = k
        while j >= 0:
            Sj = w.S[j]
            for a in range(m.nv_joint[k]):
                ra = m.v_start[k] + a
                for b in range(m.nv_joint[j]):
                    cb = m.v_start[j] + b
                    Rq[ra, cb] = col_dot(Ak, a, w.U[cb]) + col_dot(Bk, a, w.W[cb])
                    Rv[ra, cb] = col_dot(Ak, a, w.C[cb]) + col_col(Bk, a, Sj, b)
                    if j != k:
                        Rq[cb, ra] = col_dot(Sj, b, w.Phi[ra])
                        Rv[cb, ra] = col_dot(Sj, b, w.Psi[ra])
            j = m.parent[j]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def cholesky_passive(m, w, tol):
    """M_pp = L L^T in w.L (lower); returns the index of a failing pivot's DOF or -1."""
    n, pd, L = m.npas, m.passive_dofs, w.L
    for j in range(n):
        s = w.M[pd[j], pd[j]]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not (s > tol):
            return pd[j]
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            s = w.M[pd[i], pd[j]]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
        for i in range(j):
            L[i, j] = 0.0
    return -1


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def solve_passive(m, w, x):
    """x <- M_pp^-1 x with the Cholesky factor in w.L."""
    n, L = m.npas, w.L
    for i in range(n):
        s = x[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def gemm_rows(alpha, A, B, rows_b, C):
    """C += alpha A B[rows_b, :] (A: n x len(rows_b); i-k-j order: contiguous inner loop)."""
    for i in range(A.shape[0]):
        Ci = C[i]
        for k in range(A.shape[1]):
            aik = alpha * A[i, k]
            Bk = B[rows_b[k]]
            for j in range(C.shape[1]):
                Ci[j] += aik * Bk[j]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hybrid_partials(m, w):
    """(D13)-(D16) from the Cholesky factor of M_pp in w.L:
    Minv = M_pp^-1, dqdd_p/dx = -Minv dr_p/dx (x = q, v), dqdd_p/dqdd_a = -Minv M_pa,
    dqdd_p/dT_p = Minv, dT_a/dx = dr_a/dx + M_ap dqdd_p/dx, dT_a/dqdd_a = M_aa + M_ap
    dqdd_p/dqdd_a, dT_a/dT_p = M_ap Minv."""
    n, na, pd, ad, L = m.npas, m.na, m.passive_dofs, m.active_dofs, w.L
    Mi = w.dqdd_passive_dtau_passive
    for j in range(n):  # L <- L^-1 (lower triangular, in place, column by column)
        L[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * L[k, j]
            L[i, j] = s / L[i, i]
    for i in range(n):  # Minv = L^-T L^-1 (D14)
        for j in range(i, n):
            s = 0.0
            for k in range(j, n):
                s += L[k, i] * L[k, j]
            Mi[i, j] = s
            Mi[j, i] = s
    qq, qv, qa = w.dqdd_passive_dq, w.dqdd_passive_dv, w.dqdd_passive_dqdd_active
    qq[:] = 0.0
    qv[:] = 0.0
    gemm_rows(-1.0, Mi, w.dr_dq, pd, qq)  # (D13)
    gemm_rows(-1.0, Mi, w.dr_dv, pd, qv)
    for i in range(n):  # (D13) with x = qdd_a: -Minv M_pa
        for c in range(na):
            s = 0.0
            for k in range(n):
                s -= Mi[i, k] * w.M[pd[k], ad[c]]
            qa[i, c] = s
    tq, tv = w.dtau_active_dq, w.dtau_active_dv
    ta, tt = w.dtau_active_dqdd_active, w.dtau_active_dtau_passive
    for r in range(na):  # (D15), (D16)
        Rq, Rv, Mr = w.dr_dq[ad[r]], w.dr_dv[ad[r]], w.M[ad[r]]
        tqr, tvr = tq[r], tv[r]
        for j in range(m.nv):
            tqr[j] = Rq[j]
            tvr[j] = Rv[j]
        for c in range(na):
            ta[r, c] = Mr[ad[c]]
        for k in range(n):
            mk = Mr[pd[k]]
            qqk, qvk, qak = qq[k], qv[k], qa[k]
            for j in range(m.nv):
                tqr[j] += mk * qqk[j]
                tvr[j] += mk * qvk[j]
            for c in range(na):
                ta[r, c] += mk * qak[c]
        for c in range(n):
            s = 0.0
            for k in range(n):
                s += Mr[pd[k]] * Mi[k, c]
            tt[r, c] = s


# run_derivatives: one fixed signature, like dynamics.run_steps
_VECTOR = types.float64[::1]
RUN_SIGNATURE = types.int64(types.int64[::1], _VECTOR, _VECTOR, _VECTOR, _VECTOR, _VECTOR,
                            _VECTOR)


@njit(RUN_SIGNATURE, cache=True, error_model="numpy", fastmath=FAST)
def run_derivatives(ints, consts, work, q, v, qdd_active, tau_passive):
    """The whole computation of (D1)-(D16) in one call; returns a status code of
    ``dynamics`` (OK, NONFINITE_*, WRONG_LENGTH) or the DOF whose pivot of M_pp is singular."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _ = dwork_views(work, m.nb, m.nv, m.na, m.npas)
    if (q.shape[0] != m.nq or v.shape[0] != m.nv or qdd_active.shape[0] != m.na
            or tau_passive.shape[0] != m.npas):
        return WRONG_LENGTH
    if not all_finite(q):
        return NONFINITE_Q
    if not all_finite(v):
        return NONFINITE_V
    if not (all_finite(qdd_active) and all_finite(tau_passive)):
        return NONFINITE_INPUT
    kinematic_pass(m, c, q, v, w)
    mass_matrix_fill(m, w)
    for k in range(m.na):
        w.qdd[m.active_dofs[k]] = qdd_active[k]
    for k in range(m.npas):
        w.qdd[m.passive_dofs[k]] = 0.0
    force_pass(m, c, w)
    if m.npas > 0:  # (D12): M_pp qdd_p = T_p - r_p(q, v, [qdd_a, 0])
        bad = cholesky_passive(m, w, c.tol[0])
        if bad >= 0:
            return bad
        for k in range(m.npas):
            w.rhs[k] = tau_passive[k] - w.tau[m.passive_dofs[k]]
        solve_passive(m, w, w.rhs)
        for k in range(m.npas):
            w.qdd[m.passive_dofs[k]] = w.rhs[k]
            w.qdd_passive[k] = w.rhs[k]
        force_pass(m, c, w)
    for k in range(m.na):
        w.tau_active[k] = w.tau[m.active_dofs[k]]
    rnea_partials(m, c, w)
    hybrid_partials(m, w)
    return OK


# ================================================================ Python front end
@dataclass(slots=True)
class HybridDerivatives:
    """T_a, qdd_p and their partials (D13)-(D16). Rows in ``model.active_dofs`` /
    ``model.passive_dofs`` order; ``*_dq`` / ``*_dv`` columns over the nv tangent directions."""

    tau_active: np.ndarray
    qdd_passive: np.ndarray
    dtau_active_dq: np.ndarray
    dtau_active_dv: np.ndarray
    dtau_active_dqdd_active: np.ndarray
    dtau_active_dtau_passive: np.ndarray
    dqdd_passive_dq: np.ndarray
    dqdd_passive_dv: np.ndarray
    dqdd_passive_dqdd_active: np.ndarray
    dqdd_passive_dtau_passive: np.ndarray

    def copy(self) -> HybridDerivatives:
        return HybridDerivatives(*(getattr(self, f).copy() for f in self.__slots__))


_RESULT_FIELDS = HybridDerivatives.__slots__


class DerivativesWorkspace:
    """Allocation-free derivatives of the hybrid dynamics for one model (the loop path).

    ``compute(q, v, qdd_active, tau_passive)`` runs (D1)-(D16) in one compiled call and writes
    into the preallocated ``self.result`` (overwritten by the next call: copy what you keep).
    The inverse-dynamics partials at the full acceleration are views too: ``dr_dq``, ``dr_dv``
    and the mass matrix ``M`` (all DOF, model order). It shares the model's topology and
    constant buffers with the ``HybridDynamics`` of ``shared`` (a ``dynamics.Workspace``).
    Not thread-safe: give each thread its own.
    """

    def __init__(self, model: RobotModel, shared: Workspace | None = None) -> None:
        self.model = model
        hd: HybridDynamics = (shared if shared is not None else Workspace(model)).hybrid("model")
        self._hybrid = hd
        ints, consts, _ = hd.buffers
        sizes = (model.nb, model.nv, len(hd.active_dofs), len(hd.passive_dofs))
        self._ints, self._consts = ints, consts
        self._work = np.zeros(dwork_size(*sizes))
        views = numpy_views(dwork_views(self._work, *sizes)[0], self._work)
        self.dr_dq, self.dr_dv, self.M = views.dr_dq, views.dr_dv, views.M
        self.qdd = views.qdd
        self.result = HybridDerivatives(*(getattr(views, f) for f in _RESULT_FIELDS))

    def compute(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                tau_passive: np.ndarray) -> HybridDerivatives:
        """T_a, qdd_p and the eight partials at (q, v, qdd_a, T_p); results in ``self.result``."""
        try:
            status = run_derivatives(self._ints, self._consts, self._work, q, v, qdd_active,
                                     tau_passive)
        except TypeError:  # not writeable C-contiguous float64 vectors: convert, then retry
            hd, m = self._hybrid, self.model
            return self.compute(hd.as_vector(q, m.nq, "q"), hd.as_vector(v, m.nv, "v"),
                                hd.as_vector(qdd_active, len(hd.active_dofs), "qdd_active"),
                                hd.as_vector(tau_passive, len(hd.passive_dofs), "tau_passive"))
        if status != OK:
            self._raise(status, q, v, qdd_active, tau_passive)
        return self.result

    def _raise(self, status: int, q, v, qa, tp) -> None:
        m = self.model
        if status >= 0:  # the DOF whose pivot of M_pp failed
            body = int(np.searchsorted(m.v_start, status, side="right") - 1)
            raise SingularPassiveInertiaError(
                f"passive joint '{m.joint_names[body]}' moves a subtree with (near) zero "
                "inertia: M_pp is singular, its acceleration is undetermined")
        self._hybrid.raise_for_status(status, q=q, v=v, qa=qa, tp=tp)


_workspaces: dict[RobotModel, DerivativesWorkspace] = {}
_CACHED_MODELS = 16


def _shared(model: RobotModel) -> DerivativesWorkspace:
    ws = _workspaces.get(model)
    if ws is None:
        while len(_workspaces) >= _CACHED_MODELS:
            _workspaces.pop(next(iter(_workspaces)), None)
        ws = _workspaces[model] = model_workspace(model).part(DerivativesWorkspace)
    return ws


def hybrid_dynamics_derivatives(model: RobotModel, q: np.ndarray, v: np.ndarray,
                                qdd_active: np.ndarray, tau_passive: np.ndarray,
                                workspace: DerivativesWorkspace | None = None
                                ) -> HybridDerivatives:
    """T_a, qdd_p of the hybrid dynamics and their partials with respect to q (tangent space),
    v, qdd_a and T_p (doc/theory/derivatives.md); fresh copies.

    ``workspace``: a ``DerivativesWorkspace(model)`` to use (default: one shared per model);
    in a loop call ``workspace.compute`` directly (no copies)."""
    if workspace is None:
        workspace = _shared(model)
    elif workspace.model is not model and not (
            workspace.model.inertia is model.inertia
            and np.array_equal(workspace.model.passive_joint_mask, model.passive_joint_mask)):
        raise ValueError("workspace was built for another robot or passive set")
    return workspace.compute(q, v, qdd_active, tau_passive).copy()


def add_passive_force_derivatives(result: HybridDerivatives, dtau_passive_dq: np.ndarray,
                                  dtau_passive_dv: np.ndarray) -> HybridDerivatives:
    """Close the loop T_p = T_p(q, v) (D17): adds dX/dT_p dT_p/dq to dX/dq and the same for v
    (X = T_a, qdd_p), in place; returns ``result``."""
    for x in ("tau_active", "qdd_passive"):
        d_dt = getattr(result, f"d{x}_dtau_passive")
        getattr(result, f"d{x}_dq")[:] += d_dt @ dtau_passive_dq
        getattr(result, f"d{x}_dv")[:] += d_dt @ dtau_passive_dv
    return result


def closed_loop_derivatives(model: RobotModel, q: np.ndarray, v: np.ndarray,
                            qdd_active: np.ndarray, passive_forces,
                            workspace: DerivativesWorkspace | None = None) -> HybridDerivatives:
    """The hybrid dynamics and its partials with the passive joints' forces given by a
    ``passive_forces.PassiveForceModel`` (T_p = T_p(q, v)): the total derivatives (D17)."""
    tau_p = passive_forces(q, v)
    dq, dv = passive_forces.derivatives(q, v)
    res = hybrid_dynamics_derivatives(model, q, v, qdd_active, tau_p, workspace)
    return add_passive_force_derivatives(res, dq, dv)
