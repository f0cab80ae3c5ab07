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
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..control.joint_space import JointStateMatcher, MissingJointsError
from ..model import RobotModel
from ..parameters import ParameterError, ParameterSpec, per_joint, table
from ..redundancy.arm_angle import ArmAngle
from ..redundancy.configuration_control import ConfigurationControl, ConfigurationTrajectory
from ..redundancy.functions import (
    ArmAngleFunction,
    CollisionAvoidance,
    JointLimitAvoidance,
    Sphere,
)
from .common import pose_from_message, run_node
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


PARAMETERS = table(
    *robot_parameters(passive_description="joints without actuator (planned as locked)"),
    ParameterSpec("shoulder_link", "", "link whose origin is S", read_only=True),
    ParameterSpec("elbow_link", "", "link whose origin is E", read_only=True),
    ParameterSpec("wrist_link", "", "link whose origin is W", read_only=True),
    ParameterSpec("reference_direction", [0.0, 0.0, 1.0], "direction spanning the arm angle's "
                  "reference plane with SW (root axes)", read_only=True),
    ParameterSpec("hand_weights", [16.0], "W_e: x, y, z, rx, ry, rz (one value: all)",
                  low=0.0, high=1e9, validator=_one_per("hand_weights", lambda m: HAND_AXES)),
    ParameterSpec("arm_angle_weight", 1.0, "W_c of the arm angle", low=0.0, high=1e9),
    ParameterSpec("joint_velocity_weights", [0.0], "W_v per joint (one value: all)", low=0.0,
                  high=1e9, validator=_one_per("joint_velocity_weights",
                                               lambda m: m.joint_names)),
    ParameterSpec("motion_duration", 3.0, "duration of a goal motion", unit="s", low=0.05,
                  high=600.0),
    ParameterSpec("rate", 100.0, "setpoint rate", unit="Hz", low=1.0, high=2000.0),
    ParameterSpec("obstacles", [0.0], "spheres x, y, z, radius (root frame, m) repeated; [] or "
                  "[0.0]: none", validator=_check_obstacles),
    ParameterSpec("obstacle_margin", 0.1, "outer minus inner sphere-of-influence radius",
                  unit="m", low=1e-3, high=10.0),
    ParameterSpec("joint_limit_margin", 0.1, "joint-limit avoidance zone (0: off)", unit="rad",
                  low=0.0, high=1.0),
)


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
        self.marker_spheres: list[Sphere] = []
        self.control = self._build(p, set(PARAMETERS))
        self.params.on_update(self._build, self._commit)

        self.setpoint_pub = self.create_publisher(JointTrajectory, "~/joint_setpoints", 10)
        self.psi_pub = self.create_publisher(Float64, "~/arm_angle", 10)
        self.marker_pub = self.create_publisher(MarkerArray, "~/obstacle_markers", 10)
        self.create_subscription(JointState, "/joint_states", self._on_state, 10)
        self.create_subscription(PoseStamped, "~/target_pose", self._on_pose, 10)
        self.create_subscription(Float64, "~/target_arm_angle", self._on_psi, 10)
        self.create_subscription(MarkerArray, "~/obstacles", self._on_obstacles, 10)
        self.timer = self.create_timer(1.0 / p["rate"], self._tick)

        self.q_measured: np.ndarray | None = None
        self.q_plan: np.ndarray | None = None
        self.v_plan = np.zeros(self.model.nv)
        self.goal_pose = None
        self.goal_psi: float | None = None
        self.trajectory: ConfigurationTrajectory | None = None
        self.t_start = 0.0
        self.get_logger().info(
            f"resolving the elbow of '{self.model.name}' (S {links['shoulder_link']}, E "
            f"{links['elbow_link']}, W {links['wrist_link']}; hand {self.tip}); passive "
            f"{list(self.model.passive_joints)}")

    # ---------------------------------------------------------------- configuration
    def _spheres(self, p: dict | None = None) -> list[Sphere]:
        p = self.params.values if p is None else p
        obs = list(p["obstacles"])
        spheres = [] if obs in ([], [0.0]) else [
            Sphere(obs[i:i + 3], obs[i + 3], obs[i + 3] + p["obstacle_margin"])
            for i in range(0, len(obs), 4)]
        return spheres + self.marker_spheres

    def _build(self, p: dict, changed: set[str]) -> ConfigurationControl:
        """The configuration-control step for the parameter values ``p``."""
        functions = [ArmAngleFunction(self.arm_angle, p["arm_angle_weight"])]
        spheres = self._spheres(p)
        if spheres:
            functions.append(CollisionAvoidance(self.model, spheres, tip=self.tip))
        if p["joint_limit_margin"] > 0:
            functions.append(JointLimitAvoidance(self.model, p["joint_limit_margin"]))
        return ConfigurationControl(
            self.model, self.tip, functions,
            task_weights=per_joint("hand_weights", p["hand_weights"], HAND_AXES),
            joint_velocity_weights=per_joint("joint_velocity_weights",
                                             p["joint_velocity_weights"],
                                             self.model.joint_names))

    def _commit(self, control: ConfigurationControl, p: dict, changed: set[str]) -> None:
        self.control = control
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
        self.control = self._build(self.params.values, set())

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
