"""hybrid_dynamics_controller: /joint_states in, effort commands out (ARCHITECTURE.md §4).

Event-driven: every /joint_states message runs one control cycle and publishes one command.
The command then follows the freshest state with no added delay, and the loop runs at the rate
of the state source (ros2_control's joint_state_broadcaster runs at the controller-manager
rate). A watchdog timer only checks for a stale stream.

The math is in the library: ``JointStateMatcher`` (names -> q, v), ``JointSpaceController``
(joint and hold modes), ``EndEffectorTracker`` (task mode through J_G), ``EffortMapper``
(command order and effort limits), ``JacobianWorkspace`` (J_G, J_D for publication).
"""

from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import ParameterType, SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from ..control.joint_space import (
    EffortMapper,
    JointReference,
    JointSpaceController,
    JointStateMatcher,
    MissingJointsError,
    sample_trajectory,
)
from ..control.task_space import TASKS, EndEffectorTracker, TaskReference
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from .common import declare, declare_robot, matrix_message, pose_from_message, run_node

MODES = ("joint", "task", "hold")
_FRAME_ROWS = "rows:lin_x,lin_y,lin_z,ang_x,ang_y,ang_z"


class HybridDynamicsController(Node):
    """See the module docstring; parameters are listed in the README."""

    def __init__(self, **kwargs) -> None:
        super().__init__("hybrid_dynamics_controller", **kwargs)
        S = ParameterType
        # -- robot (read-only) -------------------------------------------------------------
        text = declare_robot(self)
        root_link = declare(self, "root_link", "", "root of the controlled sub-tree (empty: "
                            "the URDF root)", read_only=True)
        tip_link = declare(self, "tip_link", "", "tip of the controlled chain (empty: the "
                           "whole tree)", read_only=True)
        self.command_topic = declare(self, "command_topic", "/effort_controller/commands",
                                     "std_msgs/Float64MultiArray effort command topic of a "
                                     "JointGroupEffortController / ForwardCommandController",
                                     read_only=True)
        command_joints = list(declare(self, "command_joints", [""], "joint order of the effort "
                                      "command (empty: the active joints in model order)",
                                      read_only=True, kind=S.PARAMETER_STRING_ARRAY))
        # -- run-time tunable --------------------------------------------------------------
        passive = list(declare(self, "passive_joints", [""], "joints without actuator, added to "
                               "those the URDF <ros2_control> tag leaves without a command "
                               "interface; changing it re-plans without restart",
                               kind=S.PARAMETER_STRING_ARRAY))
        self.mode = declare(self, "mode", "hold", "control law", choices=MODES)
        kp = declare(self, "kp", [100.0], "joint stiffness per joint of the model (one value: "
                     "all joints)", unit="1/s^2", low=0.0, high=1e6,
                     kind=S.PARAMETER_DOUBLE_ARRAY)
        kd = declare(self, "kd", [20.0], "joint damping per joint of the model (one value: all "
                     "joints)", unit="1/s", low=0.0, high=1e4, kind=S.PARAMETER_DOUBLE_ARRAY)
        self.task = declare(self, "task", "pose", "task-mode task", choices=TASKS)
        self.task_frame = declare(self, "task_frame", "", "link tracked in task mode and whose "
                                  "J_G is published (empty: tip_link or the last body)")
        self.task_gains = {
            "task_kp_position": declare(self, "task_kp_position", 100.0, "task stiffness, "
                                        "position", unit="1/s^2", low=0.0, high=1e6),
            "task_kd_position": declare(self, "task_kd_position", 20.0, "task damping, "
                                        "position", unit="1/s", low=0.0, high=1e4),
            "task_kp_orientation": declare(self, "task_kp_orientation", 100.0, "task "
                                           "stiffness, orientation", unit="1/s^2", low=0.0,
                                           high=1e6),
            "task_kd_orientation": declare(self, "task_kd_orientation", 20.0, "task damping, "
                                           "orientation", unit="1/s", low=0.0, high=1e4),
            "passive_weight": declare(self, "passive_weight", 0.0, "weight of the rows keeping "
                                      "passive joints still (task mode, paper 7.1)", low=0.0,
                                      high=1e6),
            "passive_kp": declare(self, "passive_kp", 0.0, "passive-joint stiffness in those "
                                  "rows", unit="1/s^2", low=0.0, high=1e6),
            "passive_kd": declare(self, "passive_kd", 0.0, "passive-joint damping in those rows",
                                  unit="1/s", low=0.0, high=1e4),
        }
        self.state_timeout = declare(self, "state_timeout", 0.1, "a /joint_states older than "
                                     "this gives no command", unit="s", low=1e-3, high=60.0)
        self.effort_limit_scale = declare(self, "effort_limit_scale", 1.0, "commands are "
                                          "clamped to the URDF effort limits times this",
                                          low=1e-3, high=10.0)
        self.publish_jacobians = declare(self, "publish_jacobians", True, "publish J_G, J_D and "
                                         "the passive accelerations every cycle")
        diag_period = declare(self, "diagnostics_period", 1.0, "period of /diagnostics",
                              unit="s", low=0.05, high=60.0, read_only=True)

        # -- model ---------------------------------------------------------------------------
        base = RobotModel.from_urdf(text, root_link=root_link or None, tip_link=tip_link or None)
        self.base_model = base
        self.inferred_passive = set(base.passive_joints)
        passive = [p for p in passive if p]
        self._check_joints("passive_joints", passive)
        command_joints = [c for c in command_joints if c]
        self._check_joints("command_joints", command_joints)
        self.command_joints = command_joints or list(base.with_passive(
            sorted(self.inferred_passive | set(passive))).active_joints)
        if not self.task_frame:
            self.task_frame = tip_link or base.body_names[-1]
        base.frame(self.task_frame)
        self._kp_all = self._per_joint("kp", kp)
        self._kd_all = self._per_joint("kd", kd)
        self.joint_ref: JointReference | None = None
        self.trajectory = None
        self.pose_ref: TaskReference | None = None
        self._configure(passive)

        # -- interfaces ----------------------------------------------------------------------
        self.command_pub = self.create_publisher(Float64MultiArray, self.command_topic, 10)
        self.passive_acc_pub = self.create_publisher(Float64MultiArray,
                                                     "~/passive_accelerations", 10)
        self.jg_pub = self.create_publisher(Float64MultiArray, "~/generalized_jacobian", 10)
        self.jd_pub = self.create_publisher(Float64MultiArray, "~/disturbance_jacobian", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        sensor_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(JointState, "/joint_states", self._on_joint_states, sensor_qos)
        self.create_subscription(JointTrajectory, "~/joint_reference", self._on_joint_reference,
                                 10)
        self.create_subscription(PoseStamped, "~/pose_reference", self._on_pose_reference, 10)
        self.add_on_set_parameters_callback(self._on_parameters)
        self.create_timer(diag_period, self._publish_diagnostics)
        self.create_timer(min(0.05, self.state_timeout / 2), self._watchdog)

        # -- state of the loop -----------------------------------------------------------------
        self._last_receipt: float | None = None  # monotonic time of the last good state
        self._last_stamp_ns = 0
        self._silenced = False  # zero effort sent; silent until fresh valid data
        self._missing: list[str] = []
        self.stats = {"cycles": 0, "stale": 0, "nonfinite": 0, "missing": 0, "saturated": 0,
                      "rejected_references": 0, "out_of_order": 0}
        self._compute_times: list[float] = []
        self._cycle_stamps: list[float] = []
        self._saturated_names: list[str] = []
        self._zero = np.zeros(len(self.command_joints))
        self.get_logger().info(
            f"controlling '{base.name}': active {list(self.model.active_joints)}, passive "
            f"{list(self.model.passive_joints)}; command {self.command_joints} on "
            f"'{self.command_topic}'; mode '{self.mode}'")

    # ================================================================== configuration
    def _check_joints(self, what: str, names) -> None:
        unknown = [n for n in names if n not in self.base_model.joint_names]
        if unknown:
            raise ValueError(f"parameter {what}: unknown joints {unknown}; the model's joints "
                             f"are {list(self.base_model.joint_names)}")

    def _per_joint(self, what: str, values) -> np.ndarray:
        values = np.asarray(list(values), dtype=float)
        nb = self.base_model.nb
        if values.size == 1:
            values = np.full(nb, values[0])
        if values.shape != (nb,):
            raise ValueError(f"parameter {what}: give one value or {nb} (joints "
                             f"{list(self.base_model.joint_names)}), got {values.size}")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"parameter {what}: values must be finite and >= 0")
        return values

    def _configure(self, passive: list[str]) -> None:
        """(Re)build everything that depends on the passive set; no URDF re-parse."""
        old_model = getattr(self, "model", None)
        model = self.base_model.with_passive(sorted(self.inferred_passive | set(passive)))
        if model.n_active == 0:
            raise ValueError("every joint would be passive: nothing to command")
        active_idx = [model.joint_index(n) for n in model.active_joints]
        controller = JointSpaceController(model, self._kp_all[active_idx],
                                          self._kd_all[active_idx])
        mapper = EffortMapper(model, self.command_joints, self.effort_limit_scale)
        tracker = self._make_tracker(model)
        jacobians = JacobianWorkspace(model)
        matcher = JointStateMatcher(model)
        # carry the joint reference over by name (newly active joints hold where they are)
        if self.joint_ref is not None and old_model is not None:
            old = {n: i for i, n in enumerate(old_model.active_joints)}
            ref = JointReference(np.full(model.n_active, np.nan), np.zeros(model.n_active),
                                 np.zeros(model.n_active))
            for i, n in enumerate(model.active_joints):
                if n in old:
                    ref.position[i] = self.joint_ref.position[old[n]]
                    ref.velocity[i] = self.joint_ref.velocity[old[n]]
                    ref.acceleration[i] = self.joint_ref.acceleration[old[n]]
            self.joint_ref = ref
        self.trajectory = None
        self.model, self.controller, self.mapper = model, controller, mapper
        self.tracker, self.jacobians, self.matcher = tracker, jacobians, matcher
        self._jd_cols = "cols:" + ",".join(model.active_joints)
        self._jd_rows = "rows:" + ",".join(model.passive_joints)

    def _make_tracker(self, model: RobotModel) -> EndEffectorTracker:
        g = self.task_gains
        return EndEffectorTracker(
            model, self.task_frame, task=self.task, kp_position=g["task_kp_position"],
            kd_position=g["task_kd_position"], kp_orientation=g["task_kp_orientation"],
            kd_orientation=g["task_kd_orientation"], passive_weight=g["passive_weight"],
            passive_kp=g["passive_kp"], passive_kd=g["passive_kd"])

    # ================================================================== parameters
    def _on_parameters(self, params) -> SetParametersResult:
        """Validate every update; apply only if all are valid (rqt_reconfigure, ros2 param)."""
        try:
            updates = {p.name: p.value for p in params}
            kp, kd = self._kp_all, self._kd_all
            if "kp" in updates:
                kp = self._per_joint("kp", updates["kp"])
            if "kd" in updates:
                kd = self._per_joint("kd", updates["kd"])
            if "mode" in updates and updates["mode"] not in MODES:
                raise ValueError(f"mode must be one of {MODES}, got '{updates['mode']}'")
            if "task" in updates and updates["task"] not in TASKS:
                raise ValueError(f"task must be one of {TASKS}, got '{updates['task']}'")
            if "task_frame" in updates:
                self.base_model.frame(updates["task_frame"])
            for name in self.task_gains:
                if name in updates and not (np.isfinite(updates[name]) and updates[name] >= 0):
                    raise ValueError(f"{name} must be finite and >= 0, got {updates[name]}")
            if "state_timeout" in updates and not (updates["state_timeout"] > 0):
                raise ValueError("state_timeout must be > 0 s")
            if "effort_limit_scale" in updates and not (updates["effort_limit_scale"] > 0):
                raise ValueError("effort_limit_scale must be > 0")
            passive = None
            if "passive_joints" in updates:
                passive = [p for p in updates["passive_joints"] if p]
                self._check_joints("passive_joints", passive)
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))

        # all valid: apply
        old = (self._kp_all, self._kd_all, self.mode, self.task, self.task_frame,
               dict(self.task_gains), self.state_timeout, self.effort_limit_scale)
        self._kp_all, self._kd_all = kp, kd
        self.mode = updates.get("mode", self.mode)
        self.task = updates.get("task", self.task)
        self.task_frame = updates.get("task_frame", self.task_frame)
        for name in self.task_gains:
            self.task_gains[name] = float(updates.get(name, self.task_gains[name]))
        self.state_timeout = float(updates.get("state_timeout", self.state_timeout))
        self.effort_limit_scale = float(updates.get("effort_limit_scale",
                                                    self.effort_limit_scale))
        self.publish_jacobians = bool(updates.get("publish_jacobians", self.publish_jacobians))
        try:
            if passive is None:
                passive = [n for n in self.model.passive_joints
                           if n not in self.inferred_passive]
            self._configure(passive)
        except ValueError as exc:
            (self._kp_all, self._kd_all, self.mode, self.task, self.task_frame, gains,
             self.state_timeout, self.effort_limit_scale) = old
            self.task_gains.update(gains)
            return SetParametersResult(successful=False, reason=str(exc))
        if "mode" in updates:
            self.joint_ref = None if self.mode == "hold" else self.joint_ref
        self.get_logger().info(f"parameters updated: {sorted(updates)}")
        return SetParametersResult(successful=True)

    # ================================================================== references
    def _on_joint_reference(self, msg: JointTrajectory) -> None:
        try:
            names = list(msg.joint_names)
            unknown = [n for n in names if n not in self.base_model.joint_names]
            if unknown:
                raise ValueError(f"unknown joints {unknown}")
            if len(set(names)) != len(names):
                raise ValueError("duplicate joint names")
            if not msg.points:
                raise ValueError("no points")
            n = len(names)
            times, P, V, A = [], [], [], []
            for k, pt in enumerate(msg.points):
                if len(pt.positions) != n:
                    raise ValueError(f"point {k} has {len(pt.positions)} positions for {n} joints")
                for what, arr in (("velocities", pt.velocities),
                                  ("accelerations", pt.accelerations)):
                    if len(arr) not in (0, n):
                        raise ValueError(f"point {k} has {len(arr)} {what} for {n} joints")
                times.append(pt.time_from_start.sec + 1e-9 * pt.time_from_start.nanosec)
                P.append(pt.positions)
                V.append(pt.velocities if len(pt.velocities) else [0.0] * n)
                A.append(pt.accelerations if len(pt.accelerations) else [0.0] * n)
            P, V, A = (np.array(x, dtype=float) for x in (P, V, A))
            if not (np.all(np.isfinite(P)) and np.all(np.isfinite(V)) and np.all(np.isfinite(A))):
                raise ValueError("non-finite values")
            times = np.array(times)
            if np.any(np.diff(times) <= 0):
                raise ValueError("time_from_start must increase from point to point")
        except ValueError as exc:
            self.stats["rejected_references"] += 1
            self.get_logger().warning(f"~/joint_reference rejected: {exc}")
            return
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        start = stamp if stamp else self.get_clock().now().nanoseconds
        has_vel = any(len(pt.velocities) for pt in msg.points)
        self.trajectory = (names, times, P, V if has_vel else None, A, start)
        if self.mode == "hold":
            self.get_logger().info("joint reference received while in hold mode: set "
                                   "mode:=joint to follow it")

    def _on_pose_reference(self, msg: PoseStamped) -> None:
        try:
            position, R = pose_from_message(msg, self.model.root_link)
        except ValueError as exc:
            self.stats["rejected_references"] += 1
            self.get_logger().warning(f"~/pose_reference rejected: {exc}")
            return
        self.pose_ref = TaskReference(position=position, rotation=R)

    def _current_joint_reference(self, q: np.ndarray) -> JointReference:
        model = self.model
        if self.joint_ref is None or np.any(np.isnan(self.joint_ref.position)):
            held = self.controller.active_positions(q).copy()
            if self.joint_ref is None:
                self.joint_ref = JointReference(held, np.zeros(model.n_active),
                                                np.zeros(model.n_active))
            else:
                gaps = np.isnan(self.joint_ref.position)
                self.joint_ref.position[gaps] = held[gaps]
        if self.mode == "joint" and self.trajectory is not None:
            names, times, P, V, A, start = self.trajectory
            t = (self.get_clock().now().nanoseconds - start) * 1e-9
            p, v, a = sample_trajectory(times, P, V, A, t)
            slot = {n: i for i, n in enumerate(model.active_joints)}
            for j, n in enumerate(names):
                i = slot.get(n)
                if i is not None:
                    self.joint_ref.position[i] = p[j]
                    self.joint_ref.velocity[i] = v[j]
                    self.joint_ref.acceleration[i] = a[j]
        return self.joint_ref

    # ================================================================== control cycle
    def _send_zero_once(self, why: str) -> None:
        if not self._silenced:
            self.command_pub.publish(Float64MultiArray(data=self._zero.tolist()))
            self.get_logger().warning(f"{why}: zero effort sent; silent until fresh valid "
                                      "/joint_states")
            self._silenced = True

    def _on_joint_states(self, msg: JointState) -> None:
        t0 = time.perf_counter()
        try:
            q, v = self.matcher.match(msg.name, msg.position, msg.velocity)
        except MissingJointsError as exc:
            self._missing = exc.missing
            self.stats["missing"] += 1
            self._send_zero_once(f"/joint_states lacks joints {exc.missing}")
            return
        except ValueError as exc:
            self.stats["nonfinite"] += 1
            self._send_zero_once(f"malformed /joint_states: {exc}")
            return
        self._missing = []
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            self.stats["nonfinite"] += 1
            bad = [n for n, a, b in zip(self.model.joint_names, q, v)
                   if not (np.isfinite(a) and np.isfinite(b))]
            self._send_zero_once(f"non-finite /joint_states for {bad}")
            return
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        if stamp:
            if stamp < self._last_stamp_ns:
                self.stats["out_of_order"] += 1
                return
            age = (self.get_clock().now().nanoseconds - stamp) * 1e-9
            if age > self.state_timeout:
                self.stats["stale"] += 1
                self._send_zero_once(f"stale /joint_states ({age:.3f} s old > state_timeout "
                                     f"{self.state_timeout} s)")
                return
            self._last_stamp_ns = stamp
        self._last_receipt = time.monotonic()
        self._silenced = False
        try:
            if self.mode == "task":
                ref = self.pose_ref
                if ref is None:  # hold the current pose until a reference arrives
                    ws = self.tracker.workspace
                    ws.set_configuration(q)
                    p, R = ws.frame_placement(self.task_frame)
                    ref = self.pose_ref = TaskReference(position=p.copy(), rotation=R.copy())
                res = self.tracker.step(q, v, ref)
                tau_active, qdd_passive = res.tau_active, res.qdd_passive
                J_G, J_D = self.tracker.workspace.J_G, self.tracker.workspace.J_D
            else:
                res = self.controller.compute(q, v, self._current_joint_reference(q))
                tau_active, qdd_passive = res.tau_active, res.qdd_passive
                J_G = J_D = None
        except ValueError as exc:  # singular passive inertia and the like: never send NaN
            self._send_zero_once(f"control law failed: {exc}")
            return
        command = self.mapper.map(tau_active)
        if not np.all(np.isfinite(command)):
            self._send_zero_once("non-finite effort computed")
            return
        if self.mapper.saturated.any():
            self.stats["saturated"] += 1
            self._saturated_names = self.mapper.saturated_joints()
        self.command_pub.publish(Float64MultiArray(data=command.tolist()))
        if self.publish_jacobians:
            if J_G is None:
                J_G, J_D = self.jacobians.generalized(self.task_frame, q)
            self.passive_acc_pub.publish(matrix_message(
                qdd_passive.reshape(-1, 1), self._jd_rows, "cols:qdd"))
            self.jg_pub.publish(matrix_message(J_G, _FRAME_ROWS, self._jd_cols))
            self.jd_pub.publish(matrix_message(J_D, self._jd_rows, self._jd_cols))
        self.stats["cycles"] += 1
        now = time.perf_counter()
        self._compute_times.append(now - t0)
        self._cycle_stamps.append(now)

    def _watchdog(self) -> None:
        if self._last_receipt is not None and not self._silenced and \
                time.monotonic() - self._last_receipt > self.state_timeout:
            self.stats["stale"] += 1
            self._send_zero_once(f"no /joint_states for more than {self.state_timeout} s")

    # ================================================================== diagnostics
    def _publish_diagnostics(self) -> None:
        times, stamps = self._compute_times, self._cycle_stamps
        self._compute_times, self._cycle_stamps = [], []
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
        status = DiagnosticStatus(name="hybrid_dynamics_controller: control loop",
                                  hardware_id=self.base_model.name)
        status.level, status.message = DiagnosticStatus.OK, "running"
        if self._missing:
            status.level, status.message = DiagnosticStatus.ERROR, \
                f"/joint_states lacks {self._missing}"
        elif self._silenced:
            status.level, status.message = DiagnosticStatus.WARN, "no valid fresh state"
        elif self._saturated_names:
            status.level, status.message = DiagnosticStatus.WARN, \
                f"effort saturated on {self._saturated_names}"
        values = {
            "mode": self.mode, "active_joints": ",".join(self.model.active_joints),
            "passive_joints": ",".join(self.model.passive_joints),
            "loop_rate_hz": f"{rate:.1f}",
            "compute_time_mean_us": f"{1e6 * np.mean(times):.1f}" if times else "nan",
            "compute_time_max_us": f"{1e6 * np.max(times):.1f}" if times else "nan",
            "saturated_joints": ",".join(self._saturated_names),
            "missing_joints": ",".join(self._missing),
        }
        values.update({k: str(v) for k, v in self.stats.items()})
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        self._saturated_names = []
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``hybrid_dynamics_controller --ros-args -p urdf_path:=...``."""
    return run_node(HybridDynamicsController, args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
