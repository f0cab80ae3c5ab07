"""Floating-base state: the ROS odometry convention, and the base twist from conservation of
momentum when no base sensor exists (paper §7; patent FIG. 9: "states from sensors or by
integrating computed accelerations").

Model convention (Pinocchio's free flyer): a floating joint's ``q`` is the child link's pose in
the parent (world) frame, position then quaternion ``x, y, z, w``; its ``v`` is the child
link's twist ``[linear; angular]`` in the child's own axes (linear: velocity of the child frame's
origin). nav_msgs/Odometry carries exactly these: ``pose`` of ``child_frame_id`` in
``header.frame_id``, ``twist`` in ``child_frame_id`` — so the mapping is the identity, field by
field (``base_from_odometry``).

Without a sensor, the system's total spatial momentum ``h`` (world axes, about the world origin)
is conserved when no external force acts (§7: free flight, zero gravity). It is linear in the
velocities,  h = I_sys V_w + h_rel(q, qdot),  with I_sys the whole robot's locked (composite)
spatial inertia and V_w the base motion as a spatial velocity about the world origin, so

    V_w = I_sys⁻¹ (h − h_rel)                                            (§7, momentum balance)

gives the base twist from the joint rates; the base pose follows by integration.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .jacobians import JacobianWorkspace
from .model import FLOATING, RobotModel
from .so3 import integrate_pose, quaternion_to_matrix

__all__ = ["floating_root", "base_from_odometry", "system_momentum", "MomentumBaseEstimator"]


def floating_root(model: RobotModel) -> int | None:
    """Index of the floating joint if it is the model's root joint (body 0), else None;
    ``ValueError`` for floating joints elsewhere (one free-flying base is supported)."""
    floating = [k for k in range(model.nb) if model.hinge_type[k] == FLOATING]
    if not floating:
        return None
    if floating != [0]:
        names = [model.joint_names[k] for k in floating]
        raise ValueError(f"floating joints {names}: only one, at the root, is supported")
    return 0


def base_from_odometry(position: Sequence[float], orientation_xyzw: Sequence[float],
                       linear: Sequence[float], angular: Sequence[float]
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(q_base (7), v_base (6)) of the floating joint from nav_msgs/Odometry fields: pose in
    the odometry frame, twist in the child frame (see the module docstring). ``ValueError``
    naming the field for non-finite values or a quaternion far from unit length."""
    q = np.empty(7)
    q[:3], q[3:] = position, orientation_xyzw
    v = np.empty(6)
    v[:3], v[3:] = linear, angular
    for name, x in (("pose.pose.position", q[:3]), ("pose.pose.orientation", q[3:]),
                    ("twist.twist.linear", v[:3]), ("twist.twist.angular", v[3:])):
        if not np.all(np.isfinite(x)):
            raise ValueError(f"odometry {name} is not finite")
    norm = float(np.linalg.norm(q[3:]))
    if abs(norm - 1.0) > 1e-3:
        raise ValueError(f"odometry pose.pose.orientation has norm {norm:.4f}, not 1")
    q[3:] /= norm
    return q, v


def _body_momenta(model: RobotModel, ws: JacobianWorkspace) -> np.ndarray:
    """Σ_k Φ_kᵀ M(k) V(k): spatial momentum [angular about the world origin; linear], world
    axes, of the body velocities in ``ws.dynamics.vel`` (body axes, [angular; linear])."""
    hb = np.einsum("kij,kj->ki", model.inertia, ws.dynamics.vel)  # M(k) V(k), body axes
    E = ws.E_world  # world -> body axes; body -> world is Eᵀ
    lin = np.einsum("kji,kj->ki", E, hb[:, 3:])
    ang = np.einsum("kji,kj->ki", E, hb[:, :3]) + np.cross(ws.p_world, lin)
    return np.concatenate([ang.sum(axis=0), lin.sum(axis=0)])


def _locked_inertia(model: RobotModel, ws: JacobianWorkspace) -> np.ndarray:
    """I_sys = Σ_k Φ_kᵀ M(k) Φ_k (6×6, about the world origin, world axes, [angular; linear]),
    Φ_k = [[E, 0], [−E [p]×, E]] mapping a world spatial velocity to body k's twist."""
    nb = model.nb
    E, p = ws.E_world, ws.p_world
    px = np.zeros((nb, 3, 3))
    px[:, 0, 1], px[:, 0, 2], px[:, 1, 2] = -p[:, 2], p[:, 1], -p[:, 0]
    px[:, 1, 0], px[:, 2, 0], px[:, 2, 1] = p[:, 2], -p[:, 1], p[:, 0]
    Phi = np.zeros((nb, 6, 6))
    Phi[:, :3, :3] = E
    Phi[:, 3:, 3:] = E
    Phi[:, 3:, :3] = -E @ px
    return np.matmul(Phi.transpose(0, 2, 1), np.matmul(model.inertia, Phi)).sum(axis=0)


def system_momentum(model: RobotModel, q: np.ndarray, v: np.ndarray,
                    workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """Total spatial momentum [linear (N·s); angular about the world origin (N·m·s)], world
    axes (the floating joint's parent frame)."""
    ws = workspace if workspace is not None else JacobianWorkspace(model)
    ws.set_configuration(q)
    ws.dynamics.set_velocity(v)
    h = _body_momenta(model, ws)
    return np.concatenate([h[3:], h[:3]])


class MomentumBaseEstimator:
    """Base pose and twist without a base sensor (``base_state: momentum``).

    Each ``update(q, v, t)`` (q, v: the full model vectors; the floating joint's entries are
    overwritten) computes the base twist from the joint rates and the known total momentum
    ``momentum`` ([linear; angular about the world origin], world axes; zero for a robot
    released at rest), then integrates the base pose from the previous update with the mean
    of the two twists. Drifts when momentum is not conserved (contact, thrusters, gravity
    gradient, a wrong initial momentum), with the model's mass properties' errors, and with the
    integration step (second order in the time between states).
    """

    def __init__(self, model: RobotModel, initial_pose: Sequence[float] = (0, 0, 0, 0, 0, 0, 1),
                 momentum: Sequence[float] = (0, 0, 0, 0, 0, 0)) -> None:
        if floating_root(model) is None:
            raise ValueError("momentum base estimation needs a floating root joint")
        pose = np.asarray(initial_pose, dtype=float)
        h = np.asarray(momentum, dtype=float)
        if pose.shape != (7,) or not np.all(np.isfinite(pose)) or \
                abs(np.linalg.norm(pose[3:]) - 1.0) > 1e-3:
            raise ValueError("initial base pose must be x, y, z, qx, qy, qz, qw with a unit "
                             f"quaternion, got {pose.tolist()}")
        if h.shape != (6,) or not np.all(np.isfinite(h)):
            raise ValueError(f"base momentum must be 6 finite numbers, got {h.tolist()}")
        self.model = model
        self.workspace = JacobianWorkspace(model)
        self.pose = pose.copy()
        self.pose[3:] /= np.linalg.norm(pose[3:])
        self.momentum_spatial = np.concatenate([h[3:], h[:3]])  # [angular; linear]
        self.twist = np.zeros(6)  # base [linear; angular], child axes
        self._t: float | None = None
        self._v = np.zeros(model.nv)

    def reset(self, pose: Sequence[float] | None = None) -> None:
        if pose is not None:
            self.pose[:] = pose
        self._t = None

    def base_twist(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Base twist [linear; angular] (child axes) that gives the total momentum for the
        joint rates in ``v`` at configuration ``q`` (q's base pose is used)."""
        model, ws = self.model, self.workspace
        ws.set_configuration(q)
        self._v[:] = v
        self._v[:6] = 0.0
        ws.dynamics.set_velocity(self._v)
        h_rel = _body_momenta(model, ws)  # the joints' motion with the base held
        V_w = np.linalg.solve(_locked_inertia(model, ws), self.momentum_spatial - h_rel)
        R = ws.E_world[0]  # world -> base axes
        p = ws.p_world[0]
        omega = R @ V_w[:3]
        v_origin = R @ (V_w[3:] + np.cross(V_w[:3], p))  # velocity of the base origin
        return np.concatenate([v_origin, omega])

    def update(self, q: np.ndarray, v: np.ndarray, t: float) -> None:
        """Fill the floating joint's q[0:7], v[0:6] in place for the state at time ``t`` (s)."""
        q[:7] = self.pose
        twist = self.base_twist(q, v)
        if self._t is not None:
            dt = t - self._t
            if dt > 0.0:
                self.pose = integrate_pose(self.pose, 0.5 * (self.twist + twist) * dt)
                q[:7] = self.pose
                if self.momentum_spatial.any():  # zero momentum: the twist is pose-free
                    twist = self.base_twist(q, v)  # at the integrated pose
        self._t = t
        self.twist = twist
        v[:6] = twist

    @property
    def rotation(self) -> np.ndarray:
        return quaternion_to_matrix(self.pose[3:])
