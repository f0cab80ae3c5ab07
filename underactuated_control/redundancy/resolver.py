"""The elbow resolver's planner, ROS-free: goals in, one limited joint setpoint per sample out
(Seraji configuration control, doc/architecture.md §4-5; the node ``elbow_redundancy_resolver`` is
its ROS adapter).

``ElbowPlanner.start(waypoints, q)`` plans a motion through hand poses and arm angles: one
cycloidal segment per waypoint, each a dry run of configuration control (``plan_motion``)
stretched in time to keep within the joint velocity and acceleration limits, from where the
previous one ends. It returns a ``PlanResult``: the accepted ``Plan``, or the ``reason`` (and
the ``waypoint``) of a refusal, in which case the running motion goes on. ``plan`` and
``accept`` are the two halves: ``plan`` touches only a planning copy of the step (its own
workspaces), so it may run on another thread while ``step`` runs.

``step(q_measured, dt)`` advances the running motion by one sample: the configuration-control
step (10) toward the next sample of the segment, limited by ``SetpointLimiter`` (the segment's
clock advances by the fraction of the step taken). It returns a ``Setpoint`` (positions,
velocities, accelerations and what limited them), with an ``Arrival`` once per goal when the
motion has settled.

Passive joints (a failed motor; ``Settings.passive_joint_motion``): ``disturbance``
plans with the generalized Jacobians of Jain & Rodriguez (patent US 5,377,310 claims 11, 22):
a passive joint moves by dθ_p = J_D dθ_a when the active joints move by dθ_a (first order of
q̈_p = J_D q̈_a + drift, paper 6.12), every row of the step is its generalized row
r_a + r_p J_D (the hand's: J_G = J_a + J_p J_D, 6.11), and the setpoint of a passive joint is
where the active setpoints take it: θ_p + J_D (θ_a,set - θ_a), from its measured angle
corrected for the active joints' lag (``iterate_from: plan``) or from the measured joints
(``sensed``), velocity J_D θ̇_a,set. Only the active setpoints are limited (nobody commands
a passive joint); a dry run stretches its motion for the passive joints' predicted speeds too.
``locked``: a passive joint is held at its measured angle and planned as locked (a braked
joint): its column is dropped and its setpoint is its measured angle, at rest. ``auto``
(default): ``disturbance``, and for a goal whose disturbance plan is refused, ``locked`` (a
failed joint held by its friction; on seven arms never used to develop this, with the
joints' friction, the locked plan reached as many goals or more:
doc/nodes/elbow_redundancy_resolver.md).

State is explicit: ``Motion`` (segments, clocks), ``q_plan``/``v_plan`` (the last setpoint)
and ``Anchors`` (θ(0) of the goal: locked joints, spring rest angles, held link orientations,
Seraji §3.3-3.4), carried over explicitly by ``configure``/``use`` when the settings change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ..control.trajectories import cycloidal
from ..model import RobotModel
from ..parameters import per_joint
from .arm_angle import ArmAngle
from .configuration_control import (
    PASSIVE_MOTIONS,
    ConfigurationControl,
    ConfigurationTrajectory,
    StepResult,
)
from .functions import (
    WEIGHT_CAP,
    ArmAngleFunction,
    CollisionAvoidance,
    ElbowCoordinate,
    GravityTorqueMinimization,
    JointLimitAvoidance,
    JointLocking,
    LinkOrientation,
    Manipulability,
    OptimalJointMovement,
    Sphere,
)
from .limits import SetpointLimiter, hand_errors, plan_motion, reach, wrap_angle

__all__ = ["HAND_AXES", "MAX_DURATION", "OVERRUN", "OVERRUN_MARGIN", "SETTLE_HOLD", "STALL_PACE",
           "STALL_WINDOW", "FOLLOWING_POSITION", "FOLLOW_TOLERANCE", "FOLLOW_WINDOW",
           "PLAN_PASSIVE_MOTIONS", "Settings", "FollowingCheck",
           "Waypoint", "Segment", "Plan", "PlanResult", "Motion", "Anchors", "Arrival", "Setpoint",
           "Configuration", "ElbowPlanner"]

HAND_AXES = ("x", "y", "z", "rx", "ry", "rz")
MAX_DURATION = 600.0  # s: a goal whose motion would take longer within the limits is refused
# a running motion not settled after OVERRUN x its planned duration + OVERRUN_MARGIN s of
# setpoints is stopped and reported (slowed at the limits over DDS, the failed-joint triangle
# took up to 2.7x its plan and reached its goal; one run here chased the goal for 262 s)
OVERRUN, OVERRUN_MARGIN = 4.0, 10.0
# s: the hand and arm angle on the goal this long, the clock run out, count as arrived though
# the plan still moves (answering a passive joint: the failed-joint triangle in CI, hand
# 0.00 mm and arm angle 0.00° from its goal, never settled below 1e-3 rad/s)
SETTLE_HOLD = 1.0
# a running motion whose clock advanced less than STALL_PACE x STALL_WINDOW s over a window of
# STALL_WINDOW s of setpoints (no joint at a position limit) is stopped and reported: its steps
# were near-singular, cut by the limits (a failed elbow's plan left by the real passive motion
# drove panda joints along such steps at their speed limits, the hand going nowhere)
STALL_PACE, STALL_WINDOW = 0.05, 1.0
# passive_joint_motion: the configuration step's two, or the planner's choice between them
PLAN_PASSIVE_MOTIONS = ("auto", *PASSIVE_MOTIONS)
ARRIVAL_POSITION, ARRIVAL_DEGREES = 1e-3, 0.5  # m, deg: a goal's hand (and arm angle) tolerance
# m: a measured hand this much farther from the goal than the setpoints' is an arm that did not
# follow them (no controller on ~/joint_reference, or one holding): said in the report
FOLLOWING_POSITION = 0.01
# rad, s: measured active joints farther than FOLLOW_TOLERANCE (in some joint) from every
# setpoint of the last FOLLOW_WINDOW s plus the stream's own delay are an arm not following
# them while it moves (a stream held on the way, no controller, one holding): said at once
FOLLOW_TOLERANCE, FOLLOW_WINDOW = 0.1, 0.3


@dataclass(frozen=True)
class Settings:
    """The planner's options (the node's parameters of the same names)."""

    hand_weights: tuple[float, ...] = (16.0,)  # W_e: x, y, z, rx, ry, rz (one value: all)
    arm_angle_weight: float = 1.0  # W_c of the arm angle
    joint_velocity_weights: tuple[float, ...] = (0.0,)  # W_v per joint (one value: all)
    obstacles: tuple[float, ...] = (0.0,)  # x, y, z, radius per sphere; () or (0.0,): none
    obstacle_margin: float = 0.1  # m: outer minus inner sphere-of-influence radius
    joint_limit_margin: float = 0.1  # rad: joint-limit avoidance zone (0: off)
    acceleration_limit: tuple[float, ...] = (10.0,)  # rad/s², one value or one per joint
    iterate_from: str = "plan"  # each step from the last setpoint ("plan") or "sensed"
    collision_weight: float = 1.0
    collision_gain: float = 0.5
    joint_limit_gain: float = 0.5
    elbow_axes: str = ""  # elbow coordinates held or driven (any of x, y, z)
    elbow_weight: float = 1.0
    locked_joints: tuple[str, ...] = ("",)
    joint_locking_weight: float = 1e4
    joint_spring_stiffness: tuple[float, ...] = (0.0,)  # (0.0,): off
    joint_spring_weight: float = 1.0
    manipulability_gain: float = 0.0
    manipulability_weight: float = 1.0
    gravity_torque_gain: float = 0.0
    gravity_torque_weight: float = 1.0
    orientation_link: str = ""  # '' off (claim 2)
    orientation_weight: float = 1.0
    passive_joint_motion: str = "auto"  # passive joints moved by J_D, "locked", or "auto"

    @classmethod
    def from_values(cls, values: Mapping) -> Settings:
        """The fields picked from a mapping with (at least) these names, lists as tuples."""
        picked = {f.name: values[f.name] for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in picked.items()})

    def spheres(self, extra: Sequence[Sphere] = ()) -> list[Sphere]:
        """The obstacle spheres of ``obstacles`` (inner radius r, outer r + margin), then
        ``extra``."""
        obs = list(self.obstacles)
        spheres = [] if obs in ([], [0.0]) else [
            Sphere(obs[i:i + 3], obs[i + 3], obs[i + 3] + self.obstacle_margin)
            for i in range(0, len(obs), 4)]
        return spheres + list(extra)


@dataclass(frozen=True)
class Waypoint:
    """A goal of a motion: hand pose (position, rotation matrix; root frame) and arm angle ψ
    [rad]; ``None`` keeps the value at the segment's start. ``duration`` [s] is the one asked
    for (the plan may stretch it)."""

    pose: tuple[np.ndarray, np.ndarray] | None
    psi: float | None
    duration: float


@dataclass
class Segment:
    """One cycloidal piece of a motion: hand pose and ψ from a start to a waypoint."""

    start: tuple  # (p, R, ψ)
    goal: tuple  # (p, R, ψ)
    duration: float  # s, as planned (stretched where the limits demand)
    trajectory: ConfigurationTrajectory = field(init=False)

    def __post_init__(self) -> None:
        self.trajectory = ConfigurationTrajectory(*self.start, *self.goal, self.duration)


@dataclass
class Plan:
    """An accepted goal: the segments the dry runs found within the limits."""

    q: np.ndarray  # configuration the dry run started from
    segments: list[Segment]
    stretched: list[tuple[int, float, float]]  # (waypoint index, asked, planned duration [s])
    locked: bool = False  # ``auto``: planned with the passive joints locked (J_D's refused)
    note: str = ""  # why (``auto``: the disturbance plan's refusal)

    @property
    def goal(self) -> tuple:
        """(p, R, ψ) of the last waypoint."""
        return self.segments[-1].goal


@dataclass
class PlanResult:
    """A plan, or why there is none: ``reason``, and the index of the waypoint at fault
    (``None``: not one waypoint's fault)."""

    plan: Plan | None = None
    reason: str = ""
    waypoint: int | None = None

    @property
    def accepted(self) -> bool:
        return self.plan is not None


@dataclass
class Motion:
    """The running motion."""

    segments: list[Segment]  # the running one first; the last one is held once reached
    total_duration: float  # s: sum of the planned durations
    elbow_start: dict[str, float]  # elbow coordinates at the start (root frame, m)
    clock: float = 0.0  # the running segment's clock [s]: slows down where the limits demand
    elapsed: float = 0.0  # setpoint time since the goal started [s]
    past_first: bool = False  # elbow targets move over the first segment only, then are held
    reported: bool = False  # the arrival has been reported
    overran: bool = False  # stopped unsettled past OVERRUN x its planned duration
    stalled: bool = False  # stopped: its clock hardly advanced over STALL_WINDOW s
    on_goal_since: float | None = None  # elapsed [s] when the hand came onto its goal, moving
    progress: float = 0.0  # s: the clocks' advance over all segments
    locked: bool = False  # run with the passive joints locked (an ``auto`` plan's fallback)
    window: tuple[float, float] = (0.0, 0.0)  # (elapsed, progress) where the window began

    @property
    def halted(self) -> bool:
        """Stopped before it settled (overran or stalled): the last setpoint is held."""
        return self.overran or self.stalled

    def check_pace(self, scale: float, dt: float, pressing_a_limit: bool,
                   running: bool) -> None:
        """Count a setpoint that advanced the clock by ``scale`` x ``dt``; a window of
        STALL_WINDOW s in which the clock advanced less than STALL_PACE of it stalls the motion.
        A setpoint pressing a position limit (reported as such), or one past the last
        segment's clock (``running`` False: settling, bounded by OVERRUN), starts a new
        window."""
        self.progress += scale * dt
        if pressing_a_limit or not running:
            self.window = (self.elapsed, self.progress)
            return
        start, done = self.window
        if self.elapsed - start >= STALL_WINDOW - 1e-9:
            if self.progress - done < STALL_PACE * (self.elapsed - start):
                self.stalled = True
            self.window = (self.elapsed, self.progress)


@dataclass
class Anchors:
    """θ(0) of a goal (Seraji §3.3-3.4), what its functions hold to: the locked joints' angles
    (for the locked DOFs ``locked_dofs``), the springs' rest angles and the held orientation
    of each link. ``None``: set at the next step."""

    locked_dofs: tuple[int, ...] = ()
    locked: np.ndarray | None = None
    rest: np.ndarray | None = None
    held: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def at(cls, control: ConfigurationControl, q: np.ndarray) -> Anchors:
        """Every function held to the configuration ``q``."""
        ws = control.workspace
        ws.set_configuration(q)
        anchors = cls(rest=q.copy())
        for f in control.functions:
            if isinstance(f, JointLocking):
                anchors.locked_dofs, anchors.locked = tuple(f.dofs), q[f.q_index].copy()
            elif isinstance(f, LinkOrientation):
                anchors.held[f.link] = ws.frame_placement(f.link)[1].copy()
        return anchors

    @classmethod
    def of(cls, control: ConfigurationControl) -> Anchors:
        """What the functions of ``control`` hold to now."""
        anchors = cls()
        for f in control.functions:
            if isinstance(f, JointLocking):
                anchors.locked_dofs, anchors.locked = tuple(f.dofs), f.locked
            elif isinstance(f, OptimalJointMovement):
                anchors.rest = f.rest
            elif isinstance(f, LinkOrientation) and f.held is not None:
                anchors.held[f.link] = f.held
        return anchors

    def apply(self, control: ConfigurationControl) -> None:
        """Hold the functions of ``control`` to these anchors (a lock only if it locks the
        same DOFs; what has no anchor is set at the next step)."""
        for f in control.functions:
            if isinstance(f, JointLocking):
                f.locked = self.locked if tuple(f.dofs) == self.locked_dofs else None
            elif isinstance(f, OptimalJointMovement):
                f.rest = self.rest
            elif isinstance(f, LinkOrientation):
                f.held = self.held.get(f.link)


@dataclass
class Arrival:
    """How a goal ended (reported once, when its clock has run out and the plan stopped)."""

    position_error: float  # m, hand to target
    orientation_error: float  # rad
    arm_angle_error: float  # rad
    elapsed: float  # s since the goal started
    slowed: bool  # took noticeably longer than planned (the limits slowed it down)
    at_limit: tuple[str, ...]  # joints held at a position limit
    overran: bool = False  # stopped before it settled, past OVERRUN x its planned duration
    planned: float = 0.0  # s: its planned duration
    stalled: bool = False  # stopped: the limits cut its steps below STALL_PACE (near-singular)
    measured_position_error: float = 0.0  # m: the measured arm's hand to the target
    measured_orientation_error: float = 0.0  # rad

    @property
    def followed(self) -> bool:
        """The measured hand is within FOLLOWING_POSITION of where the setpoints put it, as
        far as the goal is concerned (a controller followed the setpoints)."""
        return self.measured_position_error - self.position_error < FOLLOWING_POSITION

    @property
    def reached(self) -> bool:
        """Settled within 1 mm and 0.5° of the hand target."""
        return (self.position_error < ARRIVAL_POSITION
                and np.degrees(self.orientation_error) < ARRIVAL_DEGREES and not self.overran
                and not self.stalled)


class FollowingCheck:
    """How far the measured active joints are from the nearest setpoint of the recent past:
    an arm that follows the stream, however late within the window, is at one of them. The
    setpoints are kept in preallocated arrays (grown when a window holds more)."""

    def __init__(self, active: np.ndarray, capacity: int = 64) -> None:
        self.active = np.asarray(active, dtype=int)
        self.times = np.empty(capacity)  # s: when each kept setpoint was sent
        self.points = np.empty((capacity, self.active.size))  # its active joints
        self.first = self.end = 0  # the window's setpoints: [first, end)

    def reset(self) -> None:
        """A new stream: no setpoint yet."""
        self.first = self.end = 0

    def update(self, now: float, q_setpoint: np.ndarray, q_measured: np.ndarray,
               window: float) -> tuple[float, int]:
        """Take the setpoint sent at ``now`` [s]; (the measured active joints' distance in their
        worst joint to the nearest setpoint of the last ``window`` s [rad], that joint's
        index in the model)."""
        if self.end == len(self.times):  # full: move the window's setpoints to the front
            kept = self.end - self.first
            if kept > len(self.times) // 2:
                self.times = np.resize(self.times, 2 * len(self.times))
                self.points = np.resize(self.points, (2 * len(self.points), self.active.size))
            self.times[:kept] = self.times[self.first:self.end].copy()
            self.points[:kept] = self.points[self.first:self.end].copy()
            self.first, self.end = 0, kept
        self.times[self.end] = now
        self.points[self.end] = q_setpoint[self.active]
        self.end += 1
        times = self.times
        while not now - window <= times[self.first] <= now:  # older, or a clock that went back
            self.first += 1
        gaps = np.abs(self.points[self.first:self.end] - q_measured[self.active])
        worst = gaps.max(axis=1)
        k = int(worst.argmin())
        return float(worst[k]), int(self.active[int(gaps[k].argmax())])


@dataclass
class Setpoint:
    """One sample of the setpoint stream (every joint; a passive one where the active
    setpoints are predicted to take it, or with ``passive_joint_motion: locked`` at its
    measured angle, at rest)."""

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    scale: float  # fraction of the requested step taken (the clock's advance)
    limited: bool  # the limits cut this sample
    at_limit: tuple[str, ...]  # joints held at a position limit the goal pushes against
    failure: str  # why the configuration-control step failed (the setpoint held), or ""
    inside_obstacle: bool  # the arm is inside an obstacle's inner sphere
    arrival: Arrival | None = None  # once per goal


@dataclass
class Configuration:
    """What the settings build: the configuration-control step, its setpoint limits and the
    arm angle, one set for the running motion and one for dry runs (own workspaces)."""

    settings: Settings
    marker_spheres: tuple[Sphere, ...]
    control: ConfigurationControl
    limiter: SetpointLimiter
    arm_angle: ArmAngle
    planning: ConfigurationControl
    planning_limiter: SetpointLimiter
    planning_arm_angle: ArmAngle
    locked: ConfigurationControl | None = None  # ``auto`` with passive joints: the fallback
    locked_planning: ConfigurationControl | None = None

    def running(self, motion: Motion | None) -> ConfigurationControl:
        """The step a motion runs with (its plan's: the fallback for a locked one)."""
        if motion is not None and motion.locked and self.locked is not None:
            return self.locked
        return self.control


class ElbowPlanner:
    """Goals to setpoints for a 7-DOF arm (see the module's docstring). ``links``: the links
    whose origins are the shoulder S, elbow E and wrist W; ``reference``: the direction
    spanning the arm angle's reference plane with SW (Seraji eq. 14-15)."""

    def __init__(self, model: RobotModel, tip: str, links: tuple[str, str, str],
                 settings: Settings | None = None, reference=(0.0, 0.0, 1.0)) -> None:
        self.model, self.tip = model, tip
        self.links, self.reference = tuple(links), reference
        ArmAngle(model, *links, reference=reference)  # ValueError naming a bad link
        self.reach_point, self.reach_radius = reach(model, tip)
        self.config = self._configuration(settings or Settings(), ())
        self.elbow_goal: dict[str, float] = {}  # elbow_x... -> target (root frame, m)
        self.motion: Motion | None = None
        self.q_plan: np.ndarray | None = None  # the last setpoint
        self.v_plan = np.zeros(model.nv)
        self.at_limit: tuple[str, ...] = ()
        self.J_D: np.ndarray | None = None  # J_D of the last step (passive_joint_motion)

    # ---------------------------------------------------------------- configuration
    def configure(self, settings: Settings, marker_spheres: Sequence[Sphere] | None = None
                  ) -> Configuration:
        """Build the step for ``settings`` (and obstacle spheres from elsewhere; default: the
        current ones) without using it; ``ValueError`` naming the setting at fault."""
        return self._configuration(settings, self.config.marker_spheres
                                   if marker_spheres is None else tuple(marker_spheres))

    def _configuration(self, settings: Settings, spheres: tuple[Sphere, ...]
                       ) -> Configuration:
        if settings.passive_joint_motion not in PLAN_PASSIVE_MOTIONS:
            raise ValueError(f"passive_joint_motion must be one of "
                             f"{list(PLAN_PASSIVE_MOTIONS)}, got "
                             f"'{settings.passive_joint_motion}'")
        auto = settings.passive_joint_motion == "auto"
        mode = "disturbance" if auto else settings.passive_joint_motion
        control, limiter, arm_angle = self._build(settings, spheres, mode)
        planning, planning_limiter, planning_arm_angle = self._build(settings, spheres, mode)
        config = Configuration(settings, spheres, control, limiter, arm_angle, planning,
                               planning_limiter, planning_arm_angle)
        if auto and self.model.n_passive:
            config.locked = self._build(settings, spheres, "locked")[0]
            config.locked_planning = self._build(settings, spheres, "locked")[0]
        return config

    def _build(self, s: Settings, marker_spheres: Sequence[Sphere], passive_motion: str
               ) -> tuple[ConfigurationControl, SetpointLimiter, ArmAngle]:
        """Every kinematic function the settings switch on (claim 13: several at once), the
        passive joints planned as ``passive_motion`` says."""
        m, tip = self.model, self.tip
        arm_angle = ArmAngle(m, *self.links, reference=self.reference)
        functions = [ArmAngleFunction(arm_angle, s.arm_angle_weight)]
        for axis in s.elbow_axes:
            functions.append(ElbowCoordinate(m, arm_angle.elbow, axis, s.elbow_weight))
        spheres = s.spheres(marker_spheres)
        if spheres:
            functions.append(CollisionAvoidance(m, spheres, tip=tip, gain=s.collision_gain,
                                                weight=s.collision_weight))
        if s.joint_limit_margin > 0:
            functions.append(JointLimitAvoidance(m, s.joint_limit_margin,
                                                 gain=s.joint_limit_gain))
        locked = [j for j in s.locked_joints if j]
        if locked:
            functions.append(JointLocking(m, locked, s.joint_locking_weight))
        if list(s.joint_spring_stiffness) not in ([], [0.0]):
            k = per_joint("joint_spring_stiffness", s.joint_spring_stiffness, m.joint_names)
            functions.append(OptimalJointMovement(m, k, weight=s.joint_spring_weight))
        if s.manipulability_gain > 0:
            functions.append(Manipulability(m, tip, s.manipulability_gain,
                                            s.manipulability_weight))
        if s.gravity_torque_gain > 0:
            functions.append(GravityTorqueMinimization(m, s.gravity_torque_gain,
                                                       s.gravity_torque_weight))
        if s.orientation_link:
            functions.append(LinkOrientation(m, s.orientation_link, s.orientation_weight))
        control = ConfigurationControl(
            m, tip, functions,
            task_weights=per_joint("hand_weights", s.hand_weights, HAND_AXES),
            joint_velocity_weights=per_joint("joint_velocity_weights",
                                             s.joint_velocity_weights, m.joint_names),
            passive_motion=passive_motion)
        limiter = SetpointLimiter(m, per_joint("acceleration_limit", s.acceleration_limit,
                                               m.joint_names))
        return control, limiter, arm_angle

    def use(self, config: Configuration) -> None:
        """Switch to a configuration from ``configure``; a running goal keeps its anchors
        (locks, springs, held orientations)."""
        anchors = Anchors.of(self.config.running(self.motion))
        for control in (config.control, config.locked):
            if control is not None:
                anchors.apply(control)
        if self.motion is not None and self.motion.locked and config.locked is None:
            self.motion.locked = False  # no fallback in the new settings: as configured
        self.config = config

    def warm_up(self) -> None:
        """One step of each copy at the middle of the joint ranges, so that the compiled step
        is loaded (or compiled, ~30 s after an edit of the package) now and not at the first
        goal; what the step anchored is forgotten."""
        m = self.model
        q = self.config.limiter.clamp(np.where(
            np.isfinite(m.position_lower) & np.isfinite(m.position_upper),
            0.5 * (m.position_lower + m.position_upper), 0.0))
        for control in (self.config.control, self.config.planning, self.config.locked,
                        self.config.locked_planning):
            if control is None:
                continue
            ws = control.workspace
            ws.set_configuration(q)
            control.step(q, ws.frame_placement(self.tip))
            Anchors().apply(control)

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def spheres(self) -> list[Sphere]:
        """The obstacle spheres in use (settings, then those given to ``configure``)."""
        return self.config.settings.spheres(self.config.marker_spheres)

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.config.control.functions]

    @property
    def uses_desired_velocities(self) -> bool:
        """W_v is not zero (desired joint velocities have an effect)."""
        return bool(np.any(self.config.control.joint_velocity_weights))

    def arm_angle(self, q: np.ndarray) -> float:
        """ψ of the configuration ``q`` [rad] (not thread-safe with ``step``: same thread)."""
        return self.config.arm_angle.evaluate(q).psi

    def beyond_reach(self, position: np.ndarray) -> str:
        """Why the hand cannot reach ``position`` (farther than the sum of the link lengths
        from the first joint), or ""."""
        distance = float(np.linalg.norm(np.asarray(position) - self.reach_point))
        if distance <= self.reach_radius:
            return ""
        return (f"the target is {distance:.3f} m from the arm's first joint at "
                f"{np.round(self.reach_point, 3).tolist()}, beyond the reach of "
                f"{self.reach_radius:.3f} m (sum of the link lengths)")

    # ---------------------------------------------------------------- goals
    @property
    def moving(self) -> bool:
        """A motion runs (or holds its goal): a new one starts from the last setpoint."""
        return self.q_plan is not None and self.motion is not None

    def start_configuration(self, q_measured: np.ndarray) -> np.ndarray:
        """Where a new goal starts: the last setpoint, or the measured joints when idle
        (inside the position limits)."""
        q = self.q_plan if self.moving else q_measured
        return self.config.limiter.clamp(np.asarray(q, dtype=float))

    def start(self, waypoints: Sequence[Waypoint], q_measured: np.ndarray) -> PlanResult:
        """``plan`` from ``start_configuration`` and ``accept`` the plan if there is one."""
        result = self.plan(waypoints, self.start_configuration(q_measured))
        if result.plan is not None:
            self.accept(result.plan, q_measured)
        return result

    def plan(self, waypoints: Sequence[Waypoint], q: np.ndarray) -> PlanResult:
        """Dry runs of the motion from ``q`` through ``waypoints``, each segment from where
        the previous one ends. Uses only the planning copies of the step: may run on another
        thread than ``step`` (not two at once). ``passive_joint_motion: auto``: planned with
        the passive joints moved by J_D, and where that plan is refused, with them locked."""
        config = self.config
        if not waypoints:
            return PlanResult(reason="no waypoints")
        for k, wp in enumerate(waypoints):
            reason = "" if wp.pose is None else self.beyond_reach(wp.pose[0])
            if reason:
                return PlanResult(reason=reason, waypoint=k)
        result = self._dry_runs(config.planning, config, waypoints, q)
        if result.plan is not None or config.locked_planning is None:
            return result
        locked = self._dry_runs(config.locked_planning, config, waypoints, q)
        if locked.plan is None:
            return PlanResult(reason=f"{result.reason}; with the passive joints locked: "
                              f"{locked.reason}", waypoint=result.waypoint)
        locked.plan.locked = True
        locked.plan.note = (f"planned with the passive joints locked: moved by the active "
                            f"joints (J_D), {result.reason}")
        return locked

    def _dry_runs(self, control: ConfigurationControl, config: Configuration,
                  waypoints: Sequence[Waypoint], q: np.ndarray) -> PlanResult:
        """``plan``'s dry runs with the planning step ``control``."""
        limiter = config.planning_limiter
        q = limiter.clamp(np.asarray(q, dtype=float))
        p0, R0, psi0, elbow_start = self._start_values(control, config.planning_arm_angle,
                                                       config.settings, q)
        Anchors.at(control, q).apply(control)  # θ(0) of the goal
        elbow_goal = dict(self.elbow_goal)
        extra = {k: (v, elbow_goal.get(k, v)) for k, v in elbow_start.items()}
        segments, stretched = [], []
        start, q_start = (p0, R0, psi0), q
        try:
            for k, wp in enumerate(waypoints):
                p1, R1 = wp.pose if wp.pose is not None else (start[0].copy(),
                                                              start[1].copy())
                goal = (np.asarray(p1, dtype=float), np.asarray(R1, dtype=float),
                        float(wp.psi) if wp.psi is not None else start[2])
                # elbow targets: the whole way over the first segment, then held
                seg_extra = extra if k == 0 else {n: (g, g) for n, (_, g) in extra.items()}
                dry = plan_motion(control, limiter, q_start, start, goal, wp.duration,
                                  extra=seg_extra)
                if not dry.reached:
                    why = dry.failure or (f"{', '.join(dry.at_limit)} at a position limit"
                                          if dry.at_limit else "the arm cannot get there")
                    return PlanResult(reason=f"the planned motion ends "
                                      f"{1e3 * dry.position_error:.1f} mm and "
                                      f"{np.degrees(dry.orientation_error):.1f}° from the "
                                      f"target ({why})", waypoint=k)
                if dry.duration > MAX_DURATION:
                    return PlanResult(reason=f"the motion would take {dry.duration:.0f} s "
                                      "within the joint velocity/acceleration limits (near "
                                      "a singularity?)", waypoint=k)
                if dry.duration > wp.duration * (1 + 1e-9):
                    stretched.append((k, wp.duration, dry.duration))
                segments.append(Segment(start, goal, dry.duration))
                start, q_start = goal, dry.q_end
        except (ValueError, np.linalg.LinAlgError) as exc:
            return PlanResult(reason=f"planning failed: {exc}")
        return PlanResult(Plan(q, segments, stretched))

    def _start_values(self, control: ConfigurationControl, arm_angle: ArmAngle,
                      settings: Settings, q: np.ndarray):
        """Hand pose, ψ and the elbow coordinates switched on, at ``q``."""
        ws = control.workspace
        ws.set_configuration(q)
        p, R = ws.frame_placement(self.tip)
        elbow = ws.frame_placement(arm_angle.elbow)[0]
        elbow_start = {f"elbow_{a}": float(elbow["xyz".index(a)]) for a in settings.elbow_axes}
        return p, R, arm_angle.evaluate(q).psi, elbow_start

    def accept(self, plan: Plan, q_measured: np.ndarray) -> None:
        """Run ``plan`` from now: from the last setpoint (or, when idle, the measured joints);
        if that has moved on since the dry run started, the first segment starts there."""
        config = self.config
        moving = self.moving
        q = self.start_configuration(q_measured)
        p0, R0, psi0, elbow_start = self._start_values(config.control, config.arm_angle,
                                                       config.settings, q)
        segments = list(plan.segments)
        first = segments[0]
        if not np.array_equal(q, plan.q):
            segments[0] = Segment((p0, R0, psi0), first.goal, first.duration)
        motion = Motion(segments, sum(seg.duration for seg in segments), elbow_start,
                        locked=plan.locked and config.locked is not None)
        control = config.running(motion)
        Anchors.at(control, q).apply(control)  # θ(0) of the goal
        if not moving:
            self.v_plan = np.zeros(self.model.nv)
        self.q_plan = q.copy()
        self.motion = motion

    # ---------------------------------------------------------------- setpoints
    def step(self, q_measured: np.ndarray, dt: float, desired_dq: np.ndarray | None = None
             ) -> Setpoint | None:
        """The next setpoint, ``dt`` s after the last (``None`` while there is no motion).
        ``desired_dq``: desired joint change over this sample (θ̇_d Δt, claims 11, 18, 20)."""
        motion = self.motion
        if motion is None or self.q_plan is None:
            return None
        config = self.config
        control, limiter = config.running(motion), config.limiter
        seg = motion.segments[0]
        t = motion.clock + dt
        p_d, R_d, psi_d = seg.trajectory(t)
        targets = {"arm_angle": psi_d}
        for name, start in motion.elbow_start.items():  # cycloidal, over the motion's start
            goal = self.elbow_goal.get(name, start)
            s = 1.0 if motion.past_first else cycloidal(t, seg.duration)[0]
            targets[name] = start + s * (goal - start)
        passive = self.model.passive_dofs
        sensed = config.settings.iterate_from == "sensed"
        q_from = limiter.clamp(q_measured) if sensed else self.q_plan  # claims 1, 3
        if control.coupled and not sensed:  # the passive joints from their measured angles
            q_from = q_from.copy()
            q_from[passive] = self._passive_estimate(limiter.clamp(q_measured))
        res: StepResult | None = None
        try:
            res = control.step(q_from, (p_d, R_d), targets, desired_dq=desired_dq)
            dq = res.q_next - self.q_plan  # the change of the setpoint
            failure = "" if np.all(np.isfinite(dq)) else "non-finite joint step"
        except (ValueError, np.linalg.LinAlgError) as exc:
            failure = str(exc)
        if not (motion.reported or motion.overran) and \
                motion.elapsed > OVERRUN * motion.total_duration + OVERRUN_MARGIN:
            motion.overran = True  # never settled (chasing its goal): stopped, reported
        if failure or motion.halted:  # hold: stop the plan (at the acceleration limit),
            dq = np.zeros(self.model.nv)  # keep its clock
        dq[passive] = 0.0  # the limits bound the active setpoints (nobody commands these)
        v_plan = self.v_plan
        if control.coupled:
            v_plan = v_plan.copy()
            v_plan[passive] = 0.0
        step = limiter.step(self.q_plan, v_plan, dq, dt)
        if not (failure or motion.halted):
            motion.clock += step.scale * dt  # stretched in time, the path kept
        motion.elapsed += dt
        if not (failure or motion.halted or motion.reported):
            motion.check_pace(step.scale, dt, bool(step.at_limit),
                              len(motion.segments) > 1 or motion.clock < seg.duration)
        if motion.clock >= seg.duration and len(motion.segments) > 1:
            motion.segments.pop(0)  # on to the next waypoint (cycloidal: at rest there)
            motion.past_first = True
            motion.clock = 0.0
        self.at_limit = step.at_limit
        inside = res is not None and bool(np.any(
            res.weights.get("collision", np.zeros(0)) >= WEIGHT_CAP))
        q_next, v_next, a_next = step.q, step.v, step.a
        if control.coupled:  # where the active setpoints take the passive joints (6.12)
            if res is not None and res.J_D is not None:
                self.J_D = res.J_D
            J_D = self.J_D if self.J_D is not None else np.zeros((passive.size,
                                                                   self.model.n_active))
            active = self.model.active_dofs
            q_next[passive] = np.clip(q_from[passive] + J_D @ (q_next[active] - q_from[active]),
                                      limiter.lower[passive], limiter.upper[passive])
            v_next[passive] = J_D @ v_next[active]
            a_next[passive] = (v_next[passive] - self.v_plan[passive]) / dt
        else:
            q_next[passive] = limiter.clamp(q_measured)[passive]
            v_next[passive] = 0.0
            a_next[passive] = 0.0
        self.q_plan, self.v_plan = q_next, v_next
        arrival = (self._arrival(res, psi_d, q_from, limiter.clamp(q_measured))
                   if res is not None and (len(motion.segments) == 1 or motion.halted)
                   else None)
        return Setpoint(q=q_next, v=v_next, a=a_next, scale=step.scale,
                        limited=step.scale < 1.0 - 1e-9 or step.clipped,
                        at_limit=step.at_limit, failure=failure, inside_obstacle=inside,
                        arrival=arrival)

    def _passive_estimate(self, q_measured: np.ndarray) -> np.ndarray:
        """The passive joints' angles once the active ones reach the last setpoint: measured,
        plus J_D times what the active joints still lag behind it (first order of 6.12)."""
        passive, active = self.model.passive_dofs, self.model.active_dofs
        if self.J_D is None:
            return q_measured[passive]
        return q_measured[passive] + self.J_D @ (self.q_plan[active] - q_measured[active])

    def _arrival(self, res: StepResult, psi_goal: float, q: np.ndarray,
                 q_measured: np.ndarray) -> Arrival | None:
        """Once per goal, when the motion's clock has run out and the plan has stopped, or
        its hand and arm angle have stayed on the goal for ``SETTLE_HOLD`` s while the plan
        still answers a passive joint's small motion (the step ``res`` started from ``q``);
        the measured arm's hand errors too."""
        motion = self.motion
        if motion.reported or (motion.clock < motion.segments[0].duration
                               and not motion.halted):
            return None
        psi_now = float(res.values.get("arm_angle", [psi_goal])[0])
        e_p, e_o = res.position_error, res.orientation_error
        control = self.config.control
        weights = np.broadcast_to(np.asarray(control.task_weights, float), (6,))
        goal = motion.segments[-1].goal  # a halted motion: judged against its last goal
        if motion.halted:
            psi_now = self.config.arm_angle.evaluate(q).psi
            psi_goal = goal[2]
        if np.any(weights <= 0) or motion.halted:  # an axis not tracked is not judged
            ws = control.workspace
            ws.set_configuration(q)
            p, R = ws.frame_placement(self.tip)
            e_p, e_o = hand_errors(weights, goal[0], goal[1], p, R)
        psi_error = abs(wrap_angle(psi_goal - psi_now))
        if np.abs(self.v_plan).max() > 1e-3 and not self.at_limit:
            on_goal = (e_p < ARRIVAL_POSITION
                       and np.degrees(max(e_o, psi_error)) < ARRIVAL_DEGREES)
            if motion.halted or not on_goal:
                motion.on_goal_since = None
                return None  # still settling (a halted motion: braking to rest)
            if motion.on_goal_since is None:
                motion.on_goal_since = motion.elapsed
            if motion.elapsed - motion.on_goal_since < SETTLE_HOLD:
                return None
        motion.reported = True
        ws = control.workspace
        ws.set_configuration(q_measured)
        e_pm, e_om = hand_errors(weights, goal[0], goal[1], *ws.frame_placement(self.tip))
        return Arrival(position_error=e_p, orientation_error=e_o, arm_angle_error=psi_error,
                       elapsed=motion.elapsed,
                       slowed=motion.elapsed > 1.05 * motion.total_duration + 0.05,
                       at_limit=self.at_limit, overran=motion.overran,
                       planned=motion.total_duration, stalled=motion.stalled,
                       measured_position_error=e_pm, measured_orientation_error=e_om)
