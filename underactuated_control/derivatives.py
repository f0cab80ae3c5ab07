"""Analytic derivatives of the hybrid dynamics (doc/theory/derivatives.md, equations (D1)-(D17)).

The hybrid recursion (``dynamics.py``) maps (q, v, qdd_a, T_p) to (T_a, qdd_p). Its partial
derivatives follow from those of inverse dynamics r(q, v, qdd) (Carpentier & Mansard 2018) taken
at the full acceleration, and from the implicit-function theorem on the passive rows
r_p(q, v, qdd_a, qdd_p) = T_p (D10). One compiled call, ``run_derivatives``, does it all:

1. ``kinematic_pass``   (D1)-(D5)    base-to-tip: world placements, H*(k) in world axes, V(k),
   world inertias, the velocity variations B(k); tip-to-base their composites IC, BC.
2. ``mass_matrix_fill`` (D9)         M from the composite inertias (CRBA).
3. ``force_pass``       (D3), (D6)   accelerations and composite forces: at qdd_p = 0, then, after
   ``cholesky_passive`` / ``solve_passive`` (D11), at the full acceleration (D12).
4. ``passive_inverse``  (D14)        M_pp^-1 from the Cholesky factor.
5. ``rnea_partials``    (D7), (D8)   dr/dq and dr/dv, rows over ancestors and subtrees.
6. ``hybrid_partials``  (D13)-(D16)  the mixed partition's products (``gather_blocks`` and BLAS
   in ``DerivativesWorkspace._products`` for large N).

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
    """Per-body world-frame quantities, the RNEA partials, the results and scratch (views of
    one flat buffer). ``Z*`` blocks are per-DOF 6-vectors stored as (6, nv): rows of the
    partials are then contiguous 6-term combinations of them (vectorised)."""

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
    ZS: np.ndarray  # (6, nv): H*(k) columns
    ZA: np.ndarray  # IC(k) H*(k) columns
    ZB: np.ndarray  # BC(k)^T H*(k) columns
    ZW: np.ndarray  # w of (D7)
    ZU: np.ndarray  # u of (D7)
    ZC: np.ndarray  # c of (D8)
    ZPhi: np.ndarray  # Phi of (D7)
    ZPsi: np.ndarray  # Psi of (D8)
    qdd: np.ndarray
    tau: np.ndarray
    dr_dq: np.ndarray  # (nv, nv)
    dr_dv: np.ndarray
    M: np.ndarray
    L: np.ndarray  # (npas, npas): Cholesky factor of M_pp
    X: np.ndarray  # (npas, npas): L^-1
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
    Gq: np.ndarray  # BLAS path: -dr_p/dq, -dr_p/dv, -M_pa, M_ap, dr_a/dq, dr_a/dv, M_aa
    Gv: np.ndarray
    Gpa: np.ndarray
    Map: np.ndarray
    Raq: np.ndarray
    Rav: np.ndarray
    Maa: np.ndarray
    R: np.ndarray  # scratch 3x3 (joint_transforms)
    T6: np.ndarray  # scratch 6x6
    x6: np.ndarray
    y6: np.ndarray
    z6: np.ndarray
    rhs: np.ndarray  # (npas,)


@njit(cache=True, inline="always")
def dwork_layout(work, nb, nv, na, npas, blas):
    """(DWork, end); the BLAS-path blocks are empty unless ``blas``."""
    gp, ga = (npas, na) if blas else (0, 0)
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
    ZS, o = take(work, o, (6, nv))
    ZA, o = take(work, o, (6, nv))
    ZB, o = take(work, o, (6, nv))
    ZW, o = take(work, o, (6, nv))
    ZU, o = take(work, o, (6, nv))
    ZC, o = take(work, o, (6, nv))
    ZPhi, o = take(work, o, (6, nv))
    ZPsi, o = take(work, o, (6, nv))
    qdd, o = take(work, o, (nv,))
    tau, o = take(work, o, (nv,))
    dr_dq, o = take(work, o, (nv, nv))
    dr_dv, o = take(work, o, (nv, nv))
    M, o = take(work, o, (nv, nv))
    L, o = take(work, o, (npas, npas))
    X, o = take(work, o, (npas, npas))
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
    Gq, o = take(work, o, (gp, nv))
    Gv, o = take(work, o, (gp, nv))
    Gpa, o = take(work, o, (gp, ga))
    Map, o = take(work, o, (ga, gp))
    Raq, o = take(work, o, (ga, nv))
    Rav, o = take(work, o, (ga, nv))
    Maa, o = take(work, o, (ga, ga))
    R, o = take(work, o, (3, 3))
    T6, o = take(work, o, (6, 6))
    x6, o = take(work, o, (6,))
    y6, o = take(work, o, (6,))
    z6, o = take(work, o, (6,))
    rhs, o = take(work, o, (npas,))
    return DWork(E_up, r_up, E, p, S, vel, acc, inertia, IC, BC, F, ZS, ZA, ZB, ZW, ZU, ZC,
                 ZPhi, ZPsi, qdd, tau, dr_dq, dr_dv, M, L, X, tau_active, qdd_passive, ta_q,
                 ta_v, ta_a, ta_t, qp_q, qp_v, qp_a, qp_t, Gq, Gv, Gpa, Map, Raq, Rav, Maa, R,
                 T6, x6, y6, z6, rhs), o


@njit(cache=True, inline="always")
def dwork_views(work, nb, nv, na, npas):
    """(DWork, end) of a buffer without the BLAS-path blocks (what ``run_derivatives`` takes)."""
    return dwork_layout(work, nb, nv, na, npas, 0)


@njit(cache=True)
def dwork_layout_size(nb, nv, na, npas, blas):
    return dwork_layout(np.empty(0), nb, nv, na, npas, blas)[1]


@njit(cache=True)
def dwork_size(nb, nv, na, npas):
    """Length of the buffer ``run_derivatives`` takes."""
    return dwork_layout(np.empty(0), nb, nv, na, npas, 0)[1]


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
def mat_vec2(A, x, B, y, out):
    """out = A x + B y (6x6 blocks)."""
    for a in range(6):
        s = 0.0
        for b in range(6):
            s += A[a, b] * x[b] + B[a, b] * y[b]
        out[a] = s


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
def kinematic_pass(m, c, q, v, w):
    """(D1), (D2), (D4), (D5): world placements, H*(k) and V(k) in world axes, world inertias,
    the velocity variations B(k), the composites IC, BC, and IC H*, BC^T H*."""
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
            motion_to_world(Ei, pi, x, w.y6)
            for a in range(6):
                Si[a, col] = w.y6[a]
                w.ZS[a, vs + col] = w.y6[a]
                V[i, a] += w.y6[a] * v[vs + col]
        Iw = w.inertia[i]  # M(k) in world axes: X^T M X with X the world-to-body transform
        Iw[:] = 0.0
        xform_inertia_transpose(Ei, pi, c.inertia[i], w.T6, Iw)
        w.IC[i][:] = Iw
        B, T, h = w.BC[i], w.T6, w.y6  # (D4): B = N + N^T + (M V) x-bar*, N = V x* M
        for col in range(6):
            for a in range(6):
                x[a] = Iw[a, col]
            cross_force(V[i], x, w.z6)
            for a in range(6):
                T[a, col] = w.z6[a]
        for a in range(6):
            h[a] = (Iw[a, 0] * V[i, 0] + Iw[a, 1] * V[i, 1] + Iw[a, 2] * V[i, 2]
                    + Iw[a, 3] * V[i, 3] + Iw[a, 4] * V[i, 4] + Iw[a, 5] * V[i, 5])
        for a in range(6):
            for b in range(6):
                B[a, b] = T[a, b] + T[b, a]
        # h x-bar*: the matrix of x -> x x* h = [-h_ang~, -h_lin~; -h_lin~, 0]
        for a in range(3):
            for b in range(3):
                B[a, b] -= skew_entry(h[0], h[1], h[2], a, b)
                B[a, 3 + b] -= skew_entry(h[3], h[4], h[5], a, b)
                B[3 + a, b] -= skew_entry(h[3], h[4], h[5], a, b)
    for i in range(m.nb - 1, -1, -1):  # composites (D5)
        par = m.parent[i]
        if par >= 0:
            ICp, BCp, ICi, BCi = w.IC[par], w.BC[par], w.IC[i], w.BC[i]
            for a in range(6):
                for b in range(6):
                    ICp[a, b] += ICi[a, b]
                    BCp[a, b] += BCi[a, b]
    for i in range(m.nb):  # IC(k) H*(k), BC(k)^T H*(k) (D9), (D7)
        Si, IC, BC, vs = Sx[i], w.IC[i], w.BC[i], m.v_start[i]
        for col in range(m.nv_joint[i]):
            for a in range(6):
                s1 = 0.0
                s2 = 0.0
                for b in range(6):
                    s1 += IC[a, b] * Si[b, col]
                    s2 += BC[b, a] * Si[b, col]
                w.ZA[a, vs + col] = s1
                w.ZB[a, vs + col] = s2


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def combine(out, lo, hi, a0, a1, a2, a3, a4, a5, Z):
    """out[d] = sum_a a_a Z[a, d] for d in [lo, hi) (contiguous: vectorised)."""
    for d in range(lo, hi):
        out[d] = (a0 * Z[0, d] + a1 * Z[1, d] + a2 * Z[2, d] + a3 * Z[3, d] + a4 * Z[4, d]
                  + a5 * Z[5, d])


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def combine2(out, lo, hi, a0, a1, a2, a3, a4, a5, Z, b0, b1, b2, b3, b4, b5, Y):
    """out[d] = sum_a a_a Z[a, d] + b_a Y[a, d] for d in [lo, hi)."""
    for d in range(lo, hi):
        out[d] = (a0 * Z[0, d] + a1 * Z[1, d] + a2 * Z[2, d] + a3 * Z[3, d] + a4 * Z[4, d]
                  + a5 * Z[5, d] + b0 * Y[0, d] + b1 * Y[1, d] + b2 * Y[2, d] + b3 * Y[3, d]
                  + b4 * Y[4, d] + b5 * Y[5, d])


@njit(cache=True, inline="always")
def ancestor_run(m, j):
    """The first body of the run of consecutive ancestors ending at j (their DOFs are one
    contiguous range)."""
    while m.parent[j] >= 0 and m.parent[j] == j - 1:
        j -= 1
    return j


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mass_matrix_fill(m, c, dof_end, w):
    """(D9): row k of M: H(k) IC(k) H*(j) over the ancestors j of k (and k), and
    H(k) IC(j) H*(j) over its descendants (dof_end[k]: end of the subtree's DOFs); plus the
    armature on the diagonal (``HybridDynamics``; 0 unless set)."""
    M, ZA, ZS = w.M, w.ZA, w.ZS
    M[:] = 0.0
    for k in range(m.nb):
        for a in range(m.nv_joint[k]):
            r = m.v_start[k] + a
            Mr = M[r]
            j = k
            while j >= 0:
                j0 = ancestor_run(m, j)
                combine(Mr, m.v_start[j0], m.v_start[j] + m.nv_joint[j], ZA[0, r], ZA[1, r],
                        ZA[2, r], ZA[3, r], ZA[4, r], ZA[5, r], ZS)
                j = m.parent[j0]
            combine(Mr, m.v_start[k] + m.nv_joint[k], dof_end[k], ZS[0, r], ZS[1, r], ZS[2, r],
                    ZS[3, r], ZS[4, r], ZS[5, r], ZA)
            Mr[r] += c.armature[k, a]


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
        par, vs, Si = m.parent[i], m.v_start[i], w.S[i]
        for col in range(m.nv_joint[i]):
            s = 0.0
            for a in range(6):
                s += Si[a, col] * w.F[i, a]
            w.tau[vs + col] = s
        if par >= 0:
            for a in range(6):
                w.F[par, a] += w.F[i, a]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def rnea_partials(m, c, dof_end, w):
    """(D7), (D8): dr/dq and dr/dv. Per column (joint j, its world column s): w = V(j+1) x s,
    u = alpha(j+1) x s + V(j+1) x w, c = (V(j+1) + V(j)) x s, Phi = s x* F(j) + IC(j) u
    + BC(j) w, Psi = IC(j) c + BC(j) s; then row k over its ancestors j (and k):
    H(k) [IC(k) u + BC(k) w] (q), H(k) [IC(k) c + BC(k) s] (v); over its descendants j:
    H(k) Phi(j) (q), H(k) Psi(j) (v)."""
    x, s, wv, u, cv = w.x6, w.y6, w.z6, w.T6[0], w.T6[1]
    phi, psi = w.T6[2], w.T6[3]
    for j in range(m.nb):
        par, Sj = m.parent[j], w.S[j]
        for b in range(m.nv_joint[j]):
            d = m.v_start[j] + b
            for a in range(6):
                s[a] = Sj[a, b]
            if par >= 0:
                cross_motion(w.vel[par], s, wv)          # w = V(j+1) x s
                cross_motion(w.acc[par], s, u)           # alpha(j+1) x s
                cross_motion(w.vel[par], wv, x)
                for a in range(6):
                    u[a] += x[a]                         # u (D7)
                    x[a] = w.vel[par, a] + w.vel[j, a]
            else:
                for a in range(6):
                    wv[a] = 0.0
                    x[a] = w.vel[j, a]
                cross_motion(c.gravity_base, s, u)
            cross_motion(x, s, cv)                       # c (D8)
            mat_vec2(w.IC[j], u, w.BC[j], wv, phi)
            cross_force(s, w.F[j], x)
            mat_vec2(w.IC[j], cv, w.BC[j], s, psi)       # Psi (D8)
            for a in range(6):
                w.ZW[a, d] = wv[a]
                w.ZU[a, d] = u[a]
                w.ZC[a, d] = cv[a]
                w.ZPhi[a, d] = phi[a] + x[a]             # Phi (D7)
                w.ZPsi[a, d] = psi[a]
    Rq, Rv, ZA, ZB, ZS = w.dr_dq, w.dr_dv, w.ZA, w.ZB, w.ZS
    Rq[:] = 0.0
    Rv[:] = 0.0
    for k in range(m.nb):
        for a in range(m.nv_joint[k]):
            r = m.v_start[k] + a
            a0, a1, a2, a3, a4, a5 = ZA[0, r], ZA[1, r], ZA[2, r], ZA[3, r], ZA[4, r], ZA[5, r]
            b0, b1, b2, b3, b4, b5 = ZB[0, r], ZB[1, r], ZB[2, r], ZB[3, r], ZB[4, r], ZB[5, r]
            j = k
            while j >= 0:
                j0 = ancestor_run(m, j)
                lo, hi = m.v_start[j0], m.v_start[j] + m.nv_joint[j]
                combine2(Rq[r], lo, hi, a0, a1, a2, a3, a4, a5, w.ZU, b0, b1, b2, b3, b4, b5,
                         w.ZW)
                combine2(Rv[r], lo, hi, a0, a1, a2, a3, a4, a5, w.ZC, b0, b1, b2, b3, b4, b5,
                         ZS)
                j = m.parent[j0]
            lo, hi = m.v_start[k] + m.nv_joint[k], dof_end[k]
            combine(Rq[r], lo, hi, ZS[0, r], ZS[1, r], ZS[2, r], ZS[3, r], ZS[4, r], ZS[5, r],
                    w.ZPhi)
            combine(Rv[r], lo, hi, ZS[0, r], ZS[1, r], ZS[2, r], ZS[3, r], ZS[4, r], ZS[5, r],
                    w.ZPsi)


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def cholesky_passive(m, w, tol):
    """M_pp = L L^T in w.L (lower, rows contiguous); returns the DOF of a failing pivot or -1."""
    n, pd, L = m.npas, m.passive_dofs, w.L
    L[:] = 0.0
    for j in range(n):
        Lj = L[j]
        s = w.M[pd[j], pd[j]]
        for k in range(j):
            s -= Lj[k] * Lj[k]
        if not (s > tol):
            return pd[j]
        Lj[j] = np.sqrt(s)
        inv = 1.0 / Lj[j]
        for i in range(j + 1, n):
            Li = L[i]
            s = w.M[pd[i], pd[j]]
            for k in range(j):
                s -= Li[k] * Lj[k]
            Li[j] = s * inv
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
def passive_inverse(m, w):
    """(D14): Minv = M_pp^-1 = X^T X with X = L^-1 (row-oriented, contiguous inner loops)."""
    n, L, X, Mi = m.npas, w.L, w.X, w.dqdd_passive_dtau_passive
    X[:] = 0.0
    for i in range(n):  # X[i] = (e_i - sum_k<i L[i, k] X[k]) / L[i, i]
        Xi = X[i]
        Xi[i] = 1.0
        for k in range(i):
            lik = L[i, k]
            Xk = X[k]
            for j in range(k + 1):
                Xi[j] -= lik * Xk[j]
        inv = 1.0 / L[i, i]
        for j in range(i + 1):
            Xi[j] *= inv
    Mi[:] = 0.0
    for k in range(n):  # Minv = sum_k X[k]^T X[k] (X[k] nonzero up to k)
        Xk = X[k]
        for i in range(k + 1):
            xki = Xk[i]
            Mii = Mi[i]
            for j in range(k + 1):
                Mii[j] += xki * Xk[j]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def gemm_rows(alpha, A, B, rows_b, C):
    """C = alpha A B[rows_b, :] (A: n x len(rows_b); i-k-j order: contiguous inner loop)."""
    C[:] = 0.0
    for i in range(A.shape[0]):
        Ci = C[i]
        for k in range(A.shape[1]):
            aik = alpha * A[i, k]
            Bk = B[rows_b[k]]
            for j in range(C.shape[1]):
                Ci[j] += aik * Bk[j]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hybrid_partials(m, w):
    """(D13), (D15), (D16) in compiled loops (small N):
    dqdd_p/dx = -Minv dr_p/dx (x = q, v), dqdd_p/dqdd_a = -Minv M_pa,
    dT_a/dx = dr_a/dx + M_ap dqdd_p/dx, dT_a/dqdd_a = M_aa + M_ap dqdd_p/dqdd_a,
    dT_a/dT_p = M_ap Minv."""
    n, na, pd, ad = m.npas, m.na, m.passive_dofs, m.active_dofs
    Mi = w.dqdd_passive_dtau_passive
    qq, qv, qa = w.dqdd_passive_dq, w.dqdd_passive_dv, w.dqdd_passive_dqdd_active
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
        for c in range(n):
            tt[r, c] = 0.0
        for k in range(n):
            mk = Mr[pd[k]]
            qqk, qvk, qak, mik = qq[k], qv[k], qa[k], Mi[k]
            for j in range(m.nv):
                tqr[j] += mk * qqk[j]
                tvr[j] += mk * qvk[j]
            for c in range(na):
                ta[r, c] += mk * qak[c]
            for c in range(n):
                tt[r, c] += mk * mik[c]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def gather_blocks(m, w):
    """The blocks of (D13)-(D16) for the BLAS path (``DerivativesWorkspace._products``)."""
    pd, ad = m.passive_dofs, m.active_dofs
    for i in range(m.npas):
        Rq, Rv, Mr = w.dr_dq[pd[i]], w.dr_dv[pd[i]], w.M[pd[i]]
        for j in range(m.nv):
            w.Gq[i, j] = -Rq[j]
            w.Gv[i, j] = -Rv[j]
        for c in range(m.na):
            w.Gpa[i, c] = -Mr[ad[c]]
    for r in range(m.na):
        Rq, Rv, Mr = w.dr_dq[ad[r]], w.dr_dv[ad[r]], w.M[ad[r]]
        for j in range(m.nv):
            w.Raq[r, j] = Rq[j]
            w.Rav[r, j] = Rv[j]
        for c in range(m.na):
            w.Maa[r, c] = Mr[ad[c]]
        for c in range(m.npas):
            w.Map[r, c] = Mr[pd[c]]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def derivatives_steps(ints, consts, work, dof_end, q, v, qdd_active, tau_passive, blas):
    """(D1)-(D16) (with ``blas``, (D13), (D15), (D16) are left to the caller's matrix products
    on the gathered blocks); returns a status code of ``dynamics`` (OK, NONFINITE_*,
    WRONG_LENGTH) or the DOF whose pivot of M_pp is singular."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _ = dwork_layout(work, m.nb, m.nv, m.na, m.npas, blas)
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
    mass_matrix_fill(m, c, dof_end, w)
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
        passive_inverse(m, w)
    for i in range(m.nb):  # T_a = r_a(q, v, qdd) + A_a qdd_a (the armature's, 0 unless set)
        if not m.passive[i]:
            for a in range(m.nv_joint[i]):
                r = m.v_start[i] + a
                w.tau[r] += c.armature[i, a] * w.qdd[r]
    for k in range(m.na):
        w.tau_active[k] = w.tau[m.active_dofs[k]]
    rnea_partials(m, c, dof_end, w)
    if blas:
        gather_blocks(m, w)
    else:
        hybrid_partials(m, w)
    return OK


# Two entry points, compiled on first use and not at import (each takes tens of seconds on a
# fresh kernel cache; a node that needs no derivatives never pays it): ``run_derivatives_at``
# (the workspace's: subtree ranges precomputed, BLAS path optional), its one signature
# compiled by ``compile_derivatives`` when the first workspace is built, like
# ``dynamics.run_steps``; ``run_derivatives`` (a buffer of ``dwork_size``), compiled for the
# argument types of its first caller (compiled callers, e.g. optimal_control, call it in their
# loops with the types of RUN_SIGNATURE).
_VECTOR = types.float64[::1]
_INDICES = types.int64[::1]
RUN_SIGNATURE = types.int64(_INDICES, _VECTOR, _VECTOR, _VECTOR, _VECTOR, _VECTOR, _VECTOR)
RUN_AT_SIGNATURE = types.int64(_INDICES, _VECTOR, _VECTOR, _INDICES, _VECTOR, _VECTOR, _VECTOR,
                               _VECTOR, types.int64)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def run_derivatives_at(ints, consts, work, dof_end, q, v, qdd_active, tau_passive, blas):
    """(D1)-(D16) in one call; ``dof_end`` from ``subtree_dof_end``, ``work`` of
    ``dwork_layout_size(..., blas)``."""
    return derivatives_steps(ints, consts, work, dof_end, q, v, qdd_active, tau_passive, blas)


@njit(cache=True, inline="always")
def subtree_ends(m, out):
    """out[k] = the end of body k's subtree's DOF range (depth-first order)."""
    for i in range(m.nb):
        out[i] = i
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0 and out[i] > out[p]:
            out[p] = out[i]
    for i in range(m.nb):
        out[i] = m.v_start[out[i]] + m.nv_joint[out[i]]


@njit(cache=True, error_model="numpy", fastmath=FAST)
def run_derivatives(ints, consts, work, q, v, qdd_active, tau_passive):
    """(D1)-(D16) in one call on a buffer of ``dwork_size`` (compiled products)."""
    m, _ = int_views(ints)
    dof_end = np.empty(m.nb, np.int64)
    subtree_ends(m, dof_end)
    return derivatives_steps(ints, consts, work, dof_end, q, v, qdd_active, tau_passive, 0)


def compile_derivatives() -> None:
    """Compile ``run_derivatives_at``'s one signature (or load it from the cache), then refuse
    any other argument type (the workspace then converts); a no-op once done."""
    if run_derivatives_at._can_compile:
        run_derivatives_at.compile(RUN_AT_SIGNATURE)
        run_derivatives_at.disable_compile()


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

    # above this many DOF, (D13)-(D16) are products of gathered blocks through BLAS (numpy)
    BLAS_FROM_NV = 24

    def __init__(self, model: RobotModel, shared: Workspace | None = None) -> None:
        compile_derivatives()
        self.model = model
        hd: HybridDynamics = (shared if shared is not None else Workspace(model)).hybrid("model")
        self._hybrid = hd
        ints, consts, _ = hd.buffers
        self._ints, self._consts = ints, consts
        self._dof_end = _subtree_dof_end(model)
        # (with no passive joint the products are copies: compiled)
        self._blas = int(model.nv >= self.BLAS_FROM_NV and len(hd.passive_dofs) > 0)
        sizes = (model.nb, model.nv, len(hd.active_dofs), len(hd.passive_dofs), self._blas)
        self._work = np.zeros(dwork_layout_size(*sizes))
        views = numpy_views(dwork_layout(self._work, *sizes)[0], self._work)
        self._views = views
        self.dr_dq, self.dr_dv, self.M = views.dr_dq, views.dr_dv, views.M
        self.qdd = views.qdd
        self.result = HybridDerivatives(*(getattr(views, f) for f in _RESULT_FIELDS))

    def compute(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray,
                tau_passive: np.ndarray) -> HybridDerivatives:
        """T_a, qdd_p and the eight partials at (q, v, qdd_a, T_p); results in ``self.result``."""
        try:
            status = run_derivatives_at(self._ints, self._consts, self._work, self._dof_end, q,
                                        v, qdd_active, tau_passive, self._blas)
        except TypeError:  # not writeable C-contiguous float64 vectors: convert, then retry
            hd, m = self._hybrid, self.model
            return self.compute(hd.as_vector(q, m.nq, "q"), hd.as_vector(v, m.nv, "v"),
                                hd.as_vector(qdd_active, len(hd.active_dofs), "qdd_active"),
                                hd.as_vector(tau_passive, len(hd.passive_dofs), "tau_passive"))
        if status != OK:
            self._raise(status, q, v, qdd_active, tau_passive)
        if self._blas:
            self._products()
        return self.result

    def _products(self) -> None:
        """(D13), (D15), (D16) as BLAS products of the blocks the kernel gathered."""
        w, r, mm = self._views, self.result, np.matmul
        Mi = r.dqdd_passive_dtau_passive
        mm(Mi, w.Gq, out=r.dqdd_passive_dq)  # (D13)
        mm(Mi, w.Gv, out=r.dqdd_passive_dv)
        mm(Mi, w.Gpa, out=r.dqdd_passive_dqdd_active)
        mm(w.Map, r.dqdd_passive_dq, out=r.dtau_active_dq)  # (D15)
        r.dtau_active_dq += w.Raq
        mm(w.Map, r.dqdd_passive_dv, out=r.dtau_active_dv)
        r.dtau_active_dv += w.Rav
        mm(w.Map, r.dqdd_passive_dqdd_active, out=r.dtau_active_dqdd_active)
        r.dtau_active_dqdd_active += w.Maa
        mm(w.Map, Mi, out=r.dtau_active_dtau_passive)  # (D16)

    def _raise(self, status: int, q, v, qa, tp) -> None:
        m = self.model
        if status >= 0:  # the DOF whose pivot of M_pp failed
            body = int(np.searchsorted(m.v_start, status, side="right") - 1)
            raise SingularPassiveInertiaError(
                f"passive joint '{m.joint_names[body]}' moves a subtree with (near) zero "
                "inertia: M_pp is singular, its acceleration is undetermined")
        self._hybrid.raise_for_status(status, q=q, v=v, qa=qa, tp=tp)


def _subtree_dof_end(model: RobotModel) -> np.ndarray:
    """Per body, the end of its subtree's DOF range; the bodies are in depth-first order
    (``urdf.load_model``), so every subtree is a contiguous range (checked)."""
    nb = model.nb
    last = np.arange(nb)
    size = np.ones(nb, dtype=np.int64)
    for i in range(nb - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            last[p] = max(last[p], last[i])
            size[p] += size[i]
    if np.any(last - np.arange(nb) + 1 != size):
        raise ValueError("the model's bodies are not in depth-first order")
    return np.ascontiguousarray(model.v_start[last] + model.nv_joint[last], dtype=np.int64)


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
