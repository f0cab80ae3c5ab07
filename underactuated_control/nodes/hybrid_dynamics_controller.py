"""hybrid_dynamics_controller: /joint_states in, effort commands out (doc/architecture.md §4).

Event-driven: every /joint_states message runs one control cycle and publishes one command.
The command then follows the freshest state with no added delay, and the loop runs at the rate
of the state source (ros2_control's joint_state_broadcaster runs at the controller-manager
rate). A watchdog timer only checks for a stale stream.

The node is an adapter: messages -> arrays -> the control law of ``mode`` (``control/registry``)
-> effort command. Parameters come from one table (``PARAMETERS`` + every law's own); an update
is validated and everything it changes is built aside, then committed at once.

Reference rule (as ros2_controllers' JointTrajectoryController on activation): when a law
starts (start-up, every mode switch) and after every safety stop, its reference is latched at
the measured state; a joint trajectory is kept across parameter updates and, received while
not in joint mode without a stamp, starts when joint mode does.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..control.command import CommandShaper, shaper_parameters
from ..control.joint_space import (
    DuplicateJointsError,
    EffortMapper,
    JointReference,
    JointStateMatcher,
    MissingJointsError,
)
from ..control.law import ControlLaw
from ..control.registry import CONTROL_LAWS, law_parameters
from ..control.task_space import TaskReference
from ..control.trajectory_sampling import (
    SplineTrajectory,
    TrajectoryError,
    trajectory_from_message,
    trajectory_rules,
)
from ..control.wrench_sensor import WrenchSensor
from ..floating_base import MomentumBaseEstimator, base_from_odometry, floating_root
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..observers import Collision, CollisionDetector, MomentumObserver
from ..operational_space import belted_ellipsoid
from ..parameters import ParameterError, ParameterSpec, table
from ..payload_identification import (
    HoldingRecorder,
    identify_payload,
    move_duration,
    payload_parameters,
    propose_holding_poses,
)
from ..warmup import KernelWorker, warm_law
from .common import (
    POSE_REFERENCE_DEPTH,
    RELIABILITY,
    STREAM_QOS,
    matrix_message,
    pose_from_message,
    process_age,
    run_node,
)
from .parameters import NodeParameters
from .robot import check_joint_names, load_robot, robot_parameters, with_passive
from .trajectory_action import PARAMETERS as TRAJECTORY_ACTION_PARAMETERS
from .trajectory_action import TrajectoryActionServer

MODES = tuple(CONTROL_LAWS)
_FRAME_ROWS = "rows:lin_x,lin_y,lin_z,ang_x,ang_y,ang_z"
ODOMETRY_RESUBSCRIBE = 5.0  # s (wall) without base odometry while states arrive: subscribe again


def _check_frame(frame: str, model: RobotModel | None) -> None:
    if model is not None and frame:
        model.frame(frame)


def _check_payload_com(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 3:
        raise ValueError(f"give 3 numbers x, y, z (m, the frame's axes), got {len(value)}")


def _check_payload_inertia(value: list[float], model: RobotModel | None) -> None:
    if len(value) not in (6, 9):
        raise ValueError("give 6 numbers ixx, ixy, ixz, iyy, iyz, izz (or the 9 of the 3x3 "
                         f"matrix), kg m^2 about the centre of mass, got {len(value)}")


def payload_inertia_matrix(value: list[float]) -> np.ndarray:
    """The 3x3 inertia of ``payload_inertia`` (6 numbers ixx ixy ixz iyy iyz izz, or 9)."""
    if len(value) == 9:
        return np.array(value, dtype=float).reshape(3, 3)
    xx, xy, xz, yy, yz, zz = value
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]], dtype=float)


def with_payload_parameters(model: RobotModel, p: dict[str, Any]) -> RobotModel:
    """``model`` holding the payload of the ``payload_*`` parameters (``payload_frame`` empty:
    none); one-line ``ValueError`` naming the parameter at fault, checked as a whole."""
    if not p["payload_frame"]:
        return model
    try:
        return model.with_payload(p["payload_frame"], p["payload_mass"], p["payload_com"],
                                  payload_inertia_matrix(p["payload_inertia"]))
    except ValueError as exc:
        text = str(exc)
        field = next((f for f in ("mass", "com", "inertia") if text.startswith(f"payload {f}")),
                     "frame")
        raise ValueError(f"parameter payload_{field}: {text}") from None


def _check_collision_threshold(value: list[float], model: RobotModel | None) -> None:
    if model is not None and len(value) not in (1, model.nv):
        raise ValueError(f"give one value for every joint or one per joint "
                         f"{list(model.dof_names)}, got {len(value)}")


WRENCH_SENSOR_PARAMETERS = (
    ParameterSpec("wrench_filter_cutoff", 0.0, "first-order low-pass filter of the measured "
                  "wrench (in the sensor's frame, before it is carried to the task frame; 0: "
                  "off)", unit="Hz", low=0.0, high=1e4),
    ParameterSpec("wrench_zero_on_start", False, "take the F/T sensor's bias from the first "
                  "wrench after start-up and, at every switch to mode operational_space, from "
                  "the last wrench before it (the robot free of contact then); "
                  "~/zero_wrench_bias does it on demand"),
    ParameterSpec("wrench_payload_compensation", True, "remove the weight of the payload_* "
                  "tool from readings of a sensor it hangs beyond (payload_frame's link at or "
                  "below the sensor frame's)"),
)


def _check_pose(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 7 or abs(float(np.linalg.norm(value[3:])) - 1.0) > 1e-3:
        raise ValueError("give x, y, z, qx, qy, qz, qw with a unit quaternion")


def _check_momentum(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 6:
        raise ValueError("give 6 numbers: linear (N·s) then angular (N·m·s) momentum")


PARAMETERS = table(
    *robot_parameters(floating=True, passive_tunable=True, passive_description=(
        "joints without actuator, added to those the URDF <ros2_control> tag leaves without a "
        "command interface; changing it re-plans without restart")),
    ParameterSpec("command_topic", "/effort_controller/commands", "std_msgs/Float64MultiArray "
                  "effort command topic of a JointGroupEffortController / "
                  "ForwardCommandController", read_only=True),
    ParameterSpec("command_joints", [""], "joint order of the effort command (empty: the "
                  "active joints in model order)", read_only=True,
                  validator=check_joint_names("command_joints")),
    ParameterSpec("reference_reliability", "reliable", "QoS reliability of ~/joint_reference "
                  "and ~/pose_reference: reliable (as JointTrajectoryController's topic: a "
                  "message lost on the wire is re-sent, and the ones after it wait for it, up "
                  "to the DDS writer's heartbeat period, 3 s by default in Fast DDS) or "
                  "best_effort (for a stream such as the resolver's 100 Hz setpoints: a lost "
                  "message is skipped and the next one arrives on time; reliable publishers "
                  "are heard too; a single trajectory that must arrive: the action "
                  "~/follow_joint_trajectory)", choices=tuple(RELIABILITY), read_only=True),
    ParameterSpec("mode", "hold", "control law", choices=MODES),
    ParameterSpec("task_frame", "", "link tracked in task mode and whose J_G is published "
                  "(empty: tip_link or the last body)", validator=_check_frame),
    ParameterSpec("payload_frame", "", "frame (link or fixed frame) rigidly holding a payload "
                  "the control law's model includes (empty: no payload); set it with the other "
                  "payload_* in one ~/set_parameters_atomically call", validator=_check_frame),
    ParameterSpec("payload_mass", 0.0, "mass of the payload held at payload_frame", unit="kg",
                  low=0.0, high=1e4),
    ParameterSpec("payload_com", [0.0, 0.0, 0.0], "payload centre of mass in payload_frame's "
                  "axes, x y z", unit="m", validator=_check_payload_com),
    ParameterSpec("payload_inertia", [0.0] * 6, "payload inertia about its centre of mass in "
                  "payload_frame's axes: ixx ixy ixz iyy iyz izz (or the 9 numbers of the 3x3 "
                  "matrix)", unit="kg·m²", validator=_check_payload_inertia),
    *law_parameters(),
    *shaper_parameters(),
    *TRAJECTORY_ACTION_PARAMETERS,
    ParameterSpec("state_timeout", 0.1, "a /joint_states (or base odometry) older than this "
                  "gives no command; the silence counted from the end of the cycle that "
                  "answered the last state (a long cycle, such as a failure plan's first "
                  "solve, is no silence of the states)", unit="s", low=1e-3, high=60.0),
    ParameterSpec("base_state", "odometry", "floating-base models: where the base pose and "
                  "twist come from: odometry (nav_msgs/Odometry on base_odometry_topic) or "
                  "momentum (no base sensor: twist from the joint rates and base_momentum, pose "
                  "integrated from base_initial_pose)", choices=("odometry", "momentum"),
                  read_only=True),
    ParameterSpec("base_odometry_topic", "/odom", "nav_msgs/Odometry of the floating joint's "
                  "child link (pose in the world frame, twist in the child frame)",
                  read_only=True),
    ParameterSpec("base_initial_pose", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], "base_state "
                  "momentum: the base pose at start-up, x y z qx qy qz qw", unit="m, 1",
                  read_only=True, validator=_check_pose),
    ParameterSpec("base_momentum", [0.0] * 6, "base_state momentum: the system's total "
                  "momentum, linear then angular about the world origin (zero: released at "
                  "rest)", unit="N·s, N·m·s", read_only=True, validator=_check_momentum),
    ParameterSpec("future_stamp_tolerance", 0.05, "a /joint_states stamped further ahead of "
                  "this node's clock is refused alone (and never becomes the ordering "
                  "reference)", unit="s", low=0.0, high=60.0),
    ParameterSpec("reference_max_lead", 1.0, "a ~/pose_reference stamped ahead of the latest "
                  "state's stamp takes effect when the states reach its stamp (as a "
                  "trajectory's points do; unstamped: at once), up to this far ahead; further "
                  "ahead it is refused", unit="s", low=0.0, high=60.0),
    ParameterSpec("effort_limit_scale", 1.0, "commands are clamped to the URDF effort limits "
                  "times this", unit="1", low=1e-3, high=10.0),
    ParameterSpec("publish_jacobians", True, "publish J_G, J_D and the passive accelerations "
                  "every cycle"),
    ParameterSpec("publish_ellipsoids", False, "publish the task frame's belted and ordinary "
                  "inertia ellipsoids (visualization_msgs/MarkerArray on ~/ellipsoids, at most "
                  "10 Hz; modes that compute the task inertia: operational_space)"),
    ParameterSpec("ellipsoid_scale", 0.05, "size of the drawn ellipsoids per unit of "
                  "effective mass", unit="m/kg", low=1e-4, high=10.0),
    ParameterSpec("wrench_topic", "~/wrench", "geometry_msgs/WrenchStamped for force-"
                  "controlled directions: the wrench the robot applies through its end "
                  "effector; frame_id empty or the root link: at the task frame in root axes; "
                  "any other frame (an F/T sensor's): about its origin in its axes, carried to "
                  "the task frame", read_only=True),
    *WRENCH_SENSOR_PARAMETERS,
    ParameterSpec("wrench_limit_scale", 5.0, "a measured wrench is refused as implausible when "
                  "the torque it gives some active joint through the task frame's Jacobian "
                  "(|J^T w|) exceeds that joint's URDF effort limit times this", unit="1",
                  low=0.1, high=1e3),
    ParameterSpec("wrench_force_limit", 0.0, "a measured wrench with a larger force is refused "
                  "(0: no absolute limit)", unit="N", low=0.0, high=1e9),
    ParameterSpec("wrench_torque_limit", 0.0, "a measured wrench with a larger moment is "
                  "refused (0: no absolute limit)", unit="N·m", low=0.0, high=1e9),
    ParameterSpec("observer_gain", 50.0, "bandwidth K_O of the generalised-momentum observer "
                  "publishing ~/estimated_wrench at the task frame (fixed-base models; 0: off, "
                  "no publication)", unit="1/s", low=0.0, high=1e4),
    ParameterSpec("collision_threshold", [0.0], "collision detection: a joint whose estimated "
                  "external torque (momentum observer, observer_gain > 0) exceeds this in "
                  "magnitude is in collision; one value for all joints or one per joint (model "
                  "order); 0: that joint unmonitored, all 0: off", unit="N·m|N", low=0.0,
                  high=1e6, per_joint=True, validator=_check_collision_threshold),
    ParameterSpec("collision_min_duration", 0.0, "collision detection: a joint must stay above "
                  "its collision_threshold this long (0: the first state above it)", unit="s",
                  low=0.0, high=1.0),
    ParameterSpec("collision_reaction", "stop", "what a detected collision does until a mode "
                  "switch or a collision_* update clears it (references and goals are refused "
                  "meanwhile): stop (hold the "
                  "configuration of the detection with zero velocity, as franka's reflex), "
                  "comply (hold, with no stiffness on the joints in collision, or along the "
                  "estimated contact force in pose modes) or none (detect and report only)",
                  choices=("stop", "comply", "none")),
    ParameterSpec("diagnostics_period", 1.0, "period of /diagnostics", unit="s", low=0.05,
                  high=60.0, read_only=True),
)


@dataclass
class Plan:
    """Everything built from the parameters, swapped in one assignment."""

    model: RobotModel
    law: ControlLaw
    shaper: CommandShaper
    mapper: EffortMapper
    matcher: JointStateMatcher
    active_label: str
    passive_label: str
    observer: MomentumObserver | None  # ~/estimated_wrench (None: observer_gain 0)
    collision: CollisionDetector | None  # on the observer's r (None: collision_threshold 0)
    task_frame: str
    command_slots: np.ndarray  # command k carries active DOF active_slots[k]
    active_slots: np.ndarray


def _warm_observer(observer: MomentumObserver, model: RobotModel) -> None:
    """Compile (or load) the observer's kernels with one throwaway step."""
    q0 = model.neutral_configuration()
    observer.update(q0, np.zeros(model.nv), np.zeros(model.n_active), 0.0)
    observer.wrench(q0, axes="frame")


class HybridDynamicsController(Node):
    """See the module docstring; parameters are listed in the README."""

    def __init__(self, **kwargs) -> None:
        super().__init__("hybrid_dynamics_controller", **kwargs)
        # fresh kernel cache: run_steps compiles in a worker process from here on (warmup.py)
        worker = KernelWorker.start()
        self._warm_observer_later = worker is not None  # it runs run_steps: after warm_law
        try:
            self.params = NodeParameters(self, PARAMETERS)
            robot = self.params.declare(["robot_description", "urdf_path", "root_link", "tip_link"])
            robot.update(self.params.declare(["floating_base", "gravity"]))
            self.base_model = load_robot(robot)
            try:
                self.floating = floating_root(self.base_model) is not None
            except ValueError as exc:
                raise ParameterError(f"parameter robot_description/urdf_path: {exc}") from None
            p = self.params.declare(context=self.base_model)
            self.command_topic = p["command_topic"]
            self.command_joints = p["command_joints"] or list(
                with_passive(self.base_model, p["passive_joints"]).active_joints)
            self.default_frame = p["tip_link"] or self.base_model.body_names[-1]
            self.plan = self._build(p, set(PARAMETERS))
        except BaseException:  # a bad parameter: no compile left running behind the error
            if worker is not None:
                worker.cancel()
            raise
        # the law's kernels compiled (or loaded) before any subscription exists: no state
        # queues up behind a first-cycle compilation
        warm_s = warm_law(CONTROL_LAWS[p["mode"]], self.plan.model, p,
                          p["task_frame"] or self.default_frame, worker=worker,
                          report=self.get_logger().warning)
        if self._warm_observer_later and self.plan.observer is not None:
            t0 = time.perf_counter()
            _warm_observer(self.plan.observer, self.plan.model)
            warm_s += time.perf_counter() - t0
        self._warm_observer_later = False
        self.reference: Any = None  # the law's reference; None: latch at the next state
        self.trajectory: SplineTrajectory | None = None
        self.params.on_update(self._build, self._commit)

        # -- floating base ---------------------------------------------------------------------
        self.base_state = p["base_state"] if self.floating else ""
        self.base_odometry: tuple | None = None  # (q7, v6, stamp ns, frame_id)
        self.estimator: MomentumBaseEstimator | None = None
        if self.base_state == "momentum":
            self.estimator = MomentumBaseEstimator(self.base_model, p["base_initial_pose"],
                                                   p["base_momentum"])
        if self.floating and np.any(self.base_model.gravity != 0.0):
            self.get_logger().warning(
                f"floating base under gravity {self.base_model.gravity.tolist()} m/s^2: the "
                "whole robot falls freely (set gravity:=[0.0, 0.0, 0.0] for a robot in orbit)")

        # -- interfaces ----------------------------------------------------------------------
        self.command_pub = self.create_publisher(Float64MultiArray, self.command_topic, 10)
        self.passive_acc_pub = self.create_publisher(Float64MultiArray,
                                                     "~/passive_accelerations", 10)
        self.jg_pub = self.create_publisher(Float64MultiArray, "~/generalized_jacobian", 10)
        self.jd_pub = self.create_publisher(Float64MultiArray, "~/disturbance_jacobian", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointState, "/joint_states", self._on_joint_states, STREAM_QOS)
        reliability = RELIABILITY[p["reference_reliability"]]
        self.create_subscription(JointTrajectory, "~/joint_reference", self._on_joint_reference,
                                 QoSProfile(depth=10, reliability=reliability))
        self.create_subscription(PoseStamped, "~/pose_reference", self._on_pose_reference,
                                 QoSProfile(depth=POSE_REFERENCE_DEPTH, reliability=reliability))
        self.measured_wrench: np.ndarray | None = None
        self._init_wrench_sensor(p)
        self._wrench_ws = JacobianWorkspace(self.base_model)  # the plausibility check's J
        self._last_q = self.base_model.neutral_configuration()  # of the last good state
        self.create_subscription(WrenchStamped, p["wrench_topic"], self._on_wrench, STREAM_QOS)
        self.estimated_wrench_pub = self.create_publisher(WrenchStamped, "~/estimated_wrench",
                                                          10)
        self._applied = np.zeros(self.plan.model.n_active)  # efforts held since the last state
        self._observer_time: float | None = None  # the observer's last state time
        self._observing: MomentumObserver | None = None
        self._init_collision()
        self._odometry_subscription = None
        if self.base_state == "odometry":
            self._subscribe_odometry()
        self.base_estimate_pub = self.create_publisher(Odometry, "~/base_estimate", 10) \
            if self.estimator is not None else None
        self.ellipsoid_pub = self.create_publisher(MarkerArray, "~/ellipsoids", 10)
        self._last_ellipsoids = 0.0
        self.create_timer(p["diagnostics_period"], self._publish_diagnostics)
        self.create_timer(min(0.05, p["state_timeout"] / 2), self._watchdog)

        # -- state of the loop -----------------------------------------------------------------
        self._last_receipt: float | None = None  # monotonic time of the last good state
        self._state_time = 0.0  # s: the last good state's stamp (the law's time), else receipt
        self._last_stamp_ns = 0
        # ~/pose_reference messages stamped ahead of the states: (stamp s, goal), in order
        self._pending_references: deque[tuple[float, TaskReference]] = deque()
        self._silenced = False  # zero effort sent; silent until fresh valid data
        self._missing: list[str] = []
        self._status = ""
        self._logged_reaction = None  # the failure reaction last logged (task mode)
        self.stats = {"cycles": 0, "stale": 0, "nonfinite": 0, "missing": 0,
                      "missing_velocities": 0, "length_mismatch": 0, "duplicate_names": 0,
                      "future_stamps": 0, "out_of_order": 0, "saturated": 0,
                      "rejected_references": 0, "base_missing": 0, "base_stale": 0,
                      "base_rejected": 0, "odometry_resubscribed": 0, "wrench_rejected": 0,
                      "safety_overrides": 0, "collisions": 0}
        self._command_publishers = 1
        self._compute_times: list[float] = []
        self._cycle_stamps: list[float] = []
        self._saturated_names: list[str] = []
        self._safety_names: list[str] = []
        self._zero = np.zeros(len(self.command_joints))
        # ~/follow_joint_trajectory and ~/controller_state (None without control_msgs)
        self.trajectory_action = TrajectoryActionServer.attach(self)
        self._init_identification()
        model = self.plan.model
        base = (f"floating base '{model.joint_names[0]}' from {self.base_state}" if
                self.floating else "fixed base")
        self.get_logger().info(
            f"controlling '{model.name}' ({base}, gravity {model.gravity.tolist()} m/s^2): "
            f"active {list(model.active_joints)}, passive {list(model.passive_joints)}; command "
            f"{self.command_joints} on '{self.command_topic}'; mode '{p['mode']}'")
        self.get_logger().info(
            f"ready: kernels compiled or loaded in {warm_s:.1f} s, "
            f"{process_age():.1f} s after the process started")

    # ================================================================== configuration
    def _build(self, p: dict[str, Any], changed: set[str]) -> Plan:
        """Model, law, mapper and matcher for the parameter values ``p`` (nothing of the node
        changes here; ``ValueError`` with the reason if they cannot be built)."""
        model = with_payload_parameters(with_passive(self.base_model, p["passive_joints"]), p)
        if model.n_active == 0:
            raise ValueError("every joint would be passive: nothing to command")
        workspace = JacobianWorkspace(model)  # shared by the law and the J_G/J_D publication
        law = CONTROL_LAWS[p["mode"]](model, p, p["task_frame"] or self.default_frame,
                                      workspace)
        shaper = CommandShaper(model, p, workspace)
        mapper = EffortMapper(model, self.command_joints, p["effort_limit_scale"])
        frame = p["task_frame"] or self.default_frame
        # the observer on the law's workspace (its all-active dynamics is the law's own when no
        # joint is passive): it runs at the end of the cycle, when the law's buffers are used
        observer = MomentumObserver(model, p["observer_gain"], frame=frame,
                                    shared=workspace.shared, jacobians=workspace) \
            if p["observer_gain"] > 0.0 and not self.floating else None
        if observer is not None and not self._warm_observer_later:
            _warm_observer(observer, model)  # its kernels compiled (or loaded) here, not at a cycle
        collision = self._build_collision(model, p, observer)
        active = {self.command_joints.index(n): k for k, n in enumerate(model.active_joints)
                  if n in self.command_joints}
        return Plan(model, law, shaper, mapper,
                    JointStateMatcher(model, floating_from_elsewhere=True),
                    "cols:" + ",".join(model.active_joints),
                    "rows:" + ",".join(model.passive_joints), observer, collision, frame,
                    np.array(list(active), dtype=np.int64),
                    np.array(list(active.values()), dtype=np.int64))

    def _commit(self, plan: Plan, p: dict[str, Any], changed: set[str]) -> None:
        old = self.plan
        self.plan = plan
        self._carry_collision(old, plan, changed)
        if hasattr(plan.law, "measured_wrench"):
            plan.law.measured_wrench = self.measured_wrench
        self._update_wrench_sensor(plan, p, changed)
        if "mode" in changed and p["mode"] != old.law.mode:
            self.reference = None  # a new law starts from the measured state
            self._pending_references.clear()
        elif self.reference is not None:
            self.reference = plan.law.carry_reference(self.reference, old.model, old.law)
        self.get_logger().info(f"parameters updated: {sorted(changed)}")

    # ================================================================== references
    def _on_joint_reference(self, msg: JointTrajectory) -> None:
        """The rules and sampler of ~/follow_joint_trajectory (``trajectory_rules``: a last
        point may move, passive joints are left out); unstamped, it starts at the first
        joint-mode cycle (received in another mode: kept until mode:=joint)."""
        try:
            trajectory = trajectory_from_message(
                msg, self.get_clock().now().nanoseconds,
                **trajectory_rules(self.plan.model, self.params, topic=True))
        except TrajectoryError as exc:
            self.stats["rejected_references"] += 1
            self.get_logger().warning(f"~/joint_reference rejected: {exc}")
            return
        if self._collision_refuses("~/joint_reference"):
            return
        self.trajectory = trajectory
        if self.plan.law.reference_kind != "joint":
            self.get_logger().info(f"joint reference received in {self.plan.law.mode} mode: "
                                   "kept; it starts with mode:=joint")

    def _world_frame(self) -> str:
        """Frame of task references: the root link, or for a floating base the odometry's
        frame (its name once odometry has arrived)."""
        if not self.floating:
            return self.plan.model.root_link
        return self.base_odometry[3] if self.base_odometry is not None else ""

    def _on_pose_reference(self, msg: PoseStamped) -> None:
        try:
            position, R = pose_from_message(msg, self._world_frame())
            if self.plan.law.reference_kind != "pose":
                raise ValueError(f"mode is '{self.plan.law.mode}' (set mode:=task first)")
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            # stamped, a stream of goals is followed as a path (control/limits.py)
            goal = TaskReference(position=position, rotation=R, stamp=stamp)
            self.plan.law.check_reference(goal)
        except ValueError as exc:
            self.stats["rejected_references"] += 1
            self.get_logger().warning(f"~/pose_reference rejected: {exc}")
            return
        if self._collision_refuses("~/pose_reference"):
            return
        pending = self._pending_references
        while pending and pending[-1][0] >= stamp:  # a newer message supersedes them
            pending.pop()
        if stamp and self._last_stamp_ns and stamp > self._state_time:
            lead = stamp - self._state_time
            if lead > self.params["reference_max_lead"]:
                self.stats["rejected_references"] += 1
                self.get_logger().warning(
                    f"~/pose_reference rejected: header.stamp {lead:.3f} s ahead of the latest "
                    f"/joint_states (> reference_max_lead {self.params['reference_max_lead']} "
                    "s)", throttle_duration_sec=2.0)
                return
            pending.append((stamp, goal))  # its time has not come: applied in the cycle it does
            return
        pending.clear()
        self.reference = goal

    def _subscribe_odometry(self) -> None:
        """(Again) subscribe to the base odometry: a subscription that never received any while
        /joint_states arrive is replaced every ODOMETRY_RESUBSCRIBE s (a DDS match that did not
        complete on a loaded machine was seen to stay missing for minutes)."""
        if self._odometry_subscription is not None:
            self.destroy_subscription(self._odometry_subscription)
        self._odometry_subscription = self.create_subscription(
            Odometry, self.params["base_odometry_topic"], self._on_odometry, STREAM_QOS)
        self._odometry_subscribed = time.monotonic()

    def _on_odometry(self, msg: Odometry) -> None:
        child = self.base_model.body_names[0]
        try:
            if msg.child_frame_id not in ("", child):
                raise ValueError(f"child_frame_id '{msg.child_frame_id}' is not the floating "
                                 f"joint's child link '{child}'")
            frame = msg.header.frame_id
            if frame and frame == child:
                raise ValueError(f"header.frame_id '{frame}' is the floating joint's child "
                                 "link itself (give the pose in the world frame)")
            if self.base_odometry is not None and frame != self.base_odometry[3]:
                raise ValueError(f"header.frame_id '{frame}' differs from the odometry's world "
                                 f"frame '{self.base_odometry[3]}'")
            p, o = msg.pose.pose.position, msg.pose.pose.orientation
            lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
            q, v = base_from_odometry((p.x, p.y, p.z), (o.x, o.y, o.z, o.w),
                                      (lin.x, lin.y, lin.z), (ang.x, ang.y, ang.z))
        except ValueError as exc:
            self.stats["base_rejected"] += 1
            self.get_logger().warning(f"{self.params['base_odometry_topic']} rejected: {exc}",
                                      throttle_duration_sec=2.0)
            return
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.base_odometry = (q, v, stamp or self.get_clock().now().nanoseconds,
                              msg.header.frame_id)

    def _fill_base(self, q: np.ndarray, v: np.ndarray, stamp_ns: int) -> bool:
        """The floating joint's q[0:7], v[0:6] from odometry or the momentum estimate; False
        (zero effort sent once) when no fresh base state exists."""
        if self.estimator is not None:
            self.estimator.update(q, v, (stamp_ns or self.get_clock().now().nanoseconds) * 1e-9)
            self._publish_base_estimate(q, v, stamp_ns)
            return True
        topic = self.params["base_odometry_topic"]
        if self.base_odometry is None:
            self._refuse("base_missing", f"no base odometry on {topic} yet")
            if time.monotonic() - self._odometry_subscribed > ODOMETRY_RESUBSCRIBE:
                self.get_logger().warning(f"no base odometry on {topic} in "
                                          f"{ODOMETRY_RESUBSCRIBE:g} s while /joint_states "
                                          "arrive: subscribing to it again")
                self.stats["odometry_resubscribed"] += 1
                self._subscribe_odometry()
            return False
        q_base, v_base, odom_stamp, _ = self.base_odometry
        age = (self.get_clock().now().nanoseconds - odom_stamp) * 1e-9
        if age > self.params["state_timeout"]:
            self._refuse("base_stale", f"stale base odometry on {topic} ({age:.3f} s old > "
                         f"state_timeout {self.params['state_timeout']} s)")
            return False
        q[:7], v[:6] = q_base, v_base
        return True

    def _publish_base_estimate(self, q: np.ndarray, v: np.ndarray, stamp_ns: int) -> None:
        """The momentum estimate as nav_msgs/Odometry on ~/base_estimate (same convention as
        the odometry input: pose in the start frame, twist in the base's own axes)."""
        msg = Odometry()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(
            stamp_ns or self.get_clock().now().nanoseconds, 1_000_000_000)
        msg.child_frame_id = self.base_model.body_names[0]
        pose, twist = msg.pose.pose, msg.twist.twist
        pose.position.x, pose.position.y, pose.position.z = map(float, q[:3])
        o = pose.orientation
        o.x, o.y, o.z, o.w = map(float, q[3:7])
        twist.linear.x, twist.linear.y, twist.linear.z = map(float, v[:3])
        twist.angular.x, twist.angular.y, twist.angular.z = map(float, v[3:6])
        self.base_estimate_pub.publish(msg)

    # ================================================================== F/T sensor
    def _wrench_sensor(self, plan: Plan, p: dict[str, Any]) -> WrenchSensor:
        payload = (p["payload_frame"], p["payload_mass"], np.array(p["payload_com"])) \
            if p["payload_frame"] and p["wrench_payload_compensation"] else None
        return WrenchSensor(plan.model, plan.task_frame, p["wrench_filter_cutoff"], payload)

    def _init_wrench_sensor(self, p: dict[str, Any]) -> None:
        """The F/T sensor's processing (control/wrench_sensor.py) and ~/zero_wrench_bias
        (diagnostic_msgs/SelfTest: no std_srvs/Trigger among the interfaces; passed and the
        bias in its status values)."""
        from diagnostic_msgs.srv import SelfTest

        self._ft = self._wrench_sensor(self.plan, p)
        self._ft_last: tuple[np.ndarray, str, np.ndarray] | None = None  # raw, frame, q
        if p["wrench_zero_on_start"]:
            self._ft.request_zero()
        self.create_service(SelfTest, "~/zero_wrench_bias", self._on_zero_wrench_bias)

    def _update_wrench_sensor(self, plan: Plan, p: dict[str, Any], changed: set[str]) -> None:
        """A new plan: the sensor's processing rebuilt, its bias kept; zeroed again on a switch
        to operational_space when wrench_zero_on_start, on the last reading before the switch
        (the robot free of contact then; the next reading when none came yet). Not the first
        reading after it: a relay or queue running late can hand over one taken once the
        new mode had already pressed the tool on its contact."""
        old = self._ft
        self._ft = self._wrench_sensor(plan, p)
        self._ft.keep_state_of(old)
        if p["wrench_zero_on_start"] and "mode" in changed and \
                p["mode"] == "operational_space":
            if self._ft_last is None:
                self._ft.request_zero()
            else:
                try:
                    self._ft.zero(*self._ft_last)
                except ValueError:  # its frame unknown to the new plan: the next reading
                    self._ft.request_zero()

    def _on_zero_wrench_bias(self, request, response):
        status = DiagnosticStatus(name="hybrid_dynamics_controller: wrench bias",
                                  hardware_id=self.base_model.name)
        if self._ft_last is None:
            self._ft.request_zero()
            status.message = "no wrench received yet: the first one becomes the zero"
        else:
            raw, frame, q = self._ft_last
            bias = self._ft.zero(raw, frame, q)
            status.message = f"zeroed on the last wrench (frame '{frame or 'root'}')"
            status.values = [KeyValue(key=k, value=f"{x:.6g}") for k, x in zip(
                ("force_x", "force_y", "force_z", "torque_x", "torque_y", "torque_z"),
                bias)]
        self.get_logger().info(f"~/zero_wrench_bias: {status.message}")
        response.id = "zero_wrench_bias"
        response.passed = b"\x01"
        response.status = [status]
        return response

    def _on_wrench(self, msg: WrenchStamped) -> None:
        f, m = msg.wrench.force, msg.wrench.torque
        raw = np.array([f.x, f.y, f.z, m.x, m.y, m.z])
        frame = msg.header.frame_id
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        try:
            if not np.all(np.isfinite(raw)):
                raise ValueError(f"give a finite wrench (frame '{frame}')")
            q = self._last_q.copy()
            wrench = self._ft.process(raw, frame, q, stamp or time.monotonic())
            self._ft_last = (raw, frame, q)
            self._check_wrench(wrench)
        except ValueError as exc:  # the law keeps the last good wrench
            self.stats["wrench_rejected"] += 1
            self.get_logger().warning(f"{self.params['wrench_topic']} ignored: {exc}",
                                      throttle_duration_sec=2.0)
            return
        self.measured_wrench = wrench
        if hasattr(self.plan.law, "measured_wrench"):
            self.plan.law.measured_wrench = wrench

    def _check_wrench(self, wrench: np.ndarray) -> None:
        """``ValueError`` for an implausible wrench: beyond the absolute limits, or giving some
        active joint more than ``wrench_limit_scale`` times its URDF effort limit through the
        task frame's Jacobian at the last measured configuration (|J_aᵀ w|)."""
        p = self.params
        for name, what, part, unit in (("wrench_force_limit", "force", wrench[:3], "N"),
                                       ("wrench_torque_limit", "moment", wrench[3:], "N·m")):
            size, limit = float(np.linalg.norm(part)), p[name]
            if limit > 0.0 and size > limit:
                raise ValueError(f"{what} {size:.3g} {unit} > {name} {limit:g} {unit}")
        model = self.plan.model
        ws = self._wrench_ws
        ws.set_configuration(self._last_q)
        J = ws.frame_jacobian(p["task_frame"] or self.default_frame)[:, model.active_dofs]
        torque = np.abs(J.T @ wrench)
        effort = model.effort_limit[model.active_dofs]
        limit = np.where(effort > 0.0, p["wrench_limit_scale"] * effort, np.inf)
        over = np.flatnonzero(torque > limit)
        if over.size:
            k = over[np.argmax(torque[over] / limit[over])]
            name = model.dof_names[model.active_dofs[k]]
            raise ValueError(f"implausible: it gives joint '{name}' {torque[k]:.3g} N·m through "
                             f"the task frame's Jacobian, more than wrench_limit_scale "
                             f"{p['wrench_limit_scale']:g} x its effort limit "
                             f"{model.effort_limit[model.active_dofs[k]]:g}")

    def _publish_ellipsoids(self, out) -> None:
        """Belted (red) and ordinary (blue) ellipsoids of the linear block of Λ⁻¹ at the task
        point, as TRIANGLE_LIST markers (Khatib §4.4, Fig. 7)."""
        now = time.monotonic()
        if now - self._last_ellipsoids < 0.1:
            return
        self._last_ellipsoids = now
        shapes = belted_ellipsoid(out.task_inertia_inverse[:3, :3], n=12)
        scale = self.params["ellipsoid_scale"]
        array = MarkerArray()
        for k, (which, color) in enumerate((("belted", (0.9, 0.2, 0.2)),
                                            ("ellipsoid", (0.2, 0.4, 0.9)))):
            mk = Marker(type=Marker.TRIANGLE_LIST, action=Marker.ADD, id=k, ns=which)
            mk.header.frame_id = self._world_frame() or self.plan.model.root_link
            mk.header.stamp = self.get_clock().now().to_msg()
            mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = map(
                float, out.task_point)
            mk.pose.orientation.w = 1.0
            mk.scale.x = mk.scale.y = mk.scale.z = 1.0
            mk.color.r, mk.color.g, mk.color.b = color
            mk.color.a = 0.5
            mk.points = [Point(x=float(x), y=float(y), z=float(z))
                         for x, y, z in scale * shapes.triangles(which).reshape(-1, 3)]
            array.markers.append(mk)
        self.ellipsoid_pub.publish(array)

    # ================================================================== control cycle
    def _send_zero_once(self, why: str) -> None:
        self.reference = None  # re-latch at the measured state when states return
        self._pending_references.clear()
        self._observer_time = None  # the observer restarts with the states
        if not self._silenced:
            self.command_pub.publish(Float64MultiArray(data=self._zero.tolist()))
            self.get_logger().warning(f"{why}: zero effort sent; silent until fresh valid "
                                      "/joint_states")
            self._silenced = True
        else:  # keep saying why, throttled
            self.get_logger().warning(f"still silent: {why}", throttle_duration_sec=2.0)

    def _refuse(self, counter: str, why: str) -> None:
        self.stats[counter] += 1
        self._send_zero_once(why)

    def _measured_state(self, msg: JointState) -> tuple[np.ndarray, np.ndarray] | None:
        """q, v of a valid fresh state; None (zero effort sent once) otherwise."""
        plan = self.plan
        n = len(msg.name)
        if len(msg.velocity) == 0 and n:
            self._refuse("missing_velocities", "/joint_states without velocities")
            return None
        if len(msg.position) != n or len(msg.velocity) != n:
            self._refuse("length_mismatch", f"/joint_states with {n} names, "
                         f"{len(msg.position)} positions, {len(msg.velocity)} velocities")
            return None
        try:
            q, v = plan.matcher.match(msg.name, msg.position, msg.velocity)
        except MissingJointsError as exc:
            self._missing = exc.missing
            self._refuse("missing", f"/joint_states lacks joints {exc.missing}")
            return None
        except DuplicateJointsError as exc:
            self._refuse("duplicate_names", f"malformed /joint_states: {exc}")
            return None
        except ValueError as exc:
            self._refuse("length_mismatch", f"malformed /joint_states: {exc}")
            return None
        self._missing = []
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            bad = [n for n, a, b in zip(plan.model.joint_names, q, v)
                   if not (np.isfinite(a) and np.isfinite(b))]
            self._refuse("nonfinite", f"non-finite /joint_states for {bad}")
            return None
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        now = self.get_clock().now().nanoseconds  # 0: use_sim_time before the first /clock
        if stamp:
            age = (now - stamp) * 1e-9 if now else 0.0
            if -age > self.params["future_stamp_tolerance"]:  # refused alone, not silenced
                self.stats["future_stamps"] += 1
                self.get_logger().warning(
                    f"/joint_states stamped {-age:.3f} s in the future refused (> "
                    f"future_stamp_tolerance {self.params['future_stamp_tolerance']} s)",
                    throttle_duration_sec=2.0)
                return None
            if stamp < self._last_stamp_ns:
                self.stats["out_of_order"] += 1
                self.get_logger().warning("out-of-order /joint_states dropped",
                                          throttle_duration_sec=2.0)
                return None
            timeout = self.params["state_timeout"]
            if age > timeout:
                self._refuse("stale", f"stale /joint_states ({age:.3f} s old > state_timeout "
                             f"{timeout} s)")
                return None
            self._last_stamp_ns = stamp
        # the law's clock is the state's stamp (the simulator's time under use_sim_time, so a
        # lock-stepped or slowed simulation gives the law its own steps), else the receipt
        self._state_time = stamp * 1e-9 if stamp else time.monotonic()
        if self.floating and not self._fill_base(q, v, stamp):
            return None
        return q, v

    def _on_joint_states(self, msg: JointState) -> None:
        t0 = time.perf_counter()
        state = self._measured_state(msg)
        if state is None:
            return
        q, v = state
        self._last_receipt = time.monotonic()
        self._last_q[:] = q
        self._silenced = False
        plan, law = self.plan, self.plan.law
        if self.reference is None:
            self.reference = law.hold_reference(q)
        pending = self._pending_references
        while pending and pending[0][0] <= self._state_time:  # stamped goals now due
            self.reference = pending.popleft()[1]
        if self._reaction is not None:
            self._react(q)
        now_ns = self.get_clock().now().nanoseconds
        # a clock at 0 (use_sim_time before the first /clock) is no time: a trajectory begun
        # then would be the simulated time into its run at the next sample (its reference
        # jumping ahead); it begins at the first cycle with a clock, the reference held till then
        if law.reference_kind == "joint" and self.trajectory is not None and now_ns:
            self.trajectory.sample_into(self.reference, plan.model.active_joints, now_ns)
        publish_jacobians = self.params["publish_jacobians"]
        try:
            out = law.compute(q, v, self.reference, self._state_time, publish_jacobians)
        except ValueError as exc:  # singular passive inertia and the like: never send NaN
            self._send_zero_once(f"control law failed: {exc}")
            return
        plan.shaper.apply(q, v, out)  # safety layer, friction compensation (control/command)
        if plan.shaper.safety.overrode:
            self.stats["safety_overrides"] += 1
            self._safety_names = plan.shaper.safety.limited_joints
        command = plan.mapper.map(out.tau_active)
        if not np.all(np.isfinite(command)):
            self._send_zero_once("non-finite effort computed")
            return
        if plan.mapper.saturated.any():
            self.stats["saturated"] += 1
            self._saturated_names = plan.mapper.saturated_joints()
        reaction = getattr(law, "reaction", None)
        if reaction is not self._logged_reaction:  # decided at a failure or given up since
            self._logged_reaction = reaction
            if reaction is not None:
                self.get_logger().warning(reaction.status)
        self._status = out.status if self._reaction is None else \
            f"collision: {self.params['collision_reaction']}" + \
            (f"; {out.status}" if out.status else "")
        self.command_pub.publish(Float64MultiArray(data=command.tolist()))
        if self.trajectory_action is not None:
            self.trajectory_action.after_cycle(q, v, command)
        if publish_jacobians:
            self.passive_acc_pub.publish(matrix_message(
                out.qdd_passive.reshape(-1, 1), plan.passive_label, "cols:qdd"))
            self.jg_pub.publish(matrix_message(out.J_G, _FRAME_ROWS, plan.active_label))
            self.jd_pub.publish(matrix_message(out.J_D, plan.passive_label, plan.active_label))
        if self.params["publish_ellipsoids"] and out.task_inertia_inverse is not None:
            self._publish_ellipsoids(out)
        if plan.observer is not None:  # last: it shares the law's workspace
            self._observe(plan, q, v, command, msg.header.stamp)
        if self._ident is not None:
            self._identify_step(plan, q, v, command)
        self.stats["cycles"] += 1
        # the state is answered: the next is awaited from now (the watchdog, run after this
        # callback, does not take a cycle's own length for a silence of the states)
        self._last_receipt = time.monotonic()
        now = time.perf_counter()
        self._compute_times.append(now - t0)
        self._cycle_stamps.append(now)

    def _observe(self, plan: Plan, q: np.ndarray, v: np.ndarray, command: np.ndarray,
                 stamp) -> None:
        """One momentum-observer step with the efforts this node commanded over the last
        step (held, as the simulator or a hardware interface applies them), then the
        wrench at the task frame, in its axes, on ~/estimated_wrench."""
        obs = plan.observer
        if self._observer_time is None or obs is not self._observing:
            obs.reset()  # a new plan or a restart: p(0) := this state's momentum
            self._observing = obs
            self._applied = np.zeros(plan.model.n_active)
            dt = 0.0
        else:
            dt = max(self._state_time - self._observer_time, 0.0)
        self._observer_time = self._state_time
        obs.update(q, v, self._applied, dt)
        self._applied[:] = 0.0
        self._applied[plan.active_slots] = command[plan.command_slots]
        w = obs.wrench(q, axes="frame")
        msg = WrenchStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = plan.task_frame
        f, m = msg.wrench.force, msg.wrench.torque
        f.x, f.y, f.z, m.x, m.y, m.z = map(float, w)
        self.estimated_wrench_pub.publish(msg)
        if plan.collision is not None:
            self._detect_collision(plan, q, stamp)

    # ================================================================== collision reaction
    _COLLISION_PARAMETERS = frozenset({"collision_threshold", "collision_min_duration",
                                       "collision_reaction"})

    def _init_collision(self) -> None:
        self.collision_pub = self.create_publisher(JointState, "~/collision", 10)
        self._reaction: str | None = None  # "stop" or "comply" while a reaction holds
        self._comply_slots = np.zeros(0, dtype=np.int64)  # joint modes: reference entries
        self._comply_direction: np.ndarray | None = None  # pose modes: unit force direction

    def _build_collision(self, model: RobotModel, p: dict[str, Any],
                         observer: MomentumObserver | None) -> CollisionDetector | None:
        if not any(p["collision_threshold"]):
            return None
        if observer is None:
            raise ValueError("parameter collision_threshold: collision detection needs the "
                             "momentum observer (observer_gain > 0, a fixed base)")
        try:
            return CollisionDetector(model, p["collision_threshold"],
                                     p["collision_min_duration"])
        except ValueError as exc:
            raise ValueError(f"parameter collision_threshold: {exc}") from None

    def _carry_collision(self, old: Plan, plan: Plan, changed: set[str]) -> None:
        """A latched collision survives updates of other parameters; a collision_* update
        (even to the same value) or a mode switch clears it (and ends the reaction)."""
        clears = bool(changed & self._COLLISION_PARAMETERS) or \
            plan.law.mode != old.law.mode or plan.collision is None
        if not clears and old.collision is not None:
            plan.collision.collision = old.collision.collision
            plan.collision.armed = old.collision.armed
            plan.collision.count = old.collision.count
            return
        if self._reaction is not None:
            self.get_logger().info(f"collision cleared ({sorted(changed)} updated): "
                                   "references accepted again")
        self._reaction = None
        self._comply_direction = None
        if plan.collision is not None:
            plan.collision.clear()

    def _collision_refuses(self, source: str) -> bool:
        """True (counted, logged) while a stop or comply reaction holds."""
        if self._reaction is None:
            return False
        self.stats["rejected_references"] += 1
        self.get_logger().warning(
            f"{source} refused: collision reaction '{self._reaction}' holds until cleared "
            "(set any collision_* parameter, e.g. collision_reaction, or switch mode)",
            throttle_duration_sec=1.0)
        return True

    def _detect_collision(self, plan: Plan, q: np.ndarray, stamp) -> None:
        """The detector on this state's r; on a new collision the reaction, the event on
        ~/collision and /diagnostics."""
        event = plan.collision.update(plan.observer.residual, self._state_time)
        if event is None:
            return
        self.stats["collisions"] += 1
        reaction = self.params["collision_reaction"]
        # a law holding a joint or pose reference (joint, hold, task, operational_space)
        acts = reaction != "none" and isinstance(self.reference, (JointReference, TaskReference))
        if acts:
            self._start_reaction(plan, q, event, reaction)
        else:  # report each contact once; re-armed below the thresholds
            plan.collision.clear()
        msg = JointState(name=list(event.joints), effort=list(event.torques))
        msg.header.stamp = stamp
        msg.position = [float(q[plan.model.q_start[plan.model.joint_index(n)]])
                        for n in event.joints]
        self.collision_pub.publish(msg)
        text = (f"collision at t = {event.time:.4f} s: {event.describe()}; reaction "
                f"{reaction if acts or reaction == 'none' else 'none (mode has no reference)'}")
        self.get_logger().error(text)
        array = DiagnosticArray(status=[self._collision_status(plan, event, text)])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(array)

    def _start_reaction(self, plan: Plan, q: np.ndarray, event: Collision,
                        reaction: str) -> None:
        """stop: hold the configuration of the detection with zero velocity (the trajectory
        or goal dropped); comply: the same, and each cycle ``_react`` removes the stiffness
        on the joints in collision (joint modes) or along the contact force (pose modes)."""
        law, model = plan.law, plan.model
        self.trajectory = None
        self._pending_references.clear()
        if self.trajectory_action is not None:
            self.trajectory_action.abort_active("PATH_TOLERANCE_VIOLATED",
                                                f"collision: {event.describe()}")
        self.reference = law.hold_reference(q)
        self._reaction = reaction
        self._comply_direction = None
        self._comply_slots = np.zeros(0, dtype=np.int64)
        if reaction != "comply":
            return
        if isinstance(self.reference, JointReference):
            names = list(model.active_joints)
            self._comply_slots = np.array([names.index(n) for n in event.joints if n in names],
                                          dtype=np.int64)
            self._comply_q = np.array([model.q_start[model.joint_index(names[k])]
                                       for k in self._comply_slots], dtype=np.int64)
        else:
            force = plan.observer.wrench(q, axes="root")[:3]
            size = float(np.linalg.norm(force))
            if size > 1e-9:
                self._comply_direction = force / size

    def _react(self, q: np.ndarray) -> None:
        """While a reaction holds: a new trajectory goal is refused. comply, each cycle: the
        reference follows the measured state on the joints in collision (joint modes) or along
        the contact force (pose modes), so the law's stiffness there is zero; its damping,
        gravity and the other joints' hold remain."""
        if self.trajectory is not None and self._collision_refuses("a trajectory goal"):
            self.trajectory = None
            if self.trajectory_action is not None:
                self.trajectory_action.abort_active(
                    "INVALID_GOAL", "refused: a collision reaction holds until cleared (set any "
                    "collision_* parameter)", hold=False)
        ref = self.reference
        if self._reaction != "comply" or ref is None:
            return
        if self._comply_slots.size and hasattr(ref, "velocity"):
            ref.position[self._comply_slots] = q[self._comply_q]
            ref.velocity[self._comply_slots] = 0.0
            ref.acceleration[self._comply_slots] = 0.0
        elif self._comply_direction is not None and hasattr(ref, "linear_velocity"):
            n = self._comply_direction
            ws = self.plan.law.workspace
            ws.set_configuration(q)
            position = ws.frame_placement(self.plan.task_frame)[0]
            ref.position = ref.position + n * float(n @ (position - ref.position))
            ref.linear_velocity = ref.linear_velocity - n * float(n @ ref.linear_velocity)
            ref.linear_acceleration = ref.linear_acceleration - n * float(
                n @ ref.linear_acceleration)

    def _collision_status(self, plan: Plan, event: Collision | None,
                          message: str) -> DiagnosticStatus:
        status = DiagnosticStatus(name="hybrid_dynamics_controller: collision",
                                  hardware_id=self.base_model.name)
        if event is None:
            status.level, status.message = DiagnosticStatus.OK, message
        else:
            status.level = DiagnosticStatus.ERROR if self._reaction else DiagnosticStatus.WARN
            status.message = message
            status.values = [KeyValue(key="time", value=f"{event.time:.6f}"),
                             KeyValue(key="joints", value=",".join(event.joints)),
                             KeyValue(key="torques", value=",".join(
                                 f"{t:.6g}" for t in event.torques)),
                             KeyValue(key="thresholds", value=",".join(
                                 f"{t:g}" for t in event.thresholds))]
        status.values.append(KeyValue(key="reaction", value=self._reaction or "none"))
        status.values.append(KeyValue(key="collisions", value=str(self.stats["collisions"])))
        return status

    def _collision_statuses(self) -> list[DiagnosticStatus]:
        """The periodic collision status (none when detection is off)."""
        plan = self.plan
        if plan.collision is None:
            return []
        latched = plan.collision.collision
        if latched is not None:
            return [self._collision_status(plan, latched, f"collision latched ({self._reaction}"
                                           f"): {latched.describe()}")]
        return [self._collision_status(plan, None, "armed" if plan.collision.armed else
                                       "cleared; re-armed below the thresholds")]

    # ================================================================== payload identification
    def _init_identification(self) -> None:
        """~/identify_payload (diagnostic_msgs/SelfTest, answered when the run ends): the
        holding poses of ``propose_holding_poses`` at payload_frame (else the task frame), in
        mode joint, from the efforts this node commands; the estimate set as payload_*."""
        from diagnostic_msgs.srv import SelfTest

        self._ident: tuple[HoldingRecorder, float, Any, float] | None = None
        self.create_service(SelfTest, "~/identify_payload", self._on_identify_payload)
        self.create_timer(0.5, self._identify_watchdog)

    def _identify_step(self, plan: Plan, q: np.ndarray, v: np.ndarray,
                       command: np.ndarray) -> None:
        recorder, start, future, _ = self._ident
        if future.done() or self._state_time < start:
            return
        effort = np.zeros(plan.model.n_active)
        effort[plan.active_slots] = command[plan.command_slots]
        out = recorder.feed(self._state_time, q, v, effort)
        if out is not None:
            future.set_result(out)

    def _identify_watchdog(self) -> None:
        if self._ident is not None and not self._ident[2].done() and \
                time.monotonic() > self._ident[3]:
            self._ident[2].set_result(None)

    async def _on_identify_payload(self, request, response):
        from rclpy.parameter import Parameter
        from rclpy.task import Future

        status = DiagnosticStatus(name="hybrid_dynamics_controller: identify payload",
                                  hardware_id=self.base_model.name)
        response.id, response.passed, response.status = "identify_payload", b"\x00", [status]
        p = self.params
        frame = p["payload_frame"] or self.plan.task_frame
        if self._ident is not None:
            status.message = "an identification is already running"
        elif self.plan.law.mode != "joint":
            status.message = (f"mode is '{self.plan.law.mode}': the run drives the joint "
                              "reference (set mode:=joint first)")
        elif self.floating:
            status.message = "payload identification needs a fixed-base model"
        elif self._last_receipt is None or self._silenced:
            status.message = "no valid fresh /joint_states"
        if status.message:
            status.level = DiagnosticStatus.ERROR
            self.get_logger().warning(f"~/identify_payload refused: {status.message}")
            return response
        model = with_passive(self.base_model, p["passive_joints"])
        active = model.active_dofs
        q_start = self._last_q.copy()
        poses = propose_holding_poses(model, frame, q_start, 6, span=1.0)
        log = self.get_logger()
        log.info(f"~/identify_payload: frame '{frame}', {len(poses.poses)} poses (condition "
                 f"number {poses.condition_number:.3g}), commanded efforts")
        Q, T = [], []
        try:
            for k, pose in enumerate([*poses.poses, q_start]):
                duration = move_duration(self._last_q[active], pose[active])
                goal = JointTrajectory(joint_names=list(model.active_joints))
                point = JointTrajectoryPoint(positions=[float(x) for x in pose[active]],
                                             velocities=[0.0] * len(active))
                point.time_from_start.sec = int(duration)
                point.time_from_start.nanosec = int((duration - int(duration)) * 1e9)
                goal.points = [point]
                self._on_joint_reference(goal)
                future = Future()
                self._ident = (HoldingRecorder(), self._state_time + duration, future,
                               time.monotonic() + 60.0 + 3.0 * duration)
                out = await future
                what = "the start pose" if k == len(poses.poses) else f"pose {k + 1}"
                if out is None:
                    raise ValueError(f"{what}: not settled within "
                                     f"{60.0 + 3.0 * duration:.0f} s")
                if k < len(poses.poses):
                    Q.append(out[0])
                    T.append(out[1])
                    log.info(f"~/identify_payload: pose {k + 1}/{len(poses.poses)} recorded: "
                             f"q {np.round(out[0], 3).tolist()}")
            est = identify_payload(model, frame, np.array(Q), np.array(T))
        except ValueError as exc:
            status.level, status.message = DiagnosticStatus.ERROR, str(exc)
            log.warning(f"~/identify_payload failed: {exc}")
            return response
        finally:
            self._ident = None
        values = payload_parameters(est)
        result = self.set_parameters_atomically([Parameter(k, value=v)
                                                 for k, v in values.items()])
        status.message = (f"mass {est.mass:.4f} ± {est.mass_std:.4f} kg, com "
                          f"{np.round(1e3 * est.com, 2).tolist()} ± "
                          f"{np.round(1e3 * est.com_std, 2).tolist()} mm at '{frame}'; "
                          + ("set as payload_*" if result.successful else
                             f"not set: {result.reason}"))
        status.values = [KeyValue(key="mass", value=f"{est.mass:.6g}"),
                         KeyValue(key="mass_std", value=f"{est.mass_std:.6g}"),
                         *[KeyValue(key=f"com_{a}", value=f"{x:.6g}")
                           for a, x in zip("xyz", est.com)],
                         *[KeyValue(key=f"com_{a}_std", value=f"{x:.6g}")
                           for a, x in zip("xyz", est.com_std)],
                         KeyValue(key="residual_rms", value=f"{est.residual_rms:.6g}")]
        response.passed = b"\x01" if result.successful else b"\x00"
        log.info(f"~/identify_payload: {status.message}")
        return response

    def _watchdog(self) -> None:
        timeout = self.params["state_timeout"]
        if self._last_receipt is not None and not self._silenced and \
                time.monotonic() - self._last_receipt > timeout:
            self._refuse("stale", f"no /joint_states for more than {timeout} s")

    # ================================================================== diagnostics
    def _publish_diagnostics(self) -> None:
        times, stamps = self._compute_times, self._cycle_stamps
        self._compute_times, self._cycle_stamps = [], []
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
        model = self.plan.model
        self._command_publishers = self.count_publishers(self.command_topic)
        if self._command_publishers > 1:
            self.get_logger().warning(
                f"{self._command_publishers} publishers on '{self.command_topic}': another "
                "controller is commanding the same joints", throttle_duration_sec=10.0)
        status = DiagnosticStatus(name="hybrid_dynamics_controller: control loop",
                                  hardware_id=self.base_model.name)
        status.level, status.message = DiagnosticStatus.OK, "running"
        if self._missing:
            status.level, status.message = DiagnosticStatus.ERROR, \
                f"/joint_states lacks {self._missing}"
        elif self._silenced:
            status.level, status.message = DiagnosticStatus.WARN, "no valid fresh state"
        elif self._command_publishers > 1:
            status.level, status.message = DiagnosticStatus.WARN, \
                f"{self._command_publishers} publishers on {self.command_topic}"
        elif self._saturated_names:
            status.level, status.message = DiagnosticStatus.WARN, \
                f"effort saturated on {self._saturated_names}"
        values = {
            "mode": self.plan.law.mode, "active_joints": ",".join(model.active_joints),
            "passive_joints": ",".join(model.passive_joints),
            "loop_rate_hz": f"{rate:.1f}",
            "compute_time_mean_us": f"{1e6 * np.mean(times):.1f}" if times else "nan",
            "compute_time_max_us": f"{1e6 * np.max(times):.1f}" if times else "nan",
            "saturated_joints": ",".join(self._saturated_names),
            "safety_joints": ",".join(self._safety_names),
            "missing_joints": ",".join(self._missing),
            "law_status": self._status,
            # task mode's reaction to a motor failed at run time (control/failure_reaction.py)
            "failure_reaction": getattr(getattr(self.plan.law, "reaction", None), "status", ""),
            "command_publishers": str(self._command_publishers),
            "base_state": self.base_state or "fixed",
        }
        values.update({k: str(v) for k, v in self.stats.items()})
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        self._saturated_names = []
        self._safety_names = []
        msg = DiagnosticArray(status=[status, *self._collision_statuses()])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)


    def on_shutdown(self) -> None:
        """One zero-effort command on the way out (SIGINT/SIGTERM), delivered before exit."""
        from rclpy.duration import Duration

        self.command_pub.publish(Float64MultiArray(data=self._zero.tolist()))
        self.command_pub.wait_for_all_acked(Duration(seconds=0.5))
        self.get_logger().info("stopped: zero effort sent")


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``hybrid_dynamics_controller --ros-args -p urdf_path:=...``."""
    return run_node(HybridDynamicsController, args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
