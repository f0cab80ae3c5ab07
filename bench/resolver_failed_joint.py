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
        [--leg 6]
"""

from __future__ import annotations

import argparse

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
    arm7_urdf,
    run_triangle,
    triangle,
    triangle_errors,
)

PM = pin.buildModelFromUrdf(str(bundled("urdf", "arm7.urdf")))
PM.gravity.linear[:] = 0.0
PD = PM.createData()
TOOL = PM.getFrameId("tool")


def fk(q: np.ndarray) -> np.ndarray:
    pin.framesForwardKinematics(PM, PD, q)
    return PD.oMf[TOOL].translation.copy()


def closed_loop_table(joints: list[str], leg: float) -> None:
    print(f"| failed joint | its friction | plan | corners [mm] | end [mm] | off the legs [mm] |"
          f" passive travel, measured / planned [rad] |  ({leg:g} s legs asked)")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    cases = [(None, True, "locked")]
    for j in joints:
        for free in (True, False):
            cases += [(j, free, "locked"), (j, free, "disturbance")]
    for failed, free, mode in cases:
        run = run_triangle(failed, mode, free=free, leg=leg)
        friction = "—" if failed is None else ("none (turns freely)" if free else "URDF")
        name = failed or "none"
        if run.refused:
            print(f"| {name} | {friction} | {mode} | refused: {run.refused} | | | |",
                  flush=True)
            continue
        e = triangle_errors(run, fk)
        k = int(failed[-1]) - 1 if failed else 0
        travel = (f"{np.ptp(run.q[:, k]):.3f} / {np.ptp(run.setpoints[:, k]):.3f}" if failed
                  else "—")
        corners = ", ".join(f"{x:.2f}" for x in e["corner_mm"])
        if len(e["corner_mm"]) < 3:
            corners += " (last corner not passed in time)"
        print(f"| {name} | {friction} | {mode} | {corners} | {e['end_mm']:.2f} | "
              f"{e['path_mm']:.2f} | {travel} |", flush=True)


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
    ap.add_argument("--joints", nargs="+", default=["joint1", "joint3", "joint5"])
    ap.add_argument("--leg", type=float, default=6.0, help="duration asked per leg [s]")
    args = ap.parse_args()
    closed_loop_table(args.joints, args.leg)
    prediction_table(args.joints)


if __name__ == "__main__":
    main()
