"""One compiled configuration-control step (Seraji eq. 9-11, 13-18; doc/architecture.md §5).

``configuration_step`` does, in one call over preallocated buffers: forward kinematics
(``dynamics.joint_transforms`` + ``kinematics.body_placements``), the hand's frame Jacobian
and the point Jacobians the functions need (``kinematics.frame_jacobian_kernel``), the arm
angle and its Jacobian (eq. 14-15), the rows of every active kinematic function (a *program*
written by ``redundancy.configuration_control``), the normal equations of the weighted damped
least squares (eq. 10-11, with desired joint changes in the W_v term: claims 11, 18, 20) and
their solve by a Cholesky factorisation of the n_a x n_a matrix, or, when it is
rank-deficient, least squares on [√W J; √W_v] (directions weaker than 1e-7 of the strongest
are not moved). Python only chooses which functions are on and packs their parameters.

With passive joints whose motion is predicted (header ``rint[10]`` = 1, patent US 5,377,310
claims 11, 22), the disturbance Jacobian J_D (paper 6.13) is computed at q by the §6.1 sweeps
(``jacobians.generalized_jacobian_sweeps``), every row r of the augmented Jacobian becomes its
generalized row r_a + r_p J_D (for the hand: J_G = J_a + J_p J_D, 6.11), the step is solved
over the active joints and the passive ones move by dθ_p = J_D dθ_a.

Beside its front end (``redundancy.configuration_control``); the package-keyed numba cache
(``_kernel_cache``) recompiles it whenever the kernels it inlines change.

Buffers (layouts in ``int_header``/``step_views`` below and in
``redundancy.configuration_control._Program``):
``rint``  int64: header, active columns, the program (KIND, float offset, int offset, target
          slot per function), per-function outputs (first row, row count, note code) and the
          functions' integer parameters;
``rflt``  float: model constants (tip frame, W_e, W_v, limits, masses) and the functions'
          float parameters;
``rwork`` float: placements, Jacobians, rows, normal equations, results;
``tgt``   float: desired hand position (3) and rotation (9), desired joint change (nv), the
          functions' target slots (NaN: hold the current value).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..buffers import take
from ..dynamics import OK as DYNAMICS_OK
from ..dynamics import all_finite, const_views, int_views, joint_transforms, work_views
from ..jacobians import generalized_jacobian_sweeps
from ..kinematics import body_placements, frame_jacobian_kernel, frame_rotation
from ..spatial import FAST, jacobi_svd, rotation_log  # (jacobi_svd: re-exported)

__all__ = ["ARM_ANGLE", "ELBOW", "COLLISION", "JOINT_LIMITS", "LOCKING", "OPTIMAL",
           "MANIPULABILITY", "GRAVITY", "LINK_ORIENTATION", "HEADER", "FLOAT_HEADER",
           "StepViews", "step_views", "step_buffer_size", "configuration_step", "NOTES",
           "WEIGHT_CAP", "jacobi_svd", "PIVOT_TOLERANCE", "SINGULAR_PASSIVE"]

# function kinds of the program
ARM_ANGLE, ELBOW, COLLISION, JOINT_LIMITS, LOCKING, OPTIMAL = 1, 2, 3, 4, 5, 6
MANIPULABILITY, GRAVITY, LINK_ORIENTATION = 7, 8, 9
PROGRAM_STRIDE = 4  # kind, float offset, int offset, target slot
OUTPUT_STRIDE = 3  # first row, row count, note code
HEADER = 16  # rint: nv, na, n_functions, max_rows, tip body, status, rows, fallback, ...
# rflt header: tip offset (3), tip frame rotation (9), root point (3), gravity (3)
FLOAT_HEADER = 18
WEIGHT_CAP = 1e8  # a weight that has gone "to infinity" (inside an inner sphere)
# note codes (arm angle): see NOTES
NOTES = ("", "shoulder and wrist coincide",
         "the shoulder-wrist line is parallel to the reference direction",
         "the elbow is on the shoulder-wrist line (stretched arm)", "degenerate")
OK, NONFINITE_Q, NONFINITE_STEP, SINGULAR_PASSIVE = 0, 1, 2, 3
# Cholesky of (JᵀWJ + W_v) is accepted when its smallest pivot is above this fraction of
# sqrt(max diagonal), i.e. cond(√W J) below ~1e5. A rank-deficient matrix (7-DOF hand only,
# W_v = 0) gives pivots of roundoff size, seen up to 3.5e-7: accepting those (the old bound was
# 1e-7) added an arbitrary null-space motion (1e-3 rad for a 1e-4 m step, against KDL).
PIVOT_TOLERANCE = 1e-5


class StepViews(NamedTuple):
    # the report (one copy per step): dq, q_next, hand, per-function outputs, W, value
    dq: np.ndarray  # (nv,)
    q_next: np.ndarray  # (nv,)
    hand: np.ndarray  # (14,): p (3), R (9), |dp|, |dθ|
    outputs: np.ndarray  # (nf, 3): first row, row count, note code (as floats)
    W: np.ndarray  # (max_rows,)
    value: np.ndarray  # (max_rows,) current φ per row
    J_D: np.ndarray  # (n_passive, na) disturbance Jacobian at q (predicted passive motion)
    # the rest
    E_world: np.ndarray  # (nb, 3, 3)
    p_world: np.ndarray  # (nb, 3)
    J_e: np.ndarray  # (6, nv) hand Jacobian at q
    Jt: np.ndarray  # (3, 6, nv) point Jacobians
    rows: np.ndarray  # (max_rows, nv) the augmented Jacobian J = [J_e; J_c]
    dX: np.ndarray  # noqa: N815  (max_rows,)
    H: np.ndarray  # (na, na)
    L: np.ndarray  # (na, na)
    rhs: np.ndarray  # (na,)
    y: np.ndarray  # (na,)
    qp: np.ndarray  # (nv,) perturbed q
    tau: np.ndarray  # (nv,)
    grad: np.ndarray  # (2, nv) gradients of manipulability, gravity torque
    N: np.ndarray  # (nv, nv) hand null-space basis (columns), first n_null used
    spheres: np.ndarray  # (n_spheres, 5): d, X_c (3), body
    point: np.ndarray  # (3,) scratch
    column: np.ndarray  # (6,) scratch of the J_D sweeps


@njit(cache=True, inline="always")
def step_views(rwork, nb, nv, na, npas, nf, max_rows, n_spheres):
    dq, o = take(rwork, 0, (nv,))
    q_next, o = take(rwork, o, (nv,))
    hand, o = take(rwork, o, (14,))
    outputs, o = take(rwork, o, (nf, 3))
    W, o = take(rwork, o, (max_rows,))
    value, o = take(rwork, o, (max_rows,))
    J_D, o = take(rwork, o, (npas, na))
    report = o
    E_world, o = take(rwork, o, (nb, 3, 3))
    p_world, o = take(rwork, o, (nb, 3))
    J_e, o = take(rwork, o, (6, nv))
    Jt, o = take(rwork, o, (3, 6, nv))
    rows, o = take(rwork, o, (max_rows, nv))
    dX, o = take(rwork, o, (max_rows,))
    H, o = take(rwork, o, (na, na))
    L, o = take(rwork, o, (na, na))
    rhs, o = take(rwork, o, (na,))
    y, o = take(rwork, o, (na,))
    qp, o = take(rwork, o, (nv,))
    tau, o = take(rwork, o, (nv,))
    grad, o = take(rwork, o, (2, nv))
    N, o = take(rwork, o, (nv, nv))
    spheres, o = take(rwork, o, (max(n_spheres, 1), 5))
    point, o = take(rwork, o, (3,))
    column, o = take(rwork, o, (6,))
    return StepViews(dq, q_next, hand, outputs, W, value, J_D, E_world, p_world, J_e, Jt, rows,
                     dX, H, L, rhs, y, qp, tau, grad, N, spheres, point, column), report, o


@njit(cache=True)
def step_buffer_size(nb, nv, na, npas, nf, max_rows, n_spheres):
    """(length of the report at the start of rwork, length of rwork)."""
    _, report, end = step_views(np.empty(0), nb, nv, na, npas, nf, max_rows, n_spheres)
    return report, end


# ------------------------------------------------------------------ small helpers
@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def _forward(m, c, w, s, q, E_world, p_world):
    w.q_valid[0] = 0.0  # E_up, r_up at q, (4.6) not: ``dynamics.configure`` must rerun
    joint_transforms(m, c, q, w, s)
    body_placements(m.parent, w.E_up, w.r_up, E_world, p_world)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _point(E_world, p_world, body, off, out):
    """Root coordinates of the point ``off`` (body axes) of ``body`` (-1: the root)."""
    for a in range(3):
        if body < 0:
            out[a] = off[a]
        else:
            out[a] = (p_world[body, a] + E_world[body, 0, a] * off[0]
                      + E_world[body, 1, a] * off[1] + E_world[body, 2, a] * off[2])


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _jacobian(parent, S, nv_joint, v_start, E_world, p_world, body, point, J):
    if body < 0:
        J[:] = 0.0
    else:
        frame_jacobian_kernel(parent, S, nv_joint, v_start, E_world, p_world, body, point, J)


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _determinant(A, n):
    """det of the n x n A (Gaussian elimination with partial pivoting; A is overwritten)."""
    det = 1.0
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(A[i, k]) > abs(A[p, k]):
                p = i
        if A[p, k] == 0.0:
            return 0.0
        if p != k:
            for j in range(n):
                A[k, j], A[p, j] = A[p, j], A[k, j]
            det = -det
        det *= A[k, k]
        for i in range(k + 1, n):
            f = A[i, k] / A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= f * A[k, j]
    return det


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _manipulability(m, c, v, body, off, point, J):
    """w = sqrt(det(J_e J_eᵀ)) of the frame (body, off) in v's placements."""
    par, S_, nvj, vst = m.parent, c.S, m.nv_joint, m.v_start
    _point(v.E_world, v.p_world, body, off, point)
    _jacobian(par, S_, nvj, vst, v.E_world, v.p_world, body, point, J)
    A = np.empty((6, 6))
    for a in range(6):
        for b in range(6):
            s = 0.0
            for k in range(J.shape[1]):
                s += J[a, k] * J[b, k]
            A[a, b] = s
    return math.sqrt(max(_determinant(A, 6), 0.0))


@njit(cache=True, error_model="numpy", fastmath=FAST)
def gravity_torques(m, c, E_world, p_world, mass, com, gravity, point, J, tau):
    """τ_g = -Σ_b m_b J_{c_b}ᵀ g: the joint torques that hold the arm still (= inverse dynamics
    at zero velocity and acceleration)."""
    par, S_, nvj, vst = m.parent, c.S, m.nv_joint, m.v_start
    tau[:] = 0.0
    for b in range(m.nb):
        if mass[b] == 0.0:
            continue
        _point(E_world, p_world, b, com[b], point)
        _jacobian(par, S_, nvj, vst, E_world, p_world, b, point, J)
        for k in range(tau.shape[0]):
            tau[k] -= mass[b] * (J[0, k] * gravity[0] + J[1, k] * gravity[1]
                                 + J[2, k] * gravity[2])


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _gradients(m, c, w, s, v, rint, rflt, prog, mass, com, gravity, q, point, J):
    """Gradients of manipulability and ½|τ_g|² by central differences (h = 1e-6); they move
    the placements, so they run before the step's forward kinematics."""
    nf, nv = prog.shape[0], m.nv
    for f in range(nf):
        kind = prog[f, 0]
        if kind != MANIPULABILITY and kind != GRAVITY:
            continue
        g = v.grad[0] if kind == MANIPULABILITY else v.grad[1]
        fp = prog[f, 1]
        for i in range(nv):
            val = 0.0
            for sign in (1.0, -1.0):
                v.qp[:] = q
                v.qp[i] += sign * 1e-6
                _forward(m, c, w, s, v.qp, v.E_world, v.p_world)
                if kind == MANIPULABILITY:
                    x = _manipulability(m, c, v, rint[prog[f, 2]], rflt[fp + 2:fp + 5],
                                        point, J)
                else:
                    gravity_torques(m, c, v.E_world, v.p_world, mass, com, gravity, point, J,
                                    v.tau)
                    x = 0.0
                    for k in range(nv):
                        x += 0.5 * v.tau[k] * v.tau[k]
                val += sign * x
            g[i] = val / 2e-6


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _critical_points(parent, E_world, p_world, spheres, rint, rflt, prog, root_point, point):
    """Critical point X_c and distance d_c of every sphere (eq. 17; links as segments, the
    last one to the collision function's tip) into ``spheres``; returns the elbow fade."""
    nb, nf = parent.shape[0], prog.shape[0]
    fade = 1.0
    sph = 0
    for f in range(nf):
        if prog[f, 0] != COLLISION:
            continue
        fp, ip = prog[f, 1], prog[f, 2]
        ns, ctip = rint[ip], rint[ip + 1]
        for k in range(ns):
            so = fp + 8 + 5 * k
            best, bx0, bx1, bx2, bbody = 1e300, 0.0, 0.0, 0.0, -1
            for i in range(nb + 1):  # links as segments; the last one to the tip
                if i < nb:
                    body = i
                    p = parent[i]
                    a0 = root_point[0] if p < 0 else p_world[p, 0]
                    a1 = root_point[1] if p < 0 else p_world[p, 1]
                    a2 = root_point[2] if p < 0 else p_world[p, 2]
                    b0, b1, b2 = p_world[i, 0], p_world[i, 1], p_world[i, 2]
                else:
                    body = ctip
                    _point(E_world, p_world, ctip, rflt[fp + 5:fp + 8], point)
                    b0, b1, b2 = point[0], point[1], point[2]
                    if ctip < 0:
                        a0, a1, a2 = b0, b1, b2
                    else:
                        a0, a1, a2 = (p_world[ctip, 0], p_world[ctip, 1],
                                      p_world[ctip, 2])
                e0, e1, e2 = b0 - a0, b1 - a1, b2 - a2
                den = e0 * e0 + e1 * e1 + e2 * e2
                t = 0.0
                if den >= 1e-18:
                    t = ((rflt[so] - a0) * e0 + (rflt[so + 1] - a1) * e1
                         + (rflt[so + 2] - a2) * e2) / den
                    t = min(max(t, 0.0), 1.0)
                x0, x1, x2 = a0 + t * e0, a1 + t * e1, a2 + t * e2
                d = math.sqrt((x0 - rflt[so]) ** 2 + (x1 - rflt[so + 1]) ** 2
                              + (x2 - rflt[so + 2]) ** 2)
                if d < best:
                    best, bx0, bx1, bx2, bbody = d, x0, x1, x2, body
            spheres[sph, 0], spheres[sph, 1] = best, bx0
            spheres[sph, 2], spheres[sph, 3], spheres[sph, 4] = bx1, bx2, bbody
            ri, ro = rflt[so + 3], rflt[so + 4]
            fade = min(fade, min(max((best - ri) / (ro - ri), 0.0), 1.0))
            sph += 1
    return fade


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _arm_angle_row(par, S_, nvj, vst, Jt, E_world, p_world, rows, dX, W, value, rint, rflt,
                   tgt, out, f, fp, ip, slot, n, fade):
    """Row n: ψ and its Jacobian (eq. 14-15) from the S, E, W points and their Jacobians."""
    nv = rows.shape[1]
    JS, JE, JW = Jt[0], Jt[1], Jt[2]
    S, E, Wp = np.empty(3), np.empty(3), np.empty(3)
    _point(E_world, p_world, rint[ip], rflt[fp + 5:fp + 8], S)
    _point(E_world, p_world, rint[ip + 1], rflt[fp + 8:fp + 11], E)
    _point(E_world, p_world, rint[ip + 2], rflt[fp + 11:fp + 14], Wp)
    _jacobian(par, S_, nvj, vst, E_world, p_world, rint[ip], S, JS)
    _jacobian(par, S_, nvj, vst, E_world, p_world, rint[ip + 1], E, JE)
    _jacobian(par, S_, nvj, vst, E_world, p_world, rint[ip + 2], Wp, JW)
    r0, r1, r2 = rflt[fp + 1], rflt[fp + 2], rflt[fp + 3]
    tol = rflt[fp + 4]
    b0, b1, b2 = Wp[0] - S[0], Wp[1] - S[1], Wp[2] - S[2]
    nb_ = math.sqrt(b0 * b0 + b1 * b1 + b2 * b2)
    psi, note = 0.0, 0
    for k in range(nv):
        rows[n, k] = 0.0
    if nb_ < 1e-9:
        note = 1
    else:
        u0, u1, u2 = b0 / nb_, b1 / nb_, b2 / nb_
        a0, a1, a2 = E[0] - S[0], E[1] - S[1], E[2] - S[2]
        ru = r0 * u0 + r1 * u1 + r2 * u2
        ua = u0 * a0 + u1 * a1 + u2 * a2
        # y = u · (r × a), x = r · a - (r·u)(u·a)
        y = u0 * (r1 * a2 - r2 * a1) + u1 * (r2 * a0 - r0 * a2) + u2 * (r0 * a1 - r1 * a0)
        x = r0 * a0 + r1 * a1 + r2 * a2 - ru * ua
        rp = math.sqrt((r0 - ru * u0) ** 2 + (r1 - ru * u1) ** 2 + (r2 - ru * u2) ** 2)
        ep = math.sqrt((a0 - ua * u0) ** 2 + (a1 - ua * u1) ** 2 + (a2 - ua * u2) ** 2)
        if rp < tol:
            note = 2
        elif ep < tol * max(1.0, nb_):
            note = 3
        n2 = x * x + y * y
        if n2 < 1e-24:
            note = note if note else 4
        else:
            psi = math.atan2(y, x)
            # g_a = (x (u × r) - y (r - (r·u) u)) / n2
            ga0 = (x * (u1 * r2 - u2 * r1) - y * (r0 - ru * u0)) / n2
            ga1 = (x * (u2 * r0 - u0 * r2) - y * (r1 - ru * u1)) / n2
            ga2 = (x * (u0 * r1 - u1 * r0) - y * (r2 - ru * u2)) / n2
            # g_u = (x (r × a) - y (-(r·u) a - (u·a) r)) / n2; g_b = (I - u uᵀ) g_u / |b|
            gu0 = (x * (r1 * a2 - r2 * a1) + y * (ru * a0 + ua * r0)) / n2
            gu1 = (x * (r2 * a0 - r0 * a2) + y * (ru * a1 + ua * r1)) / n2
            gu2 = (x * (r0 * a1 - r1 * a0) + y * (ru * a2 + ua * r2)) / n2
            ug = u0 * gu0 + u1 * gu1 + u2 * gu2
            gb0, gb1, gb2 = ((gu0 - ug * u0) / nb_, (gu1 - ug * u1) / nb_,
                             (gu2 - ug * u2) / nb_)
            for k in range(nv):
                rows[n, k] = (ga0 * (JE[0, k] - JS[0, k]) + ga1 * (JE[1, k] - JS[1, k])
                                + ga2 * (JE[2, k] - JS[2, k])
                                + gb0 * (JW[0, k] - JS[0, k])
                                + gb1 * (JW[1, k] - JS[1, k])
                                + gb2 * (JW[2, k] - JS[2, k]))
    target = tgt[slot]
    d = 0.0 if math.isnan(target) else target - psi
    dX[n] = (d + math.pi) % (2.0 * math.pi) - math.pi
    W[n] = 0.0 if note else rflt[fp] * fade
    value[n] = psi
    out[f, 2] = note
    n += 1
    return n


@njit(cache=True, error_model="numpy", fastmath=FAST)
def _solve(H, L, rhs, y, rows, W, dX, dq, q_next, cols, Wv, dq_d, q, n, rint):
    """(Jᵀ W J + W_v) dθ = Jᵀ W dX + W_v dθ_d (eq. 10-11) over the active columns: Cholesky,
    or least squares by a Jacobi SVD when rank-deficient; q_next = q + dθ. Returns a status."""
    na, nv = cols.shape[0], dq.shape[0]
    hmax = 1e-300
    for a in range(na):
        ca = cols[a]
        for b in range(a + 1):
            cb = cols[b]
            acc = 0.0
            for r in range(n):
                acc += rows[r, ca] * W[r] * rows[r, cb]
            H[a, b] = acc
            H[b, a] = acc
        H[a, a] += Wv[ca]
        hmax = max(hmax, H[a, a])
        acc = Wv[ca] * dq_d[ca]
        for r in range(n):
            acc += rows[r, ca] * W[r] * dX[r]
        rhs[a] = acc
    ok = True
    dmin = 1e300
    for j in range(na):  # Cholesky H = L Lᵀ
        sj = H[j, j]
        for k in range(j):
            sj -= L[j, k] * L[j, k]
        if not (sj > 0.0):
            ok = False
            break
        L[j, j] = math.sqrt(sj)
        dmin = min(dmin, L[j, j])
        for i in range(j + 1, na):
            si = H[i, j]
            for k in range(j):
                si -= L[i, k] * L[j, k]
            L[i, j] = si / L[j, j]
    if ok and dmin < PIVOT_TOLERANCE * math.sqrt(hmax):
        ok = False
    dq[:] = 0.0
    if ok:
        for i in range(na):  # L y = rhs, Lᵀ x = y
            si = rhs[i]
            for k in range(i):
                si -= L[i, k] * y[k]
            y[i] = si / L[i, i]
        for i in range(na - 1, -1, -1):
            si = y[i]
            for k in range(i + 1, na):
                si -= L[k, i] * dq[cols[k]]
            dq[cols[i]] = si / L[i, i]
    else:  # rank-deficient: least squares on [√W J; √W_v] dθ = [√W dX; √W_v dθ_d]
        rint[7] = 1
        A = np.zeros((n + na, na))
        bb = np.zeros(n + na)
        for r in range(n):
            sw = math.sqrt(W[r])
            for k in range(na):
                A[r, k] = sw * rows[r, cols[k]]
            bb[r] = sw * dX[r]
        for k in range(na):
            sw = math.sqrt(Wv[cols[k]])
            A[n + k, k] = sw
            bb[n + k] = sw * dq_d[cols[k]]
        Vl = np.empty((na, na))
        jacobi_svd(A, Vl)  # A V = U Σ: x = Σ_i (u_iᵀ b / σ_i) v_i over σ_i > 1e-7 σ_max
        sv = np.empty(na)
        smax = 0.0
        for k in range(na):
            acc = 0.0
            for r in range(n + na):
                acc += A[r, k] * A[r, k]
            sv[k] = math.sqrt(acc)
            smax = max(smax, sv[k])
        for k in range(na):
            if sv[k] > 1e-7 * smax:
                acc = 0.0
                for r in range(n + na):
                    acc += A[r, k] * bb[r]
                acc /= sv[k] * sv[k]
                for i in range(na):
                    dq[cols[i]] += acc * Vl[i, k]
    for k in range(nv):
        q_next[k] = q[k] + dq[k]
    if not all_finite(dq):
        rint[5] = NONFINITE_STEP
        return NONFINITE_STEP
    return OK


# ------------------------------------------------------------------ the step
@njit(cache=True, error_model="numpy", fastmath=FAST)
def configuration_step(ints, consts, work, rint, rflt, rwork, q, tgt):
    """One configuration-control step (eq. 11) from q; returns a status (OK, NONFINITE_Q,
    NONFINITE_STEP). Results in ``rwork`` (``q_next``, ``dq``, ``hand``, rows) and in the
    per-function outputs of ``rint``."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    par, S_, nvj, vst = m.parent, c.S, m.nv_joint, m.v_start
    nb, nv, npas = m.nb, m.nv, m.npas
    na, nf, max_rows, tip = rint[1], rint[2], rint[3], rint[4]
    n_spheres = rint[9]
    coupled = rint[10] == 1 and npas > 0  # passive motion predicted through J_D
    pdofs = m.passive_dofs
    v, _, _ = step_views(rwork, nb, nv, na, npas, nf, max_rows, n_spheres)
    cols, o = take(rint, HEADER, (na,))
    prog, o = take(rint, o, (nf, PROGRAM_STRIDE))
    out, o = take(rint, o, (nf, OUTPUT_STRIDE))
    tip_off, fo = take(rflt, 0, (3,))
    tip_rot, fo = take(rflt, fo, (3, 3))
    root_point, fo = take(rflt, fo, (3,))
    gravity, fo = take(rflt, fo, (3,))
    We, fo = take(rflt, fo, (6,))
    Wv, fo = take(rflt, fo, (nv,))
    lower, fo = take(rflt, fo, (nv,))
    upper, fo = take(rflt, fo, (nv,))
    mass, fo = take(rflt, fo, (nb,))
    com, fo = take(rflt, fo, (nb, 3))
    p_d, to = take(tgt, 0, (3,))
    R_d, to = take(tgt, to, (3, 3))
    dq_d, to = take(tgt, to, (nv,))
    rint[5], rint[6], rint[7] = OK, 0, 0
    if not all_finite(q):
        rint[5] = NONFINITE_Q
        return NONFINITE_Q
    point = v.point
    J = v.Jt[0]

    # -- gradients by central differences first (they move the placements), h = 1e-6
    for f in range(nf):
        if prog[f, 0] == MANIPULABILITY or prog[f, 0] == GRAVITY:
            _gradients(m, c, w, s, v, rint, rflt, prog, mass, com, gravity, q, point, J)
            break

    # -- forward kinematics and the hand (rows 0-5): dX_e = [p_d - p; log(R_d Rᵀ)] (eq. 11)
    _forward(m, c, w, s, q, v.E_world, v.p_world)
    if coupled:  # J_D at q (6.13): unit active accelerations, V = 0, no gravity, T_p = 0
        status = generalized_jacobian_sweeps(ints, consts, work, q, True, v.E_world,
                                             v.p_world, 0, point, False, v.J_e, v.J_D,
                                             v.column)
        if status != DYNAMICS_OK:  # a passive joint's articulated inertia D_p is singular
            rint[5] = SINGULAR_PASSIVE
            return SINGULAR_PASSIVE
    hp = v.hand
    tb = tip
    _point(v.E_world, v.p_world, tb, tip_off, point)
    Rh = np.empty((3, 3))
    if tb < 0:  # the tip on the root: R = E_fᵀ
        Rh[:, :] = tip_rot.T
    else:
        frame_rotation(v.E_world[tb], tip_rot, Rh)  # R = (E_f E_b)ᵀ
    for a in range(3):
        hp[a] = point[a]
        for b in range(3):
            hp[3 + 3 * a + b] = Rh[a, b]
    _jacobian(par, S_, nvj, vst, v.E_world, v.p_world, tb, point, v.J_e)
    Rerr = np.empty((3, 3))
    for a in range(3):
        for b in range(3):
            Rerr[a, b] = R_d[a, 0] * Rh[b, 0] + R_d[a, 1] * Rh[b, 1] + R_d[a, 2] * Rh[b, 2]
    rvec = np.empty(3)
    rotation_log(Rerr, rvec)
    n = 0
    for a in range(6):
        for k in range(nv):
            v.rows[a, k] = v.J_e[a, k]
        v.dX[a] = p_d[a] - point[a] if a < 3 else rvec[a - 3]
        v.W[a] = We[a]
        v.value[a] = point[a] if a < 3 else rvec[a - 3]
    hp[12] = math.sqrt(v.dX[0] ** 2 + v.dX[1] ** 2 + v.dX[2] ** 2)
    hp[13] = math.sqrt(v.dX[3] ** 2 + v.dX[4] ** 2 + v.dX[5] ** 2)
    n = 6

    # -- critical points of every sphere (eq. 17) and the elbow fade
    fade = 1.0
    if n_spheres > 0:
        fade = _critical_points(m.parent, v.E_world, v.p_world, v.spheres, rint, rflt, prog,
                                root_point, point)

    # -- the functions' rows, in program order
    sph = 0
    n_null = -1
    for f in range(nf):
        kind, fp, ip, slot = prog[f, 0], prog[f, 1], prog[f, 2], prog[f, 3]
        out[f, 0], out[f, 2] = n, 0
        start = n
        if kind == ARM_ANGLE:  # eq. 14-15
            n = _arm_angle_row(par, S_, nvj, vst, v.Jt, v.E_world, v.p_world, v.rows, v.dX, v.W,
                               v.value, rint, rflt, tgt, out, f, fp, ip, slot, n, fade)
        elif kind == ELBOW:
            body, axis = rint[ip], rint[ip + 1]
            _point(v.E_world, v.p_world, body, rflt[fp + 1:fp + 4], point)
            _jacobian(par, S_, nvj, vst, v.E_world, v.p_world, body, point, J)
            for k in range(nv):
                v.rows[n, k] = J[axis, k]
            target = tgt[slot]
            v.dX[n] = 0.0 if math.isnan(target) else target - point[axis]
            v.W[n] = rflt[fp] * fade
            v.value[n] = point[axis]
            n += 1
        elif kind == COLLISION:  # eq. 17-18: rows of the spheres the arm is inside of
            ns = rint[ip]
            gain, coef = rflt[fp], rflt[fp + 1]
            for k in range(ns):
                so = fp + 8 + 5 * k
                d, body = v.spheres[sph, 0], int(v.spheres[sph, 4])
                ri, ro = rflt[so + 3], rflt[so + 4]
                sph += 1
                if d >= ro or body < 0:
                    continue
                for a in range(3):
                    point[a] = v.spheres[sph - 1, 1 + a]
                _jacobian(par, S_, nvj, vst, v.E_world, v.p_world, body, point, J)
                dd = max(d, 1e-12)
                n0, n1, n2_ = ((point[0] - rflt[so]) / dd, (point[1] - rflt[so + 1]) / dd,
                               (point[2] - rflt[so + 2]) / dd)
                for kk in range(nv):
                    v.rows[n, kk] = n0 * J[0, kk] + n1 * J[1, kk] + n2_ * J[2, kk]
                v.dX[n] = gain * (ro - d)
                gap = d - ri
                wco = WEIGHT_CAP if gap <= 0.0 else min(
                    WEIGHT_CAP, 1.0 / (gap * gap) - 1.0 / ((ro - ri) * (ro - ri)))  # (18)
                v.W[n] = min(WEIGHT_CAP, coef * wco)
                v.value[n] = d
                n += 1
        elif kind == JOINT_LIMITS:  # like the obstacles (§3.4(ii))
            margin, gain = rflt[fp], rflt[fp + 1]
            for j in range(nv):
                lo, hi = lower[j], upper[j]
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    continue
                qj = q[j]
                for side in range(2):
                    direction = 1.0 if side == 0 else -1.0
                    delta = direction * (qj - (lo if side == 0 else hi))
                    if delta < margin:
                        for kk in range(nv):
                            v.rows[n, kk] = 0.0
                        v.rows[n, j] = 1.0
                        v.dX[n] = direction * gain * (margin - delta)
                        v.W[n] = WEIGHT_CAP if delta <= 0.0 else min(
                            WEIGHT_CAP, 1.0 / (delta * delta) - 1.0 / (margin * margin))
                        v.value[n] = qj
                        n += 1
        elif kind == LOCKING:  # §3.4(i): θ_j(t) = θ_j(0)
            nl = rint[ip]
            for k in range(nl):
                j = rint[ip + 1 + k]
                for kk in range(nv):
                    v.rows[n, kk] = 0.0
                v.rows[n, j] = 1.0
                v.dX[n] = rflt[fp + 1 + k] - q[j]
                v.W[n] = rflt[fp]
                v.value[n] = q[j]
                n += 1
        elif kind == LINK_ORIENTATION:  # claim 2: orientation of a part of the arm
            body = rint[ip]
            Rf, _ = take(rflt, fp + 1, (3, 3))
            _point(v.E_world, v.p_world, body, rflt[fp + 10:fp + 13], point)
            _jacobian(par, S_, nvj, vst, v.E_world, v.p_world, body, point, J)
            for a in range(3):
                for b in range(3):  # R_link = (E_f E_b)ᵀ
                    Rh[a, b] = (Rf[b, 0] * v.E_world[body, 0, a] + Rf[b, 1]
                                * v.E_world[body, 1, a] + Rf[b, 2] * v.E_world[body, 2, a])
            for a in range(3):
                for b in range(3):
                    Rerr[a, b] = (tgt[slot + 3 * a] * Rh[b, 0] + tgt[slot + 3 * a + 1] * Rh[b, 1]
                                  + tgt[slot + 3 * a + 2] * Rh[b, 2])
            rotation_log(Rerr, rvec)
            for a in range(3):
                for kk in range(nv):
                    v.rows[n, kk] = J[3 + a, kk]
                v.dX[n] = rvec[a]
                v.W[n] = rflt[fp]
                v.value[n] = rvec[a]
                n += 1
        elif kind == OPTIMAL or kind == MANIPULABILITY or kind == GRAVITY:
            if n_null < 0:  # N_e: basis of the null space of J_e (active columns)
                Jc = np.empty((6, na))
                Vj = np.empty((na, na))
                for a in range(6):
                    for k in range(na):
                        Jc[a, k] = v.J_e[a, cols[k]]
                        if coupled:  # the null space of J_G = J_a + J_p J_D (6.11)
                            for j in range(npas):
                                Jc[a, k] += v.J_e[a, pdofs[j]] * v.J_D[j, k]
                jacobi_svd(Jc, Vj)
                sv = np.empty(na)
                smax = 0.0
                for k in range(na):
                    acc = 0.0
                    for a in range(6):
                        acc += Jc[a, k] * Jc[a, k]
                    sv[k] = math.sqrt(acc)
                    smax = max(smax, sv[k])
                n_null = 0
                v.N[:] = 0.0
                for k in range(na):
                    if not (sv[k] > 1e-9 * max(1.0, smax)):
                        for i in range(na):
                            v.N[cols[i], n_null] = Vj[i, k]
                        n_null += 1
            if kind == OPTIMAL:  # §3.3: φ = N_eᵀ K (θ - θ0) → 0, J_c ≈ N_eᵀ K
                wgt = rflt[fp]
                kk_, _ = take(rflt, fp + 1, (nv,))
                rest, _ = take(rflt, fp + 1 + nv, (nv,))
                for i in range(n_null):
                    phi = 0.0
                    for k in range(nv):
                        phi += v.N[k, i] * kk_[k] * (q[k] - rest[k])
                        v.rows[n, k] = v.N[k, i] * kk_[k]
                    v.dX[n], v.W[n], v.value[n] = -phi, wgt, phi
                    n += 1
            else:  # a step along the gradient, projected on the null space
                gain, wgt = rflt[fp], rflt[fp + 1]
                g = v.grad[0] if kind == MANIPULABILITY else v.grad[1]
                sgn = 1.0 if kind == MANIPULABILITY else -1.0
                for i in range(n_null):
                    st = 0.0
                    for k in range(nv):
                        st += v.N[k, i] * sgn * gain * g[k]
                        v.rows[n, k] = v.N[k, i]
                    v.dX[n], v.W[n], v.value[n] = st, wgt, st
                    n += 1
        out[f, 1] = n - start
        for a in range(OUTPUT_STRIDE):
            v.outputs[f, a] = out[f, a]
    rint[6] = n

    if coupled:  # generalized rows r_a + r_p J_D: what each φ does per active motion (6.11)
        for r in range(n):
            for k in range(na):
                acc = v.rows[r, cols[k]]
                for j in range(npas):
                    acc += v.rows[r, pdofs[j]] * v.J_D[j, k]
                v.rows[r, cols[k]] = acc

    # -- normal equations (eq. 10-11): (Jᵀ W J + W_v) dθ = Jᵀ W dX + W_v dθ_d
    status = _solve(v.H, v.L, v.rhs, v.y, v.rows, v.W, v.dX, v.dq, v.q_next, cols, Wv, dq_d,
                    q, n, rint)
    if coupled and status == OK:  # the passive joints follow: dθ_p = J_D dθ_a (6.12)
        for j in range(npas):
            acc = 0.0
            for k in range(na):
                acc += v.J_D[j, k] * v.dq[cols[k]]
            v.dq[pdofs[j]] = acc
            v.q_next[pdofs[j]] = q[pdofs[j]] + acc
    return status
