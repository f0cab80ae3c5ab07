"""hybrid_dynamics_controller under faults and user mistakes, over DDS (issue: stale
references, trajectories across updates, stamps, QoS, other publishers, refusal counts,
shutdown). Oracle: Pinocchio's dense partitioned hybrid dynamics, as in test_controller_node."""

import signal
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from test_controller_node import (
    ARM7,
    COMMAND_JOINTS,
    Driver,
    converge,
    dense_expected,
    start_controller,
)
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from underactuated_control import RobotModel

PASSIVE = ["joint2", "joint4"]
JOINTS = [f"joint{i}" for i in range(1, 8)]
Q0 = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])


def setup(ros, launch, **params):
    node = start_controller(launch, **params)
    driver = Driver(ros, JOINTS)
    assert ros.wait_for(driver.connected, 30), node.log()
    client = AsyncParameterClient(ros.node, "hybrid_dynamics_controller")
    assert client.wait_for_services(10.0)
    return node, driver, client


def set_param(ros, client, name, value):
    future = client.set_parameters([Parameter(name, value=value)])
    assert ros.wait_for(future.done, 10)
    res = future.result().results[0]
    assert res.successful, res.reason


def holding(q, passive=PASSIVE, command_joints=COMMAND_JOINTS):
    """The command that holds q at rest: qdd_a = 0 (reference latched at q, v = 0)."""
    return dense_expected(passive, q, np.zeros(7), np.zeros(7 - len(passive)),
                          command_joints)[0]


def assert_converges(driver, q, expected, publish_ref=lambda: None, timeout=20.0):
    got = converge(driver, q, np.zeros(7), expected, publish_ref, timeout=timeout)
    np.testing.assert_allclose(got, expected, atol=1e-9 * max(1.0, np.abs(expected).max()))


def publish_invalid(ros, driver, joint, value, times):
    """States with ``value`` (NaN, inf) at ``joint``: a safety stop."""
    bad = Q0.copy()
    bad[joint] = value
    for _ in range(times):
        driver.publish_state(bad, np.zeros(7))
        ros.spin_for(0.04)
    return bad


def test_references_relatch_after_a_safety_stop_and_on_mode_switches(ros, launch):
    node, driver, client = setup(ros, launch, mode="hold")
    model = RobotModel.from_urdf(ARM7, passive_joints=PASSIVE)
    a = model.active_dofs
    assert_converges(driver, Q0, holding(Q0))
    # safety stop (a NaN state), then the robot is back 0.6 rad away: hold holds it there
    publish_invalid(ros, driver, 0, np.nan, 5)
    q2 = Q0.copy()
    q2[a] += 0.6 * np.array([1, -1, 1, -1, 1]) / 6
    q2[0] += 0.5
    assert_converges(driver, q2, holding(q2))
    # hold -> joint: the joint reference starts at the measured state (no snap back)
    set_param(ros, client, "mode", "joint")
    assert_converges(driver, q2, holding(q2))
    offset = np.array([0.02, -0.01, 0.03, 0.0, 0.01])
    expected = dense_expected(PASSIVE, q2, np.zeros(7), 100.0 * offset, COMMAND_JOINTS)[0]
    assert_converges(driver, q2, expected,
                     lambda: driver.publish_reference(model.active_joints, q2[a] + offset))
    # joint -> hold somewhere else: held there, not at the old joint reference
    q3 = q2.copy()
    q3[a] -= 0.05
    set_param(ros, client, "mode", "hold")
    assert_converges(driver, q3, holding(q3))


def test_task_mode_after_hold_holds_the_measured_pose_not_an_old_target(ros, launch):
    from geometry_msgs.msg import PoseStamped
    from oracle import PinRef

    passive = ["joint2"]  # joint4 passive would need more torque than the motors have here
    command_joints = [n for n in JOINTS if n not in passive]
    _, driver, client = setup(ros, launch, mode="task", task="position", task_frame="tool",
                              passive_joints=passive, command_joints=command_joints)
    pose_pub = ros.node.create_publisher(PoseStamped,
                                         "/hybrid_dynamics_controller/pose_reference", 10)
    assert ros.wait_for(lambda: pose_pub.get_subscription_count() > 0, 10)
    old = PoseStamped()
    old.pose.position.x, old.pose.position.y, old.pose.position.z = 0.3, 0.2, 0.5
    old.pose.orientation.w = 1.0
    for _ in range(10):
        pose_pub.publish(old)
        driver.publish_state(Q0, np.zeros(7))
        ros.spin_for(0.05)
    set_param(ros, client, "mode", "hold")
    q4 = Q0 + np.array([0.2, 0.0, -0.2, 0.0, 0.2, -0.1, 0.1])
    assert_converges(driver, q4, holding(q4, passive, command_joints))
    set_param(ros, client, "mode", "task")
    # at rest on its own pose the hand must not accelerate: J a = 0 through Pinocchio's ABA
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    ros.spin_for(0.2)
    t0 = time.monotonic()
    command = driver.command_after(t0, 5, step=lambda: driver.publish_state(q4, np.zeros(7)))
    for _ in range(5):  # the setpoint is at the pose and at rest from the first cycle
        t0 = time.monotonic()
        command = driver.command_after(t0, 5, step=lambda: driver.publish_state(q4, np.zeros(7)))
    tau = np.zeros(7)
    for name, value in zip(command_joints, command):
        tau[model.joint_index(name)] = value
    qdd = ref.aba(q4, np.zeros(7), tau)  # passive joints: friction tanh(0) = 0, no damping
    hand_acceleration = ref.frame_jacobian(q4, "tool")[:3] @ qdd
    assert np.abs(hand_acceleration).max() < 1e-7, hand_acceleration


def trajectory(names, start, end, duration):
    msg = JointTrajectory()
    msg.joint_names = list(names)
    for t, p in ((0.0, start), (duration, end)):
        pt = JointTrajectoryPoint(positions=[float(x) for x in p])
        pt.time_from_start.sec, pt.time_from_start.nanosec = int(t), int((t % 1) * 1e9)
        msg.points.append(pt)
    return msg


def test_trajectories_survive_unrelated_updates_and_wait_for_joint_mode(ros, launch):
    node, driver, client = setup(ros, launch, mode="joint")
    model = RobotModel.from_urdf(ARM7, passive_joints=PASSIVE)
    a = model.active_dofs
    assert_converges(driver, Q0, holding(Q0))
    offset = np.array([0.02, -0.01, 0.03, 0.0, 0.01])
    driver.ref_pub.publish(trajectory(model.active_joints, Q0[a], Q0[a] + offset, 1.0))
    for _ in range(6):
        driver.publish_state(Q0, np.zeros(7))
        ros.spin_for(0.05)
    set_param(ros, client, "publish_jacobians", False)  # mid-ramp, unrelated
    ros.spin_for(1.2)
    expected = dense_expected(PASSIVE, Q0, np.zeros(7), 100.0 * offset, COMMAND_JOINTS)[0]
    assert_converges(driver, Q0, expected)  # the ramp went on to its end point
    # a trajectory received in hold mode is kept and starts with mode:=joint
    set_param(ros, client, "mode", "hold")
    assert_converges(driver, Q0, holding(Q0))
    driver.ref_pub.publish(trajectory(model.active_joints, Q0[a], Q0[a] + 2 * offset, 0.5))
    ros.spin_for(1.0)
    assert_converges(driver, Q0, holding(Q0))  # hold still holds
    assert "it starts with mode:=joint" in node.log()
    set_param(ros, client, "mode", "joint")
    ros.spin_for(0.8)
    expected = dense_expected(PASSIVE, Q0, np.zeros(7), 200.0 * offset, COMMAND_JOINTS)[0]
    assert_converges(driver, Q0, expected)


def test_a_trajectory_waits_for_the_first_clock_under_use_sim_time(ros, launch):
    """use_sim_time with no /clock yet (the node's clock reads 0): a trajectory is not begun at
    time 0, where it would be the simulated time into its run at the next sample (its reference
    jumping ahead: a goal accepted before the lock-stepped simulator's first /clock jumped 61 ms
    into a 0.19 s goal and drove xarm7's wrist to 1.55x its velocity limit); the reference holds
    and the trajectory begins at the first state with a clock. States and /clock come from here,
    in simulated time (t = 100 s, then 100.5 s)."""
    from rosgraph_msgs.msg import Clock

    node, driver, _ = setup(ros, launch, mode="joint", use_sim_time=True)
    clock = ros.node.create_publisher(Clock, "/clock", 10)
    assert ros.wait_for(lambda: clock.get_subscription_count() > 0, 10), node.log()
    model = RobotModel.from_urdf(ARM7, passive_joints=PASSIVE)
    a = model.active_dofs
    offset = np.array([0.02, -0.01, 0.03, 0.0, 0.01])

    def answer(t):
        """The command answering a state at rest at Q0 stamped ``t`` s (simulated)."""
        msg = JointState(name=JOINTS, position=[float(x) for x in Q0], velocity=[0.0] * 7)
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round(t % 1 * 1e9))
        t0 = time.monotonic()
        driver.state_pub.publish(msg)
        return driver.command_after(t0, 5.0)

    def tick(t):
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = int(t), int(round(t % 1 * 1e9))
        for _ in range(5):  # the node's time source listens best effort
            clock.publish(msg)
            ros.spin_for(0.05)

    def law(qdd):  # the dense hybrid torque of qdd_a at Q0, at rest
        return dense_expected(PASSIVE, Q0, np.zeros(7), qdd, COMMAND_JOINTS)[0]

    def close(got, expected):
        return np.abs(got - expected).max() <= 1e-9 * np.abs(expected).max()

    # from Q0 to Q0 + offset in 1 s, linear: v_ref = offset / 1 s from its start on
    driver.ref_pub.publish(trajectory(model.active_joints, Q0[a], Q0[a] + offset, 1.0))
    ros.spin_for(0.5)
    first = answer(100.0)  # no /clock yet: held (before: begun at 0 -> kd v_ref = 20 offset)
    assert close(first, holding(Q0)), (first, holding(Q0), law(20.0 * offset))
    tick(100.0)
    begun = answer(100.0)  # begun now: kd v_ref (before: 100 s in, the end: kp offset)
    assert close(begun, law(20.0 * offset)), (begun, law(20.0 * offset), law(100.0 * offset))
    tick(100.5)
    half = answer(100.5)  # half-way: kp offset / 2 + kd v_ref
    assert close(half, law(70.0 * offset)), (half, law(70.0 * offset))


def test_a_future_stamp_is_refused_alone(ros, launch):
    node, driver, _ = setup(ros, launch, mode="hold")
    assert_converges(driver, Q0, holding(Q0))
    driver.publish_state(Q0, np.zeros(7), stamp_offset=5.0)
    ros.spin_for(0.1)
    t0 = time.monotonic()
    driver.publish_state(Q0, np.zeros(7))
    command = driver.command_after(t0, 1.0)  # not 5 s later
    np.testing.assert_allclose(command, holding(Q0), atol=1e-9 * np.abs(holding(Q0)).max())
    assert ros.wait_for(lambda: driver.diagnostics and driver.latest_diagnostic_values()[1]
                        .get("future_stamps") == "1", 5, step=lambda: driver.publish_state(
                            Q0, np.zeros(7)))
    assert "in the future refused" in node.log()


def test_best_effort_states_are_heard_and_other_publishers_reported(ros, launch):
    node = start_controller(launch, mode="hold")
    driver = Driver(ros, JOINTS)
    sensor = ros.node.create_publisher(JointState, "/joint_states",
                                       QoSProfile(depth=10,
                                                  reliability=ReliabilityPolicy.BEST_EFFORT))
    driver.other = ros.node.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
    assert ros.wait_for(lambda: sensor.get_subscription_count() > 0, 30), node.log()
    driver.state_pub = sensor  # the Driver's messages, sent best effort
    assert_converges(driver, Q0, holding(Q0))
    # the references keep JointTrajectoryController's reliable QoS unless told otherwise
    for topic in ("joint_reference", "pose_reference"):
        assert ros.subscription_reliability(f"/hybrid_dynamics_controller/{topic}",
                                            "hybrid_dynamics_controller") == {
            ReliabilityPolicy.RELIABLE}, topic
    assert ros.wait_for(lambda: driver.diagnostics and driver.latest_diagnostic_values()[1]
                        .get("command_publishers") == "2", 5,
                        step=lambda: driver.publish_state(Q0, np.zeros(7)))
    status, _ = driver.latest_diagnostic_values()
    assert status.level == status.WARN and "2 publishers" in status.message
    assert "another controller" in node.log()


def test_refusals_are_counted_by_cause_and_logged_while_silent(ros, launch):
    node, driver, _ = setup(ros, launch, mode="hold")
    assert_converges(driver, Q0, holding(Q0))
    bad = publish_invalid(ros, driver, 3, np.inf, 3)
    ros.spin_for(2.1)
    driver.publish_state(bad, np.zeros(7))  # still silent: the reason is logged again
    no_velocity = JointState(name=JOINTS, position=[float(x) for x in Q0])
    no_velocity.header.stamp = ros.node.get_clock().now().to_msg()
    driver.state_pub.publish(no_velocity)
    short = JointState(name=JOINTS, position=[0.0] * 6, velocity=[0.0] * 7)
    short.header.stamp = ros.node.get_clock().now().to_msg()
    driver.state_pub.publish(short)
    expected = {"nonfinite": "4", "missing_velocities": "1", "length_mismatch": "1"}
    assert ros.wait_for(lambda: driver.diagnostics and all(
        driver.latest_diagnostic_values()[1].get(k) == v for k, v in expected.items()), 5), \
        driver.latest_diagnostic_values()[1]
    assert "still silent: non-finite /joint_states for ['joint4']" in node.log()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_shutdown_is_clean_and_sends_zero_effort(ros, launch, sig):
    node, driver, client = setup(ros, launch, mode="hold")
    assert_converges(driver, Q0, holding(Q0))
    for mode in ("joint", "task", "hold", "joint"):  # the sequence that broke SIGINT
        set_param(ros, client, "mode", mode)
        driver.publish_state(Q0, np.zeros(7))
        ros.spin_for(0.05)
    for _ in range(20):  # signal it while states are flowing (likely inside a callback)
        driver.publish_state(Q0, np.zeros(7))
        ros.spin_for(0.005)
    t0 = time.monotonic()
    node.proc.send_signal(sig)
    assert ros.wait_for(lambda: node.proc.poll() is not None, 15,
                        step=lambda: driver.publish_state(Q0, np.zeros(7)))
    ros.spin_for(0.3)
    assert node.proc.returncode == 0, node.log()
    log = node.log()
    assert "Traceback" not in log and "Error" not in log, log
    last = [c for t, c in driver.commands if t > t0][-1]
    assert not any(last) and "zero effort sent" in log
