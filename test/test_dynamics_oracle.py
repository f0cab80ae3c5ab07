"""Hybrid dynamics, RNEA, ABA and CRBA against Pinocchio (dense partitioned (4.2)/(4.4))."""

import numpy as np
import pytest
from helpers import random_passive_set, scaled_tolerance
from oracle import EXAMPLE_URDFS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import (
    HybridDynamics,
    forward_dynamics,
    hybrid_dynamics,
    inverse_dynamics,
    mass_matrix,
)

RTOL = 1e-10


def close(a, b, scale=1.0):
    a, b = np.asarray(a), np.asarray(b)
    err = np.abs(a - b).max(initial=0.0)
    return err <= scaled_tolerance(b, RTOL, max(scale, 1.0)), err


def check_model(model, ref, rng, n_states=4, floating=False):
    """Every quantity of the core against the oracle at random states and passive sets."""
    for _ in range(n_states):
        q = model.random_configuration(rng)
        v = rng.normal(size=model.nv)
        qdd = rng.normal(size=model.nv)
        tau = rng.normal(size=model.nv) * 5
        M_ref = ref.mass_matrix(q)
        ok, err = close(mass_matrix(model, q), M_ref)
        assert ok, f"CRBA mismatch {err}"
        ok, err = close(inverse_dynamics(model, q, v, qdd), ref.rnea(q, v, qdd))
        assert ok, f"RNEA mismatch {err}"
        # ABA: scale the tolerance by the conditioning of M (both sides round off)
        cond = np.linalg.cond(M_ref)
        qdd_ref = ref.aba(q, v, tau)
        err = np.abs(forward_dynamics(model, q, v, tau) - qdd_ref).max()
        assert err <= scaled_tolerance(qdd_ref, RTOL) * max(1.0, cond / 1e3), err
        for _ in range(3):
            m = model.with_passive(random_passive_set(model, rng, first=True if floating else None))
            res = hybrid_dynamics(m, q, v, qdd[m.active_dofs], tau[m.passive_dofs])
            ta, qp = ref.dense_hybrid(
                q, v, qdd[m.active_dofs], tau[m.passive_dofs], m.active_dofs, m.passive_dofs
            )
            scale = max(1.0, cond / 1e3)
            ok, err = close(res.tau_active, ta, scale)
            assert ok, f"T_a mismatch {err} (passive {m.passive_joints})"
            ok, err = close(res.qdd_passive, qp, scale)
            assert ok, f"qdd_p mismatch {err} (passive {m.passive_joints})"
            # qdd carries the given active accelerations, tau the given passive forces
            assert np.array_equal(res.qdd[m.active_dofs], qdd[m.active_dofs])
            assert np.array_equal(res.tau[m.passive_dofs], tau[m.passive_dofs])


@pytest.mark.parametrize(
    "name",
    [
        "panda",
        "ur5",
        "ur10",
        "double_pendulum",
        "double_pendulum_continuous",
        "double_pendulum_simple",
        "kinova",
        "z1",
    ],
)
def test_example_robots_fixed_base(name):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    check_model(model, PinRef(model, text), np.random.default_rng(hash(name) % 2**32))


@pytest.mark.parametrize("name", ["solo12", "ur5", "panda"])
def test_example_robots_free_flying(name):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, floating_base=True, mimic="independent")
    assert model.passive_joints[0] == "root_joint" and model.nv_joint[0] == 6
    check_model(model, PinRef(model, text, floating=True), np.random.default_rng(7), floating=True)


def test_panda_arm_sub_chain():
    """tip_link selects the 7-DOF arm (no mimic finger joint in the selection); the hand,
    fixed to its last link off the root->tip path, rides on it with its mass, the moving
    fingers are dropped with theirs."""
    text = EXAMPLE_URDFS["panda"].read_text()
    with pytest.raises(ValueError, match="panda_finger_joint2.*mimic"):
        RobotModel.from_urdf(text)
    arm = RobotModel.from_urdf(text, tip_link="panda_link8")
    assert arm.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    # Pinocchio reference: the same URDF with the fingers removed (the hand kept)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    fingers = {el.get("name") for el in root.findall("link") if "finger" in el.get("name")}
    for el in list(root):
        if el.tag == "link" and el.get("name") in fingers:
            root.remove(el)
        if el.tag == "joint" and (
            el.find("child").get("link") in fingers or el.find("parent").get("link") in fingers
        ):
            root.remove(el)
    check_model(arm, PinRef(arm, ET.tostring(root, encoding="unicode")), np.random.default_rng(3))


@pytest.mark.parametrize("seed", range(12))
def test_random_chains(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 61))
    text = random_tree_urdf(rng, n, chain=True)
    model = RobotModel.from_urdf(text)
    check_model(model, PinRef(model, text), rng, n_states=2)


@pytest.mark.parametrize("seed", range(12))
def test_random_trees(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 61))
    text = random_tree_urdf(rng, n, chain=False)
    model = RobotModel.from_urdf(text)
    check_model(model, PinRef(model, text), rng, n_states=2)


@pytest.mark.parametrize("seed", range(4))
def test_random_trees_free_flying(seed):
    rng = np.random.default_rng(200 + seed)
    text = random_tree_urdf(rng, int(rng.integers(2, 25)), chain=False)
    model = RobotModel.from_urdf(text, floating_base=True)
    check_model(model, PinRef(model, text, floating=True), rng, n_states=2, floating=True)


@pytest.mark.parametrize("name", ["ur5", "random_tree"])
def test_an_armature_is_pinocchios(name):
    """``HybridDynamics(..., armature=A)`` is M + diag(A), as Pinocchio's ``model.armature``:
    its ABA with every joint passive, its RNEA (which adds A qdd) with every joint active,
    and the dense (4.2)/(4.4) on its CRBA (which includes A) for mixed passive sets."""
    rng = np.random.default_rng(11)
    text = (EXAMPLE_URDFS["ur5"].read_text() if name == "ur5"
            else random_tree_urdf(rng, 14, chain=False))  # prismatic joints too: A in kg
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    armature = rng.uniform(0.0, 0.5, model.nv)
    armature[::3] = 0.0  # some joints without one
    ref.pm.armature[ref.v_perm] = armature
    ref.pd = ref.pm.createData()
    q0 = model.neutral_configuration()  # the oracle's armature is ours, DOF by DOF
    np.testing.assert_allclose(np.diag(ref.mass_matrix(q0) - mass_matrix(model, q0)), armature,
                               atol=1e-12)
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        qdd, tau = rng.normal(size=model.nv), 5 * rng.normal(size=model.nv)
        cond = np.linalg.cond(ref.mass_matrix(q))
        scale = max(1.0, cond / 1e3)
        passive = HybridDynamics(model, np.ones(model.nb, bool), armature)
        ok, err = close(passive.compute(q, v, np.zeros(0), tau).qdd, ref.aba(q, v, tau), scale)
        assert ok, f"ABA with an armature: {err}"
        active = HybridDynamics(model, np.zeros(model.nb, bool), armature)
        ok, err = close(active.compute(q, v, qdd, np.zeros(0)).tau, ref.rnea(q, v, qdd))
        assert ok, f"RNEA with an armature: {err}"
        m = model.with_passive(random_passive_set(model, rng))
        res = HybridDynamics(m, None, armature).compute(q, v, qdd[m.active_dofs],
                                                         tau[m.passive_dofs])
        ta, qp = ref.dense_hybrid(q, v, qdd[m.active_dofs], tau[m.passive_dofs],
                                  m.active_dofs, m.passive_dofs)
        assert close(res.tau_active, ta, scale)[0] and close(res.qdd_passive, qp, scale)[0]
    with pytest.raises(ValueError, match="armature must be"):
        HybridDynamics(model, None, -armature - 1.0)


def test_gravity_is_a_base_acceleration():
    rng = np.random.default_rng(5)
    text = random_tree_urdf(rng, 8)
    g = (1.5, -2.0, -7.0)
    model = RobotModel.from_urdf(text, gravity=g)
    ref = PinRef(model, text)
    q, v, qdd = (
        model.random_configuration(rng),
        rng.normal(size=model.nv),
        rng.normal(size=model.nv),
    )
    assert close(inverse_dynamics(model, q, v, qdd), ref.rnea(q, v, qdd))[0]


def test_workspace_agrees_with_public_function_exactly():
    rng = np.random.default_rng(9)
    text = random_tree_urdf(rng, 15)
    model = RobotModel.from_urdf(text, passive_joints=["joint2", "joint7", "joint11"])
    ws = HybridDynamics(model)
    for _ in range(5):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
        res = hybrid_dynamics(model, q, v, qa, tp)
        out = ws.compute(q, v, qa, tp)
        assert np.array_equal(out.tau_active, res.tau_active)
        assert np.array_equal(out.qdd_passive, res.qdd_passive)
