"""elbow_redundancy_resolver under hostile input, over DDS: malformed obstacle markers, goals
too fast, too far or outside [-π, π], an obstacle engulfing the arm. Every setpoint it
publishes is checked against the URDF's own numbers (read here with ElementTree) and the
acceleration bound; the goals that are reached are judged with Pinocchio's kinematics.

This test's node is an ideal position-controlled robot: it echoes each setpoint as
/joint_states."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from helpers import ROOT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

# the compiled configuration-control step into numba's cache before a node starts
from test_resolver_cyclicity import compiled_step  # noqa: E402, F401, I001
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from underactuated_control.redundancy.arm_angle import arm_angle_from_points

ARM7 = ROOT / "urdf/arm7.urdf"
NODE = "/elbow_redundancy_resolver"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
NAMES = [f"joint{i}" for i in range(1, 8)]
ACCELERATION = 10.0  # rad/s², the node's default acceleration_limit
RESOLVER = {"urdf_path": str(ARM7), "tip_link": "tool", "shoulder_link": "link2",
            "elbow_link": "link4", "wrist_link": "link6", "rate": 100.0}


def urdf_limits():
    """lower, upper, velocity of joint1..7 from the URDF text."""
    root = ET.parse(ARM7).getroot()
    lim = {j.get("name"): j.find("limit") for j in root.findall("joint")}  # not <ros2_control>
    return (np.array([float(lim[n].get(k)) for n in NAMES]) for k in ("lower", "upper",
                                                                       "velocity"))


LOWER, UPPER, VELOCITY = urdf_limits()
PM = pin.buildModelFromUrdf(str(ARM7))
PD = PM.createData()


def fk(q):
    pin.framesForwardKinematics(PM, PD, q)
    pos = {n: PD.oMf[PM.getFrameId(n)].translation.copy() for n in ("link2", "link4", "link6")}
    tool = PD.oMf[PM.getFrameId("tool")]
    return tool.translation.copy(), tool.rotation.copy(), arm_angle_from_points(
        pos["link2"], pos["link4"], pos["link6"])


class EchoRobot:
    """Publishes /joint_states at the last setpoint; records every setpoint."""

    def __init__(self, ros):
        self.ros, n = ros, ros.node
        self.q = Q0.copy()
        self.points = []  # (positions, velocities, accelerations) in NAMES order
        self.pub = n.create_publisher(JointState, "/joint_states", 10)
        n.create_subscription(JointTrajectory, f"{NODE}/joint_setpoints", self._on_setpoint, 50)
        self.pose_pub = n.create_publisher(PoseStamped, f"{NODE}/target_pose", 10)
        self.psi_pub = n.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)
        self.obstacle_pub = n.create_publisher(MarkerArray, f"{NODE}/obstacles", 10)

    def publish(self):
        msg = JointState(name=NAMES, position=self.q.tolist(), velocity=[0.0] * 7)
        msg.header.stamp = self.ros.node.get_clock().now().to_msg()
        self.pub.publish(msg)

    def _on_setpoint(self, msg):
        idx = [msg.joint_names.index(j) for j in NAMES]
        pt = msg.points[0]
        arrays = [np.array(x, dtype=float)[idx] for x in (pt.positions, pt.velocities,
                                                          pt.accelerations)]
        self.points.append(arrays)
        self.q = arrays[0]
        self.publish()

    def connect(self, node):
        assert self.ros.wait_for(lambda: all(p.get_subscription_count() for p in (
            self.pub, self.pose_pub, self.psi_pub, self.obstacle_pub)), 30), node.log()
        assert self.ros.wait_for(lambda: "resolving the elbow" in node.log(), 20,
                                 step=self.publish), node.log()
        self.ros.spin_for(0.3)
        self.publish()

    def pose(self, position, rotation):
        msg = PoseStamped()
        msg.header.frame_id = "base_link"
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
        o = msg.pose.orientation
        o.x, o.y, o.z, o.w = map(float, pin.Quaternion(rotation).coeffs())
        self.pose_pub.publish(msg)


def check_inside_limits(points, label):
    """Every recorded setpoint inside the URDF position and velocity limits, accelerations
    inside the bound, all finite; returns the largest |v| and |a|."""
    q = np.array([p[0] for p in points])
    v = np.array([p[1] for p in points])
    a = np.array([p[2] for p in points])
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.all(np.isfinite(a)), label
    assert np.all(q >= LOWER - 1e-12) and np.all(q <= UPPER + 1e-12), (
        label, (q - UPPER).max(), (LOWER - q).max())
    assert np.all(np.abs(v) <= VELOCITY * (1 + 1e-9)), (label, np.abs(v).max(axis=0))
    assert np.abs(a).max() <= ACCELERATION * (1 + 1e-6), (label, np.abs(a).max())
    return float(np.abs(v).max()), float(np.abs(a).max())


def wait_log(ros, node, text, timeout=10.0, count=1):
    ok = ros.wait_for(lambda: node.log().count(text) >= count, timeout)
    assert ok, f"'{text}' not in the log:\n{node.log()}"


def test_setpoints_stay_inside_the_urdf_limits(ros, launch):
    node = launch("elbow_redundancy_resolver", {**RESOLVER, "motion_duration": 0.05})
    robot = EchoRobot(ros)
    diagnostics = []
    ros.node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    robot.connect(node)
    p0, R0, psi0 = fk(Q0)

    # 1. a 30° elbow swing in 0.05 s (25 rad/s asked of 2.5 rad/s joints): stretched in time
    robot.psi_pub.publish(Float64(data=float(psi0 + math.radians(30))))
    wait_log(ros, node, "goal reached", 15)
    swing = list(robot.points)
    v_max, a_max = check_inside_limits(swing, "fast goal")
    p, R, psi = fk(robot.q)
    print(f"\n[resolver limits] 30° swing asked in 0.05 s: {len(swing)} setpoints "
          f"({len(swing) / 100:.2f} s), largest |v| {v_max:.3f} rad/s (limit 2.5), largest "
          f"|a| {a_max:.3f} rad/s² (bound {ACCELERATION}); arm angle error "
          f"{abs(math.degrees(psi - psi0 - math.radians(30))):.4f}°, hand moved "
          f"{1e3 * np.linalg.norm(p - p0):.4f} mm")
    assert len(swing) > 20  # took far longer than 0.05 s
    assert abs(math.degrees(psi - psi0) - 30) < 0.5
    assert np.linalg.norm(p - p0) < 1e-3
    assert "motion_duration 0.05 s stretched to" in node.log()

    # 2. arm angles outside [-π, π] or not finite, and a hand 3 m away: refused by reason
    robot.psi_pub.publish(Float64(data=100.0))
    wait_log(ros, node, "~/target_arm_angle rejected: 100 rad is outside [-pi, pi]")
    robot.psi_pub.publish(Float64(data=float("nan")))
    wait_log(ros, node, "~/target_arm_angle rejected: not finite")
    robot.pose(p0 + np.array([3.0, 0.0, 0.0]), R0)
    wait_log(ros, node, "beyond the reach")
    assert "~/target_pose rejected: the target is 3." in node.log()

    # 3. a hand goal within the sum of the link lengths but outside the workspace: the dry run
    # of the goal does not reach it, so it is refused and the arm stays where it is
    start = len(robot.points)
    robot.pose(np.array([0.95, 0.0, 0.633]), R0)
    wait_log(ros, node, "~/target_pose rejected: the planned motion ends", 10)
    ros.spin_for(0.5)
    held = robot.points[start:]
    assert held and max(np.abs(x[0] - swing[-1][0]).max() for x in held) < 1e-6
    print("[resolver limits] goal 0.996 m from joint1 (reach bound 1.090 m): "
          + node.log().split("~/target_pose rejected: ")[-1].splitlines()[0])

    # 4. an obstacle engulfing the arm, set at run time while the goal is held
    client = AsyncParameterClient(ros.node, "elbow_redundancy_resolver")
    assert client.wait_for_services(10.0)
    start = len(robot.points)
    fut = client.set_parameters([Parameter("obstacles", value=[0.2, 0.0, 0.5, 1.0])])
    assert ros.wait_for(fut.done, 10) and fut.result().results[0].successful
    wait_log(ros, node, "inside an obstacle's inner sphere", 10)
    ros.spin_for(3.0)
    engulfed = robot.points[start:]
    assert len(engulfed) > 200, node.log()
    v_in, a_in = check_inside_limits(engulfed, "engulfing obstacle")
    print(f"[resolver limits] obstacle engulfing the arm: {len(engulfed)} setpoints, largest "
          f"|q| {np.abs([x[0] for x in engulfed]).max():.3f} rad, |v| {v_in:.3f} rad/s, |a| "
          f"{a_in:.3f} rad/s²")
    assert node.proc.poll() is None, node.log()
    assert ros.wait_for(lambda: any(
        kv.key == "rejected_goals" and int(kv.value) >= 4
        for d in diagnostics for s in d.status for kv in s.values), 5)


def _sphere(ns, mid, position, scale):
    mk = Marker(type=Marker.SPHERE, action=Marker.ADD, ns=ns, id=mid)
    mk.header.frame_id = "base_link"
    mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = position
    mk.pose.orientation.w = 1.0
    mk.scale.x, mk.scale.y, mk.scale.z = scale
    return mk


def test_malformed_obstacle_markers_are_rejected_by_name(ros, launch):
    node = launch("elbow_redundancy_resolver", {**RESOLVER, "motion_duration": 0.5})
    robot = EchoRobot(ros)
    shown = []
    ros.node.create_subscription(MarkerArray, f"{NODE}/obstacle_markers", shown.append, 10)
    robot.connect(node)
    nan = float("nan")
    msg = MarkerArray(markers=[
        _sphere("bad_scale", 1, (0.3, 0.5, 0.3), (-0.1, -0.1, -0.1)),
        _sphere("bad_scale", 2, (0.3, 0.5, 0.3), (nan, 0.1, 0.1)),
        _sphere("bad_position", 3, (nan, 0.5, 0.3), (0.1, 0.1, 0.1)),
        _sphere("good", 7, (0.3, 0.5, 0.3), (0.1, 0.1, 0.1)),
    ])
    robot.obstacle_pub.publish(msg)
    wait_log(ros, node, "marker ns 'bad_scale' id 1 ignored: scale must be finite and > 0")
    wait_log(ros, node, "marker ns 'bad_scale' id 2 ignored")
    wait_log(ros, node, "marker ns 'bad_position' id 3 ignored: non-finite position")
    assert "good" not in node.log() and "Traceback" not in node.log()
    # the valid sphere is kept: its inner (radius 0.05) and outer sphere are shown
    assert ros.wait_for(lambda: shown and len(shown[-1].markers) == 2, 10, step=robot.publish)
    inner = shown[-1].markers[0]
    assert (inner.pose.position.x, inner.pose.position.y, inner.pose.position.z) == (
        0.3, 0.5, 0.3) and abs(inner.scale.x - 0.1) < 1e-12
    # the node is alive and still plans
    _, _, psi0 = fk(Q0)
    robot.psi_pub.publish(Float64(data=float(psi0 + math.radians(10))))
    wait_log(ros, node, "goal reached", 15)
    assert node.proc.poll() is None
    check_inside_limits(robot.points, "after bad markers")
