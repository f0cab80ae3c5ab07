"""Spatial (6-D) algebra used by every recursion of the library.

Convention, stated once (doc/architecture.md §2): inside the core, spatial vectors are
**[angular(3); linear(3)]**, as in Jain & Rodriguez and Featherstone. Public Jacobians are
reordered to [linear; angular] at the API boundary (see ``jacobians.py``).

A rigid transform from frame A to frame B is stored as the pair ``(E, r)``:
``E`` rotates A-coordinates into B-coordinates and ``r`` is B's origin in A-coordinates.
Its motion transform is ``X = [[E, 0], [-E r~, E]]`` (Featherstone's plx(E, r)); the paper's
``phi*(k+1, k)`` (parent to child) is exactly this X for a body and its parent, and the paper's
``phi(k+1, k)`` (child force to parent) is ``X^T``.

All kernels are ``numba`` compiled functions on plain arrays writing into preallocated outputs,
so the same code serves readers, tests and the 1 kHz control loop.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .buffers import block_view  # noqa: F401  (re-exported: its old home)

# Safe fast-math: contraction (fused multiply-add) and reassociation only. Never nnan/ninf (the
# finiteness checks must survive) and no arcp: x / y stays a division, not x * (1 / y), in the
# pivots and solves of the Cholesky factorisation of D_p(k).
FAST = {"contract", "reassoc"}

__all__ = [
    "FAST",
    "skew",
    "rpy_to_matrix",
    "axis_angle_matrix",
    "quaternion_to_matrix",
    "matrix_to_quaternion",
    "rotation_exp",
    "rotation_log",
    "rotation_error_log",
    "jacobi_svd",
    "spatial_inertia",
    "motion_transform_matrix",
    "xform_motion",
    "xform_force_transpose",
    "xform_inertia_transpose",
    "cross_motion",
    "cross_force",
    "xform_motion_add",
    "add",
    "mat_vec",
    "mat_vec_add",
    "hinge_motion",
    "hinge_motion_add",
    "hinge_motion_sub",
    "hinge_force",
    "hinge_force_add",
    "hinge_force_sub",
    "mat_hinge",
    "hinge_mat",
    "mat_small",
    "small_mat_vec",
    "sub_outer",
    "spd_inverse",
]


def skew(v: np.ndarray) -> np.ndarray:
    """Return the 3x3 cross-product matrix ``v~`` with ``v~ w = v x w``."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to the rotation matrix R = Rz Ry Rx."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


@njit(cache=True, error_model="numpy", fastmath=FAST)
def axis_angle_matrix(axis: np.ndarray, angle: float, out: np.ndarray) -> None:
    """Rotation matrix of ``angle`` about the unit vector ``axis`` (Rodrigues), into ``out``."""
    c = np.cos(angle)
    s = np.sin(angle)
    t = 1.0 - c
    x, y, z = axis[0], axis[1], axis[2]
    out[0, 0] = t * x * x + c
    out[0, 1] = t * x * y - s * z
    out[0, 2] = t * x * z + s * y
    out[1, 0] = t * x * y + s * z
    out[1, 1] = t * y * y + c
    out[1, 2] = t * y * z - s * x
    out[2, 0] = t * x * z - s * y
    out[2, 1] = t * y * z + s * x
    out[2, 2] = t * z * z + c


@njit(cache=True, error_model="numpy", fastmath=FAST)
def quaternion_to_matrix(quat_xyzw: np.ndarray, out: np.ndarray) -> None:
    """Rotation matrix of a quaternion (x, y, z, w), normalised on the fly, into ``out``."""
    x, y, z, w = quat_xyzw[0], quat_xyzw[1], quat_xyzw[2], quat_xyzw[3]
    n = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    out[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    out[0, 1] = 2.0 * (x * y - z * w)
    out[0, 2] = 2.0 * (x * z + y * w)
    out[1, 0] = 2.0 * (x * y + z * w)
    out[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    out[1, 2] = 2.0 * (y * z - x * w)
    out[2, 0] = 2.0 * (x * z - y * w)
    out[2, 1] = 2.0 * (y * z + x * w)
    out[2, 2] = 1.0 - 2.0 * (x * x + y * y)


# SO(3) exp and log, for so3.py's Python callers (one compiled call instead of ~15 NumPy ones)
# and the resolver's kernels; from Python, C-contiguous float64 arrays in (so3.py's wrappers
# make them so: one compiled version, on first use). The one-sided Jacobi SVD of the resolver
# and the task law.


@njit(cache=True, error_model="numpy")
def rotation_exp(w: np.ndarray, out: np.ndarray) -> None:
    """Exp(w): θ = |w| about w/θ (``axis_angle_matrix``, Rodrigues); I + w~ below θ = 1e-12
    (exact to O(θ²)), into ``out``."""
    th = math.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    if th >= 1e-12:
        axis_angle_matrix(w / th, th, out)
        return
    out[0, 0], out[0, 1], out[0, 2] = 1.0, -w[2], w[1]
    out[1, 0], out[1, 1], out[1, 2] = w[2], 1.0, -w[0]
    out[2, 0], out[2, 1], out[2, 2] = -w[1], w[0], 1.0


@njit(cache=True, error_model="numpy", fastmath=FAST)
def rotation_log(R, out):
    """Rotation vector of R (accurate at 0 and near π), into ``out``."""
    w0, w1, w2 = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]  # 2 sin θ a
    cos = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    sin = 0.5 * math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    angle = math.atan2(sin, cos)
    if angle < 1e-9:
        out[0], out[1], out[2] = 0.5 * w0, 0.5 * w1, 0.5 * w2
    elif math.pi - angle < 0.1:  # (R + Rᵀ)/2 - cos θ I = (1 - cos θ) a aᵀ
        k, best = 0, -1e300
        for i in range(3):
            if R[i, i] - cos > best:
                k, best = i, R[i, i] - cos
        n2 = 0.0
        for i in range(3):
            b = 0.5 * (R[i, k] + R[k, i]) - (cos if i == k else 0.0)
            out[i] = b
            n2 += b * b
        n = math.sqrt(n2)
        sign = 1.0 if out[0] * w0 + out[1] * w1 + out[2] * w2 >= 0.0 else -1.0
        for i in range(3):
            out[i] *= sign * angle / n
    else:
        f = angle / (2.0 * math.sin(angle))
        out[0], out[1], out[2] = f * w0, f * w1, f * w2


@njit(cache=True, error_model="numpy", fastmath=FAST)
def jacobi_svd(B, V):
    """One-sided Jacobi SVD (Hestenes): rotates the columns of B (m x n) until they are
    orthogonal, so that B_in V = B_out with V orthogonal; the singular values are the column
    norms of B_out (accurate also for the tiny ones that decide a rank). No LAPACK needed."""
    m, n = B.shape
    V[:] = 0.0
    for i in range(n):
        V[i, i] = 1.0
    frob = 0.0
    for i in range(m):
        for j in range(n):
            frob += B[i, j] * B[i, j]
    tiny = 1e-30 * frob  # a column this small is zero to working precision: not rotated
    for _ in range(60):
        off = 0.0
        for p in range(n - 1):
            for r in range(p + 1, n):
                alpha, beta, gamma = 0.0, 0.0, 0.0
                for i in range(m):
                    alpha += B[i, p] * B[i, p]
                    beta += B[i, r] * B[i, r]
                    gamma += B[i, p] * B[i, r]
                if gamma == 0.0 or alpha <= tiny or beta <= tiny:
                    continue
                rel = abs(gamma) / math.sqrt(alpha * beta)
                if rel <= 1e-15:
                    continue
                off = max(off, rel)
                zeta = (beta - alpha) / (2.0 * gamma)
                t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                cs = 1.0 / math.sqrt(1.0 + t * t)
                sn = cs * t
                for i in range(m):
                    bp, bq = B[i, p], B[i, r]
                    B[i, p], B[i, r] = cs * bp - sn * bq, sn * bp + cs * bq
                for i in range(n):
                    vp, vq = V[i, p], V[i, r]
                    V[i, p], V[i, r] = cs * vp - sn * vq, sn * vp + cs * vq
        if off <= 1e-15:
            break


@njit(cache=True, error_model="numpy")
def rotation_error_log(R_desired: np.ndarray, R: np.ndarray, out: np.ndarray) -> None:
    """Log(R_desired Rᵀ) into ``out``."""
    M = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            M[i, j] = R_desired[i, 0] * R[j, 0] + R_desired[i, 1] * R[j, 1] + \
                R_desired[i, 2] * R[j, 2]
    rotation_log(M, out)


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Quaternion (x, y, z, w), w >= 0, of a rotation matrix (Shepperd's method: stable for
    every rotation, 180° included)."""
    t = np.trace(R)
    if t > max(R[0, 0], R[1, 1], R[2, 2]):
        w = 0.5 * np.sqrt(1.0 + t)
        q = np.array([(R[2, 1] - R[1, 2]), (R[0, 2] - R[2, 0]), (R[1, 0] - R[0, 1]), 4 * w * w])
        q /= 4 * w
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 0.0))
        q = np.zeros(4)
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
        q[3] = (R[k, j] - R[j, k]) / s
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def spatial_inertia(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """Spatial inertia M(k) about the body origin, [angular; linear] order (paper §3 nomenclature).

    ``com`` is p(k), the centre of mass in body axes; ``inertia_com`` the 3x3 rotational inertia
    about the centre of mass in body axes. J(k) = I_c + m p~ p~^T (parallel axis theorem).
    """
    c = skew(np.asarray(com, dtype=float))
    out = np.zeros((6, 6))
    out[:3, :3] = inertia_com + mass * c @ c.T
    out[:3, 3:] = mass * c
    out[3:, :3] = mass * c.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def motion_transform_matrix(E: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Dense 6x6 motion transform X = [[E, 0], [-E r~, E]] (for analysis and tests)."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ skew(r)
    return X


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def xform_motion(E: np.ndarray, r: np.ndarray, m: np.ndarray, out: np.ndarray) -> None:
    """out = X m: a motion vector from frame A to frame B (paper: phi*(k+1, k) m)."""
    w0, w1, w2 = m[0], m[1], m[2]
    # linear part: E (m_lin - r x m_ang)
    l0 = m[3] - (r[1] * w2 - r[2] * w1)
    l1 = m[4] - (r[2] * w0 - r[0] * w2)
    l2 = m[5] - (r[0] * w1 - r[1] * w0)
    for a in range(3):
        out[a] = E[a, 0] * w0 + E[a, 1] * w1 + E[a, 2] * w2
        out[3 + a] = E[a, 0] * l0 + E[a, 1] * l1 + E[a, 2] * l2


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def xform_force_transpose(E: np.ndarray, r: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """out += X^T f: a force from frame B back to frame A (paper: phi(k+1, k) f). Accumulates."""
    n0 = E[0, 0] * f[0] + E[1, 0] * f[1] + E[2, 0] * f[2]
    n1 = E[0, 1] * f[0] + E[1, 1] * f[1] + E[2, 1] * f[2]
    n2 = E[0, 2] * f[0] + E[1, 2] * f[1] + E[2, 2] * f[2]
    f0 = E[0, 0] * f[3] + E[1, 0] * f[4] + E[2, 0] * f[5]
    f1 = E[0, 1] * f[3] + E[1, 1] * f[4] + E[2, 1] * f[5]
    f2 = E[0, 2] * f[3] + E[1, 2] * f[4] + E[2, 2] * f[5]
    out[0] += n0 + r[1] * f2 - r[2] * f1
    out[1] += n1 + r[2] * f0 - r[0] * f2
    out[2] += n2 + r[0] * f1 - r[1] * f0
    out[3] += f0
    out[4] += f1
    out[5] += f2


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def xform_inertia_transpose(
    E: np.ndarray, r: np.ndarray, inertia: np.ndarray, tmp: np.ndarray, out: np.ndarray
) -> None:
    """out += X^T I X (paper: phi(k+1, k) P+(k) phi*(k+1, k)). ``tmp`` is a 6x6 scratch array."""
    # tmp = X^T I, column by column: each column of I is a force vector
    for c in range(6):
        n0 = E[0, 0] * inertia[0, c] + E[1, 0] * inertia[1, c] + E[2, 0] * inertia[2, c]
        n1 = E[0, 1] * inertia[0, c] + E[1, 1] * inertia[1, c] + E[2, 1] * inertia[2, c]
        n2 = E[0, 2] * inertia[0, c] + E[1, 2] * inertia[1, c] + E[2, 2] * inertia[2, c]
        f0 = E[0, 0] * inertia[3, c] + E[1, 0] * inertia[4, c] + E[2, 0] * inertia[5, c]
        f1 = E[0, 1] * inertia[3, c] + E[1, 1] * inertia[4, c] + E[2, 1] * inertia[5, c]
        f2 = E[0, 2] * inertia[3, c] + E[1, 2] * inertia[4, c] + E[2, 2] * inertia[5, c]
        tmp[0, c] = n0 + r[1] * f2 - r[2] * f1
        tmp[1, c] = n1 + r[2] * f0 - r[0] * f2
        tmp[2, c] = n2 + r[0] * f1 - r[1] * f0
        tmp[3, c] = f0
        tmp[4, c] = f1
        tmp[5, c] = f2
    # out += tmp X = (X^T tmp^T)^T; rows of tmp are transformed like force vectors
    for row in range(6):
        n0 = E[0, 0] * tmp[row, 0] + E[1, 0] * tmp[row, 1] + E[2, 0] * tmp[row, 2]
        n1 = E[0, 1] * tmp[row, 0] + E[1, 1] * tmp[row, 1] + E[2, 1] * tmp[row, 2]
        n2 = E[0, 2] * tmp[row, 0] + E[1, 2] * tmp[row, 1] + E[2, 2] * tmp[row, 2]
        f0 = E[0, 0] * tmp[row, 3] + E[1, 0] * tmp[row, 4] + E[2, 0] * tmp[row, 5]
        f1 = E[0, 1] * tmp[row, 3] + E[1, 1] * tmp[row, 4] + E[2, 1] * tmp[row, 5]
        f2 = E[0, 2] * tmp[row, 3] + E[1, 2] * tmp[row, 4] + E[2, 2] * tmp[row, 5]
        out[row, 0] += n0 + r[1] * f2 - r[2] * f1
        out[row, 1] += n1 + r[2] * f0 - r[0] * f2
        out[row, 2] += n2 + r[0] * f1 - r[1] * f0
        out[row, 3] += f0
        out[row, 4] += f1
        out[row, 5] += f2


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def cross_motion(v: np.ndarray, m: np.ndarray, out: np.ndarray) -> None:
    """out = v x m (spatial motion cross product)."""
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    out[0] = w1 * m[2] - w2 * m[1]
    out[1] = w2 * m[0] - w0 * m[2]
    out[2] = w0 * m[1] - w1 * m[0]
    out[3] = w1 * m[5] - w2 * m[4] + u1 * m[2] - u2 * m[1]
    out[4] = w2 * m[3] - w0 * m[5] + u2 * m[0] - u0 * m[2]
    out[5] = w0 * m[4] - w1 * m[3] + u0 * m[1] - u1 * m[0]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def cross_force(v: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """out = v x* f (spatial force cross product)."""
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    out[0] = w1 * f[2] - w2 * f[1] + u1 * f[5] - u2 * f[4]
    out[1] = w2 * f[0] - w0 * f[2] + u2 * f[3] - u0 * f[5]
    out[2] = w0 * f[1] - w1 * f[0] + u0 * f[4] - u1 * f[3]
    out[3] = w1 * f[5] - w2 * f[4]
    out[4] = w2 * f[3] - w0 * f[5]
    out[5] = w0 * f[4] - w1 * f[3]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def xform_motion_add(E: np.ndarray, r: np.ndarray, m: np.ndarray, y: np.ndarray,
                     out: np.ndarray) -> None:
    """out = X m + y (``out`` may be ``y``, not ``m``)."""
    xform_motion(E, r, m, out)
    for a in range(6):
        out[a] += y[a]


# ---------------------------------------------------------------- 6-D blocks of the sweeps
# H*(k), the hinge's motion subspace, is stored as a 6x6 block whose first r = nv_joint[k]
# columns are used; U = P H*, G_p (6 x r) and D_p^-1 (r x r) are stored the same way. Vectors
# with one entry per hinge DOF (beta, T, nu, eps) are slices of length r.


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def add(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """out = x + y (6-vectors)."""
    for a in range(6):
        out[a] = x[a] + y[a]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_vec(A: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out = A x (6x6 times 6; ``out`` may be ``x``)."""
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    for a in range(6):
        out[a] = (A[a, 0] * x0 + A[a, 1] * x1 + A[a, 2] * x2 + A[a, 3] * x3 + A[a, 4] * x4
                  + A[a, 5] * x5)


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_vec_add(A: np.ndarray, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """out = y + A x (6x6 times 6; ``out`` may be ``x`` or ``y``)."""
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    for a in range(6):
        out[a] = y[a] + (A[a, 0] * x0 + A[a, 1] * x1 + A[a, 2] * x2 + A[a, 3] * x3
                         + A[a, 4] * x4 + A[a, 5] * x5)


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_motion(H: np.ndarray, beta: np.ndarray, out: np.ndarray) -> None:
    """out = H* beta: the spatial motion of the hinge rates ``beta`` (r = len(beta))."""
    for a in range(6):
        out[a] = 0.0
    for c in range(beta.shape[0]):
        for a in range(6):
            out[a] += H[a, c] * beta[c]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_motion_add(H: np.ndarray, beta: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out = x + H* beta (also x + G_p eps: any 6 x r block; ``out`` may be ``x``)."""
    for a in range(6):
        out[a] = x[a]
    for c in range(beta.shape[0]):
        for a in range(6):
            out[a] += H[a, c] * beta[c]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_motion_sub(H: np.ndarray, beta: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out = x - H* beta (any 6 x r block; ``out`` may be ``x``)."""
    for a in range(6):
        out[a] = x[a]
    for c in range(beta.shape[0]):
        for a in range(6):
            out[a] -= H[a, c] * beta[c]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_force(H: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """out = H f: the hinge forces of the spatial force ``f`` (r = len(out))."""
    for c in range(out.shape[0]):
        s = 0.0
        for a in range(6):
            s += H[a, c] * f[a]
        out[c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_force_sub(y: np.ndarray, H: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """out = y - H f (also nu - G_p* alpha: any 6 x r block; r = len(out))."""
    for c in range(out.shape[0]):
        s = y[c]
        for a in range(6):
            s -= H[a, c] * f[a]
        out[c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_force_add(y: np.ndarray, H: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """out = y + H f (any 6 x r block; r = len(out); ``out`` may be ``y``)."""
    for c in range(out.shape[0]):
        s = y[c]
        for a in range(6):
            s += H[a, c] * f[a]
        out[c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_hinge(P: np.ndarray, H: np.ndarray, r: int, out: np.ndarray) -> None:
    """out = P H* (6x6 times 6 x r)."""
    for a in range(6):
        for c in range(r):
            s = 0.0
            for b in range(6):
                s += P[a, b] * H[b, c]
            out[a, c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def hinge_mat(H: np.ndarray, U: np.ndarray, r: int, out: np.ndarray) -> None:
    """out = H U (r x 6 times 6 x r), e.g. D_p = H P H* from U = P H*."""
    for c in range(r):
        for d in range(r):
            s = 0.0
            for a in range(6):
                s += H[a, c] * U[a, d]
            out[c, d] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def mat_small(U: np.ndarray, A: np.ndarray, r: int, out: np.ndarray) -> None:
    """out = U A (6 x r times r x r), e.g. G_p = U D_p^-1."""
    for a in range(6):
        for c in range(r):
            s = 0.0
            for d in range(r):
                s += U[a, d] * A[d, c]
            out[a, c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def small_mat_vec(A: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out = A x (r x r times r, r = len(x)), e.g. nu_p = D_p^-1 eps_p."""
    for c in range(x.shape[0]):
        s = 0.0
        for d in range(x.shape[0]):
            s += A[c, d] * x[d]
        out[c] = s


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def sub_outer(P: np.ndarray, G: np.ndarray, U: np.ndarray, r: int, out: np.ndarray) -> None:
    """out = P - G U^T (rank-r update of a 6x6; G, U 6 x r), e.g. P+ = P - G_p (P H*)^T."""
    for a in range(6):
        for b in range(6):
            s = P[a, b]
            for c in range(r):
                s -= G[a, c] * U[b, c]
            out[a, b] = s


@njit(cache=True, error_model="numpy", fastmath=FAST)
def spd_inverse(D: np.ndarray, n: int, tol: float, out: np.ndarray, L: np.ndarray,
                Li: np.ndarray) -> bool:
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
