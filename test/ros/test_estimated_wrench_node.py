"""The controller's ~/estimated_wrench against the wrench MuJoCo applies, over DDS (issue 24).

mujoco_sim pushes the bundled 7-DOF arm through its ~/applied_wrench (``sim.AppliedWrench``:
force and torque in world axes about the origin of the frame ``header.frame_id`` names, through
MuJoCo's ``xfrc_applied``), lock-stepped on simulated time, both URDFs without dry friction;
hybrid_dynamics_controller holds the arm (hold mode, kp 400, kd 40, no integral; the momentum
observer at its default gain 50 /s, task frame ``tool``). Six wrenches, one after the other
(5-30 N, some with a torque, one applied at ``link7``), each compared 0.3 s after it
was sent with the applied wrench carried to the tool's origin in the tool's axes at the
configuration of that state (Pinocchio's kinematics). First, ROS-free: the generalised force
``AppliedWrench`` gives MuJoCo equals J(q)ᵀ w of Pinocchio's frame Jacobian."""

import mujoco
import numpy as np
import pinocchio as pin
from geometry_msgs.msg import WrenchStamped
from helpers import ARM7_PATH
from rosgraph_msgs.msg import Clock
from test_payload_node import NODE, States, launch_arm_carrying_box

from underactuated_control import RobotModel
from underactuated_control.sim import AppliedWrench, build_plant

# (frame, [force (N); torque (N·m)]): world axes, the torque about the frame's origin
WRENCHES = [
    ("tool", [15.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    ("tool", [0.0, -20.0, 5.0, 0.0, 0.0, 0.0]),
    ("tool", [0.0, 0.0, -30.0, 0.0, 0.0, 0.0]),
    ("tool", [5.0, 5.0, 0.0, 0.0, 0.0, 0.5]),
    ("tool", [-8.0, 12.0, -15.0, 1.0, -0.5, 0.3]),
    ("link7", [0.0, 15.0, 0.0, 0.5, 0.0, 0.0]),
]
SETTLE = 0.3  # s of simulated time after each push: the observer's lag e^(-50 * 0.3) = 3e-7


def test_applied_wrench_is_the_frame_wrench_in_mujoco():
    """MuJoCo's generalised force of ``xfrc_applied`` (qfrc_smooth with and without it) equals
    J(q)ᵀ w, J Pinocchio's frame Jacobian in world axes (LOCAL_WORLD_ALIGNED): the torque is
    carried to the body's centre of mass with the right sign, and the frame's offset in its
    body (``tool`` and ``flange`` are fused into link7's body) is taken."""
    text = ARM7_PATH.read_text()
    model = RobotModel.from_urdf(text)
    plant = build_plant(text, model)
    pm = pin.buildModelFromUrdf(str(ARM7_PATH))
    pd = pm.createData()
    applied = AppliedWrench(plant.m, model)
    rng = np.random.default_rng(24)
    for frame in ("tool", "flange", "link7", "link4", "link1"):
        q = rng.uniform(-1.0, 1.0, 7)
        plant.set_state(q, np.zeros(7))
        free = plant.d.qfrc_smooth[plant.vadr].copy()
        w = rng.normal(size=6) * 10.0
        applied.set(frame, w, plant.d)
        applied.apply(plant.d)
        mujoco.mj_forward(plant.m, plant.d)
        J = pin.computeFrameJacobian(pm, pd, q, pm.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(plant.d.qfrc_smooth[plant.vadr] - free, J.T @ w, atol=1e-10)
        applied.set(frame, np.zeros(6), plant.d)  # a zero wrench clears it
        assert not plant.d.xfrc_applied.any() and applied.body == -1
    for frame, match in (("no_such_link", "'no_such_link' is not a link or frame of 'arm7'"),
                         ("base_link", "fixed to the root link"), ("", "frame_id is empty")):
        try:
            applied.set(frame, np.ones(6), plant.d)
        except ValueError as exc:
            assert match in str(exc) and "\n" not in str(exc)
        else:
            raise AssertionError(f"frame '{frame}' accepted")
    try:
        applied.set("tool", np.array([np.nan, 0, 0, 0, 0, 0]), plant.d)
    except ValueError as exc:
        assert "non-finite" in str(exc)
    else:
        raise AssertionError("a non-finite wrench accepted")


def at_tool(pm, pd, q, frame: str, w: np.ndarray) -> np.ndarray:
    """``w`` (world axes, about ``frame``'s origin) carried to the tool's origin, in the tool's
    axes: f, m + (p_frame − p_tool) × f, both rotated by Rᵀ."""
    pin.framesForwardKinematics(pm, pd, q)
    tool = pd.oMf[pm.getFrameId("tool")]
    lever = pd.oMf[pm.getFrameId(frame)].translation - tool.translation
    f, m = w[:3], w[3:] + np.cross(lever, w[:3])
    return np.concatenate([tool.rotation.T @ f, tool.rotation.T @ m])


def test_estimated_wrench_matches_the_wrench_mujoco_applies(ros, launch, tmp_path):
    sim, node, text = launch_arm_carrying_box(launch, tmp_path, mode="hold", box=False,
                                              kp=[400.0], kd=[40.0])
    states = States(ros)
    clock = [-1.0]
    ros.node.create_subscription(
        Clock, "/clock", lambda m: clock.__setitem__(0, m.clock.sec + 1e-9 * m.clock.nanosec), 10)
    pub = ros.node.create_publisher(WrenchStamped, "/mujoco_sim/applied_wrench", 10)
    assert ros.wait_for(lambda: len(states.wrench) > 10 and clock[0] >= 0.0 and
                        pub.get_subscription_count(), 120), sim.log() + node.log()
    estimates = []  # (stamp, frame_id, wrench) of ~/estimated_wrench
    ros.node.create_subscription(
        WrenchStamped, f"/{NODE}/estimated_wrench",
        lambda m: estimates.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec,
                                    m.header.frame_id, np.array(
                                        [m.wrench.force.x, m.wrench.force.y, m.wrench.force.z,
                                         m.wrench.torque.x, m.wrench.torque.y,
                                         m.wrench.torque.z]))), 1000)
    pm = pin.buildModelFromUrdf(str(ARM7_PATH))
    pd = pm.createData()

    def push(frame: str, w) -> tuple[np.ndarray, np.ndarray, str]:
        """Send ``w`` at ``frame``; (estimate, q) at the first state SETTLE s after."""
        msg = WrenchStamped()
        msg.header.frame_id = frame
        f, m = msg.wrench.force, msg.wrench.torque
        f.x, f.y, f.z, m.x, m.y, m.z = map(float, w)
        at = clock[0] + SETTLE
        pub.publish(msg)
        assert ros.wait_for(lambda: estimates and estimates[-1][0] >= at and states.t and
                            states.t[-1] >= at, 120), sim.log()[-2000:] + node.log()[-2000:]
        stamp, frame_id, estimate = next(e for e in estimates if e[0] >= at)
        q = states.q[states.t.index(stamp)]  # the state that estimate answered
        return estimate, q, frame_id

    # an unknown frame: refused with one line, nothing pushes
    quiet, _, _ = push("no_such_link", [10.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    rows, errors = [], []
    for frame, w in WRENCHES:
        w = np.array(w)
        estimate, q, frame_id = push(frame, w)
        expected = at_tool(pm, pd, q, frame, w)
        error = float(np.linalg.norm(estimate - expected) / np.linalg.norm(expected))
        errors.append(error)
        assert frame_id == "tool"
        rows.append(f"| {frame} | {np.round(w[:3], 1).tolist()} N, {np.round(w[3:], 2).tolist()} "
                    f"N·m | {np.round(expected, 3).tolist()} | {np.round(estimate, 3).tolist()} "
                    f"| {100 * error:.4f} % |")
    cleared, _, _ = push("tool", np.zeros(6))
    log = sim.log()
    print("\n[estimated wrench] applied at (world axes) | applied, at the tool's origin in its "
          "axes [f; m] | ~/estimated_wrench | error\n" + "\n".join(rows) +
          f"\n[estimated wrench] unknown frame: {np.round(quiet, 4).tolist()}; after the zero "
          f"wrench: {np.round(cleared, 4).tolist()}; the pushes moved the joints by up to "
          f"{np.abs(np.array(states.q) - states.q[0]).max():.3f} rad")
    assert log.count("~/applied_wrench ignored: header.frame_id 'no_such_link' is not a link "
                     "or frame of 'arm7'") == 1, log[-3000:]
    assert np.linalg.norm(quiet) < 1e-3 and np.linalg.norm(cleared) < 1e-3
    assert max(errors) < 0.05
    # held: the joints yield to the pushes (the wrist's computed-torque stiffness is its small
    # inertia times kp: 0.33 rad in an in-process MuJoCo run of the same pushes) and, 0.3 s
    # after the last one ends, are back within 10 mrad (1 mrad measured; kp 400: e^-6 x 7)
    assert np.abs(np.array(states.q) - states.q[0]).max() < 0.5
    assert np.abs(states.q[-1] - states.q[0]).max() < 1e-2
    assert "applied wrench at 'link7' cleared" in log
