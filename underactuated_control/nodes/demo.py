"""The closed-loop demo: MuJoCo robot + hybrid_dynamics_controller + elbow_redundancy_resolver,
each in its own process, talking over DDS on this machine.

Phase 1: the resolver moves the hand of arm7 along a straight line and swings the elbow (arm
angle +30°); its joint setpoints feed the controller's ``~/joint_reference`` (remapped), whose
effort commands drive the simulated arm. Phase 2: the motor of joint 1 fails
(``passive_joints`` changed at run time): the controller re-plans with the hybrid recursion and
keeps holding while joint 1 is free. Measured on the simulated robot's /joint_states.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..jacobians import frame_placement
from ..model import RobotModel
from ..redundancy.arm_angle import ArmAngle
from ..so3 import matrix_to_quaternion, rotation_angle

Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]
MAX_DOMAIN_ID = 232  # the largest ROS_DOMAIN_ID the DDS port mapping allows


def demo_domain(environ=None) -> tuple[int, str]:
    """(ROS domain, where it came from): ``ROS_DOMAIN_ID`` when set (a bad value is a
    ``ValueError`` naming it), else one picked from this process id (100-199), so that two
    demos on one machine do not talk to each other."""
    environ = os.environ if environ is None else environ
    text = environ.get("ROS_DOMAIN_ID", "").strip()
    if text:
        if not text.isdigit() or int(text) > MAX_DOMAIN_ID:
            raise ValueError(f"ROS_DOMAIN_ID must be an integer in 0..{MAX_DOMAIN_ID}, got "
                             f"'{text}'")
        return int(text), "from the environment"
    return 100 + os.getpid() % 100, "picked from the process id; set ROS_DOMAIN_ID to choose"


def run_demo(urdf_path: Path, out_dir: Path, motion: float = 2.5, settle: float = 1.5,
             failure: float = 2.0, domain: int | None = None, plot: bool = True,
             log=print) -> dict:
    """Run both phases and return the measured figures (also written to demo.json)."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.experimental import EventsExecutor
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64, Float64MultiArray

    from ..cli import die_with_parent, stop_processes

    out_dir.mkdir(parents=True, exist_ok=True)
    domain = domain if domain is not None else demo_domain()[0]
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               OPENBLAS_NUM_THREADS="1")
    bindir = Path(sys.executable).parent
    q0 = "[" + ",".join(map(str, Q0)) + "]"
    limit = str(int(60 + 3 * (motion + settle + failure)))
    commands = {
        "mujoco_sim": ["-p", f"urdf_path:={urdf_path}", "-p", f"initial_positions:={q0}"],
        "hybrid_dynamics_controller": [
            "-p", f"urdf_path:={urdf_path}", "-p", "mode:=joint", "-p", "kp:=[400.0]",
            "-p", "kd:=[40.0]", "-p", "publish_jacobians:=false", "-r",
            "/hybrid_dynamics_controller/joint_reference:="
            "/elbow_redundancy_resolver/joint_setpoints"],
        "elbow_redundancy_resolver": [
            "-p", f"urdf_path:={urdf_path}", "-p", "tip_link:=tool", "-p", "shoulder_link:=link2",
            "-p", "elbow_link:=link4", "-p", "wrist_link:=link6", "-p",
            f"motion_duration:={motion}", "-p", "rate:=200.0"],
    }
    logs = {name: open(out_dir / f"{name}.log", "w") for name in commands}  # noqa: SIM115
    procs = {name: subprocess.Popen(["timeout", "-k", "5", limit, str(bindir / name),
                                     "--ros-args", *args], env=env, stdout=logs[name],
                                    stderr=subprocess.STDOUT,
                                    preexec_fn=die_with_parent(os.getpid()))
             for name, args in commands.items()}
    model = RobotModel.from_urdf(Path(urdf_path).read_text(), tip_link="tool")
    arm_angle = ArmAngle(model, "link2", "link4", "link6")
    os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain)
    node = rclpy.create_node("demo_driver", context=context)
    executor = EventsExecutor(context=context)
    executor.add_node(node)
    states: list[tuple[float, np.ndarray]] = []
    efforts: list[tuple[float, list]] = []
    names = [f"joint{i}" for i in range(1, 8)]

    def on_state(msg):
        idx = [list(msg.name).index(n) for n in names]
        states.append((time.monotonic(), np.array(msg.position)[idx]))

    node.create_subscription(JointState, "/joint_states", on_state, 50)
    node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                             lambda m: efforts.append((time.monotonic(), list(m.data))), 50)
    pose_pub = node.create_publisher(PoseStamped, "/elbow_redundancy_resolver/target_pose", 10)
    psi_pub = node.create_publisher(Float64, "/elbow_redundancy_resolver/target_arm_angle", 10)

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.01)

    try:
        deadline = time.monotonic() + 60
        log("[demo] starting the simulated arm, the controller and the resolver ...")
        while time.monotonic() < deadline and not (
                efforts and states and pose_pub.get_subscription_count()
                and psi_pub.get_subscription_count()):
            spin(0.1)
            for name, p in procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited: see {out_dir / (name + '.log')}")
        if not (efforts and states):
            raise RuntimeError("no effort commands or no /joint_states within 60 s: the nodes "
                               "did not connect")
        spin(0.5)
        q_start = states[-1][1]
        p0, R0 = frame_placement(model, q_start, "tool")
        psi0 = arm_angle.evaluate(q_start).psi
        target_p = p0 + np.array([0.05, 0.10, -0.05])
        target_psi = psi0 + np.radians(30.0)
        log(f"[demo] phase 1: hand {np.round(p0, 3).tolist()} -> {np.round(target_p, 3).tolist()}"
            f" m, arm angle {np.degrees(psi0):.1f}° -> {np.degrees(target_psi):.1f}° in "
            f"{motion} s")
        t_goal = time.monotonic()
        psi_pub.publish(Float64(data=float(target_psi)))
        spin(0.05)
        msg = PoseStamped()
        msg.header.frame_id = model.root_link
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, target_p)
        o = msg.pose.orientation
        o.x, o.y, o.z, o.w = map(float, matrix_to_quaternion(R0))
        pose_pub.publish(msg)
        spin(motion + settle)
        q_goal = states[-1][1]
        p1, R1 = frame_placement(model, q_goal, "tool")
        psi1 = arm_angle.evaluate(q_goal).psi
        # tracking along the way: compare the measured hand with the straight cycloidal line
        phase1 = [(t, q) for t, q in states if t >= t_goal]
        hand = np.array([frame_placement(model, q, "tool")[0] for _, q in phase1])
        results = {
            "hand_error_at_goal_mm": 1e3 * float(np.linalg.norm(p1 - target_p)),
            "orientation_error_at_goal_deg": float(np.degrees(rotation_angle(R0.T @ R1))),
            "arm_angle_error_at_goal_deg": float(np.degrees(abs(psi1 - target_psi))),
            "max_hand_deviation_from_line_mm": 1e3 * float(np.max(np.linalg.norm(
                np.cross(hand - p0, (target_p - p0) / np.linalg.norm(target_p - p0)), axis=1))),
        }
        log(f"[demo] goal reached: hand error {results['hand_error_at_goal_mm']:.2f} mm, arm "
            f"angle error {results['arm_angle_error_at_goal_deg']:.2f}°, largest deviation "
            f"from the straight line {results['max_hand_deviation_from_line_mm']:.2f} mm")
        log("[demo] phase 2: the motor of joint1 fails (passive_joints := [joint1], no restart)")
        client = AsyncParameterClient(node, "hybrid_dynamics_controller")
        client.wait_for_services(10.0)
        t_fail = time.monotonic()
        future = client.set_parameters([Parameter("passive_joints", value=["joint1"])])
        while not future.done():
            spin(0.01)
        accepted = future.result().results[0].successful
        spin(failure)
        after = [(t, q) for t, q in states if t >= t_fail]
        drift = float(max(abs(q[0] - after[0][1][0]) for _, q in after))
        others = float(max(np.abs(q[1:] - q_goal[1:]).max() for _, q in after))
        slot0 = [e[0] for t, e in efforts if t > t_fail + 0.2]
        results.update({
            "failure_update_accepted": bool(accepted),
            "joint1_drift_after_failure_rad": drift,
            "other_joints_max_deviation_after_failure_rad": others,
            "joint1_command_after_failure_max_abs": float(np.max(np.abs(slot0))) if slot0
            else float("nan"),
            "states_received": len(states), "commands_received": len(efforts),
        })
        log(f"[demo] after the failure: joint1 drifted {drift:.4f} rad, the other joints stayed "
            f"within {others:.4f} rad of the goal, joint1's command is "
            f"{results['joint1_command_after_failure_max_abs']:.1f} N·m")
        (out_dir / "demo.json").write_text(json.dumps(results, indent=2))
        if plot:
            _plot(out_dir / "demo.png", states, t_goal, t_fail, model, arm_angle, target_p,
                  target_psi)
            log(f"[demo] wrote {out_dir / 'demo.json'} and {out_dir / 'demo.png'}")
        return results
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        stop_processes(procs, signal.SIGINT)
        for fh in logs.values():
            fh.close()


def _plot(path, states, t_goal, t_fail, model, arm_angle, target_p, target_psi) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    t = np.array([s[0] for s in states]) - t_goal
    q = np.array([s[1] for s in states])
    step = max(1, len(t) // 1500)
    t, q = t[::step], q[::step]
    hand = np.array([frame_placement(model, x, "tool")[0] for x in q])
    psi = np.array([arm_angle.evaluate(x).psi for x in q])
    fig, ax = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    ax[0].plot(t, 1e3 * np.linalg.norm(hand - target_p, axis=1))
    ax[0].set_ylabel("hand to goal [mm]")
    ax[0].set_title("closed loop: MuJoCo arm7 + hybrid_dynamics_controller + resolver")
    ax[1].plot(t, np.degrees(psi), label="measured")
    ax[1].axhline(np.degrees(target_psi), color="k", ls="--", label="goal")
    ax[1].set_ylabel("arm angle [deg]")
    ax[1].legend()
    for k in range(q.shape[1]):
        ax[2].plot(t, q[:, k], label=f"joint{k + 1}")
    ax[2].axvline(t_fail - t_goal, color="r", ls=":", label="joint1 fails")
    ax[2].set_ylabel("joint position [rad]")
    ax[2].set_xlabel("t from the goal [s]")
    ax[2].legend(fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
