"""elbow_redundancy_resolver: Seraji configuration control as a ROS 2 node (ARCHITECTURE §4-5).

A goal (``~/target_pose`` and/or ``~/target_arm_angle``) starts a cycloidal motion of the hand
pose and the arm angle over ``motion_duration`` s from the current plan (or, when idle, the
measured /joint_states). A timer at ``rate`` Hz runs one configuration-control step per sample
and publishes ``~/joint_setpoints`` (trajectory_msgs/JointTrajectory: positions, velocities,
accelerations of every joint) for the controller's ``~/joint_reference``, a
JointTrajectoryController or a position controller, and ``~/arm_angle`` (measured ψ, rad).

Passive joints are locked out of direct command: the plan moves the active joints only, and a
passive joint's setpoint is its measured position (its motion is left to the controller's
hybrid dynamics).
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import ParameterType, SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..control.joint_space import JointStateMatcher, MissingJointsError
from ..model import RobotModel
from ..redundancy.arm_angle import ArmAngle
from ..redundancy.configuration_control import ConfigurationControl, ConfigurationTrajectory
from ..redundancy.functions import (
    ArmAngleFunction,
    CollisionAvoidance,
    JointLimitAvoidance,
    Sphere,
)
from .common import declare, declare_robot, pose_from_message, run_node


class ElbowRedundancyResolver(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("elbow_redundancy_resolver", **kwargs)
        S = ParameterType
        text = declare_robot(self)
        root_link = declare(self, "root_link", "", "root link (empty: URDF root)",
                            read_only=True)
        self.tip = declare(self, "tip_link", "", "hand link (empty: the last body)",
                           read_only=True)
        shoulder = declare(self, "shoulder_link", "", "link whose origin is S", read_only=True)
        elbow = declare(self, "elbow_link", "", "link whose origin is E", read_only=True)
        wrist = declare(self, "wrist_link", "", "link whose origin is W", read_only=True)
        reference = declare(self, "reference_direction", [0.0, 0.0, 1.0], "direction spanning "
                            "the arm angle's reference plane with SW (root axes)",
                            read_only=True, kind=S.PARAMETER_DOUBLE_ARRAY)
        passive = declare(self, "passive_joints", [""], "joints without actuator (planned as "
                          "locked)", read_only=True, kind=S.PARAMETER_STRING_ARRAY)
        self.params = {
            "hand_weights": declare(self, "hand_weights", [16.0], "W_e: x, y, z, rx, ry, rz "
                                    "(one value: all)", low=0.0, high=1e9,
                                    kind=S.PARAMETER_DOUBLE_ARRAY),
            "arm_angle_weight": declare(self, "arm_angle_weight", 1.0, "W_c of the arm angle",
                                        low=0.0, high=1e9),
            "joint_velocity_weights": declare(self, "joint_velocity_weights", [0.0], "W_v per "
                                              "joint (one value: all)", low=0.0, high=1e9,
                                              kind=S.PARAMETER_DOUBLE_ARRAY),
            "motion_duration": declare(self, "motion_duration", 3.0, "duration of a goal "
                                       "motion", unit="s", low=0.05, high=600.0),
            "rate": declare(self, "rate", 100.0, "setpoint rate", unit="Hz", low=1.0,
                            high=2000.0),
            "obstacles": declare(self, "obstacles", [0.0], "spheres x, y, z, radius "
                                 "(root frame, m) repeated; [] or [0.0]: none",
                                 kind=S.PARAMETER_DOUBLE_ARRAY),
            "obstacle_margin": declare(self, "obstacle_margin", 0.1, "outer minus inner "
                                       "sphere-of-influence radius", unit="m", low=1e-3,
                                       high=10.0),
            "joint_limit_margin": declare(self, "joint_limit_margin", 0.1, "joint-limit "
                                          "avoidance zone (0: off)", unit="rad", low=0.0,
                                          high=1.0),
        }

        base = RobotModel.from_urdf(text, root_link=root_link or None,
                                    tip_link=self.tip or None)
        passive = [p for p in passive if p]
        unknown = [p for p in passive if p not in base.joint_names]
        if unknown:
            raise ValueError(f"parameter passive_joints: unknown joints {unknown}")
        self.model = base.with_passive(sorted(set(base.passive_joints) | set(passive)))
        self.tip = self.tip or self.model.body_names[-1]
        if not (shoulder and elbow and wrist):
            raise ValueError("set parameters shoulder_link, elbow_link and wrist_link")
        self.arm_angle = ArmAngle(self.model, shoulder, elbow, wrist, reference=reference)
        self.matcher = JointStateMatcher(self.model)
        self._validate(self.params)
        self._build()

        self.setpoint_pub = self.create_publisher(JointTrajectory, "~/joint_setpoints", 10)
        self.psi_pub = self.create_publisher(Float64, "~/arm_angle", 10)
        self.marker_pub = self.create_publisher(MarkerArray, "~/obstacle_markers", 10)
        self.create_subscription(JointState, "/joint_states", self._on_state, 10)
        self.create_subscription(PoseStamped, "~/target_pose", self._on_pose, 10)
        self.create_subscription(Float64, "~/target_arm_angle", self._on_psi, 10)
        self.create_subscription(MarkerArray, "~/obstacles", self._on_obstacles, 10)
        self.add_on_set_parameters_callback(self._on_parameters)
        self.timer = self.create_timer(1.0 / self.params["rate"], self._tick)

        self.q_measured: np.ndarray | None = None
        self.q_plan: np.ndarray | None = None
        self.v_plan = np.zeros(self.model.nv)
        self.goal_pose = None
        self.goal_psi: float | None = None
        self.trajectory: ConfigurationTrajectory | None = None
        self.t_start = 0.0
        self.marker_spheres: list[Sphere] = []
        self.get_logger().info(f"resolving the elbow of '{self.model.name}' (S {shoulder}, E "
                               f"{elbow}, W {wrist}; hand {self.tip}); passive "
                               f"{list(self.model.passive_joints)}")

    # ---------------------------------------------------------------- configuration
    def _validate(self, p: dict) -> None:
        for name in ("hand_weights", "joint_velocity_weights"):
            w = np.asarray(list(p[name]), dtype=float)
            expected = 6 if name == "hand_weights" else self.model.nv
            if w.size not in (1, expected):
                raise ValueError(f"{name}: give 1 or {expected} values, got {w.size}")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"{name} must be finite and >= 0")
        for name in ("arm_angle_weight", "motion_duration", "rate", "obstacle_margin",
                     "joint_limit_margin"):
            if not np.isfinite(p[name]) or p[name] < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {p[name]}")
        if p["rate"] <= 0 or p["motion_duration"] <= 0 or p["obstacle_margin"] <= 0:
            raise ValueError("rate, motion_duration and obstacle_margin must be > 0")
        obs = [x for x in p["obstacles"]]
        if obs not in ([], [0.0]) and (len(obs) % 4 or any(r <= 0 for r in obs[3::4])):
            raise ValueError("obstacles: give x, y, z, radius (> 0) per sphere")

    def _spheres(self) -> list[Sphere]:
        obs = list(self.params["obstacles"])
        spheres = [] if obs in ([], [0.0]) else [
            Sphere(obs[i:i + 3], obs[i + 3], obs[i + 3] + self.params["obstacle_margin"])
            for i in range(0, len(obs), 4)]
        return spheres + getattr(self, "marker_spheres", [])

    def _build(self) -> None:
        p = self.params
        functions = [ArmAngleFunction(self.arm_angle, p["arm_angle_weight"])]
        spheres = self._spheres()
        if spheres:
            functions.append(CollisionAvoidance(self.model, spheres, tip=self.tip))
        if p["joint_limit_margin"] > 0:
            functions.append(JointLimitAvoidance(self.model, p["joint_limit_margin"]))
        w_e = list(p["hand_weights"])
        w_v = list(p["joint_velocity_weights"])
        self.control = ConfigurationControl(self.model, self.tip, functions,
                                            task_weights=w_e if len(w_e) > 1 else w_e[0],
                                            joint_velocity_weights=w_v if len(w_v) > 1
                                            else w_v[0])

    def _on_parameters(self, params) -> SetParametersResult:
        new = dict(self.params)
        for prm in params:
            if prm.name in new:
                new[prm.name] = prm.value
        try:
            self._validate(new)
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        rate_changed = new["rate"] != self.params["rate"]
        self.params = new
        self._build()
        if rate_changed:
            self.timer.cancel()
            self.timer = self.create_timer(1.0 / new["rate"], self._tick)
        return SetParametersResult(successful=True)

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
            if first and (self.goal_pose is not None or self.goal_psi is not None):
                self._start_goal()  # a goal that came before the first state starts now

    def _start_goal(self) -> None:
        if self.q_measured is None:
            self.get_logger().warning("goal received before any /joint_states: it starts "
                                      "with the first state")
            return
        q = self.q_plan if self.q_plan is not None else self.q_measured.copy()
        ws = self.control.workspace
        ws.set_configuration(q)
        p0, R0 = ws.frame_placement(self.tip)
        psi0 = self.arm_angle.evaluate(q).psi
        p1, R1 = self.goal_pose if self.goal_pose is not None else (p0.copy(), R0.copy())
        psi1 = self.goal_psi if self.goal_psi is not None else psi0
        self.q_plan = q.copy()
        self.trajectory = ConfigurationTrajectory(p0, R0, psi0, p1, R1, psi1,
                                                  self.params["motion_duration"])
        self.t_start = self.get_clock().now().nanoseconds * 1e-9

    def _on_pose(self, msg: PoseStamped) -> None:
        try:
            self.goal_pose = pose_from_message(msg, self.model.root_link)
        except ValueError as exc:
            self.get_logger().warning(f"~/target_pose rejected: {exc}")
            return
        self._start_goal()

    def _on_psi(self, msg: Float64) -> None:
        if not np.isfinite(msg.data):
            self.get_logger().warning("~/target_arm_angle rejected: not finite")
            return
        self.goal_psi = float(msg.data)
        self._start_goal()

    def _on_obstacles(self, msg: MarkerArray) -> None:
        spheres = []
        for mk in msg.markers:
            if mk.type != Marker.SPHERE or mk.action != Marker.ADD:
                continue
            r = 0.5 * max(mk.scale.x, mk.scale.y, mk.scale.z)
            c = mk.pose.position
            spheres.append(Sphere([c.x, c.y, c.z], r, r + self.params["obstacle_margin"]))
        self.marker_spheres = spheres
        self._build()

    # ---------------------------------------------------------------- output
    def _tick(self) -> None:
        if self.q_measured is None:
            return
        psi = self.arm_angle.evaluate(self.q_measured)
        self.psi_pub.publish(Float64(data=psi.psi))
        self._publish_markers()
        if self.trajectory is None or self.q_plan is None:
            return
        dt = 1.0 / self.params["rate"]
        t = self.get_clock().now().nanoseconds * 1e-9 - self.t_start
        p_d, R_d, psi_d = self.trajectory(t + dt)
        res = self.control.step(self.q_plan, (p_d, R_d), {"arm_angle": psi_d})
        q_next = res.q_next.copy()
        passive = self.model.passive_dofs
        q_next[passive] = self.q_measured[passive]
        v_next = (q_next - self.q_plan) / dt
        v_next[passive] = 0.0
        a_next = (v_next - self.v_plan) / dt
        self.q_plan, self.v_plan = q_next, v_next
        msg = JointTrajectory()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.joint_names = list(self.model.joint_names)
        pt = JointTrajectoryPoint(positions=q_next.tolist(), velocities=v_next.tolist(),
                                  accelerations=a_next.tolist())
        pt.time_from_start = Duration(sec=0, nanosec=int(dt * 1e9))
        msg.points = [pt]
        self.setpoint_pub.publish(msg)

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


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``elbow_redundancy_resolver --ros-args -p urdf_path:=...``."""
    return run_node(ElbowRedundancyResolver, args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
