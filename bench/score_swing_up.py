"""Score recorded swing-up runs like the public double-pendulum leaderboards.

    .venv/bin/python bench/score_swing_up.py RUN [RUN ...] [--urdf URDF] [--tip tip]
                                             [--out scores.json]

RUN: a run directory of ``run_swing_up`` (``run.npz``; its ``summary.json`` names the URDF),
an ``.npz`` with arrays t, q, v, tau (N×n joint torques, 0 for a passive joint), or a CSV with
columns t, q_1..q_n, v_1..v_n, tau_1..tau_n (header line starting with '#' or 't'). Prints one
line per run (success, swing-up time, energy, torque cost, smoothness, velocity cost, score)
and writes every figure to ``--out`` (default scores.json). The tip is the ``--tip`` link
(default ``tip``); its full height is the largest over all configurations of the URDF.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from underactuated_control import RobotModel
from underactuated_control.scoring import NORMS, UNITS, full_tip_height, score_run, tip_heights


def load_run(path: Path) -> tuple[dict, Path | None]:
    """(arrays t, q, v, tau; the URDF named by the run's summary.json, if any)."""
    urdf = None
    if path.is_dir():
        summary = path / "summary.json"
        if summary.is_file():
            urdf = Path(json.loads(summary.read_text())["urdf"])
        path = path / "run.npz"
    if not path.is_file():
        raise ValueError(f"run '{path}' not found")
    if path.suffix == ".npz":
        data = np.load(path)
        missing = [k for k in ("t", "q", "v", "tau") if k not in data]
        if missing:
            raise ValueError(f"run '{path}' has no arrays {missing}")
        return {k: np.asarray(data[k], float) for k in ("t", "q", "v", "tau")}, urdf
    table = np.loadtxt(path, delimiter=",", comments="#", ndmin=2,
                       skiprows=1 if path.read_text().lstrip().startswith("t") else 0)
    n = (table.shape[1] - 1) // 3
    if table.shape[1] != 1 + 3 * n or n < 1:
        raise ValueError(f"run '{path}': expected columns t, q_1..q_n, v_1..v_n, tau_1..tau_n, "
                         f"got {table.shape[1]} columns")
    return {"t": table[:, 0], "q": table[:, 1:1 + n], "v": table[:, 1 + n:1 + 2 * n],
            "tau": table[:, 1 + 2 * n:]}, urdf


def score_file(path: Path, urdf: Path | None, tip: str) -> dict:
    run, named = load_run(path)
    urdf = urdf or named
    if urdf is None:
        raise ValueError(f"run '{path}': give --urdf (no summary.json names one)")
    model = RobotModel.from_urdf(Path(urdf).read_text())
    if run["q"].shape[1] != model.nv:
        raise ValueError(f"run '{path}' has {run['q'].shape[1]} joints, the URDF {model.nv}")
    heights = tip_heights(model, run["q"], tip)
    out = score_run(run["t"], run["q"], run["v"], run["tau"], heights,
                    full_tip_height(model, tip))
    out.update(run=str(path), urdf=str(urdf), tip=tip)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--urdf", type=Path, default=None)
    parser.add_argument("--tip", default="tip")
    parser.add_argument("--out", type=Path, default=Path("scores.json"))
    args = parser.parse_args(argv)
    results = []
    for path in args.runs:
        try:
            results.append(score_file(path, args.urdf, args.tip))
        except ValueError as exc:
            print(f"[ERROR] {exc}", file=sys.stderr)
            return 2
    for r in results:
        t_up = f"{r['swingup_time']:.3f} s" if r["success"] else "—"
        figures = ", ".join(f"{k} {r[k]:.4g} {UNITS[k]}" for k in NORMS if k != "swingup_time")
        print(f"{r['run']}: success {r['success']}, swing-up {t_up}, {figures}, "
              f"score {r['score']:.3f}")
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
