"""External wrenches ``f_ext=`` in the recursion against Pinocchio's ``rnea``/``aba`` with
``fext`` (per joint, in the joint frame) and the dense partition of (4.2)/(4.4) with J^T f_ext;
the drifts of J_G/J_D and the operational-space bias μ + p with an external wrench against
dense references built from Pinocchio's M, nle and frame Jacobians."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import random_passive_set, within
from oracle import EXAMPLE_URDFS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import (
    HybridDynamics,
    Workspace,
    forward_dynamics,
    hybrid_dynamics,
    inverse_dynamics,
)
from underactuated_control.jacobians import jacobian_drifts
from underactuated_control.operational_space import (
    OperationalSpace,
    generalized_task_bias,
    generalized_task_inertia,
    task_bias,
)

RTOL = 1e-12


def random_wrenches(model, rng, n=3):
    """{link: [force; torque]} on n random links (fixed-to-a-body frames included)."""
    links = [k for k, f in model.frames.items() if f.body >= 0]
    pick = rng.choice(len(links), size=min(n, len(links)), replace=False)
    return {links[i]: rng.normal(size=6) * np.array([20, 20, 20, 3, 3, 3]) for i in pick}


def pin_fext(ref: PinRef, f_ext):
    """Pinocchio's per-joint fext (joint frame, about the joint origin) of link wrenches."""
    pm = ref.pm
    out = [pin.Force.Zero() for _ in range(pm.njoints)]
    for link, w in f_ext.items():
        fr = pm.frames[pm.getFrameId(link, pin.BODY)]
        out[fr.parentJoint] += fr.placement.act(pin.Force(np.asarray(w[:3]), np.asarray(w[3:])))
    return out


def jt_fext(ref: PinRef, q, f_ext):
    """Σ J_link^T f_link (our DOF order), J the LOCAL Jacobian of the link frame."""
    pm, pd = ref.pm, ref.pd
    qp = ref.q(q)
    pin.computeJointJacobians(pm, pd, qp)
    pin.framesForwardKinematics(pm, pd, qp)
    out = np.zeros(pm.nv)
    for link, w in f_ext.items():
        J = pin.getFrameJacobian(pm, pd, pm.getFrameId(link, pin.BODY), pin.LOCAL)
        out += J.T @ np.asarray(w)
    return ref.back(out)


def close(a, b, scale=1.0):
    return within(a, b, RTOL, scale)


def check(model, ref, rng, n_states=3, floating=False):
    for _ in range(n_states):
        q = model.random_configuration(rng)
        v, qdd = rng.normal(size=model.nv), rng.normal(size=model.nv)
        tau = rng.normal(size=model.nv) * 5
        f_ext = random_wrenches(model, rng)
        fx = pin_fext(ref, f_ext)
        qp, vp = ref.q(q), ref.v(v)
        tau_ref = ref.back(pin.rnea(ref.pm, ref.pd, qp, vp, ref.v(qdd), fx))
        # the oracle's own consistency: rnea with fext = rnea - J^T f_ext
        assert close(tau_ref, ref.rnea(q, v, qdd) - jt_fext(ref, q, f_ext), 1e3)[0]
        ok, err = close(inverse_dynamics(model, q, v, qdd, f_ext=f_ext), tau_ref)
        assert ok, f"RNEA with fext: {err}"
        M = ref.mass_matrix(q)
        cond = np.linalg.cond(M)
        qdd_ref = ref.back(pin.aba(ref.pm, ref.pd, qp, vp, ref.v(tau), fx))
        ok, err = close(forward_dynamics(model, q, v, tau, f_ext=f_ext), qdd_ref,
                        max(1.0, cond / 1e3) * 100)
        assert ok, f"ABA with fext: {err} (cond {cond:.3g})"
        h = ref.nle(q, v) - jt_fext(ref, q, f_ext)  # C + g - J^T f_ext
        for _ in range(3):
            m = model.with_passive(random_passive_set(model, rng, first=True if floating else None))
            a, p = m.active_dofs, m.passive_dofs
            qa, tp = qdd[a], tau[p]
            qdd_p = np.linalg.solve(M[np.ix_(p, p)], tp - h[p] - M[np.ix_(p, a)] @ qa)
            tau_a = M[np.ix_(a, a)] @ qa + M[np.ix_(a, p)] @ qdd_p + h[a]
            res = hybrid_dynamics(m, q, v, qa, tp, f_ext=f_ext)
            scale = max(1.0, cond / 1e3) * 100
            ok, err = close(res.tau_active, tau_a, scale)
            assert ok, f"T_a with fext: {err} (passive {m.passive_joints})"
            ok, err = close(res.qdd_passive, qdd_p, scale)
            assert ok, f"qdd_p with fext: {err} (passive {m.passive_joints})"


@pytest.mark.parametrize("name", ["panda", "ur5", "kinova", "z1", "double_pendulum"])
def test_example_robots_fixed_base(name):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    check(model, PinRef(model, text), np.random.default_rng(abs(hash(name)) % 2**32))


@pytest.mark.parametrize("name", ["solo12", "ur5"])
def test_example_robots_free_flying(name):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, floating_base=True, mimic="independent")
    check(model, PinRef(model, text, floating=True), np.random.default_rng(11), floating=True)


@pytest.mark.parametrize("seed", range(3))
def test_random_trees(seed):
    rng = np.random.default_rng(300 + seed)
    text = random_tree_urdf(rng, int(rng.integers(3, 20)), chain=False)
    model = RobotModel.from_urdf(text)
    check(model, PinRef(model, text), rng, n_states=2)


def test_none_and_empty_are_no_wrench_and_leave_no_trace():
    rng = np.random.default_rng(4)
    text = random_tree_urdf(rng, 8)
    model = RobotModel.from_urdf(text, passive_joints=["joint3"])
    ws = HybridDynamics(model)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
    base = ws.compute(q, v, qa, tp).tau_active.copy()
    assert np.array_equal(ws.compute(q, v, qa, tp, f_ext={}).tau_active, base)
    with_f = ws.compute(q, v, qa, tp, f_ext=random_wrenches(model, rng)).tau_active.copy()
    assert not np.allclose(with_f, base)
    assert np.array_equal(ws.compute(q, v, qa, tp).tau_active, base)  # the buffer is not read
    # the workspace form and the free function agree exactly; Workspace hands out the same
    f_ext = random_wrenches(model, rng)
    res = hybrid_dynamics(model, q, v, qa, tp, f_ext=f_ext)
    out = Workspace(model).hybrid().compute(q, v, qa, tp, f_ext=f_ext)
    assert np.array_equal(out.tau_active, res.tau_active)
    # a wrench on a link fixed to the world does nothing
    assert np.array_equal(inverse_dynamics(model, q, v, np.zeros(model.nv),
                                           f_ext={model.root_link: np.ones(6)}),
                          inverse_dynamics(model, q, v, np.zeros(model.nv)))


def test_solve_with_wrench_matches_compute():
    rng = np.random.default_rng(8)
    model = RobotModel.from_urdf(random_tree_urdf(rng, 6), passive_joints=["joint2"])
    ws = HybridDynamics(model)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    qa, tp = rng.normal(size=model.n_active), rng.normal(size=model.n_passive)
    f_ext = random_wrenches(model, rng)
    ref = ws.compute(q, v, qa, tp, f_ext=f_ext).tau_active.copy()
    ws.set_configuration(q)
    ws.set_velocity(v)
    assert np.array_equal(ws.solve(qa, tp, f_ext=f_ext).tau_active, ref)


@pytest.mark.parametrize("bad, match", [
    ({"no_such_link": np.zeros(6)}, "unknown link 'no_such_link'"),
    ({"link2": np.zeros(5)}, r"f_ext\['link2'\] must be a 6-vector"),
    ({"link2": [0, 0, np.nan, 0, 0, 0]}, r"f_ext\['link2'\] has non-finite"),
    ([np.zeros(6)], "f_ext must be a mapping"),
    (np.zeros(6), "f_ext must be a mapping"),
])
def test_bad_wrenches_are_one_line_errors(bad, match):
    rng = np.random.default_rng(1)
    model = RobotModel.from_urdf(random_tree_urdf(rng, 4, fixed_links=False))
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    for call in (lambda: inverse_dynamics(model, q, v, v, f_ext=bad),
                 lambda: forward_dynamics(model, q, v, v, f_ext=bad),
                 lambda: hybrid_dynamics(model, q, v, v, np.zeros(0), f_ext=bad)):
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert "\n" not in str(info.value)


# ------------------------------------------------------------------ drifts and the task bias
def test_jacobian_drifts_with_wrench():
    """qdd_p = J_D qdd_a + drift_D and the frame acceleration at qdd_a = 0, with f_ext: the
    dense partition with h = C + g - J^T f_ext."""
    text = EXAMPLE_URDFS["panda"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    ref = PinRef(model, text)
    rng = np.random.default_rng(21)
    m = model.with_passive(["panda_joint2", "panda_joint5"])
    p = m.passive_dofs
    for _ in range(3):
        q, v = m.random_configuration(rng), rng.normal(size=m.nv)
        tp = rng.normal(size=m.n_passive)
        f_ext = random_wrenches(m, rng)
        M = ref.mass_matrix(q)
        h = ref.nle(q, v) - jt_fext(ref, q, f_ext)
        qdd = np.zeros(m.nv)
        qdd[p] = np.linalg.solve(M[np.ix_(p, p)], tp - h[p])
        drift_G, drift_D = jacobian_drifts(m, q, v, "panda_link7", tp, f_ext=f_ext)
        assert close(drift_D, qdd[p], 100)[0]
        # the frame's classical acceleration of that qdd, by Pinocchio
        fid = ref.pm.getFrameId("panda_link7", pin.BODY)
        pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
        acc = pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid, pin.LOCAL_WORLD_ALIGNED)
        assert close(drift_G, acc.vector, 100)[0]
        # without f_ext: unchanged from before
        g0, d0 = jacobian_drifts(m, q, v, "panda_link7", tp)
        assert not np.allclose(d0, drift_D)


def test_task_bias_with_wrench():
    """μ + p with f_ext = μ + p − J̄ᵀ Σ J_linkᵀ f_link (eq. 23 with the load's joint forces)."""
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent")
    ref = PinRef(model, text)
    rng = np.random.default_rng(5)
    frame = "ee_link" if "ee_link" in model.frames else model.link_names[-1]
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        f_ext = random_wrenches(model, rng)
        M = ref.mass_matrix(q)
        J = ref.frame_jacobian(q, frame)
        Lam = np.linalg.inv(J @ np.linalg.solve(M, J.T))
        Jbar = np.linalg.solve(M, J.T) @ Lam
        mu0, p0 = task_bias(model, q, v, frame)
        mu, p = task_bias(model, q, v, frame, f_ext=f_ext)
        expected = mu0 + p0 - Jbar.T @ jt_fext(ref, q, f_ext)
        ok, err = close(mu + p, expected, 1e4)
        assert ok, err
        assert np.array_equal(p, p0)  # gravity term untouched; the load is in μ
        os = OperationalSpace(model)  # the control-loop form: update(q, v, f_ext=...)
        os.set_task(frame)
        os.update(q, v, f_ext=f_ext)
        assert np.allclose(os.mu, mu, rtol=1e-12, atol=1e-12) and np.array_equal(os.p, p)


def test_generalized_task_bias_with_wrench():
    """μ_G + p_G = −Λ_G a_free, a_free the frame's acceleration with T_a = 0 under T_p and
    f_ext: qdd_free = M⁻¹ (T + Σ Jᵀ f_ext − C − g) by Pinocchio's M and nle."""
    text = EXAMPLE_URDFS["panda"].read_text()
    model = RobotModel.from_urdf(text, mimic="independent").with_passive(["panda_joint3"])
    ref = PinRef(model, text)
    rng = np.random.default_rng(6)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    tp = rng.normal(size=model.n_passive)
    f_ext = random_wrenches(model, rng)
    LG = generalized_task_inertia(model, q, "panda_link7")
    mu, p = generalized_task_bias(model, q, v, "panda_link7", tp, f_ext=f_ext)
    tau = np.zeros(model.nv)
    tau[model.passive_dofs] = tp
    qdd = np.linalg.solve(ref.mass_matrix(q), tau + jt_fext(ref, q, f_ext) - ref.nle(q, v))
    fid = ref.pm.getFrameId("panda_link7", pin.BODY)
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
    a_free = pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid, pin.LOCAL_WORLD_ALIGNED)
    ok, err = close(mu + p, -LG @ a_free.vector, 1e4)
    assert ok, err
    mu0, p0 = generalized_task_bias(model, q, v, "panda_link7", tp)
    assert np.array_equal(p, p0) and not np.allclose(mu, mu0)
