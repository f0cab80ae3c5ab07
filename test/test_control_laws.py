"""The control-law interface (control/law.py, registry): every mode gives the dense hybrid
torque of its own acceleration law, the J_G/J_D it publishes come from the same (4.6) pass and
equal Pinocchio's dense partition, and laws rebuilt for a new passive set carry the reference."""

import numpy as np
import pytest
from helpers import ARM7_PATH, assert_close
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.joint_law import HoldLaw, JointLaw
from underactuated_control.control.law import ControlLaw
from underactuated_control.control.registry import CONTROL_LAWS, law_parameters
from underactuated_control.control.task_law import TaskLaw
from underactuated_control.control.task_space import TaskReference
from underactuated_control.parameters import coerce

ARM7 = ARM7_PATH.read_text()


def settings(**overrides):
    """Every law parameter at its default, as the node passes them."""
    values = {s.name: coerce(s, s.default) for s in law_parameters()}
    values.update(overrides)
    return values


@pytest.fixture
def state():
    rng = np.random.default_rng(3)
    return (np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5]) + rng.uniform(-0.1, 0.1, 7),
            rng.uniform(-0.5, 0.5, 7))


def assert_dense_jacobians(out, ref, model, q):
    """The J_G, J_D a law published equal Pinocchio's dense partition at the tool."""
    J_G, J_D = ref.generalized_jacobians(q, "tool", model.active_dofs, model.passive_dofs)
    assert_close(out.J_G, J_G, 1e-10)
    assert_close(out.J_D, J_D, 1e-10)


def test_registry_modes_and_parameters():
    assert {"joint", "hold", "task", "operational_space"} <= set(CONTROL_LAWS)
    for mode, law in CONTROL_LAWS.items():
        assert issubclass(law, ControlLaw) and law.mode == mode
        assert law.reference_kind in ("joint", "pose", "none")
    names = [s.name for s in law_parameters()]
    assert len(names) == len(set(names)) and {"kp", "kd", "task_kp_position"} <= set(names)


@pytest.mark.parametrize("law_class", [JointLaw, HoldLaw])
def test_joint_law_is_the_dense_hybrid_torque_with_and_without_jacobians(law_class, state):
    q, v = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    ref = PinRef(model, ARM7)
    kp = [10.0 * (i + 1) for i in range(7)]
    law = law_class(model, settings(kp=kp, kd=[7.0]), "tool")
    a = model.active_dofs
    reference = law.hold_reference(q)
    reference.position += 0.05
    reference.velocity[:] = 0.2
    reference.acceleration[:] = -0.3
    qdd_a = -0.3 + 7.0 * (0.2 - v[a]) + np.array(kp)[a] * 0.05
    # T_p = -d v - f tanh(v / 0.01) from the URDF's <dynamics damping="0.05" friction="0.1">
    v_p = v[model.passive_dofs]
    tau_p = -0.05 * v_p - 0.1 * np.tanh(v_p / 1e-2)
    tau_a, qdd_p = ref.dense_hybrid(q, v, qdd_a, tau_p, a, model.passive_dofs)
    plain = law.compute(q, v, reference, 0.0, with_jacobians=False)
    assert plain.J_G is None and plain.J_D is None
    assert_close(plain.tau_active, tau_a, 1e-10)
    assert_close(plain.qdd_passive, qdd_p, 1e-10)
    tau_plain = plain.tau_active.copy()
    shared = law.compute(q, v, reference, 0.0, with_jacobians=True)
    np.testing.assert_allclose(shared.tau_active, tau_plain, rtol=0, atol=1e-12)
    assert_dense_jacobians(shared, ref, model, q)


def test_task_law_holds_the_measured_pose_and_publishes_its_cycle_jacobians(state):
    q, v = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint1"])
    ref = PinRef(model, ARM7)
    law = TaskLaw(model, settings(task_kd_position=0.0, task_kd_orientation=0.0), "tool")
    reference = law.hold_reference(q)
    assert isinstance(reference, TaskReference)
    out = law.compute(q, np.zeros(7), reference, 0.0, with_jacobians=False)
    # at rest on the reference: qdd_a solves J_G qdd_a = -drift_G (gravity only), and the
    # frame's acceleration J_G qdd_a + drift_G through Pinocchio's forward dynamics is zero
    tau = np.zeros(7)
    tau[model.active_dofs] = out.tau_active
    qdd = ref.aba(q, np.zeros(7), tau)
    J = ref.frame_jacobian(q, "tool")
    assert_close(J @ qdd, np.zeros(6), 1e-8)
    assert_dense_jacobians(out, ref, model, q)


def test_task_singular_threshold_sets_where_the_task_solve_is_damped(state):
    """``task_singular_threshold`` ε and ``task_max_damping`` reach the solve of (6.10): with ε
    below σ_min(S J_G) (Pinocchio's J_G) the hand's acceleration through Pinocchio's forward
    dynamics is exactly the commanded one (zero: at rest on the reference, the passive shoulder
    loaded by gravity); with ε above it the law says 'singular' and the damped solve leaves a
    residual that grows with λ_max."""
    q, _ = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    ref = PinRef(model, ARM7)
    J_G, _ = ref.generalized_jacobians(q, "tool", model.active_dofs, model.passive_dofs)
    sigma_min = np.linalg.svd(J_G, compute_uv=False)[-1]  # pose task: S = I
    J = ref.frame_jacobian(q, "tool")
    residual = {}
    for eps, lam in ((0.5 * sigma_min, 0.05), (2.0 * sigma_min, 0.05), (2.0 * sigma_min, 0.5)):
        law = TaskLaw(model, settings(task_kd_position=0.0, task_kd_orientation=0.0,
                                      task_singular_threshold=eps, task_max_damping=lam),
                      "tool")
        out = law.compute(q, np.zeros(7), law.hold_reference(q), 0.0, with_jacobians=False)
        tau = np.zeros(7)
        tau[model.active_dofs] = out.tau_active
        residual[eps, lam] = np.linalg.norm(J @ ref.aba(q, np.zeros(7), tau))
        assert ("singular" in out.status) == (eps > sigma_min)
    assert residual[0.5 * sigma_min, 0.05] < 1e-8
    assert 1e-6 < residual[2.0 * sigma_min, 0.05] < residual[2.0 * sigma_min, 0.5]


def test_rebuilt_law_carries_the_joint_reference_by_name(state):
    q, _ = state
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    law = JointLaw(model, settings(), "tool")
    reference = law.hold_reference(q)
    reference.position[:] = np.arange(6)
    failed = JointLaw(model.with_passive(["joint2", "joint5"]), settings(), "tool")
    carried = failed.carry_reference(reference, model)
    by_name = dict(zip(model.active_joints, reference.position))
    assert list(carried.position) == [by_name[n] for n in failed.model.active_joints]
    recovered = JointLaw(model.with_passive([]), settings(), "tool")
    back = recovered.carry_reference(reference, model)
    assert np.isnan(back.position[1])  # joint2 newly active: held where it is at the next state
    out = recovered.compute(q, np.zeros(7), back, 0.0, with_jacobians=False)
    assert back.position[1] == q[1] and np.all(np.isfinite(out.tau_active))
