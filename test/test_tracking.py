"""End-effector tracking through J_G (§6.2) and space-robot mode (§7), judged on the true
dynamics: Pinocchio's forward dynamics (aba) of all joints, integrated with RK4 at 1 kHz,
torques held over each step. The figures printed here are the ones reported."""

import os
import re
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH, ROOT, SPACE_ARM_PATH
from oracle import EXAMPLE_URDFS, ROBOTS, PinRef

from underactuated_control import RobotModel
from underactuated_control.control import EndEffectorTracker, TaskReference
from underactuated_control.control.limits import PoseSetpointFollower
from underactuated_control.control.trajectories import CircleTrajectory
from underactuated_control.jacobians import frame_placement
from underactuated_control.passive_forces import PassiveForceModel

ARM7 = ARM7_PATH.read_text()
SPACE_ARM = SPACE_ARM_PATH.read_text()
Q_ARM = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


def simulate(model, ref, tracker, trajectory, q, v, duration, dt=1e-3, floating=False):
    """Closed loop on the true dynamics; returns max position / orientation error and traces."""
    pf = PassiveForceModel(model)
    fid = ref.pm.getFrameId(tracker.frame)
    worst_p = worst_r = 0.0
    qs, vs, taus = [q], [v], []
    for k in range(int(round(duration / dt))):
        res = tracker.step(q, v, trajectory(k * dt))
        assert np.all(np.isfinite(res.tau_active))
        tau = np.zeros(model.nv)
        tau[model.active_dofs] = res.tau_active
        taus.append(res.tau_active)

        def f(q, v, tau=tau):
            t = tau.copy()
            t[model.passive_dofs] = pf(q, v)
            return v, ref.aba(q, v, t)

        def step(q, dq, h):
            return model.integrate(q, dq, h) if floating else q + dq * h

        k1 = f(q, v)
        k2 = f(step(q, k1[0], dt / 2), v + dt / 2 * k1[1])
        k3 = f(step(q, k2[0], dt / 2), v + dt / 2 * k2[1])
        k4 = f(step(q, k3[0], dt), v + dt * k3[1])
        q = step(q, (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]) / 6, dt)
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(q))
        target = trajectory((k + 1) * dt)
        worst_p = max(worst_p, np.linalg.norm(ref.pd.oMf[fid].translation - target.position))
        worst_r = max(worst_r, np.linalg.norm(
            pin.log3(target.rotation @ ref.pd.oMf[fid].rotation.T)))
        qs.append(q)
        vs.append(v)
    return worst_p, worst_r, np.array(qs), np.array(vs), np.array(taus)


def circle_from(model, q, frame, radius, normal, period, start):
    p0, R0 = frame_placement(model, q, frame)
    return CircleTrajectory.starting_at(p0, radius, normal, period, R0, start_direction=start)


@pytest.mark.parametrize("passive, normal, start, radius, period, max_excursion", [
    (["joint1"], [1, 1, 0], [0, 0, 1], 0.08, 3.0, 0.01),  # failed base yaw, tilted circle
    (["joint3"], [0, 1, 0], [0, 0, 1], 0.05, 4.0, 0.02),  # failed upper-arm roll
    (["joint1", "joint3"], [0, 1, 0], [0, 0, 1], 0.05, 4.0, 0.15),
    (["joint1", "joint3"], [1, 0, 0], [0, 1, 0], 0.05, 4.0, 0.15),  # sideways: needs yaw
])
def test_seven_dof_arm_with_passive_joints_tracks_a_circle(passive, normal, start, radius,
                                                             period, max_excursion):
    """Position task (redundant), the failed joints kept near their start through J_D in the
    task's null space; judged on the true dynamics."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    tracker = EndEffectorTracker(model, "tool", task="position", kp_position=400,
                                 kd_position=40, passive_weight=1.0, passive_kp=25,
                                 passive_kd=10)
    traj = circle_from(model, Q_ARM, "tool", radius, normal, period, start)
    err, _, qs, _, taus = simulate(model, ref, tracker, traj, Q_ARM.copy(), np.zeros(7), period)
    excursion = np.abs(qs[:, model.passive_dofs] - Q_ARM[model.passive_dofs]).max()
    print(f"\n[tracking] arm7 passive={passive} circle r={radius} m normal={normal}: max "
          f"position error {1e3 * err:.4f} mm, passive excursion {excursion:.4f} rad, peak "
          f"|tau_a| {np.abs(taus).max():.1f} N·m")
    assert err < 5e-4
    assert excursion < max_excursion


def test_seven_dof_arm_one_passive_full_pose_is_square_J_G():
    """6 active joints, 6-D pose task: J_G square and regular; tracked on a short line."""
    from underactuated_control.control.trajectories import LineTrajectory

    model = RobotModel.from_urdf(ARM7, passive_joints=["joint1"])
    ref = PinRef(model, ARM7)
    tracker = EndEffectorTracker(model, "tool", task="pose", kp_position=400, kd_position=40,
                                 kp_orientation=400, kd_orientation=40)
    p0, R0 = frame_placement(model, Q_ARM, "tool")
    traj = LineTrajectory(p0, R0, p0 + np.array([0.05, 0.0, -0.05]), R0, 1.5)
    err_p, err_r, *_ = simulate(model, ref, tracker, traj, Q_ARM.copy(), np.zeros(7), 1.5)
    print(f"\n[tracking] arm7 joint1 passive, pose task: max position error "
          f"{1e3 * err_p:.3f} mm, orientation {np.degrees(err_r):.4f} deg")
    assert err_p < 1e-3 and err_r < 1e-2


@pytest.mark.parametrize("passive", [[], ["joint1"]])
def test_posture_term_brings_the_self_motion_back_and_leaves_the_hand(passive):
    """Position task (4 or 3 DOF of self-motion), the hand held while the joints start 0.3 rad
    along the self-motion from the posture; judged on the true dynamics (Pinocchio's aba, RK4):
    with ``posture_kp`` the joints come back to the posture, without it they stay where the
    self-motion took them, and the hand is held as well either way (the term acts in the
    task's null space)."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    a = model.active_dofs
    J = ref.frame_jacobian(Q_ARM, "tool")[:3, a]
    null = np.linalg.svd(J)[2][-1]  # a self-motion direction of the active joints
    start = Q_ARM.copy()
    start[a] += 0.3 * null / np.abs(null).max()
    hand = frame_placement(model, start, "tool")[0]
    errors, back = {}, {}
    for kp in (0.0, 4.0):
        tracker = EndEffectorTracker(model, "tool", task="position", kp_position=400,
                                     kd_position=40, posture_kp=kp)
        tracker.set_posture(Q_ARM)
        err, _, qs, _, _ = simulate(model, ref, tracker, lambda t: TaskReference(position=hand),
                                    start.copy(), np.zeros(7), 5.0)
        errors[kp], back[kp] = err, np.abs(qs[-1, a] - Q_ARM[a]).max()
    print(f"\n[tracking] arm7 passive={passive}, posture 0.3 rad away along the self-motion: "
          f"after 5 s {back[0.0]:.4f} rad from it without the posture term, {back[4.0]:.4f} "
          f"with posture_kp 4; hand error {1e3 * errors[0.0]:.4f} / {1e3 * errors[4.0]:.4f} mm")
    assert back[0.0] > 0.25  # only damped: the self-motion stays where it was
    assert back[4.0] < 0.03  # (s + 1)(s + 4): e^-5 of 0.3 rad, plus the manifold's curvature
    assert errors[4.0] < 5e-4 and errors[0.0] < 5e-4


def _bus_ur5():
    text = EXAMPLE_URDFS["ur5"].read_text()
    return text.replace('<link name="world"/>', (
        '<link name="world"><inertial><origin xyz="0 0 -0.6"/><mass value="200"/>'
        '<inertia ixx="40" ixy="0" ixz="0" iyy="45" iyz="0" izz="35"/></inertial></link>'))


def test_free_flying_six_dof_arm_tracks_and_conserves_momentum():
    """UR5 on a 200 kg spacecraft bus, base passive (T_p = 0), no gravity: the end effector
    follows a circle while the system's momentum stays at its initial value."""
    text = _bus_ur5()
    model = RobotModel.from_urdf(text, floating_base=True, gravity=(0, 0, 0))
    ref = PinRef(model, text, floating=True)
    q = model.neutral_configuration()
    q[7:] = [0.0, -1.2, 1.5, -1.9, -1.57, 0.0]
    v = np.zeros(model.nv)
    tracker = EndEffectorTracker(model, "tool0", task="pose", kp_position=400, kd_position=40,
                                 kp_orientation=400, kd_orientation=40)
    traj = circle_from(model, q, "tool0", 0.05, [1, 0, 0], 4.0, [0, 1, 0])
    h0 = pin.computeCentroidalMomentum(ref.pm, ref.pd, ref.q(q), ref.v(v)).vector.copy()
    err_p, err_r, qs, vs, _ = simulate(model, ref, tracker, traj, q, v, 4.0, floating=True)
    drift = max(np.abs(pin.computeCentroidalMomentum(ref.pm, ref.pd, ref.q(qk), ref.v(vk)).vector
                       - h0).max() for qk, vk in zip(qs[::50], vs[::50]))
    base_angle = 2 * np.arccos(np.clip(np.abs(qs[:, 6]), 0, 1)).max()
    print(f"\n[space] UR5 on a bus: max position error {1e3 * err_p:.3f} mm, orientation "
          f"{np.degrees(err_r):.4f} deg, momentum drift {drift:.2e}, base rotation "
          f"{np.degrees(base_angle):.3f} deg")
    assert err_p < 1e-3 and err_r < 1e-2
    assert drift < 1e-9


@pytest.mark.parametrize("redundancy", ["prioritized", "stacked"])
def test_redundant_space_arm_keeps_its_base_stiller(redundancy):
    """7-DOF arm on a bus, hand position task (3 rows): the bus attitude rows of J_D (7.1),
    with the bus's latched attitude as their reference, keep it at least 5x stiller than the
    naive controller (w_p = 0) at w_p = 1 (relative: the rows' full effect, whatever the small
    scale of a heavy bus's J_D); all six base rows compete with the hand and help less."""
    model = RobotModel.from_urdf(SPACE_ARM, floating_base=True, gravity=(0, 0, 0))
    ref = PinRef(model, SPACE_ARM)
    q = model.neutral_configuration()
    q[7:] = Q_ARM
    traj = circle_from(model, q, "tool", 0.05, [1, 0, 0], 4.0, [0, 1, 0])
    attitude = ["root_joint/rx", "root_joint/ry", "root_joint/rz"]
    rotations, errors = {}, {}
    for label, w, held in (("naive", 0.0, None), ("all six", 1.0, None),
                           ("attitude", 1.0, attitude)):
        tracker = EndEffectorTracker(model, "tool", task="position", kp_position=400,
                                     kd_position=40, passive_weight=w, passive_kp=25.0,
                                     passive_kd=10.0, redundancy=redundancy,
                                     held_passive_dofs=held)
        tracker.set_passive_reference(q)
        err, _, qs, _, _ = simulate(model, ref, tracker, traj, q.copy(), np.zeros(model.nv), 4.0,
                                    floating=True)
        rotations[label] = 2 * np.arccos(np.clip(np.abs(qs[:, 6]), 0, 1)).max()
        errors[label] = err
        print(f"\n[space] arm7 on a bus, {redundancy}, {label}: position error "
              f"{1e3 * err:.3f} mm, max base rotation {np.degrees(rotations[label]):.4f} deg")
    assert errors["naive"] < 3e-3 and errors["attitude"] < 3e-3
    assert rotations["attitude"] < rotations["naive"] / 5
    assert rotations["all six"] < rotations["naive"]
    if redundancy == "prioritized":  # the hand task is never traded for base stillness
        assert errors["all six"] < 3e-3
    else:  # stacked: holding the bus's translation competes with the hand (the centre of
        assert errors["all six"] > 10 * errors["attitude"]  # mass cannot move)


def test_singular_generalized_jacobian_is_damped_and_flagged():
    rng = np.random.default_rng(0)
    text = EXAMPLE_URDFS["ur5"].read_text()
    # all joints but one passive: J_G is 6x1, the pose task is singular
    model = RobotModel.from_urdf(text).with_passive(
        ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
         "wrist_2_joint"])
    tracker = EndEffectorTracker(model, "tool0")
    q = model.random_configuration(rng)
    p, R = frame_placement(model, q, "tool0")
    res = tracker.step(q, np.zeros(6), TaskReference(position=p + 0.1, rotation=R))
    assert res.singular and np.all(np.isfinite(res.tau_active)) and np.all(
        np.isfinite(res.qdd))
    # a stretched arm: every joint active, q = 0 is a kinematic singularity of the UR5
    full = RobotModel.from_urdf(text)
    tracker = EndEffectorTracker(full, "tool0")
    q = np.zeros(6)
    p, R = frame_placement(full, q, "tool0")
    res = tracker.step(q, np.zeros(6), TaskReference(position=p + [0.5, 0.0, 0.0], rotation=R))
    assert res.singular and res.damping > 0 and np.all(np.isfinite(res.tau_active))
    assert np.abs(res.qdd_active).max() < 1e4


def test_offline_plan_cli_replays_on_the_true_dynamics(tmp_path):
    """`underactuated-control plan` writes T_a(t) and the passive motion; replaying those
    torques through Pinocchio's aba with the same integrator reproduces the joint profile."""
    out = tmp_path / "plan.npz"
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    proc = subprocess.run(
        [sys.executable, "-m", "underactuated_control.cli", "plan", "arm7", "--passive",
         "joint1", "--frame", "tool", "--task", "position", "--q", *map(str, Q_ARM), "--line",
         "0.05", "0.05", "-0.05", "--duration", "1.0", "--dt", "0.002", "--kp", "400", "--kd",
         "40", "--passive-weight", "1", "--passive-kp", "25", "--passive-kd", "10", "--out",
         str(out), "--plot", str(tmp_path / "plan.png")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "max_position_error_m" in proc.stdout and (tmp_path / "plan.png").stat().st_size > 0
    plan = np.load(out)
    assert list(plan["passive_names"]) == ["joint1"]
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint1"])
    ref = PinRef(model, ARM7)
    pf = PassiveForceModel(model)
    q, v = plan["q"][0].copy(), plan["v"][0].copy()
    dt = 0.002
    for k in range(len(plan["t"]) - 1):
        tau = np.zeros(7)
        tau[model.active_dofs] = plan["tau_active"][k]
        tau[model.passive_dofs] = pf(q, v)
        v = v + ref.aba(q, v, tau) * dt
        q = q + v * dt
        np.testing.assert_allclose(q, plan["q"][k + 1], atol=1e-9)
    assert plan["position_error"].max() < 0.01


@pytest.mark.parametrize("passive", [[], ["joint3"]])
@pytest.mark.parametrize("task", ["pose", "position"])
def test_intended_velocity_is_the_joint_velocity_of_the_pd_target(task, passive):
    """``TrackingResult.intended_velocity`` (the sign of the friction compensation) maps through
    the task rows of J_G (Pinocchio's dense J_a + J_p J_D) onto the twist the PD drives the
    frame toward, v_ref + (kp/kd) e, away from singularities."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    ref = PinRef(model, ARM7)
    tracker = EndEffectorTracker(model, "tool", task=task, kp_position=400, kd_position=40,
                                 kp_orientation=100, kd_orientation=20)
    rng = np.random.default_rng(3)
    a, p = model.active_dofs, model.passive_dofs
    for _ in range(5):
        q = Q_ARM + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        p0, R0 = frame_placement(model, q, "tool")
        goal = TaskReference(position=p0 + rng.uniform(-0.02, 0.02, 3),
                             rotation=R0 @ pin.exp3(rng.uniform(-0.05, 0.05, 3)),
                             linear_velocity=rng.uniform(-0.1, 0.1, 3),
                             angular_velocity=rng.uniform(-0.2, 0.2, 3))
        res = tracker.step(q, v, goal)
        J_G = ref.generalized_jacobians(q, "tool", a, p)[0] if passive else \
            ref.frame_jacobian(q, "tool")
        rows = slice(0, 6) if task == "pose" else slice(0, 3)
        target = np.concatenate([goal.linear_velocity + 10.0 * res.position_error,
                                 goal.angular_velocity + 5.0 * res.orientation_error])
        assert res.sigma_min > tracker.singular_threshold
        np.testing.assert_allclose(J_G[rows] @ res.intended_velocity, target[rows],
                                   atol=1e-9 * max(1.0, np.abs(target).max()))


@pytest.mark.parametrize("task", ["pose", "position", "pointing"])
def test_the_errors_their_norms_and_the_intended_speed_ratio_pinocchio_oracle(task):
    """What the solve's one call gives besides qdd_a: the pose errors against Pinocchio's
    placement of the frame (e_pos = p_ref − p, e_rot = log3(R_ref Rᵀ), the pointing task's
    u × d), their norms, and the largest |intended_a| / URDF speed limit (Pinocchio's
    ``velocityLimit``), which the task law slows its setpoint by; a reference of the wrong
    shape is refused by name."""
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint3"])
    ref = PinRef(model, ARM7)
    tracker = EndEffectorTracker(model, "tool", task=task, posture_kp=4.0)
    rng = np.random.default_rng(5)
    fid = ref.pm.getFrameId("tool")
    limits = ref.pm.velocityLimit[ref.v_perm][model.active_dofs]
    for _ in range(4):
        q = Q_ARM + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        direction = rng.normal(size=3)
        goal = TaskReference(position=rng.uniform(-0.5, 0.5, 3),
                             rotation=pin.exp3(rng.uniform(-1.0, 1.0, 3)),
                             linear_velocity=rng.uniform(-0.1, 0.1, 3),
                             pointing_direction=direction)
        res = tracker.step(q, v, goal)
        pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(q))
        placement = ref.pd.oMf[fid]
        e_pos = goal.position - placement.translation
        np.testing.assert_allclose(res.position_error, e_pos, atol=1e-12)
        if task == "pointing":
            u = placement.rotation @ tracker.pointing_axis
            e_rot = np.cross(u, direction / np.linalg.norm(direction))
        else:
            e_rot = pin.log3(goal.rotation @ placement.rotation.T)
        np.testing.assert_allclose(res.orientation_error, e_rot, atol=1e-10)
        assert res.position_error_norm == pytest.approx(np.linalg.norm(e_pos), rel=1e-12)
        assert res.orientation_error_norm == pytest.approx(np.linalg.norm(e_rot), rel=1e-9)
        assert res.intended_speed_ratio == pytest.approx(
            np.max(np.abs(res.intended_velocity) / limits), rel=1e-14)
    bad = TaskReference(position=np.zeros(2))
    with pytest.raises(ValueError, match="reference's position must be a 3-vector"):
        tracker.step(Q_ARM, np.zeros(7), bad)
    for name, shape, kind in (("rotation", (3,), "a 3x3 matrix"),
                              ("linear_velocity", (2,), "a 3-vector"),
                              ("angular_acceleration", (), "a 3-vector")):
        bad = TaskReference(position=np.zeros(3), **{name: np.zeros(shape)})
        with pytest.raises(ValueError, match=re.escape(
                f"reference's {name} must be {kind}, got shape {shape}")):
            tracker.step(Q_ARM, np.zeros(7), bad)


@pytest.mark.parametrize("passive", [[], ["joint3"]])
def test_a_reference_given_packed_is_the_same_reference(passive):
    """A reference handed over packed (a setpoint follower's state, its fields views of it:
    the task law's cycle) and the same reference packed by the tracker give the same cycle,
    bit for bit, in one call and in the steps (a strided state)."""
    model = RobotModel.from_urdf(ARM7, passive_joints=passive)
    tracker = EndEffectorTracker(model, "tool", task="pose", posture_kp=4.0)
    follower = PoseSetpointFollower(0.5, 2.0, 1.0, 4.0)
    tracker.workspace.set_configuration(Q_ARM)
    follower.reset(*tracker.workspace.frame_placement("tool"))
    rng = np.random.default_rng(3)
    goal = TaskReference(position=follower.setpoint.position + [0.05, -0.03, 0.02],
                         rotation=follower.setpoint.rotation)
    for k in range(20):
        sp = follower.step(goal, 1e-3, now=1e-3 * (k + 1))
        copy = TaskReference(**{f: np.array(getattr(sp, f)) for f in (
            "position", "rotation", "linear_velocity", "angular_velocity",
            "linear_acceleration", "angular_acceleration")})
        q, v = Q_ARM + rng.uniform(-0.1, 0.1, 7), rng.uniform(-0.5, 0.5, 7)
        for state in (q, np.stack([q, q], axis=1)[:, 0]):
            packed = tracker.step(state, v, sp, follower.state)
            packed = (packed.tau_active.copy(), packed.qdd.copy(), packed.position_error.copy())
            plain = tracker.step(state, v, copy)
            np.testing.assert_array_equal(packed[0], plain.tau_active)
            np.testing.assert_array_equal(packed[1], plain.qdd)
            np.testing.assert_array_equal(packed[2], plain.position_error)


def test_a_passive_joint_that_does_not_move_the_frame_is_not_held():
    """By default (no ``held_passive_dofs``) the J_D rows (6.12) act on the passive DOF whose
    column of the task rows of J moves the frame: a roll about the tool's own axis (xarm7's
    joint7 under link_eef, Pinocchio's Jacobian column zero in position) is left to itself
    (holding it asked the wrist for the hand's roll inertia: joints at their speed limits,
    doc/failure_analysis.md), the same command as with ``passive_weight`` 0; a joint that
    moves the frame (joint6) is still held; naming the DOF holds it."""
    xarm = (ROBOTS / "xarm_description/urdf/xarm7.urdf").read_text()
    q = np.array([0.0, -0.4, 0.0, 0.9, 0.0, 1.3, 0.0])
    v = np.array([0.1, -0.2, 0.1, 0.2, -0.3, 0.2, 0.4])
    for joint, held in (("joint7", False), ("joint6", True)):
        model = RobotModel.from_urdf(xarm, passive_joints=[joint])
        column = PinRef(model, xarm).frame_jacobian(q, "link_eef")[:3, model.passive_dofs]
        assert (np.linalg.norm(column) > 1e-3) == held  # the premise, from Pinocchio
        goal = TaskReference(position=frame_placement(model, q, "link_eef")[0] + 0.01)
        out = {}
        for name, kw in (("free", {"passive_weight": 0.0}),
                         ("default", {"passive_weight": 1.0}),
                         ("named", {"passive_weight": 1.0, "held_passive_dofs": [joint]})):
            tracker = EndEffectorTracker(model, "link_eef", task="position", passive_kp=25.0,
                                         passive_kd=10.0, **kw)
            out[name] = tracker.step(q, v, goal).qdd_active
        same = np.allclose(out["default"], out["free"], rtol=0, atol=1e-12)
        assert same != held
        assert not np.allclose(out["named"], out["free"], rtol=0, atol=1e-9)


def test_passive_rows_yield_to_the_task_only_as_far_as_the_bounds_ask():
    """``_share_within``: the largest c in [0, 1] keeping base + c step within [lo, hi] on every
    entry base keeps within them (checked on random cases: within, and maximal: c = 1 or one
    entry on its bound); an entry base already breaks forbids steps further out and past its
    other bound."""
    from underactuated_control.control.task_space import _share_within

    rng = np.random.default_rng(3)
    for _ in range(500):
        lo, hi = -rng.uniform(0.1, 5.0, 7), rng.uniform(0.1, 5.0, 7)
        base, step = rng.uniform(-3.0, 3.0, 7), rng.uniform(-8.0, 8.0, 7)
        c = _share_within(base, step, lo, hi)
        inside = (base >= lo) & (base <= hi)
        x = base + c * step
        assert 0.0 <= c <= 1.0
        assert np.all((x[inside] >= lo[inside] - 1e-12) & (x[inside] <= hi[inside] + 1e-12))
        outward = (~inside) & (((base > hi) & (step > 0)) | ((base < lo) & (step < 0)))
        tight = np.isclose(x, lo) | np.isclose(x, hi)  # a bound that stopped the step
        assert c == 1.0 or tight.any() or (c == 0.0 and outward.any())
        beyond = x[~inside]  # an entry outside moves no further out, nor past its other bound
        assert np.all((beyond >= np.minimum(base, lo)[~inside] - 1e-12)
                      & (beyond <= np.maximum(base, hi)[~inside] + 1e-12))


def test_passive_rows_yield_at_the_bounds_joint_by_joint():
    """Prioritized passive rows at the joints' bounds (``passive_rows_guard``): a joint their
    step would take past a bound (one arm joint driven at its upper position limit) is held
    at that bound and the rows are solved again for the rest with the other joints, instead
    of their whole step being scaled down (which let one wrist at its limit switch a free-flyer's
    attitude rows off for seconds, doc/failure_analysis.md). Checked on the arm7 on its bus
    over random states: every joint within the guard's bounds where the task's own
    accelerations are, the hand's rows untouched by the rows' step (S J_G N = 0 away from
    singularities), and the bus's attitude rows (Pinocchio's bus acceleration) closer to
    their target than with the step scaled whole where that step is nearly off (median
    residual under half), and never further. The absolute scale (the old one) keeps its step
    scaled whole."""
    from underactuated_control.control.limits import JointLimitGuard
    from underactuated_control.control.task_space import _share_within

    model = RobotModel.from_urdf(SPACE_ARM, floating_base=True, gravity=(0, 0, 0))
    pin_ref = PinRef(model, SPACE_ARM)
    active, passive = list(model.active_dofs), list(model.passive_dofs)
    attitude = ["root_joint/rx", "root_joint/ry", "root_joint/rz"]
    upper = np.asarray(model.position_upper, float)[6:]  # per DOF
    speed = np.asarray(model.velocity_limit, float)[6:]
    rng = np.random.default_rng(5)
    kw = dict(task="position", kp_position=400.0, kd_position=40.0, passive_kp=25.0,
              passive_kd=10.0, null_space_damping=0.0, held_passive_dofs=attitude)
    gains, checked = [], 0
    for _ in range(60):
        q = model.neutral_configuration()  # the bus at its reference attitude
        q[7:] = Q_ARM + rng.uniform(-0.3, 0.3, 7)
        j = int(rng.integers(7))  # this joint at its upper limit, moving into it
        q[7 + j] = upper[j] - 0.01
        v = np.zeros(model.nv)
        v[3:6] = rng.normal(size=3) * 0.05  # the bus turning: the rows ask -kd_p of it
        v[6:] = rng.uniform(-0.2, 0.2, 7) * speed
        v[6 + j] = 0.3 * speed[j]
        goal = TaskReference(position=frame_placement(model, q, "tool")[0]
                             + rng.normal(size=3) * 0.01)
        guard = JointLimitGuard(model)
        out = {}
        for label, weight, rows_guard, scale in (
                ("task", 0.0, None, "relative"), ("unbounded", 1.0, None, "relative"),
                ("yielding", 1.0, guard, "relative"), ("absolute", 1e6, None, "absolute"),
                ("absolute yielding", 1e6, guard, "absolute")):
            tracker = EndEffectorTracker(model, "tool", passive_weight=weight,
                                         passive_rows_guard=rows_guard,
                                         passive_weight_scale=scale, **kw)
            tracker.set_passive_reference(q)
            out[label] = tracker.step(q, v, goal)
        lo, hi = (b.copy() for b in guard.bounds(q, v))
        x_task = out["task"].qdd_active
        x = out["yielding"].qdd_active
        step = out["unbounded"].qdd_active - x_task
        share = _share_within(x_task, step, lo, hi)  # the step scaled whole (before)
        if out["task"].sigma_min < 0.05 or share >= 1.0:
            continue  # near a singularity of the hand's rows, or no bound bites
        checked += 1
        inside = (x_task >= lo) & (x_task <= hi)
        assert np.all(x[inside] >= lo[inside] - 1e-9) and np.all(x[inside] <= hi[inside] + 1e-9)
        S, J_G = out["yielding"].task_rows
        assert np.linalg.norm(S @ J_G @ (x - x_task)) <= 1e-9 * max(1.0, np.abs(step).max())
        scaled = x_task + share * step
        absolute = out["absolute"].qdd_active - x_task  # the old scale: its step scaled whole
        np.testing.assert_allclose(out["absolute yielding"].qdd_active,
                                   x_task + _share_within(x_task, absolute, lo, hi) * absolute,
                                   rtol=1e-12, atol=1e-9)

        misses = []
        for qdd in (scaled, x):  # the attitude rows' residual (Pinocchio's bus acceleration)
            qdd_bus = pin_ref.dense_hybrid(q, v, qdd, np.zeros(6), active, passive)[1]
            misses.append(np.linalg.norm(qdd_bus[3:6] + 10.0 * v[3:6]))  # target: -kd_p ω
        gains.append((share, *misses))
    assert checked >= 10, checked
    print(f"\n[yield] {len(gains)} states, the rows' residual scaled whole -> joint by joint:",
          ", ".join(f"{b:.3g} -> {n:.3g} (share {c:.2f})" for c, b, n in gains))
    nearly_off = [now / before for share, before, now in gains if share < 0.1]
    assert len(nearly_off) >= 10 and np.median(nearly_off) < 0.5, nearly_off
    assert all(now <= before for _, before, now in gains)


def test_the_compiled_svd_matches_numpy_on_small_matrices_of_any_shape_and_rank():
    """``small_svd`` (one-sided Jacobi, compiled) against numpy's LAPACK SVD: the same singular
    values, an exact reconstruction and orthonormal factors, for wide, tall, square, rank
    deficient and badly scaled matrices."""
    from underactuated_control.control.task_space import small_svd

    rng = np.random.default_rng(3)
    for _ in range(500):
        k, n = rng.integers(1, 10, size=2)
        A = rng.normal(size=(k, n)) * 10.0 ** rng.uniform(-6, 3)
        if min(k, n) > 1 and rng.random() < 0.4:  # a repeated row or column: rank deficient
            if rng.random() < 0.5:
                A[-1] = A[0]
            else:
                A[:, -1] = 2.0 * A[:, 0]
        U, s, Vt = small_svd(A)
        scale = np.abs(A).max()
        assert np.allclose(s, np.linalg.svd(A, compute_uv=False), rtol=0, atol=1e-13 * scale)
        assert np.all(np.diff(s) <= 0.0)
        assert np.allclose((U * s) @ Vt, A, rtol=0, atol=1e-13 * scale)
        kept = s > 1e-12 * s[0]  # the factors of a zero σ are zero (not needed)
        assert np.allclose(U[:, kept].T @ U[:, kept], np.eye(kept.sum()), atol=1e-12)
        assert np.allclose(Vt[kept] @ Vt[kept].T, np.eye(kept.sum()), atol=1e-12)


@pytest.mark.parametrize("relative", [False, True])
def test_the_damped_solve_is_the_closed_form_damped_least_squares(relative):
    """x = Aᵀ (A Aᵀ + λ² I)⁻¹ b (Nakamura) with λ² = λ_min² + λ_max² (1 − (σ_min/ε)²) below ε,
    N = I − Aᵀ (A Aᵀ + λ² I)⁻¹ A, from numpy's SVD values and dense solves, for one and two
    right-hand sides; exact (the pseudo-inverse) above ε without λ_min."""
    from underactuated_control.control.task_space import _damped_solve

    rng = np.random.default_rng(5)
    eps, lam_max, lam_min = 0.04, 0.1, 0.01
    for _ in range(300):
        k, n = rng.integers(1, 8), rng.integers(2, 9)
        A = rng.normal(size=(k, n)) * 10.0 ** rng.uniform(-2, 1)
        if rng.random() < 0.5:  # near singular: the damping acts
            A[-1] = A[0] + 1e-3 * rng.normal(size=n) * np.abs(A).max()
        b, c = rng.normal(size=k), rng.normal(size=k)
        lam_lo = lam_min if rng.random() < 0.5 else 0.0
        (x, y), N, sigma_min, lam = _damped_solve(A, (b, c), eps, lam_max, lam_lo, relative)
        s = np.linalg.svd(A, compute_uv=False)
        unit = s[0] if relative else 1.0
        lam2 = (unit * lam_lo) ** 2
        if s[-1] < unit * eps:
            lam2 += (unit * lam_max) ** 2 * (1.0 - (s[-1] / (unit * eps)) ** 2)
        assert sigma_min == pytest.approx(s[-1], abs=1e-13 * s[0])
        assert lam == pytest.approx(np.sqrt(lam2), rel=1e-10, abs=1e-14)
        if lam2 > 1e-20 or k > n:
            # (k > n: A Aᵀ is singular; compare on the normal equations' form instead)
            M = A.T @ A + lam2 * np.eye(n)
            if lam2 < 1e-20 and np.linalg.cond(M) > 1e10:
                continue
            expect_x, expect_y = np.linalg.solve(M, A.T @ b), np.linalg.solve(M, A.T @ c)
            expect_N = np.eye(n) - np.linalg.solve(M, A.T @ A)
        else:
            pinv = np.linalg.pinv(A)
            expect_x, expect_y, expect_N = pinv @ b, pinv @ c, np.eye(n) - pinv @ A
        tol = 1e-9 * max(1.0, np.abs(expect_x).max(), np.abs(expect_y).max())
        assert np.allclose(x, expect_x, atol=tol) and np.allclose(y, expect_y, atol=tol)
        assert np.allclose(N, expect_N, atol=1e-9)
        single, *_ = _damped_solve(A, b, eps, lam_max, lam_lo, relative)
        assert np.array_equal(single, x)  # one right-hand side: the same as in a tuple


@pytest.mark.parametrize("robot, frame, passive", [
    ("arm7", "tool", []), ("arm7", "tool", ["joint3"]), ("xarm7", "link_eef", ["joint3"]),
    ("xarm7", "link_eef", ["joint2"])])
@pytest.mark.parametrize("task", ["pose", "position"])
def test_the_cycle_in_one_call_is_the_hybrid_solve_of_the_task_pinocchio_oracle(
        robot, frame, passive, task):
    """The common cycle of ``EndEffectorTracker.step`` (no held passive rows) runs as one
    compiled call, ``task_cycle_kernel``: its torques are Pinocchio's RNEA of the
    accelerations it gives, with the URDF's damping and friction as the passive joints'
    forces; those accelerations give the frame the desired classical acceleration on the task
    rows (Pinocchio's); and every output is bit for bit that of the separate steps, which a
    strided state takes."""
    text = ARM7 if robot == "arm7" else \
        (ROBOTS / "xarm_description/urdf/xarm7.urdf").read_text()
    q0 = Q_ARM if robot == "arm7" else np.array([0.3, -0.4, 0.4, 0.9, -0.3, 1.3, 0.2])
    model = RobotModel.from_urdf(text, passive_joints=passive)
    ref = PinRef(model, text)
    tracker = EndEffectorTracker(model, frame, task=task, kp_position=400, kd_position=40,
                                 posture_kp=4.0)
    tracker.set_posture(q0)
    fid = ref.pm.getFrameId(frame)
    rows = slice(0, 6) if task == "pose" else slice(0, 3)
    damping, friction = ref.back(ref.pm.damping), ref.back(ref.pm.friction)
    rng = np.random.default_rng(11)
    for _ in range(4):
        q = q0 + rng.uniform(-0.2, 0.2, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        p0, R0 = frame_placement(model, q, frame)
        goal = TaskReference(position=p0 + rng.uniform(-0.02, 0.02, 3),
                             rotation=R0 @ pin.exp3(rng.uniform(-0.05, 0.05, 3)),
                             linear_velocity=rng.uniform(-0.1, 0.1, 3),
                             linear_acceleration=rng.uniform(-0.5, 0.5, 3))
        assert tracker._in_one_call(q, v)
        res = tracker.step(q, v, goal)
        assert res.sigma_min > tracker.singular_threshold
        tau = ref.rnea(q, v, res.qdd)
        p = model.passive_dofs
        tau_p = -(damping[p] * v[p] + friction[p] * np.tanh(v[p] / 1e-2))
        np.testing.assert_allclose(res.tau_passive, tau_p, rtol=0, atol=1e-14)
        np.testing.assert_allclose(tau[model.active_dofs], res.tau_active, rtol=0, atol=1e-9)
        np.testing.assert_allclose(tau[p], tau_p, rtol=0, atol=1e-9)
        np.testing.assert_allclose(res.qdd[model.active_dofs], res.qdd_active, rtol=0, atol=0)
        pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(res.qdd))
        pin.updateFramePlacements(ref.pm, ref.pd)
        a = pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(np.concatenate([a.linear, a.angular])[rows],
                                   res.frame_acceleration_desired[rows], rtol=0, atol=1e-8)
        state = np.stack([q, v], axis=1)  # strided views: the separate steps
        assert not tracker._in_one_call(state[:, 0], state[:, 1])
        steps = tracker.step(state[:, 0], state[:, 1], goal)
        for name, value in vars(res).items():
            other = getattr(steps, name)
            pairs = zip(value, other) if isinstance(value, tuple) else ((value, other),)
            for x, y in pairs:  # task_rows: (S, J_G)
                np.testing.assert_array_equal(x, y, err_msg=name)
