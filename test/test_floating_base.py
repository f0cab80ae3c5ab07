"""Floating-base state (floating_base.py) against Pinocchio: the system's momentum, the base
twist from conservation of momentum, and the estimator's pose against a free-floating robot
integrated by Pinocchio's forward dynamics."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH, SPACE_ARM_PATH
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.task_law import TaskLaw
from underactuated_control.floating_base import (
    MomentumBaseEstimator,
    base_from_odometry,
    floating_root,
    system_momentum,
)
from underactuated_control.so3 import quaternion_to_matrix, rotation_angle

SPACE = SPACE_ARM_PATH.read_text()


@pytest.fixture(scope="module")
def space():
    model = RobotModel.from_urdf(SPACE, floating_base=True, gravity=(0, 0, 0))
    return model, PinRef(model, SPACE)


def pin_momentum(ref, q, v):
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v))
    h = pin.Force.Zero()
    for i in range(1, ref.pm.njoints):
        h += ref.pd.oMi[i].act(ref.pm.inertias[i] * ref.pd.v[i])
    return np.concatenate([h.linear, h.angular])


def test_system_momentum_and_base_twist_equal_pinocchio(space):
    model, ref = space
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = model.random_configuration(rng)
        v = rng.normal(size=model.nv)
        h = pin_momentum(ref, q, v)
        np.testing.assert_allclose(system_momentum(model, q, v), h, atol=1e-11)
        # the base twist that gives h for these joint rates is the true one (any pose, h ≠ 0)
        est = MomentumBaseEstimator(model, momentum=h)
        np.testing.assert_allclose(est.base_twist(q, v), v[:6], atol=1e-11)


def test_estimator_follows_a_free_floating_robot(space):
    """Joints driven by a torque profile, base free (Pinocchio aba, RK4 at 1 ms): the pose
    integrated from the momentum estimate stays within a small angle of the truth."""
    model, ref = space
    q = model.neutral_configuration()
    q[7:] = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]
    v = np.zeros(model.nv)
    est = MomentumBaseEstimator(model)
    dt = 1e-3
    worst = 0.0
    for k in range(2000):
        tau = np.zeros(model.nv)
        tau[6:] = 2.0 * np.sin(2 * np.pi * (k * dt) * np.arange(1, 8) / 4.0)

        def f(q, v, tau=tau):
            return v, ref.aba(q, v, tau)

        k1 = f(q, v)
        k2 = f(model.integrate(q, k1[0], dt / 2), v + dt / 2 * k1[1])
        k3 = f(model.integrate(q, k2[0], dt / 2), v + dt / 2 * k2[1])
        k4 = f(model.integrate(q, k3[0], dt), v + dt * k3[1])
        q = model.integrate(q, (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]) / 6, dt)
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        if k % 2 == 0:  # states at 500 Hz
            q_est, v_est = q.copy(), v.copy()
            est.update(q_est, v_est, (k + 1) * dt)
            err = rotation_angle(quaternion_to_matrix(q_est[3:7]).T @
                                 quaternion_to_matrix(q[3:7]))
            worst = max(worst, err)
            np.testing.assert_allclose(v_est[:6], v[:6], atol=1e-6)
    turned = rotation_angle(quaternion_to_matrix(q[3:7]))
    print(f"\n[momentum] bus turned {np.degrees(turned):.3f} deg in 2 s; estimate off by at "
          f"most {np.degrees(worst):.2e} deg")
    assert turned > np.radians(0.2)
    assert worst < 1e-3 * turned


def test_odometry_mapping_and_errors():
    q, v = base_from_odometry((1, 2, 3), (0, 0, 0, 2.0 * 0.5), (0.1, 0.2, 0.3), (1, 2, 3))
    np.testing.assert_allclose(q, [1, 2, 3, 0, 0, 0, 1])
    np.testing.assert_allclose(v, [0.1, 0.2, 0.3, 1, 2, 3])
    with pytest.raises(ValueError, match="pose.pose.position is not finite"):
        base_from_odometry((np.nan, 0, 0), (0, 0, 0, 1), (0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="orientation has norm 2.0000"):
        base_from_odometry((0, 0, 0), (0, 0, 0, 2), (0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="twist.twist.angular is not finite"):
        base_from_odometry((0, 0, 0), (0, 0, 0, 1), (0, 0, 0), (0, np.inf, 0))


def test_estimator_and_law_input_errors(space):
    model, _ = space
    fixed = RobotModel.from_urdf(ARM7_PATH)
    assert floating_root(fixed) is None and floating_root(model) == 0
    # space_arm.urdf declares its floating joint: it cannot load as a fixed bus, and
    # floating_base adds nothing to it
    declared = RobotModel.from_urdf(SPACE, gravity=(0, 0, 0))
    assert floating_root(declared) == 0 and declared.joint_names == model.joint_names
    np.testing.assert_array_equal(declared.inertia, model.inertia)
    with pytest.raises(ValueError, match="needs a floating root joint"):
        MomentumBaseEstimator(fixed)
    with pytest.raises(ValueError, match="unit quaternion"):
        MomentumBaseEstimator(model, initial_pose=(0, 0, 0, 0, 0, 0, 2))
    settings = {s.name: s.default for s in TaskLaw.parameters}
    settings["hold_passive_dofs"] = ["root_joint/rq"]
    with pytest.raises(ValueError, match="root_joint/rq.*are not passive DOF"):
        TaskLaw(model, settings, "tool")
