"""Closed loop over DDS: mujoco_sim (RK4, 2 ms, lock-stepped, states stamped with the simulated
time) and hybrid_dynamics_controller in mode swing_up, each in its own process
(``run_swing_up``, the scenario the CLI runs), for the three mass/length sets of each robot
(``robot_variants``; design C.1 is the bundled URDF). Each robot starts hanging at rest; the tip
must be above 90 % of its full height from the swing-up time to the end of 10 s, and the joints
within 0.1 rad of upright from 1 s after the swing-up on.

Oracle for the transport: the same law against MuJoCo stepped in this process
(``simulate_offline``, no ROS). Lock-stepped, the simulation over DDS is that loop, so every
torque the simulator applied equals the in-process one to roundoff — a lost, late or doubled
command, or a law clocked by the wall instead of the states' stamps, shows up here."""

import json

import numpy as np
import pytest
from helpers import ROOT
from rosbags.rosbag2 import Reader

from underactuated_control.scenarios.swing_up import (
    robot_variants,
    run_swing_up,
    simulate_offline,
    two_link_urdf,
)

CASES = [(robot, variant) for robot in ("acrobot", "pendubot") for variant in robot_variants()]


@pytest.mark.parametrize("robot, variant", CASES)
def test_swing_up_over_dds(robot, variant, domain, tmp_path):
    if variant == "design_c1":
        urdf_path = ROOT / "urdf" / f"{robot}.urdf"
    else:
        urdf_path = tmp_path / f"{robot}_{variant}.urdf"
        urdf_path.write_text(two_link_urdf(robot, robot_variants()[variant],
                                           name=f"{robot}_{variant}"))
    out = tmp_path / "run"
    summary = run_swing_up(robot, out, duration=10.0, domain=domain, urdf_path=urdf_path,
                           plot=True, bag=True)
    s = summary["score"]
    print(f"\n[{robot} {variant} over DDS] success {s['success']}, swing-up "
          f"{s['swingup_time']} s, energy {s['energy']:.2f} J, torque cost "
          f"{s['torque_cost']:.2f}, smoothness {s['torque_smoothness']:.4f} N·m, velocity cost "
          f"{s['velocity_cost']:.1f}, score {s['score']:.3f}, final error "
          f"{summary['final_error_rad']:.4f} rad, samples {summary['states_recorded']} (missed "
          f"{summary['states_missed']}), real-time factor {summary['real_time_factor']:.3f}")
    assert s["success"], json.dumps(summary, indent=1)
    assert s["duration"] >= 9.98  # simulated time (the simulator's /clock)
    assert summary["max_error_from_1s_after_swing_up_rad"] < 0.1
    assert summary["final_error_rad"] < 0.1
    # one state per 2 ms physics step; a state the recorder (this process) missed on a loaded
    # machine is a gap at its simulated time
    assert summary["time_from"] == "/clock"
    assert 4990 <= summary["states_recorded"] + summary["states_missed"] <= 5001
    assert summary["states_recorded"] > 0.7 * 5001
    run = np.load(out / "run.npz")
    assert np.all(np.diff(run["t"]) > 0)
    assert 0.0 < summary["real_time_factor"] < 1.1  # lock-stepped: never ahead of real time

    # the torques the simulator applied (JointState.effort) against the in-process loop
    offline = simulate_offline(urdf_path.read_text(), 10.0, latency_steps=0)
    index = np.searchsorted(offline["t"], run["t"] - 1e-9)
    assert np.allclose(offline["t"][index], run["t"], atol=1e-9)
    difference = np.abs(run["tau"] - offline["tau"][index]).max()
    print(f"  torque vs the in-process loop: max difference {difference:.2e} N·m over "
          f"{len(index)} states")
    assert difference < 1e-6

    assert (out / "swing_up.png").stat().st_size > 10_000
    assert run["q"].shape == (summary["states_recorded"], 2)
    with Reader(out / "bag") as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts["/joint_states"] >= summary["states_recorded"]
    assert counts["/effort_controller/commands"] > 0.5 * summary["states_recorded"]


@pytest.mark.parametrize("robot", ["acrobot", "pendubot"])
def test_planned_swing_up_over_dds(robot, domain, tmp_path):
    """``swing_up_strategy: planned`` on design C.1 over DDS (lock-stepped): the plan solved in
    the controller process (its own cache directory), tracked, handed over to the LQR; scored
    above the published planning controllers, and every applied torque equal to the
    in-process loop's (the same law and plan against MuJoCo stepped in this process)."""
    urdf_path = ROOT / "urdf" / f"{robot}.urdf"
    overrides = {"swing_up_strategy": "planned", "plan_cache_dir": str(tmp_path / "plans")}
    out = tmp_path / "run"
    summary = run_swing_up(robot, out, duration=10.0, domain=domain, urdf_path=urdf_path,
                           plot=True, bag=False, overrides=overrides)
    s = summary["score"]
    print(f"\n[{robot} planned over DDS] success {s['success']}, swing-up {s['swingup_time']} s, "
          f"energy {s['energy']:.2f} J, torque cost {s['torque_cost']:.2f}, smoothness "
          f"{s['torque_smoothness']:.4f} N·m, velocity cost {s['velocity_cost']:.1f}, score "
          f"{s['score']:.3f}, final error {summary['final_error_rad']:.4f} rad")
    assert s["success"] and s["score"] > 0.536, json.dumps(summary, indent=1)
    assert summary["max_error_from_1s_after_swing_up_rad"] < 0.1
    offline = simulate_offline(urdf_path.read_text(), 10.0, overrides, latency_steps=0)
    run = np.load(out / "run.npz")
    index = np.searchsorted(offline["t"], run["t"] - 1e-9)
    assert np.allclose(offline["t"][index], run["t"], atol=1e-9)
    difference = np.abs(run["tau"] - offline["tau"][index]).max()
    print(f"  torque vs the in-process loop: max difference {difference:.2e} N·m")
    assert difference < 1e-6
