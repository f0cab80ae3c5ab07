"""Can any torque-limited motion arrest the fall after a motor fails under gravity?

For each failed joint of issue 23's xarm7 (damping 0.3 N m s/rad, friction 0.05 N m, at rest
at ``failure_cases.Q0``) this solves ``optimal_control.problems.arrest_problem`` (box DDP
through the hybrid recursion's derivatives) under several cost settings and reports, per
setting, the plan's peak |v|/v_max and its largest excursion beyond a position limit, next to
the braked hold's own prediction (the plan's first guess). A setting whose plan keeps both
(peak ≤ 1.0, inside the limits) shows that the fall can be arrested; none doing so is the
optimiser's evidence (local, not a proof) that it cannot (doc/failure_analysis.md, "The
predictive layer").

    PYTHONPATH=. .venv/bin/python bench/arrest_feasibility.py [--joints 2 4]
        [--json bench/results/arrest_feasibility.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from failure_cases import DAMPING, FRICTION, Q0, arm_text

from underactuated_control import RobotModel
from underactuated_control.control.failure_reaction import trajectory_excess
from underactuated_control.optimal_control import solve_box_ddp
from underactuated_control.optimal_control.problems import arrest_problem

# (speed box fraction of v_max, horizon s, pull to the start, box weight)
SETTINGS = [(0.9, 1.5, 0.1, 1e4), (0.9, 2.5, 0.1, 1e4), (0.9, 1.5, 0.0, 1e4),
            (1.1, 1.5, 0.1, 1e4), (1.1, 2.5, 0.0, 1e3), (0.9, 3.0, 0.0, 1e5)]


def _excess(xs: np.ndarray, model: RobotModel) -> tuple[float, float]:
    """Peak |v|/v_max and excursion past a position limit, as the failure reaction judges
    them; inf for a diverged rollout."""
    if not np.all(np.isfinite(xs)):
        return np.inf, np.inf
    return trajectory_excess(model, xs)[:2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--joints", nargs="+", type=int, default=list(range(2, 8)),
                    help="failed joints (xarm7 joint numbers)")
    ap.add_argument("--iterations", type=int, default=600)
    ap.add_argument("--json", type=Path, default=Path("bench/results/arrest_feasibility.json"))
    args = ap.parse_args()
    full = RobotModel.from_urdf(arm_text("xarm7", DAMPING, FRICTION))
    rows = []
    print(f"{'failed':>7} {'speed box':>9} {'horizon':>7} {'pull':>5} {'box w':>7} "
          f"{'braked peak':>11} {'over rad':>8} {'plan peak':>9} {'over rad':>8} {'it':>4} "
          f"{'s':>5}")
    for j in args.joints:
        name = f"joint{j}"
        model = full.with_passive([name])
        for fraction, horizon, pull, weight in SETTINGS:
            t0 = time.perf_counter()
            p = arrest_problem(model, Q0, np.zeros(model.nv), horizon=horizon,
                               speed_fraction=fraction, stay_weight=pull, box_weight=weight)
            bp, bo = _excess(p.first_guess, model)
            try:
                sol = solve_box_ddp(p.step, p.x0, p.us_init, p.running, p.terminal,
                                    max_iterations=args.iterations)
            except ValueError:  # the braked model diverges: nothing to start from
                print(f"{name:>7}: the braked model diverges at {p.step.dt * 1e3:g} ms knots "
                      "(a failed joint's damping time constant is below the step): no plan")
                break
            seconds = time.perf_counter() - t0
            pp, po = _excess(sol.xs, model)
            rows.append({"failed": name, "speed_fraction": fraction, "horizon_s": horizon,
                         "pull": pull, "box_weight": weight, "braked_peak": bp,
                         "braked_overrun_rad": bo, "plan_peak": pp, "plan_overrun_rad": po,
                         "iterations": sol.iterations, "converged": sol.converged,
                         "seconds": seconds})
            print(f"{name:>7} {fraction:>9.1f} {horizon:>7.1f} {pull:>5.1f} {weight:>7.0e} "
                  f"{bp:>11.2f} {bo:>8.3f} {pp:>9.2f} {po:>8.3f} {sol.iterations:>4d} "
                  f"{seconds:>5.1f}", flush=True)
        ok = [r for r in rows if r["failed"] == name and r["plan_peak"] <= 1.0
              and r["plan_overrun_rad"] == 0.0]
        tried = [r for r in rows if r["failed"] == name]
        verdict = ("arrestable" if ok else "no plan keeps the limits" if tried else
                   "not modelled at this step")
        print(f"{name}: {verdict}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1))
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
