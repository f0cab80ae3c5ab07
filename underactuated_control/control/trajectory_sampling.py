"""Joint trajectories as ros2_controllers' JointTrajectoryController (JTC) treats them (ROS-free).

One set of rules and one sampler for both ways a trajectory_msgs/JointTrajectory reaches the
controller, ``~/joint_reference`` and ``~/follow_joint_trajectory`` (JTC: ``topic_callback`` and
``goal_received_callback`` share ``validate_trajectory_msg``, ``trajectory.cpp`` samples both).
Each part is the JTC rule it mirrors (joint_trajectory_controller, trajectory.cpp,
tolerances.hpp, joint_trajectory_controller.cpp):

- ``check_trajectory`` (``trajectory_from_message`` for a message, ``trajectory_rules`` for a
  controller's rules): joint names (unknown, passive, duplicated, missing), points (sizes,
  finite values, strictly increasing ``time_from_start``, zero velocity at the end), start
  stamp — each failure a ``TrajectoryError`` with the action's error code name and one line
  naming the joint or field. The topic differs in two rules only: a streamed setpoint's last
  point may move, and a passive joint's entries are left out instead of refused.
- ``SplineTrajectory``: sampling. Between two points the spline's degree follows what both
  points give: positions only -> linear, + velocities -> cubic, + accelerations -> quintic
  (boundary conditions p, v, a at both ends). Before the first point it interpolates from the
  state the trajectory started from (here: the reference the law was tracking, JTC's
  ``interpolate_from_desired_state``) to the first point; after the last point it holds it.
- ``TrajectoryExecution``: path tolerances while before the last point (and on the first
  sample), goal tolerances after it, ``goal_time`` after which a goal still outside its goal
  tolerance is aborted (0: wait for ever). Tolerance 0 = not enforced; in a goal, 0 = the
  default, -1 = erase the default, any other negative value is refused.

All arrays are per joint; ``now_ns`` is the controller's clock in nanoseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["VELOCITY_LIMIT_POLICIES", "Sample", "SplineTrajectory", "StateTolerance", "Tolerances",
           "TrajectoryError", "TrajectoryExecution", "VelocityLimits", "check_trajectory",
           "goal_tolerances", "interpolate", "peak_speed", "resolve_tolerance",
           "trajectory_from_message", "trajectory_rules"]

_ERASE = -1.0
_FLOAT_EPS = float(np.finfo(np.float32).eps)  # JTC compares with float epsilon


class TrajectoryError(ValueError):
    """A goal the controller refuses: ``code`` is the name of a FollowJointTrajectory result
    code (INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP), the message names the field."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------- interpolation
def _coefficients(T: float, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, p1: np.ndarray,
                  v1: np.ndarray, a1: np.ndarray, degree: int) -> list[np.ndarray]:
    """c0..c5 of p(t) = Σ c_i t^i, t in [0, T], the polynomial of ``degree`` 1, 3 or 5 that
    meets (p0, v0, a0) at 0 and (p1, v1, a1) at T (as many of them as its degree fixes)."""
    dp = p1 - p0
    zero = np.zeros_like(p0)
    if degree == 1 or T <= 0.0:
        # p(t) = p0 + (p1 - p0) t / T
        return [p0, dp / T if T > 0.0 else zero, zero, zero, zero, zero]
    if degree == 3:
        # cubic Hermite: c2 = (3 Δp - (2 v0 + v1) T) / T², c3 = (-2 Δp + (v0 + v1) T) / T³
        return [p0, v0, (3.0 * dp - (2.0 * v0 + v1) * T) / T**2,
                (-2.0 * dp + (v0 + v1) * T) / T**3, zero, zero]
    # quintic with p, v, a at both ends (JTC's coefficients, trajectory.cpp):
    return [p0, v0, 0.5 * a0,
            (20.0 * dp - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T**2) / (2.0 * T**3),
            (-30.0 * dp + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T**2)
            / (2.0 * T**4),
            (12.0 * dp - 6.0 * (v1 + v0) * T - (a0 - a1) * T**2) / (2.0 * T**5)]


def interpolate(t: float, T: float, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray,
                p1: np.ndarray, v1: np.ndarray, a1: np.ndarray, degree: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity, acceleration at ``t`` in [0, T] of the polynomial of ``degree``
    1, 3 or 5 that meets (p0, v0, a0) at 0 and (p1, v1, a1) at T (as many of them as its
    degree fixes). ``t`` outside [0, T] is clamped (JTC: the end point, linear slope)."""
    t = min(max(t, 0.0), T)
    c0, c1, c2, c3, c4, c5 = _coefficients(T, p0, v0, a0, p1, v1, a1, degree)
    p = c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * c5))))
    v = c1 + t * (2.0 * c2 + t * (3.0 * c3 + t * (4.0 * c4 + t * 5.0 * c5)))
    a = 2.0 * c2 + t * (6.0 * c3 + t * (12.0 * c4 + t * 20.0 * c5))
    return p, v, a


def peak_speed(T: float, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, p1: np.ndarray,
               v1: np.ndarray, a1: np.ndarray, degree: int) -> np.ndarray:
    """Per joint, max |v(t)| over [0, T] of ``interpolate``'s polynomial: at an end or where
    the acceleration (a cubic in t) vanishes. A zero-length segment (a jump) gives 0."""
    if T <= 0.0:
        return np.zeros_like(p0, dtype=float)
    c = _coefficients(T, p0, v0, a0, p1, v1, a1, degree)
    out = np.empty(len(p0))
    for j in range(len(p0)):
        _, c1, c2, c3, c4, c5 = (float(ci[j]) for ci in c)
        candidates = [0.0, T]
        acc = np.trim_zeros(np.array([20.0 * c5, 12.0 * c4, 6.0 * c3, 2.0 * c2]), "f")
        if len(acc) > 1:  # any t in [0, T] is a safe candidate: keep real parts, clamped
            candidates += [min(max(r.real, 0.0), T) for r in np.roots(acc)]
        t = np.array(candidates)
        out[j] = np.abs(c1 + t * (2.0 * c2 + t * (3.0 * c3 + t * (4.0 * c4 + t * 5.0 * c5)))
                        ).max()
    return out


@dataclass
class Sample:
    """One sample of a trajectory (its joints' order)."""

    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    index: int  # JTC's feedback index: the point being approached; n_points after the end
    before_last_point: bool
    time_past_segment: float  # s since the segment's first point (past the end: since the last)


MAX_STRETCH = 1e3  # the longest time scaling searched for (x the least the points need)
VELOCITY_LIMIT_POLICIES = ("scale", "reject", "ignore")  # ("off" would read as a YAML bool)


@dataclass(frozen=True)
class VelocityLimits:
    """A trajectory's velocity limits, per joint in its order: the URDF ``<limit velocity>``
    (inf: none), its unit, and the policy for a spline that needs more (``scale``: stretch the
    trajectory in time at its start, ``reject``: refuse it, ``ignore``: run it as given)."""

    limit: np.ndarray
    units: tuple[str, ...]
    policy: str = "scale"


@dataclass
class SplineTrajectory:
    """A checked trajectory (``check_trajectory``) sampled each control cycle. ``start_ns``
    None: it starts at its first sample (a zero header stamp)."""

    names: list[str]
    times: np.ndarray  # (n,) s from start, strictly increasing, >= 0
    positions: np.ndarray  # (n, j)
    velocities: np.ndarray  # (n, j), zeros where a point gives none
    accelerations: np.ndarray  # (n, j), zeros where a point gives none
    has_velocities: np.ndarray  # (n,) bool
    has_accelerations: np.ndarray  # (n,) bool
    start_ns: int | None = None
    velocity_limits: VelocityLimits | None = None  # None: not enforced
    _before: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _before_ns: int = 0
    last: Sample | None = field(default=None, repr=False)
    scale: float = 1.0  # time scaling applied by ``begin`` (1: none)
    scale_note: str = ""  # why, for the log and the action's result; '' when not scaled

    @property
    def started(self) -> bool:
        return self._before is not None

    @property
    def begun_ns(self) -> int:
        """Clock time of ``begin`` (the start state)."""
        return self._before_ns

    def begin(self, now_ns: int, position: np.ndarray, velocity: np.ndarray,
              acceleration: np.ndarray) -> None:
        """The state the trajectory starts from, at ``now_ns`` (JTC's point before the
        trajectory); a non-finite start position is taken from the first point."""
        if self.start_ns is None:
            self.start_ns = now_ns
        p = np.where(np.isfinite(position), position, self.positions[0])
        v = np.where(np.isfinite(velocity), velocity, 0.0)
        a = np.where(np.isfinite(acceleration), acceleration, 0.0)
        self._before = (p.astype(float), v.astype(float), a.astype(float))
        self._before_ns = now_ns
        limits = self.velocity_limits
        if limits is not None and limits.policy != "ignore":
            self._fit_velocity_limits(limits)

    # ------------------------------------------------------------------ velocity limits
    def _t_before(self) -> float:
        """Trajectory time of the start state (``begin``)."""
        return (self._before_ns - self.start_ns) * 1e-9

    def segment_peaks(self) -> np.ndarray:
        """(n - 1, j): per segment between two points, each joint's peak |velocity|."""
        return np.array([peak_speed(self.times[k + 1] - self.times[k], self.positions[k],
                                    self.velocities[k], self.accelerations[k],
                                    self.positions[k + 1], self.velocities[k + 1],
                                    self.accelerations[k + 1], self._degree(k, k + 1))
                         for k in range(len(self.times) - 1)]).reshape(-1, len(self.names))

    def ramp_peak(self, scale: float = 1.0, start: tuple[np.ndarray, np.ndarray, np.ndarray]
                  | None = None, t_before: float | None = None) -> np.ndarray:
        """Each joint's peak |velocity| from the start state (``begin``'s, or ``start`` at
        trajectory time ``t_before``) to the first point, with the trajectory's times
        stretched by ``scale`` about the start (velocities / scale, accelerations / scale²)."""
        start = self._before if start is None else start
        t_before = self._t_before() if t_before is None else t_before
        return peak_speed(scale * (self.times[0] - t_before), *start, self.positions[0],
                          self.velocities[0] / scale, self.accelerations[0] / scale**2,
                          self._degree(None, 0))

    def _fit_velocity_limits(self, limits: VelocityLimits) -> None:
        """Stretch the times uniformly about the start by the least ``scale`` >= 1 that keeps
        every joint's spline speed within its limit: the segments between points slow down
        exactly by 1/scale; the ramp from the start state (whose velocity stays) is searched
        (bisection). A joint already faster than its limit at the start is left out of the
        ramp's test (no stretch can slow it there). A joint starting just under its limit and
        still accelerating fits only a narrow band of stretches (shorter, the ramp is too
        fast; longer, it speeds up for longer), which doubling may step over: then the band is
        searched on a grid, and if no stretch up to ``MAX_STRETCH`` fits, the one whose ramp
        comes closest is taken and the note says how close."""
        lim = limits.limit
        interior = self.segment_peaks()
        need = interior.max(axis=0) / lim if len(interior) else np.zeros(len(lim))
        v_start = np.abs(self._before[1])
        ramp_lim = np.where(v_start < lim, lim, np.inf)
        ramp0 = self.ramp_peak(1.0)
        worst = np.maximum(need, ramp0 / lim)
        if worst.max() <= 1.0 + 1e-9:
            return
        s_lo = max(1.0, float(need.max()))

        def ok(s: float) -> bool:
            return bool(np.all(self.ramp_peak(s) <= ramp_lim * (1.0 - 1e-9)))

        scale, closest = s_lo, ""
        if not ok(s_lo):
            hi = 2.0 * s_lo
            while not ok(hi) and hi < MAX_STRETCH * s_lo:
                hi *= 2.0
            if not ok(hi):  # doubling stepped over the stretches that fit, or none does
                hi, excess = self._closest_ramp_scale(s_lo, ramp_lim)
                if not ok(hi):
                    closest = (f"; no stretch keeps the ramp from the start state within "
                               f"the limits, this one comes closest ({excess:.4g} of a limit)")
            scale = hi
            if not closest:
                lo = s_lo
                while hi > lo * (1.0 + 1e-4):  # hi is always within the limits
                    mid = 0.5 * (lo + hi)
                    lo, hi = (lo, mid) if ok(mid) else (mid, hi)
                scale = hi
        if scale == 1.0:  # only joints already past their limit at the start: no stretch
            return
        j = int(np.argmax(worst))
        t0 = self._t_before()
        lasted = self.times[-1] - t0
        self.times = t0 + scale * (self.times - t0)
        self.velocities = self.velocities / scale
        self.accelerations = self.accelerations / scale**2
        self.scale = scale
        before = "" if limits.policy == "scale" else " (the start state differed from the " \
            "one checked at acceptance)"
        ramp = (f" (its first point {abs(self.positions[0][j] - self._before[0][j]):.3g} "
                f"{limits.units[j].split('/')[0]} from the start state, {lasted:.3g} s ahead)"
                if len(self.times) == 1 else "")
        self.scale_note = (
            f"time-scaled x{scale:.3g} ({lasted:.3g} s -> {scale * lasted:.3g} s){before}: joint "
            f"'{self.names[j]}' needed {worst[j] * lim[j]:.3g} {limits.units[j]}, above its "
            f"URDF velocity limit {lim[j]:g} {limits.units[j]}{ramp}{closest}")

    def _closest_ramp_scale(self, s_lo: float, ramp_lim: np.ndarray) -> tuple[float, float]:
        """The stretch in [s_lo, MAX_STRETCH s_lo] whose ramp from the start state has the
        least largest peak / limit (a geometric grid, refined once around its best), and that
        ratio."""
        def excess(s: float) -> float:
            return float(np.max(self.ramp_peak(s) / ramp_lim))

        grid = s_lo * np.geomspace(1.0, MAX_STRETCH, 61)
        k = int(np.argmin([excess(s) for s in grid]))
        fine = np.geomspace(grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)], 41)
        values = [excess(s) for s in fine]
        best = int(np.argmin(values))
        return float(fine[best]), values[best]

    def _degree(self, k0: int | None, k1: int) -> int:
        """Spline degree of the segment ending at point k1 (k0 None: from the start state,
        whose velocity and acceleration always exist)."""
        vel = bool(self.has_velocities[k1]) and (k0 is None or bool(self.has_velocities[k0]))
        acc = bool(self.has_accelerations[k1]) and (
            k0 is None or bool(self.has_accelerations[k0]))
        return 5 if vel and acc else 3 if vel else 1

    def sample(self, now_ns: int) -> Sample:
        """The reference at ``now_ns`` (``begin`` first); kept as ``last``."""
        self.last = self.state_at(now_ns)
        return self.last

    def state_at(self, now_ns: int) -> Sample:
        """The reference at ``now_ns`` (``begin`` first), without touching ``last``."""
        if self._before is None:
            raise RuntimeError("SplineTrajectory.sample before begin")
        t = (now_ns - self.start_ns) * 1e-9  # trajectory time
        n = len(self.times)
        if t < self.times[0]:  # approaching the first point from the start state
            t_before = (self._before_ns - self.start_ns) * 1e-9
            p, v, a = interpolate(t - t_before, self.times[0] - t_before, *self._before,
                                  self.positions[0], self.velocities[0],
                                  self.accelerations[0], self._degree(None, 0))
            out = Sample(p, v, a, 0, True, t - self.times[0])
        elif t >= self.times[-1]:  # played out: hold the last point
            out = Sample(self.positions[-1].copy(), self.velocities[-1].copy(),
                         self.accelerations[-1].copy(), n, False, t - self.times[-1])
        else:
            k = int(np.searchsorted(self.times, t, side="right")) - 1
            p, v, a = interpolate(t - self.times[k], self.times[k + 1] - self.times[k],
                                  self.positions[k], self.velocities[k], self.accelerations[k],
                                  self.positions[k + 1], self.velocities[k + 1],
                                  self.accelerations[k + 1], self._degree(k, k + 1))
            out = Sample(p, v, a, k + 1, True, t - self.times[k])
        return out

    def sample_into(self, reference, active_joints: Sequence[str], now_ns: int) -> None:
        """Write the sample at ``now_ns`` into a ``JointReference`` of ``active_joints`` (the
        controller's joint law reference); the first call starts the trajectory from it. A
        joint that is no longer active is skipped (the action server aborts such a goal)."""
        index = {n: i for i, n in enumerate(active_joints)}
        mine = [j for j, n in enumerate(self.names) if n in index]
        slot = [index[self.names[j]] for j in mine]
        if self._before is None:
            p = np.full(len(self.names), np.nan)
            v, a = np.zeros(len(self.names)), np.zeros(len(self.names))
            p[mine] = reference.position[slot]
            v[mine] = reference.velocity[slot]
            a[mine] = reference.acceleration[slot]
            self.begin(now_ns, p, v, a)
        s = self.sample(now_ns)
        reference.position[slot] = s.position[mine]
        reference.velocity[slot] = s.velocity[mine]
        reference.acceleration[slot] = s.acceleration[mine]


# ----------------------------------------------------------------------------- goal checks
def _seconds(value: tuple[int, int]) -> float:
    sec, nanosec = value
    return sec + 1e-9 * nanosec


def resolve_tolerance(default: float, requested: float, where: str) -> float:
    """JointTolerance's rule: > 0 replaces the default, 0 keeps it, -1 erases it (0: not
    enforced); other negative values are refused (``TrajectoryError`` INVALID_GOAL)."""
    if not np.isfinite(requested):
        raise TrajectoryError("INVALID_GOAL", f"{where} is {requested}: give a finite tolerance")
    if requested > 0.0:
        return float(requested)
    if abs(requested - _ERASE) < _FLOAT_EPS:
        return 0.0
    if requested < 0.0:
        raise TrajectoryError("INVALID_GOAL", f"{where} is {requested:g}: a tolerance is > 0, "
                              "0 (the controller's default) or -1 (none)")
    return float(default)


@dataclass
class StateTolerance:
    """Per-joint bounds on |reference - measured| (0: not enforced)."""

    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> StateTolerance:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n))

    def violation(self, names: Sequence[str], error_p: np.ndarray, error_v: np.ndarray
                  ) -> str:
        """'' when within; else which joint is out by how much (the worst relative to its
        tolerance). Accelerations are not measured: their tolerances are never violated (as
        JTC without an acceleration state interface)."""
        for what, err, tol, unit in (("position", error_p, self.position, ""),
                                     ("velocity", error_v, self.velocity, "/s")):
            bad = (tol > 0.0) & (np.abs(err) > tol)
            if bad.any():
                i = int(np.argmax(np.where(bad, np.abs(err) / np.where(bad, tol, 1.0), -1.0)))
                return (f"joint '{names[i]}' {what} error {err[i]:+.4g}{unit} exceeds the "
                        f"tolerance {tol[i]:g}{unit}")
        return ""


@dataclass
class Tolerances:
    path: StateTolerance
    goal: StateTolerance
    goal_time: float  # s; 0: no limit


def check_trajectory(names: Sequence[str], times: Sequence[tuple[int, int]],
                     positions: Sequence[Sequence[float]],
                     velocities: Sequence[Sequence[float]],
                     accelerations: Sequence[Sequence[float]],
                     efforts: Sequence[Sequence[float]], *, active_joints: Sequence[str],
                     passive_joints: Sequence[str], allow_partial: bool,
                     allow_nonzero_end_velocity: bool, start_ns: int, now_ns: int,
                     drop_passive: bool = False, multi_dof_joints: Sequence[str] = (),
                     multi_dof_points: int = 0,
                     velocity_limits: Mapping[str, tuple[float, str]] | None = None,
                     velocity_policy: str = "ignore",
                     start_state: Mapping[str, tuple[float, float, float]] | None = None
                     ) -> SplineTrajectory:
    """The trajectory as a ``SplineTrajectory``; ``TrajectoryError`` for the first rule it
    breaks (JTC's ``validate_trajectory_msg`` order, plus the passive-joint rule). ``times`` are
    (sec, nanosec) pairs of ``time_from_start``; ``start_ns`` 0: start at the first sample.
    ``drop_passive``: a passive joint's entries are checked, then left out (not refused).
    ``velocity_limits``: joint -> (URDF velocity limit, unit), enforced by ``velocity_policy``
    (``VelocityLimits``); ``reject`` tests the splines between the points and, given the
    ``start_state`` (joint -> position, velocity, acceleration), the ramp from it."""
    names = list(names)
    active = list(active_joints)
    if multi_dof_joints or multi_dof_points:
        raise TrajectoryError("INVALID_JOINTS", "multi_dof_trajectory is not supported (joints "
                              f"{list(multi_dof_joints)}): this controller drives 1-DOF joints "
                              "only")
    if not names:
        raise TrajectoryError("INVALID_JOINTS", "trajectory.joint_names is empty")
    for name in names:
        if name in passive_joints:
            if drop_passive:
                continue
            raise TrajectoryError("INVALID_JOINTS", f"joint '{name}' is passive (no actuator): "
                                  f"it cannot be commanded; the active joints are {active}")
        if name not in active:
            raise TrajectoryError("INVALID_JOINTS", f"joint '{name}' is not a joint of this "
                                  f"controller; the active joints are {active}")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise TrajectoryError("INVALID_JOINTS", f"trajectory.joint_names repeats {duplicated}")
    missing = [n for n in active if n not in names]
    if missing and not allow_partial:
        raise TrajectoryError("INVALID_JOINTS", f"trajectory.joint_names lacks the active "
                              f"joints {missing} (allow_partial_joints_goal is false)")
    kept = [j for j, name in enumerate(names) if name in active]
    if not kept:
        raise TrajectoryError("INVALID_JOINTS", f"trajectory.joint_names {names} names no "
                              f"active joint; the active joints are {active}")
    n_points, n = len(times), len(names)
    if n_points == 0:
        raise TrajectoryError("INVALID_GOAL", "trajectory.points is empty")
    t = np.array([_seconds(x) for x in times])
    arrays, present = [], []
    for what, rows, required in (("positions", positions, True),
                                 ("velocities", velocities, False),
                                 ("accelerations", accelerations, False)):
        out, given = np.zeros((n_points, n)), np.zeros(n_points, dtype=bool)
        for k, row in enumerate(rows):
            if len(row) == n:
                out[k], given[k] = row, True
            elif len(row) or required:
                raise TrajectoryError("INVALID_GOAL", f"trajectory.points[{k}].{what} has "
                                      f"{len(row)} values for {n} joints")
        if not np.all(np.isfinite(out)):
            k, j = np.argwhere(~np.isfinite(out))[0]
            raise TrajectoryError("INVALID_GOAL", f"trajectory.points[{k}].{what} is not "
                                  f"finite for joint '{names[j]}'")
        arrays.append(out[:, kept])
        present.append(given)
    P, V, A = arrays
    names = [names[j] for j in kept]
    has_v, has_a = present[1], present[2]
    for k in range(n_points):
        if has_a[k] and not has_v[k]:
            raise TrajectoryError("INVALID_GOAL", f"trajectory.points[{k}] has accelerations "
                                  "but no velocities (give both, or neither)")
        if len(efforts[k]):
            raise TrajectoryError("INVALID_GOAL", f"trajectory.points[{k}].effort is given: "
                                  "effort feed-forward is not supported (the hybrid recursion "
                                  "computes it)")
    if t[0] < 0.0:
        raise TrajectoryError("INVALID_GOAL", f"trajectory.points[0].time_from_start is "
                              f"{t[0]:g} s (negative)")
    for k in range(1, n_points):
        if t[k] <= t[k - 1]:
            raise TrajectoryError("INVALID_GOAL", f"time_from_start is not strictly "
                                  f"increasing: points[{k - 1}] at {t[k - 1]:g} s, points[{k}] "
                                  f"at {t[k]:g} s")
    if not allow_nonzero_end_velocity and has_v[-1]:
        j = int(np.argmax(np.abs(V[-1])))
        if abs(V[-1, j]) > _FLOAT_EPS:
            raise TrajectoryError("INVALID_GOAL", f"the last point's velocity of joint "
                                  f"'{names[j]}' is {V[-1, j]:g}, not zero "
                                  "(allow_nonzero_velocity_at_trajectory_end is false)")
    if start_ns and start_ns + t[-1] * 1e9 < now_ns:
        raise TrajectoryError("OLD_HEADER_TIMESTAMP", f"trajectory.header.stamp "
                              f"{start_ns * 1e-9:.3f} s plus its duration {t[-1]:g} s ends in "
                              f"the past (now {now_ns * 1e-9:.3f} s)")
    trajectory = SplineTrajectory(names, t, P, V, A, has_v, has_a, start_ns or None)
    if velocity_limits and velocity_policy != "ignore":
        if velocity_policy not in VELOCITY_LIMIT_POLICIES:
            raise ValueError(f"velocity_policy '{velocity_policy}' is not one of "
                             f"{VELOCITY_LIMIT_POLICIES}")
        lim = np.array([velocity_limits.get(n, (np.inf, ""))[0] for n in names], dtype=float)
        lim = np.where(lim > 0.0, lim, np.inf)
        units = tuple(velocity_limits.get(n, (np.inf, "rad/s"))[1] for n in names)
        trajectory.velocity_limits = VelocityLimits(lim, units, velocity_policy)
        if velocity_policy == "reject":
            _reject_too_fast(trajectory, start_state,
                             (now_ns - start_ns) * 1e-9 if start_ns else 0.0)
    return trajectory


def _reject_too_fast(trajectory: SplineTrajectory,
                     start_state: Mapping[str, tuple[float, float, float]] | None,
                     t_before: float) -> None:
    """``TrajectoryError`` (INVALID_GOAL) naming the joint whose spline needs the most above its
    velocity limit: between the points, and from ``start_state`` (if given) to the first."""
    limits = trajectory.velocity_limits
    peaks = trajectory.segment_peaks()
    need = peaks.max(axis=0) if len(peaks) else np.zeros(len(trajectory.names))
    if start_state is not None:
        start = np.array([start_state.get(n, (p, 0.0, 0.0)) for n, p in
                          zip(trajectory.names, trajectory.positions[0])], dtype=float)
        need = np.maximum(need, trajectory.ramp_peak(1.0, tuple(start.T), t_before))
    ratio = need / limits.limit
    j = int(np.argmax(ratio))
    if ratio[j] > 1.0 + 1e-9:
        unit = limits.units[j]
        raise TrajectoryError("INVALID_GOAL", f"joint '{trajectory.names[j]}' would need "
                              f"{need[j]:.3g} {unit}, above its URDF velocity limit "
                              f"{limits.limit[j]:g} {unit} (trajectory_velocity_limits is "
                              f"reject): give the points more time")


def trajectory_rules(model: Any, params: Mapping[str, Any], topic: bool) -> dict[str, Any]:
    """``check_trajectory``'s rules in a controller: ``model``'s active and passive joints and
    velocity limits, ``params``' allow_partial_joints_goal,
    allow_nonzero_velocity_at_trajectory_end (JTC applies them to its topic and its action
    alike) and trajectory_velocity_limits. ``topic`` (~/joint_reference, streamed
    setpoints such as elbow_redundancy_resolver's, which name every joint and move): a last
    point may have a velocity and a passive joint's entries are left out."""
    return dict(active_joints=tuple(model.active_joints),
                passive_joints=tuple(model.passive_joints),
                allow_partial=bool(params["allow_partial_joints_goal"]),
                allow_nonzero_end_velocity=topic or bool(
                    params["allow_nonzero_velocity_at_trajectory_end"]),
                drop_passive=topic, velocity_limits=velocity_limits(model),
                velocity_policy=_param(params, "trajectory_velocity_limits", "scale"))


def _param(params: Mapping[str, Any], name: str, default: Any) -> Any:
    try:
        return params[name]
    except KeyError:
        return default


def velocity_limits(model: Any) -> dict[str, tuple[float, str]] | None:
    """Active 1-DOF joint -> (URDF ``<limit velocity>``, unit) of a ``RobotModel`` (None for a
    model without limits)."""
    if getattr(model, "velocity_limit", None) is None:
        return None
    out = {}
    for name in model.active_joints:
        k = model.joint_index(name)
        if model.nv_joint[k] == 1:
            unit = "m/s" if model.joint_types[k] == "prismatic" else "rad/s"
            out[name] = (float(model.velocity_limit[model.v_start[k]]), unit)
    return out


def trajectory_from_message(msg: Any, now_ns: int, **rules: Any) -> SplineTrajectory:
    """A trajectory_msgs/JointTrajectory (read by attribute: no ROS import here), checked by
    ``check_trajectory`` with ``rules`` (``trajectory_rules``, multi_dof_*); its header stamp
    is the start (0: the first sample)."""
    points = msg.points
    return check_trajectory(
        msg.joint_names,
        [(pt.time_from_start.sec, pt.time_from_start.nanosec) for pt in points],
        [pt.positions for pt in points], [pt.velocities for pt in points],
        [pt.accelerations for pt in points], [pt.effort for pt in points],
        start_ns=msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec,
        now_ns=now_ns, **rules)


def goal_tolerances(defaults: Tolerances, joints: Sequence[str],
                    path: Sequence[tuple[str, float, float, float]],
                    goal: Sequence[tuple[str, float, float, float]],
                    goal_time: tuple[int, int], components: int = 0) -> Tolerances:
    """The goal's tolerances over ``joints`` (the controller's order) on top of ``defaults``:
    ``path``/``goal`` are (name, position, velocity, acceleration) of its JointTolerance
    entries. ``TrajectoryError`` naming the entry for an unknown joint or an illegal value."""
    if components:
        raise TrajectoryError("INVALID_GOAL", "component_path_tolerance / "
                              "component_goal_tolerance apply to multi-DOF joints: not "
                              "supported")
    joints = list(joints)
    out = Tolerances(*(StateTolerance(s.position.copy(), s.velocity.copy(),
                                      s.acceleration.copy())
                       for s in (defaults.path, defaults.goal)), defaults.goal_time)
    out.goal_time = resolve_tolerance(defaults.goal_time, _seconds(goal_time),
                                      "goal_time_tolerance")
    for field_name, entries, target in (("path_tolerance", path, out.path),
                                        ("goal_tolerance", goal, out.goal)):
        for k, (name, *values) in enumerate(entries):
            if name not in joints:
                raise TrajectoryError("INVALID_JOINTS", f"{field_name}[{k}] names joint "
                                      f"'{name}', not one of the controller's active joints "
                                      f"{joints}")
            i = joints.index(name)
            for what, value in zip(("position", "velocity", "acceleration"), values):
                arr = getattr(target, what)
                arr[i] = resolve_tolerance(arr[i], value,
                                           f"{field_name}[{k}] ('{name}') {what}")
    return out


class TrajectoryExecution:
    """Judges one goal cycle by cycle (JTC's update): returns None while it runs, or
    (code name, message) when it ends."""

    def __init__(self, joints: Sequence[str], tolerances: Tolerances) -> None:
        self.joints = list(joints)
        self.tolerances = tolerances
        self._first = True

    def update(self, sample: Sample, reference_p: np.ndarray, reference_v: np.ndarray,
               measured_p: np.ndarray, measured_v: np.ndarray) -> tuple[str, str] | None:
        """``reference_*``/``measured_*`` over ``joints`` (the controller's active joints); the
        error is reference - measured (JTC's sign)."""
        error_p, error_v = reference_p - measured_p, reference_v - measured_v
        first, self._first = self._first, False
        if sample.before_last_point or first:
            why = self.tolerances.path.violation(self.joints, error_p, error_v)
            if why:
                return "PATH_TOLERANCE_VIOLATED", f"path tolerance violated: {why}"
        if sample.before_last_point:
            return None
        why = self.tolerances.goal.violation(self.joints, error_p, error_v)
        if not why:
            return "SUCCESSFUL", "goal reached within the goal tolerances"
        goal_time = self.tolerances.goal_time
        if goal_time > 0.0 and sample.time_past_segment > goal_time:
            return ("GOAL_TOLERANCE_VIOLATED", f"goal_time_tolerance {goal_time:g} s exceeded "
                    f"by {sample.time_past_segment - goal_time:.3f} s: {why}")
        return None
