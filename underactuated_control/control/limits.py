"""Limits a control law respects whatever its reference asks (ROS-free).

``PoseSetpointFollower``: the task setpoint moves toward the goal pose with bounded linear and
angular speed and acceleration and stops on it (a far or jumping goal is approached along a
bounded profile, never stepped to). Per axis group (position; orientation as a rotation vector):

    e = goal ⊖ setpoint,  v_des = e/|e| · min(v_max, sqrt(2 a_max |e|), |e|/dt)  (braking)
    v ← v + clip(v_des − v, a_max dt),  setpoint ← setpoint ⊕ v dt

A goal streamed as stamped samples (``TaskReference.stamp``, a path published at 100 Hz on
the law's clock) is followed as the path the samples lie on, not chased to a stop at each
sample: the target is on the samples' polyline at the law's time less 1.5 spacings,

    τ = t − 1.5 (s_k − s_{k−1}),  target = goal_{k−1} ⊕ (τ − s_{k−1}) v_s  (s_{k−1} ≤ τ < s_k),
    v_s = (goal_k ⊖ goal_{k−1}) / (s_k − s_{k−1})  (fed forward: v_des = v_s + the braking term)

(``STREAM_DELAY``: a sample may reach the law up to half a spacing after its stamp),
continuous in t while the samples come in time (the controller node applies a stamped goal
when its states reach the stamp), so the setpoint's acceleration, the task law's
feed-forward, is the path's. Chasing each step of the staircase to a stop instead puts a
±a_max square wave on it (Baxter's arm, loaded to 92 % of its shoulder's effort limit, lost
the hand under gravity). An unstamped goal, the first stamped one, samples more than
``STREAM_INTERVAL`` apart or faster than the speed limits (a jump), and a stream whose newest
sample the target has reached are chased as above.

``JointLimitGuard``: bounds on the active joints' accelerations that brake each joint before
its URDF position limit: a joint at distance d from a limit moving toward it at speed s may
accelerate at most k (min(sqrt(2 a_brake d), k d / 4) − s) toward it (beyond: pushed back),
and at most 5 k (v_max − s) toward its URDF velocity limit v_max (one compiled kernel).

``SafetyLayer``: those bounds for every mode, on the accelerations the law's torques imply
(forward dynamics, or the law's own hybrid solve), the torques recomputed by the hybrid
recursion when a bound bites, or when the law's torques with the friction compensation pass
the effort limits and the command the motors cut from them would give accelerations past the
bounds (those are scaled
toward the least accelerations within the bounds, as far as the effort limits allow). Where
the law names the task rows it sets
(``LawOutput.task_rows``: S and J_G of S J_G qdd_a, (6.10)), the joints a bound pins are taken
out of the task and the others make up the task acceleration they no longer give, within
their own bounds (``keep_task_rows``: saturation in the null space, Flacco, De Luca & Khatib
2015, at the acceleration level), so that a joint braked at its limit does not take the hand
with it while the rest of the arm can still move it; the plain clip where keeping the task
would need torques past the effort limits.
``ReachCheck``: the reach test of every pose-goal mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from numba import njit, types

from ..buffers import float_array
from ..dynamics import Workspace, all_finite
from ..jacobians import JacobianWorkspace
from ..kinematics import reach
from ..model import FLOATING, RobotModel
from ..parameters import ParameterSpec
from ..passive_forces import PassiveForceModel
from ..spatial import rotation_error_log, rotation_exp
from .law import LawOutput
from .task_space import (
    _A,
    _ALPHA,
    _P,
    _ROT,
    _V,
    _W,
    SETPOINT_SIZE,
    TaskReference,
    _damped_solve,
    packed_fields,
    packed_rotation,
)

__all__ = ["PoseSetpointFollower", "JointLimitGuard", "ReachCheck", "SafetyLayer",
           "acceleration_bounds", "clamp_to_bounds", "follower_step", "keep_task_rows"]


@njit(cache=True, inline="always", error_model="numpy")
def _bounded_step(error, velocity, feed_forward, v_max, a_max, dt, out):
    """The acceleration of one step (dt > 0) toward ``error`` (see the module docstring),
    moving with ``feed_forward`` (a stamped stream's velocity), into ``out``."""
    distance = math.sqrt(error[0] ** 2 + error[1] ** 2 + error[2] ** 2)
    # braking curve; d/dt: never past the goal in one step (exact arrival, any step size)
    speed = min(v_max, math.sqrt(2.0 * a_max * distance), distance / dt)
    scale = speed / distance if distance > 0.0 else 0.0
    for i in range(3):
        out[i] = feed_forward[i] + error[i] * scale
    n = math.sqrt(out[0] ** 2 + out[1] ** 2 + out[2] ** 2)
    cap = v_max / n if n > v_max else 1.0  # v_des within the speed limit
    for i in range(3):
        out[i] = out[i] * cap - velocity[i]  # dv = v_des - v
    n = math.sqrt(out[0] ** 2 + out[1] ** 2 + out[2] ** 2)
    shrink = a_max * dt / n if n > a_max * dt else 1.0
    for i in range(3):
        out[i] = out[i] * shrink / dt


@njit(cache=True, inline="always", error_model="numpy")
def _turned(w, R, out):
    """Exp(w) R into ``out`` (w a rotation vector, rad)."""
    turn = np.empty((3, 3))
    rotation_exp(w, turn)
    for i in range(3):
        for j in range(3):
            out[i, j] = turn[i, 0] * R[0, j] + turn[i, 1] * R[1, j] + turn[i, 2] * R[2, j]


STREAM_INTERVAL = 0.25  # s: stamped samples at most this far apart are a stream
STREAM_DELAY = 1.5  # sample spacings the target runs behind the law's time: half a spacing
# of slack for a sample that reaches the law after its stamp (stamped at publication)

# the stream's memory (PoseSetpointFollower._stream): the last three stamped samples, newest
# first, each position (3), rotation row by row (9), stamp (1); then how many were seen (≤ 3)
_R, _STAMP, _SAMPLE = 3, 12, 13  # offsets in a sample, its size
_SEEN = 3 * _SAMPLE
STREAM_SIZE = _SEEN + 1


@njit(cache=True, error_model="numpy")
def _segment_target(stream, k, tau, limits, target_position, target_rotation, velocity):
    """The target at stamp time ``tau`` on the segment from sample k + 1 (older) to sample k,
    and the segment's velocity (v_s, ω_s) into ``velocity`` (before the segment: its start,
    at rest); False (nothing written) when the two are no stream: too far apart, or joined
    faster than the speed limits (a jump)."""
    new, old = k * _SAMPLE, (k + 1) * _SAMPLE
    spacing = stream[new + _STAMP] - stream[old + _STAMP]
    if not 0.0 < spacing <= STREAM_INTERVAL:
        return False
    new_rotation, old_rotation = np.empty((3, 3)), np.empty((3, 3))
    for i in range(9):
        new_rotation[i // 3, i % 3] = stream[new + _R + i]
        old_rotation[i // 3, i % 3] = stream[old + _R + i]
    turn = np.empty(3)
    rotation_error_log(new_rotation, old_rotation, turn)  # Log(R_k R_{k+1}ᵀ)
    speed, angular_speed = 0.0, 0.0
    for i in range(3):
        speed += ((stream[new + i] - stream[old + i]) / spacing) ** 2
        angular_speed += (turn[i] / spacing) ** 2
    if speed > limits[4] ** 2 or angular_speed > limits[5] ** 2:
        return False
    into = min(tau - stream[old + _STAMP], spacing)  # s into the segment
    moving = 1.0 if into >= 0.0 else 0.0  # before it: at its start, still (a stream begins)
    into = max(into, 0.0)
    for i in range(3):
        velocity[i] = moving * (stream[new + i] - stream[old + i]) / spacing
        velocity[3 + i] = moving * turn[i] / spacing
        target_position[i] = stream[old + i] + velocity[i] * into
        turn[i] = velocity[3 + i] * into
    _turned(turn, old_rotation, target_rotation)  # Exp(ω_s into) R_{k+1}
    return True


@njit(cache=True, error_model="numpy")
def _stream_target(goal_position, goal_rotation, goal_stamp, now, stream, limits,
                   target_position, target_rotation, velocity):
    """The target at the law's time ``now`` (s) and the stream's velocity (v_s, ω_s) into
    ``velocity`` (the module docstring); the goal itself and zero velocity where the goal is
    chased. ``stream`` is updated: a stamped goal with a new stamp is a new sample."""
    velocity[:] = 0.0
    for i in range(3):
        target_position[i] = goal_position[i]
        for j in range(3):
            target_rotation[i, j] = goal_rotation[i, j]
    if not goal_stamp > 0.0:  # unstamped: chased, and no stream
        stream[_SEEN] = 0.0
        return
    if stream[_SEEN] == 0.0 or goal_stamp != stream[_STAMP]:  # a new sample: shift the others
        for i in range(2 * _SAMPLE - 1, -1, -1):
            stream[_SAMPLE + i] = stream[i]
        for i in range(3):
            stream[i] = goal_position[i]
        for i in range(9):
            stream[_R + i] = goal_rotation[i // 3, i % 3]
        stream[_STAMP] = goal_stamp
        stream[_SEEN] = min(stream[_SEEN] + 1.0, 3.0)
    if stream[_SEEN] < 2.0:
        return  # the first sample
    newest, previous, earlier = stream[_STAMP], stream[_SAMPLE + _STAMP], \
        stream[2 * _SAMPLE + _STAMP]
    tau = now - STREAM_DELAY * (newest - previous)
    if not tau < newest:
        return  # the newest reached: the stream stopped or runs late
    if tau >= previous or stream[_SEEN] < 3.0:
        _segment_target(stream, 0, tau, limits, target_position, target_rotation, velocity)
    elif tau >= earlier - STREAM_INTERVAL:  # still on the segment before
        _segment_target(stream, 1, tau, limits, target_position, target_rotation, velocity)
    # else a sample from the future (stamps on another clock than the law's): chased


# compiled on first use (a task-space mode's first cycle: the node's warm-up), C-contiguous
# float64 arrays in
@njit(cache=True, error_model="numpy")
def follower_step(goal_position, goal_rotation, goal_stamp, now, stream, limits, dt, state):
    """One step (dt > 0) of ``PoseSetpointFollower`` (the module docstring) of the setpoint
    ``state`` (``SETPOINT_SIZE``: position, rotation, velocities at the law's time ``now`` −
    dt; the new ones and this step's accelerations written in place) toward the goal;
    ``limits``: v_max, a_max, w_max, α_max (this step's), then the unscaled v_max, w_max (a
    stream no faster is followed); ``stream``: the stamped samples' memory
    (``_stream_target``)."""
    position, linear_velocity = state[_P:_ROT], state[_V:_W]
    angular_velocity = state[_W:_A]
    linear_acceleration, angular_acceleration = state[_A:_ALPHA], state[_ALPHA:]
    rotation = np.empty((3, 3))
    packed_rotation(state, rotation)
    target_position, target_rotation = np.empty(3), np.empty((3, 3))
    stream_velocity = np.empty(6)
    _stream_target(goal_position, goal_rotation, goal_stamp, now - dt, stream, limits,
                   target_position, target_rotation, stream_velocity)
    error = np.empty(3)
    for i in range(3):
        error[i] = target_position[i] - position[i]
    _bounded_step(error, linear_velocity, stream_velocity[:3], limits[0], limits[1], dt,
                  linear_acceleration)
    rotation_error_log(target_rotation, rotation, error)
    _bounded_step(error, angular_velocity, stream_velocity[3:], limits[2], limits[3], dt,
                  angular_acceleration)
    for i in range(3):  # v += a dt, then p += v dt with the new v
        linear_velocity[i] += linear_acceleration[i] * dt
        angular_velocity[i] += angular_acceleration[i] * dt
        position[i] += linear_velocity[i] * dt
        error[i] = angular_velocity[i] * dt
    turned = np.empty((3, 3))
    _turned(error, rotation, turned)  # Exp(ω dt) R
    for i in range(9):
        state[_ROT + i] = turned[i // 3, i % 3]


class PoseSetpointFollower:
    """A task setpoint chasing a goal pose within speed and acceleration limits. The
    setpoint's arrays are the follower's own (one buffer the compiled step updates in place;
    after ``reset`` and every ``step``, float64 C-contiguous views of it, as the kernels take
    them): valid until the next ``step`` or ``reset``; copy what must outlive it. Arrays put
    on the setpoint from outside (a law holding it back) are taken in at the next step."""

    def __init__(self, max_speed: float, max_acceleration: float, max_angular_speed: float,
                 max_angular_acceleration: float) -> None:
        for name, value in (("max_speed", max_speed), ("max_acceleration", max_acceleration),
                            ("max_angular_speed", max_angular_speed),
                            ("max_angular_acceleration", max_angular_acceleration)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.limits = (max_speed, max_acceleration, max_angular_speed, max_angular_acceleration)
        self.setpoint: TaskReference | None = None
        # a step's (speed-scaled) limits, then the unscaled speeds, for the kernel
        self._step_limits = np.array([*self.limits, max_speed, max_angular_speed])
        self._stream = np.zeros(STREAM_SIZE)  # the stamped samples seen (_stream_target)
        # the setpoint (follower_step's layout) and its fields' views of it
        state = self._state = np.zeros(SETPOINT_SIZE)
        self._fields = packed_fields(state)

    @property
    def state(self) -> np.ndarray:
        """The setpoint packed (``task_space.packed_fields``): after ``reset`` and every
        ``step`` its fields are views of this buffer, as the compiled cycles take it."""
        return self._state

    def reset(self, position: np.ndarray, rotation: np.ndarray) -> None:
        """Start at rest at this pose (the stamped samples seen forgotten)."""
        position, rotation = np.array(position, float), np.array(rotation, float)
        self._state[:] = 0.0
        p, R, v, w, a, alpha = self._fields
        p[:], R[:] = position, rotation
        self.setpoint = TaskReference(position=p, rotation=R, linear_velocity=v,
                                      angular_velocity=w, linear_acceleration=a,
                                      angular_acceleration=alpha)
        self._stream[:] = 0.0

    def stream_velocities(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The velocities (m/s) of the stamped samples' two newest segments, older first (v_s
        of the module docstring: the path's own, not the setpoint's, which may be catching up
        with it), and the time [s] between their middles; None where no stream of three
        samples is followed (unstamped goals, the first two samples, a gap)."""
        stream = self._stream
        if stream[_SEEN] < 3.0:
            return None
        t0, t1, t2 = stream[_STAMP], stream[_SAMPLE + _STAMP], stream[2 * _SAMPLE + _STAMP]
        if not (0.0 < t0 - t1 <= STREAM_INTERVAL and 0.0 < t1 - t2 <= STREAM_INTERVAL):
            return None
        p0, p1 = stream[:_R], stream[_SAMPLE:_SAMPLE + _R]
        p2 = stream[2 * _SAMPLE:2 * _SAMPLE + _R]
        return (p1 - p2) / (t1 - t2), (p0 - p1) / (t0 - t1), 0.5 * (t0 - t2)

    def resume(self, other: PoseSetpointFollower) -> None:
        """Go on from ``other``'s setpoint: its pose, velocities and accelerations, and the
        stamped samples it has seen (a law rebuilt for new gains continues the one it
        replaces, not restarting at rest)."""
        sp = other.setpoint
        if sp is None:
            raise RuntimeError("the follower to resume from has no setpoint")
        self.reset(sp.position, sp.rotation)
        _, _, v, w, a, alpha = self._fields
        v[:], w[:] = sp.linear_velocity, sp.angular_velocity
        a[:], alpha[:] = sp.linear_acceleration, sp.angular_acceleration
        self._stream[:] = other._stream

    def step(self, goal: TaskReference, dt: float,
             speed_scale: tuple[float, float] = (1.0, 1.0), now: float = 0.0
             ) -> TaskReference:
        """Advance by ``dt`` [s] toward ``goal``; the setpoint carries its velocity and
        acceleration as feed-forward. ``speed_scale``: this step's share (0, 1] of the linear
        and angular speed limits (a task law slowing near a singularity). ``now`` [s]: the
        law's time at the step's end, on the clock of the goals' stamps (0: a stamped stream
        is chased as unstamped goals are)."""
        sp = self.setpoint
        if sp is None:
            raise RuntimeError("reset() the follower before the first step")
        p, R, v, w, a, alpha = self._fields
        if not (sp.position is p and sp.rotation is R and sp.linear_velocity is v
                and sp.angular_velocity is w and sp.linear_acceleration is a
                and sp.angular_acceleration is alpha):
            self._take_in(sp)
        if dt <= 0.0:
            return sp
        limits = self._step_limits
        v_max, a_max, w_max, al_max = self.limits
        limits[0], limits[1] = v_max * speed_scale[0], a_max
        limits[2], limits[3] = w_max * speed_scale[1], al_max
        stamp = float(goal.stamp) if now > 0.0 else 0.0
        follower_step(float_array(goal.position), float_array(goal.rotation), stamp,
                      float(now), self._stream, limits, float(dt), self._state)
        sp.pointing_direction = goal.pointing_direction
        return sp

    def _take_in(self, sp: TaskReference) -> None:
        """The setpoint's values into the buffer, its fields the buffer's views again."""
        p, R, v, w, a, alpha = fields = self._fields
        p[:], R[:] = sp.position, sp.rotation
        v[:], w[:] = sp.linear_velocity, sp.angular_velocity
        a[:], alpha[:] = sp.linear_acceleration, sp.angular_acceleration
        (sp.position, sp.rotation, sp.linear_velocity, sp.angular_velocity,
         sp.linear_acceleration, sp.angular_acceleration) = fields


# One fixed signature, compiled at import (loaded from the cache): see dynamics.run_steps.
_VECTOR = types.float64[::1]
_INDEX = types.int64[::1]
_BOUNDS_SIGNATURE = types.void(_VECTOR, _VECTOR, _INDEX, _INDEX, _VECTOR, _VECTOR, _VECTOR,
                               types.float64, types.float64, types.float64, _VECTOR, _VECTOR)


@njit(_BOUNDS_SIGNATURE, cache=True, error_model="numpy")
def acceleration_bounds(q, v, q_index, v_index, lower, upper, speed, braking, gain,
                        velocity_gain, lo, hi):
    """(lo, hi) [rad/s²] of each guarded DOF (see the module docstring); an infinite limit
    gives no bound. Beyond a position limit the bound pushes the joint back (the same curve,
    negative distance)."""
    for i in range(q_index.shape[0]):
        qa, va = q[q_index[i]], v[v_index[i]]
        up, dn = np.inf, -np.inf
        if upper[i] < np.inf:
            d = upper[i] - qa
            dp = max(d, 0.0)
            allowed = min(math.sqrt(2.0 * braking * dp), 0.25 * gain * dp)
            up = gain * (allowed + 0.25 * gain * min(d, 0.0) - va)
        if lower[i] > -np.inf:
            d = qa - lower[i]
            dp = max(d, 0.0)
            allowed = min(math.sqrt(2.0 * braking * dp), 0.25 * gain * dp)
            dn = -gain * (allowed + 0.25 * gain * min(d, 0.0) + va)
        if speed[i] < np.inf:  # the URDF velocity limit, the same way
            up = min(up, velocity_gain * (speed[i] - va))
            dn = max(dn, velocity_gain * (-speed[i] - va))
        lo[i] = dn
        hi[i] = max(up, dn)


_CLAMP_SIGNATURE = types.int64(_VECTOR, _VECTOR, _VECTOR, types.boolean[::1])


@njit(_CLAMP_SIGNATURE, cache=True, error_model="numpy")
def clamp_to_bounds(qdd, lo, hi, limited):
    """qdd clipped to [lo, hi] in place; ``limited`` flags the entries changed. Returns how
    many changed."""
    n = 0
    for i in range(qdd.shape[0]):
        x = qdd[i]
        y = min(max(x, lo[i]), hi[i])
        limited[i] = y != x
        if y != x:
            qdd[i] = y
            n += 1
    return n


def keep_task_rows(law_qdd: np.ndarray, lo: np.ndarray, hi: np.ndarray, pinned: np.ndarray,
                   A: np.ndarray, eps: float, max_damping: float, out: np.ndarray) -> None:
    """The law's active accelerations ``law_qdd`` within the bounds [lo, hi], keeping the task
    rows A qdd (A = S J_G, k × n_active) where the free joints can: the joints ``pinned``
    (bounded already; updated in place) are held at the bound they cross, the task
    acceleration that takes away, A_p (clip(qdd_p) − law_qdd_p), is made up by the free joints
    through the damped least squares of A_f (σ_min below ``eps``: damping up to
    ``max_damping``, ``_damped_solve``); a free joint that this pushes past a bound is pinned
    too and the solve repeated (at most n_active times). ``out``: the bounded accelerations
    (clipped at the end: the bounds hold whatever the task loses), or the plain clip where
    that loses less of the task (the pins are chosen greedily; ``pinned`` then the clip's)."""
    n = law_qdd.shape[0]
    first = pinned.copy()
    held = np.clip(law_qdd, lo, hi)  # a pinned joint's acceleration: its bound
    qdd = held
    for _ in range(n):
        free = ~pinned
        qdd = np.where(pinned, held, law_qdd)
        if free.any() and pinned.any():
            lost = A[:, pinned] @ (held[pinned] - law_qdd[pinned])  # the task rows' loss
            qdd[free] -= _damped_solve(A[:, free], lost, eps, max_damping)[0]
        crossed = free & ((qdd < lo) | (qdd > hi))
        if not crossed.any():
            break
        held[crossed] = np.clip(qdd[crossed], lo[crossed], hi[crossed])
        pinned |= crossed
    np.clip(qdd, lo, hi, out=out)
    clipped = np.clip(law_qdd, lo, hi)
    if np.linalg.norm(A @ (clipped - law_qdd)) < np.linalg.norm(A @ (out - law_qdd)):
        out[:] = clipped
        pinned[:] = first


class JointLimitGuard:
    """Acceleration bounds of the active joints that stop them at their position limits and
    keep them within their velocity limits.

    ``braking`` [rad/s²] is the deceleration a joint may need near a limit, ``gain`` [1/s] how
    fast the bound pulls the speed onto the braking curve; ``margin`` [rad or m]: the joints
    stop this far inside their URDF position limits (at most half their range);
    ``speed_scale``: the URDF velocity limits times this. Joints without limits (and the DOF of
    an active floating joint) are free.
    """

    def __init__(self, model: RobotModel, braking: float = 10.0, gain: float = 20.0,
                 margin: float = 0.0, speed_scale: float = 1.0) -> None:
        if not (braking > 0 and gain > 0):
            raise ValueError("braking and gain must be > 0")
        if not (margin >= 0 and speed_scale > 0):
            raise ValueError("margin must be >= 0 and speed_scale > 0")
        dofs = np.asarray(model.active_dofs, dtype=np.int64)
        joint_of_dof = np.repeat(np.arange(model.nb), model.nv_joint)[dofs]
        one_dof = model.hinge_type[joint_of_dof] != FLOATING
        self._q_index = np.where(one_dof, np.asarray(model.q_start)[joint_of_dof], 0)
        self._q_index = np.array(self._q_index, dtype=np.int64)
        self._v_index = np.array(dofs, dtype=np.int64)  # a writeable copy (kernel signature)
        lower = np.where(one_dof, np.asarray(model.position_lower, float)[dofs], -np.inf)
        upper = np.where(one_dof, np.asarray(model.position_upper, float)[dofs], np.inf)
        with np.errstate(invalid="ignore"):
            mid = 0.5 * (lower + upper)
        bounded = np.isfinite(lower) & np.isfinite(upper)
        self.lower = np.where(bounded, np.minimum(lower + margin, mid), lower)
        self.upper = np.where(bounded, np.maximum(upper - margin, mid), upper)
        speed = np.where(one_dof, np.asarray(model.velocity_limit, float)[dofs], np.inf)
        self.speed = np.where(speed > 0, speed * speed_scale, np.inf)  # inf where none
        self.braking, self.gain = float(braking), float(gain)
        self.velocity_gain = 5.0 * self.gain  # 1/s: at rest, up to 100 v_max of acceleration
        n = len(dofs)
        self.active = np.zeros(n, dtype=bool)  # bound applied in the last clamp
        self._lo, self._hi = np.zeros(n), np.zeros(n)

    def bounds(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) acceleration bounds [rad/s²] of the active joints (preallocated
        arrays, overwritten by the next call)."""
        acceleration_bounds(float_array(q), float_array(v), *self.kernel_arguments,
                            self._lo, self._hi)
        return self._lo, self._hi

    @property
    def last_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounds the last ``bounds`` or clamp computed (its (q, v)'s; no recomputation)."""
        return self._lo, self._hi

    @property
    def kernel_arguments(self) -> tuple:
        """What ``acceleration_bounds`` takes after q and v, before (lo, hi)."""
        return (self._q_index, self._v_index, self.lower, self.upper, self.speed, self.braking,
                self.gain, self.velocity_gain)

    def clamp_in_place(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray) -> int:
        """Clip ``qdd_active`` (a float64 C-contiguous array) to the bounds in place; returns
        how many joints were limited (``active`` flags them)."""
        self.bounds(q, v)
        return int(clamp_to_bounds(qdd_active, self._lo, self._hi, self.active))

    def clamp_law_accelerations(self, q: np.ndarray, v: np.ndarray, tau_active: np.ndarray,
                                qdd_active: np.ndarray, out: np.ndarray,
                                braked: np.ndarray) -> int:
        """``out`` = ``qdd_active`` (the accelerations a law solved ``tau_active`` for) clipped
        to the bounds, and, when no joint was, the joints that command brakes into
        ``braked`` (``braked_joints``), in one compiled call; returns how many joints were
        limited (``active`` flags them), −1 without clipping if ``tau_active`` is not
        finite."""
        return bound_own_accelerations(
            float_array(tau_active), float_array(qdd_active), float_array(q),
            float_array(v), *self.kernel_arguments, self._lo, self._hi, out, self.active,
            braked)

    def clamp(self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray) -> np.ndarray:
        """A clipped copy of ``qdd_active``."""
        out = np.array(qdd_active, dtype=float)
        self.clamp_in_place(q, v, out)
        return out


class ReachCheck:
    """Refuses a goal position no configuration reaches: farther from the chain's first joint
    than the sum of its link lengths (``kinematics.reach``); every pose-goal mode uses it."""

    def __init__(self, model: RobotModel, frame: str) -> None:
        self.frame = frame
        self.reach = reach(model, frame)

    def check(self, position: np.ndarray) -> None:
        """``ValueError`` with the distance and the reach for a goal beyond it."""
        if self.reach is None:
            return
        center, radius = self.reach
        distance = float(np.linalg.norm(np.asarray(position, float) - center))
        if not distance <= radius:
            raise ValueError(f"target {distance:.3f} m from the first joint is beyond the reach "
                             f"of '{self.frame}' ({radius:.3f} m)")


class SafetyLayer:
    """The active joints' accelerations that a law's torques imply, kept within the
    ``JointLimitGuard`` bounds, for every mode (see ``command.py``).

    Each cycle: qdd = forward dynamics of (T_a of the law, T_p of the passive-force model) (the
    hybrid recursion with every joint passive), or the law's own ``qdd_active`` where it gives
    them with the T_p they were solved with (the task and joint laws: (5.4) at the same (q, v)
    gives the same accelerations; the operational-space law: its forward dynamics); qdd_a
    clipped to the guard's bounds; when a bound bites, T_a and qdd_p are recomputed by the
    hybrid recursion (section 5) with the bounded qdd_a and the same T_p (scaled toward the
    least accelerations within the bounds when they would need more than the effort limits,
    less the ``reserve`` a later stage adds, which the motors would clip into other
    accelerations), and the law's status names the joints. Where no bound bites but the law's
    torques with the later stages' pass the effort limits (``cut_by_motors``, after them), the
    accelerations the motors' cut command gives are checked against the bounds too (forward
    dynamics), and scaled the same way where they would pass them (the status naming the
    joints past their effort limits). ``overrides`` counts the
    cycles it changed, ``limited_joints`` are the joints of the last one.
    """

    parameters: ClassVar[tuple[ParameterSpec, ...]] = (
        ParameterSpec("safety_limits", True, "keep the active joints' commanded accelerations "
                      "within bounds that stop them at their URDF position limits and keep them "
                      "within their URDF velocity limits, in every mode"),
        ParameterSpec("joint_limit_braking", 10.0, "deceleration with which the active joints "
                      "are stopped at their URDF position limits (every mode)", unit="rad/s^2",
                      low=0.1, high=1e3),
        ParameterSpec("position_limit_margin", 0.0, "the active joints stop this far inside "
                      "their URDF position limits (at most half the range)", unit="rad|m",
                      low=0.0, high=1.0),
        ParameterSpec("velocity_limit_scale", 1.0, "the active joints' speed bound: the URDF "
                      "<limit velocity> times this", unit="1", low=0.01, high=10.0),
        ParameterSpec("safety_keep_task", True, "where a bound pins some active joints, the "
                      "others make up the task acceleration they no longer give, within their "
                      "own bounds and the effort limits (task mode, no failure reaction in "
                      "force); false: the pinned joints are only clipped"),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any],
                 workspace: JacobianWorkspace | None = None) -> None:
        def get(name: str) -> Any:
            return settings[name] if name in settings else self._defaults[name]

        self.model = model
        self.enabled = bool(get("safety_limits"))
        self.keep_task = bool(get("safety_keep_task"))
        # the damped solve of the free joints' task rows (task mode's own: TaskLaw parameters)
        self._solve = (float(settings.get("task_singular_threshold", 1e-2)),
                       float(settings.get("task_max_damping", 5e-2)))
        self.guard = self.guard_for(model, settings)
        shared = workspace.shared if workspace is not None else Workspace(model)
        self._forward = shared.hybrid("passive")  # forward dynamics (ABA)
        self._hybrid = shared.hybrid("model")  # section 5 with the model's passive set
        self.passive_forces = PassiveForceModel(model)
        self._a = np.array(model.active_dofs, dtype=np.int64)  # writable: a kernel's
        self._p = np.asarray(model.passive_dofs, dtype=np.int64)
        self._tau = np.zeros(model.nv)
        self._qdd_a = np.zeros(len(self._a))
        self._tau_out = np.zeros(len(self._a))
        effort = np.asarray(model.effort_limit, float)[self._a] * float(
            settings.get("effort_limit_scale", 1.0))
        self._effort = np.where(effort > 0, effort, np.inf)  # the node's command clamp
        self._effort_hi, self._effort_lo = np.zeros(len(self._a)), np.zeros(len(self._a))
        self._qdd_p_out = np.zeros(len(self._p))
        self._tau_p = np.zeros(len(self._p))  # the T_p of the last apply
        self._empty = np.zeros(0)
        self.overrides = 0
        self.overrode = False  # in the last apply
        # the active joints' accelerations the last apply's command implies (the forward
        # dynamics, bounded when it overrode; None when it did not run)
        self.acceleration: np.ndarray | None = None
        # the active joints the last apply's command brakes (``braked``; valid while
        # ``acceleration`` is not None)
        self.slowed_joints = np.zeros(len(self._a), dtype=bool)
        self.limited_joints: list[str] = []

    _defaults: ClassVar[dict[str, Any]] = {s.name: s.default for s in parameters}

    @classmethod
    def guard_for(cls, model: RobotModel, settings: Mapping[str, Any]) -> JointLimitGuard:
        """The layer's ``JointLimitGuard`` of these settings (its own defaults for those
        missing): the bounds a law may keep its lower-priority rows within."""
        def get(name: str) -> Any:
            return settings[name] if name in settings else cls._defaults[name]

        return JointLimitGuard(model, float(get("joint_limit_braking")),
                               margin=float(get("position_limit_margin")),
                               speed_scale=float(get("velocity_limit_scale")))

    def apply(self, q: np.ndarray, v: np.ndarray, out: LawOutput,
              reserve: Callable[[], np.ndarray] | None = None) -> bool:
        """Bound ``out`` in place; True when it was changed (``overrode``). ``reserve()``: the
        torques a later stage adds (the friction compensation), kept room for within the
        effort limits when the layer overrides (called only then). A command it leaves may
        still be cut by the motors: ``cut_by_motors``, once the later stages have added
        theirs."""
        self.overrode = False
        self.acceleration = None
        if not self.enabled:
            return False
        a = self._a
        if out.qdd_active is not None and out.tau_passive is not None:  # the law's own (5.4)
            limited = self.guard.clamp_law_accelerations(q, v, out.tau_active, out.qdd_active,
                                                         self._qdd_a, self.slowed_joints)
            if limited < 0:
                return False  # a non-finite command: the caller refuses it
            return self.after_own_clamp(q, v, out, limited, reserve)
        # the forward dynamics of the law's intent (before the effort clamp)
        tau = self._tau
        tau[a] = out.tau_active
        self._tau_p = self.passive_forces(q, v)
        tau[self._p] = self._tau_p
        try:
            qdd = self._forward.compute(q, v, self._empty, tau).qdd
        except ValueError:  # a non-finite command: the caller refuses it
            return False
        np.take(qdd, a, out=self._qdd_a)
        self.acceleration = self._qdd_a
        law_qdd = self._qdd_a.copy() if out.task_rows is not None else None
        if self.guard.clamp_in_place(q, v, self._qdd_a) == 0:
            self.braked(v)
            return False
        self._override(q, v, out, self._keep_task(out, law_qdd), reserve)
        return True

    def after_own_clamp(self, q: np.ndarray, v: np.ndarray, out: LawOutput, limited: int,
                        reserve: Callable[[], np.ndarray] | None) -> bool:
        """``apply``'s rest for a law that gives its own accelerations, once they are clipped
        into ``_qdd_a`` (``limited`` joints, the guard's ``active`` flags; the braked joints
        when none): overrides where some were (``apply``'s return)."""
        self.acceleration = self._qdd_a
        self._tau_p = out.tau_passive
        if limited == 0:
            return False
        self._override(q, v, out, self._keep_task(out, out.qdd_active), reserve)
        return True

    def _override(self, q: np.ndarray, v: np.ndarray, out: LawOutput,
                  clipped: tuple[np.ndarray, np.ndarray] | None,
                  reserve: Callable[[], np.ndarray] | None) -> None:
        """``out`` given T_a, qdd_p of the bounded ``_qdd_a`` with ``_tau_p``, within the
        effort limits less ``reserve()`` (``clipped``: the plain clip, the fallback of a kept
        task that would pass them)."""
        a, tau_p = self._a, self._tau_p
        hi, lo = self._effort_room(reserve)
        beyond = self._solve_bounded(q, v, tau_p, hi, lo)
        if beyond and clipped is not None:  # the task kept only within the effort limits
            self._qdd_a[:], self.guard.active[:] = clipped
            beyond = self._solve_bounded(q, v, tau_p, hi, lo)
        if beyond:
            self._within_effort(q, v, tau_p)
        self._overridden(v, out, [self.model.dof_names[d]
                                  for d, b in zip(a, self.guard.active) if b])

    def _effort_room(self, reserve: Callable[[], np.ndarray] | None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """(upper, lower) torques the motors pass of this layer's command: the effort limits
        less ``reserve()`` (what a later stage adds)."""
        hi, lo = self._effort_hi, self._effort_lo
        np.copyto(hi, self._effort)
        np.negative(self._effort, out=lo)
        if reserve is not None:
            r = reserve()
            hi -= r
            lo -= r
        return hi, lo

    def _solve_bounded(self, q: np.ndarray, v: np.ndarray, tau_p: np.ndarray,
                       hi: np.ndarray, lo: np.ndarray) -> bool:
        """T_a and qdd_p of (5.4) with ``_qdd_a`` and T_p; True where T_a passes [lo, hi]."""
        res = self._hybrid.compute(q, v, self._qdd_a, tau_p)
        self._tau_out[:] = res.tau_active
        self._qdd_p_out[:] = res.qdd_passive
        return bool(np.any((self._tau_out > hi) | (self._tau_out < lo)))

    def _overridden(self, v: np.ndarray, out: LawOutput, joints: list[str]) -> None:
        """``out`` given the layer's command; its status names ``joints``."""
        out.tau_active, out.qdd_passive = self._tau_out, self._qdd_p_out
        self.overrides += 1
        self.overrode = True
        self.limited_joints = joints
        out.status = f"{out.status} safety limits on {joints}".strip()
        self.braked(v)

    def cut_by_motors(self, q: np.ndarray, v: np.ndarray, out: LawOutput,
                      law_tau: np.ndarray, reserve: Callable[[], np.ndarray] | None) -> bool:
        """After ``apply`` left the law's torques ``law_tau`` as they were and the later
        stages added theirs (``out.tau_active`` the total): where the total passes the effort
        limits the motors cut it, and the accelerations the cut command gives may pass the
        bounds (Tiago's shoulder, failed: a law leaving its damped solve asked 36.5 N·m of
        ``arm_2_joint``, and ``arm_5_joint`` went from −0.68 to −2.35 rad/s in 3 ms). Those
        (the forward dynamics of the cut total less what the stages added, with T_p) are
        checked against the bounds, and where they pass one the law's accelerations are scaled
        toward the least ones within the bounds as far as the effort limits less ``reserve()``
        allow (``_within_effort``): ``out`` then holds the layer's torques (to go through the
        later stages again), its status naming the joints past their limits, and True is
        returned. False (``out`` untouched) where the total is within the limits, the cut one
        stays within the bounds, or ``apply`` did not run or overrode."""
        if self.acceleration is None or self.overrode:
            return False
        total = float_array(out.tau_active)
        if not past_limits(total, self._effort):
            return False
        effort = self._effort
        full = self._tau
        full[self._a] = np.clip(total, -effort, effort) - (total - law_tau)  # what remains
        full[self._p] = self._tau_p
        cut = self._forward.compute(q, v, self._empty, full).qdd[self._a]
        bound_lo, bound_hi = self.guard.last_bounds
        if np.all((cut >= bound_lo) & (cut <= bound_hi)):
            return False
        past = (total > effort) | (total < -effort)
        hi, lo = self._effort_room(reserve)
        self._solve_bounded(q, v, self._tau_p, hi, lo)  # the law's own accelerations
        self._within_effort(q, v, self._tau_p)
        self._overridden(v, out, [self.model.dof_names[d] for d, b in zip(self._a, past) if b])
        return True

    def warm_kernels(self) -> None:
        """Compile what an override that keeps the task runs (``keep_task_rows``' damped
        solve), for the node's warm-up, whose cycles seldom meet a bound."""
        if self.keep_task:
            keep_task_rows(np.array([2.0, 0.0]), -np.ones(2), np.ones(2),
                           np.array([True, False]), np.ones((1, 2)), *self._solve, np.empty(2))

    def _keep_task(self, out: LawOutput, law_qdd: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray] | None:
        """Where the law names its task rows, the clipped ``_qdd_a`` redone by
        ``keep_task_rows`` (the guard's ``active`` then flags every joint pinned); returns
        the clipped accelerations and flags (to fall back on where the torques that keep the
        task would pass the effort limits), None when nothing was redone."""
        if not self.keep_task or out.task_rows is None or law_qdd is None:
            return None
        clipped = (self._qdd_a.copy(), self.guard.active.copy())
        lo, hi = self.guard.last_bounds
        S, J_G = out.task_rows
        A = np.asarray(S, float) @ np.asarray(J_G, float)
        keep_task_rows(np.asarray(law_qdd, float), lo, hi, self.guard.active, A, *self._solve,
                       self._qdd_a)
        return clipped

    def braked(self, v: np.ndarray) -> np.ndarray:
        """The active joints the last apply's command slows down where a bound bit or beyond
        their speed bound: their dry friction helps (into ``slowed_joints``, which ``apply``
        leaves so for its own ``v``)."""
        braked_joints(float_array(v), self._a, self._qdd_a, self.guard.active,
                      float_array(self.guard.speed), self.slowed_joints)
        return self.slowed_joints

    def _within_effort(self, q: np.ndarray, v: np.ndarray, tau_p: np.ndarray) -> None:
        """The bounded accelerations need more than the effort limits (which the motors would
        clip, giving other accelerations, beyond the bounds): scale them toward the least
        ones within the bounds, qdd_s = clip(0, lo, hi), as far as the limits of the joints
        that qdd_s leaves within them allow. T_a and qdd_p are affine in qdd_a, so
        qdd_s + α (qdd_b − qdd_s), α ∈ [0, 1], stays within the bounds, keeps the direction
        of the law's, and gives T_s + α (T_b − T_s)."""
        lo, hi = self.guard.last_bounds
        qdd_s = np.clip(0.0, lo, hi)
        res = self._hybrid.compute(q, v, qdd_s, tau_p)
        tau_s, qdd_p_s = res.tau_active.copy(), res.qdd_passive.copy()
        d = self._tau_out - tau_s
        hi, lo = self._effort_hi, self._effort_lo
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d > 0, (hi - tau_s) / d, np.where(d < 0, (lo - tau_s) / d, np.inf))
        room[(tau_s > hi) | (tau_s < lo)] = np.inf  # saturated whatever the others do
        alpha = float(np.clip(np.min(room, initial=1.0), 0.0, 1.0))
        self._tau_out[:] = tau_s + alpha * d
        self._qdd_p_out[:] = qdd_p_s + alpha * (self._qdd_p_out - qdd_p_s)
        self._qdd_a[:] = qdd_s + alpha * (self._qdd_a - qdd_s)


# compiled at import (a law whose safety layer overrides calls it from Python only then)
_BRAKED_SIGNATURE = types.void(_VECTOR, _INDEX, _VECTOR, types.boolean[::1], _VECTOR,
                               types.boolean[::1])


@njit(types.boolean(_VECTOR, _VECTOR), cache=True, error_model="numpy")
def past_limits(tau, limit):
    """Whether some |tau_i| > limit_i (``SafetyLayer.cut_by_motors``' check, every cycle:
    a tenth of NumPy's three calls)."""
    for i in range(tau.shape[0]):
        if abs(tau[i]) > limit[i]:
            return True
    return False


@njit(_BRAKED_SIGNATURE, cache=True, error_model="numpy")
def braked_joints(v, dofs, qdd, limited, speed, out):
    """``SafetyLayer.braked`` into ``out``: the active joints whose commanded acceleration
    opposes their velocity where a bound bit (``limited``) or beyond their speed bound."""
    for i in range(dofs.shape[0]):
        va = v[dofs[i]]
        out[i] = qdd[i] * va < 0.0 and (limited[i] or abs(va) > speed[i])


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous arrays in)
def bound_own_accelerations(tau_active, qdd_active, q, v, q_index, v_index, lower, upper, speed,
                            braking, gain, velocity_gain, lo, hi, qdd, limited, braked):
    """``SafetyLayer.apply`` for a law that gives its own ``qdd_active`` in one call: −1
    where ``tau_active`` is not finite; else ``qdd`` = ``qdd_active`` clipped to the guard's
    bounds (``acceleration_bounds``, ``clamp_to_bounds``: ``lo``, ``hi``, ``limited``), the
    number of joints clipped returned, and, when none was, ``braked`` (``braked_joints``)."""
    if not all_finite(tau_active):  # the check run_steps makes of the forward path's input
        return -1
    qdd[:] = qdd_active
    acceleration_bounds(q, v, q_index, v_index, lower, upper, speed, braking, gain,
                        velocity_gain, lo, hi)
    n = clamp_to_bounds(qdd, lo, hi, limited)
    if n == 0:
        braked_joints(v, v_index, qdd, limited, speed, braked)
    return n
