"""Derivatives of the hybrid dynamics against three independent oracles (doc/theory/derivatives.md):
Pinocchio's RNEA derivatives (every joint active), its ABA derivatives (every joint passive), the
implicit-function formula built from Pinocchio's RNEA derivatives and M (mixed passive sets), and
central finite differences of the hybrid recursion of ``dynamics.py`` (on the configuration
manifold for floating bases)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import assert_close, random_passive_set
from oracle import EXAMPLE_URDFS, ROBOTS, PinRef, full_crba, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.derivatives import (
    DerivativesWorkspace,
    DWork,
    add_passive_force_derivatives,
    closed_loop_derivatives,
    dwork_layout,
    dwork_layout_size,
    dwork_size,
    dwork_views,
    hybrid_dynamics_derivatives,
    run_derivatives,
)
from underactuated_control.dynamics import (
    HybridDynamics,
    SingularPassiveInertiaError,
    Workspace,
    hybrid_dynamics,
)
from underactuated_control.passive_forces import JointForceParameters, PassiveForceModel

TOL = 1e-9
FIXED = ["panda", "ur5", "kinova", "z1", "talos_left_arm", "double_pendulum"]
FLOATING = ["solo12", "ur5"]
URDFS = dict(EXAMPLE_URDFS, talos_left_arm=ROBOTS / "talos_data/robots/talos_left_arm.urdf")


def load(name, floating=False):
    text = URDFS[name].read_text()
    model = RobotModel.from_urdf(text, floating_base=floating, mimic="independent")
    return model, PinRef(model, text, floating=floating)


def state(model, rng):
    return (model.random_configuration(rng), rng.normal(size=model.nv),
            rng.normal(size=model.nv), 5 * rng.normal(size=model.nv))


def pin_rnea_derivatives(ref, q, v, qdd):
    """(dtau/dq, dtau/dv, M) from Pinocchio, in our DOF order."""
    pm, pd, P = ref.pm, ref.pd, ref.v_perm
    pin.computeRNEADerivatives(pm, pd, ref.q(q), ref.v(v), ref.v(qdd))
    M = np.triu(pd.M) + np.triu(pd.M, 1).T
    return (pd.dtau_dq[np.ix_(P, P)].copy(), pd.dtau_dv[np.ix_(P, P)].copy(),
            M[np.ix_(P, P)])


def implicit_function_oracle(ref, model, q, v, qdd_a, tau_p):
    """(D12)-(D16) with dense NumPy on Pinocchio's RNEA derivatives and M."""
    a, p = model.active_dofs, model.passive_dofs
    tau_a, qdd_p = ref.dense_hybrid(q, v, qdd_a, tau_p, a, p)
    qdd = np.zeros(model.nv)
    qdd[a], qdd[p] = qdd_a, qdd_p
    Rq, Rv, M = pin_rnea_derivatives(ref, q, v, qdd)
    Minv = np.linalg.inv(M[np.ix_(p, p)]) if len(p) else np.zeros((0, 0))
    Map = M[np.ix_(a, p)]
    out = {"tau_active": tau_a, "qdd_passive": qdd_p,
           "dqdd_passive_dq": -Minv @ Rq[p], "dqdd_passive_dv": -Minv @ Rv[p],
           "dqdd_passive_dqdd_active": -Minv @ M[np.ix_(p, a)],
           "dqdd_passive_dtau_passive": Minv}
    out["dtau_active_dq"] = Rq[a] + Map @ out["dqdd_passive_dq"]
    out["dtau_active_dv"] = Rv[a] + Map @ out["dqdd_passive_dv"]
    out["dtau_active_dqdd_active"] = M[np.ix_(a, a)] + Map @ out["dqdd_passive_dqdd_active"]
    out["dtau_active_dtau_passive"] = Map @ Minv
    return out, np.linalg.cond(M[np.ix_(p, p)]) if len(p) else 1.0


def check_against(res, expected, scale=1.0, what=""):
    for name, ref in expected.items():
        assert_close(getattr(res, name), ref, TOL * scale, rtol=0, err_msg=f"{name} {what}")


@pytest.mark.parametrize("name", FIXED)
def test_all_active_equals_pinocchio_rnea_derivatives(name):
    model, ref = load(name)
    model = model.with_passive([])
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v, qdd, _ = state(model, rng)
        res = hybrid_dynamics_derivatives(model, q, v, qdd, np.zeros(0))
        Rq, Rv, M = pin_rnea_derivatives(ref, q, v, qdd)
        check_against(res, {"tau_active": ref.rnea(q, v, qdd), "dtau_active_dq": Rq,
                            "dtau_active_dv": Rv, "dtau_active_dqdd_active": M})
        assert res.dqdd_passive_dq.shape == (0, model.nv)


@pytest.mark.parametrize("name,floating", [(n, False) for n in FIXED] + [("solo12", True)])
def test_all_passive_equals_pinocchio_aba_derivatives(name, floating):
    model, ref = load(name, floating)
    model = model.with_passive(model.joint_names)
    rng = np.random.default_rng(2)
    pm, pd, P = ref.pm, ref.pd, ref.v_perm
    for _ in range(3):
        q, v, _, tau = state(model, rng)
        res = hybrid_dynamics_derivatives(model, q, v, np.zeros(0), tau)
        pin.computeABADerivatives(pm, pd, ref.q(q), ref.v(v), ref.v(tau))
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        cond = np.linalg.cond(full_crba(pm, pd, ref.q(q)))
        scale = max(1.0, cond / 1e3)  # both sides round off through M^-1
        check_against(res, {"qdd_passive": ref.aba(q, v, tau),
                            "dqdd_passive_dq": pd.ddq_dq[np.ix_(P, P)],
                            "dqdd_passive_dv": pd.ddq_dv[np.ix_(P, P)],
                            "dqdd_passive_dtau_passive": Minv[np.ix_(P, P)]}, scale, name)


@pytest.mark.parametrize("name,floating", [(n, False) for n in FIXED]
                         + [(n, True) for n in FLOATING])
def test_mixed_passive_sets_equal_the_implicit_function_formula(name, floating):
    base, ref = load(name, floating)
    rng = np.random.default_rng(3)
    for _ in range(4):
        model = base.with_passive(random_passive_set(base, rng, first=True if floating else None))
        q, v, qdd, tau = state(model, rng)
        qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
        res = hybrid_dynamics_derivatives(model, q, v, qa, tp)
        expected, cond = implicit_function_oracle(ref, model, q, v, qa, tp)
        check_against(res, expected, max(1.0, cond / 1e3), str(model.passive_joints))


@pytest.mark.parametrize("seed,floating", [(0, False), (1, True)])
@pytest.mark.parametrize("blas", [False, True])
def test_random_trees_both_product_paths(seed, floating, blas, monkeypatch):
    """Branching trees with prismatic joints (the ancestor runs and subtree ranges of the row
    sweeps), through the compiled products and through the BLAS ones."""
    rng = np.random.default_rng(seed)
    text = random_tree_urdf(rng, 26)
    base = RobotModel.from_urdf(text, floating_base=floating)
    ref = PinRef(base, text, floating=floating)
    monkeypatch.setattr(DerivativesWorkspace, "BLAS_FROM_NV", 0 if blas else 10**6)
    for fraction in (0.0, 0.5, 1.0):
        names = random_passive_set(base, rng, fraction)
        model = base.with_passive(names + (["root_joint"] if floating else []))
        ws = DerivativesWorkspace(model)
        assert ws._blas == (blas and model.n_passive > 0)
        q, v, qdd, tau = state(model, rng)
        qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
        expected, cond = implicit_function_oracle(ref, model, q, v, qa, tp)
        check_against(ws.compute(q, v, qa, tp), expected, max(1.0, cond / 1e3), str(names))


def hybrid_outputs(model, q, v, qa, tp):
    r = hybrid_dynamics(model, q, v, qa, tp)
    return np.concatenate([r.tau_active, r.qdd_passive])


def finite_difference(model, f, q, v, qa, tp, h=1e-6):
    """Central differences of f over (q on the manifold, v, qdd_a, T_p), columns stacked."""
    cols = {"q": [], "v": [], "qa": [], "tp": []}
    for j in range(model.nv):
        e = np.zeros(model.nv)
        e[j] = h
        cols["q"].append((f(model.integrate(q, e, 1.0), v, qa, tp)
                          - f(model.integrate(q, -e, 1.0), v, qa, tp)) / (2 * h))
        cols["v"].append((f(q, v + e, qa, tp) - f(q, v - e, qa, tp)) / (2 * h))
    for key, x in (("qa", qa), ("tp", tp)):
        for j in range(len(x)):
            e = np.zeros(len(x))
            e[j] = h
            plus = f(q, v, qa + e, tp) if key == "qa" else f(q, v, qa, tp + e)
            minus = f(q, v, qa - e, tp) if key == "qa" else f(q, v, qa, tp - e)
            cols[key].append((plus - minus) / (2 * h))
    n = model.n_active + model.n_passive
    return {k: np.array(c).T if c else np.zeros((n, 0)) for k, c in cols.items()}


def stacked(res):
    return {"q": np.vstack([res.dtau_active_dq, res.dqdd_passive_dq]),
            "v": np.vstack([res.dtau_active_dv, res.dqdd_passive_dv]),
            "qa": np.vstack([res.dtau_active_dqdd_active, res.dqdd_passive_dqdd_active]),
            "tp": np.vstack([res.dtau_active_dtau_passive, res.dqdd_passive_dtau_passive])}


@pytest.mark.parametrize("name,floating", [("panda", False), ("ur5", False), ("z1", False),
                                           ("solo12", True), ("ur5", True)])
def test_central_finite_differences_of_the_hybrid_recursion(name, floating):
    base, _ = load(name, floating)
    rng = np.random.default_rng(4)
    for _ in range(2):
        model = base.with_passive(random_passive_set(base, rng, first=True if floating else None))
        q, v, qdd, tau = state(model, rng)
        qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
        res = hybrid_dynamics_derivatives(model, q, v, qa, tp)
        fd = finite_difference(model, lambda *x, m=model: hybrid_outputs(m, *x), q, v, qa, tp)
        for key, d in stacked(res).items():
            assert_close(d, fd[key], 1e-5, rtol=0, err_msg=f"{key} {model.passive_joints}")
        assert_close(np.concatenate([res.tau_active, res.qdd_passive]),
                     hybrid_outputs(model, q, v, qa, tp), 1e-10)


@pytest.mark.parametrize("name", ["ur5", "z1"])
def test_an_armatures_derivatives_equal_the_implicit_function_formula(name):
    """With an armature (``HybridDynamics(..., armature=A)``, M + diag(A): what
    ``HybridStep``'s implicit damping uses) the compiled derivatives on that workspace's
    buffers equal (D12)-(D16) on Pinocchio's RNEA derivatives and M with the same
    ``model.armature``, for mixed passive sets, and central differences of the recursion."""
    base, ref = load(name)
    rng = np.random.default_rng(12)
    armature = rng.uniform(0.05, 0.5, base.nv)
    ref.pm.armature[ref.v_perm] = armature
    ref.pd = ref.pm.createData()
    for _ in range(3):
        model = base.with_passive(random_passive_set(base, rng))
        hybrid = HybridDynamics(model, None, armature)
        ints, consts, _ = hybrid.buffers
        sizes = (model.nb, model.nv, model.n_active, model.n_passive)
        work = np.zeros(dwork_size(*sizes))
        q, v, qdd, tau = state(model, rng)
        qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
        assert run_derivatives(ints, consts, work, q, v, qa, tp) == -1  # OK
        res, _ = dwork_views(work, *sizes)
        expected, cond = implicit_function_oracle(ref, model, q, v, qa, tp)
        check_against(res, expected, max(1.0, cond / 1e3), f"{model.passive_joints}")

        def outputs(q, v, qa, tp, hybrid=hybrid):
            r = hybrid.compute(q, v, qa, tp)
            return np.concatenate([r.tau_active, r.qdd_passive])

        fd = finite_difference(model, outputs, q, v, qa, tp)
        for key, d in stacked(res).items():
            assert_close(d, fd[key], 1e-5, rtol=0, err_msg=f"{key} {model.passive_joints}")


def test_closed_loop_passive_forces_match_finite_differences():
    base, _ = load("panda")
    model = base.with_passive(["panda_joint2", "panda_joint4", "panda_joint6"])
    forces = PassiveForceModel(model, {
        "panda_joint2": JointForceParameters(damping=0.7, coulomb=0.3, stiffness=4.0,
                                             rest_position=0.2, coulomb_velocity_scale=0.5),
        "panda_joint4": JointForceParameters(damping=0.2, stiffness=1.5),
        "panda_joint6": JointForceParameters(coulomb=0.4, coulomb_velocity_scale=2.0)})
    rng = np.random.default_rng(5)
    q, v, qdd, _ = state(model, rng)
    v *= 0.3
    qa = qdd[model.active_dofs]
    res = closed_loop_derivatives(model, q, v, qa, forces)

    def f(q, v, qa, tp):  # T_p from the force model, not the argument
        return hybrid_outputs(model, q, v, qa, forces(q, v))

    fd = finite_difference(model, f, q, v, qa, np.zeros(0))
    got = stacked(res)
    assert_close(got["q"], fd["q"], 1e-5)
    assert_close(got["v"], fd["v"], 1e-5)
    # and it is the open-loop result plus dX/dT_p dT_p/dx
    open_loop = hybrid_dynamics_derivatives(model, q, v, qa, forces(q, v))
    dq, dv = forces.derivatives(q, v)
    assert_close(add_passive_force_derivatives(open_loop, dq, dv).dqdd_passive_dv,
                 res.dqdd_passive_dv, 1e-14)


def test_workspace_form_writes_in_place_and_equals_the_function():
    model, _ = load("kinova")
    model = model.with_passive(model.joint_names[1::2])
    ws = DerivativesWorkspace(model, Workspace(model))
    rng = np.random.default_rng(6)
    first = ws.result
    arrays = [getattr(first, f) for f in first.__slots__]
    for _ in range(3):
        q, v, qdd, tau = state(model, rng)
        qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
        res = ws.compute(q, v, qa, tp)
        assert res is first and all(getattr(res, f) is a for f, a in zip(res.__slots__, arrays))
        expected = hybrid_dynamics_derivatives(model, q, v, qa, tp)
        for f in res.__slots__:
            np.testing.assert_array_equal(getattr(res, f), getattr(expected, f))
    # the inverse-dynamics partials at the full acceleration are views too (D7)-(D9)
    qdd_full = np.zeros(model.nv)
    qdd_full[model.active_dofs], qdd_full[model.passive_dofs] = qa, res.qdd_passive
    np.testing.assert_array_equal(ws.qdd, qdd_full)
    _, ref = load("kinova")
    for got, want in zip((ws.dr_dq, ws.dr_dv, ws.M), pin_rnea_derivatives(ref, q, v, qdd_full)):
        assert_close(got, want, TOL, rtol=0)
    # lists convert; wrong lengths and non-finite entries are named
    res = ws.compute(list(q), list(v), list(qa), list(tp))
    with pytest.raises(ValueError, match="qdd_active must have shape"):
        ws.compute(q, v, np.zeros(model.n_active + 1), tp)
    bad = v.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match=model.dof_names[2]):
        ws.compute(q, bad, qa, tp)
    with pytest.raises(ValueError, match="workspace was built for another"):
        hybrid_dynamics_derivatives(model.with_passive([]), q, v, qdd, np.zeros(0), ws)


def test_layout_fills_its_buffer_exactly():
    model, _ = load("z1")
    for blas in (0, 1):
        sizes = (model.nb, model.nv, model.n_active, model.n_passive, blas)
        work = np.zeros(dwork_layout_size(*sizes))
        w, end = dwork_layout(work, *sizes)
        assert end == work.size and w._fields == DWork._fields
        gathered = (model.n_passive, model.nv) if blas else (0, model.nv)
        assert w.Gq.shape == gathered and w.dqdd_passive_dq.shape == (model.n_passive, model.nv)
    assert dwork_size(*sizes[:4]) == dwork_layout_size(*sizes[:4], 0)


@pytest.mark.parametrize("floating", [False, True])
def test_the_buffer_entry_point_equals_the_workspace(floating):
    """``run_derivatives`` on a ``dwork_size`` buffer (what compiled callers use: subtree
    ranges computed in the kernel) gives the workspace's results on a branching tree."""
    base = RobotModel.from_urdf(random_tree_urdf(np.random.default_rng(8), 12),
                                floating_base=floating)
    model = base.with_passive(base.joint_names[::3])
    ws = DerivativesWorkspace(model)
    ints, consts, _ = ws._hybrid.buffers
    sizes = (model.nb, model.nv, model.n_active, model.n_passive)
    work = np.zeros(dwork_size(*sizes))
    q, v, qdd, tau = state(model, np.random.default_rng(9))
    qa, tp = qdd[model.active_dofs], tau[model.passive_dofs]
    assert run_derivatives(ints, consts, work, q, v, qa, tp) == -1  # OK
    w, _ = dwork_views(work, *sizes)
    res = ws.compute(q, v, qa, tp)
    for f in res.__slots__:
        np.testing.assert_array_equal(getattr(w, f), getattr(res, f))


def test_singular_passive_inertia_is_named():
    text = """<robot name="r"><link name="base"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
        <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <link name="l1"/></robot>"""
    model = RobotModel.from_urdf(text, allow_massless_links=True, passive_joints=["j1"])
    with pytest.raises(SingularPassiveInertiaError, match="'j1'"):
        hybrid_dynamics_derivatives(model, np.zeros(1), np.zeros(1), np.zeros(0), np.zeros(1))
