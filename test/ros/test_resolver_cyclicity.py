"""elbow_redundancy_resolver over DDS: the whole method through the node.

* Cyclicity (Seraji §3.1, FIG. 6): the patent's triangle as a closed ``~/waypoints`` sequence
  (hand p0 -> P1 -> P2 -> p0 while ψ goes ψ0 -> ψ0 - 90° -> ψ0 + 45° -> ψ0) returns every
  joint to where it started, and as three single goals (``~/target_pose`` + ``~/target_arm_angle``
  one after the other) too.
* Every kinematic function on at once (claim 13), parameters validated by name.
* ``iterate_from: sensed`` (claims 1, 3) with a servo that follows only part of each step.
* Desired joint velocities penalised by W_v (claims 11, 18, 20): self-motion in their
  direction with the hand held.
* An arm that does not follow the setpoints is named in the goal's report.

The robot is an ideal (or lagging) position servo in this process that answers each setpoint
with /joint_states; results are judged with Pinocchio's forward kinematics of the same URDF.
"""

import re

import numpy as np
import pinocchio as pin
import pytest
from geometry_msgs.msg import PoseStamped
from helpers import ROOT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from underactuated_control.redundancy.arm_angle import arm_angle_from_points
from underactuated_control.redundancy.resolver import FOLLOW_TOLERANCE

ARM7 = ROOT / "urdf/arm7.urdf"
NODE = "/elbow_redundancy_resolver"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
NAMES = [f"joint{i}" for i in range(1, 8)]
BASE = {"urdf_path": str(ARM7), "tip_link": "tool", "shoulder_link": "link2",
        "elbow_link": "link4", "wrist_link": "link6", "rate": 100.0}


@pytest.fixture(scope="module", autouse=True)
def compiled_step():
    """The compiled configuration-control step into numba's cache before a node starts."""
    from underactuated_control import RobotModel
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.redundancy.arm_angle import ArmAngle
    from underactuated_control.redundancy.configuration_control import ConfigurationControl
    from underactuated_control.redundancy.functions import ArmAngleFunction

    m = RobotModel.from_urdf(ARM7, tip_link="tool")
    cc = ConfigurationControl(m, "tool", [ArmAngleFunction(ArmAngle(m, "link2", "link4",
                                                                    "link6"))])
    cc.step(Q0, frame_placement(m, Q0, "tool"))


def fk(q):
    pm = pin.buildModelFromUrdf(str(ARM7))
    pd = pm.createData()
    pin.framesForwardKinematics(pm, pd, q)
    pos = {n: pd.oMf[pm.getFrameId(n)].translation.copy() for n in ("link2", "link4", "link6")}
    tool = pd.oMf[pm.getFrameId("tool")]
    psi = arm_angle_from_points(pos["link2"], pos["link4"], pos["link6"])
    return tool.translation.copy(), tool.rotation.copy(), psi


class Servo:
    """A position servo: each setpoint moves the joints by ``follow`` of the way there."""

    def __init__(self, ros, follow: float = 1.0) -> None:
        self.ros, self.follow = ros, follow
        self.q = Q0.copy()
        self.setpoints = 0
        self.last_setpoint = Q0.copy()
        n = ros.node
        self.pub = n.create_publisher(JointState, "/joint_states", 10)
        n.create_subscription(JointTrajectory, f"{NODE}/joint_setpoints", self.on_setpoint, 10)

    def publish(self) -> None:
        msg = JointState(name=NAMES, position=self.q.tolist(), velocity=[0.0] * 7)
        msg.header.stamp = self.ros.node.get_clock().now().to_msg()
        self.pub.publish(msg)

    def on_setpoint(self, msg: JointTrajectory) -> None:
        idx = [msg.joint_names.index(j) for j in NAMES]
        target = self.last_setpoint = np.array(msg.points[0].positions)[idx]
        self.q = self.q + self.follow * (target - self.q)
        self.setpoints += 1
        self.publish()


def start(ros, servo, node, *publishers):
    assert ros.wait_for(lambda: servo.pub.get_subscription_count() > 0 and all(
        p.get_subscription_count() > 0 for p in publishers), 30), node.log()
    assert ros.wait_for(lambda: servo.setpoints > 0 or "resolving" in node.log(), 20,
                        step=servo.publish), node.log()
    ros.spin_for(0.3)
    servo.publish()
    ros.spin_for(0.2)


def triangle(p0, psi0):
    P1, P2 = p0 + np.array([0.1, 0.1, 0.1]), p0 + np.array([-0.1, 0.1, 0.1])
    return [(P1, psi0 + np.radians(-90)), (P2, psi0 + np.radians(45)), (p0, psi0)]


def pose_message(position, rotation) -> PoseStamped:
    """A ~/target_pose in the root frame."""
    msg = PoseStamped()
    msg.header.frame_id = "base_link"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
    x, y, z, w = pin.Quaternion(rotation).coeffs()
    msg.pose.orientation.x, msg.pose.orientation.y = float(x), float(y)
    msg.pose.orientation.z, msg.pose.orientation.w = float(z), float(w)
    return msg


def five_cm_goal(ros, launch, follow: float, **params):
    """The resolver launched (motion_duration 1 s, ``params``), a servo following ``follow``
    of each setpoint, and a hand goal 5 cm from Q0's in x, -y, z sent (orientation kept):
    (node, servo, target)."""
    node = launch("elbow_redundancy_resolver", {**BASE, "motion_duration": 1.0, **params})
    servo = Servo(ros, follow=follow)
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/target_pose", 10)
    start(ros, servo, node, pose_pub)
    p0, R0, _ = fk(Q0)
    target = p0 + np.array([0.05, -0.05, 0.05])
    pose_pub.publish(pose_message(target, R0))
    return node, servo, target


def wrap(x):
    return (x + np.pi) % (2 * np.pi) - np.pi


def settle(ros, servo, timeout):
    """Spin until the setpoints stop changing (or ``timeout`` s)."""
    last = servo.q.copy()
    end = timeout
    while end > 0:
        ros.spin_for(0.5)
        end -= 0.5
        if np.abs(servo.q - last).max() < 1e-7:
            return
        last = servo.q.copy()


def test_triangle_waypoints_return_the_joints(ros, launch):
    node = launch("elbow_redundancy_resolver", {**BASE, "motion_duration": 2.0})
    servo = Servo(ros)
    wp_pub = ros.node.create_publisher(Float64MultiArray, f"{NODE}/waypoints", 10)
    start(ros, servo, node, wp_pub)
    p0, R0, psi0 = fk(Q0)
    x, y, z, w = pin.Quaternion(R0).coeffs()
    data = []
    for P, psi in triangle(p0, psi0):
        data += [*map(float, P), float(x), float(y), float(z), float(w), float(wrap(psi)), 2.0]
    wp_pub.publish(Float64MultiArray(data=data))
    assert ros.wait_for(lambda: "goal reached" in node.log() or "rejected" in node.log(), 60), \
        node.log()
    assert "rejected" not in node.log(), node.log()
    settle(ros, servo, 5.0)
    p, R, psi = fk(servo.q)
    back = np.abs(servo.q - Q0).max()
    print(f"\n[resolver cyclicity] triangle of waypoints over DDS: joints back within "
          f"{back:.2e} rad after {servo.setpoints} setpoints; hand "
          f"{1e3 * np.linalg.norm(p - p0):.3f} mm, ψ {np.degrees(abs(wrap(psi - psi0))):.3f}°")
    assert np.linalg.norm(p - p0) < 1e-3 and np.abs(R - R0).max() < 1e-3
    assert abs(wrap(psi - psi0)) < np.radians(0.5)
    assert back < 2e-3 and servo.setpoints > 500


def test_triangle_of_single_goals_returns_the_joints(ros, launch):
    node = launch("elbow_redundancy_resolver", {**BASE, "motion_duration": 2.0})
    servo = Servo(ros)
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/target_pose", 10)
    psi_pub = ros.node.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)
    start(ros, servo, node, pose_pub, psi_pub)
    p0, R0, psi0 = fk(Q0)
    moved = 0.0
    for k, (P, psi) in enumerate(triangle(p0, psi0)):
        psi_pub.publish(Float64(data=float(wrap(psi))))  # kept as the goal's ψ
        ros.spin_for(0.05)
        pose_pub.publish(pose_message(P, R0))
        assert ros.wait_for(lambda k=k: node.log().count("goal reached") >= k + 1, 60), \
            node.log()
        settle(ros, servo, 3.0)
        moved = max(moved, np.abs(servo.q - Q0).max())
    assert "rejected" not in node.log(), node.log()
    p, R, psi = fk(servo.q)
    back = np.abs(servo.q - Q0).max()
    print(f"\n[resolver cyclicity] triangle of single goals over DDS: joints moved up to "
          f"{moved:.2f} rad and came back within {back:.2e} rad")
    assert moved > 0.3
    assert np.linalg.norm(p - p0) < 1e-3 and abs(wrap(psi - psi0)) < np.radians(0.5)
    assert back < 2e-3


def test_every_function_at_once_and_bad_options_named(ros, launch):
    p0, R0, psi0 = fk(Q0)
    node = launch("elbow_redundancy_resolver", {
        **BASE, "motion_duration": 1.5, "elbow_axes": "z", "elbow_weight": 0.1,
        "obstacles": [0.6, 0.6, 0.9, 0.05], "collision_weight": 2.0,
        "joint_limit_margin": 0.1, "locked_joints": ["joint7"], "joint_locking_weight": 1e3,
        "joint_spring_stiffness": [5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "joint_spring_weight": 0.01, "manipulability_gain": 0.01,
        "gravity_torque_gain": 1e-6, "orientation_link": "link6", "orientation_weight": 0.01})
    servo = Servo(ros)
    wp_pub = ros.node.create_publisher(Float64MultiArray, f"{NODE}/waypoints", 10)
    start(ros, servo, node, wp_pub)
    for name in ("arm_angle", "elbow_z", "collision", "joint_limits", "joint_locking",
                 "optimal_joint_movement", "manipulability", "gravity_torque",
                 "orientation_link6"):
        assert name in node.log(), (name, node.log())
    x, y, z, w = pin.Quaternion(R0).coeffs()
    target = p0 + np.array([0.05, 0.0, 0.03])
    wp_pub.publish(Float64MultiArray(data=[*map(float, target), float(x), float(y), float(z),
                                           float(w), float(psi0), 0.0]))
    assert ros.wait_for(lambda: "goal reached" in node.log() or "rejected" in node.log(), 40), \
        node.log()
    assert "rejected" not in node.log(), node.log()
    settle(ros, servo, 3.0)
    p, _, _ = fk(servo.q)
    assert np.linalg.norm(p - target) < 1e-3
    assert abs(servo.q[6] - Q0[6]) < 1e-2  # the (soft) lock of joint 7 held

    client = AsyncParameterClient(ros.node, "elbow_redundancy_resolver")
    assert client.wait_for_services(10.0)
    for param, reason in ((Parameter("elbow_axes", value="q"), "elbow_axes"),
                          (Parameter("locked_joints", value=["nope"]), "nope"),
                          (Parameter("iterate_from", value="dream"), "iterate_from"),
                          (Parameter("orientation_link", value="nolink"), "nolink"),
                          (Parameter("collision_weight", value=-1.0), "collision_weight")):
        fut = client.set_parameters([param])
        assert ros.wait_for(fut.done, 10)
        res = fut.result().results[0]
        assert not res.successful and reason in res.reason, (param.name, res.reason)
    # a malformed waypoint message is refused by field
    wp_pub.publish(Float64MultiArray(data=[0.1] * 8))
    assert ros.wait_for(lambda: "9 numbers per waypoint" in node.log(), 10), node.log()


def test_sensed_iteration_with_a_lagging_servo(ros, launch):
    """The servo covers only 30 % of each step: starting each step from the sensed joints
    (claims 1, 3) still ends on the goal."""
    node, servo, target = five_cm_goal(ros, launch, 0.3, iterate_from="sensed")
    psi0 = fk(Q0)[2]
    ros.spin_for(4.0)
    settle(ros, servo, 3.0)
    p, _, psi = fk(servo.q)
    print(f"\n[resolver sensed] 30 % servo: hand {1e3 * np.linalg.norm(p - target):.3f} mm "
          f"from the goal")
    assert np.linalg.norm(p - target) < 1e-3
    assert abs(wrap(psi - psi0)) < np.radians(1.0)
    assert "not following" not in node.log()  # late, but on the setpoints' way


def test_an_arm_that_does_not_follow_the_setpoints_is_named_in_the_report(ros, launch):
    """The servo never moves (no controller on the setpoints): the plan, from its last
    setpoint, still ends on the goal, but the report says the measured hand is where it
    started: its distance to the goal from Pinocchio's forward kinematics, within 0.1 mm."""
    node, servo, target = five_cm_goal(ros, launch, 0.0)
    p0 = fk(Q0)[0]
    assert ros.wait_for(lambda: "goal reached" in node.log(), 20), node.log()
    found = re.search(r"the measured hand is ([0-9.]+) mm from the goal, the setpoints' "
                      r"[0-9.]+ mm: the arm did not follow them \(is a controller following "
                      r"/\S+/joint_setpoints\?\)", node.log())
    assert found, node.log()
    print(f"\n[resolver, arm not following] {found.group(0)}")
    assert abs(float(found.group(1)) - 1e3 * np.linalg.norm(target - p0)) < 0.1
    assert np.array_equal(servo.q, Q0)
    # and while it moved: the setpoints went farther than FOLLOW_TOLERANCE from the arm
    change = np.abs(servo.last_setpoint - Q0).max()
    assert change > FOLLOW_TOLERANCE
    running = re.search(r"the arm is not following the setpoints: 'joint\d' is ([0-9.]+) rad "
                        r"from every setpoint of the last [0-9.]+ s \(is a controller following "
                        r"/\S+/joint_setpoints on time\?\)", node.log())
    assert running and FOLLOW_TOLERANCE < float(running.group(1)) <= change, node.log()
    print(f"[resolver, arm not following] setpoints {change:.3f} rad from the arm at most; "
          f"{running.group(0)}")


def test_desired_joint_velocities_move_the_arm_in_its_null_space(ros, launch):
    """With W_v > 0 and no arm-angle task, a desired velocity of joint 1 gives self-motion
    with joint 1 moving that way while the hand stays on its goal."""
    node = launch("elbow_redundancy_resolver", {**BASE, "motion_duration": 0.2,
                                                "arm_angle_weight": 0.0,
                                                "joint_velocity_weights": [1.0]})
    servo = Servo(ros)
    psi_pub = ros.node.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)
    v_pub = ros.node.create_publisher(JointState, f"{NODE}/desired_joint_velocities", 10)
    start(ros, servo, node, psi_pub, v_pub)
    p0, R0, psi0 = fk(Q0)
    psi_pub.publish(Float64(data=float(psi0)))  # a goal: hold the hand where it is
    assert ros.wait_for(lambda: "goal reached" in node.log(), 20), node.log()
    q_before = servo.q.copy()
    for _ in range(100):
        v_pub.publish(JointState(name=["joint1"], velocity=[0.3]))
        ros.spin_for(0.02)
    p, R, _ = fk(servo.q)
    dq = servo.q - q_before
    print(f"\n[resolver W_v] desired joint-1 velocity 0.3 rad/s for ~2 s: joint 1 moved "
          f"{dq[0]:.3f} rad, hand {1e3 * np.linalg.norm(p - p0):.3f} mm")
    assert dq[0] > 0.05
    assert np.linalg.norm(p - p0) < 2e-3 and np.abs(R - R0).max() < 5e-3
    v_pub.publish(JointState(name=["joint9"], velocity=[0.3]))
    assert ros.wait_for(lambda: "unknown joint 'joint9'" in node.log(), 10), node.log()
