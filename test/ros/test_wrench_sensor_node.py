"""F/T sensor handling of hybrid_dynamics_controller over DDS (issue 24): the force-controlled
push of test_operational_space_closed_loop (z at -10 N against a box, MuJoCo's contact force)
with the wrench relayed by the test as two different sensors would publish it: in the root
link's axes at the task frame (as before), and as a sensor mounted at link7 reads it (its
frame, about its origin, Pinocchio's kinematics at the last state: not the controller's code)
with a constant bias the controller zeroes on activation (``wrench_zero_on_start``: the last
reading before the switch from hold to operational_space, the hand in free air).
The same force control either way: the contact force MuJoCo reports.

Lock-stepped, on simulated time, on arm7 with its joints' dry friction taken out
(``frictionless_arm``): the force loop is proportional (F_d + k_f (F_d − F_m)), so the static
contact force may settle anywhere in a band (the joints' friction, the contact's own) at a
point the path picks. Free-running, the path followed the machine's timing: a CI run settled at
−10.08 / −11.31 N with the friction, another at −10.92 / −10.34 N without it, and the
comparison measured the timing. Lock-stepped, both pushes settle at −10.27 … −10.33 N, within
0.01 N of each other, in six pairs (two beside a CPU hog)."""

import time
from pathlib import Path

import numpy as np
import pinocchio as pin
from diagnostic_msgs.srv import SelfTest
from geometry_msgs.msg import PoseStamped, WrenchStamped
from helpers import ROOT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from test_operational_space_closed_loop import launch_sim_with_box_under_the_tool, stream_position

ARM7 = ROOT / "urdf/arm7.urdf"
Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]
NODE = "/hybrid_dynamics_controller"
BIAS = np.array([4.0, -3.0, 6.0, 0.2, -0.1, 0.3])  # the sensor's own offset, its frame


def frictionless_arm(directory) -> Path:
    """arm7.urdf with its joints' dry friction set to 0 (the viscous damping kept)."""
    text = ARM7.read_text()
    assert text.count('friction="0.1"') == 7
    path = Path(directory) / "arm7_frictionless.urdf"
    path.write_text(text.replace('friction="0.1"', 'friction="0.0"'))
    return path


def push(ros, launch, sensor: str, urdf: Path) -> tuple[float, float, str]:
    sim, pm, pd, start = launch_sim_with_box_under_the_tool(launch, urdf=urdf, lockstep=True,
                                                            use_sim_time=True)
    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(urdf), "mode": "hold", "os_task": "position", "use_sim_time": True,
        "task_frame": "tool", "publish_jacobians": False, "force_axes": [0.0, 0.0, 1.0],
        "force_target": [0.0, 0.0, -10.0], "wrench_topic": "/ft_sensor",
        "wrench_zero_on_start": True})
    relay = ros.node.create_publisher(WrenchStamped, "/ft_sensor", 10)
    relay_closed = False
    last_q, contact = [], []

    def on_state(m):
        last_q[:] = [np.array(m.position)]

    def on_contact(m):
        if relay_closed:  # a message the executor took before its subscription was destroyed
            return
        F = np.array([m.wrench.force.x, m.wrench.force.y, m.wrench.force.z])
        contact.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, F[2]))
        if sensor != "base_link" and not last_q:
            return  # the sensor's reading needs its pose
        out = WrenchStamped()
        out.header.stamp, out.header.frame_id = m.header.stamp, sensor
        w = np.concatenate([F, np.zeros(3)])  # at the tool frame, root axes
        if sensor != "base_link":
            pin.framesForwardKinematics(pm, pd, last_q[0])
            oS, oT = pd.oMf[pm.getFrameId(sensor)], pd.oMf[pm.getFrameId("tool")]
            at_s = (oS.inverse() * pin.SE3(np.eye(3), oT.translation)).act(pin.Force(F, w[3:]))
            w = np.concatenate([at_s.linear, at_s.angular]) + BIAS
        f, t = out.wrench.force, out.wrench.torque
        f.x, f.y, f.z, t.x, t.y, t.z = map(float, w)
        relay.publish(out)

    subs = [ros.node.create_subscription(JointState, "/joint_states", on_state, 100),
            ros.node.create_subscription(WrenchStamped, "/mujoco_sim/contact_wrench",
                                         on_contact, 100)]
    pose_pub = ros.node.create_publisher(PoseStamped, f"{NODE}/pose_reference", 10)
    assert ros.wait_for(lambda: len(contact) > 200 and pose_pub.get_subscription_count(), 60), \
        node.log() + sim.log()
    # activation: held in free air, the sensor's wrenches flowing, then the force-control mode
    # (the last wrench before the switch becomes the zero)
    assert ros.wait_for(lambda: relay.get_subscription_count() > 0, 30)
    ros.spin_for(1.0)
    client = AsyncParameterClient(ros.node, NODE)
    assert client.wait_for_services(30.0)
    future = client.set_parameters([Parameter("mode", value="operational_space")])
    assert ros.wait_for(future.done, 30) and future.result().results[0].successful
    # 5 s of simulated time (lock-stepped: slower than the wall's on a loaded machine), the
    # pose streamed meanwhile; the last simulated second judged
    t0 = contact[-1][0]
    deadline = time.monotonic() + 60.0
    while contact[-1][0] < t0 + 5.0 and time.monotonic() < deadline:
        stream_position(ros, pose_pub, start, 0.25)
    last = np.array([f for t, f in contact if t > t0 + 4.0])
    log = node.log()
    relay_closed = True
    for s in subs:
        ros.node.destroy_subscription(s)
    ros.node.destroy_publisher(relay)
    ros.node.destroy_publisher(pose_pub)
    sim.stop()
    node.stop()
    assert len(last) > 200, log
    return float(last.mean()), float(last.std()), log


def test_a_wrench_in_a_sensor_frame_gives_the_same_force_control(ros, launch, tmp_path):
    urdf = frictionless_arm(tmp_path)
    root_mean, root_std, _ = push(ros, launch, "base_link", urdf)
    sensor_mean, sensor_std, log = push(ros, launch, "link7", urdf)
    print(f"\n[F/T] force control along z at -10 N, contact force over the last second: wrench "
          f"in root axes {root_mean:.2f} ± {root_std:.3f} N; in link7's frame with a bias "
          f"zeroed at start {sensor_mean:.2f} ± {sensor_std:.3f} N")
    assert "ignored" not in log, log[-2000:]
    assert abs(root_mean + 10.0) < 1.0
    assert abs(sensor_mean + 10.0) < 1.0
    assert abs(sensor_mean - root_mean) < 0.5


def test_zero_wrench_bias_service_answers(ros, launch):
    node = launch("hybrid_dynamics_controller", {"urdf_path": str(ARM7), "mode": "hold",
                                                 "publish_jacobians": False,
                                                 "wrench_topic": "/ft_sensor"})
    client = ros.node.create_client(SelfTest, f"{NODE}/zero_wrench_bias")
    assert client.wait_for_service(120.0), node.log()
    future = client.call_async(SelfTest.Request())
    assert ros.wait_for(future.done, 30)
    answer = future.result()
    assert answer.passed == b"\x01" and "first one becomes the zero" in answer.status[0].message
    pub = ros.node.create_publisher(WrenchStamped, "/ft_sensor", 10)
    msg = WrenchStamped()
    msg.header.frame_id = "link7"
    msg.wrench.force.x, msg.wrench.torque.z = 2.0, 0.5
    assert ros.wait_for(lambda: pub.get_subscription_count() > 0, 30)
    for _ in range(5):
        pub.publish(msg)
        ros.spin_for(0.1)
    future = client.call_async(SelfTest.Request())
    assert ros.wait_for(future.done, 30)
    values = {kv.key: float(kv.value) for kv in future.result().status[0].values}
    assert values["force_x"] == 2.0 and values["torque_z"] == 0.5, values
    assert "link7" in future.result().status[0].message
