"""``RobotModel.with_payload`` against Pinocchio with the payload's ``pin.Inertia`` added to the
joint holding the frame (M, RNEA, ABA, the hybrid partition); the round trip restores the
original model exactly; bad inputs are one-line errors naming the field."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import random_passive_set, within
from oracle import EXAMPLE_URDFS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import (
    forward_dynamics,
    hybrid_dynamics,
    inverse_dynamics,
    mass_matrix,
)

RTOL = 1e-12


def random_payload(rng):
    mass = rng.uniform(0.2, 3.0)
    com = rng.uniform(-0.15, 0.15, 3)
    a, b = rng.uniform(0.001, 0.05, 2)
    c = rng.uniform(abs(a - b) + 1e-4, a + b)
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return mass, com, R @ np.diag([a, b, c]) @ R.T


def loaded_ref(text, model, frame, mass, com, inertia, floating=False) -> PinRef:
    """PinRef whose Pinocchio model carries the payload: the frame's placement in its joint
    acts on ``pin.Inertia(mass, com, inertia)`` (frame axes), added to the joint's inertia."""
    ref = PinRef(model, text, floating=floating)
    fr = ref.pm.frames[ref.pm.getFrameId(frame, pin.BODY)]
    ref.pm.inertias[fr.parentJoint] += fr.placement.act(pin.Inertia(mass, com, inertia))
    ref.pd = ref.pm.createData()
    return ref


def close(a, b, scale=1.0):
    return within(a, b, RTOL, scale)


def check(model, loaded, ref, rng, n_states=3, floating=False):
    for _ in range(n_states):
        q = loaded.random_configuration(rng)
        v, qdd = rng.normal(size=model.nv), rng.normal(size=model.nv)
        tau = rng.normal(size=model.nv) * 5
        M = ref.mass_matrix(q)
        ok, err = close(mass_matrix(loaded, q), M)
        assert ok, f"M with payload: {err}"
        ok, err = close(inverse_dynamics(loaded, q, v, qdd), ref.rnea(q, v, qdd))
        assert ok, f"RNEA with payload: {err}"
        cond = np.linalg.cond(M)
        ok, err = close(forward_dynamics(loaded, q, v, tau), ref.aba(q, v, tau),
                        100 * max(1.0, cond / 1e3))
        assert ok, f"ABA with payload: {err}"
        m = loaded.with_passive(random_passive_set(loaded, rng, first=True if floating else None))
        assert m.payload is loaded.payload and m.inertia is loaded.inertia
        res = hybrid_dynamics(m, q, v, qdd[m.active_dofs], tau[m.passive_dofs])
        ta, qp = ref.dense_hybrid(q, v, qdd[m.active_dofs], tau[m.passive_dofs],
                                  m.active_dofs, m.passive_dofs)
        assert close(res.tau_active, ta, 100 * max(1.0, cond / 1e3))[0]
        assert close(res.qdd_passive, qp, 100 * max(1.0, cond / 1e3))[0]


@pytest.mark.parametrize("name, frame", [
    ("panda", "panda_hand"),   # a link merged by a fixed joint into panda_link7's body
    ("panda", "panda_link7"),
    ("ur5", "tool0"),
    ("kinova", None),
    ("z1", None),
])
def test_example_robots(name, frame):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    rng = np.random.default_rng(abs(hash((name, frame))) % 2**32)
    frame = frame or model.body_names[-1]
    mass, com, inertia = random_payload(rng)
    loaded = model.with_payload(frame, mass, com, inertia)
    check(model, loaded, loaded_ref(text, model, frame, mass, com, inertia), rng)


def test_floating_base():
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text, floating_base=True, mimic="independent")
    rng = np.random.default_rng(3)
    mass, com, inertia = random_payload(rng)
    loaded = model.with_payload("tool0", mass, com, inertia)
    ref = loaded_ref(text, model, "tool0", mass, com, inertia, floating=True)
    check(model, loaded, ref, rng, floating=True)


@pytest.mark.parametrize("seed", range(3))
def test_random_trees_fixed_frames(seed):
    rng = np.random.default_rng(400 + seed)
    text = random_tree_urdf(rng, int(rng.integers(3, 15)), chain=False)
    model = RobotModel.from_urdf(text)
    frames = [k for k, f in model.frames.items() if f.body >= 0]
    frame = frames[rng.integers(len(frames))]
    mass, com, inertia = random_payload(rng)
    loaded = model.with_payload(frame, mass, com, inertia)
    check(model, loaded, loaded_ref(text, model, frame, mass, com, inertia), rng, n_states=2)


def test_round_trip_restores_the_model_exactly():
    text = EXAMPLE_URDFS["panda"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent").with_passive(["panda_joint4"])
    loaded = model.with_payload("panda_hand", 1.2, [0.0, 0.0, 0.1], np.eye(3) * 1e-3)
    assert model.payload is None and loaded.payload.frame == "panda_hand"
    assert loaded.payload.mass == 1.2
    # arrays shared where unchanged; the model itself untouched
    for name in ("parent", "tree_rotation", "motion_subspace", "passive_joint_mask"):
        assert getattr(loaded, name) is getattr(model, name)
    assert not loaded.inertia.flags.writeable
    assert loaded.inertia is not model.inertia
    body = loaded.payload.body
    assert np.isclose(loaded.inertia[body, 5, 5] - model.inertia[body, 5, 5], 1.2)
    back = loaded.without_payload()
    assert back.inertia is model.inertia  # bit-identical: the same array
    assert back.payload is None and back.unloaded is None
    assert back.passive_joints == model.passive_joints
    # a new passive set keeps the payload; removing it then keeps the passive set
    other = loaded.with_passive(["panda_joint2"])
    assert other.payload is loaded.payload
    assert other.without_payload().inertia is model.inertia
    assert other.without_payload().passive_joints == ("panda_joint2",)
    # a second payload replaces the first (it is not stacked)
    again = loaded.with_payload("panda_hand", 0.5, [0.0, 0.0, 0.0], np.zeros((3, 3)))
    assert again.unloaded.inertia is model.inertia
    assert np.isclose(again.inertia[body, 5, 5] - model.inertia[body, 5, 5], 0.5)
    assert model.without_payload() is model
    # a zero payload changes nothing
    zero = model.with_payload("panda_hand", 0.0, [0.1, 0.2, 0.3], np.zeros((3, 3)))
    assert np.array_equal(zero.inertia, model.inertia)


@pytest.mark.parametrize("kwargs, match", [
    (dict(frame="nope"), "unknown frame/link 'nope'"),
    (dict(mass=-1.0), "payload mass must be finite and >= 0"),
    (dict(mass=float("nan")), "payload mass must be finite and >= 0"),
    (dict(mass="heavy"), "payload mass must be a number"),
    (dict(com=[0.0, 0.1]), "payload com must be 3 finite numbers"),
    (dict(com=[0.0, np.inf, 0.0]), "payload com must be 3 finite numbers"),
    (dict(inertia=np.eye(2)), "payload inertia must be a finite 3x3 matrix"),
    (dict(inertia=[[1e-3, 1e-4, 0], [0, 1e-3, 0], [0, 0, 1e-3]]),
     "payload inertia must be symmetric"),
    (dict(inertia=np.diag([1e-3, -1e-3, 1e-3])), "payload inertia must be positive semi"),
    (dict(inertia=np.diag([1e-3, 1e-3, 5e-3])), "triangle inequality"),
])
def test_bad_payloads_are_one_line_errors(kwargs, match):
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    args = dict(frame="tool0", mass=1.0, com=[0.0, 0.0, 0.05], inertia=np.eye(3) * 1e-3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        model.with_payload(**args)
    assert "\n" not in str(info.value)


def test_payload_on_the_root_is_refused():
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    with pytest.raises(ValueError, match="fixed to the root link"):
        model.with_payload(model.root_link, 1.0, np.zeros(3), np.eye(3) * 1e-3)
