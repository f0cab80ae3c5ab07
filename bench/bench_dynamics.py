"""Speed of the hybrid recursion and of J_G/J_D against Pinocchio, side by side in one run.

    .venv/bin/python bench/bench_dynamics.py [--quick] [--skip-compile] [--out bench/results]

Prints a table (median and p99 µs per call), writes ``dynamics.json`` and ``dynamics.png``
(time vs N, log-log). Robots: the Panda from example-robot-data and generated chains of
N = 2, 7, 20, 50, 100, 200 revolute joints, every other joint passive. BLAS is pinned to one
thread. Methods are interleaved in 20 short rounds per robot; target ratios are medians of the
per-round paired ratios. Pinocchio is the reference only; the library never imports it.
The package measured is the one ``import underactuated_control`` finds (PYTHONPATH first, so
``bench/compare_revisions.py`` can point it at another checkout); its path is printed and saved.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

import underactuated_control  # noqa: E402
from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.dynamics import HybridDynamics, hybrid_dynamics  # noqa: E402
from underactuated_control.jacobians import JacobianWorkspace  # noqa: E402

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"


def chain_urdf(n: int, seed: int = 0) -> str:
    """A serial chain of n revolute joints with random axes, offsets and inertias."""
    rng = np.random.default_rng(seed)
    out = ['<robot name="chain"><link name="base"/>']
    for i in range(n):
        xyz = rng.uniform(-0.2, 0.2, 3)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        parent = "base" if i == 0 else f"l{i}"
        out.append(
            f'<joint name="j{i + 1}" type="revolute"><parent link="{parent}"/>'
            f'<child link="l{i + 1}"/><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" '
            f'rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/><axis xyz="{axis[0]} {axis[1]} {axis[2]}"/>'
            '<limit lower="-3" upper="3" effort="100" velocity="2"/></joint>'
            f'<link name="l{i + 1}"><inertial><origin xyz="0.05 0.02 0.1"/><mass value="1.0"/>'
            '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial>'
            "</link>")
    out.append("</robot>")
    return "".join(out)


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments every interleaved bench takes: ``--quick`` and ``--out``."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short budgets (smoke run)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    return parser


def run_settings(args: argparse.Namespace, budget_s: tuple[float, float],
                 max_calls: tuple[int, int]) -> tuple[float, int, Path, str]:
    """(time budget [s], calls at most, output folder (created), the package timed, printed);
    budget and calls from their (quick, full) pairs as ``args.quick`` says."""
    package = str(Path(underactuated_control.__file__).resolve().parent)
    print(f"package: {package}")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    k = 0 if args.quick else 1
    return budget_s[k], max_calls[k], out_dir, package


def samples_of(fn, budget_s: float, max_calls: int, min_calls: int = 100, between=None,
               warmup: int = 20) -> list[int]:
    """Single-call times (ns) after ``warmup`` untimed calls, until the budget or max_calls;
    ``between()`` (untimed) before each call, e.g. a new configuration."""
    for _ in range(min(warmup, max_calls)):
        fn()
    samples = []
    clock = time.perf_counter_ns
    deadline = time.perf_counter() + budget_s
    while len(samples) < max_calls and (len(samples) < min_calls or time.perf_counter() < deadline):
        if between is not None:
            between()
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return samples


def stats(samples) -> dict[str, float]:
    arr = np.asarray(samples) / 1e3
    return {"median_us": float(np.median(arr)), "p99_us": float(np.percentile(arr, 99)),
            "calls": len(arr)}


def measure(fn, budget_s: float, max_calls: int, min_calls: int = 200, between=None
            ) -> dict[str, float]:
    return stats(samples_of(fn, budget_s, max_calls, min_calls, between))


class Case:
    """One robot: our model and workspaces, and the Pinocchio model of the same URDF."""

    def __init__(self, name: str, text: str, frame: str, mimic: str = "error") -> None:
        self.name = name
        base = RobotModel.from_urdf(text, mimic=mimic)
        passive = list(base.joint_names[1::2])  # every other joint passive
        self.model = base.with_passive(passive)
        self.N = self.model.nv
        self.frame = frame
        self.pm = pin.buildModelFromXML(text)
        self.pd = self.pm.createData()
        assert self.pm.nv == self.model.nv and self.pm.nq == self.model.nq
        rng = np.random.default_rng(1)
        self.q = self.model.random_configuration(rng)
        # each timed call gets the other of two configurations (``next_configuration``), as
        # in a control loop: a workspace already at q skips its transforms and (4.6)
        self.configurations = (self.q, self.model.random_configuration(rng))
        self._at = 0
        self.v = rng.normal(size=self.N)
        self.tau = rng.normal(size=self.N)
        self.qa = rng.normal(size=self.model.n_active)
        self.tp = rng.normal(size=self.model.n_passive)
        self.a = self.model.active_dofs
        self.p = self.model.passive_dofs
        self.ws = HybridDynamics(self.model)
        self.jws = JacobianWorkspace(self.model)
        self.fid = self.pm.getFrameId(frame)
        # the same vectors in Pinocchio's order (names match; all joints here are 1-DOF plain)
        order = [self.pm.joints[self.pm.getJointId(n)].idx_v for n in self.model.joint_names]
        assert order == list(range(self.N)), "benchmark robots keep Pinocchio's joint order"

    def next_configuration(self) -> None:
        self._at ^= 1
        self.q = self.configurations[self._at]

    # --- ours -------------------------------------------------------------------------------
    def ours_public(self):
        return hybrid_dynamics(self.model, self.q, self.v, self.qa, self.tp)

    def ours_workspace(self):
        return self.ws.compute(self.q, self.v, self.qa, self.tp)

    def ours_jg_jd(self):
        return self.jws.generalized(self.frame, self.q)  # q set in the same compiled call

    def ours_jg_rows(self):
        return self.jws.generalized_by_rows(self.frame, self.q)  # J_G alone, O(6 N) adjoint

    def ours_hybrid_jg_jd(self):
        jws = self.jws
        jws.generalized(self.frame, self.q)  # (4.6) once, shared by J_G, J_D and the torques
        jws.dynamics.set_velocity(self.v)
        return jws.dynamics.solve(self.qa, self.tp)

    # --- Pinocchio --------------------------------------------------------------------------
    def pin_aba(self):
        return pin.aba(self.pm, self.pd, self.q, self.v, self.tau)

    def pin_rnea(self):
        return pin.rnea(self.pm, self.pd, self.q, self.v, self.tau)

    def pin_dense_hybrid(self):
        M = pin.crba(self.pm, self.pd, self.q)
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.nonLinearEffects(self.pm, self.pd, self.q, self.v)
        a, p = self.a, self.p
        Mpp = M[np.ix_(p, p)]
        Mpa = M[np.ix_(p, a)]
        qdd_p = np.linalg.solve(Mpp, self.tp - h[p] - Mpa @ self.qa)
        tau_a = M[np.ix_(a, a)] @ self.qa + M[np.ix_(a, p)] @ qdd_p + h[a]
        return tau_a, qdd_p, Mpp, Mpa

    def pin_dense_hybrid_jg(self):
        tau_a, qdd_p, Mpp, Mpa = self.pin_dense_hybrid()
        J_D = -np.linalg.solve(Mpp, Mpa)
        pin.computeJointJacobians(self.pm, self.pd, self.q)
        pin.updateFramePlacements(self.pm, self.pd)
        J = pin.getFrameJacobian(self.pm, self.pd, self.fid, pin.LOCAL_WORLD_ALIGNED)
        return J[:, self.a] + J[:, self.p] @ J_D, J_D

    def check(self) -> float:
        """Our results against the dense Pinocchio route (max abs difference)."""
        res = self.ours_public()
        tau_a, qdd_p, *_ = self.pin_dense_hybrid()
        JG, JD = self.pin_dense_hybrid_jg()
        jg, jd = self.ours_jg_jd()
        jg_rows = self.ours_jg_rows()
        return float(max(np.abs(res.tau_active - tau_a).max(), np.abs(jg_rows - JG).max(),
                         np.abs(res.qdd_passive - qdd_p).max(),
                         np.abs(jg - JG).max(), np.abs(jd - JD).max()))


ROUNDS = 20
METHODS = ["ours_public", "ours_workspace", "ours_jg_jd", "ours_jg_rows", "ours_hybrid_jg_jd",
           "pin_aba",
           "pin_rnea", "pin_dense_hybrid", "pin_dense_hybrid_jg"]


def compile_times() -> dict[str, float]:
    """First-call cost of the hybrid recursion in a fresh process: cold (empty numba cache)
    and cached (second process, same cache directory)."""
    code = ("import time; t=time.perf_counter(); import numpy as np; "
            "from underactuated_control import RobotModel; "
            "from underactuated_control.dynamics import hybrid_dynamics; "
            "from underactuated_control.jacobians import generalized_jacobian; "
            f"m=RobotModel.from_urdf({chain_urdf(7)!r}, passive_joints=['j2','j4']); "
            "t1=time.perf_counter(); q=np.zeros(7); "
            "hybrid_dynamics(m,q,q,np.zeros(5),np.zeros(2)); generalized_jacobian(m,q,'l7'); "
            "print(time.perf_counter()-t1, t1-t)")
    out = {}
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    with tempfile.TemporaryDirectory() as cache:
        env["NUMBA_CACHE_DIR"] = cache
        for label in ("cold", "cached"):
            # cwd: not the repository (``-c`` puts the current directory ahead of PYTHONPATH)
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 env=env, check=True, cwd=cache)
            first_call, imports = map(float, res.stdout.split())
            out[f"{label}_first_call_s"] = first_call
            out[f"{label}_import_and_parse_s"] = imports
    return out


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--skip-compile", action="store_true",
                        help="skip the cold/cached first-call measurement (two subprocesses)")
    args = parser.parse_args()
    budget, max_calls, out_dir, package = run_settings(args, (0.15, 1.0), (2000, 20000))

    cases = [Case("panda", (ROBOTS / "panda_description/urdf/panda.urdf").read_text(),
                  "panda_link8", mimic="independent")]
    sizes = (2, 7, 20, 50, 100, 200)
    cases += [Case(f"chain{n}", chain_urdf(n), f"l{n}") for n in sizes]

    print(f"{'robot':<10}{'N':>4}{'n_a':>5} " + "".join(f"{m:>22}" for m in METHODS))
    print(f"{'':<20}" + "".join(f"{'median / p99 µs':>22}" for _ in METHODS))
    results = []
    for case in cases:
        err = case.check()
        row = {"robot": case.name, "N": case.N, "n_active": case.model.n_active,
               "max_abs_difference_vs_pinocchio": err}
        line = f"{case.name:<10}{case.N:>4}{case.model.n_active:>5} "
        # interleaved short rounds: a slow spell of the machine (they last seconds here and
        # can double every time) hits all methods of a round alike; ratios are paired per round
        pooled = {m: [] for m in METHODS}
        row["round_medians_us"] = rounds = {m: [] for m in METHODS}
        for _ in range(ROUNDS):
            for method in METHODS:
                gc.collect()
                got = samples_of(getattr(case, method), budget / ROUNDS, max_calls // ROUNDS,
                                 min_calls=50, between=case.next_configuration)
                pooled[method] += got
                rounds[method].append(float(np.median(got)) / 1e3)
        for method in METHODS:
            row[method] = st = stats(pooled[method])
            line += f"{st['median_us']:>13.2f} /{st['p99_us']:>7.1f}"
        print(line, flush=True)
        results.append(row)

    def ratio(robot, a, b):
        """Median over the rounds of the paired ratio of the round medians."""
        r = next(x for x in results if x["robot"] == robot)["round_medians_us"]
        return float(np.median(np.divide(r[a], r[b])))

    # p99 over 100k calls of the workspace recursion, GC enabled as in a real loop
    c7 = next(c for c in cases if c.name == "chain7")
    n_tail = 20000 if args.quick else 100000
    tail = measure(c7.ours_workspace, budget_s=1e9, max_calls=n_tail, min_calls=n_tail,
                   between=c7.next_configuration)
    # growth exponent of J_G + J_D with N (n_a = N/2): slope of log t vs log N
    chains = [r for r in results if r["robot"].startswith("chain") and r["N"] >= 20]
    slope = float(np.polyfit(np.log([r["N"] for r in chains]),
                             np.log([r["ours_jg_jd"]["median_us"] for r in chains]), 1)[0])
    slope_rows = float(np.polyfit(np.log([r["N"] for r in chains]),
                                  np.log([r["ours_jg_rows"]["median_us"] for r in chains]), 1)[0])
    slope_h = float(np.polyfit(np.log([r["N"] for r in chains]),
                               np.log([r["ours_workspace"]["median_us"] for r in chains]), 1)[0])
    targets = {
        "N7_public_over_aba (<= 2)": ratio("chain7", "ours_public", "pin_aba"),
        "N7_dense_route_over_public (>= 4)": ratio("chain7", "pin_dense_hybrid", "ours_public"),
        "N7_workspace_over_aba (<= 1.2)": ratio("chain7", "ours_workspace", "pin_aba"),
        "N100_public_over_aba (<= 1.5)": ratio("chain100", "ours_public", "pin_aba"),
        "N100_workspace_over_aba": ratio("chain100", "ours_workspace", "pin_aba"),
        "N200_over_N20_public (<= 12)": (
            next(r for r in results if r["robot"] == "chain200")["ours_public"]["median_us"]
            / next(r for r in results if r["robot"] == "chain20")["ours_public"]["median_us"]),
        "N7_jg_jd_over_aba (<= 3)": ratio("chain7", "ours_jg_jd", "pin_aba"),
        "panda_public_over_aba": ratio("panda", "ours_public", "pin_aba"),
        "panda_jg_jd_over_aba": ratio("panda", "ours_jg_jd", "pin_aba"),
        "workspace_p99_over_median_100k_calls (<= 5)": tail["p99_us"] / tail["median_us"],
        "jg_jd_growth_exponent_N20_200": slope,
        "jg_rows_alone_growth_exponent_N20_200 (stretch: < 2)": slope_rows,
        "N200_jg_rows_over_jg_columns": (
            next(r for r in results if r["robot"] == "chain200")["ours_jg_rows"]["median_us"]
            / next(r for r in results if r["robot"] == "chain200")["ours_jg_jd"]["median_us"]),
        "hybrid_growth_exponent_N20_200": slope_h,
    }
    print(f"\nworkspace recursion, chain7, {tail['calls']} calls: median "
          f"{tail['median_us']:.2f} µs, p99 {tail['p99_us']:.2f} µs")
    compile_stats = {} if args.skip_compile else compile_times()
    print("compile: " + (", ".join(f"{k} {v:.2f}" for k, v in compile_stats.items())
                         or "skipped"))
    print("\ntargets (ratios measured in this run):")
    for k, v in targets.items():
        print(f"  {k:<48}{v:8.3f}")

    payload = {"results": results, "targets": targets, "tail_latency": tail,
               "compile": compile_stats, "package": package,
               "machine": {"cpus": os.cpu_count(),
                                                     "python": sys.version.split()[0],
                                                     "pinocchio": pin.__version__}}
    (out_dir / "dynamics.json").write_text(json.dumps(payload, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        chains = [r for r in results if r["robot"].startswith("chain")]
        Ns = [r["N"] for r in chains]
        fig, ax = plt.subplots(figsize=(8, 6))
        for method in METHODS:
            ax.loglog(Ns, [r[method]["median_us"] for r in chains], "o-", label=method)
        ax.set_xlabel("N (degrees of freedom, half passive)")
        ax.set_ylabel("median time per call [µs]")
        ax.set_title("hybrid dynamics and J_G/J_D vs Pinocchio")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "dynamics.png", dpi=100)
        print(f"wrote {out_dir / 'dynamics.json'} and {out_dir / 'dynamics.png'}")
    except ImportError:
        print(f"wrote {out_dir / 'dynamics.json'} (matplotlib not installed: no plot)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
