"""The control loop while a plan is solved in a background thread: the box DDP's compiled
loops releasing the GIL (``nogil``, as the package compiles them) against the same loops
holding it (re-jitted here from their Python source with ``nogil=False``), interleaved.

    .venv/bin/python bench/bench_background_solve.py [--rounds 6]
        [--out bench/results/background_solve.json]

The solve: the planned swing-up's re-plan of the bundled acrobot (``SwingUpLaw._solve_plan``
with its re-plan weights, from a knocked state), in a thread, as the node runs it
(``plan_replan_inline`` false; the failure reaction's with ``failure_replan_inline`` false).
Meanwhile the main thread runs the swing-up law's cycle (energy strategy) paced at 1 kHz and
records the loop's period: a cycle that waits for the GIL shows as a longer period. The first
round of each variant compiles and is not counted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.bringup import ROOT  # noqa: E402
from underactuated_control.control import swing_up_plan  # noqa: E402
from underactuated_control.control.swing_up_law import SwingUpLaw  # noqa: E402
from underactuated_control.optimal_control import costs, ddp, dynamics, kernels  # noqa: E402
from underactuated_control.parameters import coerce  # noqa: E402

PERIOD = 1e-3  # s: the loop's pace
KERNELS = {  # the compiled loops a solve calls from Python, and the modules that call them
    "rollout_kernel": (dynamics,), "linearize_kernel": (dynamics,),
    "backward_pass": (ddp, swing_up_plan), "box_qp_kernel": (ddp,),
    "frame_path_kernel": (costs,),
}


def law(strategy: str, cache: str) -> SwingUpLaw:
    settings = {s.name: coerce(s, s.default) for s in SwingUpLaw.parameters}
    settings.update(swing_up_strategy=strategy, plan_cache_dir=cache)
    return SwingUpLaw(RobotModel.from_urdf((ROOT / "urdf/acrobot.urdf").read_text()), settings,
                      "tip")


def use(variant: dict) -> None:
    for name, function in variant.items():
        for module in KERNELS[name]:
            setattr(module, name, function)


def round_(planner: SwingUpLaw, cycle: SwingUpLaw, x: np.ndarray) -> tuple[float, np.ndarray]:
    """(the solve's wall time [s], the loop's periods [s] while it ran)."""
    done = threading.Event()

    def solve() -> None:
        planner._solve_plan(x, planner.replan_weights)
        done.set()

    q, v = x[:2].copy(), x[2:].copy()
    start = last = time.perf_counter()
    worker = threading.Thread(target=solve, name="planner")
    worker.start()
    periods, t = [], 0.0
    while not done.is_set():
        tick = time.perf_counter()
        periods.append(tick - last)
        last = tick
        cycle.compute(q, v, None, t, False)
        t += PERIOD
        time.sleep(max(0.0, PERIOD - (time.perf_counter() - tick)))
    worker.join()
    return time.perf_counter() - start, np.array(periods[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6, help="counted solves per variant")
    ap.add_argument("--out", type=Path, default=Path("bench/results/background_solve.json"))
    args = ap.parse_args()
    variants = {
        "nogil (the package)": {n: getattr(kernels, n) for n in KERNELS},
        "holding the GIL": {n: njit(cache=False, nogil=False)(getattr(kernels, n).py_func)
                            for n in KERNELS},
    }
    with tempfile.TemporaryDirectory() as cache:
        planner, cycle = law("planned", cache), law("energy", cache)
        x = np.array([0.3, -0.2, 1.0, -2.0])  # a knocked state
        solves = {name: [] for name in variants}
        periods = {name: [] for name in variants}
        for r in range(args.rounds + 1):
            for name, variant in variants.items():
                use(variant)
                seconds, p = round_(planner, cycle, x)
                if r > 0:  # the first round compiles
                    solves[name].append(seconds)
                    periods[name].append(p)
                print(f"  round {r} {name}: solve {seconds:.2f} s, {p.size} cycles", flush=True)
        use(variants["nogil (the package)"])
    rows = []
    print(f"\n{'kernels':20s} {'solve s':>8s} {'cycles':>7s} {'period median ms':>16s} "
          f"{'p99 ms':>7s} {'max ms':>7s} {'> 2 ms':>7s}")
    for name in variants:
        p = 1e3 * np.concatenate(periods[name])
        row = {"kernels": name, "solve_s_median": float(np.median(solves[name])),
               "cycles": int(p.size), "period_ms_median": float(np.median(p)),
               "period_ms_p99": float(np.percentile(p, 99)), "period_ms_max": float(p.max()),
               "share_over_2ms": float(np.mean(p > 2.0))}
        rows.append(row)
        print(f"{name:20s} {row['solve_s_median']:8.2f} {row['cycles']:7d} "
              f"{row['period_ms_median']:16.3f} {row['period_ms_p99']:7.3f} "
              f"{row['period_ms_max']:7.2f} {row['share_over_2ms']:7.1%}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"period_asked_ms": 1e3 * PERIOD, "rounds": args.rounds,
                                    "rows": rows}, indent=1))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
