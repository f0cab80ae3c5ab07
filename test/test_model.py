"""The model is pure data, loaded by a free function: urdf.load_model builds it (as Pinocchio's
buildModel), RobotModel.from_urdf is that loader, and model.py does not import urdf.py."""

import os
import subprocess
import sys

import numpy as np
import pytest
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


def test_speed_limit_is_the_urdfs_velocity_limit_or_none():
    """``speed_limit``: the URDF's velocity limit per DOF (Pinocchio's ``velocityLimit`` on the
    panda of example-robot-data), ∞ where the URDF gives none (a 0, a continuous joint
    without <limit>)."""
    import pinocchio as pin
    from helpers import EXAMPLE_ROBOTS, issue_arm

    text = issue_arm("panda_description/urdf/panda.urdf")
    model = RobotModel.from_urdf(text)
    pm = pin.buildModelFromXML(text)
    expected = [pm.velocityLimit[pm.joints[pm.getJointId(n)].idx_v] for n in model.dof_names]
    np.testing.assert_array_equal(model.speed_limit, expected)
    assert EXAMPLE_ROBOTS.is_dir() and np.all(np.isfinite(model.speed_limit))
    link = ('<link name="{0}"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" '
            'iyy="0.01" iyz="0" izz="0.01"/></inertial></link>')
    joint = ('<joint name="{0}" type="{1}"><parent link="{2}"/><child link="{3}"/>'
             '<axis xyz="0 0 1"/>{4}</joint>')
    limit = '<limit lower="-1" upper="1" effort="5" velocity="{0}"/>'
    text = ('<robot name="three">' + "".join(link.format(f"l{i}") for i in range(4))
            + joint.format("a", "revolute", "l0", "l1", limit.format(2.5))
            + joint.format("b", "revolute", "l1", "l2", limit.format(0.0))
            + joint.format("c", "continuous", "l2", "l3", "") + "</robot>")
    np.testing.assert_array_equal(RobotModel.from_urdf(text).speed_limit, [2.5, np.inf, np.inf])


def test_ros1_transmissions_are_ignored_as_pinocchio_ignores_them():
    """ROS 1's transmissions (the PR2's differential wrist: a ``type`` attribute and
    actuator elements that urdf_parser_py refuses) carry no dynamics: a URDF with them loads
    as without them, whose mass matrix and bias forces are Pinocchio's on the same text
    (Pinocchio's parser skips transmissions too)."""
    from oracle import PinRef
    from urdf_parser_py.urdf import URDF

    from underactuated_control.dynamics import inverse_dynamics, mass_matrix

    plain = random_tree_urdf(np.random.default_rng(5), 4, chain=True, fixed_links=False)
    joints = list(RobotModel.from_urdf(plain).joint_names)
    ros1 = plain.replace("</robot>", f"""
  <transmission name="wrist_trans" type="WristTransmission">
    <rightActuator mechanicalReduction="60.17" name="wrist_r_motor"/>
    <leftActuator mechanicalReduction="60.17" name="wrist_l_motor"/>
    <flexJoint mechanicalReduction="-1.0" name="{joints[2]}"/>
    <rollJoint mechanicalReduction="1.0" name="{joints[3]}"/>
  </transmission>
  <transmission name="t0" type="pr2_mechanism_model/SimpleTransmission">
    <actuator name="m0"/><joint name="{joints[0]}"/><mechanicalReduction>1</mechanicalReduction>
  </transmission>
</robot>""")
    with pytest.raises(Exception):  # what the model's loader used to pass on as malformed
        URDF.from_xml_string(ros1)
    model = RobotModel.from_urdf(ros1)
    assert model.joint_names == RobotModel.from_urdf(plain).joint_names
    ref = PinRef(model, ros1)
    q = model.random_configuration(np.random.default_rng(1))
    v = np.random.default_rng(2).normal(size=model.nv)
    np.testing.assert_allclose(mass_matrix(model, q), ref.mass_matrix(q), atol=1e-10)
    np.testing.assert_allclose(inverse_dynamics(model, q, v, np.zeros(model.nv)),
                               ref.rnea(q, v, np.zeros(model.nv)), atol=1e-10)
