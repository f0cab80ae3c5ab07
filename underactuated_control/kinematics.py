"""Forward kinematics on the transforms of the hybrid-dynamics workspace.

World placement of body i: ``E_world[i]`` rotates world coordinates into body coordinates (the
body's rotation matrix is its transpose) and ``p_world[i]`` is the body origin in world (root)
coordinates. Computed base-to-tip from the parent-to-body transforms (E_up, r_up).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .model import FLOATING, PRISMATIC, RobotModel
from .spatial import FAST

__all__ = ["body_placements", "frame_jacobian_kernel", "frame_point", "frame_rotation",
           "classical_acceleration",
           "acceleration_without_gravity", "reach"]


@njit(cache=True, error_model="numpy", fastmath=FAST)
def body_placements(parent, E_up, r_up, E_world, p_world):
    """Base-to-tip: E_world[i] = E_up[i] E_world[parent], p_world[i] = p_par + E_par^T r_up."""
    nb = parent.shape[0]
    for i in range(nb):
        p = parent[i]
        if p < 0:
            for a in range(3):
                p_world[i, a] = r_up[i, a]
                for b in range(3):
                    E_world[i, a, b] = E_up[i, a, b]
            continue
        for a in range(3):
            s = p_world[p, a]
            for b in range(3):
                s += E_world[p, b, a] * r_up[i, b]
            p_world[i, a] = s
            for b in range(3):
                t = 0.0
                for c in range(3):
                    t += E_up[i, a, c] * E_world[p, c, b]
                E_world[i, a, b] = t


@njit(cache=True, error_model="numpy", fastmath=FAST)
def frame_jacobian_kernel(parent, S, nv_joint, v_start, E_world, p_world, body, point, J):
    """Columns of the joints on the root->body path: [linear velocity of ``point``; angular],
    world axes (Pinocchio LOCAL_WORLD_ALIGNED). ``J`` (6, nv) is zeroed first."""
    for a in range(6):
        for c in range(J.shape[1]):
            J[a, c] = 0.0
    j = body
    while j >= 0:
        E = E_world[j]
        dx = point[0] - p_world[j, 0]
        dy = point[1] - p_world[j, 1]
        dz = point[2] - p_world[j, 2]
        for c in range(nv_joint[j]):
            col = v_start[j] + c
            w0 = E[0, 0] * S[j, 0, c] + E[1, 0] * S[j, 1, c] + E[2, 0] * S[j, 2, c]
            w1 = E[0, 1] * S[j, 0, c] + E[1, 1] * S[j, 1, c] + E[2, 1] * S[j, 2, c]
            w2 = E[0, 2] * S[j, 0, c] + E[1, 2] * S[j, 1, c] + E[2, 2] * S[j, 2, c]
            u0 = E[0, 0] * S[j, 3, c] + E[1, 0] * S[j, 4, c] + E[2, 0] * S[j, 5, c]
            u1 = E[0, 1] * S[j, 3, c] + E[1, 1] * S[j, 4, c] + E[2, 1] * S[j, 5, c]
            u2 = E[0, 2] * S[j, 3, c] + E[1, 2] * S[j, 4, c] + E[2, 2] * S[j, 5, c]
            J[0, col] = u0 + w1 * dz - w2 * dy
            J[1, col] = u1 + w2 * dx - w0 * dz
            J[2, col] = u2 + w0 * dy - w1 * dx
            J[3, col] = w0
            J[4, col] = w1
            J[5, col] = w2
        j = parent[j]


@njit(cache=True, error_model="numpy", fastmath=FAST)
def classical_acceleration(E_world_b, alpha_b, vel_b, offset, out):
    """[classical linear acceleration of the point ``offset`` (body axes); angular acceleration]
    of body b in world axes, from its spatial acceleration and velocity in body axes:
    a_p = a_O + w_dot x r + w x (v_O + w x r)."""
    w0, w1, w2 = vel_b[0], vel_b[1], vel_b[2]
    r0, r1, r2 = offset[0], offset[1], offset[2]
    # velocity of the point in body axes
    vp0 = vel_b[3] + w1 * r2 - w2 * r1
    vp1 = vel_b[4] + w2 * r0 - w0 * r2
    vp2 = vel_b[5] + w0 * r1 - w1 * r0
    d0, d1, d2 = alpha_b[0], alpha_b[1], alpha_b[2]
    a0 = alpha_b[3] + d1 * r2 - d2 * r1 + w1 * vp2 - w2 * vp1
    a1 = alpha_b[4] + d2 * r0 - d0 * r2 + w2 * vp0 - w0 * vp2
    a2 = alpha_b[5] + d0 * r1 - d1 * r0 + w0 * vp1 - w1 * vp0
    for k in range(3):
        out[k] = E_world_b[0, k] * a0 + E_world_b[1, k] * a1 + E_world_b[2, k] * a2
        out[3 + k] = E_world_b[0, k] * d0 + E_world_b[1, k] * d1 + E_world_b[2, k] * d2


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def frame_point(E_world_b, p_world_b, offset, out):
    """p = p_b + E_bᵀ r: the point ``offset`` (body axes) of body b in root coordinates."""
    for a in range(3):
        out[a] = p_world_b[a] + E_world_b[0, a] * offset[0] + E_world_b[1, a] * offset[1] \
            + E_world_b[2, a] * offset[2]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def frame_rotation(E_world_b, rotation, out):
    """R = (E_f E_b)ᵀ: the axes of a frame fixed to body b (``rotation`` E_f, the model's
    ``Frame.rotation``) in root axes."""
    for i in range(3):
        for j in range(3):
            out[i, j] = E_world_b[0, i] * rotation[j, 0] + E_world_b[1, i] * rotation[j, 1] \
                + E_world_b[2, i] * rotation[j, 2]


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def acceleration_without_gravity(E_world_b, alpha_b, alpha_base, out):
    """Body b's spatial acceleration (body axes) without the fictitious base acceleration
    [0; -g] (``alpha_base``, root axes) that carried gravity through the recursion."""
    for a in range(6):
        out[a] = alpha_b[a]
    for a in range(3):
        out[3 + a] -= E_world_b[a, 0] * alpha_base[3] + E_world_b[a, 1] * alpha_base[4] \
            + E_world_b[a, 2] * alpha_base[5]


def reach(model: RobotModel, tip: str) -> tuple[np.ndarray, float] | None:
    """(point, radius): the tip of ``tip`` is never farther than ``radius`` from ``point``
    (the origin of the chain's first joint, fixed in the root frame), whatever the joints do:
    the sum of the distances between consecutive joint origins on the root-tip path and the
    tip's offset, plus the travel of prismatic joints (inf if unbounded). None when a floating
    joint is on the path."""
    frame = model.frame(tip)
    path = []
    k = frame.body
    while k >= 0:
        path.append(k)
        k = int(model.parent[k])
    path.reverse()
    if any(model.hinge_type[k] == FLOATING for k in path):
        return None  # a free-flying chain has no fixed centre
    if not path:  # the tip is on the root: it does not move
        return np.asarray(frame.translation, dtype=float), 0.0
    first = path[0]
    point = np.asarray(model.tree_translation[first], dtype=float)
    radius = float(np.linalg.norm(frame.translation))
    for k in path:
        if k != first:
            radius += float(np.linalg.norm(model.tree_translation[k]))
        if model.hinge_type[k] == PRISMATIC:
            j = int(model.v_start[k])
            radius += max(abs(model.position_lower[j]), abs(model.position_upper[j]))
    return point, radius
