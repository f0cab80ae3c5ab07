"""FollowJointTrajectory goals on arms whose URDF gives every joint damping and dry friction, with
the joint law's default gains: success, final error and velocity peaks, without and with the
friction compensation and integral action.

    .venv/bin/python bench/bench_trajectory_goals.py [--goals 20] [--seed 0]
        [--arms xarm7 talos_left_arm] [--configs none feedforward default] [--latency 0]

Arms (example-robot-data, unmodified): xarm7 (damping 2-10 N·m·s/rad, 1 N·m friction per
joint) and talos_left_arm (damping 1, friction 1; its gripper joint holds still). Each goal:
from a random start (at rest, held 0.5 s), three random reachable waypoints at 1, 2, 3 s
(positions and velocities: cubic segments, as MoveIt sends them; each step within the joint
limits less 0.1 rad, at most 0.6 rad and 0.4 × the URDF velocity limit × 1 s per joint), judged
as the action does (``TrajectoryExecution``): goal tolerance 5 mrad, stopped-velocity tolerance
0.01 rad/s, goal_time 1 s (the node's default). Columns: goals SUCCEEDED; |target - q| max
over joints when the action ended (largest and median over the goals); the same 1 s after the
last point (settled, the largest); the largest |v| / URDF velocity limit over joints and time.
Goals the motors cannot follow are drawn again:
the reference's inverse dynamics plus the URDF damping and friction stay within 0.8 × the
effort limits (the Talos shoulder holds 16 of its 22 N·m against gravity at some starts).

In-process, the controller node's cycle without ROS: the joint law, ``CommandShaper``
(safety layer, friction compensation), the effort clamp (``EffortMapper``), the trajectory
sampled by ``SplineTrajectory.sample_into`` on the simulated clock; the plant is ``sim``'s
MuJoCo model as ``mujoco_sim`` builds it (1 ms, Euler: URDF damping -> damping, friction ->
frictionloss), stepped by ``sim.closed_loop`` at latency 0 (the lock-stepped simulator).

Then xarm7's light wrist (joint7: 1.4e-4 kg·m², 2 N·m·s/rad, 1 N·m of dry friction), from
FAST_START as the node gets them (``trajectory_rules``: time-scaled to the URDF velocity limits):
"fast goal", a goal whose only point (FAST_STEP away) is 0.05 s away, judged with goal
tolerance 5 mrad and goal_time 3 s; "reversing step", ``~/joint_reference`` points with no time
jumping to FAST_START + JUMP, back, and there again every 2.5 s (test/ros/test_safety_layer.py).
Columns: verdict, final error, the largest |v| / URDF velocity limit (and its joint).

Configurations: none = friction_compensation false, ki 0 (the controller before issue 21);
feedforward = compensation on, ki 0; default = the node's defaults (compensation and integral).
Prints a table and writes bench/results/trajectory_goals.json (``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sysconfig  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.control.command import CommandShaper  # noqa: E402
from underactuated_control.control.joint_law import JointLaw  # noqa: E402
from underactuated_control.control.joint_space import EffortMapper  # noqa: E402
from underactuated_control.control.registry import default_settings  # noqa: E402
from underactuated_control.control.trajectory_sampling import (  # noqa: E402
    StateTolerance,
    Tolerances,
    TrajectoryExecution,
    check_trajectory,
)
from underactuated_control.dynamics import inverse_dynamics  # noqa: E402
from underactuated_control.sim import build_plant, closed_loop  # noqa: E402

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
ARMS = {"xarm7": ROBOTS / "xarm_description/urdf/xarm7.urdf",
        "talos_left_arm": ROBOTS / "talos_data/robots/talos_left_arm.urdf"}
HELD = {"talos_left_arm": ["gripper_left_joint"]}  # joints the goals keep where they start
CONFIGS = {"none": {"friction_compensation": False, "ki": [0.0]},
           "feedforward": {"ki": [0.0]},
           "default": {}}
DT = 1e-3
HOLD_S, TIMES = 0.5, (1.0, 2.0, 3.0)
GOAL_TOLERANCE, STOPPED_VELOCITY, GOAL_TIME = 5e-3, 0.01, 1.0
MARGIN, MAX_STEP, SPEED_FRACTION, TORQUE_FRACTION = 0.1, 0.6, 0.4, 0.8


LATENCY_STEPS = 0  # physics steps each command is late (--latency; 0: lock-stepped)


def waypoint_velocities(points: list[np.ndarray]) -> list[np.ndarray]:
    """Zero at the ends, the mean slope of the neighbouring segments in between."""
    return [0.5 * (points[i + 1] - points[i - 1]) / (TIMES[i + 1] - TIMES[i - 1])
            if 0 < i < len(points) - 1 else np.zeros_like(points[i])
            for i in range(len(points))]


def trajectory(joints: list[str], start: np.ndarray, points: list[np.ndarray], now_ns: int):
    """The goal's ``SplineTrajectory`` (checked as the action checks it), started at rest at
    ``start`` at ``now_ns``."""
    velocities = waypoint_velocities(points)
    spline = check_trajectory(
        joints, [(int(t), int(round((t % 1) * 1e9))) for t in TIMES],
        [list(p) for p in points], [list(x) for x in velocities], [[]] * len(points),
        [[]] * len(points), active_joints=joints, passive_joints=(), allow_partial=False,
        allow_nonzero_end_velocity=False, start_ns=0, now_ns=now_ns)
    spline.begin(now_ns, start, np.zeros_like(start), np.zeros_like(start))
    return spline


def feasible(model: RobotModel, start: np.ndarray, points: list[np.ndarray],
             held: np.ndarray) -> bool:
    """The reference's inverse dynamics plus the URDF damping and friction within
    TORQUE_FRACTION of the effort limits (every 20 ms) on the joints that move (``held``: the
    others): a goal the motors can follow."""
    dofs = model.active_dofs
    joints = list(model.active_joints)
    limit = np.where(held, np.inf, TORQUE_FRACTION * np.asarray(model.effort_limit)[dofs])
    spline = trajectory(joints, start, points, 0)
    q_index = [model.q_start[model.joint_index(n)] for n in joints]
    q, v, a = np.zeros(model.nq), np.zeros(model.nv), np.zeros(model.nv)
    for t in np.arange(0.0, TIMES[-1] + 1e-9, 0.02):
        s = spline.sample(int(round(t * 1e9)))
        q[q_index], v[dofs], a[dofs] = s.position, s.velocity, s.acceleration
        tau = inverse_dynamics(model, q, v, a)[dofs]
        tau += model.damping[dofs] * s.velocity + model.friction[dofs]
        if np.any(np.abs(tau) > limit):
            return False
    return True


def random_goal(model: RobotModel, rng: np.random.Generator, held: list[str]
                ) -> tuple[np.ndarray, list[np.ndarray]]:
    """A start configuration (active joints) and three waypoints, each step within the limits
    (less MARGIN), at most MAX_STEP and SPEED_FRACTION of the velocity limit per second, the
    whole goal ``feasible`` (drawn again until it is)."""
    dofs = model.active_dofs
    lo = np.maximum(np.asarray(model.position_lower)[dofs], -np.pi) + MARGIN
    hi = np.minimum(np.asarray(model.position_upper)[dofs], np.pi) - MARGIN
    vmax = np.asarray(model.velocity_limit)[dofs]
    step = np.minimum(MAX_STEP, SPEED_FRACTION * vmax * (TIMES[1] - TIMES[0]))
    keep = np.array([n in held for n in model.active_joints])
    for _ in range(10000):
        start = lo + (hi - lo) * rng.uniform(0.2, 0.8, len(dofs))
        points, q = [], start
        for _ in TIMES:
            q = np.clip(q + rng.uniform(-1.0, 1.0, len(dofs)) * step, lo, hi)
            q = np.where(keep, start, q)
            points.append(q)
        if feasible(model, start, points, keep):
            return start, points
    raise RuntimeError(f"no feasible goal for '{model.name}' in 10000 draws")


def run_goal(urdf: str, model: RobotModel, settings: dict[str, Any], start: np.ndarray,
             points: list[np.ndarray], trace: list | None = None) -> dict[str, Any]:
    """One goal from rest at ``start``; the action's verdict, final error, velocity peak
    (``trace``: gets (t, q, v, reference, command, integral) of the active joints per cycle)."""
    plant = build_plant(urdf, model, timestep=DT, integrator="euler")
    q0 = np.zeros(model.nq)
    q_index = [model.q_start[model.joint_index(n)] for n in model.active_joints]
    q0[q_index] = start
    plant.set_state(q0, np.zeros(model.nv))
    law = JointLaw(model, settings, model.body_names[-1])
    shaper = CommandShaper(model, settings, law.workspace)
    mapper = EffortMapper(model, None, settings["effort_limit_scale"])
    joints = list(model.active_joints)
    n = len(joints)
    tolerances = Tolerances(StateTolerance.zeros(n), StateTolerance(
        np.full(n, GOAL_TOLERANCE), np.full(n, STOPPED_VELOCITY), np.zeros(n)), GOAL_TIME)
    dofs = model.active_dofs
    vmax = np.asarray(model.velocity_limit)[dofs]
    hold_steps = int(round(HOLD_S / DT))
    state: dict[str, Any] = {"reference": None, "trajectory": None, "verdict": None,
                             "peak": 0.0, "error": np.nan}
    execution = TrajectoryExecution(joints, tolerances)

    def control(k: int, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        now_ns = int(round(k * DT * 1e9))
        if state["reference"] is None:
            state["reference"] = law.hold_reference(q)
        ref = state["reference"]
        if k == hold_steps:  # started from the law's reference, as the node does
            velocities = waypoint_velocities(points)
            state["trajectory"] = check_trajectory(
                joints, [(int(t), int(round((t % 1) * 1e9))) for t in TIMES],
                [list(p) for p in points], [list(x) for x in velocities], [[]] * len(points),
                [[]] * len(points), active_joints=joints, passive_joints=(),
                allow_partial=False, allow_nonzero_end_velocity=False, start_ns=0,
                now_ns=now_ns)
        trajectory = state["trajectory"]
        if trajectory is not None:
            trajectory.sample_into(ref, joints, now_ns)
        out = law.compute(q, v, ref, k * DT, False)
        shaper.apply(q, v, out)
        command = mapper.map(out.tau_active).copy()
        qa, va = q[q_index], v[dofs]
        if trace is not None:
            trace.append((k * DT, qa, va, ref.position.copy(), command,
                          law.controller.integral.copy()))
        state["peak"] = max(state["peak"], float(np.max(np.abs(va) / vmax)))
        if trajectory is not None and state["verdict"] is None:
            verdict = execution.update(trajectory.last, ref.position, ref.velocity, qa, va)
            if verdict is not None:
                state["verdict"] = verdict[0]
                state["error"] = float(np.max(np.abs(points[-1] - qa)))
        return command

    # on to goal_time after the last point, whatever the verdict (the error then: settled)
    steps = int(round((HOLD_S + TIMES[-1] + GOAL_TIME) / DT))
    closed_loop(plant, control, steps, LATENCY_STEPS)
    settled = float(np.max(np.abs(points[-1] - plant.state()[0][q_index])))
    if state["verdict"] is None:
        state["verdict"], state["error"] = "NONE", settled
    return {"verdict": state["verdict"], "final_error": state["error"],
            "settled_error": settled, "velocity_peak_ratio": state["peak"]}


FAST_START = np.array([0.0, 0.3, 0.0, 1.2, 0.0, 0.9, 0.0])
FAST_STEP = np.array([0.3, -0.3, 0.3, 0.3, -0.3, 0.3, 0.4])
JUMP = np.array([1.5, 0.8, 1.5, 1.0, 1.5, 1.0, 1.5])


def _message(joints: list[str], points: list[tuple[float, np.ndarray, np.ndarray | None]]):
    """A trajectory_msgs/JointTrajectory look-alike (read by attribute), unstamped."""
    from types import SimpleNamespace as N
    return N(joint_names=joints, header=N(stamp=N(sec=0, nanosec=0)), points=[
        N(time_from_start=N(sec=int(t), nanosec=int(round((t % 1) * 1e9))),
          positions=[float(x) for x in p],
          velocities=[] if v is None else [float(x) for x in v], accelerations=[], effort=[])
        for t, p, v in points])


def run_fast_case(urdf: str, model: RobotModel, settings: dict[str, Any], case: str
                  ) -> dict[str, Any]:
    """xarm7's "fast goal" or "reversing step" (module docstring) from rest at FAST_START."""
    from underactuated_control.control.trajectory_sampling import (
        trajectory_from_message,
        trajectory_rules,
    )
    rules = {"allow_partial_joints_goal": False,
             "allow_nonzero_velocity_at_trajectory_end": False,
             "trajectory_velocity_limits": "scale", **settings}
    plant = build_plant(urdf, model, timestep=DT, integrator="euler")
    q_index = [model.q_start[model.joint_index(n)] for n in model.active_joints]
    q0 = np.zeros(model.nq)
    q0[q_index] = FAST_START
    plant.set_state(q0, np.zeros(model.nv))
    law = JointLaw(model, settings, model.body_names[-1])
    shaper = CommandShaper(model, settings, law.workspace)
    mapper = EffortMapper(model, None, settings["effort_limit_scale"])
    joints, dofs = list(model.active_joints), model.active_dofs
    vmax = np.asarray(model.velocity_limit)[dofs]
    n, start = len(joints), int(round(HOLD_S / DT))
    if case == "fast goal":
        target = FAST_START + FAST_STEP
        schedule = {start: (_message(joints, [(0.05, target, np.zeros(n))]), False)}
        steps = start + int(round(3.05 / DT))
    else:
        target = FAST_START + JUMP
        period = int(round(2.5 / DT))
        schedule = {start + i * period: (_message(joints, [(0.0, p, None)]), True)
                    for i, p in enumerate((target, FAST_START, target))}
        steps = start + 3 * period
    execution = TrajectoryExecution(joints, Tolerances(StateTolerance.zeros(n), StateTolerance(
        np.full(n, GOAL_TOLERANCE), np.full(n, STOPPED_VELOCITY), np.zeros(n)), 3.0))
    state: dict[str, Any] = {"reference": None, "trajectory": None, "verdict": None,
                             "peak": np.zeros(n), "error": np.nan, "scale": 1.0}

    def control(k: int, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        now_ns = int(round(k * DT * 1e9))
        if state["reference"] is None:
            state["reference"] = law.hold_reference(q)
        if k in schedule:
            msg, topic = schedule[k]
            state["trajectory"] = trajectory_from_message(
                msg, now_ns, **trajectory_rules(model, rules, topic=topic))
        trajectory = state["trajectory"]
        if trajectory is not None:
            trajectory.sample_into(state["reference"], joints, now_ns)
            state["scale"] = max(state["scale"], trajectory.scale)
        out = law.compute(q, v, state["reference"], k * DT, False)
        shaper.apply(q, v, out)
        qa, va = q[q_index], v[dofs]
        state["peak"] = np.maximum(state["peak"], np.abs(va) / vmax)
        if case == "fast goal" and trajectory is not None and state["verdict"] is None:
            ref = state["reference"]
            verdict = execution.update(trajectory.last, ref.position, ref.velocity, qa, va)
            if verdict is not None:
                state["verdict"] = verdict[0]
                state["error"] = float(np.max(np.abs(target - qa)))
        return mapper.map(out.tau_active).copy()

    closed_loop(plant, control, steps, LATENCY_STEPS)
    settled = float(np.max(np.abs(target - plant.state()[0][q_index])))
    peak = state["peak"]
    return {"case": case, "verdict": state["verdict"] or "-",
            "final_error": state["error"] if state["verdict"] else settled,
            "velocity_peak_over_limit": float(peak.max()),
            "peak_joint": joints[int(np.argmax(peak))], "time_scale": state["scale"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--goals", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="override a setting of every configuration (JSON value)")
    parser.add_argument("--latency", type=int, default=0, metavar="STEPS",
                        help="each command acts this many 1 ms steps late (a real robot's "
                        "cycle; 0: lock-stepped)")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "trajectory_goals.json")
    args = parser.parse_args()
    global LATENCY_STEPS
    LATENCY_STEPS = args.latency
    extra = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    rows, runs = [], []
    header = (f"{'arm':16s} {'config':12s} {'succeeded':>9s} {'error max':>10s} "
              f"{'error median':>12s} {'after 1 s':>10s} {'v peak/limit':>12s} {'s/goal':>7s}")
    print(header)
    print("-" * len(header))
    for arm in args.arms:
        urdf = ARMS[arm].read_text()
        model = RobotModel.from_urdf(urdf)
        rng = np.random.default_rng(args.seed)
        goals = [random_goal(model, rng, HELD.get(arm, [])) for _ in range(args.goals)]
        for config in args.configs:
            settings = default_settings(**{**CONFIGS[config], **extra})
            t0 = time.perf_counter()
            results = [run_goal(urdf, model, settings, s, p) for s, p in goals]
            seconds = (time.perf_counter() - t0) / len(goals)
            ok = sum(r["verdict"] == "SUCCESSFUL" for r in results)
            errors = np.array([r["final_error"] for r in results])
            peak = max(r["velocity_peak_ratio"] for r in results)
            settled = max(r["settled_error"] for r in results)
            row = {"arm": arm, "config": config, "succeeded": ok, "goals": len(goals),
                   "final_error_max_rad": float(errors.max()),
                   "final_error_median_rad": float(np.median(errors)),
                   "settled_error_max_rad": settled,
                   "velocity_peak_over_limit": peak, "seconds_per_goal": seconds,
                   "verdicts": sorted({r["verdict"] for r in results})}
            rows.append(row)
            runs.append({"arm": arm, "config": config, "results": results})
            print(f"{arm:16s} {config:12s} {ok:>4d}/{len(goals):<4d} "
                  f"{1e3 * errors.max():>7.2f} mrad {1e3 * np.median(errors):>7.2f} mrad "
                  f"{1e3 * settled:>5.2f} mrad {peak:>12.2f} {seconds:>7.2f}", flush=True)
    fast = []
    if "xarm7" in args.arms:
        urdf = ARMS["xarm7"].read_text()
        model = RobotModel.from_urdf(urdf)
        print(f"\n{'xarm7':16s} {'config':12s} {'case':16s} {'verdict':>10s} {'error':>10s} "
              f"{'v peak/limit':>12s} joint")
        for config in args.configs:
            settings = default_settings(**{**CONFIGS[config], **extra})
            for case in ("fast goal", "reversing step"):
                r = {"config": config, **run_fast_case(urdf, model, settings, case)}
                fast.append(r)
                print(f"{'':16s} {config:12s} {case:16s} {r['verdict']:>10s} "
                      f"{1e3 * r['final_error']:>5.2f} mrad {r['velocity_peak_over_limit']:>12.3f} "
                      f"{r['peak_joint']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"goals": args.goals, "seed": args.seed, "extra": extra,
                                    "latency_steps": args.latency,
                                    "rows": rows, "runs": runs, "xarm7_fast": fast}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
