"""so3: rotations and rigid motions against Pinocchio (exp3/log3, quaternions, exp6, rpy), finite
differences and their own properties, near the identity and near half a turn."""

import numpy as np
import pinocchio as pin
import pytest

from underactuated_control import so3
from underactuated_control.control import task_space

# distances from π at which log must stay exact (the antisymmetric part vanishes at π)
NEAR_PI = [0.5, 0.1, 0.0999, 1e-2, 1e-4, 1e-6, 1e-9, 1e-13]
SMALL = [1e-3, 1e-6, 1e-9, 1e-11, 1e-13, 1e-300]


def unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def random_rotation(rng):
    return pin.Quaternion(*rng.normal(size=4)).normalized().matrix()


def test_skew_and_cross_are_the_cross_product():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.normal(size=3), rng.normal(size=3)
        np.testing.assert_allclose(so3.skew(a) @ b, np.cross(a, b), atol=1e-15)
        np.testing.assert_allclose(so3.cross(a, b), np.cross(a, b), atol=1e-15)
        np.testing.assert_array_equal(so3.skew(a), pin.skew(a))


def test_exp_matches_pinocchio():
    rng = np.random.default_rng(1)
    vectors = [rng.normal(size=3) * s for s in (0.1, 1.0, 3.0, 10.0) for _ in range(10)]
    vectors += [unit(rng) * t for t in SMALL + [np.pi, 2 * np.pi, 3 * np.pi]]
    vectors.append(np.zeros(3))
    for w in vectors:
        R = so3.exp(w)
        np.testing.assert_allclose(R, pin.exp3(w), atol=1e-14)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-14)


def test_exp_derivative_at_zero_is_skew_by_finite_differences():
    rng = np.random.default_rng(2)
    w, h = rng.normal(size=3), 1e-6
    fd = (so3.exp(h * w) - so3.exp(-h * w)) / (2 * h)
    np.testing.assert_allclose(fd, so3.skew(w), atol=1e-9)


def test_log_matches_the_generating_rotation_vector_and_pinocchio():
    rng = np.random.default_rng(3)
    for _ in range(200):
        w = unit(rng) * rng.uniform(0.0, np.pi - 0.2)
        R = pin.exp3(w)
        np.testing.assert_allclose(so3.log(R), w, atol=1e-14)
        np.testing.assert_allclose(so3.log(R), pin.log3(R), atol=1e-14)


@pytest.mark.parametrize("d", NEAR_PI)
def test_log_near_a_half_turn(d):
    """Angles π - d: axis and angle exact (the sign fixed by R itself); exp(log R) = R."""
    rng = np.random.default_rng(4)
    axes = [unit(rng) for _ in range(100)]
    axes += [np.eye(3)[i] for i in range(3)] + [np.array([1.0, 1.0, 0.0]) / np.sqrt(2)]
    for a in axes:
        w = (np.pi - d) * a
        R = pin.exp3(w)
        got = so3.log(R)
        np.testing.assert_allclose(got, w, atol=1e-13)
        np.testing.assert_allclose(so3.exp(got), R, atol=1e-14)


def test_log_of_exact_half_turns():
    """At π both ±axis are right; either must give R back."""
    for R in (np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0]),
              pin.exp3(np.pi * np.array([1.0, 1.0, 1.0]) / np.sqrt(3))):
        w = so3.log(R)
        assert np.linalg.norm(w) == pytest.approx(np.pi, abs=1e-12)
        np.testing.assert_allclose(so3.exp(w), R, atol=1e-14)


@pytest.mark.parametrize("t", SMALL)
def test_log_near_the_identity(t):
    rng = np.random.default_rng(5)
    for _ in range(20):
        w = t * unit(rng)
        got = so3.log(pin.exp3(w))
        np.testing.assert_allclose(got, w, rtol=1e-9, atol=1e-300)


def test_exp_log_round_trips():
    rng = np.random.default_rng(6)
    for _ in range(200):
        R = random_rotation(rng)
        np.testing.assert_allclose(so3.exp(so3.log(R)), R, atol=1e-14)
        w = unit(rng) * rng.uniform(0.0, np.pi)
        np.testing.assert_allclose(so3.log(so3.exp(w)), w, atol=1e-13)


def test_rotation_error_takes_R_to_R_desired():
    rng = np.random.default_rng(7)
    assert task_space.rotation_error is so3.rotation_error  # one implementation
    for _ in range(50):
        R, R_d = random_rotation(rng), random_rotation(rng)
        e = so3.rotation_error(R_d, R)
        np.testing.assert_allclose(so3.exp(e) @ R, R_d, atol=1e-13)
        np.testing.assert_allclose(e, pin.log3(R_d @ R.T), atol=1e-12)
    R = random_rotation(rng)
    np.testing.assert_array_equal(so3.rotation_error(R, R), np.zeros(3))


def test_rotation_angle_including_tiny_and_half_turns():
    rng = np.random.default_rng(8)
    for t in [*SMALL[:-1], 0.3, 1.0, 2.0, np.pi - 1e-6, np.pi]:
        for _ in range(10):
            R = pin.exp3(t * unit(rng))
            assert so3.rotation_angle(R) == pytest.approx(t, rel=1e-9)
    assert so3.rotation_angle(np.eye(3)) == 0.0


def test_left_jacobian_by_finite_differences_and_pinocchio():
    """exp(w + δ) ≈ exp(J_l(w) δ) exp(w); J_l(w) = Jexp3(w)ᵀ (Pinocchio's right Jacobian)."""
    rng = np.random.default_rng(9)
    h = 1e-6
    for t in [0.0, 1e-9, 1e-7, 0.3, 1.5, 3.0]:
        w = t * unit(rng)
        J = so3.left_jacobian(w)
        np.testing.assert_allclose(J, pin.Jexp3(w).T, atol=1e-12)
        for e in np.eye(3):
            fd = (so3.log(so3.exp(w + h * e) @ so3.exp(w).T)
                  - so3.log(so3.exp(w - h * e) @ so3.exp(w).T)) / (2 * h)
            np.testing.assert_allclose(J @ e, fd, atol=1e-8)


def test_axis_angle_and_rpy_match_pinocchio():
    rng = np.random.default_rng(10)
    for _ in range(20):
        a, t = unit(rng), rng.uniform(-4, 4)
        np.testing.assert_allclose(so3.axis_angle(a, t), pin.exp3(t * a), atol=1e-14)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        np.testing.assert_allclose(so3.rpy_to_matrix(rpy), pin.rpy.rpyToMatrix(rpy), atol=1e-14)


def test_quaternions_match_pinocchio_including_half_turns():
    rng = np.random.default_rng(11)
    rotations = [random_rotation(rng) for _ in range(50)]
    rotations += [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
                  np.diag([-1.0, -1.0, 1.0])]
    rotations += [pin.exp3((np.pi - d) * unit(rng)) for d in NEAR_PI]
    for R in rotations:
        q = so3.matrix_to_quaternion(R)
        assert q[3] >= 0.0 and np.linalg.norm(q) == pytest.approx(1.0, abs=1e-15)
        np.testing.assert_allclose(abs(q @ pin.Quaternion(R).coeffs()), 1.0, atol=1e-12)
        np.testing.assert_allclose(so3.quaternion_to_matrix(q), R, atol=1e-14)
    for _ in range(20):
        x, y, z, w = rng.normal(size=4) * rng.uniform(0.1, 10.0)  # not normalised
        expected = pin.Quaternion(w, x, y, z).normalized().matrix()
        np.testing.assert_allclose(so3.quaternion_to_matrix([x, y, z, w]), expected, atol=1e-14)
        np.testing.assert_allclose(so3.quaternion_matrix(x, y, z, w), expected, atol=1e-14)
        out = np.empty((3, 3))
        assert so3.quaternion_to_matrix(np.array([x, y, z, w]), out) is out


@pytest.mark.parametrize("quat", [(0.0, 0.0, 0.0, 0.0), (1e-12, 0.0, 0.0, 0.0),
                                  (np.nan, 0.0, 0.0, 1.0), (np.inf, 0.0, 0.0, 1.0)])
def test_quaternion_matrix_rejects_quaternions_without_direction(quat):
    with pytest.raises(ValueError, match="zero or non-finite norm"):
        so3.quaternion_matrix(*quat)


def test_quaternion_product_and_exp_match_pinocchio():
    rng = np.random.default_rng(12)
    for _ in range(20):
        a = pin.Quaternion(*rng.normal(size=4)).normalized()
        b = pin.Quaternion(*rng.normal(size=4)).normalized()
        np.testing.assert_allclose(so3.quaternion_multiply(a.coeffs(), b.coeffs()),
                                   (a * b).coeffs(), atol=1e-15)
        for t in (1e-13, 1e-6, 0.5, 3.0):
            w = t * unit(rng)
            q = so3.quaternion_exp(w)
            np.testing.assert_allclose(q, pin.exp3_quat(w), atol=1e-15)
            np.testing.assert_allclose(so3.quaternion_to_matrix(q), pin.exp3(w), atol=1e-14)


def test_integrate_pose_is_the_se3_exponential():
    """(p, q) ⊕ (v, ω) = M exp6(v, ω), with Pinocchio's SE(3) exponential."""
    rng = np.random.default_rng(13)
    for t in (0.0, 1e-10, 1e-3, 0.5, 2.0):
        pose = np.r_[rng.normal(size=3), pin.Quaternion(*rng.normal(size=4)).normalized()
                     .coeffs()]
        twist = np.r_[rng.normal(size=3), t * unit(rng)]
        M = pin.XYZQUATToSE3(pose) * pin.exp6(pin.Motion(twist[:3], twist[3:]))
        got = so3.integrate_pose(pose, twist)
        np.testing.assert_allclose(got[:3], M.translation, atol=1e-14)
        np.testing.assert_allclose(so3.quaternion_to_matrix(got[3:]), M.rotation, atol=1e-14)
        assert np.linalg.norm(got[3:]) == pytest.approx(1.0, abs=1e-15)
