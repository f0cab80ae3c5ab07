"""Limits a control law respects whatever its reference asks (ROS-free).

``PoseSetpointFollower``: the task setpoint moves toward the goal pose with bounded linear and
angular speed and acceleration and stops on it (a far or jumping goal is approached along a
bounded profile, never stepped to). Per axis group (position; orientation as a rotation vector):

    e = goal ⊖ setpoint,  v_des = e/|e| · min(v_max, sqrt(2 a_max |e|), |e|/dt)  (braking)
    v ← v + clip(v_des − v, a_max dt),  setpoint ← setpoint ⊕ v dt

``JointLimitGuard``: bounds on the active joints' accelerations that brake each joint before
its URDF position limit: a joint at distance d from a limit moving toward it at speed s may
accelerate at most k (min(sqrt(2 a_brake d), k d / 4) − s) toward it (beyond: pushed back),
and at most 5 k (v_max − s) toward its URDF velocity limit v_max.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec
from ..so3 import exp, rotation_error
from .task_space import TaskReference

__all__ = ["PoseSetpointFollower", "JointLimitGuard", "SafetyLayer"]


def _bounded_step(error: np.ndarray, velocity: np.ndarray, v_max: float, a_max: float,
                  dt: float) -> np.ndarray:
    """The acceleration of one step toward ``error`` (see the module docstring)."""
    distance = float(np.linalg.norm(error))
    # braking curve; d/dt: never past the goal in one step (exact arrival, any step size)
    speed = min(v_max, math.sqrt(2.0 * a_max * distance), distance / dt if dt > 0 else 0.0)
    v_des = error * (speed / distance) if distance > 0.0 else np.zeros(3)
    dv = v_des - velocity
    n = float(np.linalg.norm(dv))
    if n > a_max * dt:
        dv *= a_max * dt / n
    return dv / dt if dt > 0 else np.zeros(3)


class PoseSetpointFollower:
    """A task setpoint chasing a goal pose within speed and acceleration limits."""

    def __init__(self, max_speed: float, max_acceleration: float, max_angular_speed: float,
                 max_angular_acceleration: float) -> None:
        for name, value in (("max_speed", max_speed), ("max_acceleration", max_acceleration),
                            ("max_angular_speed", max_angular_speed),
                            ("max_angular_acceleration", max_angular_acceleration)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.limits = (max_speed, max_acceleration, max_angular_speed, max_angular_acceleration)
        self.setpoint: TaskReference | None = None

    def reset(self, position: np.ndarray, rotation: np.ndarray) -> None:
        """Start at rest at this pose."""
        self.setpoint = TaskReference(position=np.array(position, float),
                                      rotation=np.array(rotation, float))

    def step(self, goal: TaskReference, dt: float) -> TaskReference:
        """Advance by ``dt`` [s] toward ``goal``; the setpoint carries its velocity and
        acceleration as feed-forward."""
        sp = self.setpoint
        if sp is None:
            raise RuntimeError("reset() the follower before the first step")
        v_max, a_max, w_max, al_max = self.limits
        if dt <= 0.0:
            return sp
        a = _bounded_step(goal.position - sp.position, sp.linear_velocity, v_max, a_max, dt)
        alpha = _bounded_step(rotation_error(goal.rotation, sp.rotation), sp.angular_velocity,
                              w_max, al_max, dt)
        sp.linear_acceleration, sp.angular_acceleration = a, alpha
        sp.linear_velocity = sp.linear_velocity + a * dt
        sp.angular_velocity = sp.angular_velocity + alpha * dt
        sp.position = sp.position + sp.linear_velocity * dt
        sp.rotation = exp(sp.angular_velocity * dt) @ sp.rotation
        sp.pointing_direction = goal.pointing_direction
        return sp


class JointLimitGuard:
    """Acceleration bounds of the active joints that stop them at their position limits.

    ``braking`` [rad/s²] is the deceleration a joint may need near a limit, ``gain`` [1/s] how
    fast the bound pulls the speed onto the braking curve. Joints without limits are free.
    """

    def __init__(self, model: RobotModel, braking: float = 10.0, gain: float = 20.0) -> None:
        if not (braking > 0 and gain > 0):
            raise ValueError("braking and gain must be > 0")
        dofs = model.active_dofs
        q_index = [model.q_start[model.joint_index(n)] for n in model.active_joints]
        self._q_index = np.asarray(q_index, dtype=np.int64)
        self._v_index = np.asarray(dofs, dtype=np.int64)
        self.lower = np.asarray(model.position_lower, float)[dofs]
        self.upper = np.asarray(model.position_upper, float)[dofs]
        self.speed = np.asarray(model.velocity_limit, float)[dofs]  # inf where none
        self.braking, self.gain = braking, gain
        self.velocity_gain = 5.0 * gain  # 1/s: at rest, up to 100 v_max of acceleration
        self.active = np.zeros(len(dofs), dtype=bool)  # bound applied in the last clamp

    def _allowed_speed(self, distance: np.ndarray) -> np.ndarray:
        """Speed toward a limit from which the joint still stops on it: the braking curve
        sqrt(2 a d), linear (d gain/4) close to the limit so that the bound's lag cannot
        overshoot it."""
        d = np.maximum(distance, 0.0)
        return np.minimum(np.sqrt(2 * self.braking * d), 0.25 * self.gain * d)

    def bounds(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) acceleration bounds [rad/s²] of the active joints; beyond a limit
        the bound pushes the joint back (the same curve, negative distance)."""
        qa, va = q[self._q_index], v[self._v_index]
        with np.errstate(invalid="ignore"):
            to_upper, to_lower = self.upper - qa, qa - self.lower
            up = self.gain * (self._allowed_speed(to_upper) + 0.25 * self.gain
                              * np.minimum(to_upper, 0.0) - va)
            lo = -self.gain * (self._allowed_speed(to_lower) + 0.25 * self.gain
                               * np.minimum(to_lower, 0.0) + va)
        up = np.where(np.isfinite(self.upper), up, np.inf)
        lo = np.where(np.isfinite(self.lower), lo, -np.inf)
        with np.errstate(invalid="ignore"):  # the URDF velocity limits, the same way
            up = np.minimum(up, np.where(np.isfinite(self.speed),
                                         self.velocity_gain * (self.speed - va), np.inf))
            lo = np.maximum(lo, np.where(np.isfinite(self.speed),
                                         self.velocity_gain * (-self.speed - va), -np.inf))
        return lo, np.maximum(up, lo)

    def clamp(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray) -> np.ndarray:
        lo, hi = self.bounds(q, v)
        out = np.clip(qdd_active, lo, hi)
        np.not_equal(out, qdd_active, out=self.active)
        return out


class SafetyLayer:
    """Placeholder: passes every command through (see ``command.py``)."""

    parameters: ClassVar[tuple[ParameterSpec, ...]] = ()

    def __init__(self, model: RobotModel, settings: Mapping[str, Any],
                 workspace: JacobianWorkspace | None = None) -> None:
        self.model = model

    def apply(self, q: np.ndarray, v: np.ndarray, out) -> None:
        return None
