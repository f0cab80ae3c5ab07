"""Speed of the operational-space quantities against Pinocchio's dense route, in one run.

    .venv/bin/python bench/bench_operational_space.py [--quick] [--out bench/results]

Robots: the Panda from example-robot-data (9 DOF with its fingers, frame panda_hand_tcp) and
random serial chains (test/oracle.py ``random_tree_urdf(chain=True)``: random axes and
offsets, some prismatic joints and merged fixed links) of N = 7, 20, 50, 100, 200 DOF, tip
frame. Methods, interleaved in 20 short rounds per robot (a slow spell of the machine hits
all alike; ratios are medians of per-round paired ratios), BLAS on one thread:

* ``ours_lambda``      OperationalSpace.set_configuration(q): transforms, (4.6), J, Λ⁻¹ by
                       the O(N) path recursion, Λ (one compiled call)
* ``ours_public``      operational_space.task_inertia(model, q, frame) (a copy of Λ)
* ``ours_all``         update(q, v) + dynamically_consistent_inverse(): Λ, J, μ, p, J̄
* ``dense_lambda``     pin.crba, computeJointJacobians + getFrameJacobian, Cholesky of A,
                       triangular solves (numpy), Λ⁻¹ = XᵀX, Λ = inv
* ``minv_lambda``      pin.computeMinverse (Pinocchio's O(N²) A⁻¹), J A⁻¹ Jᵀ, inv
* ``dense_all``        dense_lambda + nonLinearEffects (twice: b and g), J̇q̇ (classical
                       acceleration), J̄ = A⁻¹ Jᵀ Λ, μ, p

Prints a table (median µs) and writes ``operational_space.json``. Pinocchio is the
reference only; the library never imports it.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from bench_dynamics import ROBOTS, bench_parser, run_settings, samples_of  # noqa: E402
from oracle import PinRef, random_tree_urdf  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control import operational_space as osp  # noqa: E402

ROUNDS = 20
METHODS = ["ours_lambda", "ours_public", "ours_all", "dense_lambda", "minv_lambda", "dense_all"]


def lower_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L⁻¹ B for lower-triangular L (numpy has no triangular solve; this is LAPACK gesv)."""
    return np.linalg.solve(L, B)


class Case:
    def __init__(self, name: str, text: str, frame: str, mimic: str = "error") -> None:
        self.name, self.frame = name, frame
        self.model = RobotModel.from_urdf(text, mimic=mimic)
        self.N = self.model.nv
        ref = PinRef(self.model, text)  # Pinocchio model; q map (continuous: cos, sin)
        self.pm, self.pd = ref.pm, ref.pd
        assert (ref.v_perm == np.arange(self.N)).all(), "chains keep Pinocchio's DOF order"
        rng = np.random.default_rng(1)
        self.q_ours = self.model.random_configuration(rng)
        self.q = ref.q(self.q_ours)  # Pinocchio's
        # each timed call gets the other of two configurations (``next_configuration``), as
        # in a control loop: a workspace already at q skips its transforms and (4.6)
        other = self.model.random_configuration(rng)
        self.configurations = ((self.q_ours, self.q), (other, ref.q(other)))
        self._at = 0
        self.v = rng.normal(size=self.N)
        self.zero = np.zeros(self.N)
        self.fid = self.pm.getFrameId(frame)
        self.ws = osp.OperationalSpace(self.model)
        self.ws.set_task(frame)

    def next_configuration(self) -> None:
        self._at ^= 1
        self.q_ours, self.q = self.configurations[self._at]

    # --- ours -------------------------------------------------------------------------------
    def ours_lambda(self):
        self.ws.set_configuration(self.q_ours)
        return self.ws.Lambda

    def ours_public(self):
        return osp.task_inertia(self.model, self.q_ours, self.frame)

    def ours_all(self):
        ws = self.ws
        ws.update(self.q_ours, self.v)
        return ws.Lambda, ws.mu, ws.p, ws.dynamically_consistent_inverse()

    # --- Pinocchio, dense ---------------------------------------------------------------------
    def _dense(self):
        pm, pd, q = self.pm, self.pd, self.q
        A = pin.crba(pm, pd, q)
        A = np.triu(A) + np.triu(A, 1).T
        pin.computeJointJacobians(pm, pd, q)
        J = pin.getFrameJacobian(pm, pd, self.fid, pin.LOCAL_WORLD_ALIGNED)
        L = np.linalg.cholesky(A)
        X = lower_solve(L, J.T)  # L⁻¹ Jᵀ
        return A, J, L, X, np.linalg.inv(X.T @ X)

    def dense_lambda(self):
        return self._dense()[-1]

    def minv_lambda(self):
        Minv = pin.computeMinverse(self.pm, self.pd, self.q)
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        pin.computeJointJacobians(self.pm, self.pd, self.q)
        J = pin.getFrameJacobian(self.pm, self.pd, self.fid, pin.LOCAL_WORLD_ALIGNED)
        return np.linalg.inv(J @ Minv @ J.T)

    def dense_all(self):
        pm, pd, q, v = self.pm, self.pd, self.q, self.v
        A, J, L, X, Lam = self._dense()
        h = pin.nonLinearEffects(pm, pd, q, v)
        g = pin.computeGeneralizedGravity(pm, pd, q)
        pin.forwardKinematics(pm, pd, q, v, self.zero)
        Jdqd = pin.getFrameClassicalAcceleration(pm, pd, self.fid, pin.LOCAL_WORLD_ALIGNED).vector
        Jbar = lower_solve(L.T, X) @ Lam  # A⁻¹ Jᵀ Λ
        return Lam, Jbar.T @ (h - g) - Lam @ Jdqd, Jbar.T @ g, Jbar

    def check(self) -> float:
        """Largest relative difference of ours against the dense route (Λ, μ, p, J̄)."""
        ours = [np.array(x) for x in self.ours_all()]
        ref = self.dense_all()
        return float(max(np.abs(a - b).max() / max(1.0, np.abs(b).max())
                         for a, b in zip(ours, ref)))


def main() -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    budget, max_calls, out_dir, package = run_settings(args, (0.1, 1.0), (2000, 20000))

    cases = [Case("panda", (ROBOTS / "panda_description/urdf/panda.urdf").read_text(),
                  "panda_hand_tcp", mimic="independent")]
    for n in (7, 20, 50, 100, 200):
        rng = np.random.default_rng(n)
        cases.append(Case(f"chain{n}", random_tree_urdf(rng, n, chain=True), f"link{n}"))

    header = f"{'robot':<9}{'N':>4}  " + "".join(f"{m:>14}" for m in METHODS)
    print(header + f"{'dense/ours Λ':>14}{'dense/ours all':>16}")
    results = []
    for case in cases:
        err = case.check()
        row = {"robot": case.name, "N": case.N, "max_rel_difference_vs_dense": err}
        pooled = {m: [] for m in METHODS}
        rounds = {m: [] for m in METHODS}
        for _ in range(ROUNDS):
            for method in METHODS:
                gc.collect()
                got = samples_of(getattr(case, method), budget / ROUNDS, max_calls // ROUNDS,
                                 min_calls=50, between=case.next_configuration, warmup=10)
                pooled[method] += got
                rounds[method].append(float(np.median(got)) / 1e3)
        for method in METHODS:
            row[method] = {"median_us": float(np.median(pooled[method]) / 1e3),
                           "calls": len(pooled[method])}
        row["round_medians_us"] = rounds
        row["dense_over_ours_lambda"] = float(np.median(
            np.divide(rounds["dense_lambda"], rounds["ours_lambda"])))
        row["dense_over_ours_all"] = float(np.median(
            np.divide(rounds["dense_all"], rounds["ours_all"])))
        line = f"{case.name:<9}{case.N:>4}  " + "".join(
            f"{row[m]['median_us']:>14.2f}" for m in METHODS)
        print(line + f"{row['dense_over_ours_lambda']:>14.2f}{row['dense_over_ours_all']:>16.2f}"
              f"   (max rel. diff {err:.1e})", flush=True)
        results.append(row)

    chains = [r for r in results if r["robot"].startswith("chain")]
    Ns = np.log([r["N"] for r in chains if r["N"] >= 20])

    def slope(method):
        return float(np.polyfit(Ns, np.log([r[method]["median_us"] for r in chains
                                            if r["N"] >= 20]), 1)[0])

    growth = {f"{m}_growth_exponent_N20_200": slope(m) for m in METHODS}
    print("\ngrowth exponents (slope of log t vs log N, N = 20..200):")
    for k, v in growth.items():
        print(f"  {k:<44}{v:6.2f}")
    payload = {"results": results, "growth": growth, "package": package,
               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                           "pinocchio": pin.__version__, "numpy": np.__version__}}
    (out_dir / "operational_space.json").write_text(json.dumps(payload, indent=2))
    print(f"wrote {out_dir / 'operational_space.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
