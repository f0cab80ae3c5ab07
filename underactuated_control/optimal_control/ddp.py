"""Box-constrained DDP (control-limited iLQR, Tassa, Mansard & Todorov 2014).

Minimise Σ_k l(x_k, u_k) + l_N(x_N) subject to x_{k+1} = f(x_k, u_k), x_0 given, and
lower ≤ u_k ≤ upper (the active joints' effort limits). Each iteration:

Backward pass (V_x, V_xx from the final cost), for k = N−1 … 0:
    Q_x  = l_x + F_xᵀ V_x                 Q_u  = l_u + F_uᵀ V_x                        (1)
    Q_xx = l_xx + F_xᵀ V_xx F_x           Q_uu = l_uu + F_uᵀ V_xx F_u + μ I            (2)
    Q_ux = l_ux + F_uᵀ V_xx F_x                                                      (3)
    k = argmin ½ δuᵀ Q_uu δu + Q_uᵀ δu  s.t. lower ≤ u_k + δu ≤ upper  (projected Newton)  (4)
    K_f = −Q_uu,ff⁻¹ Q_ux,f on the free controls, K_c = 0 on the clamped ones              (5)
    V_x  = Q_x + Kᵀ Q_uu k + Kᵀ Q_u + Q_uxᵀ k                                            (6)
    V_xx = Q_xx + Kᵀ Q_uu K + Kᵀ Q_ux + Q_uxᵀ K                                          (7)
Forward pass with step α: u_k = clip(ū_k + α k_k + K_k (x_k − x̄_k)), accepted when the cost
falls by at least a tenth of the expected ΔV(α) = α Σ kᵀQ_u + ½ α² Σ kᵀQ_uu k.          (8)
μ grows when Q_uu is not positive definite or no step is accepted, and shrinks otherwise.

The returned gains K_k are the Riccati feedback of the last backward pass: a tracking law
u = ū_k + K_k (x − x̄_k), clipped to the limits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .costs import Cost, Derivatives
from .kernels import backward_pass, box_qp_kernel

__all__ = ["Solution", "solve_box_ddp", "box_qp", "cost_gradient"]


@dataclass
class Solution:
    """An optimised trajectory: states ``xs`` (N+1, nx), controls ``us`` (N, nu), feedback
    gains ``K`` (N, nu, nx); ``cost``; ``gradient``: the largest projected gradient of the
    total cost over the controls (first-order optimality: 0 at a box-constrained optimum)."""

    xs: np.ndarray
    us: np.ndarray
    K: np.ndarray
    cost: float
    iterations: int
    converged: bool
    gradient: float
    history: list[float] = field(default_factory=list)

    def control(self, k: int, x: np.ndarray, lower: np.ndarray, upper: np.ndarray
                ) -> np.ndarray:
        """The tracking law u = ū_k + K_k (x − x̄_k), within the limits."""
        return np.clip(self.us[k] + self.K[k] @ (x - self.xs[k]), lower, upper)


def box_qp(H: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray,
           x0: np.ndarray, iterations: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """argmin ½ xᵀHx + gᵀx on lower ≤ x ≤ upper (H positive definite) by projected Newton
    with an Armijo search (``kernels.box_qp_kernel``); returns (x, free mask).
    ``np.linalg.LinAlgError`` when H is not positive definite on the free set."""
    x = np.array(x0, dtype=float)
    free = np.ones(x.size, dtype=bool)
    if not box_qp_kernel(np.ascontiguousarray(H, dtype=float), np.asarray(g, dtype=float),
                         np.asarray(lower, dtype=float), np.asarray(upper, dtype=float), x,
                         free, iterations):
        raise np.linalg.LinAlgError("box QP: H is not positive definite on the free set")
    return x, free


def cost_gradient(step, xs: np.ndarray, us: np.ndarray, running: Cost, terminal: Cost
                  ) -> np.ndarray:
    """∂J/∂u_k of the total cost along a rollout, by the adjoint recursion
    λ_N = ∂l_N/∂x, λ_k = l_x + F_xᵀ λ_{k+1}, ∂J/∂u_k = l_u + F_uᵀ λ_{k+1}."""
    N, nx, nu = len(us), xs.shape[1], us.shape[1]
    Fx, Fu = np.empty((N, nx, nx)), np.empty((N, nx, nu))
    step.linearize(xs, us, Fx, Fu)
    d = Derivatives.zeros(nx, nu)
    terminal.add_derivatives(xs[-1], None, d)
    lam = d.lx.copy()
    knots = Derivatives(np.zeros((N, nx)), np.zeros((N, nu)), np.zeros((N, nx, nx)),
                        np.zeros((N, nu, nu)), np.zeros((N, nu, nx)))
    running.add_all_derivatives(xs[:-1], us, knots)  # every knot's (path costs need them all)
    grad = np.empty_like(us)
    for k in range(N - 1, -1, -1):
        grad[k] = knots.lu[k] + Fu[k].T @ lam
        lam = knots.lx[k] + Fx[k].T @ lam
    return grad


def _projected(grad: np.ndarray, us: np.ndarray, lower: np.ndarray, upper: np.ndarray
               ) -> float:
    """Largest gradient component a feasible move could still use (KKT residual)."""
    g = grad.copy()
    g[(us <= lower) & (g > 0)] = 0.0
    g[(us >= upper) & (g < 0)] = 0.0
    return float(np.max(np.abs(g))) if g.size else 0.0


def solve_box_ddp(step, x0: np.ndarray, us_init: np.ndarray, running: Cost, terminal: Cost,
                  *, max_iterations: int = 200, tolerance: float = 1e-8,
                  lower: np.ndarray | None = None, upper: np.ndarray | None = None,
                  regularization: float = 1e-6,
                  progress: Callable[[int, float, float], None] | None = None,
                  deadline: float | None = None) -> Solution:
    """Minimise the cost from ``x0`` starting with the controls ``us_init`` (N, nu).

    ``step`` is the dynamics (``HybridStep`` or anything with ``__call__(x, u)``,
    ``derivatives(x, u) -> (x', F_x, F_u)`` and, unless given here, ``lower``/``upper``).
    Stops when the expected decrease falls below ``tolerance`` (relative to the cost).
    ``progress(iteration, cost, step)`` is called after each iteration. ``deadline``: a
    ``time.perf_counter()`` value; the iterations stop after the first that ends past it (the
    solution as it stands, ``converged`` False: a wall-time budget)."""
    x0 = np.asarray(x0, dtype=float)
    lower, upper = _bounds(step, lower, upper, us_init)
    us_init = np.clip(np.array(us_init, dtype=float), lower, upper)
    N, nu = us_init.shape
    nx = x0.size
    K = np.zeros((N, nu, nx))
    kff = np.zeros((N, nu))
    xs, us = np.zeros((N + 1, nx)), np.empty((N, nu))
    trial_xs, trial_us = np.empty_like(xs), np.empty_like(us)
    if not step.rollout(x0, us_init, xs, K, kff, 0.0, lower, upper, xs, us):
        raise ValueError("the initial controls drive the state to non-finite values")
    cost = running.total(xs[:-1], us) + terminal.value(xs[-1], None)
    history = [cost]
    Fx = np.empty((N, nx, nx))
    Fu = np.empty((N, nx, nu))
    stacked = Derivatives(np.zeros((N, nx)), np.zeros((N, nu)), np.zeros((N, nx, nx)),
                          np.zeros((N, nu, nu)), np.zeros((N, nu, nx)))
    final = Derivatives.zeros(nx, nu)
    mu, converged, iteration = regularization, False, 0
    for iteration in range(1, max_iterations + 1):
        step.linearize(xs, us, Fx, Fu)  # derivatives along the current trajectory
        stacked.clear()
        running.add_all_derivatives(xs[:-1], us, stacked)
        final.clear()
        terminal.add_derivatives(xs[-1], None, final)
        while True:  # backward pass, (1)–(7)
            ok, d1, d2 = backward_pass(Fx, Fu, stacked.lx, stacked.lu, stacked.lxx,
                                       stacked.luu, stacked.lux, final.lx, final.lxx, us,
                                       lower, upper, mu, K, kff)
            if ok:
                break
            mu = max(mu * 10.0, 1e-8)
            if mu > 1e10:
                raise RuntimeError("DDP: Q_uu stays indefinite (regularisation above 1e10); "
                                   "check the costs' Hessians")
        accepted = False
        for alpha in (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.01, 0.003, 0.001):  # (8)
            if not step.rollout(x0, us, xs, K, kff, alpha, lower, upper, trial_xs, trial_us):
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                new_cost = running.total(trial_xs[:-1], trial_us) + \
                    terminal.value(trial_xs[-1], None)
            if not np.isfinite(new_cost):
                continue
            expected = -(alpha * d1 + 0.5 * alpha * alpha * d2)
            if expected <= 0.0 or cost - new_cost >= 0.1 * expected:
                accepted = cost - new_cost >= 0.0
                break
        if accepted:
            xs, trial_xs = trial_xs, xs
            us, trial_us = trial_us, us
            cost = new_cost
            mu = max(mu / 4.0, regularization)
        else:
            mu *= 10.0
        history.append(cost)
        if progress is not None:
            progress(iteration, cost, alpha if accepted else 0.0)
        if -d1 - 0.5 * d2 < tolerance * max(1.0, abs(cost)) or mu > 1e10:
            converged = mu <= 1e10
            break
        if deadline is not None and time.perf_counter() >= deadline:
            break
    gradient = _projected(cost_gradient(step, xs, us, running, terminal), us, lower, upper)
    return Solution(xs, us, K, cost, iteration, converged, gradient, history)


def _bounds(step, lower, upper, us_init) -> tuple[np.ndarray, np.ndarray]:
    nu = np.shape(us_init)[1]
    lo = getattr(step, "lower", None) if lower is None else lower
    hi = getattr(step, "upper", None) if upper is None else upper
    lo = np.full(nu, -np.inf) if lo is None else np.asarray(lo, float)
    hi = np.full(nu, np.inf) if hi is None else np.asarray(hi, float)
    return lo, hi
