"""The elbow resolver with a failed joint (issue 23 item 5; patent US 5,377,310 claims 11, 22):
the patent's triangle on MuJoCo with the controller's joint law, zero gravity, the failed
joint's plan locked (the old plan) or moved by J_D (``passive_joint_motion``), judged with
Pinocchio's forward kinematics (``scenarios/resolver_failure.py`` runs the loop).

Second table: how good the first-order prediction dθ_p = J_D dθ_a is by itself. The plan is
run with an ideal servo (every joint where its setpoint says, the passive one where the plan
predicts it), then the passive joint's true motion under the same active motion is integrated
(Pinocchio RNEA and CRBA of the passive row, RK4 at 1 kHz; the active joints on the quintic
through each setpoint, as the controller samples them): how far it ends from the prediction
and how fast it still turns when the active joints have stopped.

    PYTHONPATH=. .venv/bin/python bench/resolver_failed_joint.py [--joints joint1 joint5]
        [--leg 6] [--arm panda] [--json bench/results/resolver_failed_panda.json]

``--arm``: an arm of ``bench/failure_cases.py`` (example-robot-data, never used to develop the
resolver; the set-up's damping and friction on every joint, "URDF" below; S, E, W the links
after its joints 2, 4 and 6) instead of arm7; its every joint by default, the first table only
(the second is arm7's). Columns added for every arm: how the planner reported the end, and the
largest joint speed MuJoCo measured against the URDF's limit. ``--summary`` counts the rows of
``--json`` files by outcome, and the goals each plan reached (``auto``: the disturbance plan's
row, the locked one's where it was refused).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

from underactuated_control import RobotModel
from underactuated_control.bringup import bundled
from underactuated_control.control.trajectory_sampling import interpolate
from underactuated_control.redundancy.resolver import ElbowPlanner, Settings, Waypoint
from underactuated_control.scenarios.resolver_failure import (
    LINKS,
    POSITION_TASK,
    Q0,
    TriangleArm,
    arm7,
    arm7_urdf,
    run_triangle,
    triangle,
    triangle_errors,
)

sys.path.insert(0, str(Path(__file__).parent))
from failure_cases import ARMS, DAMPING, FRICTION, arm_text  # noqa: E402

PM = pin.buildModelFromUrdf(str(bundled("urdf", "arm7.urdf")))
PM.gravity.linear[:] = 0.0
PD = PM.createData()


def triangle_arm(name: str) -> TriangleArm:
    """arm7, or ``ARMS[name]`` with the set-up's <dynamics> on every joint; S, E, W: the links
    after its joints 2, 4 and 6."""
    if name == "arm7":
        return arm7()
    text = arm_text(name, DAMPING, FRICTION)
    model = RobotModel.from_urdf(text, tip_link=ARMS[name][2])
    links = tuple(model.body_names[i] for i in (1, 3, 5))  # body k: joint k's child link
    return TriangleArm(text, ARMS[name][2], links, ARMS[name][3])


def hand_of(arm: TriangleArm):
    """Pinocchio's forward kinematics of the arm's hand frame (zero gravity is irrelevant)."""
    pm = pin.buildModelFromXML(arm.urdf)
    pd, frame = pm.createData(), pm.getFrameId(arm.tip)

    def fk(q: np.ndarray) -> np.ndarray:
        pin.framesForwardKinematics(pm, pd, q)
        return pd.oMf[frame].translation.copy()
    return fk


def ending(run) -> str:
    """How the planner reported the motion's end."""
    a = run.arrival
    if a is None:
        return "not reported"
    if a.reached:
        return f"reached ({a.elapsed:.1f} s)"
    why = "stalled" if a.stalled else "overran" if a.overran else "not reached"
    return f"{why} ({a.elapsed:.1f} s; {1e3 * a.position_error:.0f} mm)"


def closed_loop_table(arm_name: str, joints: list[str], leg: float, frictions=(True, False),
                      scale: float = 1.0, settle: float = 3.0) -> list[dict]:
    arm = triangle_arm(arm_name)
    fk = hand_of(arm)
    model = RobotModel.from_urdf(arm.urdf, tip_link=arm.tip)
    limit = model.speed_limit
    damping = "0.05 N m s/rad, 0.1 N m" if arm_name == "arm7" else \
        f"{DAMPING:g} N m s/rad, {FRICTION:g} N m"
    print(f"{arm_name}: S, E, W = {', '.join(arm.links)}; URDF friction: {damping}; "
          f"{leg:g} s legs asked; the triangle x{scale:g}; {settle:g} s after the plan")
    print("| failed joint | its friction | plan | corners [mm] | end [mm] | off the legs [mm] |"
          " passive travel, measured / planned [rad] | planner's report | peak speed / limit:"
          " active joints; the failed one |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    cases = [(None, True, "locked")]
    for j in joints:
        for free in frictions:
            cases += [(j, free, "locked"), (j, free, "disturbance")]
    rows = []
    for failed, free, mode in cases:
        run = run_triangle(failed, mode, free=free, leg=leg, arm=arm, scale=scale,
                           settle=settle)
        friction = "—" if failed is None else ("none (turns freely)" if free else "URDF")
        name = failed or "none"
        row = {"arm": arm_name, "scale": scale, "failed": failed, "free": free, "plan": mode,
               "refused": run.refused}
        rows.append(row)
        if run.refused:
            print(f"| {name} | {friction} | {mode} | refused: {run.refused} | | | | | |",
                  flush=True)
            continue
        e = triangle_errors(run, fk)
        k = model.joint_index(failed) if failed else 0
        travel = (f"{np.ptp(run.q[:, k]):.3f} / {np.ptp(run.setpoints[:, k]):.3f}" if failed
                  else "—")
        speed = np.abs(np.diff(run.q, axis=0)).max(axis=0) / np.diff(run.t[:2])[0] / limit
        active = [i for i in range(model.nv) if i != (k if failed else -1)]
        worst = active[int(np.argmax(speed[active]))]
        failed_peak = f"; {speed[k]:.2f}" if failed else ""
        corners = ", ".join(f"{x:.2f}" for x in e["corner_mm"])
        if len(e["corner_mm"]) < 3:
            corners += " (last corner not passed in time)"
        row.update(e, ending=ending(run), peak_speed=float(speed[worst]),
                   peak_joint=model.joint_names[worst],
                   failed_peak_speed=float(speed[k]) if failed else None)
        print(f"| {name} | {friction} | {mode} | {corners} | {e['end_mm']:.2f} | "
              f"{e['path_mm']:.2f} | {travel} | {row['ending']} | "
              f"{row['peak_speed']:.2f} ({row['peak_joint']}){failed_peak} |", flush=True)
    return rows


def summary(paths: list[Path]) -> None:
    """Per arm, failed-joint rows by plan and friction: reached / stopped (stalled or
    overran) / refused / other (not reported in the run's time), and the largest active
    joint speed over the rows the plan ran."""
    print("| arm | plan | failed joint's friction | reached | stopped | refused | not reported |"
          " peak active speed / limit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    tables = [[r for r in json.loads(path.read_text()) if r["failed"]] for path in paths]
    for rows in tables:
        for plan in ("disturbance", "locked"):
            for free in (True, False):
                some = [r for r in rows if r["plan"] == plan and r["free"] == free]
                if not some:
                    continue
                ran = [r for r in some if not r["refused"]]
                count = {k: sum(r.get("ending", "").startswith(k) for r in ran)
                         for k in ("reached", "stalled", "overran", "not reported")}
                peak = max((r["peak_speed"] for r in ran), default=float("nan"))
                scale = f" (x{some[0]['scale']:g})" if some[0].get("scale", 1.0) != 1.0 else ""
                print(f"| {some[0]['arm']}{scale} | {plan} | "
                      f"{'none' if free else 'URDF'} | {count['reached']} | "
                      f"{count['stalled'] + count['overran']} | {len(some) - len(ran)} | "
                      f"{count['not reported']} | {peak:.2f} |")
    print("\nGoals reached by plan; auto: the disturbance plan's row, the locked one's where "
          "it was refused (the same dry runs and steps)")
    print("| arm | failed joint's friction | disturbance | locked | auto |")
    print("| --- | --- | --- | --- | --- |")
    for rows in tables:
        for free in (True, False):
            def reached(r: dict) -> bool:
                return r.get("ending", "").startswith("reached")

            by = {(r["failed"], r["plan"]): r for r in rows if r["free"] == free}
            joints = sorted({j for j, _ in by})
            auto = [by[j, "locked"] if by[j, "disturbance"]["refused"] else by[j, "disturbance"]
                    for j in joints]
            count = {plan: sum(reached(by[j, plan]) for j in joints)
                     for plan in ("disturbance", "locked")}
            print(f"| {rows[0]['arm']} | {'none' if free else 'URDF'} | "
                  f"{count['disturbance']} of {len(joints)} | {count['locked']} | "
                  f"{sum(map(reached, auto))} |")


def ideal_setpoints(model: RobotModel, dt: float = 0.01) -> list[tuple[np.ndarray, ...]]:
    """The triangle's setpoints (q, v, a) with an ideal servo, the passive joint planned by J_D,
    one waypoint after the other (each held 0.2 s)."""
    planner = ElbowPlanner(model, "tool", LINKS, Settings(hand_weights=POSITION_TASK))
    ws = planner.config.control.workspace
    ws.set_configuration(Q0)
    p0, R0 = (x.copy() for x in ws.frame_placement("tool"))
    q, out = Q0.copy(), [(Q0.copy(), np.zeros(7), np.zeros(7))]
    for p, psi in triangle(p0, planner.arm_angle(Q0)):
        result = planner.start([Waypoint((p, R0), float((psi + np.pi) % (2 * np.pi) - np.pi),
                                         3.0)], q)
        if not result.accepted:
            raise RuntimeError(result.reason)
        arrived, extra = False, 0
        while extra < 20:
            sp = planner.step(q, dt)
            arrived = arrived or sp.arrival is not None
            extra += arrived
            out.append((sp.q.copy(), sp.v.copy(), sp.a.copy()))
            q = sp.q.copy()
    return out


def true_passive(setpoints, j: int, damping: float, friction: float, dt: float = 0.01,
                 sub: int = 10) -> np.ndarray:
    """(angle, velocity) of passive joint ``j`` after each setpoint while the active joints
    follow the setpoints exactly; its force -d v - f tanh(v / 0.01)."""
    act = [i for i in range(PM.nv) if i != j]
    x = np.array([setpoints[0][0][j], 0.0])
    h, out = dt / sub, []
    def f(s: float, x: np.ndarray, ends: tuple) -> np.ndarray:
        qa, va, aa = interpolate(s, dt, *ends, 5)
        q, v, a = np.zeros(PM.nv), np.zeros(PM.nv), np.zeros(PM.nv)
        q[act], v[act], a[act] = qa, va, aa
        q[j], v[j] = x
        bias = pin.rnea(PM, PD, q, v, a)[j]  # M_pa q̈_a + C_p (q̈_p = 0, no gravity)
        m_pp = pin.crba(PM, PD, q)[j, j]
        tau = -damping * x[1] - friction * np.tanh(x[1] / 0.01)
        return np.array([x[1], (tau - bias) / m_pp])

    for (q0, v0, a0), (q1, v1, a1) in zip(setpoints[:-1], setpoints[1:]):
        ends = (q0[act], v0[act], a0[act], q1[act], v1[act], a1[act])
        for i in range(sub):
            s = i * h
            k1 = f(s, x, ends)
            k2 = f(s + h / 2, x + h / 2 * k1, ends)
            k3 = f(s + h / 2, x + h / 2 * k2, ends)
            k4 = f(s + h, x + h * k3, ends)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(x.copy())
    return np.array(out)


def prediction_table(joints: list[str]) -> None:
    print("\n| passive joint | its force | predicted travel [rad] | true - predicted, max / "
          "end [rad] | still turning at the end [rad/s] |")
    print("| --- | --- | --- | --- | --- |")
    base = RobotModel.from_urdf(arm7_urdf(), tip_link="tool", gravity=(0.0, 0.0, 0.0))
    for name in joints:
        j = base.joint_index(name)
        try:
            setpoints = ideal_setpoints(base.with_passive([name]))
        except RuntimeError as exc:
            print(f"| {name} | | refused: {exc} | | |")
            continue
        predicted = np.array([s[0][j] for s in setpoints])
        for label, d, fc in (("none", 0.0, 0.0), ("URDF: 0.05 v + 0.1 tanh(v/0.01) N m",
                                                   0.05, 0.1)):
            true = true_passive(setpoints, j, d, fc)
            err = np.abs(true[:, 0] - predicted[1:])
            print(f"| {name} | {label} | {np.ptp(predicted):.3f} | {err.max():.4f} / "
                  f"{err[-1]:.4f} | {abs(true[-1, 1]):.4f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", default="arm7", choices=["arm7", *(a for a in ARMS if a != "pr2")],
                    help="the arm (the PR2's continuous joints are not handled by this bench)")
    ap.add_argument("--joints", nargs="+", default=None,
                    help="failed joints (default: arm7's joint1 joint3 joint5, another arm's "
                    "seven)")
    ap.add_argument("--leg", type=float, default=6.0, help="duration asked per leg [s]")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="the triangle's legs (0.1 m) and arm-angle swings (-90°, +45°) times "
                    "this (an arm whose healthy plan refuses the patent's triangle)")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="simulated after the planned motion [s] (a goal held on is reported "
                    "SETTLE_HOLD = 1 s after its clock)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--summary", type=Path, nargs="+",
                    help="only summarise these --json files (one table)")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary)
        return
    if args.arm == "arm7":
        joints = args.joints or ["joint1", "joint3", "joint5"]
    else:
        arm = triangle_arm(args.arm)
        joints = args.joints or list(RobotModel.from_urdf(arm.urdf, tip_link=arm.tip)
                                     .joint_names)
    rows = closed_loop_table(args.arm, joints, args.leg, scale=args.scale, settle=args.settle)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))
        print(f"wrote {args.json}")
    if args.arm == "arm7":
        prediction_table(joints)


if __name__ == "__main__":
    main()
