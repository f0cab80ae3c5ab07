"""ROS-free pieces of the controller node: state matching, effort mapping, trajectory sampling
(trajectory_sampling.py, shared with the action), the joint law (against Pinocchio's dense
hybrid torque)."""

import numpy as np
import pytest
from helpers import ARM7_PATH
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.joint_space import (
    EffortMapper,
    JointReference,
    JointSpaceController,
    JointStateMatcher,
    MissingJointsError,
)
from underactuated_control.control.trajectory_sampling import check_trajectory

ARM7 = ARM7_PATH.read_text()


def test_matcher_any_order_extra_and_missing_joints():
    m = RobotModel.from_urdf(ARM7)
    match = JointStateMatcher(m)
    names = ["gripper"] + [f"joint{i}" for i in (7, 3, 1, 2, 6, 5, 4)]
    pos = [9.0] + [7.0, 3.0, 1.0, 2.0, 6.0, 5.0, 4.0]
    q, v = match.match(names, pos, [0.0] * 8)
    np.testing.assert_array_equal(q, [1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(MissingJointsError, match="joint4"):
        match.match(names[:-1], pos[:-1], [0.0] * 7)
    with pytest.raises(ValueError, match="velocities"):
        match.match(names, pos, [])
    floating = RobotModel.from_urdf(ARM7, floating_base=True)
    with pytest.raises(ValueError, match="floating joints"):
        JointStateMatcher(floating)


def test_effort_mapper_order_passive_slot_and_clamping():
    m = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    mapper = EffortMapper(m, ["joint7", "joint2", "joint1"], limit_scale=0.5)
    tau_active = np.array([100.0, 1.0, 2.0, 3.0, 4.0, -8.0])  # joints 1,3,4,5,6,7
    cmd = mapper.map(tau_active)
    # joint7 limit 12 * 0.5 = 6 -> -8 clamped to -6; passive joint2 -> 0; joint1 87*0.5 = 43.5
    np.testing.assert_array_equal(cmd, [-6.0, 0.0, 43.5])
    assert mapper.saturated_joints() == ["joint7", "joint1"]
    with pytest.raises(ValueError, match="unknown joints in command_joints: \\['j9'\\]"):
        EffortMapper(m, ["j9"])


def _trajectory(times, P, V=None, A=None):
    """The controller's sampler (trajectory_sampling.py) over joints a, b, started at 0 s."""
    n = len(times)
    rows = [[]] * n
    traj = check_trajectory(
        ["a", "b"], [(int(t), int(round((t % 1) * 1e9))) for t in times], P.tolist(),
        V.tolist() if V is not None else rows, A.tolist() if A is not None else rows, rows,
        active_joints=["a", "b"], passive_joints=[], allow_partial=False,
        allow_nonzero_end_velocity=False, start_ns=0, now_ns=0)
    traj.begin(0, P[0], V[0] if V is not None else np.zeros(2), np.zeros(2))

    def sample(t):
        s = traj.sample(int(round(t * 1e9)))
        return s.position, s.velocity, s.acceleration
    return sample


def test_trajectory_sampling_hits_points_and_is_smooth():
    times = np.array([0.0, 1.0, 2.5])
    P = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 2.0]])
    V = np.array([[0.0, 0.0], [0.5, -1.0], [0.0, 0.0]])
    A = np.zeros((3, 2))
    sample_trajectory = _trajectory(times, P, V, A)
    for k, t in enumerate(times):
        p, v, _ = sample_trajectory(t)
        np.testing.assert_allclose(p, P[k], atol=1e-12)
    # the position's derivative equals the given velocity at the knots
    h = 1e-7
    for t in (1.0 - 1e-5, 1.0 + 1e-5):
        p1, _, _ = sample_trajectory(t - h)
        p2, _, _ = sample_trajectory(t + h)
        np.testing.assert_allclose((p2 - p1) / (2 * h), V[1], atol=1e-3)
    p, v, a = sample_trajectory(10.0)  # after the end: hold the last point
    np.testing.assert_allclose(p, P[-1])
    assert not v.any() and not a.any()
    p, _, _ = _trajectory(times, P)(0.5)  # positions only: linear
    np.testing.assert_allclose(p, [0.5, 0.5])


def test_reference_equal_to_state_gives_the_feed_forward_hybrid_torque():
    m = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint5"])
    ref = PinRef(m, ARM7)
    rng = np.random.default_rng(0)
    q, v = m.random_configuration(rng), rng.normal(size=7) * 0.3
    a_ref = rng.normal(size=5)
    ctl = JointSpaceController(m, kp=[10, 20, 30, 40, 50], kd=7.0)
    res = ctl.compute(q, v, JointReference(q[m.active_dofs], v[m.active_dofs], a_ref))
    d, f = 0.05, 0.1  # arm7 <dynamics>
    vp = v[m.passive_dofs]
    tau_a, _ = ref.dense_hybrid(q, v, a_ref, -d * vp - f * np.tanh(vp / 1e-2), m.active_dofs,
                                m.passive_dofs)
    np.testing.assert_allclose(res.tau_active, tau_a, atol=1e-10)
    with pytest.raises(ValueError, match="kp must be a scalar or have 5 entries"):
        ctl.set_gains([1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="kd must be finite and >= 0"):
        ctl.set_gains(1.0, -1.0)
