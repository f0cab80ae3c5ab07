"""Where the configuration-control code departs from the Seraji patent's math, each
departure's consequence measured (doc/theory/seraji_patent.md, "Departures"), and the
compiled step against the Python reference and against properties of eq. 10-11."""

import numpy as np
import pytest
from oracle import EXAMPLE_URDFS

from underactuated_control import RobotModel
from underactuated_control.dynamics import inverse_dynamics
from underactuated_control.jacobians import frame_jacobian, frame_placement
from underactuated_control.redundancy.arm_angle import ArmAngle
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
    LinkOrientation,
    Manipulability,
    OptimalJointMovement,
    Sphere,
)
from underactuated_control.so3 import rotation_error

Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
TIP = "panda_link8"


@pytest.fixture(scope="module")
def panda():
    m = RobotModel.from_urdf(EXAMPLE_URDFS["panda"].read_text(), tip_link=TIP)
    return m, ArmAngle(m, "panda_link2", "panda_link4", "panda_link6")


def run_path(m, cc, q, legs, samples=100, settle=30):
    """Cycloidal legs (p0, psi0, p1, psi1, T) with the start orientation; returns q."""
    _, R0 = frame_placement(m, q, TIP)
    for p_a, psi_a, p_b, psi_b, T in legs:
        tr = ConfigurationTrajectory(p_a, R0, psi_a, p_b, R0, psi_b, T)
        for k in range(samples + settle):
            pd, Rd, psid = tr(T * min(k + 1, samples) / samples)
            q = cc.step(q, (pd, Rd), {"arm_angle": psid}).q_next
    return q


# ---------------------------------------------------------------- departure 1: rotation vector
def rpy_rate_matrix_det(R):
    """det of the map from roll-pitch-yaw rates to angular velocity (the patent's Π
    inverse): cos(pitch); zero at pitch = ±90°."""
    pitch = np.arcsin(-np.clip(R[2, 0], -1, 1))
    return np.cos(pitch)


def test_rotation_vector_error_converges_where_rpy_is_singular(panda):
    """The hand's orientation error is log(R_d Rᵀ), not an RPY difference mapped by Π: at a
    target whose pitch is 90° (Π singular: the RPY form is undefined there) the steps still
    converge, and on a cycloidal path through it the orientation error stays small."""
    m, _ = panda
    q = Q0 + np.array([0.2, 0.1, -0.2, 0.1, 0.3, -0.2, 0.1])
    p, R = frame_placement(m, q, TIP)
    # a target orientation with pitch exactly 90°: R_d[2, 0] = -1
    R_d = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    assert abs(rpy_rate_matrix_det(R_d)) < 1e-12
    assert np.linalg.norm(rotation_error(R_d, R)) > 0.3
    cc = ConfigurationControl(m, TIP, [], task_weights=16.0)
    tr = ConfigurationTrajectory(p, R, 0.0, p, R_d, 0.0, 2.0)
    worst = 0.0
    for k in range(130):
        _, Rk, _ = tr(min((k + 1) * 0.02, 2.0))
        q = cc.step(q, (p, Rk)).q_next
        worst = max(worst, np.linalg.norm(rotation_error(Rk, frame_placement(m, q, TIP)[1])))
    err = np.linalg.norm(rotation_error(R_d, frame_placement(m, q, TIP)[1]))
    print(f"\n[departure rotation vector] path to a pitch-90° target: largest error "
          f"{worst:.1e} rad on the way, {err:.1e} rad at the end")
    assert err < 1e-8 and worst < 1e-2


# ---------------------------------------------------------------- departure 2: N_eᵀK
def null_vector(m, q, ref=None):
    n = np.linalg.svd(frame_jacobian(m, q, TIP))[2][-1]
    return n if ref is None or n @ ref >= 0 else -n


def test_optimal_joint_movement_jacobian_approximation_and_its_cost(panda):
    """J_c = N_eᵀ K drops ∂N_e/∂θ of φ = N_eᵀ K (θ - θ0). Measured: the true Jacobian (by
    finite differences) differs from it; the optimality residual N_eᵀ∇G is not held at 0
    along the path (the constraint lags), and comes back to ~0 once the hand stops."""
    m, _ = panda
    k = np.array([20.0, 1, 1, 1, 1, 1, 1])
    q_rest = Q0.copy()
    q = Q0 + np.array([0.3, 0.4, -0.3, 0.4, 0.3, -0.3, 0.4])
    n0 = null_vector(m, q)

    def phi(x):
        return null_vector(m, x, n0) @ (k * (x - q_rest))

    h = 1e-6
    fd = np.array([(phi(q + h * e) - phi(q - h * e)) / (2 * h) for e in np.eye(7)])
    approx = n0 * k
    gap = np.abs(fd - approx).max() / np.abs(fd).max()
    cc = ConfigurationControl(m, TIP, [OptimalJointMovement(m, k, rest=q_rest)],
                              task_weights=16.0)
    p0, R0 = frame_placement(m, Q0, TIP)
    tr = ConfigurationTrajectory(p0, R0, 0, p0 + [0.0, 0.2, -0.1], R0, 0, 2.5)
    qq, residuals = Q0.copy(), []
    for j in range(130):
        pd, Rd, _ = tr(min((j + 1) * 0.025, 2.5))
        qq = cc.step(qq, (pd, Rd)).q_next
        residuals.append(abs(null_vector(m, qq) @ (k * (qq - q_rest))))
    print(f"\n[departure N_eᵀK] |J_c true - N_eᵀK| / |J_c| = {gap:.3f}; residual N_eᵀ∇G: "
          f"largest {max(residuals[:100]):.1e} on the path, {residuals[-1]:.1e} at rest")
    assert gap > 0.03  # the approximation is not exact ...
    assert max(residuals[:100]) > 10 * residuals[-1]  # ... the constraint lags on the path
    assert residuals[-1] < 1e-3  # and is met once the hand stops


# ---------------------------------------------------------------- departure 3: gradients
def test_gradient_functions_are_not_cyclic(panda):
    """Manipulability and gravity torque are null-space gradient steps, not the patent's
    optimality constraint N_e∇ = 0: around a closed hand path the joints do not come back
    (the gradient keeps descending), unlike with the arm angle."""
    m, aa = panda
    q0 = Q0 + np.array([0.3, 0.0, 0.4, 0.0, 0.3, 0.0, 0.0])
    p0, _ = frame_placement(m, q0, TIP)
    P1, P2 = p0 + [0.1, 0.1, 0.05], p0 + [-0.1, 0.1, 0.05]
    psi0 = aa.evaluate(q0).psi
    legs = [(p0, psi0, P1, psi0, 2.0), (P1, psi0, P2, psi0, 2.0), (P2, psi0, p0, psi0, 2.0)]
    grav = GravityTorqueMinimization(m, gain=1e-4)
    q_g = run_path(m, ConfigurationControl(m, TIP, [grav], task_weights=16.0), q0, legs)
    q_a = run_path(m, ConfigurationControl(m, TIP, [ArmAngleFunction(aa)], task_weights=16.0),
                   q0, legs)
    zero = np.zeros(7)

    def g(q):
        tau = inverse_dynamics(m, q, zero, zero)
        return 0.5 * tau @ tau

    print(f"\n[departure gradients] closed path: gravity-torque function leaves the joints "
          f"{np.abs(q_g - q0).max():.3f} rad off (½|τ_g|² {g(q0):.1f} -> {g(q_g):.1f}); arm "
          f"angle {np.abs(q_a - q0).max():.1e} rad")
    assert np.linalg.norm(frame_placement(m, q_g, TIP)[0] - p0) < 1e-3
    assert np.abs(q_g - q0).max() > 1e-2 and g(q_g) < g(q0)
    assert np.abs(q_a - q0).max() < 1e-3


# ---------------------------------------------------------------- departure 4: soft locking
def test_joint_locking_is_soft(panda):
    """Locking is a weighted row, not a removed column: when the hand needs the locked joints
    (two locked, five left for six hand coordinates) they give way, in inverse proportion to
    the locking weight."""
    m, _ = panda
    p0, R0 = frame_placement(m, Q0, TIP)
    target = (p0 + [0.1, -0.1, 0.05], R0)
    drift = {}
    for w in (1e2, 1e4):
        lock = JointLocking(m, ["panda_joint3", "panda_joint5"], weight=w)
        cc = ConfigurationControl(m, TIP, [lock], task_weights=1.0)
        q = Q0.copy()
        for _ in range(100):
            q = cc.step(q, target).q_next
        drift[w] = np.abs(q[[2, 4]] - Q0[[2, 4]]).max()
    ratio = drift[1e2] / drift[1e4]
    print(f"\n[departure soft locking] locked joints drift {drift[1e2]:.2e} rad (w 1e2), "
          f"{drift[1e4]:.2e} rad (w 1e4): ratio {ratio:.0f}")
    assert drift[1e4] > 0  # soft: they move at all
    assert 30 < ratio < 300  # ~ 1/w


# ---------------------------------------------------------------- the collision weight (18)
def test_collision_weight_is_eq_18_times_its_coefficient(panda):
    m, aa = panda
    q = Q0.copy()
    elbow = aa.evaluate(q).elbow
    sphere = Sphere(elbow + [0.0, 0.08, 0.0], 0.02, 0.15)
    # d_c independently: dense samples of the segments between consecutive link origins
    links = [f"panda_link{i}" for i in range(0, 9)]
    pts = [frame_placement(m, q, name)[0] for name in links]
    samples = np.concatenate([a + np.linspace(0, 1, 20001)[:, None] * (b - a)
                              for a, b in zip(pts[:-1], pts[1:])])
    d = np.linalg.norm(samples - sphere.center, axis=1).min()
    assert 0.02 < d < 0.15
    w18 = 1 / (d - 0.02) ** 2 - 1 / (0.15 - 0.02) ** 2
    for coef in (1.0, 3.0):
        cc = ConfigurationControl(m, TIP, [CollisionAvoidance(m, [sphere], tip=TIP,
                                                              weight=coef)])
        w = cc.step(q, frame_placement(m, q, TIP)).weights["collision"]
        assert w.shape == (1,)
        assert w[0] == pytest.approx(coef * w18, rel=1e-3)


# ---------------------------------------------------------------- compiled vs reference
def all_functions(m, aa, q):
    elbow = aa.evaluate(q).elbow
    return [ArmAngleFunction(aa, 2.0), ElbowCoordinate(m, "panda_link4", "y", 0.5),
            CollisionAvoidance(m, [Sphere(elbow + [0.05, 0, 0], 0.02, 0.2)], tip=TIP,
                               weight=2.0),
            JointLimitAvoidance(m, 0.5), JointLocking(m, ["panda_joint3"], 10.0),
            OptimalJointMovement(m, np.arange(1, 8.0), weight=0.3),
            Manipulability(m, TIP, 0.5, 0.2), GravityTorqueMinimization(m, 1e-4, 0.1),
            LinkOrientation(m, "panda_link5", 0.7)]


@pytest.mark.parametrize("which", [[0, 2], [1, 3, 4], [5, 6, 7, 8], list(range(9))])
def test_compiled_step_matches_the_python_reference(panda, which):
    m, aa = panda
    q = Q0 + 0.1
    p0, R0 = frame_placement(m, q, TIP)
    fa = [all_functions(m, aa, q)[i] for i in which]
    fb = [all_functions(m, aa, q)[i] for i in which]
    a = ConfigurationControl(m, TIP, fa, task_weights=16.0, joint_velocity_weights=0.01)
    b = ConfigurationControl(m, TIP, fb, task_weights=16.0, joint_velocity_weights=0.01,
                             compiled=False)
    assert a.compiled and not b.compiled
    for k in range(15):
        targets = {"arm_angle": 0.3, "elbow_y": 0.02}
        ra = a.step(q, (p0 + 0.002 * k, R0), targets, desired_dq=np.full(7, 1e-3))
        rb = b.step(q, (p0 + 0.002 * k, R0), targets, desired_dq=np.full(7, 1e-3))
        np.testing.assert_allclose(ra.dq, rb.dq, atol=1e-7 * max(1.0, np.abs(rb.dq).max()))
        assert ra.values.keys() == rb.values.keys() and ra.notes == rb.notes
        for name in ra.values:  # null-space rows: the basis sign is arbitrary
            np.testing.assert_allclose(np.abs(ra.values[name]), np.abs(rb.values[name]),
                                       atol=1e-9)
            np.testing.assert_allclose(ra.weights[name], rb.weights[name], rtol=1e-9)
        q = ra.q_next
    # weights changed between steps are used at the next one
    fa[0].weight = 0.0
    assert a.step(q, (p0, R0), {"arm_angle": 0.3}).weights[fa[0].name][0] == 0.0


def test_hand_only_step_is_the_pseudo_inverse(panda):
    """W_v = 0 on a 7-DOF arm: (JᵀWJ) is rank 6 and the step is the minimum-norm solution
    (numpy's pinv), at configurations where a roundoff-size Cholesky pivot once slipped
    through (it added an arbitrary self-motion)."""
    m, _ = panda
    cc = ConfigurationControl(m, TIP, [], task_weights=1.0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        q = m.random_configuration(rng)
        p, R = frame_placement(m, q, TIP)
        dp = 1e-4 * rng.normal(size=3)
        dq = cc.step(q, (p + dp, R)).dq
        pinv = np.linalg.pinv(frame_jacobian(m, q, TIP)) @ np.r_[dp, 0, 0, 0]
        np.testing.assert_allclose(dq, pinv, atol=1e-12)


def test_desired_joint_changes_under_w_v(panda):
    """(JᵀWJ + W_v) dθ = JᵀW dX + W_v dθ_d: with W_v >> JᵀWJ the step tends to dθ_d; the
    hand task alone with a desired change along its null space follows it exactly."""
    m, _ = panda
    q = Q0 + 0.1
    p, R = frame_placement(m, q, TIP)
    want = np.full(7, 1e-3)
    big = ConfigurationControl(m, TIP, [], task_weights=1e-6, joint_velocity_weights=1e6)
    np.testing.assert_allclose(big.step(q, (p, R), desired_dq=want).dq, want, rtol=1e-6)
    n = null_vector(m, q)
    cc = ConfigurationControl(m, TIP, [], task_weights=16.0, joint_velocity_weights=1.0)
    dq = cc.step(q, (p, R), desired_dq=1e-3 * n).dq
    np.testing.assert_allclose(dq, 1e-3 * n, atol=1e-12)
