"""hybrid_dynamics_controller in its own process, driven over DDS by this test's node.

Oracle: Pinocchio's dense partitioned hybrid dynamics (4.4) with the passive forces computed here
from the URDF's <dynamics> values."""

import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from helpers import ROOT
from oracle import PinRef
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from underactuated_control import RobotModel

ARM7_PATH = ROOT / "urdf/arm7.urdf"
ARM7 = ARM7_PATH.read_text()
NODE = "/hybrid_dynamics_controller"
COMMAND_JOINTS = ["joint7", "joint1", "joint5", "joint3", "joint6"]


def passive_force(names, v_by_name):
    """T_p = -d v - f tanh(v / 0.01) from the URDF <dynamics> of each joint."""
    root = ET.fromstring(ARM7)
    out = []
    for n in names:
        dyn = root.find(f"joint[@name='{n}']/dynamics")
        d, f = float(dyn.get("damping")), float(dyn.get("friction"))
        out.append(-d * v_by_name[n] - f * np.tanh(v_by_name[n] / 1e-2))
    return np.array(out)


def dense_expected(passive, q, v, qdd_active, command_joints):
    """Effort per command joint: the dense hybrid torque, 0 for passive joints."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    vmap = dict(zip(model.joint_names, v))
    tau_p = passive_force(model.passive_joints, vmap)
    tau_a, qdd_p = ref.dense_hybrid(q, v, qdd_active, tau_p, model.active_dofs,
                                    model.passive_dofs)
    by_name = dict(zip(model.active_joints, tau_a))
    return np.array([by_name.get(n, 0.0) for n in command_joints]), model, ref, qdd_p


class Driver:
    """Publishes /joint_states and references, records commands and diagnostics."""

    def __init__(self, ros, model_joints):
        self.ros = ros
        n = ros.node
        self.commands = []
        self.diagnostics = []
        self.jd = []
        self.jg = []
        self.qddp = []
        n.create_subscription(Float64MultiArray, "/effort_controller/commands",
                              lambda m: self.commands.append((time.monotonic(), list(m.data))),
                              10)
        n.create_subscription(DiagnosticArray, "/diagnostics",
                              lambda m: self.diagnostics.append(m), 10)
        n.create_subscription(Float64MultiArray, f"{NODE}/disturbance_jacobian",
                              lambda m: self.jd.append(m), 10)
        n.create_subscription(Float64MultiArray, f"{NODE}/generalized_jacobian",
                              lambda m: self.jg.append(m), 10)
        n.create_subscription(Float64MultiArray, f"{NODE}/passive_accelerations",
                              lambda m: self.qddp.append(m), 10)
        self.state_pub = n.create_publisher(JointState, "/joint_states", 10)
        self.ref_pub = n.create_publisher(JointTrajectory, f"{NODE}/joint_reference", 10)
        self.joints = list(model_joints)

    def connected(self):
        return (self.state_pub.get_subscription_count() > 0
                and self.ref_pub.get_subscription_count() > 0)

    def publish_state(self, q, v, order=None, extra=True, stamp_offset=0.0, drop=None):
        order = order if order is not None else list(range(len(self.joints)))[::-1]
        msg = JointState()
        t = self.ros.node.get_clock().now().nanoseconds + int(stamp_offset * 1e9)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
        names = [self.joints[i] for i in order if self.joints[i] != drop]
        msg.name = names + (["gripper_finger"] if extra else [])
        idx = {n: i for i, n in enumerate(self.joints)}
        msg.position = [float(q[idx[n]]) for n in names] + ([0.01] if extra else [])
        msg.velocity = [float(v[idx[n]]) for n in names] + ([0.0] if extra else [])
        self.state_pub.publish(msg)

    def publish_reference(self, names, positions, velocities=(), accelerations=()):
        msg = JointTrajectory()
        msg.joint_names = list(names)
        pt = JointTrajectoryPoint()
        pt.positions = [float(x) for x in positions]
        pt.velocities = [float(x) for x in velocities]
        pt.accelerations = [float(x) for x in accelerations]
        msg.points = [pt]
        self.ref_pub.publish(msg)

    def command_after(self, t0, timeout=5.0, step=None):
        ok = self.ros.wait_for(lambda: any(t > t0 for t, _ in self.commands), timeout, step)
        assert ok, "no command received"
        return np.array([c for t, c in self.commands if t > t0][-1])

    def latest_diagnostic_values(self):
        status = self.diagnostics[-1].status[0]
        return status, {kv.key: kv.value for kv in status.values}


def start_controller(launch, **params):
    # the law alone (the oracle is its dense hybrid torque): arm7's URDF friction compensation
    # and the integral (a function of the history) off; both are tested in test_friction*.py
    base = {"urdf_path": str(ARM7_PATH), "passive_joints": ["joint2", "joint4"],
            "mode": "joint", "command_joints": COMMAND_JOINTS, "diagnostics_period": 0.2,
            "state_timeout": 0.5, "friction_compensation": False, "ki": [0.0]}
    base.update(params)
    return launch("hybrid_dynamics_controller", base)


def converge(driver, q, v, expected, publish_ref, tol=1e-9, timeout=20.0):
    """Publish reference + state until the command equals the expectation (or time runs out);
    returns the last command received."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        publish_ref()
        driver.ros.spin_for(0.05)
        t0 = time.monotonic()
        driver.publish_state(q, v)
        try:
            last = driver.command_after(t0, timeout=2.0)
        except AssertionError:
            continue
        if np.abs(last - expected).max() <= tol * max(1.0, np.abs(expected).max()):
            return last
    return last


@pytest.fixture
def state():
    rng = np.random.default_rng(0)
    q = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5]) + rng.uniform(-0.05, 0.05, 7)
    v = rng.uniform(-0.3, 0.3, 7)
    return q, v


def test_command_equals_dense_hybrid_torque(ros, launch, state):
    node = start_controller(launch)
    driver = Driver(ros, [f"joint{i}" for i in range(1, 8)])
    assert ros.wait_for(driver.connected, 30), node.log()
    q, v = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    a_ref = np.array([0.3, -0.2, 0.5, 0.1, -0.4])
    expected, _, ref, qdd_p = dense_expected(["joint2", "joint4"], q, v, a_ref, COMMAND_JOINTS)
    names = list(model.active_joints)[::-1]  # any order
    idx = [model.active_joints.index(n) for n in names]
    qa, va = q[model.active_dofs], v[model.active_dofs]

    def publish_ref():
        driver.publish_reference(names, qa[idx], va[idx], a_ref[idx])

    got = converge(driver, q, v, expected, publish_ref)
    err = np.abs(got - expected).max()
    print(f"\n[node] command vs dense Pinocchio hybrid torque: max error {err:.2e} N·m")
    assert err <= 1e-9 * max(1.0, np.abs(expected).max()), (got, expected)
    # the published J_D, J_G and passive accelerations, with their labelled layouts
    # (their subscriptions may match after the converged cycle: keep the state flowing)
    assert ros.wait_for(lambda: driver.jd and driver.jg and driver.qddp, 10,
                        step=lambda: driver.publish_state(q, v)), node.log()
    jd = driver.jd[-1]
    assert jd.layout.dim[0].label == "rows:joint2,joint4"
    assert jd.layout.dim[1].label == "cols:" + ",".join(model.active_joints)
    M = ref.mass_matrix(q)
    p, a = model.passive_dofs, model.active_dofs
    J_D = -np.linalg.solve(M[np.ix_(p, p)], M[np.ix_(p, a)])
    np.testing.assert_allclose(np.array(jd.data).reshape(2, 5), J_D, atol=1e-9)
    assert driver.jg[-1].layout.dim[0].size == 6 and driver.jg[-1].layout.dim[1].size == 5
    np.testing.assert_allclose(driver.qddp[-1].data, qdd_p, atol=1e-8)


def _set(ros, client, name, value):
    future = client.set_parameters([Parameter(name, value=value)])
    assert ros.wait_for(future.done, 10)
    return future.result().results[0]


def test_parameter_updates_from_another_node(ros, launch, state):
    node = start_controller(launch)
    driver = Driver(ros, [f"joint{i}" for i in range(1, 8)])
    assert ros.wait_for(driver.connected, 30), node.log()
    client = AsyncParameterClient(ros.node, "hybrid_dynamics_controller")
    assert client.wait_for_services(10.0)
    q, v = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    qa, va = q[model.active_dofs], v[model.active_dofs]
    offset = np.array([0.02, -0.01, 0.03, 0.0, 0.01])

    # valid: kp takes effect on the next command
    res = _set(ros, client, "kp", [50.0])
    assert res.successful, res.reason
    qdd = 50.0 * offset + 20.0 * (0.0 - va)  # kd default 20, v_ref = 0
    expected, *_ = dense_expected(["joint2", "joint4"], q, v, qdd, COMMAND_JOINTS)
    got = converge(driver, q, v, expected,
                   lambda: driver.publish_reference(model.active_joints, qa + offset))
    np.testing.assert_allclose(got, expected, atol=1e-9 * max(1, np.abs(expected).max()))

    # invalid updates are rejected with a reason, and change nothing
    for name, value, reason in (("kp", [-1.0], "kp"), ("kp", [1.0, 2.0], "kp"),
                                ("mode", "dance", "mode"), ("passive_joints", ["nope"], "nope"),
                                ("state_timeout", -1.0, "state_timeout"),
                                ("task_frame", "no_link", "no_link")):
        res = _set(ros, client, name, value)
        assert not res.successful and reason in res.reason, (name, res.reason)
    got = converge(driver, q, v, expected,
                   lambda: driver.publish_reference(model.active_joints, qa + offset))
    np.testing.assert_allclose(got, expected, atol=1e-9 * max(1, np.abs(expected).max()))

    # an actuator fails at run time: joint6 becomes passive, its slot gets 0, no restart
    res = _set(ros, client, "passive_joints", ["joint2", "joint4", "joint6"])
    assert res.successful, res.reason
    failed = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4", "joint6"])
    off = dict(zip(model.active_joints, offset))
    qdd = np.array([50.0 * off[n] - 20.0 * v[failed.joint_index(n)]
                    for n in failed.active_joints])
    expected, *_ = dense_expected(["joint2", "joint4", "joint6"], q, v, qdd, COMMAND_JOINTS)
    got = converge(driver, q, v, expected,
                   lambda: driver.publish_reference(model.active_joints, qa + offset))
    np.testing.assert_allclose(got, expected, atol=1e-9 * max(1, np.abs(expected).max()))
    assert got[COMMAND_JOINTS.index("joint6")] == 0.0
    assert node.proc.poll() is None


def test_bad_input(ros, launch, state):
    node = start_controller(launch, mode="hold")
    driver = Driver(ros, [f"joint{i}" for i in range(1, 8)])
    assert ros.wait_for(driver.connected, 30), node.log()
    q, v = state
    t0 = time.monotonic()
    driver.publish_state(q, v)
    first = driver.command_after(t0, 10, step=lambda: driver.publish_state(q, v))
    assert np.all(np.isfinite(first)) and np.any(first != 0)

    def count_after(t):
        return len([1 for s, _ in driver.commands if s > t])

    # NaN state: one zero command, then silence, then recovery on fresh valid data
    ros.spin_for(0.3)  # let commands of the states published so far arrive
    bad = q.copy()
    bad[2] = np.nan
    t1 = time.monotonic()
    for _ in range(10):
        driver.publish_state(bad, v)
        ros.spin_for(0.03)
    ros.spin_for(0.3)
    after = [c for s, c in driver.commands if s > t1]
    assert len(after) == 1 and not any(after[0]), after
    t2 = time.monotonic()
    driver.publish_state(q, v)
    assert np.any(driver.command_after(t2, 5, step=lambda: driver.publish_state(q, v)) != 0)

    # missing joint: zero once, then no command, and an ERROR diagnostic naming the joint
    ros.spin_for(0.3)
    t3 = time.monotonic()
    for _ in range(10):
        driver.publish_state(q, v, drop="joint3")
        ros.spin_for(0.03)
    after = [c for s, c in driver.commands if s > t3]
    assert len(after) == 1 and not any(after[0])
    assert ros.wait_for(lambda: driver.diagnostics and "joint3" in
                        driver.diagnostics[-1].status[0].message, 5)
    status, values = driver.latest_diagnostic_values()
    assert status.level == status.ERROR and values["missing_joints"] == "joint3"

    # stale stamps: zero once, no command from stale states
    driver.publish_state(q, v)
    driver.command_after(time.monotonic() - 0.01, 5, step=lambda: driver.publish_state(q, v))
    ros.spin_for(0.3)
    t4 = time.monotonic()
    for _ in range(10):
        driver.publish_state(q, v, stamp_offset=-2.0)
        ros.spin_for(0.03)
    after = [c for s, c in driver.commands if s > t4]
    assert len(after) == 1 and not any(after[0])

    # stream stops: the watchdog sends zero once after state_timeout
    driver.command_after(time.monotonic() - 0.01, 5, step=lambda: driver.publish_state(q, v))
    ros.spin_for(0.05)
    t5 = time.monotonic()
    ros.spin_for(1.5)
    after = [c for s, c in driver.commands if s > t5]
    zeros = [c for c in after if not any(c)]
    assert len(zeros) == 1 and not any(after[-1]), after

    # unknown joint and wrong length in a reference: rejected, counted, control goes on
    driver.publish_reference(["joint1", "elbow"], [0.0, 0.0])
    driver.publish_reference(["joint1", "joint3"], [0.0])
    ros.spin_for(0.2)
    t6 = time.monotonic()
    cmd = driver.command_after(t6, 5, step=lambda: driver.publish_state(q, v))
    assert np.all(np.isfinite(cmd)) and count_after(t6) >= 1
    assert ros.wait_for(lambda: driver.diagnostics and driver.latest_diagnostic_values()[1]
                        .get("rejected_references") == "2", 5)
    assert "rejected" in node.log()
    assert node.proc.poll() is None


def test_malformed_urdf_at_start_exits_cleanly(launch):
    node = launch("hybrid_dynamics_controller", {"robot_description": "'<robot name=x>'"})
    assert node.wait(60) == 2
    assert "malformed URDF" in node.log()
    node2 = launch("hybrid_dynamics_controller", {"urdf_path": str(ARM7_PATH),
                                                  "passive_joints": ["joint9"]})
    assert node2.wait(60) == 2
    assert "unknown joints ['joint9']" in node2.log()


def test_task_mode_tracks_a_pose_reference_through_J_G(ros, launch):
    """Task mode, state at rest: command = dense hybrid torque for
    qdd_a = J_G⁻¹ (kp (p_ref - p) - drift_G), J_G and drift_G from Pinocchio's dense model."""
    import pinocchio as pin
    from geometry_msgs.msg import PoseStamped

    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(ARM7_PATH), "passive_joints": ["joint1"], "mode": "task",
        "task": "pose", "task_frame": "tool", "task_kp_position": 100.0,
        "state_timeout": 0.5, "friction_compensation": False})  # the law alone: its oracle
    driver = Driver(ros, [f"joint{i}" for i in range(1, 8)])
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/pose_reference", 10)
    assert ros.wait_for(lambda: driver.connected() and pose_pub.get_subscription_count(), 30), \
        node.log()
    q = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])
    v = np.zeros(7)
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint1"])
    ref = PinRef(model, ARM7)
    fid = ref.pm.getFrameId("tool")
    a, p = model.active_dofs, model.passive_dofs
    M = ref.mass_matrix(q)
    J_D = -np.linalg.solve(M[np.ix_(p, p)], M[np.ix_(p, a)])
    pin.computeJointJacobians(ref.pm, ref.pd, ref.q(q))
    pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(q))
    J = pin.getFrameJacobian(ref.pm, ref.pd, fid, pin.LOCAL_WORLD_ALIGNED)[:, ref.v_perm]
    J_G = J[:, a] + J[:, p] @ J_D
    placement = ref.pd.oMf[fid]
    _, qdd_p0 = ref.dense_hybrid(q, v, np.zeros(6), np.zeros(1), a, p)  # qdd_a = 0
    qdd0 = np.zeros(7)
    qdd0[p] = qdd_p0
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd0))
    drift_G = pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid,
                                                pin.LOCAL_WORLD_ALIGNED).vector
    offset = np.array([0.01, -0.02, 0.005])
    a_des = np.r_[100.0 * offset, np.zeros(3)]
    qdd_a = np.linalg.solve(J_G, a_des - drift_G)
    tau_a, _ = ref.dense_hybrid(q, v, qdd_a, np.zeros(1), a, p)
    expected = tau_a  # command_joints default: the active joints in model order

    msg = PoseStamped()
    target = placement.translation + offset
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, target)
    quat = pin.Quaternion(placement.rotation).coeffs()
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = map(float, quat)
    got = converge(driver, q, v, expected, lambda: pose_pub.publish(msg), tol=1e-8)
    err = np.abs(got - expected).max()
    print(f"\n[node] task mode vs dense J_G solution: max error {err:.2e} N·m")
    assert err <= 1e-8 * max(1.0, np.abs(expected).max())
    # a pose in another frame is rejected and counted
    bad = PoseStamped()
    bad.header.frame_id = "camera"
    bad.pose.orientation.w = 1.0
    pose_pub.publish(bad)
    assert ros.wait_for(lambda: driver.diagnostics and driver.latest_diagnostic_values()[1]
                        .get("rejected_references") == "1", 5)


def test_a_stamped_pose_reference_takes_effect_at_its_stamp(ros, launch):
    """A ~/pose_reference stamped ahead of the states waits, as a trajectory's points do, until
    a state reaches its stamp (a scenario streams its path ahead so, and the law then follows
    it at the times it is for whatever the delivery's delay); stamped further ahead than
    ``reference_max_lead``, it is refused and counted."""
    from geometry_msgs.msg import PoseStamped

    from underactuated_control.jacobians import JacobianWorkspace

    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(ARM7_PATH), "mode": "task", "task": "position", "task_frame": "tool",
        "state_timeout": 0.5, "friction_compensation": False, "diagnostics_period": 0.2,
        "reference_max_lead": 2.0})
    driver = Driver(ros, [f"joint{i}" for i in range(1, 8)])
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/pose_reference", 10)
    assert ros.wait_for(lambda: driver.connected() and pose_pub.get_subscription_count(), 30), \
        node.log()
    q, v = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5]), np.zeros(7)

    def commands_for(seconds: float) -> np.ndarray:
        """States stamped now, every 10 ms for ``seconds``: the commands answering them."""
        t0 = time.monotonic()
        while time.monotonic() < t0 + seconds:
            driver.publish_state(q, v)
            ros.spin_for(0.01)
        ros.spin_for(0.05)
        return np.array([c for t, c in driver.commands if t > t0])

    hold = commands_for(0.5)[-1]  # the reference latched where the hand is
    ws = JacobianWorkspace(RobotModel.from_urdf(ARM7))
    ws.set_configuration(q)
    target = ws.frame_placement("tool")[0] + [0.0, 0.0, 0.02]
    msg = PoseStamped()
    now = ros.node.get_clock().now().nanoseconds
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now + 1_000_000_000, 1_000_000_000)
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, target)
    msg.pose.orientation.w = 1.0
    pose_pub.publish(msg)
    waiting = commands_for(0.6)  # the states are still before the reference's stamp
    scale = max(1.0, float(np.abs(hold).max()))
    assert len(waiting) > 10 and np.abs(waiting - hold).max() <= 1e-9 * scale
    commands_for(max(0.0, (now + 1.3e9 - ros.node.get_clock().now().nanoseconds) * 1e-9))
    moved = commands_for(0.2)  # past its stamp: the law pulls the hand 2 cm up
    print(f"\n[stamped reference] command change while waiting "
          f"{np.abs(waiting - hold).max():.1e} N m, after its stamp "
          f"{np.abs(moved[-1] - hold).max():.3f} N m")
    assert np.abs(moved[-1] - hold).max() > 1e-2
    msg.header.stamp.sec += 5  # 5 s ahead of the states: more than reference_max_lead
    pose_pub.publish(msg)
    commands_for(0.5)
    assert ros.wait_for(lambda: driver.diagnostics and driver.latest_diagnostic_values()[1]
                        .get("rejected_references") == "1", 5), node.log()
