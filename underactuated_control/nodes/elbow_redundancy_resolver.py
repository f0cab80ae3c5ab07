"""elbow_redundancy_resolver: Seraji configuration control, a ROS 2 node (doc/architecture.md §4-5)

A goal (``~/target_pose`` and/or ``~/target_arm_angle``) starts a cycloidal motion of the hand
pose and the arm angle over ``motion_duration`` s from the current plan (or, when idle, the
measured /joint_states). ``~/waypoints`` (std_msgs/Float64MultiArray, 9 numbers per waypoint:
x, y, z, qx, qy, qz, qw of the hand in the root frame, ψ [rad], segment duration [s, <= 0:
``motion_duration``]) starts a sequence of cycloidal segments through them, each planned
within the limits before the first moves. The planning (``redundancy/resolver.py``) runs on a
worker thread, goals in the order they came; the setpoints go on meanwhile and the new motion
starts at the first tick after its plan is ready.

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

Passive joints (a failed motor) are planned by ``redundancy/resolver.py`` as
``passive_joint_motion`` says: moved by the active joints through the disturbance Jacobian
(dθ_p = J_D dθ_a, steps with the generalized Jacobians; Jain & Rodriguez's claims 11, 22), or
locked at their measured angle (a braked joint), or (``auto``, the default) the first, and
the second for a goal the first refuses.

Every setpoint is inside the URDF's position and velocity limits and the ``acceleration_limit``
(``redundancy/limits.py``): a step the limits do not allow is scaled down along its direction
and the motion's clock advances by that fraction (the motion is stretched in time, its path
kept); a joint that a goal pushes against a position limit stops there (reported in the log and
on /diagnostics). Goals the arm cannot reach (beyond the sum of its link lengths), arm angles
outside [-π, π], malformed obstacle markers and non-finite steps are refused with a warning.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from builtin_interfaces.msg import Time as TimeMessage
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PointStamped, PoseStamped
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..control.joint_space import JointStateMatcher, MissingJointsError
from ..model import RobotModel
from ..parameters import ParameterError, ParameterSpec, per_joint, table
from ..redundancy.functions import Sphere
from ..redundancy.resolver import (
    FOLLOW_TOLERANCE,
    FOLLOW_WINDOW,
    HAND_AXES,
    OVERRUN,
    OVERRUN_MARGIN,
    STALL_PACE,
    STALL_WINDOW,
    Arrival,
    ElbowPlanner,
    FollowingCheck,
    Settings,
    Waypoint,
)
from .common import STREAM_QOS, pose_from_message, process_age, quaternion_matrix, run_node
from .parameters import NodeParameters
from .robot import load_robot, robot_parameters, with_passive


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
    *robot_parameters(passive_description="joints without actuator (a failed motor; planned "
                      "as passive_joint_motion says)"),
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
    ParameterSpec("setpoint_lead", 0.0, "0: each setpoint unstamped, reached 1/rate after the "
                  "receiver's next cycle (JointTrajectoryController's streaming); > 0: stamped "
                  "at its tick on this node's clock, ticks 1/rate apart, and reached 1/rate + "
                  "setpoint_lead after it (ticks kept within setpoint_lead/2 of the clock), so "
                  "a tick or a message that runs late keeps the stream's timing (the receiver "
                  "on the same clock, e.g. use_sim_time)",
                  unit="s", low=0.0, high=1.0),
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
    ParameterSpec("passive_joint_motion", "auto", "how the plan moves a passive joint: "
                  "disturbance (as the active joints' motion drives it, dθ_p = J_D dθ_a; steps "
                  "with the generalized Jacobians J_G = J_a + J_p J_D: patent US 5,377,310 "
                  "claims 11, 22), locked (held at its measured angle: a braked joint) or auto "
                  "(disturbance, and locked for a goal whose disturbance plan is refused)",
                  choices=("auto", "disturbance", "locked")),
    ParameterSpec("desired_velocity_timeout", 0.5, "~/desired_joint_velocities older than this "
                  "are dropped", unit="s", low=0.0, high=60.0),
)

DIAGNOSTICS_PERIOD = 1.0  # s


class ElbowRedundancyResolver(Node):
    """The ROS adapter of ``redundancy.resolver.ElbowPlanner``: parameters, messages, timers,
    diagnostics. A goal's dry run runs on a worker thread (one at a time, goals in order);
    its plan is taken over at the next tick, and until then the running motion goes on."""

    def __init__(self, **kwargs) -> None:
        super().__init__("elbow_redundancy_resolver", **kwargs)
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="resolver_plan")
        self.params = NodeParameters(self, PARAMETERS)
        base = load_robot(self.params.declare(["robot_description", "urdf_path", "root_link",
                                               "tip_link"]))
        p = self.params.declare(context=base)
        self.model = with_passive(base, p["passive_joints"])
        self.tip = p["tip_link"] or self.model.body_names[-1]
        links = {k: p[k] for k in ("shoulder_link", "elbow_link", "wrist_link")}
        if not all(links.values()):
            raise ParameterError("set parameters shoulder_link, elbow_link and wrist_link")
        self.planner = ElbowPlanner(self.model, self.tip, tuple(links.values()),
                                    Settings.from_values(p),
                                    reference=p["reference_direction"])
        self.matcher = JointStateMatcher(self.model)
        self.params.on_update(self._configure, self._commit)
        self.planner.warm_up()

        self.setpoint_pub = self.create_publisher(JointTrajectory, "~/joint_setpoints", 10)
        self.psi_pub = self.create_publisher(Float64, "~/arm_angle", 10)
        self.marker_pub = self.create_publisher(MarkerArray, "~/obstacle_markers", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointState, "/joint_states", self._on_state, STREAM_QOS)
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
        self.goal_pose = None  # of the last goal: a single goal keeps the part it does not give
        self.goal_psi: float | None = None
        self.pending: list[Waypoint] | None = None  # waypoints that came before the first state
        self.requests: deque[tuple[list[Waypoint], str]] = deque()  # goals waiting to be planned
        self.planning: tuple[Future, list[Waypoint], str] | None = None  # the dry run under way
        self.desired_v: np.ndarray | None = None
        self.desired_stamp = 0.0
        self.stamp_ns: int | None = None  # the last setpoint's tick (setpoint_lead > 0)
        self.following = FollowingCheck(self.model.active_dofs)
        self.counts = {"limited_samples": 0, "samples_at_position_limit": 0,
                       "non_finite_steps": 0, "rejected_goals": 0, "rejected_markers": 0,
                       "samples_not_followed": 0}
        self.last_rejection = ""
        self.last_scale = 1.0
        self.get_logger().info(
            f"resolving the elbow of '{self.model.name}' (S {links['shoulder_link']}, E "
            f"{links['elbow_link']}, W {links['wrist_link']}; hand {self.tip}, reach "
            f"{self.planner.reach_radius:.3f} m); passive {list(self.model.passive_joints)}; "
            f"functions {self.planner.function_names}; ready (kernels compiled or loaded) "
            f"{process_age():.1f} s after the process started")

    def destroy_node(self) -> None:
        self.worker.shutdown(wait=False, cancel_futures=True)
        super().destroy_node()

    # ---------------------------------------------------------------- configuration
    def _configure(self, p: dict, changed: set[str]):
        """The planner's step for the values ``p`` (ValueError naming what is wrong)."""
        return self.planner.configure(Settings.from_values(p))

    def _commit(self, built, p: dict, changed: set[str]) -> None:
        self.planner.use(built)
        if "rate" in changed:
            self.timer.cancel()
            self.timer = self.create_timer(1.0 / p["rate"], self._tick)

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
        """A single goal (``pose`` and/or ``psi``; the other part stays as it was when its
        planning starts)."""
        what = "~/target_pose" if pose is not None else "~/target_arm_angle"
        self._start_motion([Waypoint(pose, psi, self.params["motion_duration"])], what)

    def _kept(self, waypoints: list[Waypoint]) -> list[Waypoint]:
        """The waypoints, a part not given taken from the last goal."""
        return [Waypoint(wp.pose if wp.pose is not None else self.goal_pose,
                         wp.psi if wp.psi is not None else self.goal_psi, wp.duration)
                for wp in waypoints]

    def _start_motion(self, waypoints: list[Waypoint], what: str) -> None:
        """Queue the motion through ``waypoints`` for planning (``ElbowPlanner.plan`` on the
        worker thread: from the current plan, or from the measured state when idle). A
        motion the dry runs do not reach is refused and the current one goes on."""
        if self.q_measured is None:
            self.pending = self._kept(waypoints)
            self.goal_pose, self.goal_psi = self.pending[-1].pose, self.pending[-1].psi
            self.get_logger().warning("goal received before any /joint_states: it starts "
                                      "with the first state")
            return
        self.requests.append((waypoints, what))
        self._dispatch()

    def _dispatch(self) -> None:
        """Start the dry run of the next goal if none is under way."""
        if self.planning is not None or not self.requests or self.q_measured is None:
            return
        waypoints, what = self.requests.popleft()
        waypoints = self._kept(waypoints)
        q = self.planner.start_configuration(self.q_measured)
        self.planning = (self.worker.submit(self.planner.plan, waypoints, q), waypoints, what)

    def _collect(self) -> None:
        """Take over a finished dry run: start its motion or report its refusal."""
        if self.planning is None or not self.planning[0].done():
            return
        future, waypoints, what = self.planning
        self.planning = None
        try:
            result = future.result()
        except (ValueError, np.linalg.LinAlgError) as exc:
            self._reject(what, f"planning failed: {exc}")
            self._dispatch()
            return
        single = len(waypoints) == 1
        if result.plan is None:
            label = (what if single or result.waypoint is None
                     else f"{what} (waypoint {result.waypoint + 1})")
            self._reject(label, result.reason)
        else:
            for k, requested, planned in result.plan.stretched:
                name = "motion_duration" if single else f"{what} (waypoint {k + 1}): duration"
                self.get_logger().info(f"{name} {requested:g} s stretched to {planned:.2f} s "
                                       "by the joint velocity/acceleration limits")
            if result.plan.note:
                self.get_logger().info(f"{what}: {result.plan.note}")
            self.planner.accept(result.plan, self.q_measured)
            goal = result.plan.goal
            self.goal_pose, self.goal_psi = (goal[0], goal[1]), goal[2]
        self._dispatch()

    def _on_pose(self, msg: PoseStamped) -> None:
        try:
            position, rotation = pose_from_message(msg, self.model.root_link)
        except ValueError as exc:
            self._reject("~/target_pose", str(exc))
            return
        reason = self.planner.beyond_reach(position)
        if reason:
            self._reject("~/target_pose", reason)
            return
        self._start_goal(pose=(position, rotation))

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
            self.planner.elbow_goal = {f"elbow_{a}": float(point["xyz".index(a)])
                                       for a in axes}
            self.get_logger().info(f"elbow targets {self.planner.elbow_goal} (used from the "
                                   "next goal)")

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
            reason = self.planner.beyond_reach(row[:3])
            if reason:
                self._reject("~/waypoints", f"{label}: {reason}")
                return
            duration = row[8] if row[8] > 0 else self.params["motion_duration"]
            waypoints.append(Waypoint((row[:3].copy(), R), float(row[7]), float(duration)))
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
        if not self.planner.uses_desired_velocities:
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
        try:
            built = self.planner.configure(Settings.from_values(self.params.values), spheres)
        except ValueError as exc:  # defensive: keep the previous obstacles
            self.get_logger().warning(f"~/obstacles ignored: {exc}")
            return
        self.planner.use(built)

    # ---------------------------------------------------------------- output
    def _tick(self) -> None:
        if self.q_measured is None:
            return
        self._collect()
        self.psi_pub.publish(Float64(data=self.planner.arm_angle(self.q_measured)))
        self._publish_markers()
        if self.planner.motion is None:
            self.stamp_ns = None  # the next motion's first setpoint starts a new stream
            self.following.reset()
            return
        dt = 1.0 / self.params["rate"]
        now_ns = self.get_clock().now().nanoseconds  # this tick's time, read once
        desired = None
        if self.desired_v is not None:
            age = now_ns * 1e-9 - self.desired_stamp
            if age <= self.params["desired_velocity_timeout"]:
                desired = self.desired_v * dt
        sp = self.planner.step(self.q_measured, dt, desired)
        if sp.failure:
            self.counts["non_finite_steps"] += 1
            self.get_logger().warning(f"configuration-control step failed ({sp.failure}): "
                                      "holding the last setpoint", throttle_duration_sec=2.0)
        self.last_scale = sp.scale
        if sp.limited:
            self.counts["limited_samples"] += 1
        if sp.at_limit:
            self.counts["samples_at_position_limit"] += 1
            self.get_logger().warning(
                f"{', '.join(sp.at_limit)} held at a position limit: the goal asks for more",
                throttle_duration_sec=2.0)
        if sp.inside_obstacle:
            self.get_logger().warning("the arm is inside an obstacle's inner sphere",
                                      throttle_duration_sec=2.0)
        msg = JointTrajectory()
        msg.joint_names = list(self.model.joint_names)
        pt = JointTrajectoryPoint(positions=sp.q.tolist(), velocities=sp.v.tolist(),
                                  accelerations=sp.a.tolist())
        lead = self.params["setpoint_lead"]
        if lead > 0.0:  # stamped, reached dt + lead after its tick
            msg.header.stamp = self._setpoint_stamp(now_ns, dt, lead)
        # unstamped: dt after the receiver's next cycle
        pt.time_from_start = Duration(nanoseconds=round((dt + lead) * 1e9)).to_msg()
        msg.points = [pt]
        self.setpoint_pub.publish(msg)
        self._check_following(now_ns, sp.q, dt + lead)
        if sp.arrival is not None:
            self._report_motion(sp.arrival)

    def _check_following(self, now_ns: int, q_setpoint: np.ndarray, delay: float) -> None:
        """Warn while the measured arm is far from every setpoint of the last FOLLOW_WINDOW s
        (plus the stream's ``delay``): the setpoints are not reaching a controller on time."""
        gap, j = self.following.update(now_ns * 1e-9, q_setpoint, self.q_measured,
                                       FOLLOW_WINDOW + delay)
        if gap > FOLLOW_TOLERANCE:
            self.counts["samples_not_followed"] += 1
            self.get_logger().warning(
                f"the arm is not following the setpoints: '{self.model.dof_names[j]}' is "
                f"{gap:.3f} rad from every setpoint of the last {FOLLOW_WINDOW + delay:.2f} s "
                f"(is a controller following {self.setpoint_pub.topic_name} on time?)",
                throttle_duration_sec=2.0)

    def _setpoint_stamp(self, now: int, dt: float, lead: float) -> TimeMessage:
        """This setpoint's tick: the last one's plus dt, as the plan's clock advances, kept
        within lead/2 of this node's clock (``now``, ns: a tick that ran late or early moves no
        point closer than dt + lead/2 to now, so the receiver is never asked for a speed
        spike)."""
        tick = now if self.stamp_ns is None else self.stamp_ns + round(dt * 1e9)
        half = round(lead * 5e8)
        self.stamp_ns = min(max(tick, now - half), now + half)
        return Time(nanoseconds=self.stamp_ns).to_msg()

    def _report_motion(self, arrival: Arrival) -> None:
        """Once per goal: how long it took and how close it got."""
        hand, turn = 1e3 * arrival.position_error, np.degrees(arrival.orientation_error)
        psi_err = np.degrees(arrival.arm_angle_error)
        slowed = " (slowed down at the limits)" if arrival.slowed else ""
        summary = (f"hand {hand:.2f} mm, {turn:.2f}° and arm angle {psi_err:.2f}° from the "
                   f"target after {arrival.elapsed:.2f} s{slowed}")
        if not arrival.followed:
            self.get_logger().warning(
                f"the measured hand is {1e3 * arrival.measured_position_error:.1f} mm from the "
                f"goal, the setpoints' {hand:.2f} mm: the arm did not follow them (is a "
                f"controller following {self.setpoint_pub.topic_name}?)")
        if arrival.reached:
            self.get_logger().info(f"goal reached: {summary}")
        else:
            why = (f" ({', '.join(arrival.at_limit)} at a position limit)" if arrival.at_limit
                   else "")
            if arrival.overran:
                why += (f" (not settled {OVERRUN:g}x its planned {arrival.planned:.2f} s + "
                        f"{OVERRUN_MARGIN:g} s on: stopped, the last setpoint held)")
            if arrival.stalled:
                why += (f" (stalled: the limits cut its steps below {100 * STALL_PACE:g} % of "
                        f"their pace for {STALL_WINDOW:g} s, near-singular steps: stopped, "
                        "the last setpoint held)")
            self.get_logger().warning(f"goal not reached: {summary}{why}")

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name="elbow_redundancy_resolver: setpoints",
                                  hardware_id=self.model.name)
        motion, at_limit = self.planner.motion, self.planner.at_limit
        if self.q_measured is None:
            status.level, status.message = DiagnosticStatus.WARN, "no /joint_states"
        elif at_limit:
            status.level, status.message = DiagnosticStatus.WARN, \
                f"held at a position limit: {', '.join(at_limit)}"
        elif motion is None:
            status.level, status.message = DiagnosticStatus.OK, "idle"
        elif motion.halted:
            status.level = DiagnosticStatus.WARN
            status.message = "stopped: " + ("stalled" if motion.stalled else "overran")
        else:
            status.level = DiagnosticStatus.OK
            status.message = "moving" if not motion.reported else "holding the goal"
        segments = len(motion.segments) if motion is not None else 0
        coupled = self.planner.config.running(motion).coupled  # J_D: with passive joints
        passive = "" if not self.model.n_passive else "disturbance" if coupled else "locked"
        values = {"time_scale": f"{self.last_scale:.3f}", "last_rejection": self.last_rejection,
                  "joints_at_position_limit": ",".join(at_limit),
                  "waypoints_left": str(max(segments - 1, 0)),
                  "functions": ",".join(self.planner.function_names),
                  "passive_joints_planned": passive,
                  **{k: str(v) for k, v in self.counts.items()}}
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)

    def _publish_markers(self) -> None:
        spheres = self.planner.spheres
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


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``elbow_redundancy_resolver --ros-args -p urdf_path:=...``."""
    return run_node(ElbowRedundancyResolver, args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
