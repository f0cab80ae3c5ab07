"""Spatial (6-D) algebra used by every recursion of the library.

Convention, stated once (ARCHITECTURE.md §2): inside the core, spatial vectors are
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

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

# Safe fast-math: contraction and reassociation only (never nnan/ninf: finiteness checks
# must survive).
FAST = {"contract", "reassoc", "arcp"}

__all__ = [
    "FAST",
    "block_view",
    "skew",
    "rpy_to_matrix",
    "axis_angle_matrix",
    "quaternion_to_matrix",
    "matrix_to_quaternion",
    "spatial_inertia",
    "motion_transform_matrix",
    "xform_motion",
    "xform_force_transpose",
    "xform_inertia_transpose",
    "cross_motion",
    "cross_force",
]


@intrinsic
def block_view(typingctx, buf, offset, shape):
    """``buf[offset:offset + prod(shape)].reshape(shape)`` for a contiguous 1-D ``buf``, in
    compiled code only: a *borrowed* view (no reference count, no bounds or contiguity checks).

    The kernels unpack ~45 such views of their flat buffers per call; with ``reshape`` the
    checks and the reference counting of every view cost ~1.9 µs per call at N = 7, a third
    of the whole recursion. A borrowed view is valid while ``buf`` is alive, i.e. inside the
    compiled call that received ``buf``: never return one to Python as it is (see
    ``dynamics.numpy_view``). Callers own the layout (see ``dynamics.work_views``)."""
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"
            and isinstance(offset, types.Integer) and isinstance(shape, types.UniTuple)
            and isinstance(shape.dtype, types.Integer)):
        return None
    ndim = shape.count
    view_type = types.Array(buf.dtype, ndim, "C", readonly=not buf.mutable)

    def codegen(context, builder, sig, args):
        buf_value, offset_value, shape_value = args
        source = make_array(buf)(context, builder, buf_value)
        view = make_array(view_type)(context, builder)
        start = context.cast(builder, offset_value, offset, types.intp)
        dims = [context.cast(builder, d, shape.dtype, types.intp)
                for d in cgutils.unpack_tuple(builder, shape_value, ndim)]
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(buf.dtype)))
        strides = [itemsize]
        for d in reversed(dims[1:]):
            strides.insert(0, builder.mul(strides[0], d))
        populate_array(view, data=builder.gep(source.data, [start]), shape=dims,
                       strides=strides, itemsize=itemsize, meminfo=None)
        return view._getvalue()

    return view_type(buf, offset, shape), codegen


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
