"""Limits the laws respect (control/limits.py): the task setpoint approaches any goal within its
speed and acceleration bounds and stops on it; the joint-limit guard stops joints before their
URDF limits whatever acceleration is asked."""

import numpy as np
import pytest
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.control.limits import JointLimitGuard, PoseSetpointFollower
from underactuated_control.control.task_space import TaskReference
from underactuated_control.so3 import exp, rotation_angle


def test_setpoint_reaches_a_far_goal_within_its_bounds():
    v_max, a_max, w_max, al_max, dt = 0.5, 2.0, 1.5, 6.0, 1e-3
    follower = PoseSetpointFollower(v_max, a_max, w_max, al_max)
    follower.reset(np.zeros(3), np.eye(3))
    goal = TaskReference(position=np.array([3.0, -1.0, 0.5]),
                         rotation=exp(np.array([0.0, 2.5, 0.0])))
    distance = np.linalg.norm(goal.position)
    previous_v, previous_w = np.zeros(3), np.zeros(3)
    for _ in range(20000):
        sp = follower.step(goal, dt)
        assert np.linalg.norm(sp.linear_velocity) <= v_max * (1 + 1e-9)
        assert np.linalg.norm(sp.angular_velocity) <= w_max * (1 + 1e-9)
        assert np.linalg.norm(sp.linear_velocity - previous_v) <= a_max * dt * (1 + 1e-9)
        assert np.linalg.norm(sp.angular_velocity - previous_w) <= al_max * dt * (1 + 1e-9)
        previous_v, previous_w = sp.linear_velocity.copy(), sp.angular_velocity.copy()
    # a straight line at bounded speed: no faster than distance / v_max, and it arrives
    assert np.linalg.norm(sp.position - goal.position) < 1e-3
    assert rotation_angle(sp.rotation.T @ goal.rotation) < 1e-3
    assert np.linalg.norm(sp.linear_velocity) < 1e-2 and distance / v_max < 20000 * dt



def _stream(follower, late_ms=lambda k: 0, stamped=True, now_given=True, seconds=3.0):
    """A line at 0.1 m/s turning at 0.3 rad/s about z, sampled every 10 ms for 2 s (stamps
    from 1 s on the law's clock), each sample reaching the follower ``late_ms(k)`` ms after
    its stamp (the controller node applies a stamped goal at the first state at or past its
    stamp); then held still. Steps of 1 ms; the setpoints, their times, the goals applied."""
    dt, speed, turn = 1e-3, np.array([0.1, 0.0, 0.0]), np.array([0.0, 0.0, 0.3])
    follower.reset(np.zeros(3), np.eye(3))
    goal, k, out = TaskReference(position=np.zeros(3)), 0, []
    for n in range(1, round(seconds / dt) + 1):
        while k <= 200 and n >= 10 * k + late_ms(k):  # sample k due (its stamp 10 k ms)
            goal = TaskReference(position=speed * 0.01 * k, rotation=exp(turn * 0.01 * k),
                                 stamp=1.0 + 0.01 * k if stamped else 0.0)
            k += 1
        sp = follower.step(goal, dt, now=1.0 + n * dt if now_given else 0.0)
        out.append((n * dt, sp.position.copy(), sp.rotation.copy(), sp.linear_velocity.copy(),
                    sp.linear_acceleration.copy(), sp.angular_acceleration.copy(),
                    goal.position.copy()))
    return out


def test_a_stamped_stream_is_followed_as_its_path():
    """Stamped samples of a path are followed as the path (limits.py's docstring): within the
    bounds, the setpoint's acceleration (the task law's feed-forward) zero once it moves with
    the stream where chasing each sample put a ±a_max square wave on it, 1.5 samples behind
    the law's time, stopping on the last sample (past it by less than the braking distance:
    the stream's end is not announced); a goal faster than the speed limit is a jump,
    approached as before."""
    v_max, a_max, dt = 0.5, 2.0, 1e-3
    follower = PoseSetpointFollower(v_max, a_max, 1.5, 6.0)
    run = _stream(follower)
    previous = np.zeros(3)
    for t, p, R, v, a, alpha, goal in run:
        assert np.linalg.norm(v) <= v_max * (1 + 1e-9)
        assert np.linalg.norm(v - previous) <= a_max * dt * (1 + 1e-9)
        previous = v
        # never past the newest sample while it streams; where the stream stops at full
        # speed (unannounced), by less than the braking distance v²/(2 a_max)
        assert p[0] <= goal[0] + (1e-12 if t < 2.0 else 0.1**2 / (2 * a_max))
        if 0.5 <= t < 2.0:
            assert np.linalg.norm(a) < 1e-6 and np.linalg.norm(alpha) < 1e-6
            np.testing.assert_allclose(p[0], 0.1 * (t - 0.015), atol=1e-9)  # 1.5 samples
            assert rotation_angle(R.T @ exp(np.array([0.0, 0.0, 0.3 * (t - 0.015)]))) < 1e-9
    chased = _stream(PoseSetpointFollower(v_max, a_max, 1.5, 6.0), stamped=False)
    assert max(np.linalg.norm(r[4]) for r in chased if 0.5 <= r[0] < 2.0) > 0.9 * a_max
    t, p, R, v, *_ , goal = run[-1]
    np.testing.assert_allclose(p, goal, atol=1e-12)
    assert np.linalg.norm(v) < 1e-12
    jump = TaskReference(position=goal + np.array([0.0, 0.3, 0.0]), rotation=R, stamp=3.01)
    for n in range(5):  # 0.3 m 10 ms after the last sample: faster than 0.5 m/s, a jump
        sp = follower.step(jump, dt, now=1.0 + t + (n + 1) * dt)
    assert np.linalg.norm(sp.linear_velocity) <= 5 * a_max * dt * (1 + 1e-9)


def test_the_streams_velocities_are_its_samples_not_the_setpoints():
    """``stream_velocities``: the two newest segments of the stamped samples (along x at
    0.1 m/s, then turning to y), older first, and the time between their middles; the
    path's, also while the setpoint, restarted at rest, is still catching up with it. None for
    unstamped goals and before a third sample."""
    follower = PoseSetpointFollower(0.5, 2.0, 1.5, 6.0)
    follower.reset(np.zeros(3), np.eye(3))
    corners = [[0.0, 0.0, 0.0], [0.001, 0.0, 0.0], [0.002, 0.0, 0.0], [0.002, 0.002, 0.0]]
    for k, corner in enumerate(corners):
        assert (follower.stream_velocities() is None) == (k < 3)
        goal = TaskReference(position=np.array(corner), rotation=np.eye(3),
                             stamp=1.0 + 0.01 * k)
        sp = follower.step(goal, 1e-3, now=1.0 + 0.01 * k)
    older, newer, between = follower.stream_velocities()
    np.testing.assert_allclose(older, [0.1, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(newer, [0.0, 0.2, 0.0], atol=1e-12)
    assert between == pytest.approx(0.01)
    assert np.linalg.norm(sp.linear_velocity - newer) > 0.05  # the setpoint: not on the path
    unstamped = PoseSetpointFollower(0.5, 2.0, 1.5, 6.0)
    unstamped.reset(np.zeros(3), np.eye(3))
    for k, corner in enumerate(corners):
        unstamped.step(TaskReference(position=np.array(corner), rotation=np.eye(3)), 1e-3,
                       now=1.0 + 0.01 * k)
    assert unstamped.stream_velocities() is None


def test_a_sample_reaching_the_law_late_changes_nothing_within_half_a_spacing():
    """Samples reaching the follower up to 4 ms after their stamps (a sender that stamps
    when it publishes, a control period's quantisation): the same setpoints as on time."""
    on_time = _stream(PoseSetpointFollower(0.5, 2.0, 1.5, 6.0))
    late = _stream(PoseSetpointFollower(0.5, 2.0, 1.5, 6.0), late_ms=lambda k: k % 5)
    for a, b in zip(on_time, late):
        np.testing.assert_allclose(b[1], a[1], atol=1e-15)
        np.testing.assert_allclose(b[2], a[2], atol=1e-15)


def test_unstamped_goals_and_a_law_without_a_clock_are_chased_as_before():
    """Stamped goals with no law time given, and unstamped goals, are the same goals to the
    follower: each sample chased to a stop (the behaviour of an unstamped stream)."""
    unstamped = _stream(PoseSetpointFollower(0.5, 2.0, 1.5, 6.0), stamped=False)
    no_clock = _stream(PoseSetpointFollower(0.5, 2.0, 1.5, 6.0), now_given=False)
    for a, b in zip(unstamped, no_clock):
        np.testing.assert_array_equal(b[1], a[1])


def test_a_setpoint_changed_from_outside_steps_on_from_its_new_values():
    """The follower steps its setpoint in its own buffer; a law that puts other arrays on it
    (the task law's leash: a list, an int array, a strided view) has them taken in at the
    next step: that follower then steps as one reset at those values (the goal unstamped, so
    no stream memory differs), bit for bit, and its fields are float64 C-contiguous again."""
    goal = TaskReference(position=np.array([0.4, -0.2, 0.1]),
                         rotation=exp(np.array([0.3, -0.5, 0.2])))
    held = PoseSetpointFollower(0.5, 2.0, 1.5, 6.0)
    held.reset(np.zeros(3), np.eye(3))
    for _ in range(50):
        sp = held.step(goal, 1e-3)
    rotation = sp.rotation.copy()
    sp.position = [0.01, 0, 0]  # held back, at rest in position; turning on
    sp.linear_velocity = np.zeros(3, dtype=int)
    sp.angular_velocity = np.array([[0.1, 9.0], [0.2, 9.0], [-0.1, 9.0]])[:, 0]
    fresh = PoseSetpointFollower(0.5, 2.0, 1.5, 6.0)
    fresh.reset(np.array([0.01, 0.0, 0.0]), rotation)
    fresh.setpoint.angular_velocity = np.array([0.1, 0.2, -0.1])
    for _ in range(30):
        a, b = held.step(goal, 1e-3), fresh.step(goal, 1e-3)
        for name in ("position", "rotation", "linear_velocity", "angular_velocity",
                     "linear_acceleration", "angular_acceleration"):
            x = getattr(a, name)
            np.testing.assert_array_equal(x, getattr(b, name), err_msg=name)
            assert x.dtype == np.float64 and x.flags.c_contiguous, name
    assert np.linalg.norm(a.linear_velocity) > 0.0  # it moved on toward the goal

def test_guard_stops_joints_before_their_limits():
    model = RobotModel.from_urdf(ARM7_PATH, passive_joints=["joint2"])
    guard = JointLimitGuard(model, braking=10.0)
    q = np.array([0.0, -0.3, 0.0, -1.0, 0.0, 1.5, 0.0])
    v = np.zeros(7)
    dt = 1e-3
    a = model.active_dofs
    push = np.full(len(a), 50.0)  # 50 rad/s² toward every upper limit, forever
    upper = model.position_upper[a]
    for _ in range(5000):
        qdd = guard.clamp(q, v, push)
        v[a] += qdd * dt
        q[a] += v[a] * dt
        assert np.all(q[a] <= upper + 1e-3), (q[a], upper)
    assert guard.active.all()  # every joint braking at its limit
    assert np.all(np.abs(v[a]) < 1e-2) and np.all(upper - q[a] < 2e-2)
    lo, hi = guard.bounds(np.array([0.0, -0.3, 0.0, -1.0, 0.0, 1.5, 0.0]), np.zeros(7))
    assert np.all(hi > 20) and np.all(lo < -20)  # far from the limits: no effect on a task


# ------------------------------------------------------------------ the safety layer (every mode)
def _layer_case(passive, settings=None):
    from oracle import PinRef

    from underactuated_control.control.law import LawOutput
    from underactuated_control.control.limits import SafetyLayer
    from underactuated_control.jacobians import JacobianWorkspace

    model = RobotModel.from_urdf(ARM7_PATH, passive_joints=passive)
    layer = SafetyLayer(model, settings or {}, JacobianWorkspace(model))
    ref = PinRef(model, ARM7_PATH.read_text())
    return model, layer, ref, LawOutput


@pytest.mark.parametrize("passive", [[], ["joint2", "joint4"]])
def test_layer_bounds_the_accelerations_of_any_torque_pinocchio_oracle(passive):
    """Torques asking for huge accelerations (a 1e9 N wrench through Jᵀ, say): the shaped
    torques, applied to Pinocchio's ABA with the passive joints' URDF forces, give active
    accelerations within the guard's bounds, and they are the dense hybrid torques (4.4) of
    the bounded accelerations."""
    model, layer, ref, LawOutput = _layer_case(passive)
    a, p = model.active_dofs, model.passive_dofs
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = model.random_configuration(rng, scale=1.0)
        v = rng.uniform(-3.0, 3.0, model.nv)  # some beyond the 2.5 rad/s limits
        tau_p = layer.passive_forces(q, v).copy()
        tau_a = rng.uniform(-1e4, 1e4, len(a))
        out = LawOutput(tau_a.copy(), np.zeros(len(p)))
        assert layer.apply(q, v, out)
        lo, hi = (x.copy() for x in layer.guard.bounds(q, v))
        tau = np.zeros(model.nv)
        tau[a], tau[p] = out.tau_active, tau_p
        qdd = ref.aba(q, v, tau)  # the oracle's forward dynamics of the shaped command
        scale = max(1.0, np.abs(qdd).max())
        assert np.all(qdd[a] >= lo - 1e-8 * scale) and np.all(qdd[a] <= hi + 1e-8 * scale)
        np.testing.assert_allclose(out.qdd_passive, qdd[p], atol=1e-8 * scale)
        # the hybrid recursion's torque of those accelerations (Pinocchio's dense (4.4))
        tau_dense, _ = ref.dense_hybrid(q, v, qdd[a], tau_p, a, p)
        np.testing.assert_allclose(out.tau_active, tau_dense, atol=1e-7 * max(
            1.0, np.abs(tau_dense).max()))
        assert "safety limits on" in out.status and layer.limited_joints


def test_layer_keeps_room_in_the_effort_limits_for_a_later_stages_torques():
    """``reserve`` (the friction compensation the next stage adds): an override that would need
    more than the effort limits is scaled so that its torques plus the reserve stay within them
    (where the least accelerations within the bounds leave room: Pinocchio's dense hybrid
    torques of those), and its accelerations still within the bounds (Pinocchio's ABA)."""
    model, layer, ref, LawOutput = _layer_case(["joint2"])
    a, p = model.active_dofs, model.passive_dofs
    effort = np.asarray(model.effort_limit, float)[a]
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(20):
        q = model.random_configuration(rng, scale=1.0)
        v = rng.uniform(-3.0, 3.0, model.nv)
        reserve = rng.uniform(-0.5, 0.5, len(a)) * effort
        tau_p = layer.passive_forces(q, v).copy()
        lo, hi = (x.copy() for x in layer.guard.bounds(q, v))
        tau_s, _ = ref.dense_hybrid(q, v, np.clip(0.0, lo, hi), tau_p, a, p)
        if np.any(np.abs(tau_s + reserve) >= effort):
            continue  # no room whatever the scaling
        out = LawOutput(rng.uniform(-1e4, 1e4, len(a)), np.zeros(len(p)))
        assert layer.apply(q, v, out, lambda reserve=reserve: reserve)
        assert np.all(np.abs(out.tau_active + reserve) <= effort * (1 + 1e-9))
        tau = np.zeros(model.nv)
        tau[a], tau[p] = out.tau_active, tau_p
        qdd = ref.aba(q, v, tau)
        scale = max(1.0, np.abs(qdd).max())
        assert np.all(qdd[a] >= lo - 1e-8 * scale) and np.all(qdd[a] <= hi + 1e-8 * scale)
        np.testing.assert_allclose(layer.acceleration, qdd[a], atol=1e-8 * scale)
        checked += 1
    assert checked >= 5


def test_layer_keeps_the_task_rows_only_within_the_effort_limits():
    """A law naming its task rows (the hand's position, S J_G of the workspace): the layer that
    keeps them (``safety_keep_task``) gives accelerations within the bounds (Pinocchio's ABA of
    its torques) and torques within the effort limits less the reserve, as the plain clip
    does, and loses no more of the rows' acceleration than the clip; where keeping them needs
    more than the effort limits it is the clip, bit for bit."""
    from underactuated_control.control.limits import SafetyLayer, keep_task_rows
    from underactuated_control.jacobians import JacobianWorkspace

    model, layer, ref, LawOutput = _layer_case(["joint2"])
    plain = SafetyLayer(model, {"safety_keep_task": False}, JacobianWorkspace(model))
    ws = JacobianWorkspace(model)
    a, p = model.active_dofs, model.passive_dofs
    effort = np.asarray(model.effort_limit, float)[a]
    S = np.eye(6)[:3]
    rng = np.random.default_rng(9)
    kept = fell_back = 0
    for _ in range(60):
        q = model.random_configuration(rng, scale=1.0)
        v = rng.uniform(-3.0, 3.0, model.nv)
        reserve = rng.uniform(-0.2, 0.2, len(a)) * effort
        tau_p = layer.passive_forces(q, v).copy()
        J_G = ws.generalized("tool", q)[0].copy()
        A = S @ J_G
        tau_law = rng.uniform(-3.0, 3.0, len(a)) * effort
        tau = np.zeros(model.nv)
        tau[a], tau[p] = tau_law, tau_p
        law_qdd = ref.aba(q, v, tau)[a]
        out = LawOutput(tau_law.copy(), np.zeros(len(p)), task_rows=(S, J_G))
        clipped = LawOutput(tau_law.copy(), np.zeros(len(p)))
        if not plain.apply(q, v, clipped, lambda reserve=reserve: reserve):
            continue
        assert layer.apply(q, v, out, lambda reserve=reserve: reserve)
        lo, hi = (x.copy() for x in layer.guard.bounds(q, v))
        assert np.all(np.abs(out.tau_active + reserve) <= effort * (1 + 1e-9))
        tau[a] = out.tau_active
        qdd = ref.aba(q, v, tau)[a]
        scale = max(1.0, np.abs(qdd).max())
        assert np.all(qdd >= lo - 1e-8 * scale) and np.all(qdd <= hi + 1e-8 * scale)
        loss, clip_loss = (np.linalg.norm(A @ (x - law_qdd)) for x in (qdd, plain.acceleration))
        assert loss <= clip_loss + 1e-8 * scale
        wanted = np.empty(len(a))
        keep_task_rows(law_qdd, lo, hi, (law_qdd < lo) | (law_qdd > hi), A, 1e-2, 5e-2, wanted)
        if np.allclose(wanted, np.clip(law_qdd, lo, hi), rtol=0, atol=1e-9 * scale):
            continue  # nothing to keep
        if loss < clip_loss - 1e-6 * scale:
            kept += 1
        else:  # keeping them asked more than the effort limits
            tau_kept, _ = ref.dense_hybrid(q, v, wanted, tau_p, a, p)
            assert np.any(np.abs(tau_kept + reserve) > effort)
            np.testing.assert_array_equal(out.tau_active, clipped.tau_active)
            fell_back += 1
    print(f"\n[task rows kept] {kept} cycles kept them within the effort limits, "
          f"{fell_back} fell back to the clip")
    assert kept >= 3 and fell_back >= 3, (kept, fell_back)


@pytest.mark.parametrize("own", [True, False], ids=["law's accelerations", "forward pass"])
def test_a_command_the_motors_cut_is_kept_within_the_bounds_pinocchio_oracle(own):
    """No bound bites the law's accelerations, but its torques plus the friction stage's pass
    the effort limits: the motors cut them. Where the cut command's accelerations (Pinocchio's
    ABA of the cut total less the compensation, which cancels the joints' friction) stay
    within the bounds, the shaper's command is the law's plus the compensation, bit for bit;
    where they would pass a bound the layer overrides: accelerations within the bounds, on
    the segment from the least ones within the bounds to the law's, and the total within the
    effort limits but for what the compensation adds at those accelerations over the room it
    was given (its h a and a braked joint's dry friction). URDF damping and friction doubled."""
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.jacobians import JacobianWorkspace

    doubled = {"damping_compensation_scale": 2.0, "friction_compensation_scale": 2.0}
    model, _, ref, LawOutput = _layer_case(["joint2"])
    shaper = CommandShaper(model, doubled, JacobianWorkspace(model))
    layer, friction = shaper.safety, shaper.friction
    a, p = model.active_dofs, model.passive_dofs
    effort = np.asarray(model.effort_limit, float)[a]
    slack = 2.0 * (model.damping[a] * 1e-3 + model.friction[a])  # h d |a| per rad/s², f_c
    rng = np.random.default_rng(11)
    left = scaled = 0
    for _ in range(400):
        q = model.random_configuration(rng, scale=1.0)
        v = rng.uniform(-2.0, 2.0, model.nv)
        tau_p = layer.passive_forces(q, v).copy()
        lo, hi = (x.copy() for x in layer.guard.bounds(q, v))
        law_qdd = rng.uniform(np.maximum(lo, -300.0), np.minimum(hi, 300.0))
        tau_law, qdd_p = ref.dense_hybrid(q, v, law_qdd, tau_p, a, p)
        intent = rng.uniform(-2.5, 2.5, len(a))
        out = LawOutput(tau_law.copy(), np.array(qdd_p), intended_velocity=intent,
                        qdd_active=law_qdd.copy() if own else None,
                        tau_passive=tau_p.copy() if own else None)
        shaper.apply(q, v, out)
        assert not layer.guard.active.any()  # no bound bites the law's accelerations
        compensation = friction.torque.copy()
        tau = np.zeros(model.nv)
        tau[p] = tau_p
        if not layer.overrode:  # left alone: the law's plus the compensation
            np.testing.assert_array_equal(out.tau_active, tau_law + compensation)
            if not np.any(np.abs(out.tau_active) > effort):
                continue
            tau[a] = np.clip(out.tau_active, -effort, effort) - compensation
            cut = ref.aba(q, v, tau)[a]  # what the motors give
            scale = max(1.0, np.abs(cut).max())
            assert np.all(cut >= lo - 1e-9 * scale) and np.all(cut <= hi + 1e-9 * scale)
            left += 1
            continue
        assert "safety limits on" in out.status
        tau[a] = out.tau_active - compensation
        qdd = ref.aba(q, v, tau)[a]
        scale = max(1.0, np.abs(law_qdd).max())
        assert np.all(qdd >= lo - 1e-8 * scale) and np.all(qdd <= hi + 1e-8 * scale)
        qdd_s = np.clip(0.0, lo, hi)
        alpha = np.dot(qdd - qdd_s, law_qdd - qdd_s) / np.dot(law_qdd - qdd_s, law_qdd - qdd_s)
        assert -1e-9 <= alpha < 1.0
        np.testing.assert_allclose(qdd, qdd_s + alpha * (law_qdd - qdd_s), atol=1e-7 * scale)
        tau_s, _ = ref.dense_hybrid(q, v, qdd_s, tau_p, a, p)
        if np.all(np.abs(tau_s + compensation) < effort - slack * (1.0 + np.abs(qdd))):
            assert np.all(np.abs(out.tau_active) <= effort + slack * (1.0 + np.abs(qdd)))
        scaled += 1
    print(f"\n[cut by the motors] {left} left alone, {scaled} scaled within the bounds")
    assert left >= 3 and scaled >= 3, (left, scaled)


def test_a_planned_command_passes_the_friction_stage_only():
    """A law output marked ``planned`` (the failure reaction's planned swing: the plan keeps
    the speed and position limits itself) is not bounded by the safety layer: torques the
    layer overrides when unplanned reach the motors with only the friction stage's
    compensation for that state and intent (arm7's URDF damping and friction)."""
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.jacobians import JacobianWorkspace

    model, _, _, LawOutput = _layer_case(["joint2"])
    shaper = CommandShaper(model, {}, JacobianWorkspace(model))
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    v = np.full(7, 0.3)
    wild = np.full(model.n_active, 50.0)  # far past the acceleration bounds
    intent = np.full(model.n_active, 0.3)
    unplanned = shaper.apply(q, v, LawOutput(wild.copy(), np.zeros(1),
                                             intended_velocity=intent))
    assert shaper.safety.overrode and not np.allclose(unplanned.tau_active, wild)
    planned = shaper.apply(q, v, LawOutput(wild.copy(), np.zeros(1), intended_velocity=intent,
                                           planned=True))
    assert not shaper.safety.overrode
    stage = shaper.friction.compensation(q, v, intent)
    assert np.all(np.abs(stage) > 0.0)
    np.testing.assert_allclose(planned.tau_active, wild + stage, atol=1e-12)


def test_the_shaper_in_one_call_is_its_stages_one_by_one():
    """``CommandShaper.apply`` for a law that gives its accelerations, T_p and intent (one
    compiled call where no bound bites) gives what its stages give called one by one — the
    safety layer, the friction stage, the motors' cut check, the friction stage again after an
    override — bit for bit: torques, passive accelerations, status, the layer's accelerations
    and braked joints, the compensation; over states where no bound bites, where one does,
    where the total passes the effort limits, and a non-finite command."""
    from functools import partial

    from underactuated_control.control.command import CommandShaper
    from underactuated_control.jacobians import JacobianWorkspace

    doubled = {"damping_compensation_scale": 2.0, "friction_compensation_scale": 2.0}
    model, _, ref, LawOutput = _layer_case(["joint2"])
    fused = CommandShaper(model, doubled, JacobianWorkspace(model))
    staged = CommandShaper(model, doubled, JacobianWorkspace(model))
    layer, friction = staged.safety, staged.friction
    a, p = model.active_dofs, model.passive_dofs
    rng = np.random.default_rng(5)
    seen = {"left": 0, "bounded": 0, "cut": 0, "non-finite": 0}
    for k in range(300):
        q = model.random_configuration(rng, scale=1.0)
        v = rng.uniform(-2.6, 2.6, model.nv)
        tau_p = layer.passive_forces(q, v).copy()
        lo, hi = (x.copy() for x in layer.guard.bounds(q, v))
        wide = rng.uniform(-1.0, 1.0, len(a)) * rng.choice([5.0, 60.0, 400.0])
        law_qdd = np.clip(wide, lo, hi) if k % 3 else wide  # within the bounds, or not
        tau_law, qdd_p = ref.dense_hybrid(q, v, law_qdd, tau_p, a, p)
        if k % 50 == 7:
            tau_law[1] = np.nan
        intent = rng.uniform(-2.5, 2.5, len(a))

        one, out = (LawOutput(tau_law.copy(), np.array(qdd_p), intended_velocity=intent.copy(),
                              qdd_active=law_qdd.copy(), tau_passive=tau_p.copy())
                    for _ in range(2))
        fused.apply(q, v, one)  # out: the stages one by one
        reserve = partial(friction.compensation, q, v, out.intended_velocity)
        layer.apply(q, v, out, reserve)
        law_tau = out.tau_active
        staged._compensate(q, v, out)
        if layer.cut_by_motors(q, v, out, law_tau, reserve):
            staged._compensate(q, v, out)
        np.testing.assert_array_equal(one.tau_active, out.tau_active)
        np.testing.assert_array_equal(one.qdd_passive, out.qdd_passive)
        assert one.status == out.status and fused.safety.overrode == layer.overrode
        assert (fused.safety.acceleration is None) == (layer.acceleration is None)
        if layer.acceleration is not None:
            np.testing.assert_array_equal(fused.safety.acceleration, layer.acceleration)
            np.testing.assert_array_equal(fused.safety.slowed_joints, layer.slowed_joints)
        np.testing.assert_array_equal(fused.friction.torque, friction.torque)
        if not np.all(np.isfinite(tau_law)):
            seen["non-finite"] += 1
        elif layer.overrode and np.all((law_qdd >= lo) & (law_qdd <= hi)):
            seen["cut"] += 1  # no bound bit the law's: the motors' cut of the total did
        elif layer.overrode:
            seen["bounded"] += 1
        else:
            seen["left"] += 1
    print(f"\n[shaper in one call] {seen}")
    assert min(seen.values()) >= 3, seen


def test_layer_leaves_a_command_within_the_bounds_alone_and_can_be_switched_off():
    model, layer, ref, LawOutput = _layer_case(["joint2"])
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    v = np.zeros(7)
    a = model.active_dofs
    tau_p = layer.passive_forces(q, v).copy()
    tau_gentle, _ = ref.dense_hybrid(q, v, np.full(len(a), 1.0), tau_p, a, model.passive_dofs)
    out = LawOutput(tau_gentle.copy(), np.zeros(1), status="singular")
    assert not layer.apply(q, v, out)
    np.testing.assert_array_equal(out.tau_active, tau_gentle)
    assert out.status == "singular" and not layer.overrode
    _, off, _, _ = _layer_case(["joint2"], {"safety_limits": False})
    wild = LawOutput(np.full(len(a), 1e6), np.zeros(1))
    assert not off.apply(q, v, wild)
    np.testing.assert_array_equal(wild.tau_active, 1e6)


def test_layer_holds_velocity_and_position_limits_in_closed_loop():
    """Pinocchio's ABA as the plant (1 kHz, semi-implicit Euler, the command one step late),
    every active joint pushed by its full effort limit toward its upper limit: speeds stay
    within the URDF limit (2.5 rad/s) and the joints stop inside their limits (margin 0.02)."""
    model, layer, ref, LawOutput = _layer_case(["joint2"], {"position_limit_margin": 0.02})
    a, p = model.active_dofs, model.passive_dofs
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    v = np.zeros(7)
    dt = 1e-3
    push = model.effort_limit[a].copy()
    applied = np.zeros(len(a))
    peak = np.zeros(7)
    for _ in range(3000):
        tau_p = layer.passive_forces(q, v).copy()
        tau = np.zeros(7)
        tau[a], tau[p] = applied, tau_p
        qdd = ref.aba(q, v, tau)
        out = LawOutput(push.copy(), np.zeros(1))
        layer.apply(q, v, out)
        applied = out.tau_active.copy()
        v = v + qdd * dt
        q = q + v * dt
        peak = np.maximum(peak, np.abs(v))
    assert np.all(peak[a] <= 1.2 * 2.5), peak
    assert np.all(q[a] <= model.position_upper[a] + 1e-3), q[a] - model.position_upper[a]
    assert layer.overrides > 2000


def test_reach_check_is_shared_by_every_pose_goal_mode():
    from underactuated_control.control.operational_space_law import OperationalSpaceLaw
    from underactuated_control.control.registry import law_parameters
    from underactuated_control.control.task_law import TaskLaw
    from underactuated_control.parameters import coerce

    model = RobotModel.from_urdf(ARM7_PATH)
    settings = {s.name: coerce(s, s.default) for s in law_parameters()}
    far = TaskReference(position=np.array([3.0, 0.0, 0.4]))
    near = TaskReference(position=np.array([0.4, 0.0, 0.5]))
    for law_class in (TaskLaw, OperationalSpaceLaw):
        law = law_class(model, settings, "tool")
        with pytest.raises(ValueError, match="beyond the reach of 'tool'"):
            law.check_reference(far)
        law.check_reference(near)
    orientation_only = OperationalSpaceLaw(model, {**settings, "os_task": "orientation"}, "tool")
    orientation_only.check_reference(far)  # no position goal: nothing to reach


@pytest.mark.parametrize("robot, frame, q_start, q_goal", [
    ("ur5", "tool0", [0.0, -1.2, 1.5, -1.9, -1.57, 0.0], [0.0, -0.8, 0.03, -0.8, -1.57, 0.0]),
    ("xarm7", "link_eef", [0.0, -0.4, 0.0, 0.9, 0.0, 1.3, 0.0],
     [0.0, 0.4, 0.0, 0.03, 0.0, 0.03, 0.0]),
])
def test_task_setpoint_slows_near_a_singularity_instead_of_the_joints_being_braked(
        robot, frame, q_start, q_goal):
    """Task mode, pose goal at a nearly stretched configuration (elbow, and the xarm7's wrist,
    0.03 rad from straight: σ_min of J_G falls 2x and 44x on the way) approached at the default
    task_max_speed 0.5 m/s, MuJoCo RK4 at 1 kHz. With ``task_joint_speed_fraction`` 0.5 the
    setpoint slows where the joint velocity the task asks nears half the URDF speed limits:
    the joints stay well below their limits (the intent is followed with the PD's lag) and the
    safety layer never brakes; with 0 (the setpoint as before) it has to brake the joints at
    their limit."""
    from oracle import EXAMPLE_URDFS, ROBOTS

    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import default_settings
    from underactuated_control.control.task_law import TaskLaw
    from underactuated_control.jacobians import JacobianWorkspace
    from underactuated_control.sim import build_plant, closed_loop

    path = EXAMPLE_URDFS.get(robot, ROBOTS / "xarm_description/urdf/xarm7.urdf")
    urdf = path.read_text()
    model = RobotModel.from_urdf(urdf)
    q_start, q_goal = np.array(q_start), np.array(q_goal)
    goal_ws = JacobianWorkspace(model)
    J_start = goal_ws.generalized(frame, q_start)[0].copy()
    J_goal = goal_ws.generalized(frame, q_goal)[0]
    sigma = [np.linalg.svd(J, compute_uv=False)[-1] for J in (J_start, J_goal)]
    assert sigma[1] < sigma[0] / 2  # the premise: the goal is near a singularity
    position, rotation = goal_ws.frame_placement(frame)
    goal = TaskReference(position=position.copy(), rotation=rotation.copy())
    vmax = np.asarray(model.velocity_limit, float)
    result = {}
    for fraction in (0.0, 0.5):
        plant = build_plant(urdf, model, timestep=1e-3, integrator="rk4")
        s = default_settings(task="pose", task_joint_speed_fraction=fraction)
        ws = JacobianWorkspace(model)
        law, shaper = TaskLaw(model, s, frame, ws), CommandShaper(model, s, ws)
        mapper = EffortMapper(model, list(model.joint_names), 1.0)
        plant.set_state(q_start, np.zeros(model.nv))
        law.hold_reference(q_start)
        seen = {"peak": 0.0, "braked": 0, "statuses": set()}

        def control(k, q, v, law=law, shaper=shaper, mapper=mapper, seen=seen):
            out = law.compute(q, v, goal, k * 1e-3, False)
            shaper.apply(q, v, out)
            seen["braked"] += bool(shaper.safety.overrode)
            seen["peak"] = max(seen["peak"], float(np.max(np.abs(v) / vmax)))
            seen["statuses"].add(out.status)
            return mapper.map(out.tau_active).copy()

        closed_loop(plant, control, 2500)  # one command per state, as the lock-stepped node
        peak, braked, statuses = seen["peak"], seen["braked"], seen["statuses"]
        goal_ws.set_configuration(plant.state()[0])
        error = np.linalg.norm(goal_ws.frame_placement(frame)[0] - goal.position)
        result[fraction] = (peak, braked, error)
        print(f"\n[{robot}] task_joint_speed_fraction {fraction}: peak v/v_max {peak:.2f}, "
              f"safety layer {braked} cycles, hand {1e3 * error:.2f} mm from the goal after "
              f"2.5 s; σ_min {sigma[0]:.3f} -> {sigma[1]:.4f}")
        assert error < 1e-3  # the goal is reached either way
        assert any("slowed near a singularity" in s for s in statuses) == (fraction > 0)
    assert result[0.0][1] > 0 and result[0.0][0] > 0.9  # before: braked at the limit
    assert result[0.5][1] == 0 and result[0.5][0] < 0.75  # half-way to the limit at most


@pytest.mark.parametrize("mode", ["task", "joint", "operational_space"])
@pytest.mark.parametrize("passive", [[], ["joint3"]])
def test_layer_takes_the_laws_own_accelerations_pinocchio_oracle(passive, mode):
    """The task, joint and operational-space laws hand the layer the accelerations their
    torques give (solved for, or their own forward dynamics: the layer runs none of its
    own): they are Pinocchio's ABA of those
    torques with the passive joints' URDF forces, and the layer shapes the command exactly as
    it does from its own forward dynamics, whether it overrides (a goal far off, joints near
    their limits) or not."""
    from underactuated_control.control.registry import CONTROL_LAWS, default_settings
    from underactuated_control.jacobians import JacobianWorkspace

    model, layer, ref, LawOutput = _layer_case(passive)
    a, p = model.active_dofs, model.passive_dofs
    settings = default_settings(task="pose")
    law = CONTROL_LAWS[mode](model, settings, "tool", JacobianWorkspace(model))
    rng = np.random.default_rng(11)
    overrode = 0
    for k in range(12):
        q = model.random_configuration(rng, scale=1.0)
        far = k % 2 == 0  # a far goal, joints beyond their 2.5 rad/s; or near and slow
        v = rng.uniform(-3.0, 3.0, model.nv) if far else rng.uniform(-0.2, 0.2, model.nv)
        target = model.random_configuration(rng, scale=1.0) if far else q + 0.01
        goal = law.hold_reference(np.clip(target, model.position_lower, model.position_upper))
        law.hold_reference(q)
        for step in range(3):  # the setpoint moves: feed-forward accelerations
            out = law.compute(q, v, goal, 0.001 * (3 * k + step), False)
        assert out.qdd_active is not None and out.tau_passive is not None
        np.testing.assert_allclose(out.tau_passive, layer.passive_forces(q, v), atol=1e-12)
        tau = np.zeros(model.nv)
        tau[a], tau[p] = out.tau_active, out.tau_passive
        qdd = ref.aba(q, v, tau)
        scale = max(1.0, np.abs(qdd).max())
        np.testing.assert_allclose(out.qdd_active, qdd[a], atol=1e-9 * scale)
        own = LawOutput(out.tau_active.copy(), out.qdd_passive.copy(), status=out.status,
                        task_rows=out.task_rows)
        overrode += layer.apply(q, v, out)
        shaped, acceleration = out.tau_active.copy(), layer.acceleration.copy()
        slowed = layer.slowed_joints.copy()
        layer.apply(q, v, own)  # the layer's forward dynamics instead of the law's
        np.testing.assert_allclose(shaped, own.tau_active, atol=1e-8 * max(
            1.0, np.abs(own.tau_active).max()))
        np.testing.assert_allclose(acceleration, layer.acceleration, atol=1e-9 * scale)
        assert out.status == own.status
        # the joints the command brakes (friction stage): by their definition, both paths
        va = v[a]
        braked = (layer.acceleration * va < 0) & (layer.guard.active
                                                  | (np.abs(va) > layer.guard.speed))
        np.testing.assert_array_equal(layer.slowed_joints, braked)
        np.testing.assert_array_equal(slowed, braked)
    assert 0 < overrode < 12  # both paths of the layer were compared


def test_pinned_joints_leave_their_task_rows_to_the_others():
    """``keep_task_rows`` (saturation in the null space): whatever the law asked, the result is
    within the bounds, the joints pinned stay pinned at a bound, and the task rows' acceleration
    A qdd is never further from the law's than the plain clip leaves it; where the other
    joints' task columns keep full row rank (σ_min above ε: the undamped solve) and their
    minimum-norm make-up stays within their bounds, that is the answer: A qdd the law's."""
    from underactuated_control.control.limits import keep_task_rows

    rng = np.random.default_rng(23)
    kept = 0
    for trial in range(400):
        k, n = (3, 6) if trial % 2 else (6, 7)
        A = rng.normal(size=(k, n))
        law_qdd = rng.normal(size=n) * 4.0
        lo, hi = -rng.uniform(0.5, 6.0, n), rng.uniform(0.5, 6.0, n)
        first = (law_qdd < lo) | (law_qdd > hi)
        pinned, out = first.copy(), np.empty(n)
        keep_task_rows(law_qdd, lo, hi, pinned, A, 1e-2, 5e-2, out)
        assert np.all(out >= lo) and np.all(out <= hi)
        assert np.all(pinned[first])
        at_bound = np.isclose(out, lo, rtol=0, atol=1e-12) | np.isclose(out, hi, rtol=0,
                                                                          atol=1e-12)
        assert np.all(at_bound[pinned])
        lost_by_clip = np.linalg.norm(A @ (np.clip(law_qdd, lo, hi) - law_qdd))
        lost = np.linalg.norm(A @ (out - law_qdd))
        assert lost <= lost_by_clip + 1e-9 * (1.0 + lost_by_clip)
        free = ~first
        if not first.any() or free.sum() < k or np.linalg.svd(
                A[:, free], compute_uv=False)[-1] <= 1e-2:
            continue
        # the free joints making up the loss, by the minimum-norm solution (NumPy's pinv):
        # where that stays within their bounds, it is the answer, and the task rows are kept
        clipped = np.clip(law_qdd, lo, hi)
        made_up = clipped.copy()
        made_up[free] -= np.linalg.pinv(A[:, free]) @ (A[:, first] @ (clipped - law_qdd)[first])
        if np.all(made_up[free] >= lo[free]) and np.all(made_up[free] <= hi[free]):
            np.testing.assert_allclose(out, made_up, atol=1e-9 * max(1.0, np.abs(out).max()))
            np.testing.assert_allclose(A @ out, A @ law_qdd, atol=1e-9 * max(
                1.0, np.abs(A @ law_qdd).max()))
            np.testing.assert_array_equal(pinned, first)
            kept += 1
    assert kept > 20  # the case that matters was met


@pytest.mark.parametrize("own", [True, False], ids=["law's accelerations", "forward pass"])
def test_layer_leaves_a_non_finite_command_to_the_caller(own):
    """A law's NaN torque is not shaped (the caller refuses it): no bound, no acceleration."""
    model, layer, _, LawOutput = _layer_case([])
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    tau = np.zeros(model.n_active)
    tau[2] = np.nan
    out = LawOutput(tau, np.zeros(0), qdd_active=np.zeros(model.n_active) if own else None,
                    tau_passive=np.zeros(0) if own else None)
    assert layer.apply(q, v, out) is False
    assert layer.acceleration is None and not layer.overrode
    assert out.tau_active is tau and np.isnan(out.tau_active[2])
