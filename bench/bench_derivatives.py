"""Speed of the hybrid-dynamics derivatives against Pinocchio's, side by side in one run.

    .venv/bin/python bench/bench_derivatives.py [--quick] [--out bench/results]

Prints a table (median and p99 µs per call) and writes ``derivatives.json``. Robots: generated
serial chains of N = 2, 7, 20, 50, 100 revolute joints (``bench_dynamics.chain_urdf``) and the
Panda (N = 9). Ours, ``DerivativesWorkspace.compute`` (allocation-free, all eight partials):
every joint passive (the problem of Pinocchio's ``computeABADerivatives``), every other joint
passive, every joint active (the problem of ``computeRNEADerivatives``). BLAS pinned to one
thread. Methods are interleaved in 20 short rounds per robot; ratios are medians of the
per-round paired ratios; growth exponents are slopes of log(median) against log(N), N >= 20.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_dynamics import ROBOTS, bench_parser, chain_urdf, run_settings, samples_of, stats  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.derivatives import DerivativesWorkspace  # noqa: E402

ROUNDS = 20
METHODS = ["ours_passive", "pin_aba_derivatives", "ours_mixed", "ours_active",
           "pin_rnea_derivatives"]


class Case:
    """One robot: our workspaces for three passive sets and the Pinocchio model."""

    def __init__(self, name: str, text: str, mimic: str = "error") -> None:
        self.name = name
        base = RobotModel.from_urdf(text, mimic=mimic)
        self.N = base.nv
        self.pm = pin.buildModelFromXML(text)
        self.pd = self.pm.createData()
        order = [self.pm.joints[self.pm.getJointId(n)].idx_v for n in base.joint_names]
        assert order == list(range(self.N)), "benchmark robots keep Pinocchio's joint order"
        rng = np.random.default_rng(1)
        self.q = base.random_configuration(rng)
        self.v = rng.normal(size=self.N)
        self.a = rng.normal(size=self.N)
        self.tau = rng.normal(size=self.N)
        self.ws = {}
        for kind, names in (("passive", base.joint_names), ("mixed", base.joint_names[1::2]),
                            ("active", ())):
            m = base.with_passive(names)
            self.ws[kind] = (DerivativesWorkspace(m), np.ascontiguousarray(self.a[m.active_dofs]),
                             np.ascontiguousarray(self.tau[m.passive_dofs]))

    def _ours(self, kind):
        ws, qa, tp = self.ws[kind]
        return ws.compute(self.q, self.v, qa, tp)

    def ours_passive(self):
        return self._ours("passive")

    def ours_mixed(self):
        return self._ours("mixed")

    def ours_active(self):
        return self._ours("active")

    def pin_aba_derivatives(self):
        return pin.computeABADerivatives(self.pm, self.pd, self.q, self.v, self.tau)

    def pin_rnea_derivatives(self):
        return pin.computeRNEADerivatives(self.pm, self.pd, self.q, self.v, self.a)

    def check(self) -> float:
        """Max abs difference of our partials from Pinocchio's (all passive, all active)."""
        res = self.ours_passive()
        pin.computeABADerivatives(self.pm, self.pd, self.q, self.v, self.tau)
        err = max(np.abs(res.dqdd_passive_dq - self.pd.ddq_dq).max(),
                  np.abs(res.dqdd_passive_dv - self.pd.ddq_dv).max())
        res = self.ours_active()
        pin.computeRNEADerivatives(self.pm, self.pd, self.q, self.v, self.a)
        return float(max(err, np.abs(res.dtau_active_dq - self.pd.dtau_dq).max(),
                         np.abs(res.dtau_active_dv - self.pd.dtau_dv).max()))


def main() -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    budget, max_calls, out_dir, package = run_settings(args, (0.2, 2.0), (2000, 40000))

    cases = [Case("panda", (ROBOTS / "panda_description/urdf/panda.urdf").read_text(),
                  mimic="independent")]
    cases += [Case(f"chain{n}", chain_urdf(n)) for n in (2, 7, 20, 50, 100)]

    print(f"{'robot':<10}{'N':>4} " + "".join(f"{m:>24}" for m in METHODS))
    print(f"{'':<15}" + "".join(f"{'median / p99 µs':>24}" for _ in METHODS))
    results = []
    for case in cases:
        row = {"robot": case.name, "N": case.N,
               "max_abs_difference_vs_pinocchio": case.check()}
        pooled = {m: [] for m in METHODS}
        row["round_medians_us"] = rounds = {m: [] for m in METHODS}
        for _ in range(ROUNDS):  # interleaved: a slow spell hits every method of a round
            for method in METHODS:
                gc.collect()
                got = samples_of(getattr(case, method), budget / ROUNDS, max_calls // ROUNDS,
                                 min_calls=20)
                pooled[method] += got
                rounds[method].append(float(np.median(got)) / 1e3)
        line = f"{case.name:<10}{case.N:>4} "
        for method in METHODS:
            row[method] = st = stats(pooled[method])
            line += f"{st['median_us']:>15.2f} /{st['p99_us']:>7.1f}"
        print(line, flush=True)
        results.append(row)

    def ratio(robot, a, b):
        r = next(x for x in results if x["robot"] == robot)["round_medians_us"]
        return float(np.median(np.divide(r[a], r[b])))

    def slope(method):
        rows = [r for r in results if r["robot"].startswith("chain") and r["N"] >= 20]
        return float(np.polyfit(np.log([r["N"] for r in rows]),
                                np.log([r[method]["median_us"] for r in rows]), 1)[0])

    targets = {
        "N7_passive_over_pin_aba_derivatives (<= 2, stretch <= 1)":
            ratio("chain7", "ours_passive", "pin_aba_derivatives"),
        "N7_mixed_over_pin_aba_derivatives": ratio("chain7", "ours_mixed", "pin_aba_derivatives"),
        "N7_active_over_pin_rnea_derivatives":
            ratio("chain7", "ours_active", "pin_rnea_derivatives"),
        "panda_passive_over_pin_aba_derivatives":
            ratio("panda", "ours_passive", "pin_aba_derivatives"),
        "N100_passive_over_pin_aba_derivatives":
            ratio("chain100", "ours_passive", "pin_aba_derivatives"),
        "N100_mixed_over_pin_aba_derivatives":
            ratio("chain100", "ours_mixed", "pin_aba_derivatives"),
        "N100_active_over_pin_rnea_derivatives":
            ratio("chain100", "ours_active", "pin_rnea_derivatives"),
        "growth_exponent_N20_100_ours_passive": slope("ours_passive"),
        "growth_exponent_N20_100_ours_mixed": slope("ours_mixed"),
        "growth_exponent_N20_100_pin_aba_derivatives": slope("pin_aba_derivatives"),
        "growth_exponent_N20_100_ours_active": slope("ours_active"),
        "growth_exponent_N20_100_pin_rnea_derivatives": slope("pin_rnea_derivatives"),
    }
    print("\ntargets (ratios measured in this run):")
    for k, v in targets.items():
        print(f"  {k:<58}{v:8.3f}")
    payload = {"results": results, "targets": targets, "package": package,
               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                           "pinocchio": pin.__version__}}
    (out_dir / "derivatives.json").write_text(json.dumps(payload, indent=2))
    print(f"wrote {out_dir / 'derivatives.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
