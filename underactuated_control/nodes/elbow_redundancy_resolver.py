"""elbow_redundancy_resolver: Seraji configuration control as a ROS 2 node (ARCHITECTURE §4-5).

A goal (``~/target_pose`` and/or ``~/target_arm_angle``) starts a cycloidal motion of the hand
pose and the arm angle over ``motion_duration`` s from the current plan (or, when idle, the
measured /joint_states). ``~/waypoints`` (std_msgs/Float64MultiArray, 9 numbers per waypoint:
x, y, z, qx, qy, qz, qw of the hand in the root frame, ψ [rad], segment duration [s, <= 0:
``motion_duration``]) starts a sequence of cycloidal segments through them, each planned
within the limits before the first moves.

Every kinematic function of Seraji §3 is an option, several at once (claim 13): the arm angle
(``arm_angle_weight``), elbow coordinates (``elbow_axes``, target ``~/target_elbow``),
collision spheres (``obstacles``/``~/obstacles``, ``collision_weight`` scales (18)),
joint-limit avoidance, joint locking (``locked_joints``), optimal joint movement
(``joint_spring_stiffness``), manipulability and gravity-torque minimisation (their gains),
and the orientation of a link (``orientation_link``, claim 2). ``~/desired_joint_velocities``
(sensor_msgs/JointState, velocity by name) adds desired joint velocities penalised by
``joint_velocity_weights`` (W_v; claims 11, 18, 20). ``iterate_from``: ``plan`` starts each
step from the previous setpoint, ``sensed`` from /joint_states (claims 1, 3).

A timer at ``rate`` Hz runs one configuration-control step per sample and publishes
``~/joint_setpoints`` (trajectory_msgs/JointTrajectory: positions, velocities, accelerations
of every joint) for the controller's ``~/joint_reference``, a
JointTrajectoryController or a position controller, and ``~/arm_angle`` (measured ψ, rad).

Passive joints are locked out of direct command: the plan moves the active joints only, and a
passive joint's setpoint is its measured position (its motion is left to the controller's
hybrid dynamics).

Every setpoint is inside the URDF's position and velocity limits and the ``acceleration_limit``
(``redundancy/limits.py``): a step the limits do not allow is scaled down along its direction
and the motion's clock advances by that fraction (the motion is stretched in time, its path
kept); a joint that a goal pushes against a position limit stops there (reported in the log and
on /diagnostics). Goals the arm cannot reach (beyond the sum of its link lengths), arm angles
outside [-π, π], malformed obstacle markers and non-finite steps are refused with a warning.
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PointStamped, PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..control.joint_space import JointStateMatcher, MissingJointsError
from ..control.trajectories import cycloidal
from ..model import RobotModel
from ..parameters import ParameterError, ParameterSpec, per_joint, table
from ..redundancy.arm_angle import ArmAngle
from ..redundancy.configuration_control import ConfigurationControl, ConfigurationTrajectory
from ..redundancy.functions import (
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
from ..redundancy.limits import SetpointLimiter, plan_motion, reach
from .common import pose_from_message, quaternion_matrix, run_node
from .parameters import NodeParameters
from .robot import load_robot, robot_parameters, with_passive

HAND_AXES = ("x", "y", "z", "rx", "ry", "rz")


def _one_per(name: str, axes_of):
    def check(value: list[float], model: RobotModel | None) -> None:
        if model is not None:
            per_joint(name, value, axes_of(model))
    return check


def _check_obstacles(obs: list[float], model: RobotModel | None) -> None:
    if obs not in ([], [0.0]) and (len(obs) % 4 or any(r <= 0 for r in obs[3::4])):
        raise ValueError("give x, y, z, radius (> 0) per sphere")


def _check_axes(axes: str, model: RobotModel | None) -> None:
    if any(a not in "xyz" for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"give any of x, y, z once each ('' for none), got {axes!r}")


def _check_joints(names: list[str], model: RobotModel | None) -> None:
    names = [n for n in names if n]
    if model is not None:
        unknown = [n for n in names if n not in model.joint_names]
        if unknown:
            raise ValueError(f"unknown joints {unknown}; the joints are {list(model.joint_names)}")


def _check_link(link: str, model: RobotModel | None) -> None:
    if link and model is not None and link not in model.frames:
        raise ValueError(f"unknown link '{link}'")


def _check_stiffness(k: list[float], model: RobotModel | None) -> None:
    if model is not None and k not in ([], [0.0]):
        per_joint("joint_spring_stiffness", k, model.joint_names)


WAYPOINT_FIELDS = ("x", "y", "z", "qx", "qy", "qz", "qw", "psi", "duration")

PARAMETERS = table(
    *robot_parameters(passive_description="joints without actuator (planned as locked)"),
    ParameterSpec("shoulder_link", "", "link whose origin is S", read_only=True),
    ParameterSpec("elbow_link", "", "link whose origin is E", read_only=True),
    ParameterSpec("wrist_link", "", "link whose origin is W", read_only=True),
    ParameterSpec("reference_direction", [0.0, 0.0, 1.0], "direction spanning the arm angle's "
                  "reference plane with SW (root axes)", read_only=True),
    ParameterSpec("hand_weights", [16.0], "W_e: x, y, z, rx, ry, rz (one value: all)",
                  unit="1", low=0.0, high=1e9,
                  validator=_one_per("hand_weights", lambda m: HAND_AXES)),
    ParameterSpec("arm_angle_weight", 1.0, "W_c of the arm angle", unit="1", low=0.0, high=1e9),
    ParameterSpec("joint_velocity_weights", [0.0], "W_v per joint (one value: all)", unit="1",
                  low=0.0, high=1e9, validator=_one_per("joint_velocity_weights",
                                               lambda m: m.joint_names)),
    ParameterSpec("motion_duration", 3.0, "duration of a goal motion", unit="s", low=0.05,
                  high=600.0),
    ParameterSpec("rate", 100.0, "setpoint rate", unit="Hz", low=1.0, high=2000.0),
    ParameterSpec("obstacles", [0.0], "spheres x, y, z, radius (root frame, m) repeated; [] or "
                  "[0.0]: none", unit="m", validator=_check_obstacles),
    ParameterSpec("obstacle_margin", 0.1, "outer minus inner sphere-of-influence radius",
                  unit="m", low=1e-3, high=10.0),
    ParameterSpec("joint_limit_margin", 0.1, "joint-limit avoidance zone (0: off)", unit="rad",
                  low=0.0, high=1.0),
    ParameterSpec("acceleration_limit", [10.0], "joint acceleration bound of the setpoints, one "
                  "value (all joints) or one per joint (velocity and position bounds: the URDF)",
                  unit="rad/s^2", low=1e-3, high=1e4,
                  validator=_one_per("acceleration_limit", lambda m: m.joint_names)),
    ParameterSpec("iterate_from", "plan", "start of each step: the previous setpoint (plan: "
                  "smooth, for servos that lag or noisy sensing) or /joint_states (sensed: the "
                  "patent's claims 1, 3; corrects what the servo did not follow)",
                  choices=("plan", "sensed")),
    ParameterSpec("collision_weight", 1.0, "coefficient of the collision weight w_co (18)",
                  unit="1", low=0.0, high=1e6),
    ParameterSpec("collision_gain", 0.5, "fraction of the way back to the outer sphere asked "
                  "per step", unit="1", low=0.0, high=1.0),
    ParameterSpec("joint_limit_gain", 0.5, "fraction of the way back out of the joint-limit "
                  "zone asked per step", unit="1", low=0.0, high=1.0),
    ParameterSpec("elbow_axes", "", "elbow coordinates held or driven (any of x, y, z; '' "
                  "off); targets on ~/target_elbow", validator=_check_axes),
    ParameterSpec("elbow_weight", 1.0, "W_c of each elbow coordinate", unit="1", low=0.0, high=1e9),
    ParameterSpec("locked_joints", [""], "joints locked at their angle at the start of each "
                  "goal ([''] none)", validator=_check_joints),
    ParameterSpec("joint_locking_weight", 1e4, "W_c of each locked joint (a weighted row: a "
                  "soft lock)", unit="1", low=0.0, high=1e9),
    ParameterSpec("joint_spring_stiffness", [0.0], "optimal joint movement: k_i per joint "
                  "([0.0] off), springs at the angles of the start of each goal",
                  unit="1", low=0.0, high=1e6, validator=_check_stiffness),
    ParameterSpec("joint_spring_weight", 1.0, "W_c of the optimal-joint-movement rows",
                  unit="1", low=0.0, high=1e9),
    ParameterSpec("manipulability_gain", 0.0, "step along the manipulability gradient in the "
                  "hand's null space (0: off)", unit="rad", low=0.0, high=10.0),
    ParameterSpec("manipulability_weight", 1.0, "W_c of the manipulability rows", unit="1", low=0.0,
                  high=1e9),
    ParameterSpec("gravity_torque_gain", 0.0, "step against the gradient of ½|τ_g|² in the "
                  "hand's null space (0: off)", unit="rad/(N m)^2", low=0.0, high=1.0),
    ParameterSpec("gravity_torque_weight", 1.0, "W_c of the gravity-torque rows", unit="1", low=0.0,
                  high=1e9),
    ParameterSpec("orientation_link", "", "link whose orientation is held at its value at the "
                  "start of each goal ('' off; claim 2)", validator=_check_link),
    ParameterSpec("orientation_weight", 1.0, "W_c of the link-orientation rows", unit="1", low=0.0,
                  high=1e9),
    ParameterSpec("desired_velocity_timeout", 0.5, "~/desired_joint_velocities older than this "
                  "are dropped", unit="s", low=0.0, high=60.0),
)

DIAGNOSTICS_PERIOD = 1.0  # s
MAX_DURATION = 600.0  # s: a goal whose motion would take longer within the limits is refused


class Segment:
    """One cycloidal piece of a motion: hand pose and ψ from a start to a waypoint."""

    def __init__(self, start: tuple, goal: tuple, duration: float) -> None:
        self.start, self.goal, self.duration = start, goal, duration
        self.trajectory = ConfigurationTrajectory(*start, *goal, duration)
        self.elbow_done = False  # elbow targets move over the first segment only


class ElbowRedundancyResolver(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("elbow_redundancy_resolver", **kwargs)
        self.params = NodeParameters(self, PARAMETERS)
        base = load_robot(self.params.declare(["robot_description", "urdf_path", "root_link",
                                               "tip_link"]))
        p = self.params.declare(context=base)
        self.model = with_passive(base, p["passive_joints"])
        self.tip = p["tip_link"] or self.model.body_names[-1]
        links = {k: p[k] for k in ("shoulder_link", "elbow_link", "wrist_link")}
        if not all(links.values()):
            raise ParameterError("set parameters shoulder_link, elbow_link and wrist_link")
        self.arm_angle = ArmAngle(self.model, links["shoulder_link"], links["elbow_link"],
                                  links["wrist_link"], reference=p["reference_direction"])
        self.matcher = JointStateMatcher(self.model)
        self.reach_point, self.reach_radius = reach(self.model, self.tip)
        self.marker_spheres: list[Sphere] = []
        self.control, self.limiter = self._build(p, set(PARAMETERS))
        self.params.on_update(self._build, self._commit)
        self._warm_up()

        self.setpoint_pub = self.create_publisher(JointTrajectory, "~/joint_setpoints", 10)
        self.psi_pub = self.create_publisher(Float64, "~/arm_angle", 10)
        self.marker_pub = self.create_publisher(MarkerArray, "~/obstacle_markers", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointState, "/joint_states", self._on_state, 10)
        self.create_subscription(PoseStamped, "~/target_pose", self._on_pose, 10)
        self.create_subscription(Float64, "~/target_arm_angle", self._on_psi, 10)
        self.create_subscription(PointStamped, "~/target_elbow", self._on_elbow, 10)
        self.create_subscription(Float64MultiArray, "~/waypoints", self._on_waypoints, 10)
        self.create_subscription(JointState, "~/desired_joint_velocities",
                                 self._on_desired_velocities, 10)
        self.create_subscription(MarkerArray, "~/obstacles", self._on_obstacles, 10)
        self.timer = self.create_timer(1.0 / p["rate"], self._tick)
        self.create_timer(DIAGNOSTICS_PERIOD, self._publish_diagnostics)

        self.q_measured: np.ndarray | None = None
        self.q_plan: np.ndarray | None = None
        self.v_plan = np.zeros(self.model.nv)
        self.goal_pose = None
        self.goal_psi: float | None = None
        self.pending: list | None = None  # waypoints that came before the first state
        self.segments: list[Segment] = []
        self.total_duration = 0.0
        self.elbow_goal: dict[str, float] = {}  # elbow_x... -> target (root frame, m)
        self.elbow_start: dict[str, float] = {}
        self.desired_v: np.ndarray | None = None
        self.desired_stamp = 0.0
        self.t_motion = 0.0  # the segment's clock [s]: slows down where the limits demand
        self.motion_time = 0.0  # setpoint time since the goal started [s]
        self.motion_reported = True
        self.at_limit: tuple[str, ...] = ()
        self.counts = {"limited_samples": 0, "samples_at_position_limit": 0,
                       "non_finite_steps": 0, "rejected_goals": 0, "rejected_markers": 0}
        self.last_rejection = ""
        self.last_scale = 1.0
        self.get_logger().info(
            f"resolving the elbow of '{self.model.name}' (S {links['shoulder_link']}, E "
            f"{links['elbow_link']}, W {links['wrist_link']}; hand {self.tip}, reach "
            f"{self.reach_radius:.3f} m); passive {list(self.model.passive_joints)}; "
            f"functions {[f.name for f in self.control.functions]}")

    def _warm_up(self) -> None:
        """One step at the middle of the joint ranges, so that the compiled step is loaded
        (or compiled, ~30 s after an edit of the package) now and not at the first goal."""
        q = self.limiter.clamp(np.where(np.isfinite(self.model.position_lower)
                                        & np.isfinite(self.model.position_upper),
                                        0.5 * (self.model.position_lower
                                               + self.model.position_upper), 0.0))
        ws = self.control.workspace
        ws.set_configuration(q)
        self.control.step(q, ws.frame_placement(self.tip))
        for f in self.control.functions:  # forget what the warm-up step locked or held
            for attr in ("locked", "rest", "held"):
                if getattr(f, attr, None) is not None:
                    setattr(f, attr, None)

    @property
    def trajectory(self) -> ConfigurationTrajectory | None:
        """The running segment's trajectory (None when idle)."""
        return self.segments[0].trajectory if self.segments else None

    # ---------------------------------------------------------------- configuration
    def _spheres(self, p: dict | None = None) -> list[Sphere]:
        p = self.params.values if p is None else p
        obs = list(p["obstacles"])
        spheres = [] if obs in ([], [0.0]) else [
            Sphere(obs[i:i + 3], obs[i + 3], obs[i + 3] + p["obstacle_margin"])
            for i in range(0, len(obs), 4)]
        return spheres + self.marker_spheres

    def _build(self, p: dict, changed: set[str]) -> tuple[ConfigurationControl, SetpointLimiter]:
        """The configuration-control step and the setpoint limits for the values ``p``:
        every kinematic function whose parameters switch it on (claim 13: several at once)."""
        m = self.model
        functions = [ArmAngleFunction(self.arm_angle, p["arm_angle_weight"])]
        for axis in p["elbow_axes"]:
            functions.append(ElbowCoordinate(m, self.arm_angle.elbow, axis, p["elbow_weight"]))
        spheres = self._spheres(p)
        if spheres:
            functions.append(CollisionAvoidance(m, spheres, tip=self.tip,
                                                gain=p["collision_gain"],
                                                weight=p["collision_weight"]))
        if p["joint_limit_margin"] > 0:
            functions.append(JointLimitAvoidance(m, p["joint_limit_margin"],
                                                 gain=p["joint_limit_gain"]))
        locked = [j for j in p["locked_joints"] if j]
        if locked:
            functions.append(JointLocking(m, locked, p["joint_locking_weight"]))
        if p["joint_spring_stiffness"] not in ([], [0.0]):
            k = per_joint("joint_spring_stiffness", p["joint_spring_stiffness"], m.joint_names)
            functions.append(OptimalJointMovement(m, k, weight=p["joint_spring_weight"]))
        if p["manipulability_gain"] > 0:
            functions.append(Manipulability(m, self.tip, p["manipulability_gain"],
                                            p["manipulability_weight"]))
        if p["gravity_torque_gain"] > 0:
            functions.append(GravityTorqueMinimization(m, p["gravity_torque_gain"],
                                                       p["gravity_torque_weight"]))
        if p["orientation_link"]:
            functions.append(LinkOrientation(m, p["orientation_link"], p["orientation_weight"]))
        old = getattr(self, "control", None)
        if old is not None:  # keep the state of a running goal (locks, springs, held links)
            for f in functions:
                prev = next((g for g in old.functions if type(g) is type(f)
                             and g.name == f.name), None)
                for attr in ("locked", "rest", "held"):
                    if prev is not None and getattr(prev, attr, None) is not None:
                        if attr != "locked" or list(prev.dofs) == list(f.dofs):
                            setattr(f, attr, getattr(prev, attr))
        control = ConfigurationControl(
            m, self.tip, functions,
            task_weights=per_joint("hand_weights", p["hand_weights"], HAND_AXES),
            joint_velocity_weights=per_joint("joint_velocity_weights",
                                             p["joint_velocity_weights"], m.joint_names))
        limiter = SetpointLimiter(m, per_joint(
            "acceleration_limit", p["acceleration_limit"], m.joint_names))
        return control, limiter

    def _commit(self, built, p: dict, changed: set[str]) -> None:
        self.control, self.limiter = built
        if "rate" in changed:
            self.timer.cancel()
            self.timer = self.create_timer(1.0 / p["rate"], self._tick)

    def _reset_goal_state(self, q: np.ndarray) -> None:
        """Locks, spring rest angles and held link orientations start at ``q`` (the start of
        a goal: θ(0) of Seraji §3.3-3.4)."""
        for f in self.control.functions:
            if isinstance(f, JointLocking):
                f.locked = q[f.q_index].copy()
            elif isinstance(f, OptimalJointMovement):
                f.rest = q.copy()
            elif isinstance(f, LinkOrientation):
                ws = self.control.workspace
                ws.set_configuration(q)
                f.held = ws.frame_placement(f.link)[1].copy()

    # ---------------------------------------------------------------- inputs
    def _on_state(self, msg: JointState) -> None:
        try:
            q, _ = self.matcher.match(msg.name, msg.position,
                                      msg.velocity if len(msg.velocity) else [0.0] * len(
                                          msg.name))
        except (MissingJointsError, ValueError) as exc:
            self.get_logger().warning(f"/joint_states ignored: {exc}", throttle_duration_sec=2.0)
            return
        if np.all(np.isfinite(q)):
            first = self.q_measured is None
            self.q_measured = q.copy()
            if first and self.pending is not None:
                pending, self.pending = self.pending, None
                self._start_motion(pending, "goal")  # a goal that came before the first state

    def _reject(self, what: str, reason: str) -> None:
        self.counts["rejected_goals"] += 1
        self.last_rejection = f"{what} rejected: {reason}"
        self.get_logger().warning(self.last_rejection)

    def _start_goal(self, pose=None, psi: float | None = None) -> None:
        """A single goal (``pose`` and/or ``psi``; the other part stays as it was)."""
        what = "~/target_pose" if pose is not None else "~/target_arm_angle"
        goal_pose = pose if pose is not None else self.goal_pose
        goal_psi = psi if psi is not None else self.goal_psi
        self._start_motion([(goal_pose, goal_psi, self.params["motion_duration"])], what)

    def _start_motion(self, waypoints: list, what: str) -> None:
        """Plan the motion through ``waypoints`` [(pose or None, ψ or None, duration)] from
        the current plan, or from the measured state when idle; each segment is a dry run
        (``plan_motion``) from where the previous one ends. A motion the dry runs do not
        reach is refused and the current one goes on."""
        if self.q_measured is None:
            self.pending = waypoints
            self.goal_pose, self.goal_psi = waypoints[-1][0], waypoints[-1][1]
            self.get_logger().warning("goal received before any /joint_states: it starts "
                                      "with the first state")
            return
        moving = self.q_plan is not None and bool(self.segments)
        q = self.limiter.clamp(self.q_plan if moving else self.q_measured)
        ws = self.control.workspace
        ws.set_configuration(q)
        p0, R0 = ws.frame_placement(self.tip)
        psi0 = self.arm_angle.evaluate(q).psi
        saved = [(getattr(f, "locked", None), getattr(f, "rest", None), getattr(f, "held", None))
                 for f in self.control.functions]
        self._reset_goal_state(q)
        elbow_p = ws.frame_placement(self.arm_angle.elbow)[0]
        elbow_start = {f"elbow_{a}": float(elbow_p["xyz".index(a)])
                       for a in self.params["elbow_axes"]}
        extra = {k: (v, self.elbow_goal.get(k, v)) for k, v in elbow_start.items()}
        segments, start, q_start = [], (p0, R0, psi0), q
        try:
            for k, (pose, psi, requested) in enumerate(waypoints):
                p1, R1 = pose if pose is not None else (start[0].copy(), start[1].copy())
                goal = (p1, R1, psi if psi is not None else start[2])
                # elbow targets: the whole way over the first segment, then held
                seg_extra = extra if k == 0 else {n: (g, g) for n, (_, g) in extra.items()}
                plan = plan_motion(self.control, self.limiter, q_start, start, goal, requested,
                                   extra=seg_extra)
                label = what if len(waypoints) == 1 else f"{what} (waypoint {k + 1})"
                if not plan.reached:
                    why = plan.failure or (f"{', '.join(plan.at_limit)} at a position limit"
                                           if plan.at_limit else "the arm cannot get there")
                    raise _RefusedError(label, f"the planned motion ends "
                                        f"{1e3 * plan.position_error:.1f} mm and "
                                        f"{np.degrees(plan.orientation_error):.1f}° from the "
                                        f"target ({why})")
                if plan.duration > MAX_DURATION:
                    raise _RefusedError(label, f"the motion would take {plan.duration:.0f} s "
                                        "within the joint velocity/acceleration limits (near "
                                        "a singularity?)")
                if plan.duration > requested * (1 + 1e-9):
                    name = "motion_duration" if len(waypoints) == 1 else f"{label}: duration"
                    self.get_logger().info(
                        f"{name} {requested:g} s stretched to {plan.duration:.2f} s by the "
                        "joint velocity/acceleration limits")
                segments.append(Segment(start, goal, plan.duration))
                start, q_start = goal, plan.q_end
        except _RefusedError as exc:
            for f, (lk, rs, hd) in zip(self.control.functions, saved):
                for attr, val in (("locked", lk), ("rest", rs), ("held", hd)):
                    if val is not None:
                        setattr(f, attr, val)
            self._reject(*exc.args)
            return
        except (ValueError, np.linalg.LinAlgError) as exc:
            self._reject(what, f"planning failed: {exc}")
            return
        self._reset_goal_state(q)
        self.goal_pose = (segments[-1].goal[0], segments[-1].goal[1])
        self.goal_psi = segments[-1].goal[2]
        self.elbow_start = {k: s for k, (s, _) in extra.items()}
        if not moving:
            self.v_plan = np.zeros(self.model.nv)
        self.q_plan = q.copy()
        self.segments = segments
        self.total_duration = sum(seg.duration for seg in segments)
        self.t_motion = self.motion_time = 0.0
        self.motion_reported = False

    def _on_pose(self, msg: PoseStamped) -> None:
        try:
            position, rotation = pose_from_message(msg, self.model.root_link)
        except ValueError as exc:
            self._reject("~/target_pose", str(exc))
            return
        reason = self._beyond_reach(position)
        if reason:
            self._reject("~/target_pose", reason)
            return
        self._start_goal(pose=(position, rotation))

    def _beyond_reach(self, position: np.ndarray) -> str:
        distance = float(np.linalg.norm(position - self.reach_point))
        if distance <= self.reach_radius:
            return ""
        return (f"the target is {distance:.3f} m from the arm's first joint at "
                f"{np.round(self.reach_point, 3).tolist()}, beyond the reach of "
                f"{self.reach_radius:.3f} m (sum of the link lengths)")

    def _on_psi(self, msg: Float64) -> None:
        psi = float(msg.data)
        if not np.isfinite(psi):
            self._reject("~/target_arm_angle", "not finite")
            return
        if abs(psi) > np.pi:
            self._reject("~/target_arm_angle", f"{psi:g} rad is outside [-pi, pi] (the arm "
                         "angle is in radians)")
            return
        self._start_goal(psi=psi)

    def _on_elbow(self, msg: PointStamped) -> None:
        """Targets of the elbow coordinates switched on by ``elbow_axes`` (root frame); they
        take effect with the next goal."""
        axes = self.params["elbow_axes"]
        frame = msg.header.frame_id
        point = np.array([msg.point.x, msg.point.y, msg.point.z])
        if not axes:
            self._reject("~/target_elbow", "no elbow coordinate is on (parameter elbow_axes)")
        elif frame not in ("", self.model.root_link):
            self._reject("~/target_elbow", f"frame '{frame}' is not the root link "
                         f"'{self.model.root_link}'")
        elif not np.all(np.isfinite(point)):
            self._reject("~/target_elbow", "non-finite point")
        else:
            self.elbow_goal = {f"elbow_{a}": float(point["xyz".index(a)]) for a in axes}
            self.get_logger().info(f"elbow targets {self.elbow_goal} (used from the next goal)")

    def _on_waypoints(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        n = len(WAYPOINT_FIELDS)
        if data.size == 0 or data.size % n:
            self._reject("~/waypoints", f"give {n} numbers per waypoint "
                         f"({', '.join(WAYPOINT_FIELDS)}), got {data.size}")
            return
        waypoints = []
        for k, row in enumerate(data.reshape(-1, n)):
            label = f"waypoint {k + 1}"
            bad = [f for f, x in zip(WAYPOINT_FIELDS, row) if not np.isfinite(x)]
            if bad:
                self._reject("~/waypoints", f"{label}: non-finite {', '.join(bad)}")
                return
            if abs(row[7]) > np.pi:
                self._reject("~/waypoints", f"{label}: psi {row[7]:g} rad is outside [-pi, pi]")
                return
            try:
                R = quaternion_matrix(*row[3:7])
            except ValueError as exc:
                self._reject("~/waypoints", f"{label}: {exc}")
                return
            reason = self._beyond_reach(row[:3])
            if reason:
                self._reject("~/waypoints", f"{label}: {reason}")
                return
            duration = row[8] if row[8] > 0 else self.params["motion_duration"]
            waypoints.append(((row[:3].copy(), R), float(row[7]), float(duration)))
        self._start_motion(waypoints, "~/waypoints")

    def _on_desired_velocities(self, msg: JointState) -> None:
        """θ̇_d by joint name (joints not named: 0), penalised by W_v (claims 11, 18, 20)."""
        names = list(self.model.joint_names)
        v = np.zeros(self.model.nv)
        if len(msg.name) != len(msg.velocity):
            self._reject("~/desired_joint_velocities", f"{len(msg.name)} names but "
                         f"{len(msg.velocity)} velocities")
            return
        for name, value in zip(msg.name, msg.velocity):
            if name not in names:
                self._reject("~/desired_joint_velocities", f"unknown joint '{name}'")
                return
            if not np.isfinite(value):
                self._reject("~/desired_joint_velocities", f"non-finite velocity of '{name}'")
                return
            v[names.index(name)] = value
        if not np.any(self.control.joint_velocity_weights):
            self.get_logger().warning("~/desired_joint_velocities has no effect while "
                                      "joint_velocity_weights (W_v) are 0",
                                      throttle_duration_sec=10.0)
        self.desired_v = v
        self.desired_stamp = self.get_clock().now().nanoseconds * 1e-9

    def _on_obstacles(self, msg: MarkerArray) -> None:
        spheres, rejected = [], []
        margin = self.params["obstacle_margin"]
        for mk in msg.markers:
            if mk.type != Marker.SPHERE or mk.action != Marker.ADD:
                continue
            scale = np.array([mk.scale.x, mk.scale.y, mk.scale.z])
            c = mk.pose.position
            center = np.array([c.x, c.y, c.z])
            reason = ("scale must be finite and > 0, got " + str(scale.tolist())
                      if not (np.all(np.isfinite(scale)) and np.all(scale > 0)) else
                      "non-finite position " + str(center.tolist())
                      if not np.all(np.isfinite(center)) else "")
            if reason:
                rejected.append(f"marker ns '{mk.ns}' id {mk.id} ignored: {reason}")
                continue
            r = 0.5 * float(scale.max())
            spheres.append(Sphere(center, r, r + margin))
        if rejected:
            self.counts["rejected_markers"] += len(rejected)
            self.get_logger().warning("~/obstacles: " + "; ".join(rejected),
                                      throttle_duration_sec=1.0)
        previous = self.marker_spheres
        self.marker_spheres = spheres
        try:
            self.control, self.limiter = self._build(self.params.values, set())
        except ValueError as exc:  # defensive: keep the previous obstacles
            self.marker_spheres = previous
            self.get_logger().warning(f"~/obstacles ignored: {exc}")

    # ---------------------------------------------------------------- output
    def _tick(self) -> None:
        if self.q_measured is None:
            return
        psi = self.arm_angle.evaluate(self.q_measured)
        self.psi_pub.publish(Float64(data=psi.psi))
        self._publish_markers()
        if not self.segments or self.q_plan is None:
            return
        dt = 1.0 / self.params["rate"]
        seg = self.segments[0]
        p_d, R_d, psi_d = seg.trajectory(self.t_motion + dt)
        targets = {"arm_angle": psi_d}
        for name, start in self.elbow_start.items():  # cycloidal, over the motion's start
            goal = self.elbow_goal.get(name, start)
            s = 1.0 if seg.elbow_done else cycloidal(self.t_motion + dt, seg.duration)[0]
            targets[name] = start + s * (goal - start)
        passive = self.model.passive_dofs
        sensed = self.params["iterate_from"] == "sensed"
        q_from = self.limiter.clamp(self.q_measured) if sensed else self.q_plan
        desired = None
        if self.desired_v is not None:
            age = self.get_clock().now().nanoseconds * 1e-9 - self.desired_stamp
            if age <= self.params["desired_velocity_timeout"]:
                desired = self.desired_v * dt
        res = None
        try:
            res = self.control.step(q_from, (p_d, R_d), targets, desired_dq=desired)
            dq = res.q_next - self.q_plan  # the change of the setpoint
            problem = "" if np.all(np.isfinite(dq)) else "non-finite joint step"
        except (ValueError, np.linalg.LinAlgError) as exc:
            problem = str(exc)
        if problem:  # hold: stop the plan (at the acceleration limit), keep its clock
            dq = np.zeros(self.model.nv)
            self.counts["non_finite_steps"] += 1
            self.get_logger().warning(f"configuration-control step failed ({problem}): "
                                      "holding the last setpoint", throttle_duration_sec=2.0)
        dq[passive] = 0.0
        step = self.limiter.step(self.q_plan, self.v_plan, dq, dt)
        if not problem:
            self.t_motion += step.scale * dt
        self.motion_time += dt
        if self.t_motion >= seg.duration and len(self.segments) > 1:
            self.segments.pop(0)  # on to the next waypoint (cycloidal: at rest there)
            self.segments[0].elbow_done = True
            self.t_motion = 0.0
        self.last_scale = step.scale
        if step.scale < 1.0 - 1e-9 or step.clipped:
            self.counts["limited_samples"] += 1
        self.at_limit = step.at_limit
        if step.at_limit:
            self.counts["samples_at_position_limit"] += 1
            self.get_logger().warning(
                f"{', '.join(step.at_limit)} held at a position limit: the goal asks for more",
                throttle_duration_sec=2.0)
        if res is not None and np.any(res.weights.get("collision", np.zeros(0)) >= WEIGHT_CAP):
            self.get_logger().warning("the arm is inside an obstacle's inner sphere",
                                      throttle_duration_sec=2.0)
        q_next, v_next, a_next = step.q, step.v, step.a
        q_next[passive] = self.limiter.clamp(self.q_measured)[passive]
        v_next[passive] = 0.0
        a_next[passive] = 0.0
        self.q_plan, self.v_plan = q_next, v_next
        msg = JointTrajectory()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.joint_names = list(self.model.joint_names)
        pt = JointTrajectoryPoint(positions=q_next.tolist(), velocities=v_next.tolist(),
                                  accelerations=a_next.tolist())
        pt.time_from_start = Duration(sec=0, nanosec=int(dt * 1e9))
        msg.points = [pt]
        self.setpoint_pub.publish(msg)
        if res is not None and len(self.segments) == 1:
            self._report_motion(res, psi_d)

    def _report_motion(self, res, psi_goal: float) -> None:
        """Once per goal, when the motion's clock has run out and the plan has stopped: how
        long it took and how close it got."""
        if self.motion_reported or self.t_motion < self.trajectory.duration:
            return
        hand, turn = 1e3 * res.position_error, np.degrees(res.orientation_error)
        psi_now = float(res.values.get("arm_angle", [psi_goal])[0])
        psi_err = abs(np.degrees((psi_goal - psi_now + np.pi) % (2 * np.pi) - np.pi))
        if np.abs(self.v_plan).max() > 1e-3 and not self.at_limit:
            return  # still settling
        self.motion_reported = True
        slowed = (" (slowed down at the limits)"
                  if self.motion_time > 1.05 * self.total_duration + 0.05 else "")
        summary = (f"hand {hand:.2f} mm, {turn:.2f}° and arm angle {psi_err:.2f}° from the "
                   f"target after {self.motion_time:.2f} s{slowed}")
        if hand < 1.0 and turn < 0.5:
            self.get_logger().info(f"goal reached: {summary}")
        else:
            why = f" ({', '.join(self.at_limit)} at a position limit)" if self.at_limit else ""
            self.get_logger().warning(f"goal not reached: {summary}{why}")

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name="elbow_redundancy_resolver: setpoints",
                                  hardware_id=self.model.name)
        if self.q_measured is None:
            status.level, status.message = DiagnosticStatus.WARN, "no /joint_states"
        elif self.at_limit:
            status.level, status.message = DiagnosticStatus.WARN, \
                f"held at a position limit: {', '.join(self.at_limit)}"
        elif not self.segments:
            status.level, status.message = DiagnosticStatus.OK, "idle"
        else:
            status.level = DiagnosticStatus.OK
            status.message = "moving" if not self.motion_reported else "holding the goal"
        values = {"time_scale": f"{self.last_scale:.3f}", "last_rejection": self.last_rejection,
                  "joints_at_position_limit": ",".join(self.at_limit),
                  "waypoints_left": str(max(len(self.segments) - 1, 0)),
                  "functions": ",".join(f.name for f in self.control.functions),
                  **{k: str(v) for k, v in self.counts.items()}}
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)

    def _publish_markers(self) -> None:
        spheres = self._spheres()
        if not spheres:
            return
        arr = MarkerArray()
        for i, s in enumerate(spheres):
            for j, (r, alpha) in enumerate(((s.inner_radius, 0.8), (s.outer_radius, 0.2))):
                mk = Marker(type=Marker.SPHERE, action=Marker.ADD, id=2 * i + j,
                            ns="spheres_of_influence")
                mk.header.frame_id = self.model.root_link
                mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = map(float,
                                                                                 s.center)
                mk.pose.orientation.w = 1.0
                mk.scale.x = mk.scale.y = mk.scale.z = 2.0 * r
                mk.color.r, mk.color.a = 1.0, alpha
                arr.markers.append(mk)
        self.marker_pub.publish(arr)


class _RefusedError(Exception):
    """A waypoint the dry run does not reach: (what, reason)."""


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``elbow_redundancy_resolver --ros-args -p urdf_path:=...``."""
    return run_node(ElbowRedundancyResolver, args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
