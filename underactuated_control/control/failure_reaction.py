"""What task mode does when joints go passive at run time (issue 23 item 2; ROS-free).

When a motor fails (the node's ``passive_joints`` grows), ``decide`` looks at the model and the
measured state and picks what is still attainable (doc/failure_analysis.md, "Failure reaction"):

- ``keep_task``: the configured task goes on. Chosen when the task rows of J_G (6.10)
  keep full rank with margin (σ_min(S J_G) ≥ ``RANK_MARGIN`` ε) and the failed joints can hold
  their static load where they are (|g_k(q)| within their dry friction + ``MOMENT_MARGIN``);
  the failed joints are then let move, not held still through J_D (``release_passive``;
  ``settle_failed``: held, or their reaction counted on less, where that is more stable);
- ``position``: the orientation is given up, the hand position kept (pose task only, position
  rows of full rank with margin, and a configuration with that hand position whose gravity
  moment about every failed axis is holdable exists — found by ``least_gravity_moment``, a
  local search on the position's self-motion manifold — at most ``REACH`` rad away); the
  freed redundancy damps the failed joints through J_D (6.12) toward it, or, where they hold
  their loads where they are (zero gravity), lets them move as ``keep_task`` does (auto:
  ``settle_failed`` takes the other way, or counts less on their reaction, where the loop
  linearised at the failure is more stable so). Position rows near rank loss (σ_min between
  ``ESCALATE_SIGMA`` ε, where the run-time check gives a task up, and ε) with the loads held:
  chosen only if the kept task's receding plan (``PlannedTask``) keeps the hand, else
  ``hold`` (``Decision.planned_only``; the Unitree G1's elbow, pose task in zero g: σ_min
  0.009 at the failure);
- ``hold`` (the safe posture): the active joints are braked to rest and held where they stop
  (qdd_a = -kd v_a - kp (q_a - q_a,hold), then T_a from the hybrid recursion, section 5);
  the failed joints settle under gravity and their own damping. Nothing is chased. Where
  the braked arm is predicted to pass a limit (a fall about a loaded failed axis, an arm
  moving fast when a task is given up), the predictive layer first plans the arrest
  (``arrest_plan``: a torque-limited trajectory to rest within the speed and position
  limits, box DDP through the derivatives of the hybrid recursion) and the safe posture
  follows it with its Riccati gains before holding; a plan worse than braking is not used.

``failure_reaction`` (parameter) forces a choice: ``keep_task`` (the law as before the
reaction existed), ``position``, ``hold``; ``auto`` (the default) decides as above and gives a
kept task up at run time (``escalate``). Free-flying bases and a task other than
pose/position are left to ``keep_task``. A later failure is decided for every joint failed
so far, never less cautiously than the reaction in force (``at_least``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..dynamics import inverse_dynamics
from ..jacobians import JacobianWorkspace
from ..model import FLOATING, RobotModel
from ..optimal_control import HybridStep, Solution, solve_box_ddp
from ..optimal_control.background import BackgroundPlanner
from ..optimal_control.problems import arrest_problem, swing_problem
from ..passive_forces import PassiveForceModel
from ..so3 import exp as rotation_exp
from ..so3 import left_jacobian, rotation_angle, rotation_error
from .task_space import TaskReference

__all__ = ["REACTIONS", "CAUTION", "Decision", "decide", "escalate", "at_least", "newly_passive",
           "least_gravity_moment", "release_passive", "stabilise_passive", "SafePosture",
           "closed_loop_growth", "settle_failed", "swing_peak",
           "ArrestPlan", "arrest_plan", "trajectory_excess", "PlannedSwing", "PlannedTask",
           "planned_motion", "losing_hand"]

REACTIONS = ("auto", "keep_task", "position", "hold")
CAUTION = {"keep_task": 0, "position": 1, "hold": 2}  # a later failure never goes back down
RANK_MARGIN = 1.0  # σ_min(S J_G) ≥ RANK_MARGIN ε keeps a task (ε: singular_threshold)
ESCALATE_SPEED = 0.8  # of a joint's speed limit: a kept task losing the hand beyond it is given up
ESCALATE_ERROR = 0.01  # m: the hand this far from its setpoint is losing it
RUNAWAY_SPEED = 1.1  # of a joint's speed limit: beyond, the task is given up whatever the hand
SWING_RUNAWAY = 1.2  # of its speed limit: a failed joint let swing to its balance, likewise,
# where the arm braked is predicted to keep its swing within RUNAWAY_SPEED (``swing_peak``)
ESCALATE_SIGMA = 0.25  # of ε: a kept task whose σ_min(S J_G) falls below is given up
MOMENT_MARGIN = 0.05  # N m over the dry friction: a static load the failed joint can hold
REACH = 1.5  # rad: farthest a balanced configuration may lie (xarm7 wrist: 1.1)
HOLD_KP, HOLD_KD = 25.0, 10.0  # 1/s², 1/s: the safe posture's brake on the active joints
UNLOAD_SPEED = 0.5  # of each joint's speed limit: how fast the safe posture unloads the axes
UNLOAD_MOMENT = 1.0  # N m: below this static moment the unloading slows down in proportion
PLAN_HORIZON, PLAN_DT = 1.5, 0.01  # s: the arrest plan's length and knot spacing
LONG_HORIZON = 3.0  # s: a plan still moving at the end of PLAN_HORIZON is solved over this
LIMIT_TOLERANCE = 0.01  # rad|m: a plan this far past a position limit still counts as inside
PLAN_ITERATIONS = 300  # box DDP iterations at most (xarm7's elbow: 203, 1.9 s)
PLAN_BUDGET = 5.0  # s: wall time the arrest plan may take by default (failure_plan_budget;
# the longest measured: 3.1 s, the UR5's shoulder over both horizons)
PLAN_SPEED = 1.0  # of each joint's speed limit: a plan faster anywhere is not used
PLAN_REST = 0.25  # of each joint's speed limit: a plan must end slower than this
SWING_TIME = 1.0  # s: a loaded failed joint's swing followed by plan before the task resumes
SWING_DT = 0.0025  # s between the swing plan's knots: the semi-implicit step must resolve the
# light damped joints (Talos' wrist, followed on MuJoCo: 1.27 of a speed limit at 0.01 where
# the plan said 0.90; at 0.005 some plans part from MuJoCo's motion within 50 ms)
SWING_REPLAN = 0.1  # s between its solves, each from the measured state (a receding horizon)
SWING_LEAD = 0.3  # s: the setpoint's velocity carried this far ahead as the hand's path
TASK_PLAN_LEAD = SWING_TIME  # s: a kept task's, over its whole horizon (at 0.3 s its plans saw
# the hand stop and led it into a rank loss: the PR2's shoulder lift 6.0 -> 1.3 mm)
SWING_ITERATIONS, SWING_REPLAN_ITERATIONS = 150, 30  # box DDP: the first solve, the others
REPLAN_LEAD_MARGIN = 1.25  # a background re-plan starts this many times the last one's time
REPLAN_LEAD_MAX = 0.25  # (at most, s) ahead of its request: where the arm will be when it is done
SWING_HAND = 0.025  # m: a first plan leaving the hand further from its path is not used (the
# re-plans then follow the setpoint as it moves: Talos' wrist, 16 mm planned, 1.1 mm RMS)
TASK_PLAN_ITERATIONS = 250  # box DDP, the kept task's first solve (Talos' elbow in zero g from
# the tests' failure state: 150 left the hand 43 mm off its path, 250 2.5 mm, 3.1 s)
TASK_PLAN_DEVIATION = 0.4  # of a speed limit: a joint this far off the kept task's plan drops
# it (Tiago Pro's wrist roll in zero g left the plan, peak 0.15, for 2.04 of a limit in 24 ms;
# at 0.25 Talos' light wrist, 0.26 off a re-plan for a moment, dropped its elbow's: 2.2 -> 160 mm)
TASK_PLAN_HAND = 0.003  # m: the kept position task's first plan, likewise (every row it gained
# had one within 2.7 mm; at 4.6 mm the panda's shoulder over DDS was kept to 10.3 mm, where the
# law alone keeps 1 mm; at 10 mm Tiago's shoulder yaw was planned, 21.8 mm: 50 against 13.7 mm)
TASK_PLAN_POSE_HAND = 0.01  # m: a kept pose task's first plan, likewise (the pose rows' first
# plans on eight arms in zero g: 0.5-2.5 mm where the law keeps the hand, Tiago's upper-arm roll
# 6.0 mm, where the law loses it and the plan keeps it, 124 -> 4.5 mm; no plan within 33 mm else)
GROWTH_LIMIT = 1.0  # 1/s: a task loop (linearised at rest) growing faster trusts failed joints less
TRUST_LEVELS = (0.5, 0.0)  # the failed joints' passive_trust tried when it does
GROWTH_STEP = 1e-6  # rad, rad/s: the linearisation's central differences


@dataclass(frozen=True)
class Decision:
    """What the reaction chose and the evidence (SI units)."""

    mode: str  # keep_task | position | hold
    reason: str
    failed: tuple[str, ...]
    sigma_min: float  # of the configured task's rows of J_G at the failure
    gravity_moment: float  # largest |g_k| over the failed joints at the failure [N m]
    target: np.ndarray | None = None  # position: the balanced configuration found
    task: str = "pose"  # the task configured when the joints failed
    forced: bool = False  # chosen by failure_reaction, not auto: never escalated
    let_move: bool = False  # the failed joints left to move (settle_failed), not held
    swing_peak: float = np.inf  # their largest |v|/v_max predicted with the arm braked
    swing_dofs: tuple[int, ...] = ()  # let swing to the balance: escalate's own bound
    planned_only: bool = False  # position rows near rank loss: kept only if a plan keeps them

    @property
    def status(self) -> str:
        return f"failure reaction {self.mode} ({','.join(self.failed)}: {self.reason})"


def newly_passive(model: RobotModel, old_model: RobotModel) -> list[str]:
    """Joints passive in ``model`` and active in ``old_model`` (a motor failed)."""
    return [n for n in model.passive_joints if n not in old_model.passive_joints]


def _rows(task: str) -> slice:
    return slice(0, 6) if task == "pose" else slice(0, 3)


def _sigma_min(A: np.ndarray) -> float:
    if A.shape[0] > A.shape[1]:
        return 0.0
    return float(np.linalg.svd(A, compute_uv=False)[-1])


def least_gravity_moment(model: RobotModel, q: np.ndarray, joint: int, frame: str, task: str,
                         iterations: int = 300) -> tuple[float, np.ndarray]:
    """The smallest |g_joint(q')| found on the task's self-motion manifold through ``q`` (the
    frame's pose, or position, kept; joints within their limits): projected gradient descent on
    g_joint² with a Gauss-Newton pull back onto the manifold. ``joint``: DOF index. A local
    search: an upper bound of the true minimum."""
    ws = JacobianWorkspace(model)
    ws.set_configuration(q)
    p0, R0 = (x.copy() for x in ws.frame_placement(frame))
    rows = _rows(task)
    lo, hi = model.position_lower, model.position_upper
    zero = np.zeros(model.nv)

    def g(x: np.ndarray) -> float:
        return float(inverse_dynamics(model, x, zero, zero)[joint])

    def error(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ws.set_configuration(x)
        p, R = ws.frame_placement(frame)
        err = np.concatenate([p0 - p, rotation_error(R0, R)])[rows]
        return err, ws.frame_jacobian(frame)[rows]

    x = np.asarray(q, float).copy()
    best = (abs(g(x)), x.copy())
    step = 0.05
    for _ in range(iterations):
        gx = g(x)
        grad = np.array([(g(x + 1e-6 * e) - gx) / 1e-6 for e in np.eye(model.nv)])
        _, J = error(x)
        N = np.eye(model.nv) - np.linalg.pinv(J) @ J
        d = N @ (gx * grad)
        nd = np.linalg.norm(d)
        if nd < 1e-12:
            break
        x = np.clip(x - step * d / max(nd, 1.0), lo, hi)
        for _ in range(3):  # back onto the manifold
            err, J = error(x)
            x = np.clip(x + np.linalg.pinv(J) @ err, lo, hi)
        err, _ = error(x)
        if np.linalg.norm(err) < 1e-4 and abs(g(x)) < best[0]:
            best = (abs(g(x)), x.copy())
    return best


def decide(model: RobotModel, failed: Sequence[str], q: np.ndarray, frame: str, task: str,
           choice: str = "auto", singular_threshold: float = 1e-2,
           workspace: JacobianWorkspace | None = None) -> Decision:
    """The reaction to ``failed`` (joints of ``model`` that just became passive) at the
    measured configuration ``q``; ``choice`` one of ``REACTIONS``."""
    if choice not in REACTIONS:
        raise ValueError(f"failure_reaction must be one of {REACTIONS}, got {choice!r}")
    ws = workspace if workspace is not None else JacobianWorkspace(model)
    J_G, _ = ws.generalized(frame, q)
    rows = _rows(task)
    sigma = _sigma_min(J_G[rows]) if task in ("pose", "position") else np.inf
    zero = np.zeros(model.nv)
    g_all = inverse_dynamics(model, q, zero, zero) if np.any(model.gravity) else zero
    g = [float(abs(g_all[model.joint_dofs(n)[0]])) for n in failed]
    friction = [float(model.friction[model.joint_dofs(n)[0]]) for n in failed]
    g_max = max(g, default=0.0)
    holdable = all(gk <= fk + MOMENT_MARGIN for gk, fk in zip(g, friction))
    failed = tuple(failed)

    def made(mode: str, reason: str, target: np.ndarray | None = None,
             forced: bool = choice != "auto") -> Decision:
        return Decision(mode, reason, failed, float(sigma), g_max, target, task, forced)

    if choice != "auto":
        return made(choice, "failure_reaction:=" + choice)
    floating = bool(np.any(np.asarray(model.hinge_type) == FLOATING))
    if floating or task not in ("pose", "position") or not failed:
        return made("keep_task", f"task {task} kept", forced=True)
    eps = RANK_MARGIN * singular_threshold
    if sigma >= eps and holdable:
        return made("keep_task", f"σ_min {sigma:.3f}, |g| {g_max:.2f} N m holdable")
    why = (f"σ_min {sigma:.3f} < {eps:.3f}" if sigma < eps else
           f"|g| {g_max:.2f} N m > friction")
    sigma_p = _sigma_min(J_G[:3])
    if sigma_p >= eps:
        if holdable:
            return made("position", why + f"; position σ_min {sigma_p:.3f}, static load held")
        ok, target = True, np.asarray(q, float).copy()
        for n in failed:
            k = model.joint_dofs(n)[0]
            least, x = least_gravity_moment(model, target, k, frame, "position", 150)
            ok &= least <= float(model.friction[k]) + MOMENT_MARGIN
            target = x
        if ok and np.abs(target - q).max() <= REACH:
            return made("position", why + "; a balanced configuration with this hand position "
                        "is near", target)
    elif sigma_p >= ESCALATE_SIGMA * eps and holdable:  # the predictive layer decides
        return replace(made("position", why + f"; position σ_min {sigma_p:.3f} near rank "
                            "loss, static load held: kept if planned"), planned_only=True)
    return made("hold", why + "; no attainable task: active joints braked, "
                "failed joints settle")


def at_least(decision: Decision, floor: Decision | None) -> Decision:
    """``decision`` (auto) made at least as cautious as ``floor``, the reaction in force when
    more joints failed: an arm braked to its safe posture stays there, a given-up orientation
    stays given up (the position reaction then damps the failed joints where they are)."""
    if floor is None or decision.forced or CAUTION[decision.mode] >= CAUTION[floor.mode]:
        return decision
    return replace(decision, mode=floor.mode, target=None,
                   reason=f"{decision.reason}; {floor.mode} kept from the earlier failure")


def losing_hand(position_error: float, speed_share: float, pose: bool,
                error: float = ESCALATE_ERROR) -> bool:
    """The run-time check's test of a kept task, the law's (``escalate``) and its plan's
    (``TaskLaw._follow_swing``) alike: the hand more than ``error`` [m] off its setpoint, a
    position task's with a joint past ``ESCALATE_SPEED`` of its speed limit too
    (``speed_share``: the largest |v_i| / v_max,i)."""
    return position_error > error and (pose or speed_share > ESCALATE_SPEED)


def escalate(decision: Decision, sigma_min: float, v: np.ndarray, model: RobotModel,
             singular_threshold: float, position_error: float = 0.0,
             held_back: float = 0.0) -> Decision | None:
    """The run-time check of a ``keep_task``/``position`` reaction (auto only), each cycle:
    the next, safer reaction when the kept task's rows of J_G reach rank loss (σ_min below
    ``ESCALATE_SIGMA`` ε, ε the law's own threshold), or when a joint passes ``ESCALATE_SPEED``
    of its speed limit while the hand is more than ``ESCALATE_ERROR`` from its setpoint, or
    passes ``RUNAWAY_SPEED`` whatever the hand does (the zero dynamics the decision could not
    see); None while it holds. A kept pose (``keep_task``, task ``pose``) is given up for its
    position (``position``) as soon as the hand is ``ESCALATE_ERROR`` from the setpoint, or
    the setpoint, slowed near a singularity, ``held_back`` that far from its goal [m], at
    any joint speed below ``RUNAWAY_SPEED`` (past it: ``hold``): the orientation rows are
    what loses the hand, the position task keeps it (Baxter in zero g: the upper-arm roll,
    94 mm braked at 0.80 of a speed limit → 2.8 mm; the forearm roll, its rows near rank
    loss slowing the setpoint, 15.2 → 1.8 mm); the law re-latches the setpoint at the hand
    (``TaskLaw._relatch``). A task that keeps the hand with joints at their speed limits
    (the safety layer holding them there) is kept. Failed joints let swing to the balanced
    configuration (``decision.swing_dofs``, set with ``swing_peak``) count only toward the
    runaway speed: their speed is the swing the reaction chose, not the task losing the
    hand. Where the arm braked is predicted to keep
    that swing within ``RUNAWAY_SPEED`` (``decision.swing_peak``), toward ``SWING_RUNAWAY``,
    the issue's bound: the swing with the hand kept may pass the braked one a little (the
    xarm7's wrist under gravity, braked 0.84: 1.03 of its limit with the default gains, 1.13
    with config/arm.yaml's, the hand 6–13 mm off for 50 ms, then 1.3–3.3 mm RMS; given up at
    1.1, 190–219 mm); where not (the panda's wrist, braked 1.62), at ``RUNAWAY_SPEED`` as any
    joint, when an arrest plan can still slow it (1.12–1.17 then; at 1.2, 1.22–1.24)."""
    if decision.mode == "hold" or decision.forced:
        return None
    ratio = np.abs(v) / model.speed_limit
    speed = float(np.max(ratio))
    swing = 0.0
    if decision.swing_dofs:  # the swing's joints: its own bound
        swinging = list(decision.swing_dofs)
        swing = float(np.max(ratio[swinging]))
        ratio[swinging] = 0.0
    others = float(np.max(ratio))
    swing_bound = SWING_RUNAWAY if decision.swing_peak <= RUNAWAY_SPEED else RUNAWAY_SPEED
    eps = ESCALATE_SIGMA * singular_threshold
    losing = losing_hand(position_error, others, pose=False)
    pose = decision.mode == "keep_task" and decision.task == "pose"
    pose_lost = pose and losing_hand(max(position_error, held_back), others, pose=True)
    if sigma_min >= eps and not losing and not pose_lost and others <= RUNAWAY_SPEED \
            and swing <= swing_bound:
        return None
    if sigma_min < eps:
        why = f"σ_min {sigma_min:.4f} < {eps:.4f}"
    elif losing or others > RUNAWAY_SPEED or swing > swing_bound:
        why = (f"a joint at {speed:.2f} of its speed limit, the hand "
               f"{1e3 * position_error:.0f} mm off")
    else:  # the pose lost at low speed
        why = (f"the hand {1e3 * position_error:.0f} mm off the setpoint, the setpoint held "
               f"back {1e3 * held_back:.0f} mm from its goal (orientation given up)")
    mode = "position" if pose and speed <= RUNAWAY_SPEED else "hold"
    return Decision(mode, f"{decision.mode} given up at run time: {why}", decision.failed,
                    sigma_min, decision.gravity_moment, None, decision.task)


def _failed_rows(model: RobotModel, failed: Sequence[str]) -> np.ndarray:
    """The failed 1-DOF joints' rows of J_D (their indices among the passive DOF)."""
    passive = [model.dof_names[i] for i in model.passive_dofs]
    return np.array([passive.index(model.dof_names[model.joint_dofs(n)[0]]) for n in failed],
                    dtype=np.int64)


def release_passive(tracker, decision: Decision) -> Decision:
    """The ``keep_task`` reaction's failed joints (their static load held by their own
    friction) leave the rows of J_D (6.12) that ``passive_weight`` holds still: unloaded, a
    failed joint may move, and holding it cost the task wherever one of the two kept it
    (xarm7, position task: the wrist roll's hold ran away, 47 mm on a frictionless arm and
    67.7 mm under gravity against 0.8 and 1.4 mm let free; the elbow's 6.0 against 3.4 mm in
    zero g, doc/failure_analysis.md). Only when the held DOF are the default (every passive one):
    failed joints named in ``hold_passive_dofs`` stay held. The decision, its reason noting
    the release."""
    if not tracker.skip_unseen_passive or tracker.passive_weight <= 0.0:
        return decision
    failed = set(_failed_rows(tracker.model, decision.failed).tolist())
    if not failed & set(tracker.held_rows.tolist()):
        return decision
    tracker.held_rows = np.array([r for r in tracker.held_rows if r not in failed],
                                 dtype=np.int64)
    return replace(decision, reason=decision.reason + "; left free of the J_D hold")


def closed_loop_growth(tracker, q: np.ndarray, dry_friction: bool = False) -> float:
    """The largest real part [1/s] of the eigenvalues of the tracker's closed loop on the
    model, x' = (v, qdd(x)) with qdd what the tracker's command gives (``TrackingResult.qdd``,
    the hybrid recursion of section 5), linearised at (q, v = 0) about holding the task frame
    where it is at q (central differences, 4 N steps of the tracker). Positive: the loop
    leaves that state at that rate (unstable zero dynamics, a passive joint's fall).
    ``dry_friction``: the passive joints' smooth dry friction linearised with the rest (its
    slope at rest, f_c/v_s, acts as a stiff damper: the joint gripped by its friction, 5 N m
    s/rad for the issue's 0.05 N m, 17x its URDF damping); else left out (the joint
    sliding, its viscous damping alone)."""
    forces = tracker.passive_forces
    if not dry_friction:
        tracker.passive_forces = forces.without_coulomb()
    try:
        return _growth(tracker, q)
    finally:
        tracker.passive_forces = forces


def _growth(tracker, q: np.ndarray) -> float:
    m, ws = tracker.model, tracker.workspace
    ws.set_configuration(q)
    position, rotation = ws.frame_placement(tracker.frame)
    ref = TaskReference(position=position.copy(), rotation=rotation.copy())
    n = m.nv
    x0 = np.concatenate([np.asarray(q, float), np.zeros(n)])
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    h = GROWTH_STEP
    for i in range(2 * n):
        qdd = []
        for sign in (1.0, -1.0):
            x = x0.copy()
            x[i] += sign * h
            qdd.append(tracker.step(x[:n], x[n:], ref).qdd.copy())
        A[n:, i] = (qdd[0] - qdd[1]) / (2.0 * h)
    ws.set_configuration(q)
    return float(np.max(np.linalg.eigvals(A).real))


# the tracker's attributes a hold of the failed joints and their trust set
_SETTLED = ("held_rows", "passive_weight", "passive_weight_scale", "passive_rows_guard",
            "passive_kp", "passive_kd", "passive_reference", "base_reference", "passive_trust")


def settle_failed(tracker, decision: Decision, q: np.ndarray,
                  hold: Callable[[], None] | None = None, loaded: bool = False) -> Decision:
    """Whether the task holds the failed joints through J_D or lets them move, and how much it
    counts on their reaction to the active joints (the tracker's ``passive_trust`` γ: 1 is
    J_G of (6.10), 0 as if they did not react) — from the closed loop linearised at the
    failure (``closed_loop_growth``, the failed joints' dry friction gripping and sliding,
    sliding only where ``loaded``: the first way at γ 1 is kept if either is stable, another
    must be in both). The exact
    inversion gives the task's rows the gains' error dynamics and leaves the rest to the zero
    dynamics; behind a light, damped failed joint those are unstable: the xarm7's wrist pitch
    (joint6, 0.3 N m s/rad) with the hand position held grows at 138/s sliding, 2452/s
    gripped — the hand held to 1 mm while the joints ran to 1.16x their speed limit within
    59 ms. A hold of it through the forearm roll grows too (under gravity 28/s sliding).

    Candidates, in order: the failed joints let move (``release_passive``), then γ ∈
    ``TRUST_LEVELS`` on it, then held (``hold``) at γ 1 and below. ``loaded``: their static
    load exceeds their dry friction, so they slide: the loop is judged sliding only (a
    loaded joint held first, before 2026-11-28, drifted where the hold kept it from its
    balance: the panda's forearm roll under gravity, the active joints accelerating for 0.4 s
    until a speed limit gave the task up, 290 mm; let move 0.9 mm).
    The first way at γ 1 is used when it grows no faster than ``GROWTH_LIMIT``; else the first
    candidate within it (the rest not tried: 12 ms at N = 7 when the first way is stable, 26 ms
    with one candidate, 100 ms with all); else the slowest-growing one if it grows less than
    half as fast; else the first way as it is. ``hold()`` applies the hold (None: the tracker's
    configured hold is it). Zero g, that wrist let move: γ 0.5 (0.0/s), the hand 0.8 mm RMS
    round the circle; under gravity (loaded: sliding), let move 143/s, at γ 0.5 2.1/s and at
    0 1.1/s (held 28/s): let swing to where it hangs at γ 0, 2.8 mm. The UR5's elbow in zero g
    (1.8/s sliding, 30/s gripped; γ 0.5 10.6/s sliding, 0 4.5/s) keeps the exact inversion (0.9
    mm; at γ 0 it was lost, 97 mm). 1-DOF joints only (no floating base). The decision, its
    reason noting what was chosen."""
    m = tracker.model

    def state() -> dict:
        return {k: getattr(tracker, k) for k in _SETTLED}

    def restore(values: dict) -> None:
        for k, value in values.items():
            setattr(tracker, k, value)

    start = state()
    free_decision = replace(release_passive(tracker, decision if hold is None else replace(
        decision, reason=decision.reason + "; let move")), let_move=True)
    free = state()
    restore(start)
    if hold is not None:
        hold()
    held = state()
    ways = [(free, free_decision, "let move"), (held, decision, "held")]
    first, first_decision, first_name = ways[0]
    restore(first)
    if m.nq != m.nv or not decision.failed:
        return first_decision
    rows = _failed_rows(m, decision.failed)

    def apply(values: dict, level: float) -> None:  # a way, the failed joints' trust γ
        restore(values)
        if level < 1.0:
            trust = np.ones(len(m.passive_dofs))
            trust[rows] = level
            tracker.passive_trust = trust

    regimes = (False,) if loaded else (True, False)  # dry friction sliding | also gripping

    def growth(values: dict, level: float, regime=max) -> float:
        apply(values, level)
        return regime(closed_loop_growth(tracker, q, dry) for dry in regimes)

    exact = growth(first, 1.0, min)  # kept if stable with the friction gripping or sliding
    if exact <= GROWTH_LIMIT:
        restore(first)
        return first_decision
    options = [(exact, first, first_decision, first_name, 1.0)]
    candidates = [(values, d, name, level) for i, (values, d, name) in enumerate(ways)
                  for level in ((1.0,) if i else ()) + TRUST_LEVELS]
    for values, d, name, level in candidates:  # in order, up to the first within the limit
        options.append((growth(values, level), values, d, name, level))
        if options[-1][0] <= GROWTH_LIMIT:
            break
    best = options[-1] if options[-1][0] <= GROWTH_LIMIT else min(options, key=lambda o: o[0])
    if best[0] > GROWTH_LIMIT and best[0] >= 0.5 * exact:
        best = options[0]
    rate, values, d, name, level = best
    apply(values, level)
    if best is options[0]:
        return d
    notes = ["held through J_D"] if name != first_name and name == "held" else []
    if level < 1.0:
        notes.append(f"their reaction trusted at {level:.1f} in the task")
    why = f"(exact and {first_name}: grows at {exact:.1f}/s; now {rate:.1f}/s)"
    return replace(d, reason=f"{d.reason}; {', '.join(notes)} {why}" if notes
                   else f"{d.reason} {why}")


def stabilise_passive(tracker, decision: Decision, q: np.ndarray) -> None:
    """The ``position`` reaction's hold (forced, or chosen by ``settle_failed``): rows of J_D
    (6.12) on the failed joints, in the position task's null space, asking qdd_k = -kd v_k -
    kp (q_k - q_k,target) (the balanced configuration's angle, else where it failed), at
    ``passive_weight`` 1 on the absolute scale (the rows √w J_D against the constant secondary
    damping: a partial effect). Their full effect (``passive_weight_scale`` relative, w 1)
    asked more of the joints than they give on a passive shoulder in zero g: 53 mm against
    2.2 mm, doc/failure_analysis.md. Nor do the rows yield to the task at the joints' bounds
    (``passive_rows_guard``): a failed joint's hold scaled down lets it whip (peaks 0.99 →
    1.10 of the speed limit on the xarm7's joint 3 under gravity)."""
    tracker.held_rows = _failed_rows(tracker.model, decision.failed)
    tracker.passive_weight, tracker.passive_weight_scale = 1.0, "absolute"
    tracker.passive_rows_guard = None
    tracker.passive_kp, tracker.passive_kd = HOLD_KP, HOLD_KD
    target = np.asarray(q if decision.target is None else decision.target, float)
    tracker.set_passive_reference(target)


def swing_peak(model: RobotModel, q: np.ndarray, v: np.ndarray, failed: Sequence[str]) -> float:
    """The failed joints' largest |v|/v_max over ``PLAN_HORIZON`` with the active joints
    braked to where they are (the first guess of ``arrest_problem``: the safe posture's brake
    predicted on the model, 7–54 ms at N = 7); inf if that prediction diverges."""
    xs = arrest_problem(model, q, v, PLAN_HORIZON, PLAN_DT, brake_kp=HOLD_KP,
                        brake_kd=HOLD_KD).first_guess
    dofs = [model.joint_dofs(n)[0] for n in failed]
    peak = np.max(np.abs(xs[:, model.nv:][:, dofs]) / model.speed_limit[dofs])
    return float(peak) if np.isfinite(peak) else np.inf


def trajectory_excess(model: RobotModel, xs: np.ndarray) -> tuple[float, float, float]:
    """Of states ``xs`` (rows x = (q, v)): the largest |v_i|/v_max,i, the largest excursion
    past a position limit (≥ 0) [rad|m], and the largest |v_i|/v_max,i at the last state —
    what ``arrest_plan`` (and ``optimize --arrest``) judge a plan or a prediction by. NaN when
    the states are not finite."""
    n = model.nv
    vmax = model.speed_limit
    q, v = xs[:, :n], xs[:, n:]
    over = np.max(np.maximum(np.asarray(model.position_lower, float) - q,
                             q - np.asarray(model.position_upper, float)))
    return (float(np.max(np.abs(v) / vmax)),
            np.nan if np.isnan(over) else float(max(over, 0.0)),
            float(np.max(np.abs(v[-1]) / vmax)))


@dataclass(frozen=True)
class ArrestPlan:
    """A planned arrest: ``solution`` (states, torques and Riccati gains at knots ``step.dt``
    [s] apart) of ``arrest_problem`` through its discrete dynamics ``step``, and its
    evidence."""

    solution: Solution
    step: HybridStep
    peak_speed: float  # largest |v_i|/v_max,i along the planned states
    braked_peak: float  # the same of the braked hold's prediction
    seconds: float  # wall time of the solve(s)

    @property
    def arrested(self) -> bool:
        """Within ``PLAN_SPEED`` of every speed limit (else the fall is only slowed)."""
        return self.peak_speed <= PLAN_SPEED

    @property
    def note(self) -> str:
        what = ("the fall arrested by a plan" if self.arrested else
                f"the fall slowed by a plan (braked: peak {self.braked_peak:.2f})")
        return (f"{what} ({len(self.solution.us) * self.step.dt:.1f} s, peak {self.peak_speed:.2f}"
                f" of the speed limits, box DDP {self.solution.iterations} iterations, "
                f"{self.seconds:.1f} s)")


def arrest_plan(model: RobotModel, q: np.ndarray, v: np.ndarray,
                dt: float = PLAN_DT, iterations: int = PLAN_ITERATIONS,
                budget: float = PLAN_BUDGET) -> tuple[ArrestPlan | None, str]:
    """The predictive layer of the ``hold`` reaction: a torque-limited trajectory from (q, v)
    to rest within the joints' speed and position limits, the failed (passive) joints free
    (``optimal_control.problems.arrest_problem``, box DDP through the hybrid recursion's
    derivatives), planned only when the braked hold, predicted on the model over
    ``PLAN_HORIZON`` (the plan's first guess), would pass ``PLAN_SPEED`` of a speed limit or a
    position limit. A plan still moving at its end (faster than ``PLAN_REST``) is solved again
    over ``LONG_HORIZON``. Used if it stays inside the position limits and ends at rest, and
    either keeps ``PLAN_SPEED`` (the fall arrested) or at least lowers the braked prediction's
    peak (slowed: the solve found no plan that keeps it). Returns (the plan, a note
    for the status) or (None, why not: the braked hold is then all there is). A solve stopped
    by ``iterations`` before it converged, or by ``budget`` [s] of wall time (the long horizon
    is then not tried), is judged the same way; a budget of 0 plans nothing."""
    if model.nq != model.nv or np.any(np.asarray(model.nv_joint) != 1) or model.n_active == 0:
        return None, "no arrest plan (it takes 1-DOF joints)"
    if budget <= 0.0:
        return None, "no arrest plan (failure_plan_budget 0: braked at once)"
    start = time.perf_counter()
    deadline = start + budget

    def judged(xs: np.ndarray) -> tuple[float, bool, float]:  # peak, inside, speed at the end
        peak, over, rest = trajectory_excess(model, xs)
        return peak, bool(over <= LIMIT_TOLERANCE), rest

    braked_peak = np.inf
    for horizon in (PLAN_HORIZON, LONG_HORIZON):
        try:  # the first guess brakes as the safe posture does
            problem = arrest_problem(model, q, v, horizon, dt, brake_kp=HOLD_KP,
                                     brake_kd=HOLD_KD)
            if horizon == PLAN_HORIZON:  # the hold's own prediction
                braked = problem.first_guess
                braked_peak, inside, _ = judged(braked)
                if np.all(np.isfinite(braked)) and braked_peak <= PLAN_SPEED and inside:
                    return None, (f"braked, predicted peak {braked_peak:.2f} of the speed "
                                  "limits: no plan needed")
                if not np.isfinite(braked_peak):
                    braked_peak = np.inf
            sol = solve_box_ddp(problem.step, problem.x0, problem.us_init, problem.running,
                                problem.terminal, max_iterations=iterations, deadline=deadline)
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            return None, f"no arrest plan ({exc})"
        peak, inside, rest = judged(sol.xs)
        if not inside or rest <= PLAN_REST or time.perf_counter() >= deadline:
            break
    seconds = time.perf_counter() - start
    if inside and rest <= PLAN_REST and (peak <= PLAN_SPEED or peak < braked_peak):
        plan = ArrestPlan(sol, problem.step, peak, braked_peak, seconds)
        return plan, plan.note
    why = ("outside a position limit" if not inside else
           f"still moving at its end, {rest:.2f}" if rest > PLAN_REST else
           f"no slower than braked, {braked_peak:.2f}")
    stopped = (f", stopped at failure_plan_budget {budget:g} s"
               if not sol.converged and seconds >= budget else "")
    return None, (f"no arrest plan within the limits (best peak {peak:.2f} of the speed "
                  f"limits, {why}; {seconds:.1f} s{stopped})")


class SafePosture:
    """The ``hold`` reaction: brake the active joints and hold them, qdd_a = -kd v_a - kp (q_a -
    q_a,hold), T_a and qdd_p from the hybrid recursion (section 5) with the passive joints' own
    forces. ``unload`` (failed joints under a gravity moment): the hold point walks, at most
    ``UNLOAD_SPEED`` of each joint's speed limit, down the gradient of ½ Σ g_k² over the active
    joints (within their limits): the arm folds so that its weight passes through the failed
    axes instead of swinging the whole arm about them. ``plan`` (``arrest_plan``): followed
    first, u = ū_k + K_k (x − x̄_k) within the effort limits (k the knot at or before the time
    since the first step), then the hold starts where the plan ends."""

    def __init__(self, model: RobotModel, workspace: JacobianWorkspace,
                 failed: Sequence[str] = (), kp: float = HOLD_KP, kd: float = HOLD_KD,
                 unload: bool = True, plan: ArrestPlan | None = None) -> None:
        self.model, self.workspace = model, workspace
        self.plan = plan
        self._plan_start: float | None = None
        self.kp, self.kd = kp, kd
        self.passive_forces = PassiveForceModel(model)
        self._q_index = np.array([model.q_start[model.joint_index(n)]
                                  for n in model.active_joints], dtype=np.int64)
        self._failed = np.array([model.joint_dofs(n)[0] for n in failed], dtype=np.int64)
        self.unload = bool(unload and self._failed.size and np.any(model.gravity)
                           and model.nq == model.nv)
        vmax = np.asarray(model.velocity_limit, float)[model.active_dofs]
        self._rate = UNLOAD_SPEED * np.where(np.isfinite(vmax) & (vmax > 0), vmax, 1.0)
        margin = 0.05
        self._lo = np.asarray(model.position_lower, float)[self._q_index] + margin
        self._hi = np.asarray(model.position_upper, float)[self._q_index] - margin
        self._zero = np.zeros(model.nv)
        self.hold: np.ndarray | None = None
        self._t: float | None = None
        # the active joints' velocity the last step drives toward (the friction stage's intent)
        self.intended_velocity = np.zeros(model.n_active)

    def _walk(self, q: np.ndarray, dt: float) -> None:
        """Move the hold point down ∇_a ½ Σ g_k² (finite differences of the static moments)."""
        m, x = self.model, q.copy()
        x[self._q_index] = self.hold
        g0 = inverse_dynamics(m, x, self._zero, self._zero)[self._failed]
        grad = np.empty(self._q_index.size)
        for i, j in enumerate(self._q_index):
            x[j] += 1e-6
            grad[i] = g0 @ (inverse_dynamics(m, x, self._zero, self._zero)[self._failed] - g0)
            x[j] -= 1e-6
        grad /= 1e-6
        n = float(np.abs(grad / self._rate).max())
        if n > 1e-12:  # at most the rate, slowing as the moment falls below UNLOAD_MOMENT
            slow = min(1.0, float(np.linalg.norm(g0)) / UNLOAD_MOMENT)
            self.hold = np.clip(self.hold - dt * slow * grad / n, self._lo, self._hi)

    def step(self, q: np.ndarray, v: np.ndarray, t: float):
        """T_a, qdd_p (the hybrid recursion's result) for the measured state at time ``t``."""
        m, ws = self.model, self.workspace
        if self.plan is not None:
            res = self._follow_plan(q, v, t)
            if res is not None:
                return res
        qa, va = q[self._q_index], v[m.active_dofs]
        if self.hold is None:
            self.hold = np.clip(qa.copy(), self._lo, self._hi)
        dt = 0.0 if self._t is None else min(max(t - self._t, 0.0), 0.1)
        self._t = t
        if self.unload and dt > 0.0:
            self._walk(q, dt)
        qdd_a = -self.kd * va - self.kp * (qa - self.hold)
        # the velocity this brake drives toward, (kp/kd)(q_hold − q_a): the friction stage's
        # intent (control/friction.py). Without one it compensated each joint's damping and dry
        # friction along the joint's own motion, and a light joint kept turning in the hold
        # (xarm7's wrist, inertia 1e-4 kg m²: 0.37 rad/s for 5 s, its brake 1e-3 N·m)
        self.intended_velocity = (self.kp / self.kd) * (self.hold - qa) if self.kd > 0.0 \
            else np.zeros_like(qa)
        return ws.dynamics.compute(q, v, qdd_a, self.passive_forces(q, v))

    def _follow_plan(self, q: np.ndarray, v: np.ndarray, t: float):
        """The plan's torques with its Riccati feedback; None once it has ended."""
        if self._plan_start is None:
            self._plan_start = t
        sol, step = self.plan.solution, self.plan.step
        k = int((t - self._plan_start) / step.dt + 1e-9)
        if not 0 <= k < len(sol.us):
            self.plan, self.hold = None, None  # held from where the plan ended
            return None
        x = np.concatenate([q, v])
        u = np.clip(sol.us[k] + sol.K[k] @ (x - sol.xs[k]), step.lower, step.upper)
        self.intended_velocity = sol.xs[k][self.model.nq + self.model.active_dofs]  # the plan's
        return planned_motion(self.workspace, step, q, v, u)


def planned_motion(workspace: JacobianWorkspace, step: HybridStep, q: np.ndarray,
                   v: np.ndarray, u: np.ndarray):
    """The hybrid recursion's result (T_a, qdd_p; section 5) for a plan's active torques
    ``u`` at (q, v): T_a = u at the accelerations u gives on ``step``'s model, the passive
    joints driven by its passive-force model."""
    qdd = step.acceleration(q, v, u)
    return workspace.dynamics.compute(q, v, qdd[step.active], step.passive_forces(q, v))


StreamVelocities = Callable[[], "tuple[np.ndarray, np.ndarray, float] | None"]
"""A stream's two newest segment velocities and the time between them, or None
(``PoseSetpointFollower.stream_velocities``)."""


def carried_path(position: np.ndarray, velocity: np.ndarray, turn_rate: np.ndarray | None,
                 times: np.ndarray) -> np.ndarray:
    """(len(times), 3): the hand's setpoint carried ``times`` [s] ahead at its speed, its
    velocity turning at ``turn_rate`` Ω [rad/s] (a constant twist: p + t V(Ω t) v, V the left
    Jacobian of SO(3)): a circle's path, given its turn, is carried on exactly; with Ω None
    the velocity carried straight ahead."""
    p, v = np.asarray(position, float), np.asarray(velocity, float)
    times = np.asarray(times, float)
    if turn_rate is None:
        return p + times[:, None] * v
    return p + np.array([t * (left_jacobian(t * turn_rate) @ v) for t in times])


def turn_rate(before: np.ndarray, after: np.ndarray, dt: float, largest: float
              ) -> np.ndarray | None:
    """rad/s: the rotation that turns the direction of the velocity ``before`` into that of
    ``after``, ``dt`` [s] later, per second, at most ``largest``; None where either is ~0."""
    a, b = np.asarray(before, float), np.asarray(after, float)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if not (na > 1e-9 and nb > 1e-9 and dt > 0.0):
        return None
    axis = np.cross(a, b)
    sine = float(np.linalg.norm(axis))
    if sine < 1e-15 * na * nb:
        return np.zeros(3)
    rate = min(np.arctan2(sine, float(a @ b)) / dt, largest)
    return axis * (rate / sine)


class PlannedSwing:
    """The predictive layer of a reaction that lets a loaded failed joint swing to where it
    hangs with the hand kept (``position``, ``decision.swing_dofs``): the swing, planned so that
    every joint stays within its speed and position limits while the hand follows its
    setpoint and the swing comes to rest, is followed for ``SWING_TIME`` [s]; then the task
    resumes. A receding horizon: every ``SWING_REPLAN`` s a box DDP
    (``optimal_control.problems.swing_problem``, ``SWING_TIME`` ahead, knots ``SWING_DT``
    apart) is solved again from the measured state, warm-started by the last solution followed
    with its Riccati gains; the hand's path is the setpoint carried ahead at its velocity for
    ``path_lead`` s (``SWING_LEAD``) straight on; a kept task's re-plans (``path_turns``)
    carry it along the arc on which a stream's path turns (``carried_path``); a re-plan past
    the speed or position limits drops the plan (``judge_replans``). With ``inline``
    False (``failure_replan_inline``) the re-plans run in a background thread: each starts
    from the state the followed plan predicts ``lead`` s after the request (1.25 of the last
    one's time, in the law's time), is followed from then on, and is discarded if it comes
    late with the arm off it; the cycles follow the last solution meanwhile, and the next is
    requested once it is done (every ``SWING_REPLAN`` at most). The first solve always runs in the
    cycle that decides the reaction. Between solves the command is u = ū(t) + K_k (x − x̄(t))
    (ū, x̄ interpolated between the knots), within the effort limits (doc/failure_analysis.md,
    "The predictive layer keeps the hand")."""

    duration = SWING_TIME  # s: followed this long from its first command, then the task
    hand_tolerance = SWING_HAND  # m: the first plan's hand off its path at most
    runaway = RUNAWAY_SPEED  # of a speed limit: a joint faster drops the plan
    iterations = SWING_ITERATIONS  # box DDP, the first solve
    deviation = np.inf  # of a speed limit: a joint's velocity this far off the plan's drops it
    hand_lost = np.inf  # m: the hand this far off its setpoint drops the plan (TaskLaw)
    path_lead = SWING_LEAD  # s: the setpoint's velocity carried this far ahead (the hand's path)
    path_turns = False  # re-plans carry it along a stream's turn (a loaded swing's 0.3 s:
    # straight; along the turn Talos' forearm roll under gravity swung to 3.94 of a limit)
    judge_replans = True  # a re-plan past the limits drops the plan (else it is followed):
    # Tiago Pro's wrist in zero g, a re-plan at 35x the limits followed; judged since
    # 2026-12-07 on a loaded swing too (Tiago's wrist, loaded pose: 120 -> 7.6 mm, peak 1.55
    # -> 1.10; doc/failure_analysis.md, "A re-plan past the limits drops the plan")
    resolve_friction = False  # the passive friction widened until the 2.5 ms step resolves it
    what = "the swing planned with the hand kept"  # the status's words
    kind = "swing"

    def __init__(self, model: RobotModel, frame: str, budget: float = PLAN_BUDGET,
                 inline: bool = True, pose: bool = False) -> None:
        self.model, self.frame, self.budget = model, frame, float(budget)
        self.pose = pose  # the hand's rotation kept too (a pose task), not only its position
        self.n_knots = round(SWING_TIME / SWING_DT)
        self.problem = None  # the solver's (its step's buffers are the solver thread's)
        self.step = HybridStep(model, SWING_DT)  # the control thread's, for planned_motion
        self.solution: Solution | None = None
        self._replans = BackgroundPlanner(self._solve_again, inline, "failure_planner")
        self._next: tuple[Solution | None, float, str] | None = None  # a re-plan done,
        # not yet started (the solution, its start time, why it is None)
        self.dropped = ""  # why the plan stopped being followed before its time (else empty)
        self.lead = 0.0  # s: a re-plan starts this far ahead of its request (inline: 0)
        self._start: float | None = None  # the law's time of the first command
        self._solved_at = 0.0  # the law's time (since the start) of the solution followed
        self._tried_at = 0.0  # ... of the last solve tried (a failed one waits as well)
        self._knot = 0  # the knot the last command followed
        self.seconds = 0.0  # wall time of the solves so far
        self.solves = 0
        self.peak_speed = np.inf
        self._speed_limits = model.speed_limit

    def _leads(self) -> np.ndarray:
        """s: how far ahead of the setpoint each knot's target is (its velocity carried for
        ``path_lead`` at most)."""
        return np.minimum(np.arange(self.n_knots + 1) * SWING_DT, self.path_lead)

    def _targets(self, position: np.ndarray, velocity: np.ndarray,
                 turn: np.ndarray | None, ahead: float = 0.0) -> np.ndarray:
        """The hand's path per knot: the setpoint carried ahead (``carried_path``) from
        ``ahead`` s after its time (a background re-plan's lead)."""
        return carried_path(position, velocity, turn, ahead + self._leads())

    def _rotations(self, rotation: np.ndarray | None, angular_velocity: np.ndarray | None,
                   ahead: float = 0.0) -> np.ndarray | None:
        """The hand's rotation per knot, a pose task's (else None): the setpoint's carried
        ahead at its angular velocity (root axes) as ``_targets`` carries its position, from
        ``ahead`` s after the setpoint's time (a background re-plan's lead)."""
        if not self.pose:
            return None
        w = np.zeros(3) if angular_velocity is None else np.asarray(angular_velocity, float)
        return np.array([rotation_exp((ahead + lead) * w) @ rotation
                         for lead in self._leads()])

    def plan(self, q: np.ndarray, v: np.ndarray, position: np.ndarray, velocity: np.ndarray,
             rotation: np.ndarray | None = None, angular_velocity: np.ndarray | None = None
             ) -> tuple[bool, str]:
        """The first solve, from the state at the failure; (used, a note for the status): used
        when the plan keeps every joint within ``PLAN_SPEED`` of its speed limit (the solves
        aim at 0.9) and inside its position limits, and the hand within ``SWING_HAND`` of its
        path. A pose task's (``pose``) keeps the hand's ``rotation`` too, at a cost that
        weighs 1 mrad as 0.1 mm (``swing_problem``)."""
        start = time.perf_counter()
        try:
            self.problem = p = swing_problem(self.model, q, v, self.frame,
                                             self._targets(position, velocity, None),
                                             SWING_DT,
                                             rotations=self._rotations(rotation,
                                                                       angular_velocity),
                                             resolve_friction=self.resolve_friction,
                                             brake_kp=HOLD_KP, brake_kd=HOLD_KD)
            sol = solve_box_ddp(p.step, p.x0, p.us_init, p.running, p.terminal,
                                max_iterations=self.iterations,
                                deadline=start + self.budget)
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            return False, f"no {self.kind} plan ({exc})"
        self.seconds, self.solves = time.perf_counter() - start, 1
        self.peak_speed, over, _ = trajectory_excess(self.model, sol.xs)
        hand, turn = self._hand_error(sol.xs, p.running.terms[0])
        if not (self.peak_speed <= PLAN_SPEED and over <= LIMIT_TOLERANCE
                and hand <= self.hand_tolerance):
            return False, (f"no {self.kind} plan within the limits (peak {self.peak_speed:.2f} "
                           f"of the speed limits, the hand up to {1e3 * hand:.0f} mm off its "
                           f"path; {self.seconds:.1f} s)")
        self.solution = sol
        if not self._replans.inline:  # until a re-plan's time is measured
            self.lead = SWING_REPLAN
        turned = f" and {np.degrees(turn):.1f}°" if self.pose else ""
        return True, (f"{self.what} ({SWING_TIME:g} s ahead, peak "
                      f"{self.peak_speed:.2f} of the speed limits, the hand within "
                      f"{1e3 * hand:.1f} mm{turned} of its path, box DDP {sol.iterations} "
                      "iterations, "
                      f"{self.seconds:.1f} s; re-planned every {SWING_REPLAN:g} s)")

    def _path_turn(self, stream: StreamVelocities | None) -> np.ndarray | None:
        """rad/s: how fast a stream's path turns (``stream()``,
        ``PoseSetpointFollower.stream_velocities``: between its two newest segments), at most
        a quarter turn over ``path_lead``; a re-plan carries the setpoint along that arc
        (``carried_path``). None (straight on) without a stream, and unless ``path_turns``
        (asked only then, at a re-plan's request). The setpoint's own velocity is no measure
        of it where the setpoint catches up with the path (restarted at the measured hand:
        Talos' elbow in zero g, carried along the setpoint's turn measured between solves,
        lost the hand)."""
        if stream is None or not self.path_turns:
            return None
        velocities = stream()
        if velocities is None:
            return None
        return turn_rate(*velocities, 0.5 * np.pi / self.path_lead)

    def _hand_error(self, xs: np.ndarray, path) -> tuple[float, float]:
        """The plan's hand off its path at most: (m, rad; the turn 0 without rotations)."""
        ws, rotations = path.workspace, path.rotations
        worst, turn = 0.0, 0.0
        for k, (x, target) in enumerate(zip(xs, path.targets)):
            ws.set_configuration(x[:self.model.nq])
            position, R = ws.frame_placement(self.frame)
            worst = max(worst, float(np.linalg.norm(position - target)))
            if rotations is not None:
                turn = max(turn, rotation_angle(R @ rotations[k].T))
        return worst, turn

    def _solve_again(self, q: np.ndarray, v: np.ndarray, elapsed: float, position: np.ndarray,
                     velocity: np.ndarray, turn: np.ndarray | None,
                     rotation: np.ndarray | None, angular_velocity: np.ndarray | None,
                     sol: Solution, solved_at: float, lead: float
                     ) -> tuple[Solution | None, float, str] | None:
        """A solve from the state ``lead`` s after (q, v) at ``elapsed``: ``sol`` (solved at
        ``solved_at``) from then on, rolled out from (q, v) with its gains, then past its
        horizon the active joints braked (``HybridStep.braked_rollout``), predicts that state
        and is the first guess after it; (the solution, the time it starts at), or None where
        that rollout diverges (the last solution goes on); with ``judge_replans`` (the
        default), the solution None, and why, where it passes a speed or position limit
        as a first plan may not (the plan is dropped from that time: the task goes on
        unplanned). In the re-plan thread unless inline (``lead`` 0)."""
        p = self.problem
        ahead = int(round(lead / SWING_DT))
        shift = int(round((elapsed - solved_at) / SWING_DT))
        knots = self.n_knots + ahead
        kept = min(max(len(sol.us) - shift, 0), knots)  # knots the solution still covers
        xs = np.empty((knots + 1, sol.xs.shape[1]))
        us = np.empty((knots, sol.us.shape[1]))
        start = time.perf_counter()
        xs[0] = np.concatenate([q, v])
        if kept and not p.step.rollout(xs[0], sol.us[shift:shift + kept],
                                       sol.xs[shift:shift + kept + 1], sol.K[shift:shift + kept],
                                       np.zeros((kept, us.shape[1])), 0.0, p.step.lower,
                                       p.step.upper, xs[:kept + 1], us[:kept]):
            return None
        us[kept:], xs[kept:] = self._past_horizon(p.step, xs[kept], knots - kept, sol)
        if not np.all(np.isfinite(xs)):
            return None
        targets = self._targets(position, velocity, turn, ahead * SWING_DT)
        p.running.terms[0].targets = targets[:-1]
        p.terminal.terms[0].position = targets[-1]
        if self.pose:
            rotations = self._rotations(rotation, angular_velocity, ahead * SWING_DT)
            p.running.terms[0].rotations = rotations[:-1]
            p.terminal.terms[0].rotation = rotations[-1]
        new = solve_box_ddp(p.step, xs[ahead], us[ahead:], p.running, p.terminal,
                            max_iterations=SWING_REPLAN_ITERATIONS,
                            deadline=start + self.budget)
        self.seconds += time.perf_counter() - start
        self.solves += 1
        if self.judge_replans:  # as the first plan is judged
            peak, over, _ = trajectory_excess(self.model, new.xs)
            if not (peak <= PLAN_SPEED and over <= LIMIT_TOLERANCE):  # dropped from its time
                return None, elapsed + ahead * SWING_DT, (
                    f"a re-plan past the limits: peak {peak:.2f} of the speed limits, "
                    f"{over:.3f} past a position limit")
        return new, elapsed + ahead * SWING_DT, ""

    @staticmethod
    def _past_horizon(step: HybridStep, x: np.ndarray, knots: int, sol: Solution
                      ) -> tuple[np.ndarray, np.ndarray]:
        """A re-plan's first guess for the ``knots`` past the followed solution's horizon,
        from its predicted state ``x`` there: (torques, states) of the active joints braked
        (``HybridStep.braked_rollout``, the safe posture's gains). Its last knot's torque and
        gain held instead ran the G1's active wrist yaw to 5 of its speed limit within 0.1 s,
        while its failed wrist pitch swung under gravity, and the re-plan from that guess past
        the limits dropped the plan (doc/failure_analysis.md, "A re-plan's first guess past
        the horizon"). ``sol`` (the followed solution) is not used by the brake: it is there
        for a guess that continues it, as the tests' premise (the last knot held) does."""
        return step.braked_rollout(x, knots, HOLD_KP, HOLD_KD)

    def _advance_lead(self, latency: float) -> None:
        """The next background re-plan starts ``REPLAN_LEAD_MARGIN`` of ``latency`` [s]
        (the last one's, request to result, in the law's time) ahead of its request."""
        self.lead = min(REPLAN_LEAD_MARGIN * latency, REPLAN_LEAD_MAX)

    def _take_replan(self, elapsed: float, v: np.ndarray) -> None:
        """A finished re-plan followed from the time it starts at; one that comes late
        (a background solve slower than its lead) with the arm already off its velocity there
        by ``TASK_PLAN_DEVIATION`` of a speed limit is discarded; with a failed one, the last
        goes on."""
        result = self._replans.take()
        if isinstance(result, tuple) and self.solution is not None:
            self._next = result
            if not self._replans.inline:
                self._advance_lead(elapsed - self._tried_at)
        if self._next is not None and elapsed >= self._next[1] - 1e-9:
            (sol, solved_at, why), self._next = self._next, None
            if sol is None:  # a re-plan past the limits: not followed further
                self.solution, self.dropped = None, why
            elif not self._off(v, self._reference(sol, solved_at, elapsed)[1],
                               TASK_PLAN_DEVIATION):
                self.solution, self._solved_at = sol, solved_at

    def _off(self, v: np.ndarray, x_ref: np.ndarray, share: float) -> bool:
        """Whether a joint's velocity is off the plan's state ``x_ref`` by more than ``share``
        of its speed limit."""
        return bool(np.any(np.abs(v - x_ref[self.model.nq:]) > share * self._speed_limits))

    @staticmethod
    def _reference(sol: Solution, solved_at: float, elapsed: float) -> tuple[int, np.ndarray]:
        """(the knot, the state x̄) of ``sol`` (solved at ``solved_at``) at ``elapsed``,
        interpolated between the knots."""
        r = (elapsed - solved_at) / SWING_DT
        k = min(int(r), len(sol.us) - 1)
        a = min(r - k, 1.0)
        return k, (1.0 - a) * sol.xs[k] + a * sol.xs[k + 1]

    def command(self, q: np.ndarray, v: np.ndarray, t: float, position: np.ndarray,
                velocity: np.ndarray, rotation: np.ndarray | None = None,
                angular_velocity: np.ndarray | None = None,
                stream: StreamVelocities | None = None) -> np.ndarray | None:
        """The active joints' torques at the law's time ``t`` for the measured state and the
        hand's setpoint (``position``, ``velocity``; a pose plan's ``rotation``,
        ``angular_velocity`` too; ``stream``: a stream's newest velocities, asked for its turn
        when a re-plan is requested); None once the swing's time is over or a joint passes
        ``runaway`` of its speed limit (the caller then drops the plan)."""
        if np.any(np.abs(v) > self.runaway * self._speed_limits):
            fast = int(np.argmax(np.abs(v) / self._speed_limits))
            self.dropped = (f"{self.model.dof_names[fast]} past {self.runaway:g} of its speed "
                            "limit")
            return None
        if self._start is None:
            self._start = t
        elapsed = t - self._start
        if self.solution is None or not 0.0 <= elapsed < self.duration:
            return None
        self._take_replan(elapsed, v)
        if elapsed - self._tried_at >= SWING_REPLAN - 1e-9 and not self._replans.busy \
                and self._next is None:
            self._tried_at = elapsed  # every SWING_REPLAN, kept or not (the request's time)
            self._replans.request(q.copy(), v.copy(), elapsed, np.array(position, float),
                                  np.array(velocity, float),
                                  self._path_turn(stream),
                                  None if rotation is None else np.array(rotation, float),
                                  None if angular_velocity is None
                                  else np.array(angular_velocity, float),
                                  self.solution, self._solved_at, self.lead)
            self._take_replan(elapsed, v)  # inline: done, and started
        sol, step = self.solution, self.step
        if sol is None:  # a re-plan past the limits dropped it
            return None
        k, x_ref = self._reference(sol, self._solved_at, elapsed)
        self._knot = k
        x = np.concatenate([q, v])
        if self.deviation < np.inf and self._off(v, x_ref, self.deviation):
            off = np.abs(v - x_ref[self.model.nq:]) / self._speed_limits
            self.dropped = (f"{self.model.dof_names[int(np.argmax(off))]} {np.max(off):.2f} of "
                            "its speed limit off the plan's velocity")
            self.solution = None  # the arm leaves the plan: not followed further
            return None
        u = sol.us[k] + sol.K[k] @ (x - x_ref)
        return np.clip(u, step.lower, step.upper)

    def speed_share(self, v: np.ndarray) -> float:
        """The largest |v_i| / v_max,i (a joint without a limit: 0)."""
        return float(np.max(np.abs(v) / self._speed_limits))

    def followed(self, t: float) -> float:
        """s: how long the plan has been followed at the law's time ``t``."""
        return 0.0 if self._start is None else t - self._start

    def intended_velocity(self) -> np.ndarray:
        """The active joints' planned velocity at the last command's knot (the friction
        stage's intent)."""
        return self.solution.xs[self._knot][self.model.nq + self.model.active_dofs]


class PlannedTask(PlannedSwing):
    """The predictive layer of a kept position or pose task (``pose``: the hand's rotation in
    the plan's cost too) around failed joints that carry no static load (a zero-gravity arm,
    a vertical axis): the same receding horizon as ``PlannedSwing`` from the failure on,
    followed for as long as the task runs. The first solve is judged by its hand (within
    ``TASK_PLAN_HAND`` of its path, a pose task's ``TASK_PLAN_POSE_HAND``) and the limits,
    each re-plan by the limits (``judge_replans``: one past them drops the plan); a joint
    past ``PLAN_SPEED`` of its speed limit, or ``TASK_PLAN_DEVIATION`` of it off the plan's
    velocity, drops the plan and the instantaneous task law resumes with its run-time
    check (doc/failure_analysis.md, "The position task kept by a receding plan"). The
    instantaneous law alone follows the setpoint's path more exactly where it keeps it
    (0.6–0.8 mm RMS against the plan's 1.2–1.5 mm on a 5 cm circle: the plan sees the path
    only as the setpoint carried ahead at its velocity) and loses it where the failed joint's
    motion, seen one cycle at a time, runs the arm into a speed limit or a singularity
    (Talos' elbow in zero g: 170 mm)."""

    duration = np.inf
    iterations = TASK_PLAN_ITERATIONS
    deviation = TASK_PLAN_DEVIATION
    hand_lost = ESCALATE_ERROR  # followed on, Tiago's free shoulder yaw was carried to its
    # limit, where the path is out of reach: the hand 62 mm off, the status saying it kept
    runaway = PLAN_SPEED
    path_lead = TASK_PLAN_LEAD  # the hand seen moving to the horizon (at 0.3 s, then stopped,
    # the plans let the position rows lose rank just past it: doc/failure_analysis.md)
    path_turns = True  # over the whole horizon a line leaves the 5 cm circle by 12 mm
    # the failed joints unloaded: their friction resolved (the G1's wrist yaw chattered at the
    # URDF's width and a re-plan drove the wrist roll into its limit; a loaded swing's and an
    # arrest plan keep the URDF's: doc/failure_analysis.md, "A light wrist's friction")
    resolve_friction = True
    kind = "task"

    @property
    def hand_tolerance(self) -> float:  # m: the first plan's hand off its path at most
        return TASK_PLAN_POSE_HAND if self.pose else TASK_PLAN_HAND

    @property
    def what(self) -> str:  # the status's words
        return f"the {'pose' if self.pose else 'position'} task kept by a receding plan"
