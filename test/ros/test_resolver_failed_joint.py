"""The elbow resolver moving an arm with a failed joint along the patent's triangle, over DDS
(issue 23 item 5; Jain & Rodriguez's claims 11, 22): mujoco_sim (lock-stepped, simulated time,
zero gravity, no motor on joint1, which turns freely), hybrid_dynamics_controller in joint mode
(joint1 passive) following the resolver's ``~/joint_setpoints``, elbow_redundancy_resolver
(joint1 passive; the hand's position and the arm angle are the task; its setpoints stamped
three samples ahead on simulated time, ``setpoint_lead``, as bringup does with the
simulator; the controller takes them best effort, as bringup has it). With
``passive_joint_motion: locked`` the resolver refuses the triangle (the six other joints would
have to leave their limits); switched to ``disturbance`` at run time, the same ``~/waypoints``
take the hand around the triangle while the reactions turn joint1. Judged on the simulator's
/joint_states with Pinocchio's forward kinematics."""

import time

import numpy as np
import pinocchio as pin
from diagnostic_msgs.msg import DiagnosticArray
from harness import LOCKSTEP
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from underactuated_control.bringup import SIM_SETPOINT_LEAD
from underactuated_control.redundancy.arm_angle import arm_angle_from_points
from underactuated_control.scenarios.resolver_failure import (
    LINKS,
    POSITION_TASK,
    Q0,
    arm7_urdf,
    triangle,
)

NAMES = [f"joint{i}" for i in range(1, 8)]
RESOLVER, CONTROLLER = "elbow_redundancy_resolver", "hybrid_dynamics_controller"


def segment_distance(points, a, b):
    """Distance of each point to the segment ab."""
    u = b - a
    s = np.clip((points - a) @ u / (u @ u), 0.0, 1.0)
    return np.linalg.norm(points - a - s[:, None] * u, axis=1)


def test_triangle_with_a_failed_joint_on_the_simulated_arm(ros, launch, tmp_path):
    urdf = tmp_path / "arm7_free_joint1.urdf"
    urdf.write_text(arm7_urdf("joint1"))
    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()

    def hand_and_psi(q):
        pin.framesForwardKinematics(pm, pd, q)
        points = (pd.oMf[pm.getFrameId(n)].translation for n in LINKS)
        return pd.oMf[pm.getFrameId("tool")].translation.copy(), arm_angle_from_points(*points)

    common = {"urdf_path": str(urdf), "passive_joints": ["joint1"], "use_sim_time": True}
    sim = launch("mujoco_sim", {**common, "initial_positions": list(Q0),
                                "gravity": [0.0, 0.0, 0.0], **LOCKSTEP})
    controller = launch(CONTROLLER, {**common, "mode": "joint", "kp": [400.0], "kd": [40.0],
                        "gravity": [0.0, 0.0, 0.0], "publish_jacobians": False,
                        "state_timeout": 0.5, "reference_reliability": "best_effort"})
    resolver = launch(RESOLVER, {
        **common, "tip_link": "tool", "shoulder_link": LINKS[0], "elbow_link": LINKS[1],
        "wrist_link": LINKS[2], "hand_weights": list(POSITION_TASK),
        "passive_joint_motion": "locked", "setpoint_lead": SIM_SETPOINT_LEAD},
        args=["--ros-args", "-r", f"/{RESOLVER}/joint_setpoints:=/{CONTROLLER}/joint_reference"])
    states = []
    ros.node.create_subscription(JointState, "/joint_states", lambda m: states.append(
        np.array([dict(zip(m.name, m.position))[n] for n in NAMES])), 100)
    resolver_status = {}  # the resolver's last /diagnostics values, for a failure's message

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith(RESOLVER):
                resolver_status.update({"message": status.message},
                                       **{kv.key: kv.value for kv in status.values})
    ros.node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    pub = ros.node.create_publisher(Float64MultiArray, f"/{RESOLVER}/waypoints", 10)
    assert ros.wait_for(lambda: pub.get_subscription_count() > 0 and len(states) > 50
                        and "resolving" in resolver.log(), 90), resolver.log()
    # the 100 Hz setpoints and the 1 kHz states best effort: a reliable reader held every
    # setpoint behind a lost one until the writer's next heartbeat (once in CI: the controller
    # got them 0.1 s late, refused them as past, then ramped 0.62 rad: the hand 30 mm off)
    assert ros.subscription_reliability(f"/{CONTROLLER}/joint_reference", CONTROLLER) == {
        ReliabilityPolicy.BEST_EFFORT}
    assert ros.subscription_reliability("/joint_states", RESOLVER) == {
        ReliabilityPolicy.BEST_EFFORT}
    p0, psi0 = hand_and_psi(Q0)
    pin.framesForwardKinematics(pm, pd, Q0)
    x, y, z, w = pin.Quaternion(pd.oMf[pm.getFrameId("tool")].rotation).coeffs()
    corners = triangle(p0, psi0)
    data = []
    for p, psi in corners:
        data += [*map(float, p), float(x), float(y), float(z), float(w),
                 float((psi + np.pi) % (2 * np.pi) - np.pi), 3.0]
    pub.publish(Float64MultiArray(data=data))
    assert ros.wait_for(lambda: "rejected" in resolver.log(), 30), resolver.log()
    assert "position limit" in resolver.log()

    client = AsyncParameterClient(ros.node, RESOLVER)
    assert client.wait_for_services(10.0)
    future = client.set_parameters([Parameter("passive_joint_motion",
                                              value="disturbance")])
    assert ros.wait_for(future.done, 10) and future.result().results[0].successful
    first = len(states)
    pub.publish(Float64MultiArray(data=data))
    started = time.monotonic()
    # wall time for the triangle, lock-stepped: the whole test 106 s alone, past 120 s once in CI
    assert ros.wait_for(lambda: "goal reached" in resolver.log()
                        or "goal not reached" in resolver.log()
                        or resolver.log().count("rejected") > 1, 300), (
        f"{len(states) - first} states since the triangle was sent; resolver diagnostics "
        f"{resolver_status}\n" + "\n".join(
            f"--- {name}\n{log.log()[-3000:]}" for name, log in
            (("resolver", resolver), ("controller", controller), ("simulator", sim))))
    waited = time.monotonic() - started
    assert resolver.log().count("rejected") == 1, resolver.log()
    assert "not following" not in resolver.log(), resolver.log()[-3000:]  # on time throughout
    assert "goal not reached" not in resolver.log(), (
        f"resolver diagnostics {resolver_status}\n{resolver.log()[-3000:]}")
    ros.spin_for(1.0)
    run = np.array(states[first:])
    hand = np.array([hand_and_psi(q)[0] for q in run[::5]])
    legs = [p0, *(c for c, _ in corners)]
    distance = np.min([segment_distance(hand, a, b) for a, b in zip(legs[:-1], legs[1:])],
                      axis=0)  # from the triangle
    off = distance.max()
    reached = [min(np.linalg.norm(hand - c, axis=1)) for c, _ in corners]
    p_end, psi_end = hand_and_psi(run[-1])
    print(f"\n[failed joint1 over DDS] corners reached within "
          f"{np.round(1e3 * np.array(reached), 2)} mm, hand "
          f"{1e3 * np.linalg.norm(p_end - p0):.2f} mm from p0 at the end, at most "
          f"{1e3 * off:.2f} mm off the legs, ψ {np.degrees(abs(psi_end - psi0)):.2f}° off; "
          f"joint1 moved {np.ptp(run[:, 0]):.2f} rad; {len(run)} states in {waited:.0f} s; "
          f"{controller.log().count('time-scaled')} setpoints time-scaled; "
          + "; ".join(line.split("]: ", 1)[-1] for line in resolver.log().splitlines()
                      if "stretched" in line or "goal reached" in line))
    assert max(reached) < 1e-3 and np.linalg.norm(p_end - p0) < 1e-3
    assert abs(psi_end - psi0) < np.radians(1.0)
    # unstamped, the setpoints' timing followed their arrival: beside a CPU hog 1.7-3.1 mm
    # off, 3.6 and 30 mm in CI; stamped one sample ahead, 0.30-0.47 mm beside such hogs, but
    # 3.79 mm once in CI (a point delivered later than the lead, ramped to from the held
    # point in less than a sample: 3.01 rad/s of joint2, time-scaled); three ahead: 0.37 mm
    warnings = "\n".join(line for log in (controller.log(), sim.log(), resolver.log())
                         for line in log.splitlines() if "WARN" in line or "ERROR" in line)
    assert off < 1.5e-3, (f"worst at state {5 * int(distance.argmax())} of {len(run)}; "
                          f"resolver diagnostics {resolver_status}\n" + warnings[-4000:])
    assert np.ptp(run[:, 0]) > 2.0
