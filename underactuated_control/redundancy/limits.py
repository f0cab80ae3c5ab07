"""Keeping a stream of joint setpoints inside what the robot can do (ROS-free).

``SetpointLimiter.step`` turns a requested change of the joints over one sample (a
configuration-control step) into a setpoint that respects

- the velocity limits of the URDF (``model.velocity_limit``),
- an acceleration limit per joint (the URDF has none: a parameter),
- the position limits (``model.position_lower/upper``): a joint slows down in time to stop at
  its limit with that acceleration, and the position is clamped as the last resort.

The requested step is first scaled as a whole (``scale`` in [0, 1]: the direction in joint
space, hence the hand's path, is kept; the caller advances its trajectory clock by ``scale``
samples, so the motion is stretched in time instead of distorted). Only when no common scale
satisfies every bound (a joint must reverse faster than its acceleration allows) is each joint
clipped on its own; the feedback of the next step then corrects the path.

``plan_motion`` runs a goal's configuration control ahead of time (a dry run along the path,
joints clamped to their limits) and returns the shortest duration, no shorter than the one
asked for, at which the cycloidal motion keeps within the velocity and acceleration limits, and
whether the plan reaches the goal at all. ``reach`` is a cheap necessary test before that: no
configuration puts the tip farther from the chain's first joint than the sum of the link
lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..control.trajectories import cycloidal
from ..kinematics import reach  # re-exported: redundancy.limits.reach
from ..model import FLOATING, RobotModel
from ..so3 import rotation_error
from .configuration_control import ConfigurationControl, ConfigurationTrajectory

__all__ = ["LimitedStep", "SetpointLimiter", "MotionPlan", "plan_motion", "reach",
           "wrap_angle", "hand_errors"]



def wrap_angle(x: float) -> float:
    """x wrapped to [-π, π)."""
    return (x + np.pi) % (2 * np.pi) - np.pi


def hand_errors(task_weights, p_goal: np.ndarray, R_goal: np.ndarray, p: np.ndarray,
                R: np.ndarray) -> tuple[float, float]:
    """(|position error| [m], |orientation error| [rad], rotation vector log(R_goal Rᵀ)) of
    the hand over the axes x, y, z, rx, ry, rz whose task weight W_e is not zero: an axis the
    configuration control does not track (weight 0) is not judged."""
    w = np.broadcast_to(np.asarray(task_weights, dtype=float), (6,))
    e = np.concatenate([np.asarray(p_goal, dtype=float) - p,
                        rotation_error(np.asarray(R_goal, dtype=float), R)])
    e = np.where(w > 0, e, 0.0)
    return float(np.linalg.norm(e[:3])), float(np.linalg.norm(e[3:]))


@dataclass
class LimitedStep:
    q: np.ndarray  # next setpoint, inside the position limits
    v: np.ndarray  # its velocity (q - q_previous) / dt, inside the velocity limits
    a: np.ndarray  # (v - v_previous) / dt
    scale: float  # fraction of the requested step taken along its direction
    clipped: bool  # some joint was limited on its own (the path deviates this sample)
    at_limit: tuple[str, ...]  # joints held at a position limit the request pushed against


class SetpointLimiter:
    """Velocity, acceleration and position limits of a setpoint stream (1-DOF joints).

    ``acceleration_limit``: one value for every joint or one per DOF [rad/s², m/s²].
    Joints without URDF limits are bounded by what they have (an infinite velocity limit is
    only bounded by the acceleration limit)."""

    def __init__(self, model: RobotModel, acceleration_limit) -> None:
        if np.any(model.hinge_type == FLOATING):
            raise ValueError("the setpoint limiter handles 1-DOF joints only")
        self.model = model
        self.lower = np.asarray(model.position_lower, dtype=float)
        self.upper = np.asarray(model.position_upper, dtype=float)
        self.velocity = np.abs(np.asarray(model.velocity_limit, dtype=float))
        self.acceleration = np.broadcast_to(
            np.asarray(acceleration_limit, dtype=float), (model.nv,)).copy()
        if not np.all(np.isfinite(self.acceleration)) or np.any(self.acceleration <= 0):
            raise ValueError(f"acceleration limits must be finite and > 0, got "
                             f"{self.acceleration.tolist()}")

    def clamp(self, q: np.ndarray) -> np.ndarray:
        """q inside the position limits."""
        return np.clip(q, self.lower, self.upper)

    def _stop_speed(self, distance: np.ndarray, dt: float) -> np.ndarray:
        """Largest speed w from which a joint, after one more sample at w, can still stop
        within ``distance`` braking at its acceleration limit a, sample by sample.

        Braking samples run at w - a dt, w - 2 a dt, ... and then 0; with n of them positive
        the joint travels dt ((n + 1) w - a dt n (n + 1)/2), linear in w on each interval
        n a dt < w <= (n + 1) a dt, which gives w for the interval that holds ``distance``.
        After a braking sample the same bound holds again (the travel drops by exactly
        w dt), so a plan that respects it can always stop in time: the position clamp does
        not cut in and the acceleration bound holds up to the limit."""
        a = self.acceleration
        c = a * dt * dt
        d = np.where(np.isinf(distance), 0.0, distance)
        n = np.maximum(np.ceil(np.sqrt(2.0 * d / c + 0.25) - 1.5), 0.0)
        w = d / dt / (n + 1.0) + 0.5 * a * dt * n
        return np.where(np.isinf(distance), np.inf, w)

    def step(self, q: np.ndarray, v: np.ndarray, dq: np.ndarray, dt: float) -> LimitedStep:
        """The setpoint after ``q`` (moving at ``v``) for the requested change ``dq`` over
        ``dt`` s. ``q`` is expected inside the limits (see ``clamp``); ``ValueError`` for a
        non-finite request."""
        q, v, dq = (np.asarray(x, dtype=float) for x in (q, v, dq))
        if not np.all(np.isfinite(dq)):
            bad = [self.model.dof_names[i] for i in np.flatnonzero(~np.isfinite(dq))]
            raise ValueError(f"non-finite step for {bad}")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be > 0 s, got {dt}")
        a_dt = self.acceleration * dt
        # velocity bounds: URDF limit, and slow enough to stop at the position limits
        v_hi = np.minimum(self.velocity, self._stop_speed(np.maximum(self.upper - q, 0.0), dt))
        v_lo = np.maximum(-self.velocity, -self._stop_speed(np.maximum(q - self.lower, 0.0),
                                                             dt))
        box_lo, box_hi = np.maximum(v_lo, v - a_dt), np.minimum(v_hi, v + a_dt)
        empty = box_lo > box_hi  # already too fast: brake as hard as allowed
        if np.any(empty):
            brake = np.clip(np.clip(v, v_lo, v_hi), v - a_dt, v + a_dt)
            box_lo, box_hi = np.where(empty, brake, box_lo), np.where(empty, brake, box_hi)
        u = dq / dt
        scale = _common_scale(u, box_lo, box_hi)
        clipped = scale is None
        if clipped:  # no common scale: keep the velocity bounds' scale, clip joint by joint
            scale = _common_scale(u, np.minimum(v_lo, 0.0), np.maximum(v_hi, 0.0)) or 0.0
        v_next = np.clip(scale * u, box_lo, box_hi)
        q_next = np.clip(q + v_next * dt, self.lower, self.upper)
        v_next = (q_next - q) / dt
        zone = 1e-9 * (1.0 + np.abs(q_next))
        pushing = ((q_next >= self.upper - zone) & (u > 0)) | ((q_next <= self.lower + zone)
                                                               & (u < 0))
        at_limit = tuple(self.model.dof_names[i] for i in np.flatnonzero(pushing))
        return LimitedStep(q=q_next, v=v_next, a=(v_next - v) / dt, scale=float(scale),
                           clipped=clipped, at_limit=at_limit)


def _common_scale(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float | None:
    """Largest s in [0, 1] with lo <= s u <= hi for every entry, or None if there is none."""
    s_lo, s_hi = 0.0, 1.0
    pos, neg, zero = u > 0, u < 0, u == 0
    if np.any(zero & ((lo > 0) | (hi < 0))):
        return None
    if np.any(pos):
        s_hi = min(s_hi, float(np.min(hi[pos] / u[pos])))
        s_lo = max(s_lo, float(np.max(lo[pos] / u[pos])))
    if np.any(neg):
        s_hi = min(s_hi, float(np.min(lo[neg] / u[neg])))
        s_lo = max(s_lo, float(np.max(hi[neg] / u[neg])))
    return s_hi if s_lo <= s_hi else None


@dataclass
class MotionPlan:
    """What a dry run of a goal found."""

    duration: float  # s: the requested duration, stretched where the limits demand
    requested: float  # s: the requested duration
    reached: bool  # the hand ends within the tolerances of the target
    position_error: float  # m, hand to target at the end
    orientation_error: float  # rad
    arm_angle_error: float  # rad (not part of ``reached``: obstacles may trade it off)
    at_limit: tuple[str, ...]  # joints the plan pressed against a position limit
    q_end: np.ndarray
    failure: str = ""  # why the dry run stopped (non-finite step), empty otherwise



def plan_motion(control: ConfigurationControl, limiter: SetpointLimiter, q0: np.ndarray,
                start: tuple, goal: tuple, duration: float, samples: int = 100,
                settle: int = 30, position_tolerance: float = 1e-3,
                orientation_tolerance: float = 1e-2, margin: float = 1.1,
                extra: dict | None = None) -> MotionPlan:
    """Dry run of the motion from ``start`` = (p0, R0, ψ0) to ``goal`` = (p1, R1, ψ1): the
    configuration-control step at ``samples`` points of the cycloidal path, then ``settle``
    steps at the goal, the joints clamped to their limits (passive ones locked, or moved by
    dθ_p = J_D dθ_a: the step's ``passive_motion``). The hand is judged on the axes with a
    non-zero task weight (``hand_errors``).

    The duration: a cycloidal motion over T moves the joints along the sampled path q_k; a
    slower one (T f) divides their velocities by f and accelerations by f². f is the largest
    of 1, max |Δq|/(Δt v_max) and sqrt(max |Δ²q|/(Δt² a_max)), times ``margin`` when > 1.

    ``extra``: other functions' targets, name -> (start, goal), moved on the same cycloidal
    profile (e.g. ``{"elbow_z": (0.4, 0.5)}``)."""
    m = control.model
    ws = control.workspace
    p1, R1, psi1 = goal
    traj = ConfigurationTrajectory(*start, *goal, duration)
    q = limiter.clamp(np.asarray(q0, dtype=float))
    path = [q]
    failure = ""
    pushed: set[str] = set()
    for k in range(1, samples + settle + 1):
        t = duration * min(k, samples) / samples
        p_d, R_d, psi_d = traj(t)
        targets = {"arm_angle": psi_d}
        if extra:
            s = cycloidal(t, duration)[0]
            targets.update({name: a + s * (b - a) for name, (a, b) in extra.items()})
        res = control.step(q, (p_d, R_d), targets)
        if not np.all(np.isfinite(res.q_next)):
            failure = "non-finite configuration-control step"
            break
        q_next = limiter.clamp(res.q_next)
        outside = np.flatnonzero(np.abs(q_next - res.q_next) > 1e-12)
        pushed.update(m.dof_names[i] for i in outside)
        q = q_next
        if k <= samples:
            path.append(q)
    ws.set_configuration(q)
    p, R = ws.frame_placement(control.tip)
    e_p, e_o = hand_errors(control.task_weights, p1, R1, p, R)
    psi_fn = next((f for f in control.functions if getattr(f, "name", "") == "arm_angle"), None)
    e_psi = abs(wrap_angle(psi1 - psi_fn.arm_angle.evaluate(q).psi)) if psi_fn else 0.0
    qs = np.array(path)
    dt = duration / samples
    factor = 1.0
    if len(qs) > 2:
        vel = np.abs(np.diff(qs, axis=0)).max(axis=0) / dt
        acc = np.abs(np.diff(qs, n=2, axis=0)).max(axis=0) / dt**2
        factor = max(1.0, float(np.max(vel / limiter.velocity)),
                     float(np.sqrt(np.max(acc / limiter.acceleration))))
    if factor > 1.0:
        factor *= margin
    reached = not failure and e_p <= position_tolerance and e_o <= orientation_tolerance
    return MotionPlan(duration=duration * factor, requested=duration, reached=reached,
                      position_error=e_p, orientation_error=e_o, arm_angle_error=e_psi,
                      at_limit=tuple(sorted(pushed, key=m.dof_names.index)), q_end=q,
                      failure=failure)
