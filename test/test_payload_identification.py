"""Payload identification (payload_identification.py), ROS-free.

Oracles: the same robot with the payload as one more URDF link fixed at the frame (the package's
URDF loader merges it; MuJoCo fuses it into the hand's body), never the identification's own
regressor. Pure math: noise-free torques of that loaded model recover the payload to rounding,
at rest (mass, com) and along random motions (inertia too). MuJoCo: the arm holds the proposed
poses with the package's joint law on the model WITHOUT the payload; the identification from the
measured efforts: mass within 2 %, centre of mass within 5 mm."""

import numpy as np
import pytest
from helpers import ARM7_PATH
from oracle import ROBOTS

from underactuated_control import RobotModel
from underactuated_control.dynamics import inverse_dynamics
from underactuated_control.passive_forces import PassiveForceModel
from underactuated_control.payload_identification import (
    identify_payload,
    propose_holding_poses,
    static_regressor,
)

ARM7 = ARM7_PATH.read_text()
UR5 = (ROBOTS / "ur_description/urdf/ur5_robot.urdf").read_text()
Q_ARM7 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
Q_UR5 = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2])
MASS, COM = 1.5, np.array([0.03, -0.02, 0.08])
INERTIA = np.array([[0.02, 0.001, -0.002], [0.001, 0.03, 0.003], [-0.002, 0.003, 0.025]])


def with_payload(urdf: str, frame: str, mass: float, com: np.ndarray,
                 inertia: np.ndarray) -> str:
    """The URDF with the payload as a link fixed at ``frame`` (com and inertia in its axes)."""
    c, i = com, inertia
    link = (f'<link name="payload"><inertial><origin xyz="{c[0]} {c[1]} {c[2]}" rpy="0 0 0"/>'
            f'<mass value="{mass}"/><inertia ixx="{i[0, 0]}" ixy="{i[0, 1]}" ixz="{i[0, 2]}" '
            f'iyy="{i[1, 1]}" iyz="{i[1, 2]}" izz="{i[2, 2]}"/></inertial></link>'
            f'<joint name="payload_joint" type="fixed"><parent link="{frame}"/>'
            '<child link="payload"/><origin xyz="0 0 0" rpy="0 0 0"/></joint></robot>')
    assert urdf.count("</robot>") == 1
    return urdf.replace("</robot>", link)


CASES = [(ARM7, "tool", Q_ARM7, ()), (UR5, "tool0", Q_UR5, ()),
         (ARM7, "tool", Q_ARM7, ("joint1",))]


@pytest.mark.parametrize("urdf, frame, q0, passive", CASES)
def test_noise_free_holding_torques_recover_mass_and_com_exactly(urdf, frame, q0, passive):
    bare = RobotModel.from_urdf(urdf, passive_joints=passive)
    loaded = RobotModel.from_urdf(with_payload(urdf, frame, MASS, COM, INERTIA))
    poses = propose_holding_poses(bare, frame, q0, 6)
    assert poses.poses.shape == (6, bare.nq) and np.array_equal(poses.poses[0], q0)
    assert poses.condition_number < 10.0
    lo, hi = bare.position_lower, bare.position_upper
    assert ((poses.poses >= lo) & (poses.poses <= hi)).all()
    zero = np.zeros(bare.nv)
    tau = np.array([inverse_dynamics(loaded, q, zero, zero) for q in poses.poses])
    # a passive joint's force at rest: its model (no spring: zero), so the loaded robot's
    # torque on it is not applied by anything; only the active rows carry the measurement
    est = identify_payload(bare, frame, poses.poses, tau[:, bare.active_dofs],
                           passive_rows=False)
    assert est.samples == 6 and est.inertia is None
    assert abs(est.mass - MASS) < 1e-10
    np.testing.assert_allclose(est.com, COM, atol=1e-10)
    assert est.residual_rms < 1e-10 and est.mass_std < 1e-10 and est.com_std.max() < 1e-10


def test_noise_free_excitation_recovers_the_inertia_exactly():
    bare = RobotModel.from_urdf(ARM7)
    loaded = RobotModel.from_urdf(with_payload(ARM7, "tool", MASS, COM, INERTIA))
    rng = np.random.default_rng(3)
    n = 20
    q = np.array([bare.random_configuration(rng) for _ in range(n)])
    v, qdd = rng.normal(size=(n, bare.nv)), rng.normal(size=(n, bare.nv))
    joints = PassiveForceModel(bare)  # URDF damping/friction act besides the motors
    tau = np.array([inverse_dynamics(loaded, *x) - joints.all_joints(*x[:2])
                    for x in zip(q, v, qdd)])
    est = identify_payload(bare, "tool", q, tau, v, qdd)
    assert abs(est.mass - MASS) < 1e-10
    np.testing.assert_allclose(est.com, COM, atol=1e-10)
    np.testing.assert_allclose(est.inertia, INERTIA, atol=1e-10)
    assert est.inertia_std.max() < 1e-10


def test_uncertainty_matches_the_scatter_of_noisy_estimates():
    """Gaussian noise on the efforts: the reported std is the spread over repeated draws
    (within 30 %, 200 draws), and the residual RMS is the noise level."""
    bare = RobotModel.from_urdf(ARM7)
    loaded = RobotModel.from_urdf(with_payload(ARM7, "tool", MASS, COM, INERTIA))
    poses = propose_holding_poses(bare, "tool", Q_ARM7, 8).poses
    zero = np.zeros(bare.nv)
    tau = np.array([inverse_dynamics(loaded, q, zero, zero) for q in poses])
    rng = np.random.default_rng(7)
    noise = 0.05
    runs = [identify_payload(bare, "tool", poses, tau + rng.normal(0, noise, tau.shape))
            for _ in range(200)]
    masses = np.array([r.mass for r in runs])
    coms = np.array([r.com for r in runs])
    assert np.mean([r.mass_std for r in runs]) == pytest.approx(masses.std(), rel=0.3)
    np.testing.assert_allclose(np.mean([r.com_std for r in runs], axis=0), coms.std(axis=0),
                               rtol=0.3)
    assert np.mean([r.residual_rms for r in runs]) == pytest.approx(noise, rel=0.3)


def test_bad_input_is_named():
    bare = RobotModel.from_urdf(ARM7)
    with pytest.raises(ValueError, match="unknown frame/link 'nope'"):
        identify_payload(bare, "nope", Q_ARM7[None], np.zeros((1, 7)))
    with pytest.raises(ValueError, match=r"tau must have shape \(1, 7\)"):
        identify_payload(bare, "tool", Q_ARM7[None], np.zeros((1, 6)))
    with pytest.raises(ValueError, match="tau has non-finite"):
        identify_payload(bare, "tool", Q_ARM7[None], np.full((1, 7), np.nan))
    with pytest.raises(ValueError, match="give more samples"):
        identify_payload(bare, "tool", np.zeros((0, 7)), np.zeros((0, 7)))
    with pytest.raises(ValueError, match="not positive"):  # the payload's torques reversed
        zero = np.zeros(7)
        loaded = RobotModel.from_urdf(with_payload(ARM7, "tool", MASS, COM, INERTIA))
        poses = propose_holding_poses(bare, "tool", Q_ARM7, 4).poses
        tau = np.array([2 * inverse_dynamics(bare, q, zero, zero)
                        - inverse_dynamics(loaded, q, zero, zero) for q in poses])
        identify_payload(bare, "tool", poses, tau)
    with pytest.raises(ValueError, match="count must be >= 2"):
        propose_holding_poses(bare, "tool", Q_ARM7, 1)
    assert static_regressor(bare, "tool", Q_ARM7[None]).shape == (7, 4)


def hold_and_measure(urdf: str, frame: str, q0: np.ndarray, seconds: float = 3.0,
                     rest: float = 5e-3):
    """MuJoCo with the payload; the package's joint law (hold, model without it) holds each
    proposed pose from rest; returns (poses measured at the end, mean efforts of the last
    0.1 s, the model without the payload)."""
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_law import JointLaw
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import default_settings
    from underactuated_control.sim import build_plant, closed_loop

    bare = RobotModel.from_urdf(urdf)
    loaded = with_payload(urdf, frame, MASS, COM, INERTIA)
    plant = build_plant(loaded, RobotModel.from_urdf(loaded), timestep=1e-3)
    s = default_settings()
    # no integral; damped for the hand's true inertia (the law's model lacks the payload's)
    s.update(effort_limit_scale=1.0, kp=[900.0], kd=[300.0], ki=[0.0])
    law = JointLaw(bare, s, frame)
    shaper, mapper = CommandShaper(bare, s, law.workspace), EffortMapper(bare)
    poses = propose_holding_poses(bare, frame, q0, 6).poses
    steps = int(seconds / 1e-3)
    measured_q, measured_tau = [], []
    for pose in poses:
        plant.set_state(pose, np.zeros(bare.nv))
        ref = law.hold_reference(pose)
        taus = []

        def control(k, q, v, ref=ref):
            return mapper.map(shaper.apply(q, v, law.compute(q, v, ref, k * 1e-3, False))
                              .tau_active).copy()

        def applied(k, tau, taus=taus):
            if k > steps - 100:
                taus.append(tau.copy())

        closed_loop(plant, control, steps, applied=applied)
        q, v = plant.state()
        assert np.abs(v).max() < rest  # at rest
        measured_q.append(q)
        measured_tau.append(np.mean(taus, axis=0))
    return np.array(measured_q), np.array(measured_tau), bare


@pytest.mark.parametrize("urdf, frame, q0", [(ARM7, "tool", Q_ARM7), (UR5, "tool0", Q_UR5)],
                         ids=["arm7", "ur5"])
def test_mujoco_payload_identified_within_2_percent_and_5_mm(urdf, frame, q0):
    urdf = urdf.replace('friction="0.1"', 'friction="0"')  # MuJoCo's dry friction holds
    q, tau, bare = hold_and_measure(urdf, frame, q0)     # any torque below it: not a model
    est = identify_payload(bare, frame, q, tau)
    print(f"\n{frame}: mass {est.mass:.4f} kg (true {MASS}, std {est.mass_std:.1e}), com "
          f"{np.round(1e3 * est.com, 2)} mm (true {1e3 * COM}), residual "
          f"{est.residual_rms:.1e} N·m, cond {est.condition_number:.2f}")
    assert abs(est.mass - MASS) < 0.02 * MASS
    assert np.linalg.norm(est.com - COM) < 5e-3


def test_mujoco_excitation_identifies_the_inertia():
    """The 7-DOF arm in MuJoCo with the payload, its wrist (joints 4-7) tracking sinusoids for
    2 s with the package's joint law (model without the payload); samples every 10 ms of
    (q, v, MuJoCo's acceleration of that state and effort): mass within 2 %, centre of mass
    within 5 mm, inertia about the com within 10 % (matrix norm)."""
    import mujoco

    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_law import JointLaw
    from underactuated_control.control.joint_space import EffortMapper, JointReference
    from underactuated_control.control.registry import default_settings
    from underactuated_control.sim import build_plant, closed_loop

    urdf = ARM7.replace('friction="0.1"', 'friction="0"')
    bare = RobotModel.from_urdf(urdf)
    loaded = with_payload(urdf, "tool", MASS, COM, INERTIA)
    plant = build_plant(loaded, RobotModel.from_urdf(loaded), timestep=1e-3)
    s = default_settings()
    s.update(effort_limit_scale=1.0, kp=[900.0], kd=[300.0], ki=[0.0])
    law = JointLaw(bare, s, "tool")
    shaper, mapper = CommandShaper(bare, s, law.workspace), EffortMapper(bare)
    amp = np.array([0.0, 0.0, 0.0, 0.3, 0.8, 0.6, 1.2])
    w = np.array([0.0, 0.0, 0.0, 2.1, 3.7, 4.3, 5.9])
    plant.set_state(Q_ARM7, amp * w)
    ref = law.hold_reference(Q_ARM7)
    samples = []

    def control(k, q, v):
        t = k * 1e-3
        ref.position[:] = Q_ARM7 + amp * np.sin(w * t)
        ref.velocity[:] = amp * w * np.cos(w * t)
        ref.acceleration[:] = -amp * w * w * np.sin(w * t)
        return mapper.map(shaper.apply(q, v, law.compute(q, v, ref, t, False))
                          .tau_active).copy()

    def applied(k, tau):
        if k % 10 == 0:
            mujoco.mj_forward(plant.m, plant.d)  # the acceleration of this state and effort
            q, v = plant.state()
            samples.append((q, v, plant.d.qacc[plant.vadr].copy(), tau.copy()))

    closed_loop(plant, control, 2000, applied=applied)
    q, v, qdd, tau = (np.array(x) for x in zip(*samples))
    assert isinstance(ref, JointReference)
    est = identify_payload(bare, "tool", q, tau, v, qdd)
    err = np.linalg.norm(est.inertia - INERTIA) / np.linalg.norm(INERTIA)
    print(f"\nexcitation: mass {est.mass:.4f} kg, com {np.round(1e3 * est.com, 2)} mm, inertia "
          f"error {100 * err:.2f} % (std {est.inertia_std.max():.1e}), residual "
          f"{est.residual_rms:.1e} N·m, cond {est.condition_number:.1f}, {est.samples} samples")
    assert abs(est.mass - MASS) < 0.02 * MASS
    assert np.linalg.norm(est.com - COM) < 5e-3
    assert err < 0.10
