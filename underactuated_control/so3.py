"""Rotations and rigid motions in one place: SO(3) exp/log, rotation error, quaternions, SE(3).

Conventions (doc/architecture.md §2): a rotation vector ``w`` is axis * angle (radians); quaternions
are (x, y, z, w) as in geometry_msgs and Pinocchio's ``coeffs()``; a pose is (position,
quaternion) as the 7 configuration numbers of a floating joint; a twist is [linear; angular].

Plain NumPy, no ROS. The compiled kernels (``quaternion_to_matrix``, ``axis_angle_matrix``,
the SO(3) exp and log) stay in ``spatial.py``; this module wraps them for Python callers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .spatial import (
    axis_angle_matrix,
    matrix_to_quaternion,
    rotation_error_log,
    rotation_exp,
    rotation_log,
    rpy_to_matrix,
    skew,
)
from .spatial import quaternion_to_matrix as _quaternion_kernel

__all__ = [
    "skew",
    "cross",
    "exp",
    "log",
    "rotation_error",
    "rotation_angle",
    "axis_angle",
    "rpy_to_matrix",
    "left_jacobian",
    "quaternion_to_matrix",
    "matrix_to_quaternion",
    "quaternion_matrix",
    "quaternion_multiply",
    "quaternion_exp",
    "integrate_pose",
]


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of two 3-vectors (= skew(a) @ b; np.cross costs ~10x more on tiny arrays)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def _vector3(w: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    w = np.ascontiguousarray(w, dtype=float)
    if w.shape != (3,):
        raise ValueError(f"{name} must be a 3-vector, got shape {w.shape}")
    return w


def _matrix3(R: np.ndarray, name: str) -> np.ndarray:
    R = np.ascontiguousarray(R, dtype=float)
    if R.shape != (3, 3):
        raise ValueError(f"{name} must be a 3x3 matrix, got shape {R.shape}")
    return R


def exp(w: Sequence[float] | np.ndarray) -> np.ndarray:
    """Rotation matrix of the rotation vector ``w`` = θ k (Rodrigues):
    Exp(w) = I + sin θ K + (1 - cos θ) K², K = k~ (the compiled ``spatial.rotation_exp``)."""
    out = np.empty((3, 3))
    rotation_exp(_vector3(w, "rotation vector"), out)
    return out


def log(R: np.ndarray) -> np.ndarray:
    """Rotation vector w (|w| in [0, π]) with Exp(w) = R, accurate at 0 and near π (the
    compiled ``spatial.rotation_log``: near π the axis comes from the symmetric part of R)."""
    out = np.empty(3)
    rotation_log(_matrix3(R, "rotation"), out)
    return out


def rotation_error(R_desired: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle, root axes) taking R to R_desired: log(R_d Rᵀ)."""
    out = np.empty(3)
    rotation_error_log(_matrix3(R_desired, "desired rotation"), _matrix3(R, "rotation"), out)
    return out


def rotation_angle(R: np.ndarray) -> float:
    """Angle of the rotation R in [0, π] (atan2 of both parts: accurate for small angles too,
    where arccos((tr R - 1)/2) loses half the digits)."""
    R = np.asarray(R, dtype=float)
    s = 0.5 * np.linalg.norm([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return float(np.arctan2(s, (np.trace(R) - 1.0) / 2.0))


def axis_angle(axis: Sequence[float] | np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix of ``angle`` about the unit vector ``axis`` (the compiled kernel)."""
    out = np.empty((3, 3))
    axis_angle_matrix(np.asarray(axis, dtype=float), float(angle), out)
    return out


def left_jacobian(w: np.ndarray) -> np.ndarray:
    """V(w) = I + (1 - cos θ)/θ² w~ + (θ - sin θ)/θ³ w~²: the translation part of exp(se(3))."""
    t = float(np.linalg.norm(w))
    W = skew(w)
    if t < 1e-8:
        return np.eye(3) + 0.5 * W + W @ W / 6.0
    # (1 - cos t)/t² as 2 sin²(t/2)/t²: no cancellation for small t (1 - cos t would lose
    # 1e-16/t² of the coefficient); the W² term is harmless (its error scales with t²)
    h = np.sin(0.5 * t) / t
    return np.eye(3) + 2.0 * h * h * W + (t - np.sin(t)) / t**3 * W @ W


# ---------------------------------------------------------------- quaternions (x, y, z, w)
def quaternion_to_matrix(quat_xyzw: Sequence[float] | np.ndarray,
                         out: np.ndarray | None = None) -> np.ndarray:
    """Rotation matrix of a quaternion, normalised on the fly (no check: see
    :func:`quaternion_matrix` for user input); written into ``out`` when given."""
    if out is None:
        out = np.empty((3, 3))
    _quaternion_kernel(np.asarray(quat_xyzw, dtype=float), out)
    return out


def quaternion_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """Rotation matrix of a quaternion given by its components (e.g. a geometry_msgs one);
    ``ValueError`` if it has no direction (zero or non-finite norm)."""
    n = float(np.sqrt(x * x + y * y + z * z + w * w))
    if not np.isfinite(n) or n < 1e-9:
        raise ValueError("orientation quaternion has zero or non-finite norm")
    return quaternion_to_matrix(np.array([x, y, z, w]) / n)


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b: R(a ⊗ b) = R(a) R(b)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def quaternion_exp(w: np.ndarray) -> np.ndarray:
    """Unit quaternion of the rotation vector ``w`` (w >= 0 for |w| <= π)."""
    angle = float(np.linalg.norm(w))
    if angle < 1e-12:
        return np.array([0.5 * w[0], 0.5 * w[1], 0.5 * w[2], 1.0])
    axis = w / angle
    s = np.sin(0.5 * angle)
    return np.array([axis[0] * s, axis[1] * s, axis[2] * s, np.cos(0.5 * angle)])


# ---------------------------------------------------------------- SE(3)
def integrate_pose(pose: np.ndarray, twist: np.ndarray) -> np.ndarray:
    """pose ⊕ twist: the pose (position, quaternion xyzw) moved along the SE(3) exponential of
    the body twist [linear; angular] (already times dt), Pinocchio's free-flyer ``integrate``."""
    quat = np.array(pose[3:7], dtype=float)
    v, w = twist[:3], twist[3:6]
    out = np.empty(7)
    out[:3] = pose[:3] + quaternion_to_matrix(quat) @ (left_jacobian(w) @ v)
    q = quaternion_multiply(quat, quaternion_exp(w))
    out[3:] = q / np.linalg.norm(q)
    return out
