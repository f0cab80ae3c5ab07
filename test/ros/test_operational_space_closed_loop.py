"""Mode ``operational_space`` closed loop over DDS, MuJoCo physics: the hand tracks a circle; the
posture torques then move the arm to mid-range in the task's null space while the hand stays;
the belted-ellipsoid markers are published. Judged on MuJoCo's states with Pinocchio's
forward kinematics; the circle is streamed and judged on simulated time (lock-stepped)."""

import time

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import PoseStamped
from harness import LOCKSTEP, SimTimeReferences
from helpers import ROOT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker, MarkerArray

from underactuated_control.scenarios.harness import REFERENCE_LEAD, reference_at, stamp_seconds

ARM7 = ROOT / "urdf/arm7.urdf"
Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]
NODE = "/hybrid_dynamics_controller"


def test_operational_space_tracks_a_circle_and_moves_the_posture_in_the_null_space(ros,
                                                                                      launch):
    launch("mujoco_sim", {"urdf_path": str(ARM7), "initial_positions": Q0, **LOCKSTEP,
                          "use_sim_time": True})
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(ARM7), "mode": "operational_space", "os_task": "position",
        "task_frame": "tool", "publish_jacobians": False, "publish_ellipsoids": True,
        "task_kp_position": 400.0, "task_kd_position": 40.0, "use_sim_time": True})
    pm = pin.buildModelFromUrdf(str(ARM7))
    pd = pm.createData()
    fid = pm.getFrameId("tool")

    def hand(q):
        pin.framesForwardKinematics(pm, pd, np.asarray(q))
        return pd.oMf[fid].translation.copy()

    states, markers = [], []  # (simulated time, positions)
    ros.node.create_subscription(JointState, "/joint_states",
                                 lambda m: states.append((stamp_seconds(m),
                                                          np.array(m.position))), 100)
    ros.node.create_subscription(MarkerArray, f"{NODE}/ellipsoids",
                                 lambda m: markers.append(m), 10)
    references = SimTimeReferences(ros, NODE[1:])
    assert ros.wait_for(lambda: len(states) > 500 and references.pub.get_subscription_count(),
                        60), node.log()
    ros.spin_for(1.0)
    start = hand(states[-1][1])

    def hand_errors(since: float, target) -> np.ndarray:
        """|hand - target| (m) of the states stamped after ``since`` (s, simulated)."""
        return np.array([np.linalg.norm(hand(q) - target(t)) for t, q in states if t > since])

    # a circle of 5 cm in the y-z plane, once in 4 s at constant speed, on simulated time (each
    # point stamped and sent REFERENCE_LEAD ahead: the node applies it at its stamp), judged
    # from 0.5 s in (the constant speed starts with a step) to its end
    radius, period = 0.05, 4.0
    center = start - np.array([0.0, radius, 0.0])

    def circle(t: float) -> np.ndarray:
        return center + radius * np.array([0.0, np.cos(2 * np.pi * t / period),
                                           np.sin(2 * np.pi * t / period)])

    t0 = references.stream(circle, period, lead=REFERENCE_LEAD)
    sent = references.sent
    assert ros.wait_for(lambda: states[-1][0] >= t0 + period, 30)
    t, q = np.array([t for t, _ in states]), np.array([q for _, q in states])
    keep = (t >= t0 + 0.5) & (t <= t0 + period)
    for resumed, _ in references.stalls:  # a stall of this process paused the path: it resumes
        keep &= (t < resumed) | (t >= resumed + 0.5)  # with the same step as the start
    errors = np.linalg.norm(np.array([hand(x) for x in q[keep]]) - reference_at(t[keep], sent),
                            axis=1)
    rms, worst = float(np.sqrt(np.mean(np.square(errors)))), float(np.max(errors))
    # the posture: hold the hand at the circle's end, then pull the joints to mid-range
    hold = circle(period)
    t1 = references.stream(lambda _: hold, 2.0) + 1.0
    baseline = hand_errors(t1, lambda _: hold)
    q_before = states[-1][1].copy()
    client = AsyncParameterClient(ros.node, "hybrid_dynamics_controller")
    assert client.wait_for_services(10.0)
    future = client.set_parameters([Parameter("posture", value="mid_range")])
    assert ros.wait_for(future.done, 10) and future.result().results[0].successful
    t2 = references.stream(lambda _: hold, 3.0)
    moving = hand_errors(t2, lambda _: hold)
    joints_moved = np.abs(states[-1][1] - q_before).max()
    print(f"\n[os] circle r = 5 cm in 4 s: hand error RMS {1e3 * rms:.2f} mm, max "
          f"{1e3 * worst:.2f} mm; hold: hand error {1e3 * max(baseline):.3f} mm without "
          f"posture motion, {1e3 * max(moving):.3f} mm while the posture torques move the "
          f"joints by up to {joints_moved:.3f} rad; this process stalled {len(references.stalls)}"
          f" times (the path paused {sum(p for _, p in references.stalls):.3f} s)")
    # (MuJoCo applies the URDF's 0.1 N·m joint friction, which the law does not model: the
    # hold error is that friction against the task stiffness)
    # 3.45 / 5.56 mm, the same with two CPU hogs beside it (on wall-clock time it was 4.5 mm
    # RMS on a quiet machine, 13-30 mm on a starved one, and the bound 20 mm)
    assert rms < 5e-3 and worst < 1e-2
    assert joints_moved > 0.1  # the null space did move the arm...
    assert max(moving) < 5e-3  # ...with the hand held (exact without friction: unit tests)
    # the ellipsoid markers: two triangle lists at the hand, in the root frame
    assert markers, node.log()
    last = markers[-1].markers
    assert [m.type for m in last] == [Marker.TRIANGLE_LIST] * 2
    assert all(len(m.points) % 3 == 0 and len(m.points) > 100 for m in last)
    assert last[0].header.frame_id == "base_link"


def stream_position(ros, pose_pub, position, seconds: float) -> float:
    """Publish the pose reference ``position`` (identity orientation) every 50 ms for
    ``seconds``; returns the monotonic start time."""
    hold = PoseStamped()
    hold.pose.position.x, hold.pose.position.y, hold.pose.position.z = map(float, position)
    hold.pose.orientation.w = 1.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        pose_pub.publish(hold)
        ros.spin_for(0.05)
    return t0


def launch_sim_with_box_under_the_tool(launch, radius=0.02, gap=0.03, half=0.05, urdf=ARM7,
                                       **sim_params):
    """mujoco_sim of ``urdf`` (arm7 or a variant; more of its parameters in ``sim_params``)
    with a 0.4 m square box ``gap`` below the tool's contact sphere at Q0 (Pinocchio's
    kinematics); the box's contact wrench on ~/contact_wrench.
    Returns (sim, Pinocchio model, its data, the tool's start position)."""
    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()
    pin.framesForwardKinematics(pm, pd, np.array(Q0))
    start = pd.oMf[pm.getFrameId("tool")].translation.copy()
    box = [start[0], start[1], start[2] - radius - gap - half, 0.2, 0.2, half]
    sim = launch("mujoco_sim", {"urdf_path": str(urdf), "initial_positions": Q0,
                                "contact_box": box, "contact_link": "tool",
                                "contact_radius": radius, **sim_params})
    return sim, pm, pd, start


def test_a_force_controlled_direction_holds_a_force_against_a_contact(ros, launch):
    """z force-controlled at -10 N (pushing down) through the simulator's contact wrench."""
    from geometry_msgs.msg import WrenchStamped

    sim, pm, pd, start = launch_sim_with_box_under_the_tool(launch)
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(ARM7), "mode": "operational_space", "os_task": "position",
        "task_frame": "tool", "publish_jacobians": False, "force_axes": [0.0, 0.0, 1.0],
        "force_target": [0.0, 0.0, -10.0], "wrench_topic": "/mujoco_sim/contact_wrench"})
    wrenches, states = [], []
    ros.node.create_subscription(WrenchStamped, "/mujoco_sim/contact_wrench",
                                 lambda m: wrenches.append((time.monotonic(), m.wrench.force.z)),
                                 100)
    ros.node.create_subscription(JointState, "/joint_states",
                                 lambda m: states.append(np.array(m.position)), 100)
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/pose_reference", 10)
    assert ros.wait_for(lambda: len(states) > 200 and pose_pub.get_subscription_count(), 60), \
        node.log() + sim.log()
    t0 = stream_position(ros, pose_pub, start, 5.0)
    last = np.array([f for t, f in wrenches if t > t0 + 4.0])
    pin.framesForwardKinematics(pm, pd, states[-1])
    hand = pd.oMf[pm.getFrameId("tool")].translation
    print(f"\n[os] force control along z: contact force {last.mean():.2f} N (target -10 N), "
          f"std {last.std():.3f} N over the last second; hand moved "
          f"{1e3 * np.linalg.norm(hand[:2] - start[:2]):.2f} mm in x-y (motion-controlled), "
          f"{1e3 * (start[2] - hand[2]):.1f} mm down to the box")
    assert len(last) > 200 and abs(last.mean() + 10.0) < 1.0
    # x, y stay motion-controlled; the box's contact friction holds the sphere where it landed
    assert np.linalg.norm(hand[:2] - start[:2]) < 1e-2
