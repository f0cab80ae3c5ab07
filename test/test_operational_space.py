"""Khatib's operational space (operational_space.py) against dense Pinocchio formulas,
Pinocchio's forward dynamics, the paper's closed-form example and a dense model of a closed
multi-arm system. Tolerances are relative to the reference's size (helpers.assert_close)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import assert_close, random_passive_set
from oracle import EXAMPLE_URDFS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control import operational_space as osp

# robot, task frame, load options
ARMS = {"panda": ("panda_hand_tcp", {"mimic": "independent"}),
        "ur5": ("tool0", {}),
        "kinova": ("j2s6s200_end_effector", {}),
        "z1": ("link06", {})}


def panda_arm_text():
    """The Panda URDF without its fingers: what ``tip_link="panda_hand_tcp"`` keeps."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(EXAMPLE_URDFS["panda"].read_text())
    for el in list(root):
        if "finger" in el.get("name", ""):
            root.remove(el)
    return ET.tostring(root, encoding="unicode")


def load(name, **kwargs):
    text = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, **{**ARMS[name][1], **kwargs})
    return model, PinRef(model, text), ARMS[name][0]


def dense(ref, q, frame):
    """A, J, Λ⁻¹ = J A⁻¹ Jᵀ from Pinocchio (crba, LOCAL_WORLD_ALIGNED frame Jacobian)."""
    A = ref.mass_matrix(q)
    J = ref.frame_jacobian(q, frame)
    return A, J, J @ np.linalg.solve(A, J.T)


def classical_acceleration(ref, q, v, qdd, frame):
    """[a_point; ω̇] of a Pinocchio frame (LOCAL_WORLD_ALIGNED), our DOF order in."""
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
    pin.updateFramePlacements(ref.pm, ref.pd)
    fid = ref.pm.getFrameId(frame)
    return pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid, pin.LOCAL_WORLD_ALIGNED).vector


def configurations(model, rng, n=3):
    return [model.random_configuration(rng) for _ in range(n)]


SELECTIONS = [None, "linear", "angular", [0, 2, 4], "matrix4"]


def selection(rows, rng):
    if rows == "matrix4":
        return rng.normal(size=(4, 6))
    return rows


def S_of(rows):
    if rows is None:
        return np.eye(6)
    if isinstance(rows, str):
        return np.eye(6)[{"linear": [0, 1, 2], "angular": [3, 4, 5]}[rows]]
    rows = np.asarray(rows)
    return np.eye(6)[rows] if rows.ndim == 1 else rows


# ================================================================ §2–4 against Pinocchio
@pytest.mark.parametrize("name", list(ARMS))
def test_task_inertia_and_blocks_match_dense(name):
    """Λ⁻¹ = J A⁻¹ Jᵀ (17) and its blocks (33), Λ of every row selection = (S Λ⁻¹ Sᵀ)⁻¹."""
    rng = np.random.default_rng(0)
    model, ref, frame = load(name)
    for q in configurations(model, rng):
        _, J, Linv = dense(ref, q, frame)
        inv = osp.task_inertia_inverse(model, q, frame)
        assert_close(inv.full, Linv, 1e-11)
        assert_close(inv.linear, J[:3] @ np.linalg.solve(ref.mass_matrix(q), J[:3].T), 1e-11)
        assert_close(inv.angular, Linv[3:, 3:], 1e-11)
        assert_close(inv.coupling, Linv[:3, 3:], 1e-11)
        for rows in SELECTIONS:
            rows = selection(rows, rng)
            S = S_of(rows)
            Lam_ref = np.linalg.inv(S @ Linv @ S.T)
            assert_close(osp.task_inertia(model, q, frame, rows), Lam_ref, 1e-9)
            assert_close(osp.task_inertia_inverse(model, q, frame, rows).selected,
                         S @ Linv @ S.T, 1e-11)


@pytest.mark.parametrize("name", list(ARMS))
def test_dynamically_consistent_inverse_null_space_and_bias(name):
    """J̄ (22), N (27), μ (24) with −Λ J̇q̇, p (25) against the dense formulas; J J̄ = I."""
    rng = np.random.default_rng(1)
    model, ref, frame = load(name)
    for q in configurations(model, rng, 2):
        v = rng.normal(size=model.nv)
        A, J, _ = dense(ref, q, frame)
        for rows in (None, "linear", [1, 3, 5]):
            S = S_of(rows)
            Js = S @ J
            Lam = np.linalg.inv(Js @ np.linalg.solve(A, Js.T))
            Jbar_ref = np.linalg.solve(A, Js.T) @ Lam
            Jbar = osp.dynamically_consistent_inverse(model, q, frame, rows)
            assert_close(Jbar, Jbar_ref, 1e-9)
            assert_close(Js @ Jbar, np.eye(len(S)), 1e-10)
            N_ref = np.eye(model.nv) - Js.T @ Jbar_ref.T
            assert_close(osp.null_space_projector(model, q, frame, rows), N_ref, 1e-9)
            g = ref.nle(q, np.zeros(model.nv))
            b = ref.nle(q, v) - g
            Jdqd = S @ classical_acceleration(ref, q, v, np.zeros(model.nv), frame)
            mu, p = osp.task_bias(model, q, v, frame, rows)
            assert_close(mu, Jbar_ref.T @ b - Lam @ Jdqd, 1e-9)
            assert_close(p, Jbar_ref.T @ g, 1e-9)


@pytest.mark.parametrize("name", list(ARMS))
def test_operational_space_equation_through_forward_dynamics(name):
    """Γ = J_Sᵀ (Λ F* + μ + p) + N Γ₀ gives the task acceleration S ẍ = F* in Pinocchio's
    forward dynamics (23, 27), for any Γ₀; N Γ₀ alone changes the joint accelerations but not
    the task's (21)."""
    rng = np.random.default_rng(2)
    model, ref, frame = load(name)
    ws = osp.OperationalSpace(model)
    for rows in (None, "linear", [0, 1, 5]):
        ws.set_task(frame, rows)
        S = S_of(rows)
        for q in configurations(model, rng, 2):
            v = rng.normal(size=model.nv)
            ws.update(q, v)
            f_star = rng.normal(size=len(S))
            tau0 = 10.0 * rng.normal(size=model.nv)
            null = ws.null_space_torque(tau0).copy()
            tau = ws.J_task.T @ (ws.Lambda @ f_star + ws.mu + ws.p) + null
            qdd = ref.aba(q, v, tau)
            assert_close(S @ classical_acceleration(ref, q, v, qdd, frame), f_star, 1e-8)
            qdd0 = ref.aba(q, v, tau - null)
            if model.nv > len(S):  # redundant for this task: N Γ₀ does move the joints
                assert np.linalg.norm(qdd - qdd0) > 1e-3 * np.linalg.norm(qdd0)
            else:  # square J: no null space, N = 0
                assert_close(null, np.zeros(model.nv), 1e-9, floor=np.abs(tau0).max())
            assert_close(S @ ws.J @ (qdd - qdd0), np.zeros(len(S)), 1e-10,
                         floor=np.abs(qdd0).max())


def test_unified_motion_and_force_selection():
    """§2.2: Ω̄ projects on the force-controlled directions, Ω on the others; in free space
    F = Λ (Ω F*_m + Ω̄ F*_f) + μ + p gives ϑ̇ = Ω F*_m + Ω̄ F*_f (eqs. 11–16 without contact)."""
    rng = np.random.default_rng(13)
    model, ref, frame = load("panda")
    Om, Omb = osp.motion_force_selection([2, 3])
    assert_close(Omb, np.diag([0, 0, 1, 1, 0, 0]).astype(float), 1e-15)
    D = rng.normal(size=(2, 6))
    Om, Omb = osp.motion_force_selection(D)
    assert_close(Om + Omb, np.eye(6), 1e-15)
    assert_close(Omb @ Omb, Omb, 1e-14)
    assert_close(Omb @ D.T, D.T, 1e-14)
    assert_close(Om @ D.T, np.zeros((6, 2)), 1e-14)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    ws = osp.OperationalSpace(model)
    ws.set_task(frame)
    ws.update(q, v)
    fm, ff = rng.normal(size=6), rng.normal(size=6)
    F = ws.Lambda @ (Om @ fm + Omb @ ff) + ws.mu + ws.p
    qdd = ref.aba(q, v, ws.J.T @ F)
    acc = classical_acceleration(ref, q, v, qdd, frame)
    assert_close(Om @ acc, Om @ fm, 1e-8)
    assert_close(Omb @ acc, Omb @ ff, 1e-8)
    with pytest.raises(ValueError, match="dependent"):
        osp.motion_force_selection(np.ones((2, 6)))


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_floating_bases_and_offset_points(seed):
    """Random trees (prismatic, continuous, fixed links), a random point fixed in a random
    frame (Pinocchio frame added at that point), and a free-flying base for half of them."""
    rng = np.random.default_rng(100 + seed)
    text = random_tree_urdf(rng, int(rng.integers(3, 30)))
    floating = seed % 2 == 1
    model = RobotModel.from_urdf(text, floating_base=floating)
    ref = PinRef(model, text, floating)
    link = str(rng.choice(model.link_names[1:]))
    offset = rng.uniform(-0.3, 0.3, 3)
    fid = ref.pm.getFrameId(link)
    fr = ref.pm.frames[fid]
    ref.pm.addFrame(pin.Frame("op_point", fr.parentJoint, fid,
                              fr.placement * pin.SE3(np.eye(3), offset), pin.OP_FRAME))
    ref.pd = ref.pm.createData()
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    A, J, Linv = dense(ref, q, "op_point")
    inv = osp.task_inertia_inverse(model, q, link, offset=offset)
    assert_close(inv.full, Linv, 1e-10)
    rows = [0, 1, 2] if np.linalg.matrix_rank(J[:3]) == 3 else [0]
    S = S_of(rows)
    Lam = np.linalg.inv(S @ Linv @ S.T)
    assert_close(osp.task_inertia(model, q, link, rows, offset=offset), Lam, 1e-8)
    Jbar = np.linalg.solve(A, (S @ J).T) @ Lam
    assert_close(osp.dynamically_consistent_inverse(model, q, link, rows, offset=offset),
                 Jbar, 1e-8)
    g = ref.nle(q, np.zeros(model.nv))
    Jdqd = S @ classical_acceleration(ref, q, v, np.zeros(model.nv), "op_point")
    mu, p = osp.task_bias(model, q, v, link, rows, offset=offset)
    assert_close(mu, Jbar.T @ (ref.nle(q, v) - g) - Lam @ Jdqd, 1e-8)
    assert_close(p, Jbar.T @ g, 1e-8)


# ================================================================ effective mass, ellipsoids
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_effective_mass_and_inertia(name):
    """1/m_u = uᵀ Λ_v⁻¹ u (30), 1/I_u = uᵀ Λ_ω⁻¹ u (31); and their meaning: from rest without
    gravity, a unit force along u (Γ = J_vᵀ u) accelerates the point by 1/m_u along u."""
    rng = np.random.default_rng(3)
    model, ref, frame = load(name, gravity=(0.0, 0.0, 0.0))
    q = model.random_configuration(rng)
    A, J, Linv = dense(ref, q, frame)
    U = rng.normal(size=(20, 3))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    m = osp.effective_mass(model, q, frame, U)
    inertia = osp.effective_inertia(model, q, frame, 3.0 * U)  # any length: normalised
    assert_close(m, 1.0 / np.einsum("ki,ij,kj->k", U, Linv[:3, :3], U), 1e-10)
    assert_close(inertia, 1.0 / np.einsum("ki,ij,kj->k", U, Linv[3:, 3:], U), 1e-10)
    zero = np.zeros(model.nv)
    for u, mu_ in zip(U[:5], m[:5]):
        assert isinstance(osp.effective_mass(model, q, frame, u), float)
        qdd = ref.aba(q, zero, J[:3].T @ u)
        assert_close(u @ classical_acceleration(ref, q, zero, qdd, frame)[:3], 1.0 / mu_, 1e-10)


def test_belted_ellipsoid_radii_are_the_effective_masses():
    """Ellipsoid points satisfy vᵀ Λ⁻¹ v = 1; belted points w = |v| v have |w| = m_u along
    their own direction (§4.4), computed independently from the dense Λ_v⁻¹; triangles."""
    rng = np.random.default_rng(4)
    model, ref, frame = load("panda")
    q = model.random_configuration(rng)
    _, _, Linv = dense(ref, q, frame)
    block = osp.task_inertia_inverse(model, q, frame).linear
    be = osp.belted_ellipsoid(block, n=12)
    assert be.belted.shape == be.ellipsoid.shape == (13, 25, 3)
    v = be.ellipsoid.reshape(-1, 3)
    assert_close(np.einsum("ki,ij,kj->k", v, Linv[:3, :3], v), np.ones(len(v)), 1e-10)
    w = be.belted.reshape(-1, 3)
    r = np.linalg.norm(w, axis=1)
    u = w / r[:, None]
    assert_close(r, 1.0 / np.einsum("ki,ij,kj->k", u, Linv[:3, :3], u), 1e-10)
    assert_close(w, np.linalg.norm(v, axis=1)[:, None] * v, 1e-12)
    tri = be.triangles()
    assert tri.shape[1:] == (3, 3) and 2 * 12 * 24 - 2 * 24 <= len(tri) <= 2 * 12 * 24
    assert np.isin(tri.reshape(-1, 3).round(12), w.round(12)).all()
    # the belted radius is the square of the ellipsoid's (the point of §4.4): its spread
    # between directions is m_max / m_min, the ellipsoid's only the square root of it
    re = np.linalg.norm(v, axis=1)
    assert_close(r, re**2, 1e-12)
    ev = np.linalg.eigvalsh(Linv[:3, :3])
    assert ev[-1] / ev[0] * (1 + 1e-9) >= r.max() / r.min() > 0.8 * ev[-1] / ev[0]
    curve = osp.belted_ellipsoid(np.diag([1.0, 4.0]), n=8)
    assert curve.belted.shape == (17, 2)
    assert_close(np.linalg.norm(curve.belted, axis=1).min(), 0.25, 1e-12)
    with pytest.raises(ValueError, match="singular"):
        osp.belted_ellipsoid(np.diag([1.0, 1.0, 0.0]))


def test_errors_are_named():
    model, _, frame = load("ur5")
    q = model.random_configuration(np.random.default_rng(5))
    with pytest.raises(ValueError, match="unknown frame"):
        osp.task_inertia(model, q, "hand")
    with pytest.raises(ValueError, match="fixed to the root"):
        osp.task_inertia(model, q, "base_link")
    with pytest.raises(ValueError, match="rows"):
        osp.task_inertia(model, q, frame, [0, 0])
    with pytest.raises(ValueError, match="q has non-finite"):
        osp.task_inertia(model, np.full(model.nq, np.nan), frame)
    # the UR5 at q = 0 is singular (shoulder, elbow and wrist axes aligned)
    with pytest.raises(osp.SingularTaskError, match="cannot be accelerated along"):
        osp.task_inertia(model, np.zeros(model.nq), frame)
    # ... yet Λ⁻¹ exists there, and Λ of the directions the frame can still move along
    inv = osp.task_inertia_inverse(model, np.zeros(model.nq), frame)
    assert np.linalg.matrix_rank(inv.full, tol=1e-9 * np.abs(inv.full).max()) < 6
    ws = osp.OperationalSpace(model, raise_on_singular=False)
    ws.set_task(frame)
    ws.update(np.zeros(model.nq))
    assert ws.singular
    assert_close(ws.Lambda_inv, inv.full, 1e-12)
    with pytest.raises(osp.SingularTaskError):
        ws.bias(np.zeros(model.nv))
    ws.update(model.random_configuration(np.random.default_rng(6)), np.zeros(model.nv))
    assert not ws.singular and np.isfinite(ws.mu).all()
    with pytest.raises(ValueError, match="v has non-finite entries: elbow_joint=nan"):
        ws.update(model.random_configuration(np.random.default_rng(6)),
                  np.array([0, 0, np.nan, 0, 0, 0]))
    kinova, _, kframe = load("kinova")
    kq = kinova.random_configuration(np.random.default_rng(7))
    with pytest.raises(ValueError, match=r"without finite position limits: \['j2s6s200_joint_6'"):
        osp.dextrous_coordination_torque(kinova, kq, kframe, ["j2s6s200_joint_6"], 1.0)
    with pytest.raises(ValueError, match="midrange must have 1 entries"):
        osp.dextrous_coordination_torque(kinova, kq, kframe, ["j2s6s200_joint_6"], 1.0,
                                         midrange=[0.0, 0.0])


# ================================================================ under-actuated extension
def dense_generalized(ref, model, q, frame):
    A = ref.mass_matrix(q)
    a, p = model.active_dofs, model.passive_dofs
    JG, _ = ref.generalized_jacobians(q, frame, a, p)
    Saa = A[np.ix_(a, a)] - A[np.ix_(a, p)] @ np.linalg.solve(A[np.ix_(p, p)], A[np.ix_(p, a)])
    return JG, Saa


@pytest.mark.parametrize("name, passive, rows", [
    ("panda", ["panda_joint2"], None), ("panda", ["panda_joint3", "panda_joint6"], "linear"),
    ("ur5", ["elbow_joint"], "linear"), ("kinova", ["j2s6s200_joint_4"], [0, 1, 2, 5]),
    ("z1", ["joint2", "joint5"], "linear")])
def test_generalized_task_inertia_matches_dense_partition(name, passive, rows):
    """Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ with S_aa = M_aa − M_ap M_pp⁻¹ M_pa and J_G = J_a + J_p J_D;
    J̄_G = S_aa⁻¹ J_Gᵀ Λ_G with J_G J̄_G = I; and through Pinocchio's forward dynamics:
    T_a = J_Gᵀ (Λ_G a* + μ_G + p_G) + [I − J_Gᵀ J̄_Gᵀ] Γ_a0 with the passive joints free under
    T_p gives the task acceleration a*."""
    rng = np.random.default_rng(6)
    base, _, frame = load(name)
    model = base.with_passive(passive)
    ref = PinRef(model, EXAMPLE_URDFS[name].read_text())
    S = S_of(rows)
    for q in configurations(model, rng, 2):
        JG, Saa = dense_generalized(ref, model, q, frame)
        LG_inv = JG @ np.linalg.solve(Saa, JG.T)
        assert_close(osp.generalized_task_inertia_inverse(model, q, frame).full, LG_inv, 1e-10)
        LG = np.linalg.inv(S @ LG_inv @ S.T)
        assert_close(osp.generalized_task_inertia(model, q, frame, rows), LG, 1e-8)
        Jbar = osp.generalized_dynamically_consistent_inverse(model, q, frame, rows)
        assert_close(Jbar, np.linalg.solve(Saa, (S @ JG).T) @ LG, 1e-8)
        assert_close(S @ JG @ Jbar, np.eye(len(S)), 1e-9)
        ws = osp.shared_workspace(model)
        F = rng.normal(size=len(S))
        assert_close(ws.generalized_torque(F), (S @ JG).T @ F, 1e-10)  # O(N) J_Gᵀ F
        t0 = rng.normal(size=model.n_active)
        assert_close(ws.generalized_null_space_torque(t0, ws.generalized(with_jbar=False)),
                     t0 - (S @ JG).T @ (Jbar.T @ t0), 1e-9)
        v = rng.normal(size=model.nv)
        tp = rng.normal(size=model.n_passive)
        mu, p = osp.generalized_task_bias(model, q, v, frame, tp, rows)
        a_star = rng.normal(size=len(S))
        t0 = 5.0 * rng.normal(size=model.n_active)
        Ta = (S @ JG).T @ (LG @ a_star + mu + p) + t0 - (S @ JG).T @ (Jbar.T @ t0)
        tau = np.zeros(model.nv)
        tau[model.active_dofs], tau[model.passive_dofs] = Ta, tp
        qdd = ref.aba(q, v, tau)
        assert_close(S @ classical_acceleration(ref, q, v, qdd, frame), a_star, 1e-8)
    # J_Gᵀ F at a new configuration without generalized() first (its (4.6) must follow q)
    q2 = model.random_configuration(rng)
    ws.set_configuration(q2, invert=False)
    JG2, _ = dense_generalized(ref, model, q2, frame)
    assert_close(ws.generalized_torque(F), (S @ JG2).T @ F, 1e-10)


def test_generalized_task_inertia_of_a_free_flying_base():
    """A UR5 on a passive free-flying base (a space robot, no gravity): Λ_G⁻¹ against the dense
    partition and the task acceleration through Pinocchio's free-flyer forward dynamics."""
    rng = np.random.default_rng(11)
    text = EXAMPLE_URDFS["ur5"].read_text()
    model = RobotModel.from_urdf(text, floating_base=True, gravity=(0.0, 0.0, 0.0))
    ref = PinRef(model, text, floating=True)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    JG, Saa = dense_generalized(ref, model, q, "tool0")
    assert_close(osp.generalized_task_inertia_inverse(model, q, "tool0").full,
                 JG @ np.linalg.solve(Saa, JG.T), 1e-10)
    LG = osp.generalized_task_inertia(model, q, "tool0")
    mu, p = osp.generalized_task_bias(model, q, v, "tool0")
    assert_close(p, np.zeros(6), 1e-12)
    a_star = rng.normal(size=6)
    tau = np.zeros(model.nv)
    tau[model.active_dofs] = JG.T @ (LG @ a_star + mu + p)
    qdd = ref.aba(q, v, tau)
    assert_close(classical_acceleration(ref, q, v, qdd, "tool0"), a_star, 1e-8)


def test_generalized_task_limits_are_reported():
    """k > n_a, and a direction the passive joints absorb: a passive last joint whose body is
    symmetric about its axis (centre of mass on it) cannot be spun about that axis by the
    motors, though Λ of the whole mechanism exists."""
    urdf = """<robot name="absorb"><link name="base"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
        <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <link name="l1"><inertial><origin xyz="0.1 0 0"/><mass value="2"/>
        <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
      <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
        <origin xyz="0.2 0 0"/><axis xyz="0 1 0"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <link name="l2"><inertial><origin xyz="0.15 0 0.02"/><mass value="1.5"/>
        <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.03"/></inertial></link>
      <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/>
        <origin xyz="0.3 0 0"/><axis xyz="1 0 0"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <link name="l3"><inertial><origin xyz="0.1 0 0"/><mass value="1"/>
        <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
      </robot>"""
    model = RobotModel.from_urdf(urdf, passive_joints=["j3"])
    q = np.array([0.3, -0.4, 0.7])
    with pytest.raises(osp.SingularTaskError, match="has 6 directions but the model has only 2"):
        osp.generalized_task_inertia(model, q, "l3")
    from underactuated_control.jacobians import frame_placement

    _, R = frame_placement(model, q, "l3")
    spin = np.concatenate([np.zeros(3), R[:, 0]])[None, :]  # about joint 3's axis, root axes
    assert osp.task_inertia(model, q, "l3", spin)[0, 0] > 0  # the mechanism: fine
    assert np.isfinite(osp.task_inertia(model.with_passive([]), q, "l3", spin)).all()
    with pytest.raises(osp.SingularTaskError, match="absorb"):
        osp.generalized_task_inertia(model, q, "l3", spin)
    assert osp.generalized_task_inertia(model, q, "l3", [0, 1]).shape == (2, 2)


@pytest.mark.parametrize("case", ["panda", "random"])
def test_effective_mass_through_the_motors_grows_when_a_joint_goes_passive(case):
    """The property, measured: with the passive set growing ∅ ⊂ P₁ ⊂ P₂ (actuators failing),
    the effective mass the motors feel at the hand, 1/m = uᵀ (Λ_G⁻¹)_vv u, never decreases:
    Λ_G⁻¹ = max over joint accelerations that load no passive joint, a smaller set each time
    (proof in generalized_task_inertia's docstring); with no passive joint it is eq. (30).
    Each value is also measured: T_a = J_Gᵀ u from rest without gravity, passive joints free,
    gives u · a = 1/m (Pinocchio's forward dynamics). The mechanism's own Λ (all joints free,
    eq. 17) does not depend on which joints have motors."""
    rng = np.random.default_rng(7)
    if case == "panda":
        text = panda_arm_text()
        base = RobotModel.from_urdf(text, gravity=(0, 0, 0))
        frame, sets = "panda_hand_tcp", [[], ["panda_joint2"], ["panda_joint2", "panda_joint5"]]
    else:
        text = random_tree_urdf(rng, 9, chain=True, prismatic=False)
        base = RobotModel.from_urdf(text, gravity=(0, 0, 0))
        frame, sets = "link9", [[], ["joint4"], ["joint4", "joint7"]]
    q = base.random_configuration(rng)
    U = rng.normal(size=(50, 3))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    m_full = osp.effective_mass(base, q, frame, U)
    masses, inverses = [], []
    for passive in sets:
        model = base.with_passive(passive)
        ref = PinRef(model, text)
        JG, Saa = dense_generalized(ref, model, q, frame)
        inv = osp.generalized_task_inertia_inverse(model, q, frame)
        assert_close(inv.full, JG @ np.linalg.solve(Saa, JG.T), 1e-10)
        m = osp.generalized_effective_mass(model, q, frame, U)
        masses.append(m)
        inverses.append(inv.linear)
        assert_close(osp.effective_mass(model, q, frame, U), m_full, 1e-12)
        zero = np.zeros(model.nv)
        for u, mu_ in zip(U[:3], m[:3]):
            tau = np.zeros(model.nv)
            tau[model.active_dofs] = JG[:3].T @ u
            qdd = ref.aba(q, zero, tau)
            assert_close(u @ classical_acceleration(ref, q, zero, qdd, frame)[:3], 1.0 / mu_,
                         1e-9)
    assert_close(masses[0], m_full, 1e-10)
    for before, after, inv_b, inv_a in zip(masses, masses[1:], inverses, inverses[1:]):
        assert (after >= before * (1 - 1e-10)).all()
        assert (after > before * 1.01).any()  # and it really changes
        assert np.linalg.eigvalsh(inv_b - inv_a).min() > -1e-10 * np.abs(inv_b).max()
    if case == "panda":
        print(f"\npanda hand, effective mass along x, y, z [kg], passive sets {sets}:")
        for passive in sets:
            m = osp.generalized_effective_mass(base.with_passive(passive), q, frame, np.eye(3))
            print(f"  {passive!s:<34} {np.array2string(m, precision=3)}")


# ================================================================ §5 macro/mini
def test_macro_mini_closed_form_of_the_paper():
    """The 3-DOF example of §5.2 (Fig. 10): joint 1 revolute (inertia I1), joints 2 and 3
    prismatic (point masses m2 at joint axis 3, m3 at the effector). In R1:
    Λ_m = diag(m2 + m3, m3) and Λ₀ = diag(m2 η + m3, m3), η = (I1 + m2 q2²)/(I1 + m2 (q2² +
    q3²)) <= 1; in R0 both rotated by q1. (The source text prints "m2 + m3 × η"; (41)–(42)
    with the paper's own A(q) give m2 η + m3: K = [−q3 m2/(m2+m3); 0],
    Ā₁₁ = 1/(I1 + m2 q2² + m2 m3 q3²/(m2+m3)), so 1/Λ₀ₓₓ = (I1 + m2 (q2² + q3²)) /
    ((m2+m3)(I1 + m2 q2²) + m2 m3 q3²).)"""
    I1, m2, m3 = 0.7, 3.0, 1.2
    urdf = f"""<robot name="fig10"><link name="base"/>
      <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/>
        <axis xyz="0 0 1"/></joint>
      <link name="l1"><inertial><mass value="1"/>
        <inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="{I1}"/></inertial></link>
      <joint name="j2" type="prismatic"><parent link="l1"/><child link="l2"/><axis xyz="1 0 0"/>
        <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
      <link name="l2"><inertial><mass value="{m2}"/>
        <inertia ixx="1e-9" ixy="0" ixz="0" iyy="1e-9" iyz="0" izz="0"/></inertial></link>
      <joint name="j3" type="prismatic"><parent link="l2"/><child link="l3"/><axis xyz="0 1 0"/>
        <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
      <link name="l3"><inertial><mass value="{m3}"/>
        <inertia ixx="1e-9" ixy="0" ixz="0" iyy="1e-9" iyz="0" izz="0"/></inertial></link>
      </robot>"""
    model = RobotModel.from_urdf(urdf)
    planar = np.eye(6)[:2]  # x, y of the effector
    for q in ([0.4, 0.8, -0.5], [2.0, -0.3, 1.1]):
        q = np.array(q)
        res = osp.macro_mini_inertia(model, q, "l3", ["j2", "j3"], planar)
        eta = (I1 + m2 * q[1] ** 2) / (I1 + m2 * (q[1] ** 2 + q[2] ** 2))
        Om = np.array([[np.cos(q[0]), -np.sin(q[0])], [np.sin(q[0]), np.cos(q[0])]])
        assert_close(res.mini, Om @ np.diag([m2 + m3, m3]) @ Om.T, 1e-9)
        assert_close(res.combined, Om @ np.diag([m2 * eta + m3, m3]) @ Om.T, 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_theorem_2_reduced_effective_inertia(seed):
    """Random arms, mini = the last 6 joints (pose task) or last 3 (position task): Λ_m⁻¹ =
    J_m A₂₂⁻¹ J_mᵀ (Lemma 1), Λ̄_C of eq. (42) from the dense blocks of A, Λ̄_C ⪰ 0, and
    σ_w(combined) <= σ_w(mini) along 300 random directions (46); Corollary 1 for Λ_v, Λ_ω."""
    rng = np.random.default_rng(20 + seed)
    n = int(rng.integers(8, 14))
    text = random_tree_urdf(rng, n, chain=True, fixed_links=False)
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    frame = f"link{n}"
    pose = seed % 2 == 0
    nm = 6 if pose else 3
    mini = list(model.joint_names[-nm:])
    rows = None if pose else "linear"
    S = S_of(rows)
    q = model.random_configuration(rng)
    A, J, _ = dense(ref, q, frame)
    Js = S @ J
    M, m = np.arange(model.nv - nm), np.arange(model.nv - nm, model.nv)
    A11, A21, A22 = A[np.ix_(M, M)], A[np.ix_(m, M)], A[np.ix_(m, m)]
    res = osp.macro_mini_inertia(model, q, frame, mini, rows)
    assert_close(res.combined_inverse, Js @ np.linalg.solve(A, Js.T), 1e-10)
    assert_close(res.mini_inverse, Js[:, m] @ np.linalg.solve(A22, Js[:, m].T), 1e-10)
    K = Js[:, M] - Js[:, m] @ np.linalg.solve(A22, A21)  # V J_M − J_m A₂₂⁻¹ A₂₁
    C_ref = K @ np.linalg.solve(A11 - A21.T @ np.linalg.solve(A22, A21), K.T)  # (42)
    assert_close(res.coupling_inverse, C_ref, 1e-9)
    assert np.linalg.eigvalsh(res.coupling_inverse).min() > -1e-10 * np.abs(C_ref).max()
    w = rng.normal(size=(300, nm))
    comb, mini_sigma = res.effective(w)
    assert (comb <= mini_sigma * (1 + 1e-10)).all()
    assert (comb < 0.99 * mini_sigma).any()  # the bound is not an identity here
    if pose:  # Corollary 1: the Λ_v and Λ_ω blocks, along 3-D directions
        u = rng.normal(size=(100, 3))
        for blk in (slice(0, 3), slice(3, 6)):
            cm, mm = osp.MacroMiniInertia(res.combined_inverse[blk, blk],
                                          res.mini_inverse[blk, blk], None, None, None,
                                          ()).effective(u)
            assert (cm <= mm * (1 + 1e-10)).all()


def test_dextrous_dynamic_coordination():
    """Eqs. (53)–(55) on the Panda (mini = joints 5–7): Γ_nd = N Γ_Dextrous against the dense
    projector; through Pinocchio's forward dynamics it changes no task acceleration; it lowers
    V to first order (Γᵀ A⁻¹ Γ_nd > 0); and closed loop (hand held by the operational-space
    law, RK4 at 1 kHz on Pinocchio's aba, 2 s) it brings the mini joints toward mid-range
    while the hand does not move."""
    rng = np.random.default_rng(8)
    text = panda_arm_text()
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    frame, mini = "panda_hand_tcp", ["panda_joint5", "panda_joint6", "panda_joint7"]
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    A, J, _ = dense(ref, q, frame)
    res = osp.dextrous_coordination_torque(model, q, frame, mini, gain=5.0)
    dofs = [model.joint_index(n) for n in mini]
    mid = 0.5 * (model.position_lower[dofs] + model.position_upper[dofs])
    grad_ref = np.zeros(model.nv)
    grad_ref[dofs] = -2.0 * 5.0 * (q[dofs] - mid)  # −∇V of (53)
    assert_close(res.gradient, grad_ref, 1e-12)
    assert_close(res.potential, 5.0 * np.sum((q[dofs] - mid) ** 2), 1e-12)
    Lam = np.linalg.inv(J @ np.linalg.solve(A, J.T))
    N = np.eye(model.nv) - J.T @ (np.linalg.solve(A, J.T) @ Lam).T
    assert_close(res.projected, N @ grad_ref, 1e-9)
    tau = rng.normal(size=model.nv)
    dq = ref.aba(q, v, tau + res.projected) - ref.aba(q, v, tau)
    assert np.linalg.norm(dq) > 1e-3
    assert_close(J @ dq, np.zeros(6), 1e-10, floor=np.abs(dq).max())
    assert res.gradient @ np.linalg.solve(A, res.projected) > 0

    # closed loop: F = Λ (−Kp e − Kd ẋ) + μ + p, Γ = Jᵀ F + N (Γ_Dextrous − D q̇)
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.so3 import log

    ws = osp.OperationalSpace(model)
    ws.set_task(frame)
    q = model.neutral_configuration()
    q[:] = [0.2, -0.4, 0.1, -2.0, 1.2, 2.6, -1.8]  # mini joints far from mid-range
    v = np.zeros(model.nv)
    p0, R0 = frame_placement(model, q, frame)
    kp, kd, dt = 400.0, 40.0, 1e-3

    def control(q, v):
        ws.update(q, v)
        p, R = frame_placement(model, q, frame)
        e = np.concatenate([p - p0, R0 @ log(R0.T @ R)])
        F = ws.Lambda @ (-kp * e - kd * (ws.J @ v)) + ws.mu + ws.p
        dex = osp.dextrous_coordination_torque(model, q, frame, mini, gain=5.0,
                                               workspace=ws).gradient
        return ws.J.T @ F + ws.null_space_torque(dex - 2.0 * v)

    def f(x):
        q, v = x[:model.nq], x[model.nq:]
        return np.concatenate([v, ref.aba(q, v, control(q, v))])

    x = np.concatenate([q, v])
    V0 = osp.dextrous_coordination_torque(model, q, frame, mini, gain=5.0).potential
    worst = 0.0
    for _ in range(2000):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        p, R = frame_placement(model, x[:model.nq], frame)
        worst = max(worst, np.linalg.norm(p - p0), np.linalg.norm(log(R0.T @ R)))
    V1 = osp.dextrous_coordination_torque(model, x[:model.nq], frame, mini, gain=5.0).potential
    print(f"\ndextrous coordination, Panda: V {V0:.3f} -> {V1:.3f} in 2 s, hand moved at most "
          f"{worst:.2e} (m / rad)")
    assert V1 < 0.8 * V0
    assert worst < 1e-6


# ================================================================ §6–7 multi-arm
def rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.sign(np.linalg.det(Q))


def arm_with_point(name, frame, point_world, R, pos, rng, g_world):
    """Our GraspingArm and a Pinocchio model with an OP frame at the common point."""
    text = panda_arm_text() if name == "panda" else EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(text, gravity=tuple(R.T @ g_world))
    ref = PinRef(model, text)
    q = model.random_configuration(rng)
    from underactuated_control.jacobians import frame_placement

    p_f, R_f = frame_placement(model, q, frame)
    offset = R_f.T @ (R.T @ (point_world - pos) - p_f)  # the point in the frame's axes
    fid = ref.pm.getFrameId(frame)
    fr = ref.pm.frames[fid]
    ref.pm.addFrame(pin.Frame("op_point", fr.parentJoint, fid,
                              fr.placement * pin.SE3(np.eye(3), offset), pin.OP_FRAME))
    ref.pd = ref.pm.createData()
    return osp.GraspingArm(model, q, frame, offset, R, pos), ref


def closed_system(arms, refs, load, point, taus, g_world):
    """Dense closed-chain dynamics: arms A_i q̈_i + h_i = Γ_i − J_iᵀ λ_i; the object by
    Newton–Euler at its centre of mass with the wrenches λ_i at the point; rigid grasps
    J_i q̈_i + J̇_i q̇_i = [a_point; ω̇]. Returns [a_point; ω̇] (world axes)."""
    sizes = [a.model.nv for a in arms]
    n = sum(sizes) + 6 + 6 * len(arms)
    K, rhs = np.zeros((n, n)), np.zeros(n)
    r = load.com - point  # point -> centre of mass
    off = 0
    obj = sum(sizes)
    lam = obj + 6
    J0 = refs[0].frame_jacobian(arms[0].q, "op_point")
    w = arms[0].base_rotation @ (J0[3:] @ arms[0].v)
    for i, (arm, ref, tau) in enumerate(zip(arms, refs, taus)):
        ni, T = arm.model.nv, np.kron(np.eye(2), arm.base_rotation)
        A = ref.mass_matrix(arm.q)
        J = T @ ref.frame_jacobian(arm.q, "op_point")
        Jdqd = T @ classical_acceleration(ref, arm.q, arm.v, np.zeros(ni), "op_point")
        li = slice(lam + 6 * i, lam + 6 * i + 6)
        K[off:off + ni, off:off + ni] = A
        K[off:off + ni, li] = J.T
        rhs[off:off + ni] = tau - ref.nle(arm.q, arm.v)
        K[li, off:off + ni] = J  # J q̈ − ϑ̇ = −J̇ q̇
        K[li, obj:obj + 6] = -np.eye(6)
        rhs[li] = -Jdqd
        # object: m a_C = Σ f + m g, I ω̇ + ω × I ω = Σ (n + (p − c) × f), with
        # a_C = a_point + ω̇ × r + ω × (ω × r)
        K[obj:obj + 3, li] = -np.hstack([np.eye(3), np.zeros((3, 3))])
        K[obj + 3:obj + 6, li] = -np.hstack([-pin.skew(r), np.eye(3)])
        off += ni
    m, Ic = load.mass, load.inertia_com
    K[obj:obj + 3, obj:obj + 3] = m * np.eye(3)
    K[obj:obj + 3, obj + 3:obj + 6] = -m * pin.skew(r)
    rhs[obj:obj + 3] = m * g_world - m * np.cross(w, np.cross(w, r))
    K[obj + 3:obj + 6, obj + 3:obj + 6] = Ic
    rhs[obj + 3:obj + 6] = -np.cross(w, Ic @ w)
    return np.linalg.solve(K, rhs)[obj:obj + 6]


@pytest.mark.parametrize("seed", range(3))
def test_theorem_3_augmented_object_against_the_closed_system(seed):
    """Panda + UR5 (+ a Kinova for odd seeds) rigidly holding a random object at a common
    point, random base poses, consistent velocities (the redundant Panda with a null-space
    part): Λ⊕ = Λ_L + Σ Λ_i (63/71) and the object's motion under F⊕ = Λ⊕ F* + μ⊕ + p⊕
    distributed per arm, Γ_i = J_iᵀ F_i + [I − J_iᵀ J̄ᵢᵀ] Γ_i0 (64–68, 76), equal what the
    dense closed-chain model does: the object accelerates by F*, whatever Γ_i0."""
    rng = np.random.default_rng(30 + seed)
    g_world = np.array([0.0, 0.0, -9.81])
    point = rng.uniform(-0.3, 0.3, 3) + [0.0, 0.0, 0.5]
    names = [("panda", "panda_hand_tcp"), ("ur5", "tool0")]
    if seed % 2:
        names.append(("kinova", "j2s6s200_end_effector"))
    arms, refs = [], []
    for name, frame in names:
        arm, ref = arm_with_point(name, frame, point, rotation(rng), rng.uniform(-1, 1, 3), rng,
                                  g_world)
        arms.append(arm)
        refs.append(ref)
    I_c = rng.normal(size=(3, 3))
    load = osp.Load(mass=2.5, inertia_com=I_c @ I_c.T * 0.05 + 0.01 * np.eye(3),
                    com=point + rng.uniform(-0.2, 0.2, 3))
    # velocities: the object's twist from the Panda, the other arms follow it
    arms[0].v = rng.normal(size=arms[0].model.nv)
    T0 = np.kron(np.eye(2), arms[0].base_rotation)
    twist = T0 @ refs[0].frame_jacobian(arms[0].q, "op_point") @ arms[0].v
    for arm, ref in zip(arms[1:], refs[1:]):
        J = np.kron(np.eye(2), arm.base_rotation) @ ref.frame_jacobian(arm.q, "op_point")
        arm.v = np.linalg.solve(J, twist)
    obj = osp.augmented_object(arms, load)
    assert_close(obj.point, point, 1e-9)

    # full dynamics with velocities and gravity, forces distributed, null-space torques added
    f_star = rng.normal(size=6)
    forces = obj.distribute(f_star)
    assert_close(sum(forces), obj.Lambda @ f_star + obj.mu + obj.p, 1e-10)
    taus = obj.arm_torques(forces)
    acc = closed_system(arms, refs, load, point, taus, g_world)
    assert_close(acc, f_star, 1e-7)
    taus0 = [10.0 * rng.normal(size=a.model.nv) for a in arms]
    taus_null = obj.arm_torques(forces, taus0)
    assert max(np.abs(t - u).max() for t, u in zip(taus, taus_null)) > 1.0
    assert_close(closed_system(arms, refs, load, point, taus_null, g_world), f_star, 1e-7)
    # eq. (75) with the reflected load (74) equals each arm's own J̄ (see consistent_inverse)
    for i, arm in enumerate(arms):
        own = obj.jacobians[i]
        A = refs[i].mass_matrix(arm.q)
        Jbar_own = np.linalg.solve(A, own.T) @ obj.Lambda_arms[i]
        assert_close(obj.consistent_inverse(i), Jbar_own, 1e-8)

    # Λ⊕ alone: at rest without gravity, a wrench F on the object (as arm 1 pushing with
    # Γ = J₁ᵀ F) accelerates it by Λ⊕⁻¹ F in the closed system
    still = [osp.GraspingArm(a.model, a.q, a.frame, a.offset, a.base_rotation,
                             a.base_position, np.zeros(a.model.nv)) for a in arms]
    for ref in refs:
        ref.pm.gravity.linear = np.zeros(3)
    J0 = T0 @ refs[0].frame_jacobian(arms[0].q, "op_point")
    cols = [closed_system(still, refs, load, point,
                          [J0.T @ F] + [np.zeros(a.model.nv) for a in arms[1:]], np.zeros(3))
            for F in np.eye(6)]
    assert_close(np.linalg.inv(np.array(cols).T), obj.Lambda, 1e-8)


def test_load_inertia_is_the_kinetic_energy_at_the_point():
    """½ ϑᵀ Λ_L ϑ (59) equals ½ m |v_C|² + ½ ωᵀ I_C ω with v_C = v + ω × r."""
    rng = np.random.default_rng(9)
    B = rng.normal(size=(3, 3))
    Ic, m, r = B @ B.T, 1.7, rng.normal(size=3)
    Lam = osp.load_inertia(m, Ic, r)
    for _ in range(5):
        v, w = rng.normal(size=3), rng.normal(size=3)
        vc = v + np.cross(w, r)
        theta = np.concatenate([v, w])
        assert_close(theta @ Lam @ theta, m * vc @ vc + w @ Ic @ w, 1e-12)


def test_random_passive_sets_keep_full_task_inertia():
    """Λ (eq. 17) is the mechanism's: the same for any passive set of the model."""
    rng = np.random.default_rng(10)
    model, _, frame = load("kinova")
    q = model.random_configuration(rng)
    Lam = osp.task_inertia(model, q, frame)
    for _ in range(3):
        other = model.with_passive(random_passive_set(model, rng, 0.5))
        assert_close(osp.task_inertia(other, q, frame), Lam, 1e-12)


def test_other_input_types_give_the_same_numbers():
    """Lists, float32, read-only and strided q/v/Γ₀ take the converting path."""
    rng = np.random.default_rng(12)
    model, _, frame = load("kinova")
    q, v, t0 = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=6)
    ws = osp.OperationalSpace(model)
    ws.set_task(frame, "linear")
    ws.update(q, v)
    ref = (ws.Lambda.copy(), ws.mu.copy(), ws.p.copy(), ws.null_space_torque(t0).copy())
    ro = q.copy()
    ro.setflags(write=False)
    for qq, vv, tt in ((list(q), list(v), list(t0)), (ro, v[::-1][::-1].copy(), t0),
                       (np.repeat(q, 2)[::2], np.repeat(v, 2)[::2], np.repeat(t0, 2)[::2])):
        ws.update(qq, vv)
        got = (ws.Lambda, ws.mu, ws.p, ws.null_space_torque(tt))
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
    ws.update(q.astype(np.float32), v)
    assert_close(ws.Lambda, ref[0], 1e-5)
