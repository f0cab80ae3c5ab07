"""Design table of the snake scenario, offline (no ROS): for each design and start shape, the
smallest singular value of the head's J_G (x, y rows), the largest real part of the
linearised task-mode loop holding the head (its zero dynamics), and the head error of the
closed loop on MuJoCo (``scenarios.snake.simulate_offline``: the controller's task law at
1 kHz, the default 2 cm circle).

    .venv/bin/python bench/snake_offline.py [--duration 10] [--json bench/results/snake.json]

Each closed loop takes about as long as it simulates (a loaded machine: longer).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from underactuated_control import RobotModel
from underactuated_control.jacobians import generalized_jacobian
from underactuated_control.scenarios.snake import (
    HEAD,
    SnakeDesign,
    closed_loop_eigenvalues,
    initial_configuration,
    simulate_offline,
    snake_urdf,
)


def shapes(n: int) -> dict[str, np.ndarray]:
    i = np.arange(n)
    return {"C (bundled)": initial_configuration(n), "arc 0.25": np.full(n, 0.25),
            "zig-zag ±0.3": np.where(i % 2 == 0, 0.3, -0.3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="[s] of each closed loop")
    ap.add_argument("--links", type=int, nargs="+", default=[11, 12])
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    if not args.duration > 0:
        ap.error(f"--duration must be > 0 s, got {args.duration}")
    rows = []
    print(f"{'links':>5} {'start':>13} {'σ_min(J_G) m/(rad/s²)':>22} {'max Re λ 1/s':>13} "
          f"{'head RMS mm':>11} {'head max mm':>11} {'passive exc rad':>15} {'wall s':>6}")
    for n in args.links:
        urdf = snake_urdf(SnakeDesign(n_links=n))
        model = RobotModel.from_urdf(urdf)
        for name, q0 in shapes(n).items():
            sigma = float(np.linalg.svd(generalized_jacobian(model, q0, HEAD)[:2],
                                        compute_uv=False)[-1])
            rate = float(closed_loop_eigenvalues(urdf, q0)[0].real)
            t0 = time.perf_counter()
            try:
                m = simulate_offline(urdf, q0=q0, duration=args.duration).metrics
            except FloatingPointError as exc:  # a run that diverged
                m = {"head_rms_mm": float("nan"), "head_max_mm": float("nan"),
                     "passive_excursion_max_rad": float("nan"), "error": str(exc)}
            wall = time.perf_counter() - t0
            rows.append({"links": n, "start": name, "sigma_min": sigma, "max_re_eig": rate,
                         "wall_s": wall, **m})
            print(f"{n:>5} {name:>13} {sigma:>22.4f} {rate:>13.2f} {m['head_rms_mm']:>11.2f} "
                  f"{m['head_max_mm']:>11.2f} {m['passive_excursion_max_rad']:>15.2f} "
                  f"{wall:>6.1f}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"duration_s": args.duration, "rows": rows}, indent=1)
                             + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
