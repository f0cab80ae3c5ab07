"""Properties the paper guarantees: reductions, P(k) = articulated inertia of the passive arm,
run-time switching of the passive set."""

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
from helpers import assert_close, random_passive_set
from oracle import EXAMPLE_URDFS, PinRef, full_crba, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import HybridDynamics, hybrid_dynamics


@pytest.mark.parametrize("seed", range(3))
def test_reduction_to_aba_and_rnea(seed):
    rng = np.random.default_rng(seed)
    text = random_tree_urdf(rng, 12)
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    qdd, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    all_passive = model.with_passive(model.joint_names)
    res = hybrid_dynamics(all_passive, q, v, np.zeros(0), tau)
    assert res.tau_active.shape == (0,)
    np.testing.assert_allclose(res.qdd_passive, ref.aba(q, v, tau), rtol=1e-10, atol=1e-10)
    all_active = model.with_passive([])
    res = hybrid_dynamics(all_active, q, v, qdd, np.zeros(0))
    assert res.qdd_passive.shape == (0,)
    np.testing.assert_allclose(res.tau_active, ref.rnea(q, v, qdd), rtol=1e-10, atol=1e-10)


def _subtree_urdf(text: str, top: str, frozen: set[str]) -> str:
    """URDF of the subtree below link ``top`` with the ``frozen`` joints made fixed (at q = 0)."""
    root = ET.fromstring(text)
    children: dict[str, list] = {}
    for j in root.findall("joint"):
        children.setdefault(j.find("parent").get("link"), []).append(j)
    keep_links, keep_joints, stack = {top}, [], [top]
    while stack:
        for j in children.get(stack.pop(), []):
            keep_joints.append(j)
            keep_links.add(j.find("child").get("link"))
            stack.append(j.find("child").get("link"))
    for el in list(root):
        if (el.tag == "link" and el.get("name") not in keep_links) or (
            el.tag == "joint" and el not in keep_joints
        ):
            root.remove(el)
    for j in keep_joints:
        if j.get("name") in frozen:
            j.set("type", "fixed")
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("seed", range(4))
def test_P_is_the_articulated_inertia_of_the_passive_arm(seed):
    """P(k) of (4.6) against an independent construction: the subtree of body k with its active
    joints frozen, on a free-flyer in Pinocchio; the 6x6 inertia felt at body k when the passive
    joints inside move freely is the inverse of the free-flyer block of M^-1."""
    rng = np.random.default_rng(seed)
    text = random_tree_urdf(rng, 10, prismatic=True)
    model = RobotModel.from_urdf(text)
    passive = random_passive_set(model, rng, 0.5)
    model = model.with_passive(passive)
    q = model.random_configuration(rng)
    q[model.active_dofs] = 0.0  # frozen joints become fixed joints at q = 0 in the oracle URDF
    ws = HybridDynamics(model)
    ws.set_configuration(q)
    perm = [3, 4, 5, 0, 1, 2]  # Pinocchio free-flyer [v; w] -> our [w; v]
    for k, link in enumerate(model.body_names):
        sub = _subtree_urdf(text, link, frozen=set(model.active_joints))
        pm = pin.buildModelFromXML(sub, pin.JointModelFreeFlyer())
        pd = pm.createData()
        qp = pin.neutral(pm)
        for jid in range(2, pm.njoints):
            name = pm.names[jid]
            qv = q[model.q_start[model.joint_index(name)]]
            if pm.joints[jid].nq == 2:
                qp[pm.joints[jid].idx_q : pm.joints[jid].idx_q + 2] = np.cos(qv), np.sin(qv)
            else:
                qp[pm.joints[jid].idx_q] = qv
        M = full_crba(pm, pd, qp)
        P_ref = np.linalg.inv(np.linalg.inv(M)[:6, :6])[np.ix_(perm, perm)]
        assert_close(ws.P[k], P_ref, 1e-9, floor=0.0, rtol=1e-9)


def test_switching_passive_set_equals_building_anew():
    rng = np.random.default_rng(11)
    text = random_tree_urdf(rng, 20)
    base = RobotModel.from_urdf(text)
    for _ in range(6):
        names = random_passive_set(base, rng, 0.4)
        switched = base.with_passive(names)
        fresh = RobotModel.from_urdf(text, passive_joints=names)
        assert switched.passive_joints == fresh.passive_joints
        assert switched.active_joints == fresh.active_joints
        assert switched.inertia is base.inertia  # no rebuild: arrays are shared
        q, v = base.random_configuration(rng), rng.normal(size=base.nv)
        qa, tp = rng.normal(size=switched.n_active), rng.normal(size=switched.n_passive)
        a = hybrid_dynamics(switched, q, v, qa, tp)
        b = hybrid_dynamics(fresh, q, v, qa, tp)
        assert np.array_equal(a.tau_active, b.tau_active)
        assert np.array_equal(a.qdd_passive, b.qdd_passive)


def test_actuator_failure_then_recovery():
    """A failing actuator: same state, the joint's torque becomes its passive force, and the
    recursion's qdd_p equals what the fully actuated arm would do under those torques."""
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    rng = np.random.default_rng(1)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    failed = model.with_passive(["elbow_joint"])
    res = hybrid_dynamics(failed, q, v, rng.normal(size=failed.n_active), np.array([0.3]))
    tau_full = res.tau  # active torques computed, passive torque given
    np.testing.assert_allclose(ref.aba(q, v, tau_full), res.qdd, rtol=1e-10, atol=1e-10)
    recovered = failed.with_passive([])
    assert recovered.passive_joints == () and recovered.nv == model.nv


def test_urdf_floating_joint_matches_free_flyer():
    rng = np.random.default_rng(4)
    text = random_tree_urdf(rng, 6)
    text = text.replace(
        '<robot name="random">',
        '<robot name="random"><link name="world"/>'
        '<joint name="base_free" type="floating"><parent link="world"/>'
        '<child link="base"/></joint>',
    )
    model = RobotModel.from_urdf(text)
    assert model.joint_types[0] == "floating" and "base_free" in model.passive_joints
    ref = PinRef(model, text)
    q, v, tau = (
        model.random_configuration(rng),
        rng.normal(size=model.nv),
        rng.normal(size=model.nv),
    )
    np.testing.assert_allclose(
        hybrid_dynamics(model, q, v, np.zeros(model.n_active), tau[model.passive_dofs]).qdd_passive,
        ref.dense_hybrid(
            q,
            v,
            np.zeros(model.n_active),
            tau[model.passive_dofs],
            model.active_dofs,
            model.passive_dofs,
        )[1],
        rtol=1e-10,
        atol=1e-10,
    )


def test_integrate_floating_joint_matches_pinocchio():
    rng = np.random.default_rng(2)
    text = EXAMPLE_URDFS["solo12"].read_text()
    model = RobotModel.from_urdf(text, floating_base=True)
    ref = PinRef(model, text, floating=True)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    ours = model.integrate(q, v, 0.01)
    theirs = pin.integrate(ref.pm, ref.q(q), ref.v(v * 0.01))
    np.testing.assert_allclose(ref.q(ours), theirs, atol=1e-9)


def test_quaternion_round_trip_including_half_turns():
    from underactuated_control.so3 import matrix_to_quaternion, quaternion_to_matrix

    rng = np.random.default_rng(8)
    cases = [pin.Quaternion(*rng.normal(size=4)).normalized().matrix() for _ in range(50)]
    cases += [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    for R in cases:
        q = matrix_to_quaternion(R)
        back = np.empty((3, 3))
        quaternion_to_matrix(q, back)
        np.testing.assert_allclose(back, R, atol=1e-12)
        np.testing.assert_allclose(abs(q @ pin.Quaternion(R).coeffs()), 1.0, atol=1e-12)
