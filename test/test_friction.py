"""Friction and damping compensation of the active joints (control/friction.py) and the joint
law's integral action (control/joint_space.py, joint_law.py), ROS-free.

The compensation is checked against independent values: MuJoCo's own passive force of the same
URDF (qfrc_passive: its damping; the URDF friction becomes a frictionloss constraint, not a
passive force) and the analytic f_c tanh(w / v_s); the integral against properties (clamp,
anti-windup, reset, off switch) and, in a MuJoCo closed loop, against what integral action
guarantees: a constant disturbance (here an unmodelled load) rejected."""

import numpy as np
import pytest
from helpers import ARM7_PATH
from oracle import ROBOTS

from underactuated_control import RobotModel
from underactuated_control.control.command import CommandShaper
from underactuated_control.control.friction import FrictionCompensation
from underactuated_control.control.joint_law import HoldLaw, JointLaw
from underactuated_control.control.joint_space import JointReference, JointSpaceController
from underactuated_control.control.law import LawOutput
from underactuated_control.control.registry import default_settings

XARM7 = (ROBOTS / "xarm_description/urdf/xarm7.urdf").read_text()
ARM7 = ARM7_PATH.read_text()


def settings(**overrides):
    values = default_settings()
    values["effort_limit_scale"] = 1.0
    values.update(overrides)
    return values


def mujoco_passive(urdf: str, model: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """MuJoCo's qfrc_passive of the model's 1-DOF joints (model DOF order)."""
    import mujoco

    from underactuated_control.sim import build_plant

    plant = build_plant(urdf, model)
    plant.set_state(q, v)
    mujoco.mj_forward(plant.m, plant.d)
    return plant.d.qfrc_passive[plant.vadr].copy()


def test_viscous_part_is_minus_mujocos_damping_force_on_the_active_joints():
    model = RobotModel.from_urdf(XARM7, passive_joints=["joint3"])
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, scale=1.0)
    v = rng.uniform(-1.0, 1.0, model.nv)
    comp = FrictionCompensation(model, settings(friction_compensation_scale=0.0))
    got = comp.compensation(q, v)
    want = -mujoco_passive(XARM7, model, q, v)[model.active_dofs]
    assert np.abs(want).min() > 0.1  # damping 2-10 N·m·s/rad: a real force on every joint
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # scaled
    half = FrictionCompensation(model, settings(friction_compensation_scale=0.0,
                                                damping_compensation_scale=0.5))
    np.testing.assert_allclose(half.compensation(q, v), 0.5 * want, rtol=1e-12, atol=1e-12)


def test_coulomb_part_is_the_smooth_sign_of_the_intended_motion():
    model = RobotModel.from_urdf(XARM7)
    na = model.n_active
    q, v = np.zeros(model.nq), np.zeros(model.nv)
    v_s = 0.02
    comp = FrictionCompensation(model, settings(damping_compensation_scale=0.0,
                                                friction_smoothing_velocity=v_s))
    f_c = np.asarray(model.friction)[model.active_dofs]
    assert np.all(f_c == 1.0)  # the URDF's 1 N·m on every joint
    w = np.linspace(-0.1, 0.1, na)
    np.testing.assert_allclose(comp.compensation(q, v, w), f_c * np.tanh(w / v_s), rtol=1e-12)
    # the sign follows the intended motion, not the measured one; none at rest with no intent
    v_against = -np.sign(w) * 0.5
    v_against[np.abs(w) < 1e-12] = 0.0
    assert np.all(np.sign(comp.compensation(q, v_against, w)) == np.sign(w))
    assert np.all(comp.compensation(q, np.zeros(model.nv), np.zeros(na)) == 0.0)
    # without an intent (task-space laws): α v, zero slope at rest, the measured velocity beyond
    v = np.linspace(-0.05, 0.05, model.nv)
    alpha = np.minimum(1.0, np.abs(v) / v_s)
    np.testing.assert_allclose(comp.compensation(q, v), f_c * np.tanh(alpha * v / v_s),
                               rtol=1e-12)
    tiny = comp.compensation(q, np.full(model.nv, 1e-6 * v_s))
    assert np.all(np.abs(tiny) < 1e-11)  # ~ f_c (v/v_s)²: no negative damping at rest
    # smooth and odd, bounded by f_c, tanh(1) at v_s
    ws = np.linspace(-5 * v_s, 5 * v_s, 2001)
    values = np.array([comp.compensation(q, np.zeros(model.nv), np.full(na, x))[0]
                       for x in ws])
    assert np.all(np.diff(values) > 0) and np.all(np.abs(values) < 1.0)
    np.testing.assert_allclose(values, -values[::-1], atol=1e-15)
    assert np.abs(np.diff(values)).max() < 1.01 * (ws[1] - ws[0]) / v_s  # slope ≤ f_c / v_s
    np.testing.assert_allclose(comp.compensation(q, np.zeros(model.nv), np.full(na, v_s)),
                               np.tanh(1.0), rtol=1e-12)


def test_apply_adds_it_to_every_modes_output_and_switches_off():
    model = RobotModel.from_urdf(XARM7)
    rng = np.random.default_rng(1)
    q, v = model.random_configuration(rng, scale=1.0), rng.uniform(-1, 1, model.nv)
    tau = rng.uniform(-5, 5, model.n_active)
    # the friction stage alone (the safety layer may override random torques at random speeds)
    on = CommandShaper(model, settings(safety_limits=False))
    out = on.apply(q, v, LawOutput(tau.copy(), np.zeros(0)))
    np.testing.assert_allclose(out.tau_active - tau, on.friction.compensation(q, v),
                               rtol=1e-12)
    # a law that compensates its own joints' friction (swing_up) gets nothing added
    np.testing.assert_array_equal(on.apply(q, v, LawOutput(
        tau.copy(), np.zeros(0), friction_compensated=True)).tau_active, tau)
    off = CommandShaper(model, settings(friction_compensation=False, safety_limits=False))
    np.testing.assert_array_equal(off.apply(q, v, LawOutput(tau.copy(), np.zeros(0))).tau_active,
                                  tau)
    # zero where the URDF gives no <dynamics> (the bundled arm7 without them)
    bare = RobotModel.from_urdf(ARM7.replace('damping="0.05" friction="0.1"',
                                             'damping="0" friction="0"'))
    shaper = CommandShaper(bare, settings(safety_limits=False))
    assert not shaper.friction.enabled
    t7 = rng.uniform(-5, 5, 7)
    np.testing.assert_array_equal(shaper.apply(np.zeros(7), np.ones(7),
                                               LawOutput(t7.copy(), np.zeros(0))).tau_active, t7)


def test_viscous_part_over_a_period_gives_the_commanded_acceleration_in_mujoco():
    """On xarm7's wrist (1.4e-4 kg·m², 2 N·m·s/rad: I/d = 0.07 ms, shorter than the 1 ms period)
    the joint's speed settles on the torque within a period; MuJoCo's Euler step treats the
    damping so ((M + h D) Δv/h = τ). The damping compensated at v + h a, a the accelerations
    the command implies (the safety layer's forward dynamics), gives the law's accelerations
    (oracle: Pinocchio's RNEA of the wanted ones; MuJoCo's step); at v alone, the light joints
    get a fraction M/(M + h d) of them."""
    import pinocchio as pin

    from underactuated_control.sim import build_plant

    urdf = XARM7.replace('friction="1"', 'friction="0"')  # damping only (no constraint)
    model = RobotModel.from_urdf(urdf)
    pmodel = pin.buildModelFromXML(urdf)
    pdata = pmodel.createData()
    rng = np.random.default_rng(3)
    h = 1e-3
    q = 0.5 * (np.asarray(model.position_lower) + np.asarray(model.position_upper))
    q += rng.uniform(-0.3, 0.3, model.nq)
    v = rng.uniform(-0.5, 0.5, model.nv)
    a = rng.uniform(-20.0, 20.0, model.nv)
    tau = pin.rnea(pmodel, pdata, q, v, a)  # the law: these accelerations, frictionless
    got = {}
    for period in (h, 0.0):
        shaper = CommandShaper(model, settings(damping_compensation_period=period))
        out = shaper.apply(q, v, LawOutput(tau.copy(), np.zeros(0),  # moving as intended
                                           intended_velocity=v[model.active_dofs].copy()))
        assert not shaper.safety.overrode
        np.testing.assert_allclose(shaper.safety.acceleration, a, rtol=1e-9, atol=1e-9)
        plant = build_plant(urdf, model, timestep=h, integrator="euler")
        plant.set_state(q, v)
        plant.d.ctrl[plant.ctrl] = out.tau_active
        plant.step()
        got[period] = (plant.state()[1] - v) / h
    np.testing.assert_allclose(got[h], a, rtol=1e-6, atol=1e-6)
    assert np.abs(got[0.0][6] - a[6]) > 0.5 * np.abs(a[6])  # the wrist: most of it lost


def test_no_coulomb_compensation_on_a_joint_the_command_slows_beyond_its_speed_bound():
    """A joint beyond its URDF velocity limit that the command (the safety layer) decelerates
    gets no dry-friction compensation: its friction helps the braking (compensated, a light
    joint's friction adds the same again in the direction of motion: over the limit). The
    other joints keep theirs; the viscous part stays (blended with the intent, which is no
    motion on the braked joint)."""
    model = RobotModel.from_urdf(XARM7)
    q = 0.5 * (np.asarray(model.position_lower) + np.asarray(model.position_upper))
    limit = np.asarray(model.velocity_limit)[model.active_dofs]
    v = 0.5 * limit
    v[6] = 1.5 * limit[6]  # the wrist too fast
    tau = np.zeros(model.n_active)
    w = np.sign(v)  # the law intends to keep moving
    on = CommandShaper(model, settings())
    out = on.apply(q, v, LawOutput(tau.copy(), np.zeros(0), intended_velocity=w))
    assert on.safety.overrode and on.safety.acceleration[6] < 0.0
    assert list(np.flatnonzero(on.safety.braked(v))) == [6]
    beta = on.friction.feedback_share[model.active_dofs]  # checked against the loop's roots
    w_braked = np.where(np.arange(7) == 6, 0.0, w)  # the braked wrist intends no motion
    viscous = np.asarray(model.damping)[model.active_dofs] * (
        beta * v + (1.0 - beta) * w_braked + 1e-3 * on.safety.acceleration)
    added = out.tau_active - on.safety._tau_out
    np.testing.assert_allclose(added[6], viscous[6], rtol=1e-12)  # no f_c on the wrist
    np.testing.assert_allclose(added[:6], viscous[:6] + np.tanh(w[:6] / 0.01), rtol=1e-9)


def test_bad_settings_are_refused_with_their_name():
    model = RobotModel.from_urdf(XARM7)
    with pytest.raises(ValueError, match="friction_smoothing_velocity"):
        FrictionCompensation(model, settings(friction_smoothing_velocity=0.0))
    with pytest.raises(ValueError, match="damping_compensation_period"):
        FrictionCompensation(model, settings(damping_compensation_period=-1e-3))
    with pytest.raises(ValueError, match="damping_compensation_scale"):
        FrictionCompensation(model, settings(damping_compensation_scale=float("nan")))
    with pytest.raises(ValueError, match="ki"):
        JointSpaceController(model, ki=-1.0)
    with pytest.raises(ValueError, match="i_clamp"):
        JointSpaceController(model, ki=1.0, i_clamp=[1.0, 2.0])


# ----------------------------------------------------------------------------- integral action
def law_and_state(**overrides):
    model = RobotModel.from_urdf(XARM7)
    law = JointLaw(model, settings(**overrides), "link7")
    q = model.random_configuration(np.random.default_rng(2), scale=0.5)
    return model, law, q, np.zeros(model.nv)


def test_integral_is_ki_times_the_error_integral_within_its_clamp():
    ki, clamp, dt = 300.0, 2.0, 1e-3
    model, law, q, v = law_and_state(ki=[ki], i_clamp=[clamp])
    ref = law.hold_reference(q)
    error = np.linspace(-0.02, 0.02, model.n_active)
    ref.position += error
    law.compute(q, v, ref, 0.0, False)  # the first cycle has no interval yet
    assert np.all(law.controller.integral == 0.0)
    law.compute(q, v, ref, dt, False)
    np.testing.assert_allclose(law.controller.integral, ki * error * dt, rtol=1e-12)
    for k in range(2, 2000):
        law.compute(q, v, ref, k * dt, False)
    assert np.all(np.abs(law.controller.integral) <= clamp)
    big = np.abs(ki * error * 1999 * dt) > clamp
    assert big.any()
    np.testing.assert_allclose(np.abs(law.controller.integral[big]), clamp)
    # the integral is an acceleration: the torque of qdd_a = I through the hybrid recursion
    integral = law.controller.integral.copy()
    plain = JointSpaceController(model, kp=0.0, kd=0.0)
    held = law.hold_reference(q)
    want = plain.compute(q, v, JointReference(held.position, held.velocity, integral)
                         ).tau_active.copy()
    pure = JointLaw(model, settings(kp=[0.0], kd=[0.0], ki=[1.0], i_clamp=[1e6]), "link7")
    pure.controller.integral[:] = integral
    got = pure.compute(q, v, held, 0.0, False).tau_active
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.abs(integral).max() > 0.5


def test_ki_zero_is_the_law_without_integral_bit_for_bit():
    model, law, q, v = law_and_state(ki=[0.0])
    ref = law.hold_reference(q)
    ref.position += 0.03
    plain = JointSpaceController(model, kp=100.0, kd=20.0)
    for k in range(5):
        got = law.compute(q, v, ref, k * 1e-3, False).tau_active.copy()
        np.testing.assert_array_equal(got, plain.compute(q, v, ref).tau_active)
    assert np.all(law.controller.integral == 0.0)


def test_anti_windup_no_integration_into_saturation_or_while_overridden():
    model, law, q, v = law_and_state(ki=[1000.0], i_clamp=[1e6])
    ref = law.hold_reference(q)
    ref.position += 0.05  # every joint pulled in +
    out = law.compute(q, v, ref, 0.0, False)
    out.tau_active = out.tau_active.copy()
    out.tau_active[0] = 1e3  # the shaped command of joint1 beyond its 50 N·m limit, same sign
    out.tau_active[1] = -1e3  # joint2 saturated the other way: unwinding is allowed
    law.compute(q, v, ref, 1e-3, False)
    assert law.controller.integral[0] == 0.0
    assert law.controller.integral[1] > 0.0 and np.all(law.controller.integral[2:] > 0.0)
    before = law.controller.integral.copy()
    out = law.compute(q, v, ref, 2e-3, False)  # nothing saturated: all integrate
    assert np.all(law.controller.integral > before)
    out.status = "safety layer: joint velocity limit"  # a stage overrode the law
    before = law.controller.integral.copy()
    law.compute(q, v, ref, 3e-3, False)
    np.testing.assert_array_equal(law.controller.integral, before)
    # a new latch (mode start, safety stop, cancelled goal) starts from zero
    law.hold_reference(q)
    assert np.all(law.controller.integral == 0.0)
    # a new law (mode change, new gains) too
    assert np.all(HoldLaw(model, settings(), "link7").controller.integral == 0.0)


def test_intended_velocity_is_where_the_damping_term_drives():
    model, law, q, v = law_and_state(ki=[0.0])
    ref = law.hold_reference(q)
    ref.position += np.linspace(-0.01, 0.01, 7)
    ref.velocity += 0.3
    out = law.compute(q, v, ref, 0.0, False)
    np.testing.assert_allclose(out.intended_velocity,
                               0.3 + 100.0 / 20.0 * np.linspace(-0.01, 0.01, 7), rtol=1e-12)


@pytest.mark.parametrize("ki", [0.0, 200.0])
def test_integral_rejects_an_unmodelled_load_in_mujoco(ki):
    """The simulated arm carries 0.5 kg more at its tool than the law's model (a constant
    torque disturbance, gravity), no <dynamics>: holding its start for 5 s in MuJoCo. Without
    integral action the error stays at the disturbance over the stiffness (kp M); with it the
    error goes to zero (below 0.1 mrad)."""
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.sim import build_plant, closed_loop

    bare = ARM7.replace('damping="0.05" friction="0.1"', 'damping="0" friction="0"')
    model = RobotModel.from_urdf(bare)
    tool = '<origin xyz="0 0 -0.04" rpy="0 0 0"/><mass value="0.7"/>'
    assert tool in bare
    loaded = bare.replace(tool, tool.replace('"0.7"', '"1.2"'))
    plant = build_plant(loaded, RobotModel.from_urdf(loaded), timestep=1e-3,
                        integrator="euler")
    q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    plant.set_state(q0, np.zeros(model.nv))
    s = settings(ki=[ki])
    law = JointLaw(model, s, "tool")
    shaper, mapper = CommandShaper(model, s, law.workspace), EffortMapper(model)
    assert not shaper.friction.enabled
    ref = law.hold_reference(q0)

    def control(k, q, v):
        out = shaper.apply(q, v, law.compute(q, v, ref, k * 1e-3, False))
        return mapper.map(out.tau_active).copy()

    closed_loop(plant, control, 5000)
    error = np.abs(ref.position - plant.state()[0])
    print(f"\nki {ki}: final |error| {np.round(1e3 * error, 3)} mrad")
    if ki == 0.0:
        assert error.max() > 2e-3
    else:
        assert error.max() < 1e-4


def _operational_space_law(model: RobotModel, **overrides):
    from underactuated_control.control.operational_space_law import OperationalSpaceLaw
    from underactuated_control.jacobians import JacobianWorkspace

    s = settings(os_task="position", **overrides)
    ws = JacobianWorkspace(model)
    return OperationalSpaceLaw(model, s, "link_eef", ws), CommandShaper(model, s, ws), s


XARM7_Q0 = np.array([0.0, 0.3, 0.0, 1.2, 0.0, 0.9, 0.0])


def test_operational_space_intent_is_the_resolved_rate_of_its_pd_target():
    """w of the operational-space law: its Pinocchio-Jacobian image is the PD's target twist
    (kp/kd) e, and at the posture it has no self-motion part (w in the row space of J)."""
    import pinocchio as pin

    model = RobotModel.from_urdf(XARM7)
    law, _, s = _operational_space_law(model)
    ref = law.hold_reference(XARM7_Q0)
    offset = np.array([0.01, -0.02, 0.015])
    ref.position = ref.position + offset
    out = law.compute(XARM7_Q0, np.zeros(7), ref, 0.0, False)
    pm = pin.buildModelFromXML(XARM7)
    pd = pm.createData()
    J = pin.computeFrameJacobian(pm, pd, XARM7_Q0, pm.getFrameId("link_eef"),
                                 pin.LOCAL_WORLD_ALIGNED)[:3]
    w = out.intended_velocity
    ratio = s["task_kp_position"] / s["task_kd_position"]
    np.testing.assert_allclose(J @ w, ratio * (law.follower.setpoint.position
                                               - (ref.position - offset)), atol=1e-9)
    np.testing.assert_allclose(np.linalg.pinv(J) @ (J @ w), w, atol=1e-9)


def test_operational_space_coulomb_part_survives_a_command_one_cycle_late():
    """xarm7 (its URDF's 1 N·m friction on a light wrist) held in operational space, each
    command acting one physics step late (a real robot's cycle; sim.closed_loop latency 1), the
    viscous part off to isolate the Coulomb one: with the measured velocity as its sign the
    compensation pushed joint7 along its own motion (2.3 rad away, 7 rad/s with the viscous
    part on: the DDS safety test's flailing wrist); with the law's intent it stays put."""
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.sim import build_plant, closed_loop

    model = RobotModel.from_urdf(XARM7)
    law, shaper, _ = _operational_space_law(model, damping_compensation_scale=0.0)
    mapper = EffortMapper(model, list(model.joint_names), 1.0)
    plant = build_plant(XARM7, model, timestep=1e-3)
    plant.set_state(XARM7_Q0, np.zeros(7))
    ref = law.hold_reference(XARM7_Q0)
    moved = []

    def control(k: int, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        out = shaper.apply(q, v, law.compute(q, v, ref, k * 1e-3, False))
        moved.append(np.abs(q - XARM7_Q0).max())
        return plant.clip(mapper.map(out.tau_active).copy())

    closed_loop(plant, control, 3000, latency_steps=1)
    print(f"\n[friction] xarm7 operational space, one step late: joints moved at most "
          f"{max(moved):.2e} rad in 3 s")
    assert max(moved) < 0.01


def test_feedback_share_keeps_the_late_velocity_loop_root_within_rho():
    """β of each xarm7 joint against the roots (numpy) of its one-joint loop with the command a
    period late, (1 + r) z² − z − r β = 0, r = h d / M_jj (M_jj: Pinocchio's CRBA at the
    neutral configuration): the oscillating (negative) root within ρ; β < 1 only where the
    whole measured velocity fed back would put it beyond ρ. (The other root is the joint's
    velocity decay: 1, none, at β = 1.)"""
    import pinocchio as pin

    model = RobotModel.from_urdf(XARM7)
    pm = pin.buildModelFromXML(XARM7)
    M = pin.crba(pm, pm.createData(), pin.neutral(pm))
    for rho in (0.5, 0.8):
        comp = FrictionCompensation(model, settings(damping_feedback_root=rho))
        for j in range(model.nv):
            r = 1e-3 * model.damping[j] / M[j, j]
            beta = comp.feedback_share[j]
            oscillating = np.roots([1.0 + r, -1.0, -r * beta]).real.min()  # the negative one
            assert -rho <= oscillating <= 0.0
            if beta < 1.0:  # and β no smaller than it must be: the whole v would pass ρ
                assert np.roots([1.0 + r, -1.0, -r]).real.min() < -rho
    assert FrictionCompensation(model, settings()).feedback_share[6] < 0.5  # the light wrist
    one = FrictionCompensation(model, settings(damping_feedback_root=1.0)).feedback_share
    assert np.all(one == 1.0)


@pytest.mark.parametrize("mode", ["hold", "task", "operational_space"])
@pytest.mark.parametrize("late", [1, 2])
def test_every_mode_holds_xarm7_with_the_command_late(mode, late):
    """xarm7 as written (1.4e-4 kg·m² wrist, 2 N·m·s/rad, 1 N·m dry friction), held in each
    mode with every command acting ``late`` physics steps after its state (a real robot's
    cycle; sim.closed_loop): before the viscous part blended the law's intent in, joint7
    chattered at 0.8 (hold), 0.6 (task) rad/s one step late, 1.2 rad/s two steps late."""
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import CONTROL_LAWS
    from underactuated_control.jacobians import JacobianWorkspace
    from underactuated_control.sim import build_plant, closed_loop

    model = RobotModel.from_urdf(XARM7)
    s = settings(os_task="position")
    ws = JacobianWorkspace(model)
    law = CONTROL_LAWS[mode](model, s, "link_eef", ws)
    shaper = CommandShaper(model, s, ws)
    mapper = EffortMapper(model, list(model.joint_names), 1.0)
    plant = build_plant(XARM7, model, timestep=1e-3)
    plant.set_state(XARM7_Q0, np.zeros(7))
    ref = law.hold_reference(XARM7_Q0)
    moved, speed = [], []

    def control(k: int, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        out = shaper.apply(q, v, law.compute(q, v, ref, k * 1e-3, False))
        moved.append(np.abs(q - XARM7_Q0).max())
        speed.append(np.abs(v).max())
        return plant.clip(mapper.map(out.tau_active).copy())

    closed_loop(plant, control, 3000, latency_steps=late)
    print(f"\n[friction] xarm7 {mode}, {late} step(s) late: moved {max(moved):.1e} rad, last "
          f"second's speed {max(speed[2000:]):.1e} rad/s")
    assert max(moved) < 1e-3 and max(speed[2000:]) < 0.01
