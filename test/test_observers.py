"""The generalised-momentum observer (observers.py), ROS-free.

Oracles: Pinocchio's Coriolis matrix (C^T v of the observer's kernel), an analytic trajectory
whose joint forces come from inverse dynamics (no external force: the residual vanishes to the
quadrature error, second order in dt; a known external torque on a passive joint: the residual
is that torque through the observer's first-order filter), and MuJoCo's physics with a wrench
applied by ``xfrc_applied`` (the estimate within 5 % 50 ms after the step)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH
from oracle import EXAMPLE_URDFS, ROBOTS, PinRef, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import inverse_dynamics
from underactuated_control.observers import MomentumObserver, coriolis_transpose_product
from underactuated_control.passive_forces import PassiveForceModel

ARM7 = ARM7_PATH.read_text()
UR5 = (ROBOTS / "ur_description/urdf/ur5_robot.urdf").read_text()


@pytest.mark.parametrize("name", ["arm7", "ur5", "kinova", "z1", "random"])
def test_coriolis_transpose_product_matches_pinocchio(name):
    rng = np.random.default_rng(11)
    if name == "arm7":
        urdf = ARM7
    elif name == "random":
        urdf = random_tree_urdf(rng, 9)
    else:
        urdf = EXAMPLE_URDFS[name].read_text()
    model = RobotModel.from_urdf(urdf)
    ref = PinRef(model, urdf)
    for _ in range(3):
        q = model.random_configuration(rng)
        v = rng.normal(size=model.nv)
        C = pin.computeCoriolisMatrix(ref.pm, ref.pd, ref.q(q), ref.v(v))
        want = ref.back(C.T @ ref.v(v))
        got = coriolis_transpose_product(model, q, v)
        np.testing.assert_allclose(got, want, atol=1e-10 * max(1.0, np.abs(want).max()))


def trajectory(model: RobotModel, t: float, seed: int = 0):
    """(q, v, qdd) of q = q0 + a sin(w t + phi), per joint."""
    rng = np.random.default_rng(seed)
    q0 = model.random_configuration(rng, scale=1.0)
    a, w, phi = rng.uniform(0.2, 0.6, model.nv), rng.uniform(1.0, 4.0, model.nv), \
        rng.uniform(0, 2 * np.pi, model.nv)
    s, c = np.sin(w * t + phi), np.cos(w * t + phi)
    return q0 + a * s, a * w * c, -a * w * w * s


def run(model: RobotModel, dt: float, seconds: float, gain: float = 50.0):
    """The observer along the trajectory; the efforts of each step: the motors' forces at the
    step's midpoint (inverse dynamics minus the joints' passive-force model). Returns (r per
    state, the external torque each step needs on the passive joints: their inverse-dynamics
    force minus their model)."""
    obs = MomentumObserver(model, gain)
    joints = PassiveForceModel(model)
    full = model.with_passive(())
    zero = np.zeros(model.n_active)
    r, ext = [obs.update(*trajectory(model, 0.0)[:2], zero, dt).copy()], [np.zeros(model.nv)]
    for k in range(1, int(round(seconds / dt)) + 1):
        qm, vm, am = trajectory(model, (k - 0.5) * dt)
        tau = inverse_dynamics(full, qm, vm, am) - joints.all_joints(qm, vm)
        e = np.zeros(model.nv)
        e[model.passive_dofs] = tau[model.passive_dofs]  # nothing applies it but the world
        q, v, _ = trajectory(model, k * dt)
        r.append(obs.update(q, v, tau[model.active_dofs], dt).copy())
        ext.append(e)
    return np.array(r), np.array(ext)


def test_residual_vanishes_without_external_forces():
    """Along 1 s of a random motion of the 7-DOF arm (damping 0.05 N·m·s/rad, friction 0.1
    N·m in its URDF: the passive-force model; joint torques up to ~30 N·m), r is the
    quadrature error only: below 1e-3 N·m at dt = 1 ms and second order in dt (halving dt
    divides it by 4: no model term is missing, which would leave an error that does not
    shrink)."""
    model = RobotModel.from_urdf(ARM7)
    r1, _ = run(model, 1e-3, 1.0)
    r2, _ = run(model, 5e-4, 1.0)
    e1, e2 = np.abs(r1).max(), np.abs(r2).max()
    print(f"\nmax |r|: {e1:.2e} N·m (dt 1 ms), {e2:.2e} N·m (dt 0.5 ms)")
    assert e1 < 1e-3
    assert 3.5 < e1 / e2 < 4.5


def test_passive_joint_external_torque_through_the_first_order_filter():
    """joint3 passive: the force the motion needs on it beyond its passive model is an
    external torque; r on it is that torque through r_k = r_{k-1} + K dt / (1 + K dt)
    (e_k - r_{k-1}) (the observer's discrete filter), r on the active joints stays 0."""
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint3"])
    K, dt = 50.0, 1e-3
    r, ext = run(model, dt, 0.5, K)
    filt = np.zeros_like(ext)
    for k in range(1, len(ext)):
        filt[k] = filt[k - 1] + K * dt / (1 + K * dt) * (ext[k] - filt[k - 1])
    p = model.passive_dofs
    assert np.abs(filt[:, p]).max() > 1.0  # a real torque
    np.testing.assert_allclose(r[:, p], filt[:, p], atol=1e-3)  # the quadrature error above
    assert np.abs(r[:, model.active_dofs]).max() < 1e-3


def test_wrench_from_joint_torques_root_and_frame_axes():
    """r = Jᵀ w (Pinocchio's frame Jacobian) for a known w: the wrench is w (root axes), Rᵀ w
    (frame axes), also from six trusted joints of the seven."""
    from underactuated_control.jacobians import frame_placement

    model = RobotModel.from_urdf(ARM7)
    ref = PinRef(model, ARM7)
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng, scale=1.0)
    w = np.array([3.0, -4.0, 5.0, 0.3, -0.2, 0.1])
    R = frame_placement(model, q, "tool")[1]
    for trusted in (None, model.joint_names[1:]):
        obs = MomentumObserver(model, frame="tool", trusted_joints=trusted, damping=0.0)
        obs.residual[:] = ref.frame_jacobian(q, "tool").T @ w
        np.testing.assert_allclose(obs.wrench(q), w, atol=1e-9)
        np.testing.assert_allclose(obs.wrench(q, axes="frame"),
                                   np.concatenate([R.T @ w[:3], R.T @ w[3:]]), atol=1e-9)


def test_bad_input_is_named():
    model = RobotModel.from_urdf(ARM7)
    with pytest.raises(ValueError, match="gain must be > 0"):
        MomentumObserver(model, gain=-1.0)
    with pytest.raises(ValueError, match="unknown frame/link 'nope'"):
        MomentumObserver(model, frame="nope")
    with pytest.raises(ValueError, match="unknown joint 'nope'"):
        MomentumObserver(model, trusted_joints=["nope"])
    obs = MomentumObserver(model)
    with pytest.raises(ValueError, match=r"tau_measured must have shape \(7,\)"):
        obs.update(np.zeros(7), np.zeros(7), np.zeros(6), 1e-3)
    with pytest.raises(ValueError, match="tau_measured must be finite"):
        obs.update(np.zeros(7), np.zeros(7), np.full(7, np.nan), 1e-3)
    with pytest.raises(ValueError, match="wrench needs a frame"):
        obs.wrench()
    space = RobotModel.from_urdf(ROBOTS / "ur_description/urdf/ur5_robot.urdf",
                                 floating_base=True)
    with pytest.raises(ValueError, match="fixed-base model"):
        MomentumObserver(space)


MUJOCO_CASES = {
    # robot, frame, start, passive joints
    "ur5": (UR5, "tool0", np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2]), ()),
    "ur5-passive-pan": (UR5, "tool0", np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2]),
                        ("shoulder_pan_joint",)),
    "arm7": (ARM7, "tool", np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]), ()),
}
WRENCHES = [np.array([15.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
            np.array([0.0, -10.0, 12.0, 0.0, 0.0, 0.0]),
            np.array([5.0, 5.0, 0.0, 0.0, 0.0, 1.5])]


def observe_in_mujoco(urdf: str, frame: str, q0: np.ndarray, passive, applied_wrench,
                      gain: float = 100.0):
    """MuJoCo holds q0 (the package's joint law on the active joints; the passive joints free);
    at 0.2 s ``applied_wrench`` [force; torque] (world axes, at the hand body's centre of mass)
    is applied by ``xfrc_applied``; the observer (every joint trusted) runs on every state.
    Returns (the applied wrench carried to the frame's origin, the estimate 50 ms after, the
    passive joints' largest speed then)."""
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_law import JointLaw
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import default_settings
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.sim import build_plant, closed_loop

    urdf = urdf.replace('friction="0.1"', 'friction="0"')  # MuJoCo's dry friction: a constraint
    model = RobotModel.from_urdf(urdf, passive_joints=passive)
    plant = build_plant(urdf, model, timestep=1e-3)
    dt, start, after = 1e-3, 200, 50
    plant.set_state(q0, np.zeros(model.nv))
    s = default_settings()
    s["effort_limit_scale"] = 1.0
    law = JointLaw(model, s, frame)
    shaper, mapper = CommandShaper(model, s, law.workspace), EffortMapper(model)
    ref = law.hold_reference(q0)
    obs = MomentumObserver(model, gain, frame=frame)
    body = plant.m.body(model.body_names[model.frame(frame).body]).id
    last = np.zeros(model.n_active)
    out = {}

    def control(k, q, v):
        obs.update(q, v, last, dt)
        if k == start:
            plant.d.xfrc_applied[body] = applied_wrench
        if k == start + after:
            p_frame = frame_placement(model, q, frame)[0]
            lever = plant.d.xipos[body] - p_frame
            f, n = applied_wrench[:3], applied_wrench[3:]
            out["true"] = np.concatenate([f, n + np.cross(lever, f)])
            out["estimate"] = obs.wrench(q).copy()
            out["passive_speed"] = np.abs(v[model.passive_dofs]).max(initial=0.0)
        return mapper.map(shaper.apply(q, v, law.compute(q, v, ref, k * dt, False))
                          .tau_active).copy()

    def applied(k, tau):
        last[:] = tau
        return k == start + after

    closed_loop(plant, control, start + after + 1, applied=applied)
    return out["true"], out["estimate"], out["passive_speed"]


@pytest.mark.parametrize("case", list(MUJOCO_CASES))
def test_mujoco_applied_wrench_estimated_within_5_percent_after_50_ms(case):
    urdf, frame, q0, passive = MUJOCO_CASES[case]
    for w in WRENCHES:
        true, est, speed = observe_in_mujoco(urdf, frame, q0, passive, w)
        err = np.linalg.norm(est - true) / np.linalg.norm(true)
        print(f"\n{case} applied {w}: at {frame} true {np.round(true, 3)}, estimate "
              f"{np.round(est, 3)}, error {100 * err:.2f} %, passive speed {speed:.3f} rad/s")
        assert err < 0.05
        if passive:  # the push swings the free pan joint: the observer sees a moving arm
            assert speed > 0.05
