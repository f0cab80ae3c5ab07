"""Free-flying robots over DDS: the controller with base odometry or the momentum estimate, the
simulator's free joint, and the `space` scenario.

Oracles: Pinocchio's dense partitioned hybrid dynamics with a free-flyer (4.4), Pinocchio's
momentum (Σ oMi·(I_i v_i)), and MuJoCo's physics (the scenario's recorded states, re-read
from the bag and evaluated with Pinocchio)."""

import json
import time

import numpy as np
import pinocchio as pin
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from helpers import ROOT, issue_arm
from nav_msgs.msg import Odometry
from oracle import PinRef
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from underactuated_control import RobotModel
from underactuated_control.nodes.hybrid_dynamics_controller import ODOMETRY_RESUBSCRIBE

SPACE_PATH = ROOT / "urdf/space_arm.urdf"
SPACE = SPACE_PATH.read_text()
NODE = "/hybrid_dynamics_controller"
ARM = [f"joint{i}" for i in range(1, 8)]
Q_ARM = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])


def pin_momentum(ref: PinRef, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[linear; angular about the world origin] of the whole robot, from Pinocchio."""
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v))
    h = pin.Force.Zero()
    for i in range(1, ref.pm.njoints):
        h += ref.pd.oMi[i].act(ref.pm.inertias[i] * ref.pd.v[i])
    return np.concatenate([h.linear, h.angular])


def passive_forces_zero(model) -> np.ndarray:
    return np.zeros(model.n_passive)  # a floating joint feels no joint force


class Driver:
    def __init__(self, ros):
        n = ros.node
        self.ros = ros
        self.commands = []
        self.diagnostics = []
        n.create_subscription(Float64MultiArray, "/effort_controller/commands",
                              lambda m: self.commands.append((time.monotonic(), list(m.data))),
                              10)
        n.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.state_pub = n.create_publisher(JointState, "/joint_states", 10)
        self.odom_pub = n.create_publisher(Odometry, "/odom", 10)
        self.ref_pub = n.create_publisher(JointTrajectory, f"{NODE}/joint_reference", 10)

    def stamp(self, msg, stamp_ns=None):
        t = stamp_ns if stamp_ns is not None else self.ros.node.get_clock().now().nanoseconds
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)

    def publish(self, q, v, odometry=True, stamp_ns=None, frame="world"):
        if odometry:
            odom = Odometry()
            self.stamp(odom, stamp_ns)
            odom.header.frame_id, odom.child_frame_id = frame, "bus"
            p, o = odom.pose.pose.position, odom.pose.pose.orientation
            p.x, p.y, p.z = map(float, q[:3])
            o.x, o.y, o.z, o.w = map(float, q[3:7])
            lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
            lin.x, lin.y, lin.z = map(float, v[:3])
            ang.x, ang.y, ang.z = map(float, v[3:6])
            self.odom_pub.publish(odom)
        js = JointState()
        self.stamp(js, stamp_ns)
        js.name = ARM[::-1]
        js.position = [float(x) for x in q[7:][::-1]]
        js.velocity = [float(x) for x in v[6:][::-1]]
        self.state_pub.publish(js)

    def publish_reference(self, qa, va, aa):
        msg = JointTrajectory()
        msg.joint_names = ARM
        pt = JointTrajectoryPoint()
        pt.positions, pt.velocities, pt.accelerations = (
            [float(x) for x in qa], [float(x) for x in va], [float(x) for x in aa])
        msg.points = [pt]
        self.ref_pub.publish(msg)

    def converge(self, publish, expected, tol=1e-9, timeout=30.0):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            t0 = time.monotonic()
            publish()
            if self.ros.wait_for(lambda t0=t0: any(t > t0 for t, _ in self.commands), 2.0):
                last = np.array([c for t, c in self.commands if t > t0][-1])
                if np.abs(last - expected).max() <= tol * max(1.0, np.abs(expected).max()):
                    return last
        return last


def random_state(seed=0):
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=4)
    q = np.concatenate([rng.uniform(-0.5, 0.5, 3), quat / np.linalg.norm(quat),
                        Q_ARM + rng.uniform(-0.05, 0.05, 7)])
    v = rng.uniform(-0.3, 0.3, 13)
    return q, v


@pytest.mark.parametrize("gravity", [[0.0, 0.0, 0.0], [0.0, 0.0, -3.71]])
def test_floating_base_command_equals_dense_hybrid_torque(ros, launch, gravity):
    """Joint mode on the free-flying arm, base state from odometry: the effort equals
    Pinocchio's dense hybrid solution with a free-flyer (base passive, T_p = 0)."""
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(SPACE_PATH), "floating_base": True, "gravity": gravity,
        "mode": "joint", "state_timeout": 1.0, "publish_jacobians": False,
        "friction_compensation": False, "ki": [0.0]})  # the law alone (see test_friction*.py)
    driver = Driver(ros)
    assert ros.wait_for(lambda: driver.state_pub.get_subscription_count() > 0 and
                        driver.odom_pub.get_subscription_count() > 0, 30), node.log()
    model = RobotModel.from_urdf(SPACE, floating_base=True, gravity=gravity)
    ref = PinRef(model, SPACE)
    q, v = random_state()
    qdd_a = np.array([0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.1])
    expected, _ = ref.dense_hybrid(q, v, qdd_a, passive_forces_zero(model), model.active_dofs,
                                   model.passive_dofs)

    def publish():
        driver.publish_reference(q[7:], v[6:], qdd_a)
        ros.spin_for(0.05)
        driver.publish(q, v)

    got = driver.converge(publish, expected)
    err = np.abs(got - expected).max()
    print(f"\n[floating] gravity {gravity}: command vs Pinocchio free-flyer hybrid torque: "
          f"max error {err:.2e} N·m")
    assert err <= 1e-9 * max(1.0, np.abs(expected).max()), (got, expected)
    if gravity[2] != 0.0:
        assert "falls freely" in node.log()


def test_momentum_base_state_matches_conservation_of_momentum(ros, launch):
    """No base sensor: the controller's base twist comes from zero total momentum; its command
    equals the dense hybrid torque at the base twist Pinocchio's momentum gives."""
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(SPACE_PATH), "floating_base": True, "gravity": [0.0, 0.0, 0.0],
        "mode": "joint", "base_state": "momentum", "state_timeout": 60.0,
        "publish_jacobians": False, "friction_compensation": False, "ki": [0.0]})
    driver = Driver(ros)
    estimates = []
    ros.node.create_subscription(Odometry, f"{NODE}/base_estimate", estimates.append, 10)
    assert ros.wait_for(lambda: driver.state_pub.get_subscription_count() > 0, 30), node.log()
    model = RobotModel.from_urdf(SPACE, floating_base=True, gravity=(0, 0, 0))
    ref = PinRef(model, SPACE)
    q, v = random_state(1)
    q[:7] = [0, 0, 0, 0, 0, 0, 1]  # base_initial_pose default
    # base twist with zero total momentum: solve pin_momentum(q, [v_b; qdot]) = 0 (linear in v_b)
    v[:6] = 0.0
    h_joints = pin_momentum(ref, q, v)
    A = np.column_stack([pin_momentum(ref, q, np.r_[e, np.zeros(7)]) for e in np.eye(6)])
    v[:6] = np.linalg.solve(A, -h_joints)
    assert np.abs(pin_momentum(ref, q, v)).max() < 1e-12
    qdd_a = np.array([0.1, 0.2, -0.3, 0.1, 0.0, -0.2, 0.3])
    expected, _ = ref.dense_hybrid(q, v, qdd_a, passive_forces_zero(model), model.active_dofs,
                                   model.passive_dofs)
    stamp = ros.node.get_clock().now().nanoseconds  # one stamp: the pose is not integrated

    def publish():
        driver.publish_reference(q[7:], v[6:], qdd_a)
        ros.spin_for(0.05)
        driver.publish(q, v, odometry=False, stamp_ns=stamp)

    got = driver.converge(publish, expected)
    err = np.abs(got - expected).max()
    print(f"\n[floating] momentum estimate: command vs Pinocchio: max error {err:.2e} N·m")
    assert err <= 1e-9 * max(1.0, np.abs(expected).max()), (got, expected)
    assert ros.wait_for(lambda: estimates, 5), node.log()
    tw = estimates[-1].twist.twist
    np.testing.assert_allclose([tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x,
                                tw.angular.y, tw.angular.z], v[:6], atol=1e-12)


def test_missing_stale_and_malformed_odometry_give_zero_effort(ros, launch):
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(SPACE_PATH), "floating_base": True, "gravity": [0.0, 0.0, 0.0],
        "mode": "hold", "state_timeout": 0.3, "diagnostics_period": 0.2})
    driver = Driver(ros)
    # the node's command publisher matched too: its zero effort is sent once, and a CI run
    # lost it to a subscription not yet matched (the node logged it, the test never saw it)
    assert ros.wait_for(lambda: driver.state_pub.get_subscription_count() > 0 and
                        driver.odom_pub.get_subscription_count() > 0 and
                        ros.node.count_publishers("/effort_controller/commands") > 0, 30), \
        node.log()
    ros.spin_for(0.5)  # the other side of the match (the node's writer finding our reader)
    q, v = random_state(2)
    # no odometry at all: one zero command
    assert ros.wait_for(lambda: driver.commands, 10,
                        step=lambda: driver.publish(q, v, odometry=False)), node.log()
    assert driver.commands[-1][1] == [0.0] * 7

    def counters():
        if not driver.diagnostics:
            return {}
        return {kv.key: kv.value for kv in driver.diagnostics[-1].status[0].values}

    # states without odometry for longer than ODOMETRY_RESUBSCRIBE: the node subscribes again
    # (its remedy for a DDS match that never completes); the new subscription receives (below)
    assert ros.wait_for(lambda: int(counters().get("odometry_resubscribed", 0)) > 0,
                        ODOMETRY_RESUBSCRIBE + 10,
                        step=lambda: driver.publish(q, v, odometry=False)), node.log()
    assert "no base odometry on /odom in 5 s while /joint_states arrive: subscribing to it " \
        "again" in node.log()
    assert ros.wait_for(lambda: driver.odom_pub.get_subscription_count() > 0, 10)
    ros.spin_for(0.5)  # the node's new reader finding our writer
    # odometry of another link is refused (named in the log); then a stale one
    bad = Odometry()
    bad.child_frame_id = "link3"
    bad.pose.pose.orientation.w = 1.0
    driver.odom_pub.publish(bad)
    old = ros.node.get_clock().now().nanoseconds - 2_000_000_000
    ros.wait_for(lambda: False, 0.5, step=lambda: driver.publish(q, v, stamp_ns=old))

    assert ros.wait_for(lambda: int(counters().get("base_missing", 0)) > 0 and
                        int(counters().get("base_rejected", 0)) > 0, 10), node.log()
    assert "child_frame_id 'link3' is not the floating joint's child link 'bus'" in node.log()
    # fresh odometry: commands again, finite and not all zero (holding a moving arm)
    n = len(driver.commands)
    assert ros.wait_for(lambda: len(driver.commands) > n + 3, 10,
                        step=lambda: driver.publish(q, v)), node.log()
    last = np.array(driver.commands[-1][1])
    assert np.all(np.isfinite(last)) and np.abs(last).max() > 0


def test_mujoco_sim_free_joint_conserves_momentum(ros, launch):
    """No command acts: the arm's joints start moving, the bus reacts, and the total momentum
    (Pinocchio, from /odom and /joint_states) stays at its start value."""
    sim = launch("mujoco_sim", {
        "urdf_path": str(SPACE_PATH), "floating_base": True, "gravity": [0.0, 0.0, 0.0],
        "initial_positions": list(Q_ARM), "initial_velocities": [0.4, -0.3, 0.5, 0.2, -0.6,
                                                                 0.3, 0.8],
        "hold_until_first_command": False, "integrator": "rk4", "publish_every": 5,
        "real_time_factor": 1.0})
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    states, odoms = [], []
    ros.node.create_subscription(JointState, "/joint_states", states.append, qos)
    ros.node.create_subscription(Odometry, "/odom", odoms.append, qos)
    assert ros.wait_for(lambda: len(states) > 300, 60), sim.log()
    model = RobotModel.from_urdf(SPACE, floating_base=True, gravity=(0, 0, 0))
    ref = PinRef(model, SPACE)
    by_stamp = {(o.header.stamp.sec, o.header.stamp.nanosec): o for o in odoms}
    hs, angles = [], []
    for js in states:
        o = by_stamp.get((js.header.stamp.sec, js.header.stamp.nanosec))
        if o is None:
            continue
        assert o.child_frame_id == "bus" and o.header.frame_id == "world"
        p, r = o.pose.pose.position, o.pose.pose.orientation
        lin, ang = o.twist.twist.linear, o.twist.twist.angular
        q = np.r_[p.x, p.y, p.z, r.x, r.y, r.z, r.w, js.position]
        v = np.r_[lin.x, lin.y, lin.z, ang.x, ang.y, ang.z, js.velocity]
        hs.append(pin_momentum(ref, q, v))
        angles.append(2 * np.arccos(min(1.0, abs(r.w))))
    hs = np.array(hs)
    drift = np.abs(hs - hs[0]).max(axis=0)
    print(f"\n[floating] mujoco_sim, no command, {len(hs)} states: |h| = "
          f"{np.abs(hs[0]).max():.3f}, drift linear {drift[:3].max():.2e} N·s, angular "
          f"{drift[3:].max():.2e} N·m·s; bus turned {np.degrees(max(angles)):.3f} deg")
    assert len(hs) > 200
    assert np.abs(hs[0]).max() > 0.1  # the joints really move the system
    assert np.radians(0.05) < max(angles)  # and the bus reacts
    # RK4 at 1 ms and MuJoCo's dry-friction constraints (frictionloss) conserve it to ~1e-5
    # of its size; a wrong velocity convention of the odometry would be O(1)
    assert drift.max() < 1e-4 * np.abs(hs[0]).max()


def _bag_rotation_and_hand_rms(out, run: str, urdf=SPACE, frame: str = "tool"
                               ) -> tuple[float, float]:
    """A `space` run recomputed from its bag with Pinocchio: the bus's largest rotation from
    its first attitude [deg] and the hand's RMS error [mm] after the path starts, each state
    paired with the last reference stamped at or before it (both stamped with simulated
    time)."""
    from underactuated_control.nodes.bags import read_bag
    from underactuated_control.scenarios.harness import stamp_seconds

    model = RobotModel.from_urdf(urdf, floating_base=True, gravity=(0, 0, 0))
    ref = PinRef(model, urdf)
    fid = ref.pm.getFrameId(frame)
    bag = read_bag(out / f"bag_{run}", ["/joint_states", "/odom", f"{NODE}/pose_reference"])
    odom = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in bag["/odom"]}
    refs = bag[f"{NODE}/pose_reference"]
    ref_t = np.array([stamp_seconds(m) for _, m in refs])
    start = ref_t[0]
    R0, worst, errors = None, 0.0, []
    for _, js in bag["/joint_states"]:
        t = stamp_seconds(js)
        o = odom.get((js.header.stamp.sec, js.header.stamp.nanosec))
        if o is None:
            continue
        r = o.pose.pose.orientation
        quat = pin.Quaternion(r.w, r.x, r.y, r.z)
        R = quat.toRotationMatrix()
        R0 = R if R0 is None else R0
        worst = max(worst, np.linalg.norm(pin.log3(R0.T @ R)))
        if t < start:
            continue
        p = o.pose.pose.position
        q = np.r_[p.x, p.y, p.z, r.x, r.y, r.z, r.w, js.position]
        pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(q))
        k = np.searchsorted(ref_t, t, side="right") - 1
        target = refs[k][1].pose.position
        errors.append(np.linalg.norm(ref.pd.oMf[fid].translation -
                                     [target.x, target.y, target.z]))
    return float(np.degrees(worst)), 1e3 * float(np.sqrt(np.mean(np.square(errors))))


def test_space_scenario_holds_the_bus_attitude(tmp_path, domain):
    """The `space` scenario (held vs naive, lock-stepped MuJoCo on simulated time): the bus
    turns at least 5x less with the disturbance rows at config/space.yaml's passive_weight 1
    (relative: their full effect); recomputed here from the bags with Pinocchio."""
    from underactuated_control.scenarios import run_scenario

    summary = run_scenario("space", tmp_path, duration=6.0, domain=domain,
                           log=lambda s: None)
    on_disk = json.loads((tmp_path / "space" / "summary.json").read_text())
    assert on_disk["runs"].keys() == summary["runs"].keys()
    rotation, rms = {}, {}
    for run in ("held", "naive", "momentum"):
        rotation[run], rms[run] = _bag_rotation_and_hand_rms(tmp_path / "space", run)
        assert rotation[run] == pytest.approx(
            summary["runs"][run]["base_attitude_drift_max_deg"], rel=0.02, abs=1e-4)
    print(f"\n[space] bus rotation held {rotation['held']:.4f} deg, naive "
          f"{rotation['naive']:.4f} deg, momentum {rotation['momentum']:.4f} deg; hand RMS "
          f"{rms['held']:.2f} / {rms['naive']:.2f} / {rms['momentum']:.2f} mm; estimate "
          f"attitude error {summary['runs']['momentum']['estimate_attitude_error_max_deg']:.4f}"
          " deg")
    assert rotation["naive"] > 5 * rotation["held"]
    assert rotation["naive"] > 5 * rotation["momentum"]
    assert max(rms.values()) < 5.0
    assert summary["runs"]["momentum"]["estimate_attitude_error_max_deg"] < 0.1
    assert summary["success"]


@pytest.mark.parametrize("robot, radius, better", [
    ("space_arm", 0.08, 5.0), ("panda", 0.05, 5.0),
    # the panda's 8 cm circle may bring its joints to their bounds: the passive rows then
    # yield to the task (2.1-2.2x in three runs of five, 5.24-5.25x in two); before they did,
    # the safety layer overrode the command and lost the hand (255 mm RMS) in two runs of six
    ("panda", 0.08, 2.0),
    # Talos' left arm (issue 23's <dynamics>) on the 60 kg bus: its wrist reaches its position
    # limit and the passive rows yield there joint by joint (1.3x when the whole step yielded;
    # 2.9x in-process now, 2.81-2.87x here; doc/failure_analysis.md: not yet the goal's 5x)
    ("talos", 0.05, 2.5)])
def test_free_flyers_hold_their_bus_at_passive_weight_1(tmp_path, domain, robot, radius,
                                                        better):
    """Issue 23's free-flyer goal (config/space.yaml's law at `passive_weight` 1, relative):
    the bus turns at least 5x less than with the naive law and the hand stays within 10 mm
    RMS; recomputed from the bags with Pinocchio. `space_arm`: the scenario's arm7 on a
    200 kg bus on the larger circle, 8 cm in 8 s (before the weight was relative, 1 changed
    the bus rotation by 8 % and the config's 1e6 lost the hand, 25.6 mm RMS; five runs now
    5.13-5.18x). `panda`: a free-flyer none of this was developed on, example-robot-data's
    Franka Panda (fingers fixed) on a 60 kg bus (`scenarios.space.arm_on_a_bus`), 5 cm in
    8 s (measured 122x), and on the 8 cm circle the hand kept (doc/failure_analysis.md).
    `talos`: Talos' left arm on that bus, the rest of the humanoid rigid, at the measured
    level, not the goal's (the reaction null space's singularity, doc/failure_analysis.md)."""
    from oracle import ROBOTS

    from underactuated_control.scenarios.space import arm_on_a_bus, run_space

    urdf, frame, spec = SPACE, "tool", None
    if robot == "panda":
        path = tmp_path / "panda_bus.urdf"
        urdf = arm_on_a_bus((ROBOTS / "panda_description/urdf/panda.urdf").read_text())
        path.write_text(urdf)
        frame = "panda_hand_tcp"
        spec = (path, frame, [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])
    elif robot == "talos":
        path = tmp_path / "talos_arm_bus.urdf"
        urdf = arm_on_a_bus(issue_arm("talos_data/robots/talos_reduced.urdf",
                                      joints=[f"arm_left_{i}_joint" for i in range(1, 8)]))
        path.write_text(urdf)
        frame = "arm_left_7_link"
        spec = (path, frame, [0.0, 0.4, 0.0, -1.2, 0.0, 0.4, 0.0])  # bench/failure_cases.py's
    out = tmp_path / "space"
    summary = run_space(out, 8.0, domain, log=lambda s: None, runs=("held", "naive"),
                        radius=radius, robot=spec)
    rotation, rms = {}, {}
    for run in ("held", "naive"):
        rotation[run], rms[run] = _bag_rotation_and_hand_rms(out, run, urdf, frame)
    print(f"\n[{robot}, {100 * radius:g} cm] bus rotation held {rotation['held']:.4f} deg, naive "
          f"{rotation['naive']:.4f} deg ({rotation['naive'] / rotation['held']:.2f}x); hand "
          f"RMS {rms['held']:.2f} / {rms['naive']:.2f} mm")
    assert rotation["held"] == pytest.approx(
        summary["runs"]["held"]["base_attitude_drift_max_deg"], rel=0.02, abs=1e-4)
    assert rotation["naive"] > better * rotation["held"]
    assert rms["held"] < 10.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"radius": 0.0}, "radius must be > 0 m, got 0.0"),
    ({"radius": float("nan")}, "radius must be > 0 m, got nan"),
    ({"runs": ("held", "nope")}, "space run must be one of ['held', 'momentum', 'naive'], got "
                                 "'nope'"),
])
def test_space_scenario_bad_input_is_one_line(tmp_path, kwargs, message):
    """run_space refuses a bad radius or run name before it starts any process."""
    from underactuated_control.scenarios.space import run_space

    with pytest.raises(ValueError) as err:
        run_space(tmp_path, None, 1, log=lambda s: None, **kwargs)
    assert str(err.value) == message
