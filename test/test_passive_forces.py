"""Passive joint force models: formulas, URDF defaults, overrides, dissipation."""

import numpy as np
import pytest
from oracle import random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.passive_forces import JointForceParameters, PassiveForceModel


def test_defaults_come_from_urdf_dynamics():
    rng = np.random.default_rng(0)
    text = random_tree_urdf(rng, 6, prismatic=False)
    model = RobotModel.from_urdf(text, passive_joints=["joint2", "joint5"])
    tp = PassiveForceModel(model)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    expected = []
    for name in model.passive_joints:
        dyn = root.find(f"joint[@name='{name}']/dynamics")
        d, f = float(dyn.get("damping")), float(dyn.get("friction"))
        i = model.joint_index(name)
        expected.append(-d * v[i] - f * np.tanh(v[i] / 1e-2))
    np.testing.assert_allclose(tp(q, v), expected, rtol=1e-14)


def test_spring_override_and_dissipation():
    rng = np.random.default_rng(1)
    model = RobotModel.from_urdf(
        random_tree_urdf(rng, 4, prismatic=False), passive_joints=["joint1", "joint3"]
    )
    tp = PassiveForceModel(
        model,
        {
            "joint3": JointForceParameters(
                damping=0.0, coulomb=0.0, stiffness=12.0, rest_position=0.4
            )
        },
    )
    q = model.neutral_configuration()
    q[model.q_start[model.joint_index("joint3")]] = 0.9
    out = tp(q, np.zeros(model.nv))
    assert out[1] == pytest.approx(-12.0 * 0.5)
    # damping + Coulomb only: the passive elements never inject power
    tp2 = PassiveForceModel(model)
    for _ in range(50):
        v = rng.normal(size=model.nv) * 3
        assert v[model.passive_dofs] @ tp2(q, v) <= 0.0


def test_override_validation():
    model = RobotModel.from_urdf(random_tree_urdf(np.random.default_rng(2), 3))
    with pytest.raises(ValueError, match="unknown joint 'nope'"):
        PassiveForceModel(model, {"nope": JointForceParameters()})
    with pytest.raises(ValueError, match="damping must be finite and >= 0"):
        JointForceParameters(damping=-1.0)
    with pytest.raises(ValueError, match="coulomb_velocity_scale"):
        JointForceParameters(coulomb_velocity_scale=0.0)
