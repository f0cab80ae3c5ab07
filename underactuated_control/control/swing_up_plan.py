"""The planned strategy of mode ``swing_up``: a torque-limited swing-up optimised through the
hybrid recursion, tracked with time-varying LQR (ROS-free).

**Plan.** ``plan_swing_up`` solves, with the box DDP of ``optimal_control`` (dynamics: the
hybrid recursion, x = (q, v), u = the motor torque within ±τ_max, the passive joint driven by
its passive-force model), the problem (normalised units: angles in rad, speeds in ω0, torque in
τ_max; Δt the plan's step)

    min  Σ_k Δt [w_q |q_k − q_up|² + w_v |v_k/ω0|² + w_u (τ_k/τ_max)² + w_r (τ̇_k/(τ_max ω0))²]
         + w_T [|q_N − q_up|² + |v_N/ω0|²]                                        (P1)

from the state the plan starts at (hanging at rest for the first plan). With w_r > 0 the plan
runs through the law's command filter (``FilteredTorques``: τ is a state, the control is the
command, τ̇ = a (u − τ)/Δt); with w_r = 0 the control is the torque. The weights trade the
criteria the swing-up leaderboards score (``scoring.py``): w_u the torque cost and the energy,
w_v the velocity cost, w_q and the horizon the swing-up time. Both 2π branches of an upright a
continuous joint reaches equally far are planned, and the cheaper plan kept.

**Tracking.** Between knots the state, torque and Riccati gain of the plan are interpolated
linearly (a smooth torque: the leaderboards score its smoothness), and the motor torque is

    τ = clip(ū(t) + K(t) (x − x̄(t)), −τ_max, τ_max)                              (P2)

the DDP's feedback gains K = −Q_uu⁻¹ Q_ux being the finite-horizon (time-varying) LQR of the
plan's linearisation. The law hands over to its balancing LQR inside the region of attraction
(``swing_up_law``) and re-plans when the state is ``plan_deviation`` away from the plan
(a knock) or the plan has ended without reaching it.

**Re-planning.** The motors give zero torque while a new plan is computed; the plan starts
from the state the model predicts ``plan_replan_time`` after the request (zero torque, RK4), so
it is ready, and tracked, from that time on (in a background thread in the node; inline in
the in-process loops, which makes their runs repeatable).

**Cache.** A plan depends on the model (inertias, kinematics, limits, damping and friction, the
passive set), on (P1)'s weights and on its start; ``PlanCache`` keeps plans on disk under a
key hashed from all of them (``plan_cache_dir``; default ``$XDG_CACHE_HOME`` or ``~/.cache``
/underactuated_control/swing_up_plans).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import RobotModel
from ..optimal_control import (
    ControlCost,
    Cost,
    CostSum,
    FilteredTorques,
    HybridStep,
    StateCost,
    solve_box_ddp,
)
from ..optimal_control.background import BackgroundPlanner
from ..optimal_control.kernels import backward_pass

__all__ = ["SwingUpPlan", "PlanWeights", "plan_swing_up", "plan_key", "tracking_gains",
           "CommandRateCost", "PlanCache", "PlanTracker", "BackgroundPlanner",
           "default_cache_dir"]

_FORMAT = 1  # bump when the plan's definition changes (old cache entries are then ignored)


@dataclass(frozen=True)
class PlanWeights:
    """(P1)'s horizon [s], step [s], weights (normalised units, see the module docstring) and
    the motor's filter time constant [s] (0: the plan commands the torque directly)."""

    horizon: float = 3.0
    dt: float = 0.01
    state: float = 0.01
    velocity: float = 0.001
    torque: float = 0.1
    rate: float = 0.0
    terminal: float = 1e4
    filter_time: float = 0.0
    tracking: float = 0.0
    iterations: int = 300


@dataclass(frozen=True)
class SwingUpPlan:
    """States ``xs`` (N+1, nx) and commands ``us`` (N,) every ``dt`` seconds, gains ``K``
    (N, nx) of (P2), in the plan's coordinates (the upright at ``goal``); nx = 4, or 5 with
    the filtered torque last (``filter_time`` > 0)."""

    dt: float
    xs: np.ndarray
    us: np.ndarray
    K: np.ndarray
    goal: np.ndarray
    cost: float
    converged: bool
    iterations: int
    filter_time: float = 0.0

    @property
    def duration(self) -> float:
        return self.dt * len(self.us)


def _goals(model: RobotModel, q0: np.ndarray, q_up: np.ndarray) -> list[np.ndarray]:
    """The upright's 2π branches nearest to q0 (continuous joints; both where equally far)."""
    goals = [np.array(q_up, float)]
    for j in range(model.nv):
        if not (np.isinf(model.position_lower[j]) and np.isinf(model.position_upper[j])):
            continue
        branches = []
        for g in goals:
            e = q0[j] - g[j]
            turns = np.round(e / (2 * np.pi))
            near = g.copy()
            near[j] += 2 * np.pi * turns
            branches.append(near)
            rest = e - 2 * np.pi * turns
            if abs(abs(rest) - np.pi) < 0.3:  # about as far the other way round
                other = near.copy()
                other[j] += 2 * np.pi * np.sign(rest)
                branches.append(other)
        goals = branches
    return goals


def plan_swing_up(model: RobotModel, x0: np.ndarray, q_up: np.ndarray, effort_limit: float,
                  omega0: float, weights: PlanWeights = PlanWeights(),
                  progress=None) -> SwingUpPlan:
    """Solve (P1) from ``x0`` = (q, v[, τ]) to the upright ``q_up`` (its nearest 2π
    branches)."""
    w = weights
    n = model.nv
    step = HybridStep(model, w.dt)
    step.lower, step.upper = np.array([-effort_limit]), np.array([effort_limit])
    filtered = w.filter_time > 0.0
    dynamics = FilteredTorques(step, w.filter_time) if filtered else step
    x0 = np.zeros(dynamics.nx) if x0 is None else np.array(x0, float)
    if x0.size == 2 * n and filtered:
        x0 = np.append(x0, 0.0)
    N = max(1, int(round(w.horizon / w.dt)))
    speed, torque = 1.0 / omega0 ** 2, 1.0 / effort_limit ** 2
    running_weights = [w.state] * n + [w.velocity * speed] * n
    terminal_weights = [1.0] * n + [speed] * n
    if filtered:  # the torque is a state: its cost there, and its rate (u − τ) a/Δt
        running_weights.append(w.torque * torque)
        terminal_weights.append(torque)
    best: SwingUpPlan | None = None
    for goal in _goals(model, x0[:n], q_up):
        target = np.concatenate([goal, np.zeros(dynamics.nx - n)])
        terms: list[Cost] = [StateCost(target, 2.0 * w.dt * np.array(running_weights))]
        if filtered:
            rate = dynamics.a / w.dt / (effort_limit * omega0)
            terms.append(CommandRateCost(2.0 * w.dt * w.rate * rate ** 2, 1))
            terms.append(ControlCost(1e-9 * torque, 1))
        else:
            terms.append(ControlCost(2.0 * w.dt * w.torque * torque, 1))
        terminal = StateCost(target, 2.0 * w.terminal * np.array(terminal_weights))
        solution = solve_box_ddp(dynamics, x0, np.zeros((N, 1)), CostSum(terms), terminal,
                                 max_iterations=w.iterations, tolerance=1e-9,
                                 progress=progress)
        gains = solution.K[:, 0, :] if w.tracking <= 0.0 else tracking_gains(
            dynamics, solution.xs, solution.us,
            w.tracking * np.array([1.0] * n + [speed] * n + [torque] * (dynamics.nx - 2 * n)),
            np.array([torque]))
        plan = SwingUpPlan(w.dt, solution.xs, solution.us[:, 0], gains, goal,
                           float(solution.cost), bool(solution.converged),
                           int(solution.iterations), w.filter_time)
        if best is None or plan.cost < best.cost:
            best = plan
    assert best is not None
    return best


def tracking_gains(dynamics, xs: np.ndarray, us: np.ndarray, q: np.ndarray, r: np.ndarray
                   ) -> np.ndarray:
    """K (N, nx) of the finite-horizon discrete LQR of the trajectory's linearisation with
    stage cost Δxᵀ diag(q) Δx + Δuᵀ diag(r) Δu and final cost 10 Δxᵀ diag(q) Δx (the
    DDP's backward pass (1)–(7) with no bounds): the time-varying LQR that tracks it."""
    N, nu = us.shape
    nx = xs.shape[1]
    Fx, Fu = np.empty((N, nx, nx)), np.empty((N, nx, nu))
    dynamics.linearize(xs, us, Fx, Fu)
    lxx = np.broadcast_to(np.diag(q), (N, nx, nx)).copy()
    luu = np.broadcast_to(np.diag(r), (N, nu, nu)).copy()
    K, kff = np.zeros((N, nu, nx)), np.zeros((N, nu))
    unbounded = np.full(nu, np.inf)
    ok, _, _ = backward_pass(Fx, Fu, np.zeros((N, nx)), np.zeros((N, nu)), lxx, luu,
                             np.zeros((N, nu, nx)), np.zeros(nx), 10.0 * np.diag(q), us,
                             -unbounded, unbounded, 0.0, K, kff)
    if not ok:
        raise np.linalg.LinAlgError("tracking LQR: the Riccati recursion failed")
    return K[:, 0, :]


class CommandRateCost(Cost):
    """½ w Σ (u_i − τ_i)² with τ the last ``nu`` state entries (``FilteredTorques``): the
    filtered torque's rate is a (u − τ)/Δt."""

    def __init__(self, weight: float, nu: int) -> None:
        self.weight, self.nu = float(weight), nu

    def value(self, x, u):
        if u is None:
            return 0.0
        e = u - x[-self.nu:]
        return 0.5 * self.weight * float(e @ e)

    def add_derivatives(self, x, u, d):
        if u is None:
            return 0.0
        e = self.weight * (u - x[-self.nu:])
        d.lu += e
        d.lx[-self.nu:] -= e
        for i in range(self.nu):
            j = x.size - self.nu + i
            d.luu[i, i] += self.weight
            d.lxx[j, j] += self.weight
            d.lux[i, j] -= self.weight
        return self.value(x, u)

    def total(self, xs, us):
        e = us - xs[:, -self.nu:]
        return 0.5 * self.weight * float(np.sum(e * e))

    def add_all_derivatives(self, xs, us, d):
        e = self.weight * (us - xs[:, -self.nu:])
        d.lu += e
        d.lx[:, -self.nu:] -= e
        nx = xs.shape[1]
        for i in range(self.nu):
            j = nx - self.nu + i
            d.luu[:, i, i] += self.weight
            d.lxx[:, j, j] += self.weight
            d.lux[:, i, j] -= self.weight


# ====================================================================== disk cache
def default_cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "underactuated_control" / "swing_up_plans"


def plan_key(model: RobotModel, x0: np.ndarray, q_up: np.ndarray, effort_limit: float,
             weights: PlanWeights) -> str:
    """A hash of everything (P1)'s solution depends on."""
    digest = hashlib.sha256(f"format {_FORMAT} {weights!r} {effort_limit!r}".encode())
    for a in (model.gravity, model.parent, model.hinge_type, model.axis, model.tree_rotation,
              model.tree_translation, model.inertia, model.damping, model.friction,
              model.position_lower, model.position_upper, model.passive_joint_mask,
              np.asarray(x0, float), np.asarray(q_up, float)):
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:32]


class PlanCache:
    """Plans on disk (``<dir>/<key>.npz``); unreadable entries are computed again."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()

    def load(self, key: str) -> SwingUpPlan | None:
        path = self.directory / f"{key}.npz"
        try:
            with np.load(path) as f:
                return SwingUpPlan(float(f["dt"]), f["xs"], f["us"], f["K"], f["goal"],
                                   float(f["cost"]), bool(f["converged"]), int(f["iterations"]),
                                   float(f["filter_time"]))
        except (OSError, KeyError, ValueError):
            return None

    def store(self, key: str, plan: SwingUpPlan) -> None:
        """Best effort (a read-only home must not stop the controller)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{key}.{os.getpid()}.npz"
            np.savez(tmp, dt=plan.dt, xs=plan.xs, us=plan.us, K=plan.K, goal=plan.goal,
                     cost=plan.cost, converged=plan.converged, iterations=plan.iterations,
                     filter_time=plan.filter_time)
            os.replace(tmp, self.directory / f"{key}.npz")
        except OSError:
            pass


# ====================================================================== tracking (P2)
class PlanTracker:
    """Follows one plan from ``start`` [s] (the law's clock); ``offset`` maps the plan's
    coordinates to the measured ones (2π turns of continuous joints)."""

    def __init__(self, plan: SwingUpPlan, start: float, offset: np.ndarray) -> None:
        self.plan, self.start = plan, float(start)
        self.offset = np.asarray(offset, float)
        self._x = np.empty(plan.xs.shape[1])

    def ended(self, t: float) -> bool:
        return t - self.start >= self.plan.duration

    def reference(self, t: float) -> tuple[np.ndarray, float, np.ndarray]:
        """(x̄(t), ū(t), K(t)): linear interpolation between knots."""
        p = self.plan
        s = min(max((t - self.start) / p.dt, 0.0), len(p.us) - 1.0)
        k = min(int(s), len(p.us) - 2) if len(p.us) > 1 else 0
        f = s - k
        x = (1 - f) * p.xs[k] + f * p.xs[k + 1]
        if len(p.us) == 1:
            return x, float(p.us[0]), p.K[0]
        u = (1 - f) * p.us[k] + f * p.us[k + 1]
        return x, float(u), (1 - f) * p.K[k] + f * p.K[k + 1]

    def error(self, t: float, q: np.ndarray, v: np.ndarray, torque: float) -> np.ndarray:
        """x − x̄(t) (x = (q, v[, τ]) in the plan's coordinates)."""
        x_ref, _, _ = self.reference(t)
        n = len(q)
        self._x[:n] = q - self.offset - x_ref[:n]
        self._x[n:2 * n] = v - x_ref[n:2 * n]
        if self._x.size > 2 * n:
            self._x[2 * n] = torque - x_ref[2 * n]
        return self._x

    def command(self, t: float, q: np.ndarray, v: np.ndarray, torque: float, limit: float
                ) -> float:
        """(P2); ``torque``: the filtered torque (a plan with a filter), else unused."""
        _, u, K = self.reference(t)
        e = self.error(t, q, v, torque)
        return float(np.clip(u + K @ e, -limit, limit))
