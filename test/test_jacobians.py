"""Frame, generalized and disturbance Jacobians, drifts and projection operators (paper §6)
against Pinocchio, finite differences and the lemmas."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import assert_close, random_passive_set, scaled_tolerance
from oracle import EXAMPLE_URDFS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.jacobians import (
    disturbance_jacobian,
    frame_jacobian,
    frame_placement,
    generalized_jacobian,
    generalized_jacobian_product,
    jacobian_drifts,
    projection_operators,
    spatial_momentum,
    underactuated_mass_matrix,
)

CASES = [("ur5", False, ["shoulder_lift_joint", "wrist_2_joint"]),
         ("panda", False, ["panda_joint2", "panda_joint5", "panda_joint6"]),
         ("kinova", False, None), ("solo12", True, None), ("ur5", True, [])]


def build(name, floating, passive, rng):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, floating_base=floating, mimic="independent")
    if passive is None:  # random passive set, at least one active and one passive joint
        passive = random_passive_set(model, rng, 0.4, first=True, last=False)
    if floating:
        passive = ["root_joint", *passive]
    model = model.with_passive(passive)
    return model, PinRef(model, text, floating)


def dense_JG_JD(ref, model, q, frame):
    return ref.generalized_jacobians(q, frame, model.active_dofs, model.passive_dofs)


@pytest.mark.parametrize("name, floating, passive", CASES)
def test_frame_jacobians_and_placements_of_every_link(name, floating, passive):
    rng = np.random.default_rng(0)
    model, ref = build(name, floating, passive, rng)
    q = model.random_configuration(rng)
    for link in model.link_names:
        if not ref.pm.existFrame(link):
            continue
        J_ref, fid = ref.frame_jacobian(q, link), ref.pm.getFrameId(link)
        np.testing.assert_allclose(frame_jacobian(model, q, link), J_ref, atol=1e-12)
        p, R = frame_placement(model, q, link)
        np.testing.assert_allclose(p, ref.pd.oMf[fid].translation, atol=1e-12)
        np.testing.assert_allclose(R, ref.pd.oMf[fid].rotation, atol=1e-12)


@pytest.mark.parametrize("name, floating, passive", CASES)
def test_generalized_and_disturbance_jacobians(name, floating, passive):
    rng = np.random.default_rng(1)
    model, ref = build(name, floating, passive, rng)
    frame = model.body_names[-1]
    for _ in range(3):
        q = model.random_configuration(rng)
        JG_ref, JD_ref = dense_JG_JD(ref, model, q, frame)
        JG, JD = generalized_jacobian(model, q, frame), disturbance_jacobian(model, q)
        assert JG.shape == (6, model.n_active) and JD.shape == (model.n_passive, model.n_active)
        assert_close(JG, JG_ref, 1e-10)
        assert_close(JD, JD_ref, 1e-10)
        x = rng.normal(size=model.n_active)
        assert_close(generalized_jacobian_product(model, q, frame, x), JG @ x, 1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_jacobians(seed):
    rng = np.random.default_rng(seed)
    text = random_tree_urdf(rng, int(rng.integers(3, 40)))
    model = RobotModel.from_urdf(text)
    model = model.with_passive(random_passive_set(model, rng, 0.4) or [model.joint_names[0]])
    if model.n_active == 0:
        model = model.with_passive(model.joint_names[:-1])
    ref = PinRef(model, text)
    q = model.random_configuration(rng)
    for frame in rng.choice(model.link_names[1:], size=3):
        JG_ref, JD_ref = dense_JG_JD(ref, model, q, frame)
        assert_close(generalized_jacobian(model, q, frame), JG_ref, 1e-9)
        assert_close(disturbance_jacobian(model, q), JD_ref, 1e-9)


def true_motion(ref, model, q, v, qa, tp, fid):
    """(classical acceleration of frame ``fid`` [linear; angular], LOCAL_WORLD_ALIGNED; qdd_p)
    of the true motion: Pinocchio's dense (4.4) solution for (qdd_a, T_p)."""
    _, qp = ref.dense_hybrid(q, v, qa, tp, model.active_dofs, model.passive_dofs)
    qdd = np.zeros(model.nv)
    qdd[model.active_dofs], qdd[model.passive_dofs] = qa, qp
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
    pin.updateFramePlacements(ref.pm, ref.pd)
    return pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid,
                                             pin.LOCAL_WORLD_ALIGNED).vector, qp


@pytest.mark.parametrize("name, floating, passive", CASES)
def test_drift_terms_reproduce_the_true_accelerations(name, floating, passive):
    """a_frame = J_G qdd_a + drift_G and qdd_p = J_D qdd_a + drift_D, with the true motion from
    Pinocchio's dense (4.4) solution and its classical frame acceleration."""
    rng = np.random.default_rng(2)
    model, ref = build(name, floating, passive, rng)
    frame = model.body_names[-1]
    fid = ref.pm.getFrameId(frame)
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
        acc, qp = true_motion(ref, model, q, v, qa, tp, fid)
        dG, dD = jacobian_drifts(model, q, v, frame, tp)
        JG, JD = generalized_jacobian(model, q, frame), disturbance_jacobian(model, q)
        assert_close(JG @ qa + dG, acc, 1e-9)
        assert_close(JD @ qa + dD, qp, 1e-9)


@pytest.mark.parametrize("name, floating, passive", CASES)
def test_task_quantities_in_one_call_match_pinocchio(name, floating, passive):
    """``JacobianWorkspace.task_quantities`` (a task law's cycle: J_G, J_D, the frame's
    placement and J, the drifts, one compiled call) against Pinocchio: its frame placement and
    LOCAL_WORLD_ALIGNED Jacobian, the dense J_G, J_D, and the true motion of the dense (4.4)
    solution through (6.10), (6.12); a frame with an offset and rotation from its body too."""
    from underactuated_control.jacobians import JacobianWorkspace

    rng = np.random.default_rng(4)
    model, ref = build(name, floating, passive, rng)
    ws = JacobianWorkspace(model)
    frames = [f for f in (model.body_names[-1], *model.link_names[::-1])
              if ref.pm.existFrame(f) and model.frame(f).body >= 0]
    offset = next(f for f in frames if np.abs(model.frame(f).translation).max() > 0
                  or np.abs(model.frame(f).rotation - np.eye(3)).max() > 0)
    for frame in (frames[0], offset):
        fid = ref.pm.getFrameId(frame)
        for _ in range(2):
            q, v = model.random_configuration(rng), rng.normal(size=model.nv)
            qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
            JG, JD, p, R, J, dG, dD = ws.task_quantities(frame, q, v, tp)
            JG_ref, JD_ref = dense_JG_JD(ref, model, q, frame)
            assert_close(JG, JG_ref, 1e-10)
            assert_close(JD, JD_ref, 1e-10)
            np.testing.assert_allclose(J, ref.frame_jacobian(q, frame), atol=1e-12)
            np.testing.assert_allclose(p, ref.pd.oMf[fid].translation, atol=1e-12)
            np.testing.assert_allclose(R, ref.pd.oMf[fid].rotation, atol=1e-12)
            acc, qp = true_motion(ref, model, q, v, qa, tp, fid)
            assert_close(JG @ qa + dG, acc, 1e-9)
            assert_close(JD @ qa + dD, qp, 1e-9)


def test_frame_acceleration_by_finite_differences():
    """d/dt (J(q(t)) v(t)) along q(t) = q + v t + qdd t²/2 equals J_G qdd_a + drift_G."""
    rng = np.random.default_rng(3)
    text = random_tree_urdf(rng, 9, chain=True)
    model = RobotModel.from_urdf(text, passive_joints=["joint3", "joint6"])
    frame = "link9"
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
    dG, dD = jacobian_drifts(model, q, v, frame, tp)
    JG, JD = generalized_jacobian(model, q, frame), disturbance_jacobian(model, q)
    qdd = np.zeros(model.nv)
    qdd[model.active_dofs], qdd[model.passive_dofs] = qa, JD @ qa + dD
    h = 1e-5

    def twist(t):
        return frame_jacobian(model, q + v * t + 0.5 * qdd * t * t, frame) @ (v + qdd * t)

    fd = (twist(h) - twist(-h)) / (2 * h)
    assert_close(JG @ qa + dG, fd, 1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_projection_operator_lemmas(seed):
    rng = np.random.default_rng(10 + seed)
    text = random_tree_urdf(rng, 8)
    model = RobotModel.from_urdf(text)
    model = model.with_passive(["joint1", "joint4", "joint6"])
    ref = PinRef(model, text)
    q = model.random_configuration(rng)
    ops = projection_operators(model, q)
    T, Tb = ops.T, ops.T_bar
    n6 = 6 * model.nb
    tol = scaled_tolerance(T, 1e-9)
    np.testing.assert_allclose(T @ T, T, atol=tol)  # (6.5)
    np.testing.assert_allclose(Tb @ Tb, Tb, atol=tol)
    assert np.linalg.matrix_rank(T, tol=1e-8) == model.n_passive
    assert np.linalg.matrix_rank(Tb, tol=1e-8) == n6 - model.n_passive
    Hp = ops.H_passive
    np.testing.assert_allclose(Tb @ ops.phi.T @ Hp.T, 0.0, atol=tol)  # (6.7)
    np.testing.assert_allclose(Tb @ ops.psi.T @ Hp.T, 0.0, atol=tol)
    np.testing.assert_allclose(Tb @ ops.phi.T, ops.psi.T - ops.Omega @ ops.P, atol=tol)  # (6.6)
    np.testing.assert_allclose(Tb @ ops.phi.T, Tb @ ops.psi.T, atol=tol)
    # (4.8): M = P - E_psi P E_psi* is implied by the recursion; check the mass matrix (3.3a)
    M_ref = ref.mass_matrix(q)
    np.testing.assert_allclose(ops.H @ ops.phi @ ops.M @ ops.phi.T @ ops.H.T, M_ref, atol=1e-9)
    a, p = model.active_dofs, model.passive_dofs
    S_ref = M_ref[np.ix_(a, a)] - M_ref[np.ix_(a, p)] @ np.linalg.solve(
        M_ref[np.ix_(p, p)], M_ref[np.ix_(p, a)])
    np.testing.assert_allclose(ops.underactuated_mass_matrix(), S_ref, atol=1e-9)  # (6.8)
    np.testing.assert_allclose(underactuated_mass_matrix(model, q), S_ref, atol=1e-9)
    # (6.11) J_G = B* T_bar phi* H_a* with the pick-off operator B of the frame "link8"
    frame = "link8"
    f = model.frame(frame)
    _, R = frame_placement(model, q, frame)
    Rb = R @ f.rotation  # body rotation
    r = f.translation
    rx = pin.skew(r)
    B = np.zeros((n6, 6))
    W = np.zeros((6, 6))
    W[:3, :3], W[:3, 3:], W[3:, :3] = -Rb @ rx, Rb, Rb
    B[6 * f.body:6 * f.body + 6, :] = W.T
    np.testing.assert_allclose(ops.generalized_jacobian(B),
                               generalized_jacobian(model, q, frame), atol=1e-9)


def test_spatial_momentum_matches_pinocchio():
    rng = np.random.default_rng(4)
    text = EXAMPLE_URDFS["solo12"].read_text()
    model = RobotModel.from_urdf(text, floating_base=True)
    ref = PinRef(model, text, floating=True)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    hg = pin.computeCentroidalMomentum(ref.pm, ref.pd, ref.q(q), ref.v(v))
    com = pin.centerOfMass(ref.pm, ref.pd, ref.q(q))
    h = spatial_momentum(model, q, v)
    np.testing.assert_allclose(h[:3], hg.linear, atol=1e-10)
    np.testing.assert_allclose(h[3:], hg.angular + np.cross(com, hg.linear), atol=1e-10)


def test_unknown_frame_is_named():
    model = RobotModel.from_urdf(EXAMPLE_URDFS["ur5"].read_text(), passive_joints=["elbow_joint"])
    with pytest.raises(ValueError, match="unknown frame/link 'hand'"):
        generalized_jacobian(model, model.neutral_configuration(), "hand")


@pytest.mark.parametrize("seed", range(4))
def test_generalized_jacobian_by_adjoint_rows(seed):
    """J_G from six adjoint sweeps (O(6N)) equals the dense reference and the §6.1 columns."""
    from underactuated_control.jacobians import JacobianWorkspace

    rng = np.random.default_rng(50 + seed)
    text = random_tree_urdf(rng, int(rng.integers(8, 45)))
    model = RobotModel.from_urdf(text)
    model = model.with_passive(random_passive_set(model, rng, 0.4) or [model.joint_names[0]])
    ref = PinRef(model, text)
    ws = JacobianWorkspace(model)
    q = model.random_configuration(rng)
    for frame in rng.choice(model.link_names[1:], size=3):
        JG_ref, _ = dense_JG_JD(ref, model, q, frame)
        rows = ws.generalized_by_rows(frame, q).copy()
        cols = ws.generalized(frame, q)[0].copy()
        assert_close(rows, JG_ref, 1e-9)
        assert_close(rows, cols, 1e-12)
    if model.n_active > 6:  # the public function takes the row route here
        np.testing.assert_allclose(generalized_jacobian(model, q, frame), rows, atol=1e-15)
