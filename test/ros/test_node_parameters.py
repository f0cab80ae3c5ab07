"""Each node's parameter table over real processes and DDS: the documentation's tables are the
nodes' tables; start-up errors are one line naming the parameter, exit 2, no traceback; what users
type (a scalar for a list, an integer for a float) works at start and at run time."""

import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import ARM7_PATH, ROOT
from rclpy.parameter import Parameter


def test_readme_parameter_tables_are_the_nodes_tables():
    res = subprocess.run([sys.executable, "scripts/parameter_tables.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("executable, params, words", [
    ("hybrid_dynamics_controller", {"kpp": [1.0]}, "unknown parameter 'kpp' (did you mean 'kp'?)"),
    ("hybrid_dynamics_controller", {"mode": "joints"}, "parameter mode: must be one of"),
    ("hybrid_dynamics_controller", {"state_timeout": 0.0}, "parameter state_timeout: must be >="),
    ("hybrid_dynamics_controller", {"effort_limit_scale": 0.0},
     "parameter effort_limit_scale: must be >="),
    ("hybrid_dynamics_controller", {"kp": [1.0, 2.0]}, "parameter kp must be a scalar or have 7"),
    ("hybrid_dynamics_controller", {"task_frame": "nope"}, "parameter task_frame: unknown frame"),
    ("hybrid_dynamics_controller", {"command_joints": ["joint9"]},
     "parameter command_joints: unknown joints ['joint9']"),
    ("elbow_redundancy_resolver", {"hand_weights": [1.0, 2.0]},
     "parameter hand_weights must be a scalar or have 6"),
    ("mujoco_sim", {"publish_every": 0}, "parameter publish_every: must be >= 1"),
    ("mujoco_sim", {"initial_positions": [0.0, 0.0, 0.0, -1.0, 0.0, 1.0, 100.0]},
     "joint7 = 100 is outside its URDF limits"),
])
def test_startup_errors_are_one_line_and_exit_2(launch, executable, params, words):
    node = launch(executable, {"urdf_path": str(ARM7_PATH), **params})
    assert node.wait(60) == 2, node.log()
    log = node.log()
    assert words in log and "Traceback" not in log, log
    assert len([line for line in log.splitlines() if line.strip()]) == 1, log


def test_urdf_errors_name_the_parameter(launch, tmp_path):
    blank = launch("hybrid_dynamics_controller", {"robot_description": "' '"})
    assert blank.wait(60) == 2
    assert "set parameter robot_description (URDF XML) or urdf_path" in blank.log()
    bom = tmp_path / "bom.urdf"
    bom.write_bytes(b"\xef\xbb\xbf" + ARM7_PATH.read_bytes())
    ok = launch("hybrid_dynamics_controller", {"urdf_path": str(bom)})
    for _ in range(100):
        if "ready: kernels compiled or loaded in" in ok.log():
            break
        ok.proc.wait(0.3) if ok.proc.poll() is not None else __import__("time").sleep(0.3)
    assert "controlling 'arm7'" in ok.log() and ok.proc.poll() is None, ok.log()
    # it says when it is ready, with the compile time and its age
    assert re.search(r"ready: kernels compiled or loaded in \d+\.\d s, \d+\.\d s after the "
                     r"process started", ok.log()), ok.log()


def test_scalars_and_integers_at_start_and_at_run_time(ros, launch):
    from rclpy.parameter_client import AsyncParameterClient

    node = launch("hybrid_dynamics_controller", {
        "urdf_path": str(ARM7_PATH), "kp": 400.0, "task_kp_position": 100, "mode": "joint"})
    client = AsyncParameterClient(ros.node, "hybrid_dynamics_controller")
    assert client.wait_for_services(30.0), node.log()

    def get(names):
        future = client.get_parameters(names)
        assert ros.wait_for(future.done, 10)
        return [v for v in future.result().values]

    kp, task_kp = get(["kp", "task_kp_position"])
    assert list(kp.double_array_value) == [400.0] and task_kp.double_value == 100.0

    def set_(name, value):
        future = client.set_parameters([Parameter(name, value=value)])
        assert ros.wait_for(future.done, 10)
        return future.result().results[0]

    assert set_("kp", 50.0).successful  # a scalar for a list: every joint
    assert set_("task_kd_position", 7).successful  # an integer for a float
    kp, kd = get(["kp", "task_kd_position"])
    assert list(kp.double_array_value) == [50.0] and kd.double_value == 7.0
    bad = set_("kp", [1.0, -1.0])
    assert not bad.successful and "parameter kp: must be >= 0" in bad.reason
    assert np.isclose(get(["kp"])[0].double_array_value[0], 50.0)
    assert node.proc.poll() is None


def test_malformed_ros_arguments_are_one_line(launch):
    node = launch("hybrid_dynamics_controller", None, ["--ros-args", "-p", "urdf_path:='"])
    assert node.wait(60) == 2
    log = node.log()
    assert "cannot start: bad ROS arguments" in log and "Traceback" not in log, log
