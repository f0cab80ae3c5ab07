"""Seraji configuration control: arm angle against finite differences and geometry, cyclicity,
collision avoidance, joint locking, optimal joint movement, passive joints."""

import numpy as np
import pytest
from oracle import EXAMPLE_URDFS, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.jacobians import frame_jacobian, frame_placement
from underactuated_control.redundancy.arm_angle import ArmAngle, arm_angle_from_points
from underactuated_control.redundancy.configuration_control import (
    ConfigurationControl,
    ConfigurationTrajectory,
)
from underactuated_control.redundancy.functions import (
    ArmAngleFunction,
    CollisionAvoidance,
    ElbowCoordinate,
    GravityTorqueMinimization,
    JointLimitAvoidance,
    JointLocking,
    Manipulability,
    OptimalJointMovement,
    Sphere,
)
from underactuated_control.so3 import rotation_error

Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


@pytest.fixture(scope="module")
def panda():
    m = RobotModel.from_urdf(EXAMPLE_URDFS["panda"].read_text(), tip_link="panda_link8")
    return m, ArmAngle(m, "panda_link2", "panda_link4", "panda_link6")


def fd_gradient(f, q, h=1e-6):
    return np.array([(f(q + h * e) - f(q - h * e)) / (2 * h) for e in np.eye(q.size)])


def check_arm_angle_jacobian(m, aa, rng, samples):
    """ψ's analytic Jacobian against finite differences at random non-singular q."""
    for _ in range(samples):
        q = m.random_configuration(rng)
        val = aa.evaluate(q)
        if val.singular:
            continue
        fd = fd_gradient(lambda x: aa.evaluate(x).psi, q)
        np.testing.assert_allclose(val.jacobian, fd, atol=1e-6)


def test_arm_angle_jacobian_by_finite_differences_panda(panda):
    m, aa = panda
    check_arm_angle_jacobian(m, aa, np.random.default_rng(0), 10)


@pytest.mark.parametrize("seed", range(4))
def test_arm_angle_jacobian_random_seven_dof_chains(seed):
    rng = np.random.default_rng(seed)
    m = RobotModel.from_urdf(random_tree_urdf(rng, 7, chain=True, prismatic=False))
    aa = ArmAngle(m, "link1", "link4", "link6", reference=rng.normal(size=3))
    check_arm_angle_jacobian(m, aa, rng, 5)


def srs_arm_urdf() -> str:
    """A 7-DOF S-R-S arm (iiwa-like): joints 1-3 meet at the shoulder S, 5-7 at the wrist W,
    so with the hand fixed S and W are fixed and self-motion is a pure elbow rotation."""
    inertial = ('<inertial><origin xyz="0 0 0.1"/><mass value="2"/><inertia ixx="0.02" '
                'ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.01"/></inertial>')
    joints = [("0 0 0.34", "0 0 1"), ("0 0 0", "0 1 0"), ("0 0 0", "0 0 1"),
              ("0 0 0.4", "0 1 0"), ("0 0 0.4", "0 0 1"), ("0 0 0", "0 1 0"),
              ("0 0 0", "0 0 1")]
    out = [f'<robot name="srs"><link name="link0">{inertial}</link>']
    for i, (xyz, axis) in enumerate(joints, start=1):
        out.append(f'<joint name="j{i}" type="revolute"><parent link="link{i - 1}"/>'
                   f'<child link="link{i}"/><origin xyz="{xyz}"/><axis xyz="{axis}"/>'
                   '<limit lower="-3" upper="3" effort="50" velocity="2"/></joint>'
                   f'<link name="link{i}">{inertial}</link>')
    out.append('<joint name="tool_joint" type="fixed"><parent link="link7"/><child link="tool"/>'
               '<origin xyz="0 0 0.126"/></joint><link name="tool"/></robot>')
    return "".join(out)


def test_arm_angle_geometric_meaning():
    """Self-motion with the hand fixed rotates the elbow about SW: ψ changes by exactly the
    angle of that rotation, measured independently from the elbow positions."""
    m = RobotModel.from_urdf(srs_arm_urdf())
    aa = ArmAngle(m, "link2", "link4", "link6")
    rng = np.random.default_rng(3)
    q = np.array([0.2, 0.5, -0.3, -1.2, 0.4, 0.8, 0.1]) + rng.uniform(-0.1, 0.1, 7)
    q_start = q.copy()
    v0 = aa.evaluate(q)
    S, E0, W = v0.shoulder, v0.elbow, v0.wrist
    p_hand, R_hand = frame_placement(m, q, "tool")
    for _ in range(300):  # move along the hand's null space, small steps
        J = frame_jacobian(m, q, "tool")
        _, s, Vt = np.linalg.svd(J)
        n = Vt[-1]
        n *= np.sign(n @ aa.evaluate(q).jacobian)
        q = q + 2e-3 * n
        # pull the hand back onto its pose (second-order drift of the null-space walk)
        p, R = frame_placement(m, q, "tool")
        err = np.concatenate([p_hand - p, rotation_error(R_hand, R)])
        q = q + np.linalg.pinv(frame_jacobian(m, q, "tool")) @ err
    v1 = aa.evaluate(q)
    p, R = frame_placement(m, q, "tool")
    assert np.abs(q - q_start).max() > 0.1
    assert np.linalg.norm(p - p_hand) < 1e-8 and np.abs(R - R_hand).max() < 1e-8
    np.testing.assert_allclose(v1.shoulder, S, atol=1e-9)  # S and W stay put
    np.testing.assert_allclose(v1.wrist, W, atol=1e-9)
    u = (W - S) / np.linalg.norm(W - S)
    e0, e1 = E0 - S, v1.elbow - S
    e0p, e1p = e0 - (e0 @ u) * u, e1 - (e1 @ u) * u
    rotation = np.arctan2(u @ np.cross(e0p, e1p), e0p @ e1p)  # elbow rotation about SW
    assert abs(rotation) > 0.3
    np.testing.assert_allclose(v1.psi - v0.psi, rotation, atol=1e-9)
    assert arm_angle_from_points(S, v1.elbow, W) == pytest.approx(v1.psi, abs=1e-12)


def test_arm_angle_singularities_are_reported(panda):
    m, aa = panda
    q = np.zeros(7)  # panda upright: SW vertical = the reference direction
    val = aa.evaluate(q)
    assert val.singular and "parallel" in val.reason
    aa2 = ArmAngle(m, "panda_link2", "panda_link4", "panda_link6", reference=(1, 0, 0))
    q = np.array([0.0, 0.3, 0.0, -0.0698, 0.0, 1.0, 0.0])
    q[3] = 0.0  # stretched elbow (beyond the limit, on purpose)
    val2 = aa2.evaluate(q)
    # panda's elbow offset keeps E off SW; the check must not flag a healthy posture
    assert val2.singular == ("stretched" in val2.reason)
    with pytest.raises(ValueError, match="unknown frame/link 'elbow'"):
        ArmAngle(m, "panda_link2", "elbow", "panda_link6")


def run_triangle(m, cc, aa, q0, legs, dt=0.01, tip="panda_link8", extra=None):
    q = q0.copy()
    R0 = frame_placement(m, q0, tip)[1]
    worst_p = worst_psi = 0.0
    trace = [q.copy()]
    for a, pa, b, pb, T in legs:
        tr = ConfigurationTrajectory(a, R0, pa, b, R0, pb, T)
        for k in range(int(round(T / dt))):
            pd, Rd, psid = tr((k + 1) * dt)
            q = cc.step(q, (pd, Rd), {"arm_angle": psid}).q_next
            p, _ = frame_placement(m, q, tip)
            worst_p = max(worst_p, np.linalg.norm(p - pd))
            worst_psi = max(worst_psi, abs(aa.evaluate(q).psi - psid))
            trace.append(q.copy())
            if extra:
                extra(q)
    return q, worst_p, worst_psi, np.array(trace)


def test_cyclicity_triangle_with_arm_angle(panda):
    """The patent's case study scaled to the Panda: a closed triangular hand path while ψ goes
    0 -> -90° -> +45° -> 0 returns every joint to its start."""
    m, aa = panda
    cc = ConfigurationControl(m, "panda_link8", [ArmAngleFunction(aa)], task_weights=16.0)
    p0, _ = frame_placement(m, Q0, "panda_link8")
    psi0 = aa.evaluate(Q0).psi
    P1, P2 = p0 + [0.1, 0.1, 0.1], p0 + [-0.1, 0.1, 0.1]
    legs = [(p0, psi0, P1, np.radians(-90), 2.0), (P1, np.radians(-90), P2, np.radians(45), 4.0),
            (P2, np.radians(45), p0, psi0, 2.0)]
    q, err_p, err_psi, _ = run_triangle(m, cc, aa, Q0, legs)
    back = np.abs(q - Q0).max()
    print(f"\n[seraji] triangle: joints return within {back:.2e} rad, hand error "
          f"{1e3 * err_p:.4f} mm, arm-angle error {np.degrees(err_psi):.4f} deg")
    assert back < 1e-3
    assert err_p < 1e-3 and np.degrees(err_psi) < 0.5


def test_pseudo_inverse_is_not_cyclic_but_configuration_control_is(panda):
    """Control experiment: the same closed hand path with the plain pseudo-inverse (no arm
    angle) does not return the joints; configuration control with ψ held does."""
    m, aa = panda
    p0, R0 = frame_placement(m, Q0, "panda_link8")
    P1, P2 = p0 + [0.15, 0.15, 0.1], p0 + [-0.15, 0.15, -0.1]
    legs = [(p0, 0, P1, 0, 2.0), (P1, 0, P2, 0, 2.0), (P2, 0, p0, 0, 2.0)]
    plain = ConfigurationControl(m, "panda_link8", [], task_weights=1.0)
    q_plain, *_ = run_triangle(m, plain, aa, Q0, legs)
    psi0 = aa.evaluate(Q0).psi
    held = ConfigurationControl(m, "panda_link8", [ArmAngleFunction(aa)], task_weights=16.0)
    legs_psi = [(a, psi0, b, psi0, T) for a, _, b, _, T in legs]
    q_cc, *_ = run_triangle(m, held, aa, Q0, legs_psi)
    assert np.abs(q_cc - Q0).max() < 1e-3
    assert np.abs(q_plain - Q0).max() > 10 * np.abs(q_cc - Q0).max()


def test_collision_avoidance_keeps_the_arm_out_of_the_inner_sphere(panda):
    m, aa = panda
    # the elbow swings through this sphere when ψ goes from 0 to +60°
    q_probe = Q0.copy()
    p0, R0 = frame_placement(m, Q0, "panda_link8")
    psi0 = aa.evaluate(Q0).psi
    cc0 = ConfigurationControl(m, "panda_link8", [ArmAngleFunction(aa)], task_weights=16.0)
    tr = ConfigurationTrajectory(p0, R0, psi0, p0, R0, psi0 + np.radians(60), 2.0)
    for k in range(100):
        q_probe = cc0.step(q_probe, tr((k + 1) * 0.02)[:2],
                           {"arm_angle": tr((k + 1) * 0.02)[2]}).q_next
        if k == 50:
            elbow_mid = aa.evaluate(q_probe).elbow
    sphere = Sphere(center=elbow_mid + np.array([0.0, 0.0, 0.0]), inner_radius=0.06,
                    outer_radius=0.16)
    ca = CollisionAvoidance(m, [sphere], tip="panda_link8")
    cc = ConfigurationControl(m, "panda_link8", [ArmAngleFunction(aa), ca], task_weights=1e3)
    q = Q0.copy()
    d_min, hand_err = np.inf, 0.0
    weights, fades = [], []
    for k in range(100):
        pd, Rd, psid = tr((k + 1) * 0.02)
        res = cc.step(q, (pd, Rd), {"arm_angle": psid})
        q = res.q_next
        d, _, _ = ca.critical_point(cc.workspace, sphere)
        cc.workspace.set_configuration(q)
        d, _, _ = ca.critical_point(cc.workspace, sphere)
        d_min = min(d_min, d)
        p, _ = frame_placement(m, q, "panda_link8")
        hand_err = max(hand_err, np.linalg.norm(p - pd))
        w = res.weights.get("collision", np.zeros(0))
        weights.append(float(w[0]) if w.size else 0.0)
        fades.append(float(res.weights["arm_angle"][0]))
    print(f"\n[seraji] collision: closest approach {1e3 * d_min:.1f} mm (inner sphere "
          f"{1e3 * sphere.inner_radius:.0f} mm), hand error {1e3 * hand_err:.3f} mm, peak "
          f"w_co {max(weights):.1f}")
    assert d_min > sphere.inner_radius
    assert hand_err < 2e-3
    assert max(weights) > 0  # the obstacle was met
    # weights change continuously: no jump larger than a small fraction of their range
    assert np.abs(np.diff(weights)).max() < 0.5 * max(weights)
    assert np.abs(np.diff(fades)).max() < 0.25


def test_joint_locking_keeps_the_joint_still(panda):
    m, aa = panda
    lock = JointLocking(m, ["panda_joint3"])
    cc = ConfigurationControl(m, "panda_link8", [lock], task_weights=1.0)
    p0, R0 = frame_placement(m, Q0, "panda_link8")
    tr = ConfigurationTrajectory(p0, R0, 0, p0 + [0.1, -0.1, 0.05], R0, 0, 2.0)
    q = Q0.copy()
    for k in range(100):
        pd, Rd, _ = tr((k + 1) * 0.02)
        q = cc.step(q, (pd, Rd)).q_next
    p, _ = frame_placement(m, q, "panda_link8")
    assert abs(q[2] - Q0[2]) < 1e-6
    assert np.linalg.norm(p - (p0 + [0.1, -0.1, 0.05])) < 1e-3


def test_optimal_joint_movement_moves_joint_one_least(panda):
    m, aa = panda
    k = np.array([20.0, 1, 1, 1, 1, 1, 1])
    ojm = OptimalJointMovement(m, k)
    cc = ConfigurationControl(m, "panda_link8", [ojm], task_weights=16.0)
    p0, R0 = frame_placement(m, Q0, "panda_link8")
    target = p0 + [0.0, 0.2, -0.1]
    tr = ConfigurationTrajectory(p0, R0, 0, target, R0, 0, 2.5)
    q = Q0.copy()
    for j in range(100):
        pd, Rd, _ = tr((j + 1) * 0.025)
        q = cc.step(q, (pd, Rd)).q_next
    moved = np.abs(q - Q0)
    print(f"\n[seraji] optimal joint movement, k = {k.tolist()}: |Δθ| = "
          f"{np.round(moved, 3).tolist()}")
    assert np.linalg.norm(frame_placement(m, q, "panda_link8")[0] - target) < 1e-3
    # the null-space condition holds at the end: N_eᵀ ∇G ≈ 0
    J = frame_jacobian(m, q, "panda_link8")
    n = np.linalg.svd(J)[2][-1]
    assert abs(n @ (k * (q - Q0))) < 1e-3
    # compared with uniform springs, the heavy spring reduces joint 1's motion
    cc_uniform = ConfigurationControl(m, "panda_link8", [OptimalJointMovement(m, np.ones(7))],
                                      task_weights=16.0)
    qu = Q0.copy()
    for j in range(100):
        pd, Rd, _ = tr((j + 1) * 0.025)
        qu = cc_uniform.step(qu, (pd, Rd)).q_next
    assert moved[0] < np.abs(qu - Q0)[0]
    assert moved[0] == moved.min() or moved[0] < 0.5 * np.abs(qu - Q0)[0]


def test_other_functions_behave(panda):
    m, aa = panda
    p0, R0 = frame_placement(m, Q0, "panda_link8")
    # at Q0 the arm is planar: E_z is at an extremum of the self-motion, E_y is not
    elbow = ElbowCoordinate(m, "panda_link4", "y")
    cc = ConfigurationControl(m, "panda_link8", [elbow], task_weights=16.0)
    y0 = frame_placement(m, Q0, "panda_link4")[0][1]
    q = Q0.copy()
    for _ in range(50):
        q = cc.step(q, (p0, R0), {"elbow_y": y0 + 0.05}).q_next
    assert abs(frame_placement(m, q, "panda_link4")[0][1] - (y0 + 0.05)) < 1e-3
    assert np.linalg.norm(frame_placement(m, q, "panda_link8")[0] - p0) < 1e-4
    # manipulability increases and gravity torque decreases along the self-motion (from an
    # asymmetric posture: the planar Q0 is a stationary point of both)
    q_asym = Q0 + np.array([0.3, 0.0, 0.4, 0.0, 0.3, 0.0, 0.0])
    p0, R0 = frame_placement(m, q_asym, "panda_link8")
    man = Manipulability(m, "panda_link8", gain=0.5)
    q = q_asym.copy()
    cc = ConfigurationControl(m, "panda_link8", [man], task_weights=16.0)
    w0 = man.value(q)
    for _ in range(30):
        q = cc.step(q, (p0, R0)).q_next
    assert man.value(q) > w0
    grav = GravityTorqueMinimization(m, gain=1e-4)
    q = q_asym.copy()
    cc = ConfigurationControl(m, "panda_link8", [grav], task_weights=16.0)
    g0 = grav.value(q)
    for _ in range(30):
        q = cc.step(q, (p0, R0)).q_next
    assert grav.value(q) < g0
    # joint limits: start close to joint 4's upper limit and push toward it; stays inside
    jl = JointLimitAvoidance(m, margin=0.15)
    cc = ConfigurationControl(m, "panda_link8", [jl], task_weights=1.0)
    q = Q0.copy()
    q[3] = m.position_upper[3] - 0.2
    p_far, R_far = frame_placement(m, np.r_[q[:3], m.position_upper[3] + 0.3, q[4:]],
                                   "panda_link8")
    for _ in range(60):
        q = cc.step(q, (p_far, R_far)).q_next
    assert q[3] < m.position_upper[3]


def test_passive_joint_is_locked_out_of_direct_command(panda):
    """A passive joint in the arm: the resolver plans with the active joints only (the
    passive joint's setpoint never moves; its motion is left to the controller's dynamics)."""
    m, aa = panda
    mp = m.with_passive(["panda_joint3"])
    aap = ArmAngle(mp, "panda_link2", "panda_link4", "panda_link6")
    cc = ConfigurationControl(mp, "panda_link8", [ArmAngleFunction(aap)], task_weights=16.0)
    p0, R0 = frame_placement(mp, Q0, "panda_link8")
    tr = ConfigurationTrajectory(p0, R0, 0, p0 + [0.05, 0.05, 0.0], R0, 0, 1.0)
    q = Q0.copy()
    for k in range(50):
        pd, Rd, _ = tr((k + 1) * 0.02)
        res = cc.step(q, (pd, Rd), {"arm_angle": aa.evaluate(Q0).psi})
        assert res.dq[2] == 0.0
        q = res.q_next
    # six active joints still place the hand (the arm-angle row is then traded off)
    assert np.linalg.norm(frame_placement(mp, q, "panda_link8")[0] - pd) < 5e-3


def test_bad_weights_are_rejected(panda):
    m, aa = panda
    cc = ConfigurationControl(m, "panda_link8", [], task_weights=[1, 1, 1, 1, 1, -1])
    with pytest.raises(ValueError, match="task_weights"):
        cc.step(Q0, frame_placement(m, Q0, "panda_link8"))
    with pytest.raises(ValueError, match="0 <= inner < outer"):
        Sphere([0, 0, 0], 0.3, 0.2)
