"""bench_dynamics.py on two revisions of the package, interleaved on one machine.

    .venv/bin/python bench/compare_revisions.py [--before bb89000] [--after REV] [--pairs 3]
                                                [--quick] [--out bench/results/compare]

``--before`` (default bb89000) is checked out into a temporary git worktree; ``--after`` is this
checkout's working tree unless a revision is given (then a second worktree). Both sides run
*this* checkout's ``bench/bench_dynamics.py`` (same measuring code) with ``PYTHONPATH`` set to
their checkout, which is verified to be the package each imports. The runs alternate
before/after, after/before, ... (``--pairs`` of each), so a slow spell of the machine hits both.
Prints, per target ratio and per method (median µs per robot), the median over the runs of each
side and after/before; flags every change worse than 5 %. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench/bench_dynamics.py"
HIGHER_IS_BETTER = {"N7_dense_route_over_public (>= 4)"}
LIMIT = 1.05


def worktree(rev: str, stack: list[Path]) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"uc_{rev[:12]}_"))
    path.rmdir()
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
                   check=True, capture_output=True)
    stack.append(path)
    return path


def environment(source: Path) -> dict[str, str]:
    """PYTHONPATH = the checkout (the runs also start in it: ``python -c`` puts the current
    directory ahead of PYTHONPATH)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(source)
    return env


def check_import(source: Path) -> str:
    out = subprocess.run([sys.executable, "-c", "import underactuated_control as u; "
                          "print(u.__file__)"], env=environment(source), cwd=source,
                         check=True, capture_output=True, text=True).stdout.strip()
    if not Path(out).resolve().is_relative_to(source.resolve()):
        raise SystemExit(f"{source}: imports {out}, not its own package")
    return out


def run(source: Path, out: Path, quick: bool) -> dict:
    cmd = [sys.executable, str(BENCH), "--skip-compile", "--out", str(out)]
    if quick:
        cmd.append("--quick")
    subprocess.run(cmd, env=environment(source), cwd=source, check=True)
    payload = json.loads((out / "dynamics.json").read_text())
    assert Path(payload["package"]).resolve().is_relative_to(source.resolve())
    return payload


def summary(runs: dict[str, list[dict]]) -> int:
    worse = 0

    def line(name: str, b: list[float], a: list[float], higher_better: bool = False) -> None:
        nonlocal worse
        mb, ma = float(np.median(b)), float(np.median(a))
        change = ma / mb if mb else float("nan")
        bad = (1.0 / change if higher_better else change) > LIMIT
        worse += bad
        print(f"  {name:<52}{mb:10.3f}{ma:10.3f}{change:9.3f}{'  WORSE' if bad else ''}")

    print(f"\n{'target ratios':<54}{'before':>10}{'after':>10}{'a/b':>9}")
    for key in runs["before"][0]["targets"]:
        line(key, [r["targets"][key] for r in runs["before"]],
             [r["targets"][key] for r in runs["after"]], key in HIGHER_IS_BETTER)
    print(f"\n{'median µs per call (ours)':<54}{'before':>10}{'after':>10}{'a/b':>9}")
    for i, row in enumerate(runs["before"][0]["results"]):
        for method in (m for m in row if m.startswith("ours_")):
            line(f"{row['robot']:<10}{method}",
                 [r["results"][i][method]["median_us"] for r in runs["before"]],
                 [r["results"][i][method]["median_us"] for r in runs["after"]])
    print(f"\n{worse} figure(s) worse than {LIMIT - 1:.0%} (ratios of ours to ours, e.g. "
          "N200_jg_rows_over_jg_columns, also move when the denominator gets faster)")
    return worse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="bb89000")
    parser.add_argument("--after", default=None, help="a revision (default: the working tree)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench/results/compare"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trees: list[Path] = []
    try:
        sides = {"before": worktree(args.before, trees),
                 "after": ROOT if args.after is None else worktree(args.after, trees)}
        for side, source in sides.items():
            print(f"{side}: {source} imports {check_import(source)}", flush=True)
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for k in range(args.pairs):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            for side in order:
                print(f"\n=== run {k + 1}/{args.pairs}: {side} ({sides[side]})", flush=True)
                runs[side].append(run(sides[side], out / f"{side}-{k + 1}", args.quick))
        (out / "runs.json").write_text(json.dumps(
            {side: [r["targets"] for r in rs] for side, rs in runs.items()}, indent=2))
        return 1 if summary(runs) else 0
    finally:
        for path in trees:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                           check=False, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
