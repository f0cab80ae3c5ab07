"""Head error per lap of a recorded ``snake`` scenario run, recomputed from its bag with
Pinocchio (as ``test/test_snake.py``'s DDS test: each /joint_states paired with the last
~/pose_reference stamped at or before it, the head's x, y from Pinocchio's kinematics of the
URDF, not the controller's).

    underactuated-control demo --scenario snake --duration 27 --out OUT
    .venv/bin/python bench/snake_laps.py OUT/snake [--json FILE]

Laps are windows of the path's own time (0-11 s: the 3 s ramp and the first 8 s lap, then
11-19 s and 19-27 s for the default path), recovered from each reference's position on the
path (``HeadPath`` of ``summary.json``'s path through the first reference): the harness pauses
the path while a stalled runner catches up (``ScenarioRun.stream_path``), so the path's time
lags the simulated time by a little.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pinocchio as pin

from underactuated_control.nodes.bags import read_bag
from underactuated_control.scenarios.harness import REFERENCE_TOPIC, stamp_seconds
from underactuated_control.scenarios.snake import HEAD, HeadPath


def path_times(path: HeadPath, points: np.ndarray, horizon: float) -> np.ndarray:
    """The path's time [s] at each point of the path (a circle: its phase φ, unwrapped, then
    the phase profile inverted on a 1 ms grid)."""
    c, s = np.cos(path.heading), np.sin(path.heading)
    f = (points[:, :2] - np.array(path.start)[:2]) @ np.array([[c, -s], [s, c]])  # rotᵀ (p - p₀)
    phi = np.unwrap(np.arctan2(f[:, 1] / path.radius, 1.0 - f[:, 0] / path.radius))
    grid = np.arange(0.0, horizon + 1e-3, 1e-3)
    return np.interp(phi, [path.phase(t)[0] for t in grid], grid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the run's directory (OUT/snake: bag/, summary.json)")
    ap.add_argument("--json", type=Path, help="write the table here")
    args = ap.parse_args()
    summary = json.loads((args.run / "summary.json").read_text())
    p = summary["path"]
    if p["shape"] != "circle":
        raise SystemExit(f"error: only the circle path is supported, got '{p['shape']}'")
    pm = pin.buildModelFromUrdf(summary["urdf"])
    pd = pm.createData()
    fid = pm.getFrameId(HEAD)
    names = [pm.names[i] for i in range(1, pm.njoints)]  # revolute joints: nq = nv = 1 each
    bag = read_bag(args.run / "bag", ["/joint_states", REFERENCE_TOPIC])
    refs = bag[REFERENCE_TOPIC]
    ref_t = np.array([stamp_seconds(m) for _, m in refs])
    ref_p = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                      for _, m in refs])
    path = HeadPath(start=tuple(ref_p[0]), radius=p["radius_m"], period=p["period_s"],
                    ramp=p["ramp_s"])
    ref_path_t = path_times(path, ref_p, p["duration_s"] + p["period_s"])
    t_sim, t_path, error = [], [], []
    for _, js in bag["/joint_states"]:
        t = stamp_seconds(js)
        if t < ref_t[0]:
            continue
        q = np.array([dict(zip(js.name, js.position))[n] for n in names])
        pin.framesForwardKinematics(pm, pd, q)
        k = np.searchsorted(ref_t, t, side="right") - 1
        error.append(np.linalg.norm(pd.oMf[fid].translation[:2] - ref_p[k, :2]))
        t_sim.append(t - ref_t[0])
        t_path.append(ref_path_t[k])
    e, tp = 1e3 * np.array(error), np.array(t_path)
    edges = [0.0] + [p["ramp_s"] + p["period_s"] * (i + 1)
                     for i in range(int(np.ceil((p["duration_s"] - p["ramp_s"]) / p["period_s"])))]
    edges[-1] = max(edges[-1], tp.max() + 1e-9)
    rows = [{"window": "all", "path_s": [0.0, float(tp.max())], "states": int(len(e)),
             "rms_mm": float(np.sqrt(np.mean(e**2))), "max_mm": float(e.max())}]
    for a, b in zip(edges[:-1], edges[1:]):
        k = (tp >= a) & (tp < b)
        if k.any():
            rows.append({"window": f"{a:g}-{b:g} s", "path_s": [a, b], "states": int(k.sum()),
                         "rms_mm": float(np.sqrt(np.mean(e[k] ** 2))),
                         "max_mm": float(e[k].max())})
    print(f"{args.run}: {len(e)} states over {t_sim[-1]:.2f} s of simulated time, "
          f"{tp.max():.2f} s of the path (the path paused {t_sim[-1] - tp.max():.2f} s)")
    print("| path time | states | head RMS mm | head max mm |")
    for r in rows:
        print(f"| {r['window']} | {r['states']} | {r['rms_mm']:.2f} | {r['max_mm']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"run": str(args.run), "laps": rows,
                                         "simulated_s": t_sim[-1]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
