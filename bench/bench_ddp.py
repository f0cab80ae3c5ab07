"""Box DDP through the hybrid recursion: solve times of the problems users meet.

    .venv/bin/python bench/bench_ddp.py [--repeats 5] [--out bench/results/ddp.json]

Each problem is solved once to compile and warm up, then ``--repeats`` times; the table gives
the median wall time of a whole solve, the iterations, the time per iteration, the final
error and the KKT residual (the projected gradient of the total cost, recomputed by the
adjoint). Robots: the bundled arm7 (all active; in zero gravity with joint4 passive: a failed
motor in orbit), pendubot and acrobot (6 N·m swing-ups), and example-robot-data's panda (a
frame goal).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sysconfig  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.bringup import ROOT  # noqa: E402
from underactuated_control.optimal_control import solve_box_ddp  # noqa: E402
from underactuated_control.optimal_control.problems import goal_problem  # noqa: E402

ERD = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
START = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]
GOAL = [0.5, -0.3, 0.2, -2.0, 0.1, 1.8, 0.5]


def problems():
    arm = (ROOT / "urdf" / "arm7.urdf").read_text()
    yield "arm7 joint goal", RobotModel.from_urdf(arm), dict(goal=GOAL, start=START,
                                                               horizon=1.0, dt=0.01)
    # a failed elbow motor in orbit (under gravity a passive elbow cannot rest at the goal)
    yield "arm7 0 g, joint4 passive", RobotModel.from_urdf(
        arm, passive_joints=["joint4"], gravity=(0.0, 0.0, 0.0)), \
        dict(goal=GOAL, start=START, horizon=1.0, dt=0.01)
    for name in ("pendubot", "acrobot"):
        model = RobotModel.from_urdf((ROOT / "urdf" / f"{name}.urdf").read_text())
        yield f"{name} swing-up", model, dict(goal=[np.pi, 0.0], horizon=3.0, dt=0.01)
    panda = ERD / "panda_description/urdf/panda.urdf"
    if panda.is_file():
        model = RobotModel.from_urdf(panda.read_text(), tip_link="panda_link8")
        yield "panda frame goal", model, dict(frame="panda_link8", position=[0.4, 0.3, 0.5],
                                              start=START,
                                              horizon=1.0, dt=0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ddp.json"))
    args = parser.parse_args()
    rows = []
    print(f"{'problem':<24}{'nv':>4}{'nu':>4}{'knots':>7}{'iter':>6}{'solve ms':>10}"
          f"{'ms/iter':>9}{'final err':>11}{'KKT':>10}")
    for label, model, kwargs in problems():
        problem = goal_problem(model, **kwargs)

        def solve(problem=problem):
            return solve_box_ddp(problem.step, problem.x0, problem.us_init, problem.running,
                                 problem.terminal, max_iterations=500)

        solve()  # compile / load kernels
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            sol = solve()
            times.append(time.perf_counter() - t0)
        n = model.nv
        if "goal" in kwargs:
            error = float(np.abs(sol.xs[-1, :n] - np.asarray(kwargs["goal"])).max())
        else:
            ws = problem.terminal.terms[1].workspace
            ws.set_configuration(sol.xs[-1, :n])
            error = float(np.linalg.norm(ws.frame_placement(kwargs["frame"])[0]
                                         - np.asarray(kwargs["position"])))
        ms = 1e3 * float(np.median(times))
        row = dict(problem=label, nv=n, nu=problem.step.nu, knots=len(problem.us_init),
                   iterations=sol.iterations, converged=sol.converged, solve_ms=ms,
                   ms_per_iteration=ms / sol.iterations, final_error=error,
                   kkt_residual=sol.gradient)
        rows.append(row)
        print(f"{label:<24}{n:>4}{row['nu']:>4}{row['knots']:>7}{sol.iterations:>6}"
              f"{ms:>10.1f}{row['ms_per_iteration']:>9.2f}{error:>11.2e}{sol.gradient:>10.1e}"
              + ("" if sol.converged else "  (not converged)"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
