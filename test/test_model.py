"""The model is pure data, loaded by a free function: urdf.load_model builds it (as Pinocchio's
buildModel), RobotModel.from_urdf is that loader, and model.py does not import urdf.py."""

import os
import subprocess
import sys

import numpy as np
from helpers import ROOT
from oracle import random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.urdf import load_model


def test_from_urdf_is_the_loader():
    rng = np.random.default_rng(0)
    text = random_tree_urdf(rng, 9)
    kwargs = dict(passive_joints=["joint2", "joint5"], gravity=(0.0, 1.0, -9.0),
                  floating_base=True)
    a, b = RobotModel.from_urdf(text, **kwargs), load_model(text, **kwargs)
    assert type(a) is type(b) is RobotModel
    for name, value in vars(a).items():
        other = vars(b)[name]
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, other, err_msg=name)
        elif name != "frames":
            assert value == other, name
    assert a.passive_joints == ("root_joint", "joint2", "joint5")


def test_model_holds_no_cache_and_its_arrays_are_frozen():
    model = RobotModel.from_urdf(random_tree_urdf(np.random.default_rng(1), 5))
    assert not hasattr(model, "_workspace_cache")
    for name, value in vars(model).items():
        if isinstance(value, np.ndarray):
            assert not value.flags.writeable, name


def test_model_module_does_not_import_the_urdf_loader():
    code = ("import sys, underactuated_control.model, underactuated_control.so3\n"
            "loaded = [m for m in ('underactuated_control.urdf', 'urdf_parser_py') "
            "if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
