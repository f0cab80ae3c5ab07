"""Design table of the snake scenario, offline (no ROS): for each design and start shape, the
smallest singular value of the head's J_G (x, y rows), the largest real part of the
linearised task-mode loop holding the head (its zero dynamics), and the head error of the
closed loop on MuJoCo (``scenarios.snake.simulate_offline``: the controller's task law at
1 kHz, the default 2 cm circle).

    .venv/bin/python bench/snake_offline.py [--duration 10] [--json bench/results/snake.json]

``--starts N``: instead, the bundled snake's three laps (27 s) from N start shapes, the
bundled C shape and N - 1 seeded perturbations of it (each joint + N(0, ``--spread``²) rad),
with a command latency of 0, 1, 2 physics steps in turn; the head error per window of the
path (0-11 s: ramp and lap 1, then laps 2 and 3). How robust the three-lap goal is on starts
nobody tuned for (a DDS run starts where the hold before the path left the shape). With
``--drift``, also each window's passive-joint displacement split by the joints' momentum
balance (``scenarios.snake.passive_drift``): the largest |Δq_p|, |kinetic term| and
|momentum term| [rad] over the passive joints.

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
    SNAKE_URDF,
    SnakeDesign,
    closed_loop_eigenvalues,
    initial_configuration,
    passive_drift,
    simulate_offline,
    snake_urdf,
)


def shapes(n: int) -> dict[str, np.ndarray]:
    i = np.arange(n)
    return {"C (bundled)": initial_configuration(n), "arc 0.25": np.full(n, 0.25),
            "zig-zag ±0.3": np.where(i % 2 == 0, 0.3, -0.3)}


LAPS = ((0.0, 11.0), (11.0, 19.0), (19.0, 27.0))  # s of the default path: ramp + lap 1, 2, 3


def perturbed_starts(count: int, spread: float, seed: int = 0, drift: bool = False
                     ) -> list[dict]:
    """Three laps from the C shape and ``count`` - 1 perturbations of it (see the docstring)."""
    rng = np.random.default_rng(seed)
    q_c = initial_configuration(11)
    rows = []
    print(f"{'start':>5} {'max |Δq| rad':>12} {'latency':>7} {'RMS 0-27 s':>10} "
          f"{'ramp+lap 1':>10} {'lap 2':>7} {'lap 3':>7} {'max mm':>8} {'wall s':>6}")
    for k in range(count):
        dq = rng.normal(0.0, spread, q_c.size) if k else np.zeros(q_c.size)
        latency = k % 3
        t0 = time.perf_counter()
        res = simulate_offline(q0=q_c + dq, duration=LAPS[-1][1], delay_steps=latency)
        error = 1e3 * np.linalg.norm((res.head - res.goal)[:, :2], axis=1)
        laps = [float(np.sqrt(np.mean(error[(res.t >= a) & (res.t < b)] ** 2)))
                for a, b in LAPS]
        row = {"start": k, "max_abs_dq_rad": float(np.abs(dq).max()), "latency_steps": latency,
               "head_rms_mm": res.metrics["head_rms_mm"], "lap_rms_mm": laps,
               "head_max_mm": res.metrics["head_max_mm"],
               "wall_s": time.perf_counter() - t0}
        if drift:
            terms = passive_drift(RobotModel.from_urdf(SNAKE_URDF.read_text()), res.t, res.q,
                                  res.v, [(a, min(b, res.t[-1])) for a, b in LAPS])
            row["drift_rad"] = [{term: float(np.abs(w[term]).max()) for term in
                                 ("displacement", "kinetic", "momentum")} for w in terms]
        rows.append(row)
        print(f"{k:>5} {row['max_abs_dq_rad']:>12.3f} {latency:>7} {row['head_rms_mm']:>10.2f} "
              f"{laps[0]:>10.2f} {laps[1]:>7.2f} {laps[2]:>7.2f} {row['head_max_mm']:>8.1f} "
              f"{row['wall_s']:>6.1f}", flush=True)
        for (a, b), w in zip(LAPS, row.get("drift_rad", [])):
            print(f"{'':>5} {a:>4.0f}-{b:<3.0f} s: |Δq_p| {w['displacement']:.3f}, kinetic "
                  f"{w['kinetic']:.3f}, momentum {w['momentum']:.3f} rad", flush=True)
    kept = sum(r["head_rms_mm"] < 5.0 for r in rows)
    print(f"three laps within 5 mm RMS from {kept} of {count} starts; laps 1-2 within 5 mm "
          f"from {sum(max(r['lap_rms_mm'][:2]) < 5.0 for r in rows)}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="[s] of each closed loop")
    ap.add_argument("--links", type=int, nargs="+", default=[11, 12])
    ap.add_argument("--starts", type=int, default=0,
                    help="the three-lap study from this many start shapes instead (see above)")
    ap.add_argument("--spread", type=float, default=0.02,
                    help="[rad] standard deviation of the start perturbations (--starts)")
    ap.add_argument("--drift", action="store_true",
                    help="with --starts: each window's passive drift by its momentum balance")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    if not args.duration > 0:
        ap.error(f"--duration must be > 0 s, got {args.duration}")
    if args.starts < 0 or not args.spread >= 0:
        ap.error("--starts must be >= 0 and --spread >= 0 rad")
    if args.starts:
        rows = perturbed_starts(args.starts, args.spread, drift=args.drift)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"spread_rad": args.spread, "rows": rows},
                                            indent=1) + "\n")
            print(f"wrote {args.json}")
        return
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
