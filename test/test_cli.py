"""The console entry point, run as a user would, checked against Pinocchio."""

import os
import re
import subprocess
import sys

import numpy as np
from helpers import ARM7_PATH, ROOT
from oracle import PinRef

from underactuated_control import RobotModel


def run(*args):
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    return subprocess.run(
        [sys.executable, "-m", "underactuated_control.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def test_inspect_prints_hybrid_dynamics_matching_pinocchio():
    q = [0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8]
    out = run("inspect", "arm7", "--passive", "joint2", "joint4", "--q", *map(str, q))
    assert out.returncode == 0, out.stderr
    assert "PASSIVE" in out.stdout and "tau_active" in out.stdout
    tau_block = out.stdout.split("tau_active")[1].split("qdd_passive")[0]
    values = dict(re.findall(r"^\s+(joint\d)\s+(-?\d+\.\d+) ", tau_block, re.M))
    text = ARM7_PATH.read_text()
    model = RobotModel.from_urdf(text, passive_joints=["joint2", "joint4"])
    ref = PinRef(model, text)
    tau_a, qdd_p = ref.dense_hybrid(
        np.array(q), np.zeros(7), np.zeros(5), np.zeros(2), model.active_dofs, model.passive_dofs
    )
    for name, t in zip(model.active_joints, tau_a):
        assert abs(float(values[name]) - t) < 1e-5, name
    block = out.stdout.split("qdd_passive")[1].split("mass matrix")[0]
    got = dict(re.findall(r"^\s+(joint\d)\s+(-?\d+\.\d+) ", block, re.M))
    for name, a in zip(model.passive_joints, qdd_p):
        assert abs(float(got[name]) - a) < 1e-5, name


def test_inspect_bad_input_exit_code():
    out = run("inspect", "arm7", "--passive", "joint9")
    assert out.returncode == 2
    assert "unknown joint 'joint9'" in out.stderr
    out = run("inspect", "arm7", "--q", "0", "1")
    assert out.returncode == 2 and "q must have shape (7,)" in out.stderr
