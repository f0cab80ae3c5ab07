"""Compiled inner loops of the box DDP (``ddp.py``): the rollout and the linearisation of the
dynamics (``dynamics.py`` (D1)–(D3)) over every knot, the backward pass (1)–(7) and the box QP
(4) it solves at each knot, with small dense Cholesky factorisations. Those called from Python
release the GIL (``nogil``): a solve in a background thread (``background.py``) leaves the
control cycle running meanwhile."""

from __future__ import annotations

import numpy as np
from numba import njit

from ..derivatives import dwork_views, run_derivatives
from ..dynamics import (
    ALL_STEPS,
    CONFIGURATION,
    NONFINITE_V,
    OK,
    const_views,
    int_views,
    run_steps,
    work_views,
)
from ..kinematics import body_placements, frame_jacobian_kernel, frame_point
from ..kinematics import frame_rotation as frame_axes
from ..passive_forces import element_force


@njit(cache=True, inline="always")
def mm(A, B):
    """A B (loops: numba's @ needs SciPy's BLAS, which the controller does not install)."""
    n, m, p = A.shape[0], A.shape[1], B.shape[1]
    C = np.zeros((n, p))
    for i in range(n):
        for k in range(m):
            a = A[i, k]
            if a != 0.0:
                for j in range(p):
                    C[i, j] += a * B[k, j]
    return C


@njit(cache=True, inline="always")
def tmm(A, B):
    """Aᵀ B."""
    m, n, p = A.shape[0], A.shape[1], B.shape[1]
    C = np.zeros((n, p))
    for k in range(m):
        for i in range(n):
            a = A[k, i]
            if a != 0.0:
                for j in range(p):
                    C[i, j] += a * B[k, j]
    return C


@njit(cache=True, inline="always")
def dot(x, y):
    s = 0.0
    for i in range(x.size):
        s += x[i] * y[i]
    return s


@njit(cache=True, inline="always")
def mv(A, x):
    """A x."""
    y = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        s = 0.0
        for j in range(A.shape[1]):
            s += A[i, j] * x[j]
        y[i] = s
    return y


@njit(cache=True, inline="always")
def tmv(A, x):
    """Aᵀ x."""
    y = np.zeros(A.shape[1])
    for k in range(A.shape[0]):
        a = x[k]
        for i in range(A.shape[1]):
            y[i] += A[k, i] * a
    return y


@njit(cache=True)
def cholesky_solve_free(H, free, rhs, out):
    """out[free] = −H_ff⁻¹ rhs[free] (rows of ``rhs`` are right-hand sides of the free set);
    False when H_ff is not positive definite. ``rhs``: (n,) or (n, m) as 2-D (n, m)."""
    idx = np.flatnonzero(free)
    nf = idx.size
    L = np.zeros((nf, nf))
    for i in range(nf):
        for j in range(i + 1):
            s = H[idx[i], idx[j]]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if s <= 0.0:
                    return False
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    m = rhs.shape[1]
    y = np.zeros(nf)
    for c in range(m):
        for i in range(nf):  # L y = rhs_f
            s = rhs[idx[i], c]
            for k in range(i):
                s -= L[i, k] * y[k]
            y[i] = s / L[i, i]
        for i in range(nf - 1, -1, -1):  # Lᵀ x = y
            s = y[i]
            for k in range(i + 1, nf):
                s -= L[k, i] * y[k]
            y[i] = s / L[i, i]
        for i in range(nf):
            out[idx[i], c] = -y[i]
    return True


@njit(cache=True, nogil=True)
def box_qp_kernel(H, g, lower, upper, x, free, iterations):
    """argmin ½ xᵀHx + gᵀx on lower ≤ x ≤ upper by projected Newton (Armijo search), from
    the given ``x`` (overwritten); ``free`` receives the free set. False: H not positive
    definite on the free set."""
    n = g.size
    for i in range(n):
        x[i] = min(max(x[i], lower[i]), upper[i])
    step = np.zeros((n, 1))
    candidate = np.empty(n)
    grad2 = np.empty((n, 1))
    for _ in range(iterations):
        grad = g + mv(H, x)
        any_free = False
        for i in range(n):
            free[i] = not ((x[i] <= lower[i] and grad[i] > 0.0)
                           or (x[i] >= upper[i] and grad[i] < 0.0))
            any_free = any_free or free[i]
        if not any_free:
            break
        gnorm = 0.0
        for i in range(n):
            grad2[i, 0] = grad[i]
            step[i, 0] = 0.0
            if free[i]:
                gnorm += grad[i] * grad[i]
        if np.sqrt(gnorm) < 1e-12 * (1.0 + np.sqrt(np.sum(g * g))):
            break
        if not cholesky_solve_free(H, free, grad2, step):
            return False
        value = 0.5 * dot(x, mv(H, x)) + dot(g, x)
        alpha = 1.0
        new_value = value
        while alpha > 1e-12:
            for i in range(n):
                candidate[i] = min(max(x[i] + alpha * step[i, 0], lower[i]), upper[i])
            new_value = 0.5 * dot(candidate, mv(H, candidate)) + dot(g, candidate)
            if new_value - value <= 0.1 * dot(grad, candidate - x):
                break
            alpha *= 0.5
        moved = np.max(np.abs(candidate - x))
        x[:] = candidate
        if moved < 1e-14 * (1.0 + np.max(np.abs(x))) or abs(new_value - value) < 1e-15:
            break
    grad = g + mv(H, x)
    for i in range(n):
        free[i] = not ((x[i] <= lower[i] and grad[i] > 0.0)
                       or (x[i] >= upper[i] and grad[i] < 0.0))
    return True


@njit(cache=True, nogil=True)
def backward_pass(Fx, Fu, lx, lu, lxx, luu, lux, Vx_final, Vxx_final, us, lower, upper, mu,
                  K, kff):
    """(1)–(7) of ``ddp.py`` from the last knot to the first; K, kff written in place.
    Returns (ok, Σ kᵀQ_u, Σ kᵀQ_uu k); ok False when Q_uu + μI is not positive definite."""
    N, nu = us.shape
    Vx = Vx_final.copy()
    Vxx = Vxx_final.copy()
    d1 = 0.0
    d2 = 0.0
    free = np.ones(nu, dtype=np.bool_)
    for k in range(N - 1, -1, -1):
        A = Fx[k]
        B = Fu[k]
        VxxA = mm(Vxx, A)
        VxxB = mm(Vxx, B)
        Qx = lx[k] + tmv(A, Vx)  # (1)
        Qu = lu[k] + tmv(B, Vx)
        Qxx = lxx[k] + tmm(A, VxxA)  # (2)
        Quu = luu[k] + tmm(B, VxxB)
        Qux = lux[k] + tmm(B, VxxA)  # (3)
        Quu_reg = Quu + mu * np.eye(nu)
        step = kff[k].copy()
        if not box_qp_kernel(Quu_reg, Qu, lower - us[k], upper - us[k], step, free, 50):  # (4)
            return False, 0.0, 0.0
        gain = np.zeros((nu, A.shape[0]))
        if free.any() and not cholesky_solve_free(Quu_reg, free, Qux, gain):  # (5)
            return False, 0.0, 0.0
        K[k] = gain
        kff[k] = step
        Quu_k = mv(Quu, step)
        Vx = Qx + tmv(gain, Quu_k) + tmv(gain, Qu) + tmv(Qux, step)  # (6)
        GtQux = tmm(gain, Qux)
        Vxx = Qxx + tmm(gain, mm(Quu, gain)) + GtQux + GtQux.T  # (7)
        Vxx = 0.5 * (Vxx + Vxx.T)
        d1 += dot(step, Qu)
        d2 += dot(step, Quu_k)
    return True, d1, d2


# ---------------------------------------------------------------- dynamics over every knot
@njit(cache=True, inline="always")
def passive_torques(q, v, dofs, coefficients, tau):
    """T_p = −d v − f_c tanh(v/v_s) − k (q − q_rest) (``passive_forces.element_force``) into
    ``tau`` at ``dofs`` (1-DOF joints: q and v share indices)."""
    for i in range(dofs.size):
        j = dofs[i]
        tau[j] = element_force(coefficients, j, q[j], v[j], v[j])


@njit(cache=True, nogil=True)
def rollout_kernel(ints, consts, work, x0, us_ref, xs_ref, K, kff, alpha, lower, upper,
                   active, passive, coefficients, dt, filter_a, xs, us):
    """(D1)–(D3) from ``x0`` under u_k = clip(ū_k + α k_k + K_k (x_k − x̄_k)), writing
    ``xs``, ``us``; returns OK or the first failing status (a non-finite state).
    ``filter_a`` > 0: the motors are behind a filter (``FilteredTorques``): the last n_u
    state entries are the torques that act, τ_{k+1} = τ_k + a (u_k − τ_k)."""
    m, _ = int_views(ints)
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    nv = m.nv
    tau = np.zeros(nv)
    empty = np.zeros(0)
    q = np.empty(nv)
    v = np.empty(nv)
    xs[0] = x0
    for k in range(us.shape[0]):
        dx = xs[k] - xs_ref[k]
        u = us_ref[k] + alpha * kff[k] + mv(K[k], dx)
        for i in range(u.size):
            u[i] = min(max(u[i], lower[i]), upper[i])
            if filter_a > 0.0:
                tau[active[i]] = xs[k, 2 * nv + i]
                xs[k + 1, 2 * nv + i] = xs[k, 2 * nv + i] + filter_a * (u[i] - xs[k, 2 * nv + i])
            else:
                tau[active[i]] = u[i]
        us[k] = u
        q[:] = xs[k, :nv]
        v[:] = xs[k, nv:2 * nv]
        passive_torques(q, v, passive, coefficients, tau)
        status = run_steps(ints, consts, work, q, v, empty, tau, ALL_STEPS)
        if status != OK:
            return status
        for i in range(nv):
            v_next = v[i] + dt * w.qdd[i]  # (D2)
            xs[k + 1, nv + i] = v_next
            xs[k + 1, i] = q[i] + dt * v_next  # (D3)
            if not np.isfinite(v_next):
                return NONFINITE_V
    return OK


@njit(cache=True, nogil=True)
def linearize_kernel(ints, consts, dwork, xs, us, active, passive, coefficients, dt, Fx, Fu):
    """F_x, F_u of (D1)–(D3) at every knot from the analytic partials (derivatives.py, every
    joint's force known) closed through T_p(q, v); returns OK or the first failing status."""
    m, _ = int_views(ints)
    w, _ = dwork_views(dwork, m.nb, m.nv, m.na, m.npas)
    nv = m.nv
    tau = np.zeros(nv)
    empty = np.zeros(0)
    q = np.empty(nv)
    v = np.empty(nv)
    a_q = np.empty((nv, nv))
    a_v = np.empty((nv, nv))
    for k in range(us.shape[0]):
        q[:] = xs[k, :nv]
        v[:] = xs[k, nv:2 * nv]
        for i in range(active.size):
            tau[active[i]] = us[k, i]
        passive_torques(q, v, passive, coefficients, tau)
        status = run_derivatives(ints, consts, dwork, q, v, empty, tau)
        if status != OK:
            return status
        a_q[:] = w.dqdd_passive_dq
        a_v[:] = w.dqdd_passive_dv
        for i in range(passive.size):  # ∂qdd/∂T_p ∂T_p/∂(q, v): diagonal ∂T_p
            j = passive[i]
            t = np.tanh(v[j] / coefficients[2, j])
            dT_dq = -coefficients[3, j]
            dT_dv = -coefficients[0, j] - coefficients[1, j] / coefficients[2, j] * (1 - t * t)
            for r in range(nv):
                a_q[r, j] += w.dqdd_passive_dtau_passive[r, j] * dT_dq
                a_v[r, j] += w.dqdd_passive_dtau_passive[r, j] * dT_dv
        for r in range(nv):  # v' = v + dt qdd, q' = q + dt v'
            for c in range(nv):
                eye = 1.0 if r == c else 0.0
                dvq = dt * a_q[r, c]
                dvv = eye + dt * a_v[r, c]
                Fx[k, nv + r, c] = dvq
                Fx[k, nv + r, nv + c] = dvv
                Fx[k, r, c] = eye + dt * dvq
                Fx[k, r, nv + c] = dt * dvv
            for c in range(active.size):
                dvu = dt * w.dqdd_passive_dtau_passive[r, active[c]]
                Fu[k, nv + r, c] = dvu
                Fu[k, r, c] = dt * dvu
    return OK


# ---------------------------------------------------------------- a frame's path over every knot
@njit(cache=True, nogil=True)
def frame_path_kernel(ints, consts, work, E_world, p_world, body, offset, xs, targets, weight,
                      frame_rotation, rotations, rotation_weight, derivatives, lx, lxx):
    """Σ_k ½ w |p(q_k) − p*_k|² + w_R (3 − tr R(q_k) R*_kᵀ) over the knots k < len(targets)
    (``costs.FramePathCost``): p(q_k) the point ``offset`` of ``body``, R(q_k) = E_worldᵀ
    ``frame_rotation``ᵀ the frame's rotation (forward kinematics on the workspace's
    transforms); the rotation term only where ``rotations`` (N, 3, 3) is given (else
    (0, 3, 3)). With ``derivatives`` adds the gradient w J_pᵀ e − w_R J_ωᵀ r (r from
    M = R R*ᵀ: (M₂₃ − M₃₂, M₃₁ − M₁₃, M₁₂ − M₂₁), as ``FrameCost``) and the Gauss–Newton
    Hessian w J_pᵀ J_p + 2 w_R J_ωᵀ J_ω to lx[k], lxx[k] (the q block). Returns the sum, NaN
    if a configuration is not finite."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    empty = np.zeros(0)
    q = np.empty(m.nq)
    point = np.empty(3)
    e = np.empty(3)
    r = np.zeros(3)
    R = np.empty((3, 3))
    M = np.empty((3, 3))
    J = np.empty((6, m.nv))
    turn = rotations.shape[0] > 0
    total = 0.0
    for k in range(targets.shape[0]):
        q[:] = xs[k, :m.nq]
        if run_steps(ints, consts, work, q, empty, empty, empty, CONFIGURATION) != OK:
            return np.nan
        body_placements(m.parent, w.E_up, w.r_up, E_world, p_world)
        frame_point(E_world[body], p_world[body], offset, point)
        for a in range(3):
            e[a] = point[a] - targets[k, a]
        total += 0.5 * weight * (e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
        if turn:
            frame_axes(E_world[body], frame_rotation, R)
            for a in range(3):
                for b in range(3):
                    M[a, b] = (R[a, 0] * rotations[k, b, 0] + R[a, 1] * rotations[k, b, 1]
                               + R[a, 2] * rotations[k, b, 2])
            total += rotation_weight * (3.0 - M[0, 0] - M[1, 1] - M[2, 2])
            r[0], r[1], r[2] = M[1, 2] - M[2, 1], M[2, 0] - M[0, 2], M[0, 1] - M[1, 0]
        if not derivatives:
            continue
        frame_jacobian_kernel(m.parent, c.S, m.nv_joint, m.v_start, E_world, p_world, body,
                              point, J)
        for i in range(m.nv):
            lx[k, i] += weight * (J[0, i] * e[0] + J[1, i] * e[1] + J[2, i] * e[2])
            for j in range(m.nv):
                lxx[k, i, j] += weight * (J[0, i] * J[0, j] + J[1, i] * J[1, j]
                                          + J[2, i] * J[2, j])
            if turn:
                lx[k, i] -= rotation_weight * (J[3, i] * r[0] + J[4, i] * r[1]
                                               + J[5, i] * r[2])
                for j in range(m.nv):
                    lxx[k, i, j] += 2.0 * rotation_weight * (J[3, i] * J[3, j]
                                                             + J[4, i] * J[4, j]
                                                             + J[5, i] * J[5, j])
    return total
