"""Scores of a swing-up run, as the public double-pendulum leaderboards compute them.

From a recorded run (time t (N,), joint positions q (N, n), velocities v (N, n), joint torques
tau (N, n) — zero for a passive joint — and the tip's height above the first joint):

- success: the tip is above ``height_fraction`` (0.9) of its full height from the swing-up time
  to the end of the run (the last sample included);
- swing-up time: the time of the first sample of that final stretch above the line;
- energy: Σ_k Σ_j |Δq_j,k · τ_j,k| (torque at the start of each interval), J;
- torque cost: Σ_k τ_kᵀ τ_k Δt_k, N²m²s;
- torque smoothness: Σ_j std(Δτ_j) over consecutive samples, N·m;
- velocity cost: Σ_k v_kᵀ v_k Δt_k, rad²/s;
- score: 1 − mean_i tanh(π c_i / n_i) over those five criteria with the normalisations
  n = (20 s, 60 J, 20 N²m²s, 0.1 N·m, 400 rad²/s) when successful, 0 otherwise.

``tip_heights``/``full_tip_height`` give the heights from a model (ROS-free; any URDF).
"""

from __future__ import annotations

import numpy as np

__all__ = ["NORMS", "criteria", "score", "score_run", "swing_up_time", "tip_heights",
           "full_tip_height", "upright_error"]

NORMS = {"swingup_time": 20.0, "energy": 60.0, "torque_cost": 20.0, "torque_smoothness": 0.1,
         "velocity_cost": 400.0}
UNITS = {"swingup_time": "s", "energy": "J", "torque_cost": "N²m²s", "torque_smoothness": "N·m",
         "velocity_cost": "rad²/s"}


def _as_2d(name: str, x, n: int) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] != n:
        raise ValueError(f"{name} must have one row per time sample ({n}), got shape "
                         f"{np.shape(x)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite entries")
    return a


def swing_up_time(t: np.ndarray, above: np.ndarray) -> float | None:
    """Time of the first sample of the final stretch with ``above`` true; None when the
    last sample is below the line."""
    above = np.asarray(above, bool)
    if above.size == 0 or not above[-1]:
        return None
    below = np.flatnonzero(~above)
    first = below[-1] + 1 if below.size else 0
    return float(np.asarray(t)[first])


def criteria(t, q, v, tau) -> dict[str, float]:
    """The four cost criteria that do not need the tip (see the module docstring)."""
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"t must be a 1-D array of at least 2 samples, got shape {t.shape}")
    if not np.all(np.diff(t) > 0):
        raise ValueError("t must be strictly increasing")
    n = t.size
    q, v, tau = _as_2d("q", q, n), _as_2d("v", v, n), _as_2d("tau", tau, n)
    if not (q.shape[1] == v.shape[1] == tau.shape[1]):
        raise ValueError(f"q, v and tau must have the same number of joints, got "
                         f"{q.shape[1]}, {v.shape[1]}, {tau.shape[1]}")
    dt = np.diff(t)
    return {
        "energy": float(np.sum(np.abs(np.diff(q, axis=0) * tau[:-1]))),
        "torque_cost": float(np.sum(np.sum(tau[:-1] ** 2, axis=1) * dt)),
        "torque_smoothness": float(np.sum(np.std(np.diff(tau, axis=0), axis=0))),
        "velocity_cost": float(np.sum(np.sum(v[:-1] ** 2, axis=1) * dt)),
    }


def score(values: dict[str, float], success: bool) -> float:
    """1 − mean_i tanh(π c_i / n_i) when successful, else 0."""
    if not success:
        return 0.0
    return float(1.0 - np.mean([np.tanh(np.pi * values[k] / NORMS[k]) for k in NORMS]))


def score_run(t, q, v, tau, tip_height, full_height: float, height_fraction: float = 0.9
              ) -> dict:
    """Every criterion, success and the score of one run (see the module docstring)."""
    t = np.asarray(t, dtype=float)
    h = np.asarray(tip_height, dtype=float)
    if h.shape != t.shape:
        raise ValueError(f"tip_height must have one value per time sample ({t.size}), got "
                         f"shape {h.shape}")
    if not (np.isfinite(full_height) and full_height > 0):
        raise ValueError(f"full_height must be > 0, got {full_height}")
    values = criteria(t, q, v, tau)
    t_up = swing_up_time(t, h > height_fraction * full_height)
    success = t_up is not None and t_up < t[-1]
    out = {"success": bool(success), "swingup_time": t_up if success else None, **values}
    values["swingup_time"] = t_up if success else float("inf")
    out["score"] = score(values, success)
    out["duration"] = float(t[-1] - t[0])
    out["threshold_height"] = float(height_fraction * full_height)
    return out


# ====================================================================== heights from a model
def _up(model) -> np.ndarray:
    g = np.asarray(model.gravity, dtype=float)
    return -g / np.linalg.norm(g)


def tip_heights(model, q, tip_frame: str, workspace=None) -> np.ndarray:
    """Height of ``tip_frame``'s origin above the first joint's origin, per row of q."""
    from .jacobians import JacobianWorkspace

    ws = JacobianWorkspace(model) if workspace is None else workspace
    model.frame(tip_frame)  # ValueError naming an unknown frame
    up = _up(model)
    q = np.atleast_2d(np.asarray(q, dtype=float))
    out = np.empty(len(q))
    for i, x in enumerate(q):
        ws.set_configuration(x)
        tip = ws.frame_placement(tip_frame)[0]
        out[i] = (tip - ws.p_world[0]) @ up
    return out


def full_tip_height(model, tip_frame: str, samples: int = 73) -> float:
    """The largest height of ``tip_frame`` above the first joint over all configurations
    (grid over every joint's range, then a shrinking pattern search)."""
    from .jacobians import JacobianWorkspace

    ws = JacobianWorkspace(model)
    nv = model.nv
    if nv > 3:
        raise ValueError(f"full_tip_height searches configurations of up to 3 joints; "
                         f"'{model.name}' has {nv}")
    lo = np.where(np.isfinite(model.position_lower), model.position_lower, -np.pi)
    hi = np.where(np.isfinite(model.position_upper), model.position_upper, np.pi)
    axes = [np.linspace(a, b, samples if nv <= 2 else 25) for a, b in zip(lo, hi)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, nv)
    h = tip_heights(model, grid, tip_frame, ws)
    q = grid[int(np.argmax(h))]
    best = float(h.max())
    step = (hi - lo) / samples
    while step.max() > 1e-10:
        improved = False
        for j in range(nv):
            for sgn in (1.0, -1.0):
                x = q.copy()
                x[j] = np.clip(x[j] + sgn * step[j], lo[j], hi[j])
                hx = float(tip_heights(model, x, tip_frame, ws)[0])
                if hx > best:
                    q, best, improved = x, hx, True
        if not improved:
            step = step / 2.0
    return best


def upright_error(q, q_up, continuous=None) -> np.ndarray:
    """Largest joint angle error from ``q_up`` per row (continuous joints wrapped to ±π)."""
    e = np.atleast_2d(np.asarray(q, dtype=float)) - np.asarray(q_up, dtype=float)
    wrap = np.ones(e.shape[1], bool) if continuous is None else np.asarray(continuous, bool)
    e[:, wrap] = (e[:, wrap] + np.pi) % (2 * np.pi) - np.pi
    return np.abs(e).max(axis=1)
