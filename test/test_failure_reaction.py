"""The failure reaction of task mode (control/failure_reaction.py, issue 23 item 2), with MuJoCo
as the physics: an arm the package was not tuned on (example-robot-data's xarm7 with the
issue's joint damping 0.3 N m s/rad and friction 0.05 N m) holds its hand in task mode; a motor
fails at run time as the node does it (a new law for ``model.with_passive``, armed by its
``carry_reference`` with the old model); no joint may then run faster than 1.2x its URDF limit,
and the reaction chosen is in the law's status."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import PANDA_Q0, g1_left_arm, issue_arm

from underactuated_control import RobotModel
from underactuated_control.control.command import CommandShaper
from underactuated_control.control.failure_reaction import (
    CAUTION,
    Decision,
    carried_path,
    decide,
    escalate,
    losing_hand,
    swing_peak,
    turn_rate,
)
from underactuated_control.control.joint_space import EffortMapper
from underactuated_control.control.registry import default_settings
from underactuated_control.control.task_law import TaskLaw
from underactuated_control.control.task_space import TaskReference
from underactuated_control.dynamics import inverse_dynamics
from underactuated_control.jacobians import JacobianWorkspace
from underactuated_control.scenarios.failure_circle import run_failure_circle
from underactuated_control.sim import build_plant

XARM7 = issue_arm("xarm_description/urdf/xarm7.urdf")
FRAME = "link_eef"
Q0 = np.array([0.0, -0.4, 0.0, 0.9, 0.0, 1.3, 0.0])  # hand down, 0.36 m out, 0.44 m up


def _fail(joint: str, task: str, reaction: str = "auto", before: float = 0.3,
          after: float = 2.5, then: tuple[str, float] | None = None,
          robot: tuple[str, str, np.ndarray] | None = None, **settings) -> dict:
    """Hold the hand at Q0's pose, ``joint``'s motor fails after ``before`` s; figures over
    the ``after`` s that follow (MuJoCo RK4, 1 kHz, one command per state). ``then``: a second
    joint's motor fails that many seconds after the first (the node's next passive_joints
    change: the new law armed with the old model and the old law). ``robot``: (URDF, hand
    frame, start configuration) of another arm than the xarm7."""
    urdf, frame, q0 = robot if robot is not None else (XARM7, FRAME, Q0)
    model = RobotModel.from_urdf(urdf)
    plant = build_plant(urdf, model, timestep=1e-3, integrator="rk4")
    s = default_settings(task=task, failure_reaction=reaction, **settings)
    names = list(model.joint_names)

    def plan(m: RobotModel):
        ws = JacobianWorkspace(m)
        return TaskLaw(m, s, frame, ws), CommandShaper(m, s, ws), EffortMapper(m, names, 1.0)

    law, shaper, mapper = plan(model)
    plant.set_state(q0, np.zeros(model.nv))
    ref = law.hold_reference(q0)
    check = JacobianWorkspace(model)
    vmax = np.asarray(model.velocity_limit, float)
    n_before, n_after = round(before / 1e-3), round(after / 1e-3)
    lower, upper = np.asarray(model.position_lower), np.asarray(model.position_upper)
    err, speed, overrun, statuses = [], [], [], set()
    failures = {n_before: [joint]}
    if then is not None:
        failures[n_before + round(then[1] / 1e-3)] = [joint, then[0]]
    first_reaction = None
    for k in range(n_before + n_after):
        q, v = plant.state()
        if k in failures:
            first_reaction = first_reaction or law.reaction
            old = law
            law, shaper, mapper = plan(model.with_passive(failures[k]))
            ref = law.carry_reference(ref, old.model, old)
        out = law.compute(q, v, ref, k * 1e-3, False)
        shaper.apply(q, v, out)
        plant.d.ctrl[plant.ctrl] = plant.clip(mapper.map(out.tau_active).copy())
        if k >= n_before:
            check.set_configuration(q)
            err.append(np.linalg.norm(check.frame_placement(frame)[0] - ref.position))
            speed.append(np.abs(v) / vmax)
            overrun.append(float(np.max(np.maximum(lower - q, q - upper))))
            statuses.add(out.status)
        plant.step()
    peak = np.max(speed, axis=0)  # per joint
    k = model.joint_index(joint)
    return {"hand_rms_mm": 1e3 * float(np.sqrt(np.mean(np.square(err)))),
            "peak_speed_ratio": float(peak.max()), "reaction": law.reaction,
            "first_reaction": first_reaction,
            "peak_active_ratio": float(np.delete(peak, k).max()),
            "peak_passive_ratio": float(peak[k]), "statuses": statuses,
            "overrun_rad": max(0.0, max(overrun)),
            # the active joints over the last 0.5 s (the hold's rest)
            "end_active_ratio": float(np.delete(np.max(speed[-500:], axis=0), k).max())}


def test_vertical_axis_failure_keeps_the_pose():
    """joint1 (vertical base axis: no gravity moment, the pose rows keep rank): kept."""
    r = _fail("joint1", "pose")
    print(f"\n[joint1] {r['reaction'].status}: hand {r['hand_rms_mm']:.2f} mm RMS, "
          f"peak v/v_max {r['peak_speed_ratio']:.2f}")
    assert r["reaction"].mode == "keep_task"
    assert r["hand_rms_mm"] <= 10.0
    assert r["peak_speed_ratio"] <= 1.2
    assert any("failure reaction keep_task" in s for s in r["statuses"])


def test_upper_arm_roll_failure_under_gravity_does_not_flail():
    """joint3 (upper-arm roll, 0.2 N m of gravity about it at Q0: more than its 0.05 N m of
    friction, so the whole pose has no static hold): the pose is not kept as it was (issue 23:
    the law drove it to 4.7x the speed limit), no joint passes 1.2x its URDF speed limit, and
    the reaction chosen is in the law's status."""
    model = RobotModel.from_urdf(XARM7)
    zero = np.zeros(7)
    assert abs(inverse_dynamics(model, Q0, zero, zero)[2]) > 0.1  # the premise: loaded axis
    r = _fail("joint3", "pose")
    print(f"\n[joint3] {r['reaction'].status}: hand {r['hand_rms_mm']:.1f} mm RMS, "
          f"peak v/v_max {r['peak_speed_ratio']:.2f}")
    assert r["reaction"].mode in ("position", "hold")
    assert r["peak_speed_ratio"] <= 1.2
    assert any(f"failure reaction {r['reaction'].mode}" in s for s in r["statuses"])


def test_a_loaded_elbow_failure_is_arrested_by_a_plan_within_the_limits():
    """joint4 (the elbow, 12.5 N m of gravity about it at Q0): no task is attainable, and the
    braked hold alone lets the arm fall about the failed elbow into its limit, whipping the
    wrist (forced `hold`, which never plans: above 1.2x a speed limit). The auto reaction
    predicts that on the model, plans the arrest (box DDP through the hybrid derivatives) and
    follows it with its Riccati gains: no joint passes 1.2x its URDF speed limit nor a
    position limit by more than 0.05 rad (issue 23's gravity goal), in MuJoCo."""
    braked = _fail("joint4", "pose", "hold")
    assert braked["peak_speed_ratio"] > 1.2  # the premise: braking alone flails
    r = _fail("joint4", "pose")
    print(f"\n[joint4] {r['reaction'].status}: peak v/v_max {r['peak_speed_ratio']:.2f} "
          f"(braked {braked['peak_speed_ratio']:.2f}), overrun {r['overrun_rad']:.3f} rad "
          f"(braked {braked['overrun_rad']:.3f})")
    assert r["reaction"].mode == "hold" and "the fall arrested by a plan" in r["reaction"].status
    assert r["peak_speed_ratio"] <= 1.2
    assert r["overrun_rad"] <= 0.05
    # failure_plan_budget 0 (a robot that cannot wait for the solve): braked at once, no plan
    unplanned = _fail("joint4", "pose", failure_plan_budget=0.0)
    assert "failure_plan_budget 0: braked at once" in unplanned["reaction"].status
    assert unplanned["peak_speed_ratio"] > 1.2


@pytest.mark.parametrize("joint", ["joint6", "joint4"])
def test_the_safe_posture_brings_every_active_joint_to_rest(joint):
    """The ``hold`` reaction gives the friction stage its brake's intent, (kp/kd)(q_hold −
    q_a): the active joints' damping and dry friction are no longer compensated along their
    own motion, which left the xarm7's light wrist (joint7, 1e-4 kg m²) turning at 0.36 rad/s
    (0.11 of its speed limit) 2 s into the hold, its brake's torque 1e-3 N·m. Every active
    joint within 0.01 of its speed limit over the last 0.5 s."""
    r = _fail(joint, "pose", "hold")
    print(f"\n[{joint}] hold: active joints at the end {r['end_active_ratio']:.4f} of their "
          "speed limits")
    assert r["reaction"].mode == "hold"
    assert r["end_active_ratio"] <= 0.01


def _example_arm(path: str, frame: str, q0: list[float]) -> tuple[str, str, np.ndarray]:
    """An example-robot-data arm with the issue's <dynamics> on every joint."""
    return issue_arm(path), frame, np.array(q0)


@pytest.mark.parametrize("robot, joint", [
    (("ur_description/urdf/ur5_robot.urdf", "tool0", [0, -1.2, 1.5, -1.9, -1.57, 0]),
     "elbow_joint"),
    (("z1_description/urdf/z1.urdf", "link06", [0, 1.0, -1.2, 0.3, 0, 0, -0.5]), "joint3"),
], ids=["ur5-elbow", "z1-elbow"])
def test_a_loaded_elbow_failure_is_arrested_on_arms_it_was_not_tuned_on(robot, joint):
    """The same as above on two arms the reaction was not developed on (example-robot-data's
    UR5 and Unitree Z1, the issue's <dynamics>, gravity, the hand held with the arm bent):
    braked alone the failed elbow's fall passes 1.2x a speed limit; the planned arrest keeps
    every joint within 1.2x and the position limits within 0.05 rad, in MuJoCo."""
    arm = _example_arm(*robot)
    braked = _fail(joint, "pose", "hold", robot=arm)
    assert braked["peak_speed_ratio"] > 1.2  # the premise
    r = _fail(joint, "pose", robot=arm)
    print(f"\n[{joint}] {r['reaction'].status}: peak v/v_max {r['peak_speed_ratio']:.2f} "
          f"(braked {braked['peak_speed_ratio']:.2f}), overrun {r['overrun_rad']:.3f} rad "
          f"(braked {braked['overrun_rad']:.3f})")
    assert "the fall arrested by a plan" in r["reaction"].status
    assert r["peak_speed_ratio"] <= 1.2
    assert r["overrun_rad"] <= 0.05


def test_the_arrest_is_planned_only_where_braking_would_pass_a_limit_and_a_plan_keeps_them():
    """arrest_plan on the model (the MuJoCo check is the test above): the wrist pitch
    (joint6, 1 N m about it) braked is predicted within its limits, so no plan; the shoulder
    (joint2) braked falls through its limit and no plan found keeps the limits (the fall goes
    on braked, and the status says so); the elbow's plan keeps every joint within its speed
    limit and inside its position limits, and ends nearly at rest."""
    from underactuated_control.control.failure_reaction import arrest_plan

    full = RobotModel.from_urdf(XARM7)
    zero = np.zeros(7)
    plan, note = arrest_plan(full.with_passive(["joint6"]), Q0, zero)
    assert plan is None and "no plan needed" in note
    plan, note = arrest_plan(full.with_passive(["joint2"]), Q0, zero)
    assert plan is None and "no arrest plan within the limits" in note
    model = full.with_passive(["joint4"])
    plan, note = arrest_plan(model, Q0, zero)
    assert plan is not None and "the fall arrested by a plan" in note
    xs, vmax = plan.solution.xs, np.asarray(model.velocity_limit)
    assert np.abs(xs[:, 7:] / vmax).max() <= 1.0
    assert np.all(xs[:, :7] >= model.position_lower) and np.all(xs[:, :7] <= model.position_upper)
    assert np.abs(xs[-1, 7:] / vmax).max() <= 0.25
    # failure_plan_budget: 0 plans nothing; a budget spent in the first iteration stops the
    # solve there (the long horizon not tried) and judges it as it stands: no plan here
    plan, note = arrest_plan(model, Q0, zero, budget=0.0)
    assert plan is None and "failure_plan_budget 0: braked at once" in note
    plan, note = arrest_plan(model, Q0, zero, budget=1e-9)
    assert plan is None and "stopped at failure_plan_budget 1e-09 s" in note


def test_a_second_failure_is_decided_for_every_failed_joint_never_less_cautiously():
    """joint3 fails under gravity (loaded: the pose is given up, as above), then 1 s later
    joint7, the hand's roll (unloaded, but the pose rows lose rank without it: alone it gets
    `position`, which damps joint7 only). The second
    reaction is decided for both joints and is at least as cautious as the first; no joint
    passes 1.2x its URDF speed limit. (Decided for joint7 alone, as before 2026-11-28, the new
    law damped joint7 through J_D and left the loaded joint3 free: it swung to 1.38x its speed
    limit before the run-time check braked the arm.)"""
    r = _fail("joint3", "pose", then=("joint7", 1.0), after=3.0)
    first, second = r["first_reaction"], r["reaction"]
    print(f"\n[joint3, then joint7] {first.status} -> {second.status}: hand "
          f"{r['hand_rms_mm']:.1f} mm RMS, peak v/v_max {r['peak_speed_ratio']:.2f}")
    assert first.mode in ("position", "hold") and first.failed == ("joint3",)
    assert set(second.failed) == {"joint3", "joint7"}
    assert CAUTION[second.mode] >= CAUTION[first.mode]
    assert r["peak_speed_ratio"] <= 1.2


def test_a_recovered_motor_leaves_the_failed_set():
    """joints 3 and 1 failed (the pose given up at Q0 under gravity: joint3 is loaded), then
    joint3's motor comes back (passive_joints := [joint1]): the new law reacts to joint1 alone,
    with no floor from the reaction that covered joint3, and keeps the whole pose as joint1's
    failure alone does (the vertical base axis: no gravity moment)."""
    model = RobotModel.from_urdf(XARM7)
    s = default_settings(task="pose")
    both, only1 = model.with_passive(["joint3", "joint1"]), model.with_passive(["joint1"])
    law = TaskLaw(both, s, FRAME, JacobianWorkspace(both))
    ref = law.carry_reference(law.hold_reference(Q0), model)
    law.compute(Q0, np.zeros(7), ref, 0.0, False)
    assert set(law.failed_joints) == {"joint1", "joint3"} and law.reaction.mode != "keep_task"
    after = TaskLaw(only1, s, FRAME, JacobianWorkspace(only1))
    after.carry_reference(ref, both, law)
    assert after.failed_joints == ("joint1",)
    after.compute(Q0, np.zeros(7), ref, 0.0, False)
    alone = decide(only1, ["joint1"], Q0, FRAME, "pose")
    assert after.reaction.failed == ("joint1",)
    assert after.reaction.mode == alone.mode == "keep_task"


def test_a_gain_change_keeps_the_failure_reaction():
    """Any parameter change rebuilds the law (the node's _commit): with joint3 failed and the
    pose given up, a law rebuilt for a new gain on the same passive set reacts again to
    joint3, at least as cautiously (before 2026-11-28 the rebuilt law knew of no failure and
    went back to the configured pose task)."""
    model = RobotModel.from_urdf(XARM7)
    failed = model.with_passive(["joint3"])
    law = TaskLaw(failed, default_settings(task="pose"), FRAME, JacobianWorkspace(failed))
    ref = law.carry_reference(law.hold_reference(Q0), model)
    law.compute(Q0, np.zeros(7), ref, 0.0, False)
    assert law.reaction.mode != "keep_task"
    rebuilt = TaskLaw(failed, default_settings(task="pose", task_kp_position=200.0), FRAME,
                      JacobianWorkspace(failed))
    out = rebuilt.compute(Q0, np.zeros(7), rebuilt.carry_reference(ref, failed, law), 0.0, False)
    assert rebuilt.reaction.failed == ("joint3",)
    assert CAUTION[rebuilt.reaction.mode] >= CAUTION[law.reaction.mode]
    assert f"failure reaction {rebuilt.reaction.mode}" in out.status


def test_a_rebuilt_law_goes_on_along_the_path_a_gain_change_and_a_failure():
    """A law rebuilt for a gain change or a failed motor (the node's _commit:
    ``carry_reference`` with the law it replaces) takes that law's setpoint, moving, and its
    clock: fed the same states and the same stamped circle, its setpoint is the one of a law
    never rebuilt, to rounding, moving at the circle's speed (before 2026-12-05 it restarted
    at rest: the hand stopped and started again at every change from rqt and at every
    failure). The arm is held still (a forced keep_task that never steps down, no plan, the
    setpoint neither leashed nor slowed), so only the setpoint moves."""
    from underactuated_control.scenarios.harness import circle_path

    model = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0))
    common = dict(task="pose", failure_reaction="keep_task", failure_plan_budget=0.0,
                  task_joint_speed_fraction=0.0, task_max_position_error=1.0)
    s = default_settings(**common)

    def law_for(m: RobotModel, **gains: float) -> TaskLaw:
        return TaskLaw(m, default_settings(**common, **gains) if gains else s, FRAME,
                       JacobianWorkspace(m))

    law, never_rebuilt = law_for(model), law_for(model)
    ref = law.hold_reference(Q0)
    never_rebuilt.hold_reference(Q0)
    period, radius = 8.0, 0.05
    path = circle_path(ref.position.copy(), radius, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], period)
    circle_speed = 2.0 * np.pi * radius / period
    k_change, zero = 2000, np.zeros(7)
    failed = law_for(model.with_passive(["joint4"]))
    for k in range(k_change + 301):
        t = k * 1e-3
        if k % 10 == 0:  # stream_path's 100 Hz, stamped
            ref = TaskReference(position=path(t), rotation=ref.rotation, stamp=t)
        if k == k_change:
            rebuilt = law_for(model, task_kp_position=200.0)
            ref = rebuilt.carry_reference(ref, model, law)
            failed.carry_reference(ref, model, law)
            law = rebuilt
        law.compute(Q0, zero, ref, t, False)
        if k >= k_change:
            failed.compute(Q0, zero, ref, t, False)
        never_rebuilt.compute(Q0, zero, ref, t, False)
        if k == k_change:
            assert failed.reaction.failed == ("joint4",)
            for got in (law, failed):
                assert abs(np.linalg.norm(got.follower.setpoint.linear_velocity)
                           - circle_speed) < 0.02 * circle_speed
        if k >= k_change:
            want = never_rebuilt.follower.setpoint
            for got in (law.follower.setpoint, failed.follower.setpoint):
                assert np.abs(got.position - want.position).max() < 1e-12, k
                assert np.abs(got.rotation - want.rotation).max() < 1e-12, k
                assert np.abs(got.linear_velocity - want.linear_velocity).max() < 1e-12, k
    assert np.linalg.norm(law.follower.setpoint.position - path(k_change * 1e-3 + 0.3)) < 2e-3


def _failure_on_a_moving_setpoint(monkeypatch: pytest.MonkeyPatch, model: RobotModel,
                                  frame: str, q0: np.ndarray, joint: str):
    """A pose-task law at ``q0`` (held still: the law's handling is under test) following a
    stamped 5 cm circle for 2 s, then ``joint`` failing: the rebuilt law takes the moving
    setpoint over and decides at its first cycle. Both planners replaced by one that
    records (kind, target velocity) and refuses. Returns (records, the rebuilt law, the
    setpoint's velocity at the failure, the hand at q0)."""
    from underactuated_control.control.failure_reaction import PlannedSwing, PlannedTask
    from underactuated_control.scenarios.harness import circle_path

    asked: list[tuple[str, np.ndarray]] = []

    def refusing(kind: str):
        def plan(self, q, v, position, velocity, rotation=None, angular_velocity=None):
            asked.append((kind, np.array(velocity, float)))
            return False, "refused (test)"
        return plan

    monkeypatch.setattr(PlannedSwing, "plan", refusing("swing"))
    monkeypatch.setattr(PlannedTask, "plan", refusing("task"))
    s = default_settings(task="pose", task_joint_speed_fraction=0.0,
                         task_max_position_error=1.0)
    law = TaskLaw(model, s, frame, JacobianWorkspace(model))
    ref = law.hold_reference(q0)
    hand = ref.position.copy()
    path = circle_path(hand, 0.05, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], 8.0)
    zero = np.zeros(model.nv)
    for k in range(2001):
        if k % 10 == 0:
            ref = TaskReference(position=path(k * 1e-3), rotation=ref.rotation, stamp=k * 1e-3)
        law.compute(q0, zero, ref, k * 1e-3, False)
    moving = law.follower.setpoint.linear_velocity.copy()
    assert np.linalg.norm(moving) > 0.02  # the premise: a moving setpoint at the failure
    failed_model = model.with_passive([joint])
    failed = TaskLaw(failed_model, s, frame, JacobianWorkspace(failed_model))
    failed.carry_reference(ref, model, law)
    failed.compute(q0, zero, ref, 2.001, False)
    return asked, failed, moving, hand


def test_a_failure_plan_refused_toward_the_moving_path_is_made_again_toward_the_hand_stopped(
        monkeypatch: pytest.MonkeyPatch):
    """At a failure the rebuilt law's first plan follows the carried setpoint, moving; where
    that plan is refused (Talos' elbow in zero g: 4 mm off its path against the 3 mm bound),
    the setpoint restarts at rest at the measured hand and the plan is made again toward it,
    as before the setpoint was carried (the xarm7's elbow, zero g)."""
    model = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0))
    asked, failed, moving, hand = _failure_on_a_moving_setpoint(monkeypatch, model, FRAME, Q0,
                                                                "joint4")
    assert [kind for kind, _ in asked] == ["task", "task"], failed.reaction.status
    assert np.linalg.norm(asked[0][1] - moving) < 0.05 * np.linalg.norm(moving)
    assert np.linalg.norm(asked[1][1]) == 0.0
    sp = failed.follower.setpoint  # restarted at rest at the measured hand (one step taken)
    assert np.linalg.norm(sp.position - hand) < 1e-6
    assert "toward the moving path: refused (test); toward the hand stopped: refused" \
        in failed.reaction.status


def test_a_loaded_joint_let_swing_at_a_failure_plans_once_from_the_hand_stopped(
        monkeypatch: pytest.MonkeyPatch):
    """A loaded failed joint let swing (Talos' forearm roll under gravity, its swing from rest
    predicted past the runaway speed: planned) starts from the hand stopped, not from the
    carried moving setpoint; its plan refused, it is not solved a second time toward the same
    target (the carried task's retry is for a plan toward the moving path)."""
    text, frame, q0 = _talos_left_arm()
    model = RobotModel.from_urdf(text, tip_link=frame)
    asked, failed, _, hand = _failure_on_a_moving_setpoint(monkeypatch, model, frame, q0,
                                                           "arm_left_5_joint")
    assert [kind for kind, _ in asked] == ["swing"], failed.reaction.status
    assert np.linalg.norm(asked[0][1]) == 0.0  # toward the hand stopped
    assert np.linalg.norm(failed.follower.setpoint.position - hand) < 1e-6
    assert "let move; refused (test)" in failed.reaction.status
    assert "toward the moving path" not in failed.reaction.status


def test_forced_choice_and_bad_choice():
    model = RobotModel.from_urdf(XARM7).with_passive(["joint3"])
    d = decide(model, ["joint3"], Q0, FRAME, "pose", "hold")
    assert d.mode == "hold" and "failure_reaction:=hold" in d.status
    with pytest.raises(ValueError, match="failure_reaction"):
        decide(model, ["joint3"], Q0, FRAME, "pose", "flail")


def test_a_chosen_swing_gives_the_task_up_only_when_it_runs_away():
    """``escalate``'s rule, each cycle: a joint past 0.8 of its speed limit with the hand 12
    mm off gives the kept position up, unless it is a failed joint the reaction let swing to
    its balanced configuration; that one only past 1.2 (the issue's bound) where the arm
    braked is predicted to keep its swing within 1.1 (the xarm7's wrist at Q0 under gravity:
    0.84, from the model), else past 1.1 as any joint."""
    model = RobotModel.from_urdf(XARM7).with_passive(["joint6"])
    vmax = np.asarray(model.velocity_limit, float)
    predicted = swing_peak(model, Q0, np.zeros(7), ["joint6"])
    assert 0.0 < predicted <= 1.1
    swing = Decision("position", "test", ("joint6",), 0.05, 0.8, Q0, "position", let_move=True,
                     swing_peak=predicted, swing_dofs=(int(model.joint_dofs("joint6")[0]),))
    fast = replace(swing, swing_peak=1.6)
    held = Decision("position", "test", ("joint6",), 0.05, 0.8, Q0, "position")

    def check(d: Decision, joint: int, ratio: float) -> Decision | None:
        v = np.zeros(7)
        v[joint] = ratio * vmax[joint]
        return escalate(d, 0.05, v, model, 1e-2, position_error=0.012)

    assert check(swing, 5, 1.03) is None and check(swing, 5, 1.15) is None
    assert check(swing, 5, 1.25).mode == "hold"
    assert check(held, 5, 1.15).mode == "hold"
    assert check(fast, 5, 1.03) is None and check(fast, 5, 1.15).mode == "hold"
    assert check(swing, 3, 0.9).mode == "hold"  # an active joint: the task is losing the hand
    assert check(held, 5, 0.9).mode == "hold"


def test_a_kept_pose_that_loses_the_hand_steps_down_to_its_position():
    """``escalate`` on a kept pose (``keep_task``, task pose): the hand 12 mm from its
    setpoint, or the setpoint held back 12 mm from its goal by the slowing near a
    singularity, gives the orientation up for the position (``position``) at any joint speed
    up to the runaway's 1.1 of a speed limit (before 2026-12-03 a joint past 0.8 went to
    ``hold``); past 1.1 it brakes (``hold``). A kept position task losing the hand at low
    speed goes on (nothing is left to give up but the task), and 5 mm is no loss."""
    model = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0)).with_passive(["joint3"])
    vmax = np.asarray(model.velocity_limit, float)
    pose = Decision("keep_task", "test", ("joint3",), 0.05, 0.0, None, "pose")
    position = replace(pose, task="position")

    def check(d: Decision, ratio: float, error: float, held_back: float = 0.0):
        v = np.zeros(7)
        v[1] = ratio * vmax[1]
        return escalate(d, 0.05, v, model, 1e-2, error, held_back)

    assert check(pose, 0.2, 0.005) is None and check(pose, 0.2, 0.005, 0.005) is None
    slow = check(pose, 0.2, 0.012)
    assert slow.mode == "position" and "orientation given up" in slow.reason
    assert check(pose, 0.2, 0.002, 0.012).mode == "position"
    assert check(pose, 0.9, 0.012).mode == "position"
    assert check(pose, 1.15, 0.002).mode == "hold"
    assert check(position, 0.2, 0.012, 0.012) is None
    assert check(position, 0.9, 0.012).mode == "hold"


def test_a_kept_tasks_plan_and_its_law_lose_the_hand_by_one_rule():
    """``losing_hand``, the test ``TaskLaw._follow_swing`` drops a kept task's plan by, is the
    one ``escalate`` gives the task up by (below the runaway speed, σ_min fine): over a grid
    of hand errors and joint speeds, pose and position, the two agree case by case."""
    model = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0)).with_passive(["joint3"])
    vmax = np.asarray(model.velocity_limit, float)
    pose = Decision("keep_task", "test", ("joint3",), 0.05, 0.0, None, "pose")
    cases = 0
    for decision in (pose, replace(pose, task="position")):
        for ratio in (0.0, 0.5, 0.79, 0.81, 1.05):
            for error in (0.0, 0.009, 0.011, 0.05):
                v = np.zeros(7)
                v[1] = ratio * vmax[1]
                given_up = escalate(decision, 0.05, v, model, 1e-2, error) is not None
                lost = losing_hand(error, ratio, decision.task == "pose")
                assert lost == given_up, (decision.task, ratio, error)
                cases += lost
    assert 0 < cases < 40  # both outcomes seen


def _baxter() -> tuple[str, str, np.ndarray]:
    """example-robot-data's Baxter, its left arm alone (the rest of the body rigid,
    ``harness.only_joints``), the issue's <dynamics>, elbow bent, hand in front: an arm the
    failure reaction was not developed on."""
    joints = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
    text = issue_arm("baxter_description/urdf/baxter.urdf", joints=joints)
    return text, "left_gripper", np.array([0.0, -0.55, 0.0, 1.3, 0.0, 0.8, 0.0])


@pytest.mark.parametrize("joint", ["left_e0", "left_w0"])
def test_a_pose_losing_the_hand_gives_the_orientation_up_on_baxter(joint):
    """Issue 23's zero-g goal for `task:=pose` (hand ≤ 10 mm RMS after any single failure)
    on Baxter's left arm, the circle in 8 s, `auto`: the pose is kept at the failure (σ_min
    of its rows above the threshold, no load), then loses the hand, and ``escalate`` gives
    the orientation up for the position. The upper-arm roll (left_e0): a joint reached 0.80
    of its speed limit with the hand 23 mm off, which went to ``hold`` (94 mm); the forearm
    roll (left_w0): the orientation rows near rank loss held the setpoint back, the joints
    slow, and the pose was kept behind the path (15.2 mm). Judged on MuJoCo's state. The
    instantaneous law's escalation (`failure_plan_budget` 0): with a budget the kept pose is
    planned from the failure and never given up (left_e0 2.0 mm, its orientation kept;
    ``test_an_unloaded_failed_joint_keeps_the_pose_task_along_a_receding_plan``)."""
    r = _circle("pose", joint, 8.0, "auto", False, robot=_baxter(), failure_plan_budget=0.0)
    print(f"\n[baxter {joint}, zero g] pose task: {r['hand_rms_mm']:.2f} mm RMS (peak v/v_max "
          f"{r['peak_speed_ratio']:.2f}); {r['status']}")
    assert "failure reaction position" in r["status"]
    assert "keep_task given up at run time" in r["status"]
    assert r["hand_rms_mm"] <= 10.0
    assert r["peak_speed_ratio"] <= 1.2


def _circle(task: str, failing: str | None = None, period: float = 4.0,
            reaction: str = "keep_task", gravity: bool = True,
            robot: tuple[str, str, np.ndarray] | None = None, stamped: bool = False,
            settle: float = 0.3, **settings) -> dict:
    """The hand once round a 5 cm circle (x-z plane) in ``period`` s after ``settle`` s at rest
    (bench/failure_cases.py's rows: 0.5), then 0.5 s; the reference streamed at 100 Hz as
    scenarios.harness.stream_path does, from the start (at rest: the start's point);
    ``failing``'s motor fails half-way (the node's run-time passive_joints change; ``reaction``
    the failure_reaction). The bench's harness (scenarios.failure_circle: MuJoCo RK4, 1 kHz,
    lock-stepped); a law that refuses a state fails the test, a diverged run loses the hand
    (inf). Hand error against the streamed path, joints' excursion, the law's last status.
    ``robot``: (URDF, hand frame, start configuration) of another arm than the xarm7.
    ``stamped``: each sample stamped with its time, as the node gets them from stream_path
    (followed as a path), not chased to a stop."""
    urdf, frame, q0 = robot if robot is not None else (XARM7, FRAME, Q0)
    s = default_settings(task=task, failure_reaction=reaction, **settings)
    run = run_failure_circle(urdf, s, frame, q0, period, failing, gravity, settle, 0.5,
                             stamped, stream_at_rest=True)
    assert not run.law_errors, f"the law refused a state: {run.law_errors[0]}"
    vmax = np.asarray(run.model.velocity_limit, float)
    after = slice(run.failed_at if failing is not None else 0, None)
    assert len(run.hand_error) > after.start, f"diverged before the failure: {run.diverged}"
    err, lost = run.hand_error, np.inf if run.diverged else 1.0  # diverged: the hand lost
    speed = np.abs(run.v / vmax).max(axis=1)
    return {"hand_rms_mm": 1e3 * lost * float(np.sqrt(np.mean(np.square(err[after])))),
            "hand_max_mm": 1e3 * lost * float(max(err[after])),
            "turn_rms_deg": float(np.degrees(np.sqrt(np.mean(np.square(run.hand_turn[after]))))),
            "drift_rad": float(np.abs(run.q - q0).max()),
            "peak_speed_ratio": float(speed[after].max()) if speed[after].size else np.inf,
            "status": run.statuses[-1], "statuses": sorted(set(run.statuses)),
            "q_min": run.q.min(axis=0), "hand_errors_m": err, "speed_ratios": speed,
            "status_log": run.statuses, "failed_at": run.failed_at if failing is not None else 0,
            "diverged": run.diverged}


def test_task_mode_keeps_the_self_motion_on_a_light_wrist_with_friction():
    """The xarm7 with the issue's <dynamics> (0.3 N m s/rad, 0.05 N m: its wrist joint7 has
    1.4e-4 kg m², so 0.05 N m is 360 rad/s²), hand once round a 5 cm circle in 4 s in
    `task:=pose`, friction compensation on (the default), no failure. The compensation's dry
    part follows the joint velocity the task's PD drives toward (resolved rate through J_G),
    not the measured one: through the steep smooth sign on a sampled velocity the wrist was
    kicked into coasting and dragged the self-motion 1.9 rad away while the hand missed its
    path by 13 mm RMS on the 8 s circle (doc/failure_analysis.md; on this 4 s one 2.6 rad and
    3.5 mm). Judged on MuJoCo's state: the joints stay near the start (the self-motion of a
    pose task is 1-D and damped) and the hand on its path."""
    r = _circle("pose")
    print(f"\n[self-motion] pose task, 5 cm circle on xarm7 with friction: hand "
          f"{r['hand_rms_mm']:.2f} mm RMS, joints at most {r['drift_rad']:.3f} rad from the start")
    assert r["drift_rad"] < 0.5
    assert r["hand_rms_mm"] < 4.0


def test_a_joint_braked_at_its_limit_leaves_the_hand_to_the_others():
    """The xarm7, healthy, under gravity, the hand's position round the 5 cm circle, with
    joint2's lower limit moved to −0.40 rad (the circle takes it to −0.5): the safety layer
    brakes joint2 at the limit; the other six joints make up the hand's acceleration it no
    longer gives (``safety_keep_task``, the default: saturation in the null space), so the
    hand stays on its path. Only clipped (``safety_keep_task:=false``) the hand is dragged off
    it. Judged on MuJoCo's state: the hand as well as with the URDF's limit (where the
    circle meets none), and joint2 never past its new limit."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(XARM7)
    limit = next(j for j in root.findall("joint") if j.get("name") == "joint2").find("limit")
    limit.set("lower", "-0.40")
    robot = (ET.tostring(root, encoding="unicode"), FRAME, Q0)
    free = _circle("position")
    kept = _circle("position", robot=robot)
    clipped = _circle("position", robot=robot, safety_keep_task=False)
    print(f"\n[joint2 at its limit] hand {kept['hand_rms_mm']:.2f} mm RMS (max "
          f"{kept['hand_max_mm']:.2f}), only clipped {clipped['hand_rms_mm']:.2f} mm (max "
          f"{clipped['hand_max_mm']:.2f}), no limit met {free['hand_rms_mm']:.2f} mm (max "
          f"{free['hand_max_mm']:.2f}); joint2 down to {kept['q_min'][1]:.3f} rad "
          f"({free['q_min'][1]:.3f} with no limit met)")
    assert free["q_min"][1] < -0.45  # the circle takes joint2 past the new limit
    assert "safety limits on ['joint2']" in "".join(kept["statuses"])  # which was met
    assert kept["q_min"][1] >= -0.40 - 0.01
    assert kept["hand_rms_mm"] < 1.2 * free["hand_rms_mm"]
    assert kept["hand_max_mm"] < 1.2 * free["hand_max_mm"]
    assert clipped["hand_max_mm"] > 2.0 * kept["hand_max_mm"]


def test_hand_roll_failure_keeps_the_position_with_the_passive_rows_on():
    """joint7 (the hand's roll, link_eef on its axis) fails half-way round the circle in
    `task:=position` with the issue's J_D hold (`passive_weight` 1, kp 25, kd 10) under
    gravity: the roll does not move the hand, so it is left to its own damping (held, it drove
    joints 5-6 to their speed limits: 21 mm RMS on table C's 8 s circle); the hand stays on
    its path and no joint passes its speed limit."""
    r = _circle("position", "joint7", passive_weight=1.0, passive_kp=25.0, passive_kd=10.0)
    print(f"\n[joint7] position task, J_D hold: hand {r['hand_rms_mm']:.2f} mm RMS after the "
          f"failure, peak v/v_max {r['peak_speed_ratio']:.2f}")
    assert r["hand_rms_mm"] <= 5.0
    assert r["peak_speed_ratio"] <= 1.2


@pytest.mark.parametrize("joint, gravity", [("joint4", False), ("joint5", True)])
def test_unloaded_failed_joint_is_let_move_in_the_position_task(joint, gravity):
    """`task:=position` with the issue's J_D hold (`passive_weight` 1, kp 25, kd 10), table C's
    8 s circle: a failed joint whose static load its own friction holds is kept out of the
    hold (``release_passive``; the status says so). Held, the elbow in zero g left the hand
    6.0 mm RMS (the hold's self-motion against the joints' friction) and the wrist roll's
    hold under gravity drove a joint to its speed limit, where `auto` gave the task up
    (67.7 mm); let move, the hand keeps the issue's 5 mm and no joint passes 1.2x its speed
    limit. The same run with the choice forced (`failure_reaction:=keep_task`: held, as
    before the reaction existed, never given up) shows the hold's cost on this arm."""
    hold = {"passive_weight": 1.0, "passive_kp": 25.0, "passive_kd": 10.0}
    free = _circle("position", joint, 8.0, "auto", gravity, **hold)
    held = _circle("position", joint, 8.0, "keep_task", gravity, **hold)
    print(f"\n[{joint}, {'gravity' if gravity else 'zero g'}] position task: let move "
          f"{free['hand_rms_mm']:.2f} mm RMS (peak v/v_max {free['peak_speed_ratio']:.2f}), "
          f"held {held['hand_rms_mm']:.2f} mm; {free['status']}")
    assert "left free of the J_D hold" in free["status"]
    assert free["hand_rms_mm"] <= 5.0 and free["peak_speed_ratio"] <= 1.2
    assert held["hand_rms_mm"] > free["hand_rms_mm"]


@pytest.mark.parametrize("named", [False, True])
def test_release_keeps_a_failed_joint_named_in_hold_passive_dofs(named):
    """``release_passive`` acts on the default hold (every passive DOF) only: a failed joint
    the user names in `hold_passive_dofs` stays in the rows of J_D that `passive_weight`
    holds, and the status does not say it was let free."""
    model = RobotModel.from_urdf(XARM7)
    s = default_settings(task="position", passive_weight=1.0, passive_kp=25.0, passive_kd=10.0,
                  hold_passive_dofs=["joint5"] if named else [""])
    failed = model.with_passive(["joint5"])
    law = TaskLaw(failed, s, FRAME, JacobianWorkspace(failed))
    ref = law.carry_reference(law.hold_reference(Q0), model)
    out = law.compute(Q0, np.zeros(7), ref, 0.0, False)
    assert law.reaction.mode == "keep_task"
    assert law.tracker.held_rows.tolist() == ([0] if named else [])
    assert ("left free of the J_D hold" in out.status) is not named


def test_closed_loop_growth_matches_pinocchios_forward_dynamics():
    """``closed_loop_growth`` linearises the tracker's loop on the package's own hybrid
    recursion; the same loop closed on Pinocchio's ABA (the tracker's T_a on the active
    joints, the URDF's damping written out on the failed one) has the same eigenvalues.
    Case: the xarm7 (damping 0.3 N m s/rad, no dry friction) in zero gravity, its wrist pitch
    (joint6) failed, the hand position held; the exact inversion (passive_trust 1) and the
    locked joint (0). With the issue's dry friction (0.05 N m) the growth is the same: the
    linearisation leaves it out."""
    from oracle import PinRef

    from underactuated_control.control.failure_reaction import closed_loop_growth
    from underactuated_control.control.task_space import TaskReference

    viscous = XARM7.replace('friction="0.05"', 'friction="0"')
    model = RobotModel.from_urdf(viscous, gravity=(0.0, 0.0, 0.0)).with_passive(["joint6"])
    ref = PinRef(model, viscous)
    tracker = TaskLaw(model, default_settings(task="position"), FRAME,
                      JacobianWorkspace(model)).tracker
    dry = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0)).with_passive(["joint6"])
    with_friction = TaskLaw(dry, default_settings(task="position"), FRAME,
                            JacobianWorkspace(dry)).tracker
    q0 = np.array([0.0, -0.24, 0.0, 0.79, 0.0, 1.3, 0.0])
    check = JacobianWorkspace(model)
    check.set_configuration(q0)
    p, R = check.frame_placement(FRAME)
    hold = TaskReference(position=p.copy(), rotation=R.copy())

    def f(x: np.ndarray) -> np.ndarray:
        q, v = x[:7], x[7:]
        tau = np.zeros(7)
        tau[model.active_dofs] = tracker.step(q, v, hold).tau_active
        tau[5] = -0.3 * v[5]  # the URDF's <dynamics damping>
        return np.concatenate([v, ref.aba(q, v, tau)])

    x0 = np.concatenate([q0, np.zeros(7)])
    for trust in (None, np.zeros(1)):
        tracker.passive_trust = trust
        growth = closed_loop_growth(tracker, q0)
        A = np.column_stack([(f(x0 + e) - f(x0 - e)) / 2e-6 for e in 1e-6 * np.eye(14)])
        expected = float(np.max(np.linalg.eigvals(A).real))
        print(f"\n[joint6, trust {trust}] growth {growth:.4f}/s, on Pinocchio {expected:.4f}/s")
        assert growth == pytest.approx(expected, rel=1e-4, abs=1e-3)
        with_friction.passive_trust = trust
        assert closed_loop_growth(with_friction, q0) == pytest.approx(growth, rel=1e-6, abs=1e-6)
        if trust is None:
            assert growth > 100.0  # the premise: the exact inversion is unstable here


@pytest.mark.parametrize("task, goal_mm", [("position", 5.0), ("pose", 10.0)])
def test_a_light_damped_wrist_failure_keeps_the_hand_in_zero_gravity(task, goal_mm):
    """Issue 23's zero-g goal on the row it missed: the xarm7's wrist pitch (joint6, 0.3 N m
    s/rad, 0.05 N m) fails half-way round table C's 8 s circle. Held by the exact inversion of
    J_G, the hand kept 1 mm while the zero dynamics grew (2452/s linearised) and the joints
    ran to 1.16x their speed limit within 59 ms: the task was given up (89 mm position, 84.5
    mm pose). The reaction now measures that growth and counts less on the failed joint's
    reaction (``settle_failed``, the status says so): the hand stays within the
    issue's 5 mm (position) and 10 mm (pose: the orientation given up) and no joint passes
    1.2x its speed limit."""
    hold = {"passive_weight": 1.0, "passive_kp": 25.0, "passive_kd": 10.0} \
        if task == "position" else {}
    r = _circle(task, "joint6", 8.0, "auto", False, **hold)
    print(f"\n[joint6, zero g] {task} task: hand {r['hand_rms_mm']:.2f} mm RMS after the "
          f"failure, peak v/v_max {r['peak_speed_ratio']:.2f}; {r['status']}")
    assert "reaction trusted at" in r["status"]
    assert r["hand_rms_mm"] <= goal_mm
    assert r["peak_speed_ratio"] <= 1.2


def _panda() -> tuple[str, str, np.ndarray]:
    """example-robot-data's panda, the issue's <dynamics>, its finger joints fixed (a mimic
    joint is refused), the hand held bent (arm7's start)."""
    return _example_arm("panda_description/urdf/panda.urdf", "panda_hand", PANDA_Q0)


def _let_move_against_held(label: str, task: str, joint: str, gravity: bool,
                           robot: tuple[str, str, np.ndarray] | None = None, **settings) -> None:
    """``joint`` fails half-way round table C's 8 s circle, with `auto` and with the hold
    forced (`failure_reaction:=position`, the position reaction before 2026-11-28): `auto`
    keeps the position with the failed joint let move (the status says so), the hand within
    the issue's 10 mm, no joint past 1.2x its speed limit, and closer than held."""
    free = _circle(task, joint, 8.0, "auto", gravity, robot=robot, **settings)
    held = _circle(task, joint, 8.0, "position", gravity, robot=robot, **settings)
    print(f"\n[{label}] {task} task: let move {free['hand_rms_mm']:.2f} mm RMS (peak v/v_max "
          f"{free['peak_speed_ratio']:.2f}), held {held['hand_rms_mm']:.2f} mm; {free['status']}")
    assert "failure reaction position" in free["status"] and "let move" in free["status"]
    assert free["hand_rms_mm"] <= 10.0 and free["peak_speed_ratio"] <= 1.2
    assert held["hand_rms_mm"] > free["hand_rms_mm"]


@pytest.mark.parametrize("arm, joint", [("xarm7", "joint4"), ("panda", "panda_joint4")])
def test_an_unloaded_elbow_is_let_move_when_the_orientation_is_given_up(arm, joint):
    """`task:=pose` in zero gravity, the elbow failing: the pose rows lose rank and `auto`
    keeps the position. The elbow holds its load (none) where it is, so it is let move, as
    `keep_task` lets a failed joint move; held through J_D where it failed, the hold dragged
    the panda's self-motion 2.9 rad away and the hand 15.9 mm RMS off its path (the xarm7:
    5.9 mm)."""
    robot = None if arm == "xarm7" else _panda()
    _let_move_against_held(f"{arm} {joint}, zero g", "pose", joint, False, robot)


@pytest.mark.parametrize("task", ["position", "pose"])
def test_a_loaded_wrist_failure_swings_to_its_balance_while_the_hand_is_kept(task):
    """Issue 23's gravity goal on table C's wrist-pitch rows: joint6 (0.79 N m about it, 16x
    its dry friction) failing under gravity. `task:=position` with the J_D hold: `auto` keeps
    the position and lets the wrist swing to where it hangs (0.6 rad) while the arm follows its
    predicted fall (drift_G) and counts on its reaction only in part (``passive_trust``);
    held toward that balance through J_D, the hold drove the forearm roll to its speed limit
    and `auto` gave the task up (169 mm RMS). `task:=pose` (defaults): the pose rows lose rank
    and the balance lies 1.1 rad away, past the search's reach before 2026-11-28 (braked in
    the safe posture: 219 mm); the swing then passes 0.8 of the wrist's speed limit with the
    hand 10 mm off, which gave a kept task up, but it is the swing the reaction chose:
    ``escalate`` counts it only toward the runaway speed."""
    hold = {"passive_weight": 1.0, "passive_kp": 25.0, "passive_kd": 10.0} \
        if task == "position" else {}
    _let_move_against_held("joint6, gravity", task, "joint6", True, **hold)


@pytest.mark.parametrize("task", ["position", "pose"])
def test_a_loaded_forearm_roll_is_let_move_on_an_arm_it_was_not_tuned_on(task):
    """The panda (example-robot-data, the issue's <dynamics>) under gravity, its forearm roll
    (panda_joint5, 0.54 N m about it, 11x its dry friction) failing half-way round the
    circle. Held toward its balance first (the position reaction before 2026-11-28; the loop
    linearised at the failure is stable either way), the hold kept it from swinging there
    while its load stayed: the active joints accelerated until a speed limit gave the task up
    (290 mm position, 348 mm pose). Let move first, the load swings it to where it hangs
    while the hand is kept."""
    hold = {"passive_weight": 1.0, "passive_kp": 25.0, "passive_kd": 10.0} \
        if task == "position" else {}
    _let_move_against_held("panda_joint5, gravity", task, "panda_joint5", True, _panda(), **hold)


def _circle_as_is_and_patched(monkeypatch: pytest.MonkeyPatch, patch,
                              **run) -> tuple[dict, dict]:
    """``_circle(**run)`` with the code as it is, then again with ``patch(context)`` applied
    in a monkeypatch context (the code before a change: a test's premise)."""
    as_is = _circle(**run)
    with monkeypatch.context() as context:
        patch(context)
        patched = _circle(**run)
    return as_is, patched


def _talos_left_arm() -> tuple[str, str, np.ndarray]:
    """The Talos humanoid's left arm (example-robot-data, the issue's <dynamics>), the rest of
    the body rigid (scenarios.harness.only_joints), elbow bent, hand in front: a light wrist
    (3–6.6 N m, 1.76–1.95 rad/s) the reaction was not developed on."""
    text = issue_arm("talos_data/robots/talos_reduced.urdf",
                     joints=[f"arm_left_{i}_joint" for i in range(1, 8)])
    return text, "arm_left_7_link", np.array([0.0, 0.4, 0.0, -1.2, 0.0, 0.4, 0.0])


def _with_and_without_plans(task: str, joint: str, gravity: bool,
                            robot: tuple[str, str, np.ndarray]) -> tuple[dict, dict]:
    """``_circle`` (8 s, stamped, `auto`) with ``joint`` failing: the reaction unplanned
    (`failure_plan_budget` 0), then planned with a budget that never stops a solve (judged
    by its plan, not by the machine's speed); both printed."""
    unplanned, planned = (_circle(task, joint, 8.0, "auto", gravity, robot=robot, stamped=True,
                                  failure_plan_budget=budget) for budget in (0.0, 600.0))
    print(f"\n[{joint}, {'gravity' if gravity else 'zero g'}] {task} task: planned "
          f"{planned['hand_rms_mm']:.2f} mm RMS, peak v/v_max {planned['peak_speed_ratio']:.2f}"
          f"; unplanned {unplanned['hand_rms_mm']:.1f} mm, {unplanned['peak_speed_ratio']:.2f}")
    return unplanned, planned


def _plan_decisions(run: dict) -> str:
    """The distinct failure-reaction statuses of a ``_circle`` run that name a plan (made,
    refused or dropped), for a failure message: which branch the run took."""
    return "\n".join(s for s in run["statuses"] if "plan" in s and "safety limits" not in s)


def _tiago_arm() -> tuple[str, str, np.ndarray]:
    """Tiago's arm (example-robot-data, the issue's <dynamics>), the rest of the mobile
    manipulator rigid, elbow bent, hand in front."""
    text = issue_arm("tiago_description/robots/tiago.urdf",
                     joints=[f"arm_{i}_joint" for i in range(1, 8)])
    return text, "hand_grasping_frame", np.array([0.2, 0.3, -1.0, 1.5, 0.0, 0.5, 0.0])


@pytest.mark.parametrize("robot, joint", [(_talos_left_arm, "arm_left_4_joint"),
                                          (_tiago_arm, "arm_3_joint")])
def test_an_unloaded_failed_joint_keeps_the_position_task_along_a_receding_plan(robot, joint):
    """Zero gravity, `task:=position`, the 8 s circle stamped, a motor failing half-way: Talos'
    elbow, Tiago's upper-arm roll. The instantaneous law alone (`failure_plan_budget` 0)
    keeps the hand until the failed joint's motion, seen one cycle at a time, runs the arm
    into a speed limit, then gives the task up (the premise: the hand lost). With a budget
    the kept position task is planned from the failure on (box DDP through the hybrid
    derivatives, 1 s ahead, re-planned from the measured state every 0.1 s, followed with
    its Riccati gains; the status says so): in MuJoCo the hand stays within the zero-g goal
    (5 mm RMS) and every joint within its speed limit."""
    unplanned, planned = _with_and_without_plans("position", joint, False, robot())
    decisions = _plan_decisions(planned)
    assert unplanned["hand_rms_mm"] > 10.0  # the premise
    assert any("the position task kept by a receding plan" in s for s in planned["statuses"]), \
        decisions
    assert planned["hand_rms_mm"] <= 5.0, decisions
    assert planned["peak_speed_ratio"] <= 1.0, decisions


def _pr2_left_arm() -> tuple[str, str, np.ndarray]:
    """The PR2's left arm (example-robot-data, the issue's <dynamics>), the rest of the robot
    rigid, elbow bent, hand in front (bench/failure_cases.py's start)."""
    joints = ["l_shoulder_pan_joint", "l_shoulder_lift_joint", "l_upper_arm_roll_joint",
              "l_elbow_flex_joint", "l_forearm_roll_joint", "l_wrist_flex_joint",
              "l_wrist_roll_joint"]
    text = issue_arm("pr2_description/urdf/pr2.urdf", joints=joints)
    return text, "l_gripper_tool_frame", np.array([0.3, 0.2, 0.3, -1.3, 0.0, -0.8, 0.0])


@pytest.mark.parametrize("robot, joint", [(_talos_left_arm, "arm_left_1_joint"),
                                          (_pr2_left_arm, "l_shoulder_lift_joint")])
def test_a_kept_tasks_plan_sees_the_hand_moving_to_its_horizon(monkeypatch, robot, joint):
    """Zero gravity, `task:=position`, the 8 s circle stamped, a shoulder failing half-way
    (Talos' shoulder yaw, the PR2's shoulder lift: free, they take the position rows of J_G
    toward rank loss as the hand goes round). The kept task's plan carries the setpoint's
    velocity over its whole 1 s horizon (``PlannedTask.path_lead``). With the swing's 0.3 s
    lead (the hand seen stopping 0.3 s ahead; the premise, as before 2026-12-06) the hand is
    lost beyond the zero-g position goal (bench/failure_cases.py's rows, traced: the PR2's
    re-plans steered the arm into that rank loss just past the lead, their predicted hand
    error growing to 13 mm and MuJoCo's with it; Talos' first plans refused, 6 and 16 mm
    off, the law alone drove its wrist pitch into a limit). With the whole horizon MuJoCo's
    hand stays within it (5 mm RMS) and every joint within its speed limit."""
    from underactuated_control.control.failure_reaction import SWING_LEAD, PlannedTask

    whole, short = _circle_as_is_and_patched(
        monkeypatch, lambda patch: patch.setattr(PlannedTask, "path_lead", SWING_LEAD),
        task="position", failing=joint, period=8.0, reaction="auto", gravity=False,
        robot=robot(), stamped=True, failure_plan_budget=600.0)
    print(f"\n[{joint}, zero g] position task: lead over the horizon {whole['hand_rms_mm']:.2f}"
          f" mm RMS, peak v/v_max {whole['peak_speed_ratio']:.2f}; {SWING_LEAD:g} s lead "
          f"{short['hand_rms_mm']:.1f} mm")
    assert short["hand_rms_mm"] > 5.0  # the premise
    assert any("the position task kept by a receding plan" in s for s in whole["statuses"])
    assert whole["hand_rms_mm"] <= 5.0
    assert whole["peak_speed_ratio"] <= 1.0


def test_the_carried_path_goes_on_along_a_circle_its_turn_measured_on_the_path():
    """``carried_path`` against the closed form of a circle in a tilted plane (radius 5 cm,
    8 s a turn, as the tests' path): carried 1 s ahead with the turn ``turn_rate`` measures
    between its velocities 0.1 s apart (a stream's newest two segments: 0.01 s), the setpoint
    stays on the circle, where its velocity
    carried straight ahead leaves it by 12 mm; along a line the turn is zero and the path
    straight; the turn is capped, and none without a velocity."""
    from underactuated_control.so3 import exp

    R = exp(np.array([0.3, 0.6, -0.15]))  # the circle's plane: R's first two columns
    centre, r, w, phase = np.array([0.4, -0.1, 0.6]), 0.05, 2 * np.pi / 8.0, 0.3
    t = np.linspace(0.0, 1.0, 101)

    def on_circle(time):
        angle = phase + w * np.asarray(time, float)
        return centre + r * (np.cos(angle)[..., None] * R[:, 0] + np.sin(angle)[..., None]
                             * R[:, 1])

    def velocity(time):
        angle = phase + w * time
        return r * w * (-np.sin(angle) * R[:, 0] + np.cos(angle) * R[:, 1])

    p, v = on_circle(0.0), velocity(0.0)
    turn = turn_rate(velocity(-0.1), v, 0.1, np.inf)
    np.testing.assert_allclose(turn, w * R[:, 2], atol=1e-14)  # the plane's normal, 8 s a turn
    np.testing.assert_allclose(carried_path(p, v, turn, t), on_circle(t), atol=1e-15)
    straight = p + t[:, None] * v
    assert np.linalg.norm(straight[-1] - on_circle(1.0)) > 0.011
    np.testing.assert_allclose(carried_path(p, v, None, t), straight, atol=1e-15)
    np.testing.assert_allclose(carried_path(p, v, turn_rate(0.5 * v, 2.0 * v, 0.1, np.inf), t),
                               straight, atol=1e-15)
    assert np.linalg.norm(turn_rate(velocity(-0.1), v, 0.1, 0.5)) == pytest.approx(0.5)
    assert turn_rate(np.zeros(3), v, 0.1, np.inf) is None


def _tiago_pro_left_arm() -> tuple[str, str, np.ndarray]:
    """Tiago Pro's left arm (example-robot-data, the issue's <dynamics>), the rest rigid."""
    text = issue_arm("tiago_pro_description/robots/tiago_pro.urdf",
                     joints=[f"arm_left_{i}_joint" for i in range(1, 8)])
    return text, "arm_left_tool_link", np.array([0.5, -0.6, 0.0, -1.2, 0.0, 0.5, 0.0])


@pytest.mark.parametrize("robot, joint, task", [
    (_tiago_arm, "arm_1_joint", "pose"),
    (_tiago_pro_left_arm, "arm_left_2_joint", "position")])
def test_a_kept_tasks_replans_see_the_path_turn(monkeypatch, robot, joint, task):
    """Zero gravity, the 8 s circle stamped, a free shoulder failing half-way (Tiago's
    shoulder yaw, pose task; Tiago Pro's shoulder pitch, position task: both take the
    position rows of J_G toward rank loss as the hand goes round). A kept task's re-plans
    carry the setpoint along the arc on which the stream's path turns (``carried_path``,
    ``PoseSetpointFollower.stream_velocities``). Carried straight instead
    (``PlannedTask.path_turns`` False, as a loaded swing's re-plans still are; the
    premise, its plan followed whatever the hand, as it was then), the plans aim the hand
    off the circle, by up to 12 mm 1 s ahead, and MuJoCo's
    hand misses the zero-g goal of the task; along the arc it meets it, every joint within
    the issue's bound of 1.2x its speed limit (Tiago's arm reaches 0.99 of a limit, 0.992-0.995
    from starts 1e-6 rad apart)."""
    from underactuated_control.control.failure_reaction import PlannedTask

    def as_before(patch: pytest.MonkeyPatch) -> None:  # straight, the plan followed on
        patch.setattr(PlannedTask, "path_turns", False)
        patch.setattr(PlannedTask, "hand_lost", np.inf)  # (it keeps Tiago's pose: 3.3 mm)

    goal = 10.0 if task == "pose" else 5.0
    turning, straight = _circle_as_is_and_patched(
        monkeypatch, as_before,
        task=task, failing=joint, period=8.0, reaction="auto", gravity=False,
        robot=robot(), stamped=True, failure_plan_budget=600.0)
    print(f"\n[{joint}, zero g] {task} task: re-plans along the arc "
          f"{turning['hand_rms_mm']:.2f} mm RMS, peak v/v_max "
          f"{turning['peak_speed_ratio']:.2f}; straight {straight['hand_rms_mm']:.1f} mm")
    assert straight["hand_rms_mm"] > goal  # the premise
    assert any(f"the {task} task kept by a receding plan" in s for s in turning["statuses"])
    assert turning["hand_rms_mm"] <= goal
    assert turning["peak_speed_ratio"] <= 1.2


def test_a_kept_tasks_plan_is_dropped_when_it_leaves_the_hand(monkeypatch):
    """Zero gravity, `task:=position`, the 8 s circle stamped, Tiago's shoulder yaw
    (`arm_1_joint`, its lower limit 0 rad) failing half-way. The kept task's plans let the
    free shoulder turn toward that limit, where the rest of the circle is out of the arm's
    reach (``test_tiagos_circle_is_out_of_reach_with_its_shoulder_yaw_near_its_limit``), and
    the hand leaves the path. Before, the plan was followed on to the end, the status saying
    the task kept, MuJoCo's hand 39 mm RMS and up to 62 mm off (the premise, patched back):
    now the plan is judged as the law's run-time check judges the law, and dropped once the
    hand is 10 mm off its setpoint with a joint past 0.8 of its speed limit; the status says
    so (its reason: when, and why). No cycle that follows the plan has MuJoCo's hand more
    than 12 mm off the path (the setpoint within 2 mm of it, the follower's lag) with a joint
    past 0.8 of its speed limit, where followed on many do. (The hand is lost either way on
    this row: the run-time check then gives the task up.)"""
    from underactuated_control.control.failure_reaction import PlannedTask

    dropped, followed = _circle_as_is_and_patched(
        monkeypatch, lambda patch: patch.setattr(PlannedTask, "hand_lost", np.inf),
        task="position", failing="arm_1_joint", period=8.0, reaction="auto", gravity=False,
        robot=_tiago_arm(), stamped=True, failure_plan_budget=600.0)

    def lost_while_planned(run: dict) -> int:  # cycles following the plan, the hand lost
        k = run["failed_at"]
        planned = np.array(["kept by a receding plan" in s and "then the law alone" not in s
                            for s in run["status_log"][k:]])
        lost = (run["hand_errors_m"][k:] > 0.012) & (run["speed_ratios"][k:] > 0.8)
        return int(np.count_nonzero(planned & lost))

    print(f"\n[arm_1_joint, zero g] position task: the plan dropped {dropped['hand_rms_mm']:.1f}"
          f" mm RMS, followed on {followed['hand_rms_mm']:.1f} mm; cycles following the plan "
          f"with the hand lost {lost_while_planned(dropped)} (followed on: "
          f"{lost_while_planned(followed)})")
    assert lost_while_planned(followed) > 10  # the premise (36 here)
    assert lost_while_planned(dropped) == 0
    said = [s for s in dropped["statuses"] if "then the law alone" in s]
    assert said and "mm off its setpoint, a joint at" in said[0], said


def test_tiagos_circle_is_out_of_reach_with_its_shoulder_yaw_near_its_limit():
    """The cause of the test above, on Pinocchio's kinematics (not the package's): Tiago's
    arm from the circle's start, the circle's second half (where its shoulder yaw fails),
    the shoulder yaw fixed and the six other joints within their limits (damped least
    squares from 30 random starts per point). At 0.25 rad, near where it fails, every point
    is reached; within 0.05 rad of its lower limit the last quarter of the circle is out of
    reach by more than 10 mm."""
    import pinocchio as pin

    from underactuated_control.scenarios.harness import circle_path

    urdf, frame, q0 = _tiago_arm()
    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    hand = model.getFrameId(frame)
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    assert model.names[1] == "arm_1_joint" and lo[0] == 0.0  # the failed joint, first

    def position(q: np.ndarray) -> np.ndarray:
        pin.framesForwardKinematics(model, data, q)
        return data.oMf[hand].translation.copy()

    path = circle_path(position(q0), 0.05, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], 8.0)
    rng = np.random.default_rng(0)

    def miss(yaw: float, target: np.ndarray) -> float:  # m: the nearest reached
        best = np.inf
        for _ in range(30):
            q = rng.uniform(lo, hi)
            q[0] = yaw
            for _ in range(300):
                e = target - position(q)
                if np.linalg.norm(e) < 1e-7:
                    break
                J = pin.computeFrameJacobian(model, data, q, hand,
                                             pin.LOCAL_WORLD_ALIGNED)[:3, 1:]
                q[1:] = np.clip(q[1:] + J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(3), e),
                                lo[1:], hi[1:])
            best = min(best, float(np.linalg.norm(e)))
        return best

    times = np.linspace(4.0, 8.0, 9)
    near_failure = [miss(0.25, path(t)) for t in times]
    near_limit = [miss(0.05, path(t)) for t in times[-3:]]
    print(f"\n  missed at 0.25 rad {np.round(1e3 * np.array(near_failure), 2)} mm, "
          f"at 0.05 rad (last quarter) {np.round(1e3 * np.array(near_limit), 1)} mm")
    assert max(near_failure) < 1e-5
    assert min(near_limit) > 0.010


def test_romeos_elbow_alone_changes_its_wrists_reach():
    """The cause of Romeo's zero-g elbow row (doc/failure_analysis.md, "Romeo's elbow"), on
    Pinocchio's kinematics (not the package's): the hand frame `l_wrist` is the wrist's centre,
    so the three wrist joints do not move its position, and the axes of the three joints
    before the elbow (`LElbowYaw`) meet at the shoulder, so they move it on a sphere about the
    shoulder (the position Jacobian of those three has rank 2), at 20 random configurations
    within the limits. With the elbow failed, only its motion, which in zero gravity only the
    other joints' reaction gives, changes the wrist's distance from the shoulder (rank 3 with
    its column)."""
    import pinocchio as pin

    names = ["LShoulderPitch", "LShoulderYaw", "LElbowRoll", "LElbowYaw", "LWristRoll",
             "LWristYaw", "LWristPitch"]
    model = pin.buildModelFromXML(issue_arm("romeo_description/urdf/romeo.urdf", joints=names))
    assert list(model.names[1:]) == names
    data = model.createData()
    wrist = model.getFrameId("l_wrist")
    rng = np.random.default_rng(3)
    shoulder_ranks, with_elbow, wrist_columns = [], [], []
    for _ in range(20):
        q = rng.uniform(model.lowerPositionLimit, model.upperPositionLimit)
        J = pin.computeFrameJacobian(model, data, q, wrist, pin.LOCAL_WORLD_ALIGNED)[:3]
        sigma = np.linalg.svd(J[:, :3], compute_uv=False)
        shoulder_ranks.append(sigma[2] / sigma[0])
        with_elbow.append(np.linalg.svd(J[:, :4], compute_uv=False)[2])
        wrist_columns.append(np.abs(J[:, 4:]).max())
    print(f"\n  σ3/σ1 of the shoulder's three columns ≤ {max(shoulder_ranks):.1e}; σ3 with the "
          f"elbow's {min(with_elbow):.3f}..{max(with_elbow):.3f} m/rad; wrist columns ≤ "
          f"{max(wrist_columns):.1e} m/rad")
    assert max(wrist_columns) < 1e-12
    assert max(shoulder_ranks) < 1e-12
    assert min(with_elbow) > 1e-3


def test_an_unloaded_failed_joint_keeps_the_pose_task_along_a_receding_plan():
    """Zero gravity, `task:=pose`, the 8 s circle stamped, Tiago's upper-arm roll failing
    half-way: the reaction keeps the pose (σ_min of the pose rows 0.024, above the run-time
    threshold), and the law alone (`failure_plan_budget` 0) loses the hand within a second
    (the orientation, then the position given up at run time: the premise). With a budget the
    kept pose is planned (the hand's rotation in the plan's cost, 1 mrad weighed as 0.1 mm
    of the hand off its path; the status says so): in MuJoCo the hand stays within the zero-g
    pose goal (10 mm RMS), the hand's turn within 3° RMS of the circle's constant rotation
    (given up, unplanned: ~30°), every joint within its speed limit."""
    unplanned, planned = _with_and_without_plans("pose", "arm_3_joint", False, _tiago_arm())
    print(f"  the hand turned {planned['turn_rms_deg']:.2f}° RMS planned, "
          f"{unplanned['turn_rms_deg']:.1f}° unplanned")
    assert unplanned["hand_rms_mm"] > 10.0  # the premise
    assert any("the pose task kept by a receding plan" in s for s in planned["statuses"])
    assert planned["hand_rms_mm"] <= 10.0
    assert planned["turn_rms_deg"] <= 3.0
    assert planned["peak_speed_ratio"] <= 1.0


@pytest.mark.xfail(strict=False, reason=(
    "not robust (doc/failure_analysis.md, 'Not robust yet'): from starts 1e-6 rad apart the "
    "planned swing is refused (3 of 8) or followed and the task then given up, the roll and "
    "wrist swinging to 1.34-3.35 of a speed limit (8 of 8); 3.34 in a CI run"))
def test_a_loaded_forearm_roll_swings_along_a_plan_within_the_speed_limits():
    """Talos' forearm roll (arm_left_5_joint, 0.2 N m about it, 4x its dry friction) failing
    under gravity half-way round the 8 s circle, `task:=pose`, the samples stamped: the
    orientation is given up and the roll let swing to where it hangs. Unplanned
    (`failure_plan_budget` 0) the task drives the light wrist past 1.2x its speed limit while
    the hand is kept (then the run-time check brakes and the hand is lost). With a budget the
    swing is planned (box DDP through the hybrid derivatives, re-planned from the measured
    state every 0.1 s, its torques followed with the Riccati gains; the status says so) and
    no joint passes 1.2x its URDF speed limit, in MuJoCo. (The hand: kept from the failure
    states of bench/failure_cases.py's table, 2.4 mm RMS; lost from this one as without the
    plan, doc/failure_analysis.md.)"""
    unplanned, planned = _with_and_without_plans("pose", "arm_left_5_joint", True,
                                                 _talos_left_arm())
    decisions = _plan_decisions(planned)
    assert unplanned["peak_speed_ratio"] > 1.2  # the premise
    assert any("the swing planned with the hand kept" in s for s in planned["statuses"]), \
        decisions
    assert planned["peak_speed_ratio"] <= 1.2, decisions


def _plan_at_rest(kind, inline: bool = True):
    """A plan of ``kind`` (PlannedSwing, PlannedTask) for the bundled arm7 at rest in zero
    gravity, joint4 failed, the hand held where it is: (plan, q, v, hand); ``inline``: its
    re-plans solved in the cycle, else in its background thread."""
    from helpers import ROOT

    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text(),
                                 gravity=(0.0, 0.0, 0.0)).with_passive(["joint4"])
    q, v = np.array([0.0, 0.5, 0.0, -1.0, 0.0, 0.8, 0.0]), np.zeros(7)
    ws = JacobianWorkspace(model)
    ws.set_configuration(q)
    hand = ws.frame_placement("tool")[0].copy()
    plan = kind(model, "tool", inline=inline)
    used, note = plan.plan(q, v, hand, np.zeros(3))
    assert used, note
    return plan, q, v, hand


def test_a_plan_that_cannot_be_posed_is_named_by_its_kind(monkeypatch):
    """A plan whose problem cannot be made or solved (the solver raises: the xarm7's hand roll,
    whose first guess diverged at the 2.5 ms step while its damping was explicit, before
    2026-12-07) is not used, and the note names the plan's
    kind: a kept task's says "no task plan", a swing's "no swing plan" (before 2026-12-06 both
    said "swing")."""
    from underactuated_control.control import failure_reaction
    from underactuated_control.control.failure_reaction import PlannedSwing, PlannedTask

    def diverging(*args, **kwargs):
        raise RuntimeError("the initial controls drive the state to non-finite values")

    monkeypatch.setattr(failure_reaction, "solve_box_ddp", diverging)
    model = RobotModel.from_urdf(XARM7, gravity=(0.0, 0.0, 0.0)).with_passive(["joint7"])
    ws = JacobianWorkspace(model)
    ws.set_configuration(Q0)
    hand = ws.frame_placement(FRAME)[0].copy()
    for kind, word in ((PlannedTask, "task"), (PlannedSwing, "swing")):
        used, note = kind(model, FRAME).plan(Q0, np.zeros(7), hand, np.zeros(3))
        assert not used
        assert note == f"no {word} plan (the initial controls drive the state to non-finite " \
                       "values)"


def test_the_kept_tasks_plan_is_dropped_where_the_arm_leaves_it():
    """The kept position task's plan (PlannedTask) is followed while every joint's velocity
    stays within TASK_PLAN_DEVIATION of its speed limit of the plan's, and dropped (None,
    not followed again) beyond: the arm has left what the plan predicted (on Tiago Pro's
    wrist roll in zero g it went from the plan's 0.15 to 2.04 of a speed limit in 24 ms)."""
    from underactuated_control.control.failure_reaction import TASK_PLAN_DEVIATION, PlannedTask

    task, q, v, hand = _plan_at_rest(PlannedTask)
    v_max = np.asarray(task.model.velocity_limit, float)[1]
    near, far = v.copy(), v.copy()
    near[1] = 0.8 * TASK_PLAN_DEVIATION * v_max  # the plan stays near rest
    far[1] = 1.2 * TASK_PLAN_DEVIATION * v_max
    assert task.command(q, near, 0.0, hand, np.zeros(3)) is not None
    assert task.command(q, far, 0.001, hand, np.zeros(3)) is None
    assert task.dropped.startswith("joint2 ")  # said, and which joint
    assert task.dropped.endswith("of its speed limit off the plan's velocity")
    assert task.command(q, v, 0.002, hand, np.zeros(3)) is None  # not followed again


@pytest.mark.parametrize("kind", ["PlannedTask", "PlannedSwing"])
def test_a_re_plan_past_the_speed_limits_drops_the_plan(monkeypatch, kind):
    """A re-plan whose solution passes a speed limit (judged as a first plan is: PLAN_SPEED)
    is not followed, and the plan is dropped from its time: the task goes on unplanned (None).
    Before 2026-12-05 it was followed: on Tiago Pro's wrist in zero g the re-plan at 0.1 s,
    30 iterations from the measured state, said 35x the speed limits, and its first commands
    threw the failed wrist to 0.77 of its limit within 2 ms (2.78 mm RMS; dropped now, 2.12).
    A loaded swing's re-plans too since 2026-12-07 (Tiago's wrist, loaded pose: 120 -> 7.6 mm,
    peak 1.55 -> 1.10, doc/failure_analysis.md)."""
    from underactuated_control.control import failure_reaction
    from underactuated_control.control.failure_reaction import (
        PLAN_SPEED,
        SWING_REPLAN,
        trajectory_excess,
    )

    task, q, v, hand = _plan_at_rest(getattr(failure_reaction, kind))
    solve = failure_reaction.solve_box_ddp
    v_max = np.asarray(task.model.velocity_limit, float)
    re_plans = []

    def too_fast(*args, **kwargs):
        sol = solve(*args, **kwargs)
        sol.xs[10:, task.model.nq + 1] = 2.0 * v_max[1]  # joint2 at twice its limit
        re_plans.append(trajectory_excess(task.model, sol.xs)[0])
        return sol

    monkeypatch.setattr(failure_reaction, "solve_box_ddp", too_fast)
    steps = round(SWING_REPLAN / 1e-3)
    before = [task.command(q, v, 1e-3 * k, hand, np.zeros(3)) for k in range(steps)]
    assert all(u is not None for u in before)
    assert task.command(q, v, SWING_REPLAN, hand, np.zeros(3)) is None
    assert re_plans and re_plans[0] > PLAN_SPEED  # the premise: that re-plan is too fast
    assert task.dropped.startswith(f"a re-plan past the limits: peak {re_plans[0]:.2f}")
    assert task.command(q, v, SWING_REPLAN + 1e-3, hand, np.zeros(3)) is None  # not again


def test_a_failed_re_plan_waits_as_long_as_a_kept_one(monkeypatch):
    """A re-plan of the planned swing that fails (the solver raises) leaves the last solution
    followed, and the next one is tried SWING_REPLAN later, not every cycle: over 0.35 s of
    1 ms cycles, solves are tried at 0.1, 0.2 and 0.3 s only, and every command is the
    followed plan's (finite, within the effort limits)."""
    from underactuated_control.control import failure_reaction
    from underactuated_control.control.failure_reaction import SWING_REPLAN, PlannedSwing

    swing, q, v, hand = _plan_at_rest(PlannedSwing)
    tried = []

    def failing(*args, **kwargs):
        tried.append(kwargs.get("max_iterations"))
        raise RuntimeError("the solve diverged")

    monkeypatch.setattr(failure_reaction, "solve_box_ddp", failing)
    first = swing.solution
    commands = [swing.command(q, v, 1e-3 * k, hand, np.zeros(3)) for k in range(351)]
    assert len(tried) == 3 == int(0.35 / SWING_REPLAN)
    assert swing.solution is first
    u = np.array(commands)
    assert np.all(np.isfinite(u))
    assert np.all(u <= swing.problem.step.upper + 1e-12)
    assert np.all(u >= swing.problem.step.lower - 1e-12)


def test_a_re_plan_in_the_background_leaves_the_cycle_running(monkeypatch):
    """With `failure_replan_inline` false a re-plan of the followed plan is solved in a
    background thread. The cycle that requests it returns the last solution's
    command without waiting (the solve here waits for the test's signal: a cycle that waited
    for it would not return), and so do the cycles while it runs (no second request); once
    done, the next cycle follows it from the state and time it was requested at, and it is the
    solution the inline re-plan gives from that state, to the bit."""
    import threading

    from underactuated_control.control import failure_reaction
    from underactuated_control.control.failure_reaction import SWING_REPLAN, PlannedSwing

    real_solve, entered, release = failure_reaction.solve_box_ddp, threading.Event(), \
        threading.Event()
    calls = []

    def gated(*args, **kwargs):
        calls.append(threading.current_thread().name)
        entered.set()
        assert release.wait(timeout=60.0), "the test never released the solve"
        return real_solve(*args, **kwargs)

    inline, q, v, hand = _plan_at_rest(PlannedSwing)
    background, *_ = _plan_at_rest(PlannedSwing, inline=False)
    background.lead = 0.0  # solved from the request's state, as inline (the lead: below)
    n = round(SWING_REPLAN / 1e-3)
    for k in range(n + 1):  # the inline plan re-plans in the cycle at SWING_REPLAN
        inline.command(q, v, 1e-3 * k, hand, np.zeros(3))
    monkeypatch.setattr(failure_reaction, "solve_box_ddp", gated)
    first = background.solution
    for k in range(n + 50):  # the request at SWING_REPLAN, then 49 cycles while it runs
        u = background.command(q, v, 1e-3 * k, hand, np.zeros(3))
        assert u is not None and np.all(np.isfinite(u))
    assert entered.wait(timeout=60.0)
    assert calls == ["failure_planner"]  # one solve, in the thread
    assert background.solution is first  # still followed while the solve waits
    release.set()
    background._replans._thread.join(timeout=60.0)
    background.command(q, v, 1e-3 * (n + 50), hand, np.zeros(3))
    assert background.solution is not first
    assert background._solved_at == pytest.approx(SWING_REPLAN)
    np.testing.assert_array_equal(background.solution.us, inline.solution.us)
    np.testing.assert_array_equal(background.solution.K, inline.solution.K)


def test_a_background_re_plan_starts_where_the_arm_will_be_when_it_is_done():
    """A background re-plan is solved from the state the followed plan predicts ``lead`` s
    after the request (the plan rolled out from the measured state with its gains) and is
    followed from that time on, not before; one that comes late, with the arm already off its
    velocity there by TASK_PLAN_DEVIATION of a speed limit, is discarded (the last plan goes
    on), and on it, taken."""
    from underactuated_control.control.failure_reaction import (
        SWING_DT,
        SWING_REPLAN,
        TASK_PLAN_DEVIATION,
        PlannedSwing,
    )

    n = round(SWING_REPLAN / 1e-3)

    def requested(lead: float):
        swing, q, v, hand = _plan_at_rest(PlannedSwing, inline=False)
        swing.lead = lead
        for k in range(n + 1):  # the request at SWING_REPLAN
            swing.command(q, v, 1e-3 * k, hand, np.zeros(3))
        swing._replans._thread.join(timeout=120.0)
        return swing, q, v, hand

    swing, q, v, hand = requested(SWING_REPLAN)
    first = swing.solution
    swing.command(q, v, 1e-3 * (n + 50), hand, np.zeros(3))
    assert swing.solution is first  # done, but its start (0.2 s) not reached
    swing.command(q, v, 2 * SWING_REPLAN, hand, np.zeros(3))
    assert swing.solution is not first
    assert swing._solved_at == pytest.approx(2 * SWING_REPLAN)
    ahead, shift = round(SWING_REPLAN / SWING_DT), round(SWING_REPLAN / SWING_DT)
    index = np.arange(ahead) + shift  # the first plan from the request on, with its gains
    step = swing.problem.step
    xs, us = np.empty((ahead + 1, first.xs.shape[1])), np.empty((ahead, first.us.shape[1]))
    assert step.rollout(np.concatenate([q, v]), first.us[index], first.xs[np.append(
        index, index[-1] + 1)], first.K[index], np.zeros_like(us), 0.0, step.lower,
        step.upper, xs, us)
    np.testing.assert_array_equal(swing.solution.xs[0], xs[-1])

    for on_it in (False, True):  # done at once, taken at 0.35 s: late by 0.25 s
        swing, q, v, hand = requested(0.0)
        first, done = swing.solution, swing._replans._result[0]
        _, x_then = PlannedSwing._reference(done, SWING_REPLAN, 0.35)
        v_then = x_then[swing.model.nq:].copy()
        if not on_it:
            v_max = np.asarray(swing.model.velocity_limit, float)
            v_then[1] += 1.2 * TASK_PLAN_DEVIATION * v_max[1]
        assert swing.command(q, v_then, 0.35, hand, np.zeros(3)) is not None
        assert swing.solution is (done if on_it else first)  # taken, or discarded


def _last_knot_held(step, x: np.ndarray, knots: int, sol) -> tuple[np.ndarray, np.ndarray]:
    """A re-plan's first guess past the followed solution's horizon as it was until
    2026-12-07 (late; ``PlannedSwing._past_horizon``'s premise): its last knot's torque and gain
    held, rolled out from ``x`` (NaN states where the rollout diverges)."""
    last = np.full(knots, len(sol.us) - 1)
    xs = np.full((knots + 1, x.size), np.nan)
    us = np.zeros((knots, sol.us.shape[1]))
    step.rollout(x, sol.us[last], sol.xs[np.append(last, len(sol.us))], sol.K[last],
                 np.zeros_like(us), 0.0, step.lower, step.upper, xs, us)
    return us, xs


def test_a_light_wrists_failure_is_planned_with_its_friction_resolved(monkeypatch):
    """Zero gravity, `task:=pose`, the 8 s circle stamped, the Unitree G1's wrist yaw (its
    lightest joint, never used to develop the reaction) failing half-way: the orientation is
    given up and the position task kept by a receding plan. With the URDF's Coulomb width in
    the plan's model the semi-implicit 2.5 ms step cannot resolve the light wrist's friction
    (its planned velocity chatters at every knot): a re-plan swings the wrist roll into its
    limit on it and the task is given up (the premise, the plan's friction and its re-plans'
    straight path as before, its plan followed whatever the hand: the hand lost; with re-plans
    along the path's turn the URDF's width kept the hand too, 0.8 mm, and dropping a plan that
    loses the hand 2.8 mm, the step's damping made implicit 0.9 mm, the first guess braked
    4.9 mm, and a re-plan's guess braked past the followed horizon 0.9 mm, so this row no
    longer tells them apart: the premise is the plans' model before all five). The kept
    task's plans' friction widened until the step resolves it (``resolved_passive_forces``):
    MuJoCo's hand within the zero-g pose goal (10 mm RMS), every joint within half its speed
    limit."""
    import functools

    from underactuated_control.control import failure_reaction
    from underactuated_control.control.failure_reaction import PlannedTask
    from underactuated_control.optimal_control import problems
    from underactuated_control.passive_forces import PassiveForceModel

    def as_before(patch: pytest.MonkeyPatch) -> None:
        braked_first_guess = failure_reaction.swing_problem

        def held_first_guess(*args, **kwargs) -> problems.Problem:  # the start's torques
            p = braked_first_guess(*args, **kwargs)
            p.us_init[:], p.first_guess = p.step.holding_torques(p.x0[:p.step.nv]), None
            return p

        patch.setattr(failure_reaction, "swing_problem", held_first_guess)
        patch.setattr(problems, "resolved_passive_forces",
                      lambda model, q, dt, forces=None: PassiveForceModel(model))
        patch.setattr(problems, "HybridStep",
                      functools.partial(problems.HybridStep, implicit_damping=False))
        patch.setattr(PlannedTask, "path_turns", False)
        patch.setattr(PlannedTask, "hand_lost", np.inf)  # (it rescued the row since: 2.8 mm)
        patch.setattr(PlannedTask, "_past_horizon", staticmethod(_last_knot_held))

    robot = g1_left_arm()
    resolved, chattering = _circle_as_is_and_patched(
        monkeypatch, as_before,
        task="pose", failing="left_wrist_yaw_joint", period=8.0, reaction="auto",
        gravity=False, robot=robot, stamped=True, failure_plan_budget=600.0)
    print(f"\n[G1 wrist yaw, zero g] pose task: friction resolved {resolved['hand_rms_mm']:.2f}"
          f" mm RMS, peak v/v_max {resolved['peak_speed_ratio']:.2f}; URDF width "
          f"{chattering['hand_rms_mm']:.1f} mm, {chattering['peak_speed_ratio']:.2f}")
    assert chattering["hand_rms_mm"] > 10.0  # the premise
    assert any("the position task kept by a receding plan" in s for s in resolved["statuses"])
    assert resolved["hand_rms_mm"] <= 10.0
    assert resolved["peak_speed_ratio"] <= 0.5


def test_a_re_plans_guess_brakes_the_active_joints_past_the_followed_horizon(monkeypatch):
    """Gravity, `task:=pose`, the 8 s circle stamped, the Unitree G1's wrist pitch (loaded by
    the hand, never used to develop the reaction) failing half-way: the orientation is given
    up and the position task kept by a receding plan. Each re-plan's first guess is the
    followed solution rolled out from the measured state with its gains and, past that
    solution's horizon (the last SWING_REPLAN of the new one), the active joints braked
    (``PlannedSwing._past_horizon``). With the last knot's torque and gain held there instead
    (the premise: the code until 2026-12-07, late) a guess ran the active wrist yaw to 5 of
    its speed limit, the re-plan from it came out past the limits, the plan was dropped and the
    law alone lost the hand (14.0 mm RMS here, 13.3 in bench/failure_cases.py's row, both after
    0.5 s at rest before the path; after 0.3 s the law alone kept it, 1.0 mm). Braked: the plan
    is followed to the end, MuJoCo's hand within the gravity goal (10 mm RMS), every joint
    within half its speed limit."""
    from underactuated_control.control.failure_reaction import PlannedSwing

    def as_before(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(PlannedSwing, "_past_horizon", staticmethod(_last_knot_held))

    braked, held = _circle_as_is_and_patched(
        monkeypatch, as_before,
        task="pose", failing="left_wrist_pitch_joint", period=8.0, reaction="auto",
        gravity=True, robot=g1_left_arm(), stamped=True, settle=0.5, failure_plan_budget=600.0)
    print(f"\n[G1 wrist pitch, gravity] pose task: braked past the horizon "
          f"{braked['hand_rms_mm']:.2f} mm RMS, peak v/v_max {braked['peak_speed_ratio']:.2f}; "
          f"last knot held {held['hand_rms_mm']:.1f} mm, {held['peak_speed_ratio']:.2f}")
    assert any("a re-plan past the limits" in s for s in held["statuses"])  # the premise
    assert held["hand_rms_mm"] > 10.0
    assert any("the position task kept by a receding plan" in s for s in braked["statuses"])
    assert not any("then the law alone" in s for s in braked["statuses"])
    assert braked["hand_rms_mm"] <= 10.0
    assert braked["peak_speed_ratio"] <= 0.5


def test_position_rows_near_rank_loss_are_kept_only_by_a_plan():
    """Zero gravity, `task:=pose`, the 8 s circle stamped, the Unitree G1's elbow failing
    half-way: the pose rows lose rank and the position rows are near it (σ_min 0.009 m/rad,
    under the 0.01 that keeps a task unplanned, over the run-time check's 0.0025). Unplanned
    (`failure_plan_budget` 0) the arm is braked to its safe posture and the hand left behind
    (the premise: before, every such failure was held so); with a budget the position task is
    kept along its receding plan and MuJoCo's hand stays within the zero-g pose goal (10 mm
    RMS), every joint within half its speed limit."""
    robot = g1_left_arm()
    held, planned = (_circle("pose", "left_elbow_joint", 8.0, "auto", False, robot=robot,
                             stamped=True, failure_plan_budget=budget) for budget in (0.0, 600.0))
    print(f"\n[G1 elbow, zero g] pose task: planned {planned['hand_rms_mm']:.2f} mm RMS, peak "
          f"v/v_max {planned['peak_speed_ratio']:.2f}; unplanned {held['hand_rms_mm']:.1f} mm "
          f"({held['status'][:90]}...)")
    assert "near rank loss" in held["status"] and "not planned: hold" in held["status"]
    assert held["hand_rms_mm"] > 10.0  # the premise
    assert any("near rank loss" in s and "the position task kept by a receding plan" in s
               for s in planned["statuses"])
    assert planned["hand_rms_mm"] <= 10.0
    assert planned["peak_speed_ratio"] <= 0.5
