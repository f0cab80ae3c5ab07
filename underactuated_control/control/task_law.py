"""Mode ``task``: end-effector tracking through J_G (paper §6.2, §7) with ``EndEffectorTracker``.

The goal is a pose of the task frame (``~/pose_reference``; the measured pose until one
arrives). The tracked setpoint moves toward it within ``task_max_speed``/``_acceleration``
(and their angular counterparts), so a far or jumping goal is approached along a bounded
profile. Joint position and velocity limits are the command's safety layer's
(``limits.SafetyLayer``, every mode); goals beyond the reach are refused (``ReachCheck``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec
from ..so3 import exp
from .failure_reaction import (
    ESCALATE_ERROR,
    PLAN_BUDGET,
    REACTIONS,
    RUNAWAY_SPEED,
    Decision,
    PlannedSwing,
    PlannedTask,
    SafePosture,
    arrest_plan,
    at_least,
    decide,
    escalate,
    losing_hand,
    newly_passive,
    planned_motion,
    settle_failed,
    stabilise_passive,
    swing_peak,
)
from .law import ControlLaw, LawOutput
from .limits import PoseSetpointFollower, ReachCheck, SafetyLayer
from .task_space import (
    ORIENTATION_TASKS,
    POSITION_TASKS,
    TASKS,
    WEIGHT_SCALES,
    EndEffectorTracker,
    TaskReference,
    TrackingResult,
)

__all__ = ["TaskLaw"]

_GAINS = {  # parameter -> EndEffectorTracker argument (gains, posture, damped solve)
    "task_kp_position": "kp_position", "task_kd_position": "kd_position",
    "task_kp_orientation": "kp_orientation", "task_kd_orientation": "kd_orientation",
    "passive_weight": "passive_weight", "passive_kp": "passive_kp", "passive_kd": "passive_kd",
    "task_posture_kp": "posture_kp", "task_singular_threshold": "singular_threshold",
    "task_max_damping": "max_damping",
}
_MAX_STEP = 0.1  # s: a longer gap between states (a stop) restarts the setpoint's motion
_LEAST_SPEED_SCALE = 0.02  # the slowed setpoint keeps this share of its speed (never stuck)
_LAG = 1e-3  # m: the setpoint this far from its goal is held back (for the status)


def _length(x: np.ndarray) -> float:
    """|x| of a 3-vector (0.17 µs; np.linalg.norm 2 µs, sqrt(x @ x) 0.9 µs, every cycle)."""
    return math.hypot(x[0], x[1], x[2])


def _check_passive_dofs(names: list[str], model: RobotModel | None) -> None:
    if model is None:
        return
    dofs = [model.dof_names[i] for i in model.passive_dofs]
    unknown = [n for n in names if n and n not in dofs]
    if unknown:
        raise ValueError(f"{unknown} are not passive DOF of the model (passive DOF: {dofs})")


class TaskLaw(ControlLaw):
    mode = "task"
    reference_kind = "pose"
    parameters = (
        ParameterSpec("task", "pose", "task-mode task", choices=TASKS),
        ParameterSpec("task_kp_position", 100.0, "task stiffness, position", unit="1/s^2",
                      low=0.0, high=1e6),
        ParameterSpec("task_kd_position", 20.0, "task damping, position", unit="1/s", low=0.0,
                      high=1e4),
        ParameterSpec("task_kp_orientation", 100.0, "task stiffness, orientation",
                      unit="1/s^2", low=0.0, high=1e6),
        ParameterSpec("task_kd_orientation", 20.0, "task damping, orientation", unit="1/s",
                      low=0.0, high=1e4),
        ParameterSpec("task_singular_threshold", 1e-2, "smallest singular value of the task "
                      "rows of J_G (S J_G, 6.10) below which the solve is damped; in the rows' "
                      "units (m/rad, rad/rad): about 2 % of the robot's largest value (a snake "
                      "of free pins: 1e-3)", unit="m/rad", low=1e-6, high=10.0),
        ParameterSpec("task_max_damping", 5e-2, "damping λ of that solve at σ_min = 0, "
                      "λ² = λ_max² (1 − (σ_min/ε)²) below the threshold ε (5 ε by default)",
                      unit="m/rad", low=0.0, high=50.0),
        ParameterSpec("passive_weight", 0.0, "weight of the rows keeping passive joints still "
                      "(task mode, paper 7.1); relative (passive_weight_scale): 1 gives them "
                      "their full effect whatever the scale of J_D, 0 turns them off",
                      unit="1", low=0.0, high=1e6),
        ParameterSpec("passive_weight_scale", "relative", "what passive_weight is measured "
                      "against: relative (the rows' damping in units of their own largest "
                      "singular value; stacked: the rows scaled to the task rows) or absolute "
                      "(the rows sqrt(w) J_D against a constant damping 0.1, the scale before "
                      "2026-11-28: a heavy bus's rows then act at a fraction of a percent)",
                      choices=WEIGHT_SCALES),
        ParameterSpec("passive_kp", 0.0, "passive-joint stiffness in those rows",
                      unit="1/s^2", low=0.0, high=1e6),
        ParameterSpec("passive_kd", 0.0, "passive-joint damping in those rows", unit="1/s",
                      low=0.0, high=1e4),
        ParameterSpec("hold_passive_dofs", [""], "passive DOF whose rows of J_D the "
                      "passive_weight rows act on, e.g. root_joint/rx (a floating joint's DOF "
                      "are <joint>/x, /y, /z, /rx, /ry, /rz); empty: every passive DOF whose "
                      "motion moves the task frame (a roll about the tool's own axis is left "
                      "free)",
                      validator=_check_passive_dofs),
        ParameterSpec("redundancy", "prioritized", "how the passive rows combine with the task: "
                      "prioritized (in the task's null space) or stacked (one weighted solve, "
                      "7.1)", choices=("prioritized", "stacked")),
        ParameterSpec("task_max_speed", 0.5, "largest speed of the task setpoint toward a "
                      "goal pose", unit="m/s", low=1e-3, high=10.0),
        ParameterSpec("task_max_acceleration", 2.0, "largest acceleration of the task "
                      "setpoint", unit="m/s^2", low=1e-3, high=100.0),
        ParameterSpec("task_max_angular_speed", 1.5, "largest angular speed of the task "
                      "setpoint", unit="rad/s", low=1e-3, high=20.0),
        ParameterSpec("task_max_angular_acceleration", 6.0, "largest angular acceleration of "
                      "the task setpoint", unit="rad/s^2", low=1e-3, high=200.0),
        ParameterSpec("task_joint_speed_fraction", 0.5, "share of each active joint's URDF "
                      "velocity limit that the joint velocity the task asks (through the "
                      "damped inverse of S J_G) may reach before the setpoint slows in "
                      "proportion: the setpoint slows as σ_min falls, before the safety layer "
                      "would brake the joints; 0: never slowed", unit="1", low=0.0, high=10.0),
        ParameterSpec("task_max_position_error", 0.1, "the setpoint waits when it is this far "
                      "ahead of the measured hand (a target out of reach is not chased)",
                      unit="m", low=1e-3, high=10.0),
        ParameterSpec("task_max_orientation_error", 0.5, "likewise for the orientation (not for "
                      "the tasks position and planar, which leave it free)",
                      unit="rad", low=1e-3, high=3.14),
        # posture term (issue 23 item 4)
        ParameterSpec("task_posture_kp", 0.0, "stiffness pulling the active joints' self-motion "
                      "in the task's null space toward the configuration where the mode started "
                      "(or the passive set changed); 0: self-motion only damped", unit="1/s^2",
                      low=0.0, high=1e4),
        ParameterSpec("failure_reaction", "auto", "what task mode does when joints go passive "
                      "at run time (control/failure_reaction.py): auto (decide from the model "
                      "and the state: keep_task with the failed joints let move, out of the "
                      "passive_weight hold unless named in hold_passive_dofs; a kept "
                      "position task around failed joints with no static load is followed "
                      "along a plan re-solved every 0.1 s where its first plan keeps the "
                      "hand within 3 mm and the limits; position, the "
                      "orientation given up, the failed joints let move (a loaded one swings "
                      "to where it hangs, along a swing planned within the speed and position "
                      "limits with the hand kept, re-planned every 0.1 s, where such a plan "
                      "exists) or held through J_D toward a balance, whichever "
                      "the loop linearised at the failure says is stable; or "
                      "hold, which first plans the arrest of the arm's fall or motion "
                      "within the speed and position limits when braking alone would not keep "
                      "them), "
                      "keep_task (the task and the hold go on unchanged), position (the "
                      "orientation given up), hold (brake the active joints, let the failed "
                      "ones settle; never plans)", choices=REACTIONS),
        ParameterSpec("failure_plan_budget", PLAN_BUDGET, "wall time the auto reaction's "
                      "plans (the arrest of a fall, the swing of a loaded failed joint with the "
                      "hand kept, the kept position or pose task around unloaded failed "
                      "joints: box DDP through the hybrid derivatives) may take per solve; the "
                      "cycle that solves one waits for it (a plan's first solve at the failure "
                      "always, its re-plans unless failure_replan_inline is false; a "
                      "lock-stepped simulator waits too; on hardware the effort controllers "
                      "hold the last command meanwhile); a solve stopped by it is judged as it "
                      "stands; 0: brake at once, let a loaded joint swing and keep the task "
                      "unplanned, never plan",
                      unit="s", low=0.0,
                      high=60.0),
        ParameterSpec("failure_replan_inline", True, "the failure reaction's followed plans "
                      "(a loaded joint's swing, the kept position or pose task): solve their "
                      "re-plans (every 0.1 s, 0.03-0.3 s each on a 7-DOF arm) in the control "
                      "cycle, which waits for each (as a lock-stepped simulator does); false: in a "
                      "background thread, each started from the state the plan predicts for "
                      "when it will be done, for a robot that does not wait (the hand is kept "
                      "less well the longer a solve takes: doc/failure_analysis.md)"),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        super().__init__(model, settings, frame, workspace)
        gains = {arg: float(settings[name]) for name, arg in _GAINS.items()}
        self.tracker = EndEffectorTracker(
            model, frame, task=settings["task"], workspace=self.workspace,
            redundancy=settings["redundancy"],
            passive_weight_scale=settings["passive_weight_scale"],
            passive_rows_guard=SafetyLayer.guard_for(model, settings),
            held_passive_dofs=[n for n in settings["hold_passive_dofs"] if n], **gains)
        self.follower = PoseSetpointFollower(
            settings["task_max_speed"], settings["task_max_acceleration"],
            settings["task_max_angular_speed"], settings["task_max_angular_acceleration"])
        self._last_t: float | None = None
        # the slowing near a singularity: the share of the URDF speed limits the setpoint
        # may ask of the active joints (the tracker's ratio: none where a joint has no limit)
        self.joint_speed_fraction = float(settings["task_joint_speed_fraction"])
        self.speed_scale = 1.0  # this cycle's share of the setpoint's speed limits
        self.max_error = (settings["task_max_position_error"],
                          settings["task_max_orientation_error"])
        self.reach = ReachCheck(model, frame)
        # -- failure reaction (issue 23 item 2): armed by carry_reference, decided at a state
        self.failure_reaction = str(settings.get("failure_reaction", "auto"))
        self.plan_budget = float(settings.get("failure_plan_budget", PLAN_BUDGET))
        self.replan_inline = bool(settings.get("failure_replan_inline", True))
        self.reaction: Decision | None = None
        self._failed: list[str] = []
        self._floor: Decision | None = None  # the reaction in force when more joints failed
        self._posture: SafePosture | None = None
        self._dropped = ""  # why the plan was dropped, in the cycle it was (else empty)
        self._swing: PlannedSwing | None = None  # a loaded failed joint's swing, planned
        self._continues: TaskLaw | None = None  # the law replaced (carry_reference)
        self._carried_at_failure = False  # its moving setpoint taken over at a failure

    def check_reference(self, reference: TaskReference) -> None:
        """``ValueError`` for a goal no configuration can reach (``ReachCheck``)."""
        if self.tracker.task in POSITION_TASKS:
            self.reach.check(reference.position)

    def warm_kernels(self, q: np.ndarray) -> np.ndarray:
        """For ``warmup.warm_law``: the SO(3) exponential of the leash (``_leash``), which a
        cycle calls only when the orientation lags far behind; returns ``q``."""
        if self.tracker.task in ORIENTATION_TASKS:
            exp(np.zeros(3))
        return q

    def hold_reference(self, q: np.ndarray) -> TaskReference:
        ws = self.workspace
        ws.set_configuration(q)
        position, rotation = ws.frame_placement(self.frame)
        self.follower.reset(position, rotation)
        self.tracker.set_passive_reference(q)  # passive joints (a floating base) held here
        self.tracker.set_posture(q)  # the null space's posture (task_posture_kp)
        self._last_t = None
        return TaskReference(position=position.copy(), rotation=rotation.copy())

    def carry_reference(self, reference: TaskReference, old_model: RobotModel,
                        previous: ControlLaw | None = None) -> TaskReference:
        """The reference as it is; joints that became passive (a motor failed) arm the
        failure reaction, decided at the next state (``failure_reaction``), together with the
        failed joints ``previous`` (the law this one replaces) was reacting to that are still
        passive; while all of those are, the new reaction is at least as cautious as
        ``previous``'s (``at_least``). The setpoint goes on where ``previous``'s is, moving as
        it moves, when both laws keep the same task of the same frame (a gain or payload
        change, a failed motor); else, and without ``previous``, it starts at rest at the
        measured pose. At a failure the first plan (``_plan_ahead``) then follows the moving
        path; where that plan is refused, and where a loaded failed joint is let swing (its
        plan, ``PlannedSwing``, brings the swing to rest with the hand held), the setpoint
        restarts at rest at the measured hand (doc/failure_analysis.md, "The setpoint carried
        across a failure")."""
        if isinstance(previous, TaskLaw) and previous.frame == self.frame \
                and previous.tracker.task == self.tracker.task \
                and previous.follower.setpoint is not None and previous._posture is None:
            self._continues = previous
        earlier = list(previous.failed_joints) if isinstance(previous, TaskLaw) else []
        still = [n for n in earlier if n in self.model.passive_joints]
        self._failed = still + [n for n in newly_passive(self.model, old_model)
                                if n not in still]
        self._floor = previous.reaction if earlier and still == earlier else None
        return reference

    @property
    def failed_joints(self) -> tuple[str, ...]:
        """The joints this law treats as failed at run time (reacted to, or about to be)."""
        if self._failed:
            return tuple(self._failed)
        return self.reaction.failed if self.reaction is not None else ()

    def compute(self, q: np.ndarray, v: np.ndarray, reference: TaskReference, t: float,
                with_jacobians: bool) -> LawOutput:
        if self.follower.setpoint is None:  # a rebuilt law starts from the measured pose
            self.hold_reference(q)
            if self._continues is not None:  # its setpoint and clock the replaced law's
                self.follower.resume(self._continues.follower)
                self._last_t = self._continues._last_t
                self._continues = None
                self._carried_at_failure = bool(self._failed)
        if self._failed:  # failure reaction: decided once, at the first state after it
            self._react(q, v)
        if self._posture is not None:  # the safe posture: no task
            res = self._posture.step(q, v, t)
            ws = self.workspace
            ws.generalized(self.frame, q)
            return LawOutput(res.tau_active.copy(), res.qdd_passive.copy(), ws.J_G, ws.J_D,
                             self.reaction.status,
                             intended_velocity=self._posture.intended_velocity.copy())
        dt = 0.0 if self._last_t is None else min(max(t - self._last_t, 0.0), _MAX_STEP)
        self._last_t = t
        setpoint = self.follower.step(reference, dt, (self.speed_scale, self.speed_scale), t)
        if self._swing is not None:  # a loaded failed joint's swing, followed by plan
            out = self._follow_swing(q, v, setpoint, t)
            if out is not None:
                return out
        # J_G, J_D of this cycle's (4.6); the setpoint's fields are views of the follower's state
        res = self.tracker.step(q, v, setpoint, self.follower.state)
        self._leash(setpoint, res)
        ws = self.workspace
        status = "singular" if res.singular else ""
        slowed = self._slow(res, setpoint, reference)
        if slowed:
            status = f"{status}; {slowed}" if status else slowed
        if self.reaction is not None:  # the failure reaction's run-time check
            held_back = _length(reference.position - setpoint.position) \
                if self.speed_scale < 1.0 else 0.0  # by the slowing, toward its goal
            nxt = escalate(self.reaction, res.sigma_min, v, self.model,
                           self.tracker.singular_threshold, res.position_error_norm, held_back)
            if nxt is not None:
                if self._dropped:  # in the cycle its plan was dropped: said with it
                    nxt = replace(nxt, reason=f"{nxt.reason} ({self._dropped})")
                if nxt.mode == "position" and res.position_error_norm > ESCALATE_ERROR:
                    self._relatch(q, v)
                self._apply(nxt, q, v)
            status = f"{status}; {self.reaction.status}" if status else self.reaction.status
        self._dropped = ""
        # LawOutput's fields in their order (keywords cost a third more, every cycle): no
        # Λ⁻¹ nor point, not friction-compensated; the safety layer keeps the task rows with
        # the other joints (not after a failure: the reaction decides what is attainable)
        return LawOutput(res.tau_active, res.qdd_passive, ws.J_G, ws.J_D, status, None, None,
                         res.intended_velocity, False, res.qdd_active, res.tau_passive,
                         res.task_rows if self.reaction is None else None)

    def _plan_ahead(self, kind: type[PlannedSwing], d: Decision, q: np.ndarray,
                    v: np.ndarray) -> Decision:
        """The predictive layer from (q, v), the hand on its setpoint: ``PlannedSwing``, a
        loaded failed joint let swing with the hand kept, where even the braked arm's swing
        is predicted past ``RUNAWAY_SPEED`` (``decision.swing_peak``: ``escalate`` then gives
        the swing up at that speed; below it the swing is left to the task, which keeps those
        rows: the xarm7's and the panda's wrists, 0.5–0.9 braked); ``PlannedTask``, a kept
        position or pose task (the hand's rotation in the plan too) whose failed joints carry
        no static load, at the failure. Followed
        where its first plan keeps the hand near the setpoint and every joint within its
        limits; else (or with ``failure_plan_budget`` 0) the task goes on unplanned. A plan
        toward a setpoint carried across the failure, moving, that is refused: the setpoint
        restarts at rest at the measured hand and the plan is made again toward it (Talos'
        elbow in zero g: its plan toward the moving path 4 mm off, refused; 2.7 mm kept
        toward the stopped hand). The decision, its reason noting which."""
        self._swing = None
        if self.plan_budget <= 0.0:
            return d
        pose = kind is PlannedTask and self.tracker.task == "pose"

        def toward_setpoint() -> tuple[PlannedSwing, bool, str]:
            plan = kind(self.model, self.frame, self.plan_budget, self.replan_inline, pose)
            sp = self.follower.setpoint
            return plan, *plan.plan(q, v, sp.position, sp.linear_velocity, sp.rotation,
                                    sp.angular_velocity)

        plan, used, note = toward_setpoint()
        if not used and self._carried_at_failure:  # again, toward the hand stopped
            self._carried_at_failure = False
            self.hold_reference(q)
            plan, used, again = toward_setpoint()
            note = f"toward the moving path: {note}; toward the hand stopped: {again}"
        if used:
            self._swing = plan
        return replace(d, reason=f"{d.reason}; {note}")

    def _follow_swing(self, q: np.ndarray, v: np.ndarray, setpoint: TaskReference, t: float
                      ) -> LawOutput | None:
        """The planned swing's (or kept task's) command this cycle (T_a = u, qdd_p from the
        hybrid recursion); None, and the plan dropped, once its time is over or a joint
        passes its ``runaway`` share of its speed limit, or a kept task's plan loses the hand
        as the law's run-time check (``escalate``) judges the law (``losing_hand``): more than its
        ``hand_lost`` (``PlannedTask``: ``ESCALATE_ERROR``) off its setpoint, a position
        task's with a joint past ``ESCALATE_SPEED`` of its speed limit too (Tiago's shoulder
        yaw in zero g: the free shoulder carried to its limit, where the path is out of reach;
        doc/failure_analysis.md). The task and its run-time check then act, and the
        reaction's reason says when and why."""
        swing = self._swing
        ws = self.workspace
        J_G, J_D = ws.generalized(self.frame, q)  # (q configured: the placement below too)
        why = ""
        if swing.hand_lost < np.inf:  # the law's run-time check (escalate) on the plan
            off = _length(ws.frame_placement(self.frame)[0] - setpoint.position)
            speed = swing.speed_share(v)
            if losing_hand(off, speed, swing.pose, swing.hand_lost):
                why = (f" (the hand {1e3 * off:.0f} mm off its setpoint, a joint at "
                       f"{speed:.2f} of its speed limit)")
        u = None if why else swing.command(q, v, t, setpoint.position,
                                           setpoint.linear_velocity, setpoint.rotation,
                                           setpoint.angular_velocity,
                                           self.follower.stream_velocities)
        if u is None or not np.all(np.isfinite(u)):
            if not why and swing.dropped:
                why = f" ({swing.dropped})"
            self._swing = None  # the status says so from now on (and the node logs it)
            self._dropped = f"its plan followed {swing.followed(t):.2f} s{why}, then the law alone"
            self.reaction = replace(self.reaction,
                                    reason=f"{self.reaction.reason}; {self._dropped}")
            return None
        res = planned_motion(ws, swing.step, q, v, u)
        return LawOutput(res.tau_active.copy(), res.qdd_passive.copy(), J_G, J_D,
                         self.reaction.status, intended_velocity=swing.intended_velocity(),
                         planned=True)

    def _relatch(self, q: np.ndarray, v: np.ndarray) -> None:
        """The setpoint moved to the measured hand, moving with it, when a kept pose steps
        down to its position far from the setpoint (``escalate``): the position task starts
        from where the hand is, not losing it already, and the follower brings it back to the
        path within the task's speed and acceleration limits."""
        ws = self.workspace
        ws.set_configuration(q)
        position, rotation = ws.frame_placement(self.frame)
        self.follower.reset(position, rotation)
        self.follower.setpoint.linear_velocity = ws.frame_velocity(self.frame, v)[:3].copy()

    def _react(self, q: np.ndarray, v: np.ndarray) -> None:
        """Decide the failure reaction at (q, v) (control/failure_reaction.py), apply it."""
        d = decide(self.model, self._failed, q, self.frame, self.tracker.task,
                   self.failure_reaction, self.tracker.singular_threshold, self.workspace)
        self._failed = []
        d = at_least(d, self._floor)
        if self._carried_at_failure and d.target is not None:  # a loaded joint let swing:
            self._carried_at_failure = False  # from the hand stopped (carried, Talos' forearm
            self.hold_reference(q)  # roll under gravity swung to 1.44 of a limit against 1.14)
        self._apply(d, q, v, at_failure=True)
        self._carried_at_failure = False

    def _apply(self, d: Decision, q: np.ndarray, v: np.ndarray, at_failure: bool = False
               ) -> None:
        """Put the decision ``d`` in force at (q, v); ``at_failure``: decided at the failure
        (``_react``), not by the run-time check (``escalate``), which never plans the kept
        task: from a state already at a speed limit or losing the hand its plan was dropped
        at once and the task given up (Tiago Pro's upper-arm roll, pose, zero g: 30 against
        4.6 mm; Baxter's wrist roll: 20 against 1.6 mm)."""
        tracker = self.tracker
        if d.mode == "keep_task" and not d.forced:  # let move, unless that is less stable
            d = settle_failed(tracker, d, q)
        elif d.mode == "position":
            tracker.task = "position"
            if d.forced:  # held toward the balanced configuration (or where they failed)
                stabilise_passive(tracker, d, q)
            else:  # let move, or held toward the balance where the loop says that is stable
                d = settle_failed(tracker, d, q, partial(stabilise_passive, tracker, d, q),
                                  loaded=d.target is not None)
                if d.let_move and d.target is not None:  # its swing, braked (escalate's bound)
                    d = replace(d, swing_peak=swing_peak(self.model, q, v, d.failed),
                                swing_dofs=tuple(int(self.model.joint_dofs(n)[0])
                                                 for n in d.failed))
                    if d.swing_peak > RUNAWAY_SPEED:  # judged at it by escalate: planned
                        d = self._plan_ahead(PlannedSwing, d, q, v)
        if at_failure and d.mode != "hold" and tracker.task in ("position", "pose") \
                and d.target is None and not d.forced and self._swing is None:
            d = self._plan_ahead(PlannedTask, d, q, v)  # unloaded failed joints: planned task
            if d.planned_only and self._swing is None:  # rows near rank loss, not planned
                d = replace(d, mode="hold", reason=d.reason + "; not planned: hold")
        self.reaction = d
        if d.mode == "hold":
            plan = None
            if not d.forced:  # predict the braked arm, plan its arrest if it would flail
                plan, note = arrest_plan(self.model, q, v, budget=self.plan_budget)
                self.reaction = d = replace(d, reason=f"{d.reason}; {note}")
            self._posture = SafePosture(self.model, self.workspace, d.failed, plan=plan)

    def _slow(self, res: TrackingResult, setpoint: TaskReference, goal: TaskReference) -> str:
        """The next cycle's share of the setpoint's speed limits (issue 23 item 3): the joint
        velocity the task drives toward (``res.intended_velocity``: the setpoint's velocity
        and the PD's pull through the task's damped inverse of S J_G) grows as σ_min falls;
        where it asks a joint for more than ``task_joint_speed_fraction`` of its URDF speed
        limit (``res.intended_speed_ratio``: the largest share), the setpoint's speed is
        scaled down in proportion (the joint speeds scale with it), before the safety layer
        would brake the joints at their limit. A note for the status while that holds the
        setpoint back from its goal."""
        if self.joint_speed_fraction <= 0.0 or res.intended_velocity is None:
            return ""
        ratio = res.intended_speed_ratio
        v_max, _, w_max, _ = self.follower.limits
        share = max(_length(setpoint.linear_velocity) / v_max,
                    _length(setpoint.angular_velocity) / w_max)
        allowed = share * self.joint_speed_fraction / ratio if ratio > 0.0 else 1.0
        self.speed_scale = min(1.0, max(allowed, _LEAST_SPEED_SCALE))
        if self.speed_scale >= 1.0 or ratio <= self.joint_speed_fraction or _length(
                goal.position - setpoint.position) <= _LAG:
            return ""
        return (f"setpoint slowed near a singularity (a joint at {ratio:.2f} of its speed "
                "limit)")

    def _leash(self, setpoint: TaskReference, res: TrackingResult) -> None:
        """Hold the setpoint (at rest) within the largest errors of the measured pose, so that
        it waits for a hand that cannot follow instead of running away from it. Only what the
        task controls: a position or planar task leaves the orientation free (its error is
        not a lag), an orientation or pointing task the position."""
        max_p, max_r = self.max_error
        task = self.tracker.task
        e_position, e_orientation = res.position_error, res.orientation_error
        n = res.position_error_norm if task in POSITION_TASKS else 0.0
        if n > max_p:
            setpoint.position = setpoint.position - e_position * (1.0 - max_p / n)
            setpoint.linear_velocity = np.zeros(3)
            setpoint.linear_acceleration = np.zeros(3)
        angle = res.orientation_error_norm if task in ORIENTATION_TASKS else 0.0
        if angle > max_r:
            setpoint.rotation = exp(-e_orientation * (1.0 - max_r / angle)) @ setpoint.rotation
            setpoint.angular_velocity = np.zeros(3)
            setpoint.angular_acceleration = np.zeros(3)
