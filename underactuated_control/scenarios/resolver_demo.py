"""The closed-loop demo: MuJoCo robot + hybrid_dynamics_controller + elbow_redundancy_resolver,
each in its own process, talking over DDS on this machine.

``run_demo`` starts the three nodes through the scenario harness (``harness.ScenarioRun``).
Phase 1: the resolver moves the hand of arm7 along a straight line and swings the elbow (arm
angle +30°) in one motion (a waypoint on ``~/waypoints``); its joint setpoints feed the
controller's ``~/joint_reference`` (remapped), whose effort commands drive the simulated arm.
Phase 2: the motor of joint 1 fails (``passive_joints`` changed at run time): the controller
re-plans with the hybrid recursion and keeps holding while joint 1 is free. Measured on the
simulated robot's /joint_states.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..bringup import CONTROLLER, RESOLVER, SIM_SETPOINT_LEAD, SIMULATOR
from ..jacobians import frame_placement
from ..model import RobotModel
from ..redundancy.arm_angle import ArmAngle
from ..so3 import matrix_to_quaternion, rotation_angle
from .harness import COMMAND_TOPIC, ScenarioRun, demo_domain, joint_positions, pyplot

Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]


def run_demo(urdf_path: Path, out_dir: Path, motion: float = 4.0, settle: float = 1.5,
             failure: float = 2.0, domain: int | None = None, plot: bool = True,
             log=print) -> dict:
    """Run both phases and return the measured figures (also written to demo.json)."""
    from std_msgs.msg import Float64MultiArray

    out_dir.mkdir(parents=True, exist_ok=True)
    domain = domain if domain is not None else demo_domain()[0]
    names = [f"joint{i}" for i in range(1, 8)]
    run = ScenarioRun(out_dir, domain, urdf_path, None, "", log,
                      topics=("/joint_states", COMMAND_TOPIC))
    try:
        # lock-stepped (one command per state, as config/arm7_sim.yaml) at 500 Hz, every node
        # on the simulator's /clock: a loaded machine slows the simulation, and the plan and
        # the law slow with it (on wall time the arm would lag the plan, or the loop its
        # commands); the setpoints stamped on that clock SIM_SETPOINT_LEAD ahead
        # (setpoint_lead), so their timing does not depend on when each reaches the controller
        run.start([SIMULATOR, CONTROLLER, RESOLVER], {
            SIMULATOR: {"initial_positions": Q0, "use_sim_time": True, "publish_every": 2,
                        "lockstep": True, "lockstep_timeout": 0.25},
            CONTROLLER: {"mode": "joint", "kp": [400.0], "kd": [40.0],
                         "publish_jacobians": False, "use_sim_time": True,
                         "reference_reliability": "best_effort"},  # as bringup
            RESOLVER: {"tip_link": "tool", "shoulder_link": "link2", "elbow_link": "link4",
                       "wrist_link": "link6", "motion_duration": motion, "rate": 100.0,
                       "setpoint_lead": SIM_SETPOINT_LEAD, "use_sim_time": True}},
            limit_s=60 + 3 * (motion + settle + failure),
            remappings={CONTROLLER: [(f"/{CONTROLLER}/joint_reference",
                                      f"/{RESOLVER}/joint_setpoints")]})
        model = RobotModel.from_urdf(Path(urdf_path).read_text(), tip_link="tool")
        arm_angle = ArmAngle(model, "link2", "link4", "link6")
        rec = run.recorder
        waypoint_pub = run.node.create_publisher(Float64MultiArray, f"/{RESOLVER}/waypoints",
                                                 10)

        def states() -> list[tuple[float, np.ndarray]]:
            return [(t * 1e-9, joint_positions(names, m)) for t, m in
                    rec.messages("/joint_states")]

        log("[demo] starting the simulated arm, the controller and the resolver ...")
        run.wait_for(lambda: all(rec.counts().values())
                     and waypoint_pub.get_subscription_count(), 60.0,
                     "no effort commands or no /joint_states (the nodes did not connect)")
        run.spin(0.5)
        q_start = states()[-1][1]
        p0, R0 = frame_placement(model, q_start, "tool")
        psi0 = arm_angle.evaluate(q_start).psi
        target_p = p0 + np.array([0.05, 0.10, -0.05])
        target_psi = psi0 + np.radians(30.0)
        log(f"[demo] phase 1: hand {np.round(p0, 3).tolist()} -> {np.round(target_p, 3).tolist()}"
            f" m, arm angle {np.degrees(psi0):.1f}° -> {np.degrees(target_psi):.1f}° in "
            f"{motion} s (simulated)")
        t_goal = time.monotonic()
        # one waypoint (x y z qx qy qz qw psi duration): the hand's line and the elbow's swing
        # in one motion (a pose goal and an arm-angle goal sent apart would start apart)
        waypoint = [*map(float, target_p), *map(float, matrix_to_quaternion(R0)),
                    float(target_psi), float(motion)]
        waypoint_pub.publish(Float64MultiArray(data=waypoint))
        run.spin_simulated(motion + settle, "phase 1")
        q_goal = states()[-1][1]
        p1, R1 = frame_placement(model, q_goal, "tool")
        psi1 = arm_angle.evaluate(q_goal).psi
        # tracking along the way: compare the measured hand with the straight cycloidal line
        phase1 = [(t, q) for t, q in states() if t >= t_goal]
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
        t_fail = time.monotonic()
        accepted = run.set_parameters(CONTROLLER, {"passive_joints": ["joint1"]}, check=False)
        t_accepted = time.monotonic()  # the new law is in place before the node answers
        run.spin_simulated(failure, "phase 2")
        after = [(t, q) for t, q in states() if t >= t_fail]
        drift = float(max(abs(q[0] - after[0][1][0]) for _, q in after))
        others = float(max(np.abs(q[1:] - q_goal[1:]).max() for _, q in after))
        efforts = rec.messages(COMMAND_TOPIC)
        # commands received 0.1 s after the answer (those in flight were computed before it;
        # on a loaded machine the update itself can take longer than that)
        slot0 = [m.data[0] for t, m in efforts if t * 1e-9 > max(t_fail + 0.2, t_accepted + 0.1)]
        results.update({
            "failure_update_accepted": bool(accepted),
            "failure_update_s": t_accepted - t_fail,
            "joint1_drift_after_failure_rad": drift,
            "other_joints_max_deviation_after_failure_rad": others,
            "joint1_command_after_failure_max_abs": float(np.max(np.abs(slot0))) if slot0
            else float("nan"),
            "states_received": len(states()), "commands_received": len(efforts),
        })
        log(f"[demo] after the failure: joint1 drifted {drift:.4f} rad, the other joints stayed "
            f"within {others:.4f} rad of the goal, joint1's command is "
            f"{results['joint1_command_after_failure_max_abs']:.1f} N·m")
        (out_dir / "demo.json").write_text(json.dumps(results, indent=2))
        if plot:
            _plot(out_dir / "demo.png", states(), t_goal, t_fail, model, arm_angle, target_p,
                  target_psi)
            log(f"[demo] wrote {out_dir / 'demo.json'} and {out_dir / 'demo.png'}")
        return results
    finally:
        run.close()


def _plot(path, states, t_goal, t_fail, model, arm_angle, target_p, target_psi) -> None:
    plt = pyplot()
    if plt is None:
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
