"""The ``operational_space`` control law against Pinocchio: the commanded torques, applied to the
true dynamics (Pinocchio's ABA), give the frame exactly the commanded acceleration F*, with or
without the posture torques (dynamic consistency), with passive joints through the active ones;
force-controlled directions carry the force law (F = J̄ᵀ Γ with Pinocchio's dense J̄)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH, assert_close
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.operational_space_law import OperationalSpaceLaw
from underactuated_control.control.registry import law_parameters
from underactuated_control.parameters import coerce
from underactuated_control.passive_forces import JointForceParameters, PassiveForceModel

ARM7 = ARM7_PATH.read_text()
Q = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])


def settings(**overrides):
    specs = [*law_parameters(), *OperationalSpaceLaw.parameters]
    values = {s.name: coerce(s, s.default) for s in specs}
    values.update(overrides)
    return values


def frame_acceleration(ref, q, v, tau, frame="tool"):
    """[classical linear; angular] acceleration of the frame under joint forces tau (ABA)."""
    qdd = ref.aba(q, v, tau)
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
    pin.updateFramePlacements(ref.pm, ref.pd)
    return pin.getFrameClassicalAcceleration(ref.pm, ref.pd, ref.pm.getFrameId(frame),
                                             pin.LOCAL_WORLD_ALIGNED).vector, qdd


def urdf_passive_torque(v):
    """T_p from the arm7 URDF's <dynamics damping="0.05" friction="0.1">."""
    return -0.05 * v - 0.1 * np.tanh(v / 1e-2)


def commanded(law, q, v, offset=(0.0, 0.0, 0.0)):
    """The law's torques with its setpoint at rest ``offset`` away from the measured pose."""
    reference = law.hold_reference(q)
    reference.position = reference.position + offset
    law.follower.reset(reference.position, reference.rotation)
    return law.compute(q, v, reference, 0.0, with_jacobians=False)


@pytest.fixture
def velocity():
    return np.random.default_rng(4).uniform(-0.5, 0.5, 7)


@pytest.mark.parametrize("posture_kp", [0.0, 25.0])
def test_the_frame_gets_exactly_the_commanded_acceleration(velocity, posture_kp):
    model = RobotModel.from_urdf(ARM7)
    ref = PinRef(model, ARM7)
    law = OperationalSpaceLaw(model, settings(posture_kp=posture_kp, posture="mid_range"),
                              "tool")
    offset = np.array([0.02, -0.01, 0.03])
    out = commanded(law, Q, velocity, offset)
    a, qdd = frame_acceleration(ref, Q, velocity, out.tau_active)
    twist = ref.frame_jacobian(Q, "tool") @ velocity
    f_star = np.r_[100.0 * offset, np.zeros(3)] - 20.0 * twist  # kp e + kd (0 - J q̇)
    assert_close(a, f_star, 1e-9)
    if posture_kp:  # the posture torques moved the joints, not the hand
        plain = OperationalSpaceLaw(model, settings(posture_kp=0.0, posture_kd=0.0), "tool")
        _, qdd_plain = frame_acceleration(ref, Q, velocity,
                                          commanded(plain, Q, velocity, offset).tau_active)
        assert np.abs(qdd - qdd_plain).max() > 1e-3


def test_through_the_active_joints_with_a_passive_joint(velocity):
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    ref = PinRef(model, ARM7)
    law = OperationalSpaceLaw(model, settings(os_task="position"), "tool")
    offset = np.array([0.01, 0.02, -0.01])
    out = commanded(law, Q, velocity, offset)
    tau = np.zeros(7)
    tau[model.active_dofs] = out.tau_active
    tau[model.passive_dofs] = urdf_passive_torque(velocity[model.passive_dofs])
    a, _ = frame_acceleration(ref, Q, velocity, tau)
    twist = ref.frame_jacobian(Q, "tool") @ velocity
    assert_close(a[:3], 100.0 * offset - 20.0 * twist[:3], 1e-9)
    with pytest.raises(ValueError, match="6 directions but only 5 joints are active"):
        OperationalSpaceLaw(model.with_passive(["joint2", "joint4"]), settings(), "tool")


def test_force_controlled_direction_carries_the_force_law():
    model = RobotModel.from_urdf(ARM7)
    ref = PinRef(model, ARM7)
    law = OperationalSpaceLaw(model, settings(force_axes=[0.0, 0.0, 1.0],
                                              force_target=[0.0, 0.0, -5.0], force_kp=0.5),
                              "tool")
    law.measured_wrench = np.array([0.0, 0.0, -3.0, 0.0, 0.0, 0.0])
    v = np.zeros(7)
    offset = np.array([0.02, -0.01, 0.03])
    tau = commanded(law, Q, v, offset).tau_active
    # dense: F = J̄ᵀ Γ = Λ J A⁻¹ Γ (the posture torques drop out), p = Λ J A⁻¹ g
    M = ref.mass_matrix(Q)
    J = ref.frame_jacobian(Q, "tool")
    Lam = np.linalg.inv(J @ np.linalg.solve(M, J.T))
    F = Lam @ J @ np.linalg.solve(M, tau)
    p = Lam @ J @ np.linalg.solve(M, ref.nle(Q, v))
    force = -5.0 + 0.5 * (-5.0 - -3.0)  # F_d + k_f (F_d - F_measured) along z (v = 0)
    # F - p = Λ Ω F* + Ω̄ F_force (10): the motion part has no z row
    motion = np.linalg.solve(Lam, F - p - np.r_[0, 0, force, 0, 0, 0])
    assert_close(motion, np.r_[100.0 * offset[:2], 0.0, np.zeros(3)], 1e-9)


@pytest.mark.parametrize("os_task, force_axes", [("pose", [0.0, 0.0, 0.0]),
                                                  ("position", [0.0, 0.0, 1.0])])
def test_intended_velocity_is_the_joint_velocity_of_the_pd_target(velocity, os_task,
                                                                   force_axes):
    """The friction stage's intent: the motion rows' PD target twist v_sp + (kp/kd) e (none
    on a force row) through J⁺, plus the posture's (kp₀/kd₀)(q₀ − q) in J's null space, with
    Pinocchio's Jacobian and NumPy's pseudo-inverse (away from singularities the damped
    inverse is exact)."""
    model = RobotModel.from_urdf(ARM7)
    ref = PinRef(model, ARM7)
    law = OperationalSpaceLaw(model, settings(os_task=os_task, force_axes=force_axes,
                                              posture="mid_range"), "tool")
    offset = np.array([0.02, -0.01, 0.03])
    out = commanded(law, Q, velocity, offset)  # the setpoint at rest, offset away
    rows = [0, 1, 2] if os_task == "position" else list(range(6))
    J = ref.frame_jacobian(Q, "tool")[rows]
    assert np.linalg.svd(J, compute_uv=False).min() > 1e-2  # the damping is off here
    target = np.r_[100.0 / 20.0 * offset, np.zeros(3)][rows]
    target[np.asarray(force_axes + [0.0] * 3)[rows] == 1.0] = 0.0
    mid = 0.5 * (model.position_lower + model.position_upper)
    assert np.all(np.isfinite(mid))
    pinv = np.linalg.pinv(J)
    expected = pinv @ target + (np.eye(7) - pinv @ J) @ (25.0 / 10.0 * (mid - Q))
    assert_close(out.intended_velocity, expected, 1e-9)


def test_one_workspace_per_cycle_and_its_jacobians_and_passive_response_are_pinocchios(
        velocity):
    """The law's parts share one Workspace (one HybridDynamics per passive set, each configured
    once per q); what it reports with ``with_jacobians`` is still Pinocchio's, cycle after
    cycle at changing configurations."""
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    ref = PinRef(model, ARM7)
    law = OperationalSpaceLaw(model, settings(os_task="position"), "tool")
    shared = law.workspace.shared
    assert law.osp.shared is shared and law.osp.dynamics is shared.hybrid("passive")
    assert law.inertia is shared.hybrid("active")
    assert law.workspace.dynamics is shared.hybrid("model")
    reference = law.hold_reference(Q)
    rng = np.random.default_rng(7)
    for step in range(3):
        q = Q + 0.1 * rng.normal(size=7)
        out = law.compute(q, velocity, reference, 0.01 * step, with_jacobians=True)
        for part in ("passive", "active", "model"):  # each at this q
            np.testing.assert_array_equal(shared.hybrid(part).q_at, q)
        JG, JD = ref.generalized_jacobians(q, "tool", model.active_dofs, model.passive_dofs)
        assert_close(out.J_G, JG, 1e-9)
        assert_close(out.J_D, JD, 1e-9)
        tau = np.zeros(7)
        tau[model.active_dofs] = out.tau_active
        tau[model.passive_dofs] = urdf_passive_torque(velocity[model.passive_dofs])
        assert_close(out.qdd_passive, ref.aba(q, velocity, tau)[model.passive_dofs], 1e-9)


@pytest.mark.parametrize("os_task, passive", [("pose", []), ("position", []),
                                             ("pose", ["joint3"]),
                                             ("position", ["joint2", "joint5"])])
def test_the_cycle_in_one_call_is_the_steps_and_its_accelerations_are_pinocchios(os_task,
                                                                                  passive):
    """The cycle after the setpoint's step is one compiled call (with passive joints through
    the active ones); over cycles with a moving goal and the Jacobians every other cycle its
    torques, accelerations, T_p, intent and Jacobians are the separate steps' (a strided state
    takes those) to 1e-12; its q̈ is Pinocchio's ABA of its torques with the passive joints'
    URDF forces (the active joints' friction is the friction stage's, not the law's), its
    J_G, J_D Pinocchio's. Half-way the laws get another passive-force model (pure damping
    0.7 N·m·s/rad): the one call takes its arrays, not the first model's it gathered."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    a, p = model.active_dofs, model.passive_dofs
    one, steps = (OperationalSpaceLaw(model, settings(os_task=os_task), "tool")
                  for _ in range(2))
    reference = one.hold_reference(Q)
    steps.hold_reference(Q)
    reference.position = reference.position + [0.03, -0.02, 0.01]
    rng = np.random.default_rng(12)
    passive_torque = urdf_passive_torque
    for k in range(40):
        if k == 20:  # another force model on the passive joints
            damped = {name: JointForceParameters(damping=0.7) for name in model.joint_names}
            for law in (one, steps):
                law.passive_forces = PassiveForceModel(model, damped)
            passive_torque = lambda velocity: -0.7 * velocity  # noqa: E731
        q, v = Q + rng.uniform(-0.2, 0.2, 7), rng.uniform(-0.8, 0.8, 7)
        strided = np.stack([q, q], axis=1)[:, 0]
        assert one._in_one_call(q, v) and not steps._in_one_call(strided, v)
        jacobians = k % 2 == 0
        out = one.compute(q, v, reference, 1e-3 * k, jacobians)
        expected = steps.compute(strided, v, reference, 1e-3 * k, jacobians)
        for name in ("tau_active", "qdd_active", "qdd_passive", "tau_passive",
                     "intended_velocity", "task_point", "task_inertia_inverse"):
            assert_close(getattr(out, name), getattr(expected, name), 1e-12, rtol=0.0)
        tau = np.zeros(7)
        tau[a], tau[p] = out.tau_active, passive_torque(v[p])
        assert_close(out.tau_passive, tau[p], 1e-12)
        qdd = ref.aba(q, v, tau)
        assert_close(out.qdd_active, qdd[a], 1e-9)
        assert_close(out.qdd_passive, qdd[p], 1e-9)
        if jacobians:
            JG, JD = ref.generalized_jacobians(q, "tool", a, p)
            assert_close(out.J_G, JG, 1e-9)
            assert_close(out.J_D, JD, 1e-9)
            assert_close(out.J_G, expected.J_G, 1e-12, rtol=0.0)
        else:
            assert out.J_G is None and expected.J_G is None
