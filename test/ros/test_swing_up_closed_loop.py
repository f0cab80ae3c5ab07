"""Closed loop over DDS: mujoco_sim (RK4, 2 ms, real time) and hybrid_dynamics_controller in mode
swing_up, each in its own process (``run_swing_up``, the scenario the CLI runs). The acrobot and
the pendubot of urdf/ start hanging at rest; the tip must be above 90 % of its full height from
the swing-up time to the end of 10 s, and the joints within 0.1 rad of upright from 1 s after
the swing-up on; the bag holds what was recorded."""

import json

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from underactuated_control.nodes.swing_up_demo import run_swing_up


@pytest.mark.parametrize("robot", ["acrobot", "pendubot"])
def test_swing_up_over_dds(robot, domain, tmp_path):
    summary = run_swing_up(robot, tmp_path, duration=10.0, domain=domain, plot=True, bag=True)
    s = summary["score"]
    print(f"\n[{robot} over DDS] success {s['success']}, swing-up {s['swingup_time']} s, energy "
          f"{s['energy']:.2f} J, torque cost {s['torque_cost']:.2f}, smoothness "
          f"{s['torque_smoothness']:.4f} N·m, velocity cost {s['velocity_cost']:.1f}, score "
          f"{s['score']:.3f}, final error {summary['final_error_rad']:.4f} rad, samples "
          f"{summary['states_recorded']} (missed {summary['states_missed']}), wall-clock state "
          f"period {summary['state_period_ms']}, "
          f"real-time factor {summary['real_time_factor']:.3f}")
    assert s["success"], json.dumps(summary, indent=1)
    assert s["duration"] >= 9.98  # simulated time (the simulator's /clock)
    assert summary["max_error_from_1s_after_swing_up_rad"] < 0.1
    assert summary["final_error_rad"] < 0.1
    # one state per 2 ms physics step, paced to real time; on a loaded machine the recorder (in
    # this process) may miss states beyond the publisher's history: the run is judged on the
    # states that arrived, at their simulated times
    assert summary["time_from"] == "/clock"
    assert 4990 <= summary["states_recorded"] + summary["states_missed"] <= 5001
    assert summary["states_recorded"] > 0.7 * 5001
    assert np.all(np.diff(np.load(tmp_path / "run.npz")["t"]) > 0)
    assert 0.75 < summary["real_time_factor"] < 1.1
    assert (tmp_path / "swing_up.png").stat().st_size > 10_000
    run = np.load(tmp_path / "run.npz")
    assert run["q"].shape == (summary["states_recorded"], 2)
    with Reader(tmp_path / "bag") as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts["/joint_states"] >= summary["states_recorded"]
    assert counts["/effort_controller/commands"] > 0.5 * summary["states_recorded"]
