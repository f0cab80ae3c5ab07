"""elbow_redundancy_resolver over DDS. This test's node is an ideal position-controlled robot
(it echoes each setpoint as /joint_states); the result is judged with Pinocchio's forward
kinematics of the same URDF."""

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import PoseStamped
from helpers import ROOT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

# the compiled configuration-control step into numba's cache before a node starts
from test_resolver_cyclicity import compiled_step  # noqa: E402, F401, I001
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from underactuated_control.redundancy.arm_angle import arm_angle_from_points

ARM7 = ROOT / "urdf/arm7.urdf"
NODE = "/elbow_redundancy_resolver"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
NAMES = [f"joint{i}" for i in range(1, 8)]


def fk(q):
    pm = pin.buildModelFromUrdf(str(ARM7))
    pd = pm.createData()
    pin.framesForwardKinematics(pm, pd, q)
    pos = {n: pd.oMf[pm.getFrameId(n)].translation.copy() for n in ("link2", "link4", "link6")}
    tool = pd.oMf[pm.getFrameId("tool")]
    psi = arm_angle_from_points(pos["link2"], pos["link4"], pos["link6"])
    return tool.translation.copy(), tool.rotation.copy(), psi


def quaternion(R):
    return pin.Quaternion(R).coeffs()  # x, y, z, w


def test_resolver_reaches_pose_and_arm_angle(ros, launch):
    node = launch("elbow_redundancy_resolver", {
        "urdf_path": str(ARM7), "tip_link": "tool", "shoulder_link": "link2",
        "elbow_link": "link4", "wrist_link": "link6", "motion_duration": 1.5, "rate": 100.0,
        "obstacles": [0.3, 0.5, 0.3, 0.05]})
    n = ros.node
    state = {"q": Q0.copy(), "setpoints": 0}
    pub = n.create_publisher(JointState, "/joint_states", 10)

    def publish():
        msg = JointState(name=NAMES, position=state["q"].tolist(), velocity=[0.0] * 7)
        msg.header.stamp = n.get_clock().now().to_msg()
        pub.publish(msg)

    def on_setpoint(msg: JointTrajectory):
        idx = [msg.joint_names.index(j) for j in NAMES]
        state["q"] = np.array(msg.points[0].positions)[idx]
        assert len(msg.points[0].velocities) == 7 and len(msg.points[0].accelerations) == 7
        state["setpoints"] += 1
        publish()

    psi_seen, markers = [], []
    n.create_subscription(JointTrajectory, f"{NODE}/joint_setpoints", on_setpoint, 10)
    n.create_subscription(Float64, f"{NODE}/arm_angle", lambda m: psi_seen.append(m.data), 10)
    n.create_subscription(MarkerArray, f"{NODE}/obstacle_markers", markers.append, 10)
    pose_pub = n.create_publisher(PoseStamped, f"{NODE}/target_pose", 10)
    psi_pub = n.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)
    assert ros.wait_for(lambda: pub.get_subscription_count() > 0 and
                        pose_pub.get_subscription_count() > 0 and
                        psi_pub.get_subscription_count() > 0, 30), node.log()
    assert ros.wait_for(lambda: bool(psi_seen), 20, step=publish), node.log()
    p0, R0, psi0 = fk(Q0)
    assert abs(psi_seen[-1] - psi0) < 1e-6  # published ψ of the measured state

    target_p = p0 + np.array([0.05, 0.1, -0.05])
    target_psi = psi0 + np.radians(30)
    msg = PoseStamped()
    msg.header.frame_id = "base_link"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, target_p)
    x, y, z, w = quaternion(R0)
    msg.pose.orientation.x, msg.pose.orientation.y = float(x), float(y)
    msg.pose.orientation.z, msg.pose.orientation.w = float(z), float(w)
    psi_pub.publish(Float64(data=float(target_psi)))
    ros.spin_for(0.1)
    pose_pub.publish(msg)
    ros.spin_for(3.0)
    assert state["setpoints"] > 100, node.log()
    p, R, psi = fk(state["q"])
    err_p = np.linalg.norm(p - target_p)
    err_psi = np.degrees(abs(psi - target_psi))
    print(f"\n[resolver] over DDS: hand error {1e3 * err_p:.3f} mm, arm angle error "
          f"{err_psi:.4f} deg after {state['setpoints']} setpoints")
    assert err_p < 1e-3
    assert err_psi < 2.0
    assert np.abs(R - R0).max() < 1e-3
    assert markers and len(markers[-1].markers) == 2  # inner and outer sphere

    # invalid parameter updates are rejected with a reason
    client = AsyncParameterClient(n, "elbow_redundancy_resolver")
    assert client.wait_for_services(10.0)
    fut = client.set_parameters([Parameter("hand_weights", value=[1.0, 2.0])])
    assert ros.wait_for(fut.done, 10)
    res = fut.result().results[0]
    assert not res.successful and "hand_weights" in res.reason
    fut = client.set_parameters([Parameter("arm_angle_weight", value=4.0)])
    assert ros.wait_for(fut.done, 10) and fut.result().results[0].successful


def test_goal_before_the_first_state_starts_with_it(ros, launch):
    """A target that arrives before any /joint_states is kept and started by the first state."""
    node = launch("elbow_redundancy_resolver", {
        "urdf_path": str(ARM7), "tip_link": "tool", "shoulder_link": "link2",
        "elbow_link": "link4", "wrist_link": "link6", "motion_duration": 0.5, "rate": 100.0})
    n = ros.node
    setpoints = []
    n.create_subscription(JointTrajectory, f"{NODE}/joint_setpoints", setpoints.append, 10)
    pub = n.create_publisher(JointState, "/joint_states", 10)
    psi_pub = n.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)
    assert ros.wait_for(lambda: psi_pub.get_subscription_count() > 0, 30), node.log()
    _, _, psi0 = fk(Q0)
    target_psi = psi0 + np.radians(20)
    assert ros.wait_for(lambda: "before any /joint_states" in node.log(), 10,
                        step=lambda: psi_pub.publish(Float64(data=float(target_psi)))), \
        node.log()

    def publish_state():
        msg = JointState(name=NAMES, position=Q0.tolist(), velocity=[0.0] * 7)
        msg.header.stamp = n.get_clock().now().to_msg()
        pub.publish(msg)

    assert ros.wait_for(lambda: len(setpoints) > 10, 20, step=publish_state), node.log()
    ros.spin_for(1.0)  # the 0.5 s motion ends on the target
    last = setpoints[-1]
    idx = [last.joint_names.index(j) for j in NAMES]
    psi_end = fk(np.array(last.points[0].positions)[idx])[2]
    assert abs(np.degrees(psi_end - target_psi)) < 0.5
    # setpoint_lead 0 (the default): unstamped, each point 1/rate after the receiver's cycle
    assert all(m.header.stamp.sec == 0 and m.header.stamp.nanosec == 0 for m in setpoints)
    assert {(m.points[0].time_from_start.sec, m.points[0].time_from_start.nanosec)
            for m in setpoints} == {(0, 10_000_000)}


def test_stamped_setpoints_tick_one_sample_apart(ros, launch):
    """setpoint_lead > 0: each setpoint stamped on the node's clock, the stamps 1/rate apart
    (the plan's clock) while the ticks keep time, never more than setpoint_lead/2 from the
    node's clock, the point reached 1/rate + setpoint_lead after its stamp."""
    lead = 0.02
    node = launch("elbow_redundancy_resolver", {
        "urdf_path": str(ARM7), "tip_link": "tool", "shoulder_link": "link2",
        "elbow_link": "link4", "wrist_link": "link6", "motion_duration": 1.0, "rate": 100.0,
        "setpoint_lead": lead})
    n = ros.node
    received: list[tuple[int, JointTrajectory]] = []
    n.create_subscription(JointTrajectory, f"{NODE}/joint_setpoints", lambda m: received.append(
        (n.get_clock().now().nanoseconds, m)), 10)
    pub = n.create_publisher(JointState, "/joint_states", 10)
    psi_pub = n.create_publisher(Float64, f"{NODE}/target_arm_angle", 10)

    def publish_state():
        msg = JointState(name=NAMES, position=Q0.tolist(), velocity=[0.0] * 7)
        msg.header.stamp = n.get_clock().now().to_msg()
        pub.publish(msg)

    assert ros.wait_for(lambda: psi_pub.get_subscription_count() > 0 and "resolving" in
                        node.log(), 30, step=publish_state), node.log()
    psi_pub.publish(Float64(data=float(fk(Q0)[2] + np.radians(20))))
    assert ros.wait_for(lambda: len(received) > 60, 20, step=publish_state), node.log()
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in received])
    arrival = np.array([t for t, _ in received])
    steps = np.diff(stamps)
    print(f"\n[resolver] stamped setpoints: {np.mean(steps == 10_000_000):.0%} of "
          f"{len(steps)} steps exactly 10 ms; stamp - arrival "
          f"{1e-6 * (stamps - arrival).min():.2f} .. {1e-6 * (stamps - arrival).max():.2f} ms")
    assert np.all(stamps > 0) and np.all(steps > 0)
    assert np.mean(steps == 10_000_000) > 0.8
    assert np.all(stamps <= arrival + lead / 2 * 1e9)  # the node's clock + lead/2 at most
    assert {(m.points[0].time_from_start.sec, m.points[0].time_from_start.nanosec)
            for _, m in received} == {(0, 30_000_000)}


def test_the_parameter_defaults_are_the_planners():
    """The node's parameter table and the ROS-free planner's ``Settings`` start the same."""
    from underactuated_control.nodes.elbow_redundancy_resolver import PARAMETERS
    from underactuated_control.redundancy.resolver import Settings

    assert Settings.from_values({n: s.default for n, s in PARAMETERS.items()}) == Settings()
