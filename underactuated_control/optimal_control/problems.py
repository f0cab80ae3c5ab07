"""Ready-made problems for ``underactuated-control optimize`` and their output files.

``goal_problem``: from a start state to a joint configuration (and, optionally, a frame
position), torque-limited, passive joints free; ``arrest_problem``: from a moving state (a
motor just failed) to rest, within the joints' speed and position limits; ``swing_problem``:
a frame kept on a path while a loaded passive joint swings to rest, within the same limits;
``write_solution``:
CSV, NPZ (with the Riccati gains) and a PNG of a solution.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import RobotModel
from .costs import BoxCost, ControlCost, Cost, CostSum, FrameCost, FramePathCost, StateCost
from .ddp import Solution
from .dynamics import HybridStep, resolved_passive_forces

__all__ = ["Problem", "goal_problem", "arrest_problem", "swing_problem", "write_solution"]

ROTATION_LENGTH = 0.1  # m: swing_problem weighs a turn of θ rad as the hand θ × this far off


@dataclass
class Problem:
    step: HybridStep
    x0: np.ndarray
    us_init: np.ndarray
    running: Cost
    terminal: Cost
    first_guess: np.ndarray | None = None  # states of the us_init rollout (NaN once it diverges)


def _per_joint(values: Sequence[float] | None, model: RobotModel, what: str) -> np.ndarray:
    if values is None:
        return np.zeros(model.nq)
    a = np.asarray(values, dtype=float)
    if a.shape != (model.nq,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: give {model.nq} finite values, one per joint "
                         f"{list(model.joint_names)}, got {np.atleast_1d(a).tolist()}")
    return a


def goal_problem(model: RobotModel, goal: Sequence[float] | None = None,
                 start: Sequence[float] | None = None, horizon: float = 2.0, dt: float = 0.01,
                 frame: str | None = None, position: Sequence[float] | None = None,
                 goal_weight: float = 1000.0, velocity_weight: float = 100.0,
                 torque_weight: float = 0.01, state_weight: float = 0.01) -> Problem:
    """Reach ``goal`` (joint positions, at rest) and/or put ``frame`` at ``position`` at the
    end of ``horizon`` [s], from ``start`` (at rest); costs: the final error (weights
    ``goal_weight``, ``velocity_weight``), torque ``torque_weight`` Σ u², and a small
    ``state_weight`` on the distance to the goal along the way. The passive joints'
    friction is resolved for the step (``resolved_passive_forces``)."""
    if not (np.isfinite(horizon) and horizon > 0 and np.isfinite(dt) and 0 < dt <= horizon):
        raise ValueError(f"horizon ({horizon} s) and dt ({dt} s) must be > 0, dt <= horizon")
    if goal is None and frame is None:
        raise ValueError("give a goal configuration (--goal) or a frame and position")
    n = model.nv
    x0 = np.concatenate([_per_joint(start, model, "start"), np.zeros(n)])
    step = _step(model, x0[:n], dt, True)  # the friction resolved (a plan to a goal)
    target = np.concatenate([_per_joint(goal, model, "goal") if goal is not None
                             else x0[:n], np.zeros(n)])
    final_q = goal_weight if goal is not None else 0.0
    terminal: list[Cost] = [StateCost(target, [final_q] * n + [velocity_weight] * n)]
    running: list[Cost] = [ControlCost(torque_weight, step.nu),
                           StateCost(target, [state_weight if goal is not None else 0.0] * n
                                     + [0.1 * state_weight] * n)]
    if frame is not None:
        if position is None or len(position) != 3:
            raise ValueError("--position: give x y z [m] of the frame in root axes")
        terminal.append(FrameCost(model, frame, position=position, position_weight=goal_weight))
    N = max(1, round(horizon / dt))
    # start from (and regularise toward) the torques that hold the start: the first rollout
    # then stays near x0 instead of falling under gravity
    hold = step.holding_torques(x0[:n])
    running[0] = ControlCost(torque_weight, step.nu, reference=hold)
    return Problem(step, x0, np.tile(hold, (N, 1)), CostSum(running), CostSum(terminal))


def arrest_problem(model: RobotModel, q: Sequence[float], v: Sequence[float],
                   horizon: float = 1.5, dt: float = 0.01, speed_fraction: float = 0.9,
                   limit_margin: float = 0.05, box_weight: float = 1e4,
                   speed_weight: float = 10.0, stay_weight: float = 0.1,
                   torque_weight: float = 1e-3, brake_kp: float = 25.0,
                   brake_kd: float = 10.0) -> Problem:
    """Bring the robot from (``q``, ``v``) to rest within ``horizon`` [s], torque-limited, its
    passive joints free (a motor that just failed under a load): costs ``speed_weight`` Σ
    (v_i/v_max,i)² and ``stay_weight`` |q − q(0)|² along the way (both ten times at the
    end), ``torque_weight`` |u|², and ``box_weight`` on any excess over
    ``speed_fraction`` of each joint's URDF speed limit or within ``limit_margin`` [rad|m] of
    its position limits (``BoxCost``). The first guess: the active joints braked to where they
    are (qdd_a = −kd v_a − kp (q_a − q_a(0)), T_a from the hybrid recursion)."""
    if not (np.isfinite(horizon) and horizon > 0 and np.isfinite(dt) and 0 < dt <= horizon):
        raise ValueError(f"horizon ({horizon} s) and dt ({dt} s) must be > 0, dt <= horizon")
    step = HybridStep(model, dt)
    n = model.nv
    x0 = _start_state(model, q, v)
    box, scale = _limit_box(model, x0, speed_fraction, limit_margin, box_weight)
    target = np.concatenate([x0[:n], np.zeros(n)])
    running = CostSum([StateCost(target, np.concatenate([np.full(n, stay_weight),
                                                         speed_weight / scale**2])),
                       ControlCost(torque_weight, step.nu), box])
    terminal = CostSum([StateCost(target, np.concatenate([np.full(n, 10 * stay_weight),
                                                          10 * speed_weight / scale**2])), box])
    us, xs = step.braked_rollout(x0, max(1, round(horizon / dt)), brake_kp, brake_kd)
    return Problem(step, x0, us, running, terminal, xs)


def _step(model: RobotModel, q: np.ndarray, dt: float, resolve_friction: bool) -> HybridStep:
    """The problem's step, its passive friction resolved at ``q`` or the URDF's."""
    return HybridStep(model, dt, resolved_passive_forces(model, q, dt)
                      if resolve_friction else None)


def _start_state(model: RobotModel, q: Sequence[float], v: Sequence[float]) -> np.ndarray:
    """x0 = (q, v), ``ValueError`` unless both are the model's length and finite."""
    n = model.nv
    x0 = np.concatenate([np.asarray(q, float), np.asarray(v, float)])
    if x0.shape != (2 * n,) or not np.all(np.isfinite(x0)):
        raise ValueError(f"the start state must be {n} finite positions and {n} velocities")
    return x0


def _limit_box(model: RobotModel, x0: np.ndarray, speed_fraction: float, limit_margin: float,
               weight: float) -> tuple[BoxCost, np.ndarray]:
    """The penalty outside ``speed_fraction`` of the URDF speed limits and ``limit_margin``
    inside the position limits (widened to hold x0), and the speeds' scale (v_max, 1 where
    none)."""
    vmax = np.asarray(model.velocity_limit, float)
    scale = np.where(np.isfinite(vmax) & (vmax > 0), vmax, 1.0)
    lower = np.concatenate([np.asarray(model.position_lower, float) + limit_margin,
                            -speed_fraction * np.where(np.isfinite(vmax), vmax, np.inf)])
    upper = np.concatenate([np.asarray(model.position_upper, float) - limit_margin,
                            speed_fraction * np.where(np.isfinite(vmax), vmax, np.inf)])
    return BoxCost(np.minimum(lower, x0), np.maximum(upper, x0), weight), scale


def swing_problem(model: RobotModel, q: Sequence[float], v: Sequence[float], frame: str,
                  targets: np.ndarray, dt: float = 0.005, path_weight: float = 1e3,
                  speed_fraction: float = 0.9, limit_margin: float = 0.05,
                  box_weight: float = 1e4, speed_weight: float = 0.1, rest_weight: float = 10.0,
                  torque_weight: float = 1e-3, rotations: np.ndarray | None = None,
                  rotation_weight: float | None = None, resolve_friction: bool = False,
                  brake_kp: float = 25.0, brake_kd: float = 10.0) -> Problem:
    """Keep ``frame`` at ``targets`` [m] (N + 1 positions, root coordinates: knot k's at
    k dt after the start) from (``q``, ``v``) while the passive joints (a motor that failed
    under a load) swing free, torque-limited: costs ``path_weight`` ½|p_k − p*_k|² at every
    knot (``FramePathCost``, and at the end), with ``rotations`` (N + 1 rotation matrices, a
    pose task's) ``rotation_weight`` (3 − tr R_k R*_kᵀ) too (by default ``path_weight``
    × (``ROTATION_LENGTH``)² / 2: a turn of 1 mrad costs as much as the hand 0.1 mm off),
    ``speed_weight`` Σ (v_i/v_max,i)² along the way
    and ``rest_weight`` at the end (the swing brought to rest), ``torque_weight`` |u|², and
    ``box_weight`` on any excess over ``speed_fraction`` of each joint's URDF speed limit or
    within ``limit_margin`` [rad|m] of its position limits. The first guess: of the torques
    that hold the start configuration, constant, and the active joints braked to where they
    are (``brake_kp``, ``brake_kd``, as ``arrest_problem``'s), the one whose rollout costs
    less: the constant torques let a loaded arm moving at the failure fall away, the brake
    stops an arm that was coasting along its path (doc/failure_analysis.md).
    ``resolve_friction``: the passive joints' friction widened until the step resolves it
    (``resolved_passive_forces``); else the URDF's."""
    targets = np.asarray(targets, dtype=float)
    if targets.ndim != 2 or targets.shape[0] < 2 or targets.shape[1] != 3:
        raise ValueError(f"targets: give N + 1 >= 2 positions (rows x y z), got shape "
                         f"{targets.shape}")
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be > 0 s, got {dt}")
    if rotations is not None:
        rotations = np.asarray(rotations, dtype=float)
        if rotations.shape != (len(targets), 3, 3):
            raise ValueError(f"rotations: give one (3, 3) rotation per target "
                             f"({len(targets)}), got shape {rotations.shape}")
    if rotation_weight is None:
        rotation_weight = 0.5 * path_weight * ROTATION_LENGTH**2
    n = model.nv
    x0 = _start_state(model, q, v)
    step = _step(model, x0[:n], dt, resolve_friction)
    box, scale = _limit_box(model, x0, speed_fraction, limit_margin, box_weight)
    rest = np.zeros(2 * n)
    running = CostSum([FramePathCost(model, frame, targets[:-1], path_weight,
                                     rotations=None if rotations is None else rotations[:-1],
                                     rotation_weight=rotation_weight),
                       StateCost(rest, np.concatenate([np.zeros(n), speed_weight / scale**2])),
                       ControlCost(torque_weight, step.nu), box])
    terminal = CostSum([FrameCost(model, frame, position=targets[-1],
                                  rotation=None if rotations is None else rotations[-1],
                                  position_weight=path_weight,
                                  rotation_weight=rotation_weight),
                        StateCost(rest, np.concatenate([np.zeros(n), rest_weight / scale**2])),
                        box])
    braked, braked_xs = step.braked_rollout(x0, len(targets) - 1, brake_kp, brake_kd)
    held = np.tile(step.holding_torques(x0[:n]), (len(braked), 1))
    held_xs = _rolled_out(step, x0, held)
    if _total_cost(held, held_xs, running, terminal) <= _total_cost(braked, braked_xs, running,
                                                                     terminal):
        return Problem(step, x0, held, running, terminal, held_xs)
    return Problem(step, x0, braked, running, terminal, braked_xs)


def _rolled_out(step: HybridStep, x0: np.ndarray, us: np.ndarray) -> np.ndarray:
    """The states of the controls ``us`` from ``x0`` (NaN if they stop being finite)."""
    xs = np.zeros((len(us) + 1, step.nx))
    if not step.rollout(x0, us, xs, np.zeros((len(us), step.nu, step.nx)), np.zeros_like(us),
                        0.0, step.lower, step.upper, xs, us.copy()):
        xs[:] = np.nan
    return xs


def _total_cost(us: np.ndarray, xs: np.ndarray, running: Cost, terminal: Cost) -> float:
    """The cost of a rollout (inf where it diverged)."""
    if not np.all(np.isfinite(xs)):
        return np.inf
    return float(running.total(xs[:-1], us) + terminal.value(xs[-1], None))


def write_solution(solution: Solution, problem: Problem, out: Path | str) -> list[Path]:
    """trajectory.csv (t, q, v of every joint, u of the active ones), solution.npz (xs, us,
    K, dt, names) and trajectory.png (when matplotlib is installed) in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    step, model = problem.step, problem.step.model
    n, N = model.nv, len(solution.us)
    t = step.dt * np.arange(N + 1)
    us = np.vstack([solution.us, np.full((1, step.nu), np.nan)])  # no control at the end
    names = list(model.joint_names)
    active = list(model.active_joints)
    written = [out / "trajectory.csv", out / "solution.npz"]
    with open(written[0], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t"] + [f"q_{j}" for j in names] + [f"v_{j}" for j in names]
                   + [f"u_{j}" for j in active])
        for k in range(N + 1):
            w.writerow([f"{t[k]:.6g}", *(f"{x:.9g}" for x in solution.xs[k]),
                        *("" if np.isnan(u) else f"{u:.9g}" for u in us[k])])
    np.savez(written[1], xs=solution.xs, us=solution.us, K=solution.K, dt=step.dt,
             joint_names=np.array(names), active_joints=np.array(active),
             cost=solution.cost, gradient=solution.gradient)
    from ..scenarios.harness import pyplot

    plt = pyplot()
    if plt is not None:
        fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
        for i, name in enumerate(names):
            axes[0].plot(t, solution.xs[:, i], label=name)
            axes[1].plot(t, solution.xs[:, n + i], label=name)
        for i, name in enumerate(active):
            axes[2].step(t[:-1], solution.us[:, i], where="post", label=name)
        for ax, label in zip(axes, ("q [rad|m]", "v [rad/s|m/s]", "u [N·m|N]")):
            ax.set_ylabel(label)
            ax.grid(True)
            ax.legend(loc="upper right", fontsize="small")
        axes[2].set_xlabel("t [s]")
        axes[0].set_title(f"{model.name}: optimised trajectory (cost {solution.cost:.4g})")
        fig.tight_layout()
        written.append(out / "trajectory.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written
