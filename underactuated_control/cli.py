"""``underactuated-control`` console entry point (no ROS needed for the library commands).

underactuated-control inspect arm7 --passive joint2 joint4
underactuated-control inspect path/to/robot.urdf --tip-link tool --q 0 -0.3 0 -2.2 0 2 0.8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import RobotModel
from .bringup import (
    CONTROLLER,
    EXTRA_NODES,
    RESOLVER,
    bringup_nodes,
    builtin_robots,
    check_bringup,
    node_command,
    node_environment,
    node_names,
    resolve_robot,
    start_node,
    stop_processes,
)

__all__ = ["main", "build_parser"]


def _fmt(names, values, linear, units: tuple[str, str]) -> str:
    return "\n".join(
        f"    {n:<28}{v:>14.6f} {units[1] if lin else units[0]}"
        for n, v, lin in zip(names, values, linear)
    )


def cmd_inspect(args: argparse.Namespace) -> int:
    from .dynamics import hybrid_dynamics, inverse_dynamics, mass_matrix
    from .passive_forces import PassiveForceModel

    model = RobotModel.from_urdf(
        resolve_robot(args.urdf),
        passive_joints=args.passive,
        root_link=args.root_link,
        tip_link=args.tip_link,
        floating_base=args.floating_base,
        mimic=args.mimic,
    )
    print(model.describe())
    q = model.neutral_configuration() if args.q is None else np.asarray(args.q, dtype=float)
    v = np.zeros(model.nv) if args.v is None else np.asarray(args.v, dtype=float)
    model.check_state(q=q, v=v)
    qdd_active = np.zeros(model.n_active)
    tau_passive = PassiveForceModel(model)(q, v)
    res = hybrid_dynamics(model, q, v, qdd_active, tau_passive)
    print(
        f"\nhybrid dynamics (section 5) at q={np.round(q, 4).tolist()}, "
        f"v={np.round(v, 4).tolist()}, qdd_active=0, tau_passive from the passive-force model:"
    )
    lin = model.dof_is_linear
    active = [model.dof_names[i] for i in model.active_dofs]
    passive = [model.dof_names[i] for i in model.passive_dofs]
    if active:
        print("  tau_active (force the actuators must give to hold the active joints):")
        print(_fmt(active, res.tau_active, lin[model.active_dofs], ("N·m", "N")))
    if passive:
        print("  qdd_passive (how the passive joints then accelerate):")
        print(_fmt(passive, res.qdd_passive, lin[model.passive_dofs], ("rad/s²", "m/s²")))
    M = mass_matrix(model, q)
    eig = np.linalg.eigvalsh(M)
    print(
        f"\nmass matrix: eigenvalues in [{eig[0]:.4g}, {eig[-1]:.4g}], "
        f"condition {eig[-1] / eig[0]:.3g}"
    )
    if model.n_passive and model.n_active:
        g = inverse_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv))
        print("  for comparison, fully actuated gravity torques:")
        print(_fmt(model.dof_names, g, lin, ("N·m", "N")))
    return 0


def _load_model(args: argparse.Namespace) -> RobotModel:
    return RobotModel.from_urdf(resolve_robot(args.urdf), passive_joints=args.passive,
                                root_link=args.root_link, tip_link=args.tip_link,
                                floating_base=args.floating_base, mimic=args.mimic,
                                gravity=args.gravity)


def _check_output(path: str, flag: str, suffixes: tuple[str, ...]) -> Path:
    """The output file of ``flag``, checked before any work: suffix, existing writable
    directory, not a directory itself."""
    import os

    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} '{out}' is a directory, not a file")
    if out.suffix not in suffixes:
        raise ValueError(f"{flag} must end in {' or '.join(suffixes)}, got '{out.name}'")
    folder = out.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{flag}: directory '{folder}' does not exist")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"{flag}: '{out}' is not writable")
    return out


def _plan_problems(model: RobotModel, plan, task: str, max_error: float,
                   max_orientation_error: float) -> list[str]:
    """What makes a plan unusable: a diverging integration, active forces beyond the URDF
    effort limits, a tracking error (of what the task tracks) past the tolerances."""
    problems = [plan.diverged] if plan.diverged else []
    names = [model.dof_names[i] for i in model.active_dofs]
    limits = np.asarray(model.effort_limit)[model.active_dofs]
    peaks = np.abs(plan.tau_active).max(axis=0, initial=0.0)
    over = [(n, pk, lim) for n, pk, lim in zip(names, peaks, limits) if pk > lim]
    lin = model.dof_is_linear[model.active_dofs]
    unit = dict(zip(names, ["N" if x else "N·m" for x in lin]))
    if over:
        first = next(i for i in range(len(plan.t))
                     if np.any(np.abs(plan.tau_active[i]) > limits))
        problems.append(
            "active forces beyond the URDF effort limits: " + ", ".join(
                f"{n} {pk:.4g} {unit[n]} (limit {lim:g})" for n, pk, lim in over)
            + f", first at t = {plan.t[first]:.3f} s")
    e_p = plan.position_error.max(initial=0.0) if task in ("pose", "position", "planar") else 0.0
    e_o = plan.orientation_error.max(initial=0.0) if task in ("pose", "orientation") else 0.0
    if e_p > max_error or e_o > max_orientation_error:
        worst = int(np.argmax(plan.position_error)) if e_p > max_error else int(
            np.argmax(plan.orientation_error))
        problems.append(
            f"the tracking error grows to {1e3 * e_p:.4g} mm / {np.degrees(e_o):.3g}° (at t = "
            f"{plan.t[worst]:.3f} s; tolerances --max-error {1e3 * max_error:g} mm, "
            f"--max-orientation-error {np.degrees(max_orientation_error):.3g}°): the path is "
            "not reachable this way")
    return problems


def cmd_plan(args: argparse.Namespace) -> int:
    """Offline mode (§6.2, patent claim 10): T_a(t) and passive motion for a frame path."""
    from . import so3
    from .control import EndEffectorTracker
    from .control.offline import plan_trajectory
    from .control.trajectories import CircleTrajectory, LineTrajectory
    from .jacobians import frame_placement

    # everything the user gave is checked before the (long) integration
    out = _check_output(args.out, "--out", (".csv", ".npz")) if args.out else None
    plot = _check_output(args.plot, "--plot", (".png", ".pdf", ".svg")) if args.plot else None
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("--plot needs matplotlib (pip install matplotlib)") from None
    for flag, value in (("--duration", args.duration), ("--dt", args.dt)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be > 0 s, got {value}")
    if args.dt > args.duration:
        raise ValueError(f"--dt ({args.dt} s) must not exceed --duration ({args.duration} s)")
    if args.circle is not None:
        normal = np.asarray(args.normal, dtype=float)
        if not np.all(np.isfinite(normal)) or np.linalg.norm(normal) < 1e-12:
            raise ValueError(f"--normal must be a non-zero vector, got {normal.tolist()}")
        if not (np.isfinite(args.circle) and args.circle > 0):
            raise ValueError(f"--circle radius must be > 0 m, got {args.circle}")
    for flag in ("line", "rotate"):
        value = getattr(args, flag)
        if value is not None and not np.all(np.isfinite(value)):
            raise ValueError(f"--{flag} must be finite, got {list(value)}")

    model = _load_model(args)
    q0 = model.neutral_configuration()
    if args.q is not None:
        q_user = np.asarray(args.q, dtype=float)
        if args.floating_base and q_user.shape == (model.nq - 7,):
            q0[7:] = q_user
        else:
            q0 = q_user
    v0 = np.zeros(model.nv)
    model.check_state(q=q0, v=v0)
    p0, R0 = frame_placement(model, q0, args.frame)
    if args.circle is not None:
        traj = CircleTrajectory.starting_at(p0, args.circle, normal, args.duration, R0)
    else:
        offset = np.zeros(3) if args.line is None else np.asarray(args.line, dtype=float)
        rot = np.zeros(3) if args.rotate is None else np.asarray(args.rotate, dtype=float)
        traj = LineTrajectory(p0, R0, p0 + offset, so3.exp(rot) @ R0, args.duration)
    tracker = EndEffectorTracker(model, args.frame, task=args.task, kp_position=args.kp,
                                 kd_position=args.kd, kp_orientation=args.kp,
                                 kd_orientation=args.kd, passive_weight=args.passive_weight,
                                 passive_kp=args.passive_kp, passive_kd=args.passive_kd)
    print(model.describe())
    print(f"planning {args.duration} s at dt={args.dt} s for frame '{args.frame}' "
          f"(task {args.task})", file=sys.stderr)
    plan = plan_trajectory(tracker, traj, q0, v0, args.duration, args.dt, progress=True)
    print("\nplan summary:")
    for key, value in plan.summary().items():
        print(f"  {key:<28}{value:.6g}")
    if out is not None:
        print(f"wrote {plan.save(out)}")
    if plot is not None:
        print(f"wrote {plan.plot(plot)}")
    problems = _plan_problems(model, plan, args.task, args.max_error,
                              args.max_orientation_error)
    for text in problems:
        print(f"error: the plan is not feasible: {text}", file=sys.stderr)
    return 1 if problems else 0


def cmd_bringup(args: argparse.Namespace) -> int:
    """Start the nodes as processes (the launch files' job, without launch_ros)."""
    import signal
    import subprocess
    import time

    sim, resolver = node_names(args.node or [])  # before anything else
    urdf = resolve_robot(args.urdf)
    if urdf.lstrip().startswith("<"):
        raise ValueError("bringup needs a URDF file or bundled robot name, not XML text")
    if args.config is not None and not Path(args.config).is_file():
        raise ValueError(f"--config file '{args.config}' not found")
    nodes = bringup_nodes(urdf, args.config, sim=sim, resolver=resolver,
                          sim_config=args.sim_config, resolver_config=args.resolver_config,
                          resolver_links=tuple(args.resolver_links) if args.resolver_links
                          else None)
    notes = check_bringup(urdf, nodes)
    env = node_environment()
    for text in notes:
        print(f"[bringup] warning: {text}", file=sys.stderr)
    if resolver:
        print(f"[bringup] {RESOLVER}'s ~/joint_setpoints feed {CONTROLLER}'s ~/joint_reference "
              "(mode: joint); send goals to /elbow_redundancy_resolver/target_pose and "
              "/elbow_redundancy_resolver/target_arm_angle", file=sys.stderr)
    if args.print_only:
        for n in nodes:
            print(" ".join(node_command(n)))
        return 0

    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    procs: dict[str, subprocess.Popen] = {}
    failed: tuple[str, int] | None = None
    try:
        for n in nodes:
            procs[n.executable] = start_node(n, env)
        print(f"[bringup] started {list(procs)} (ROS_DOMAIN_ID="
              f"{env.get('ROS_DOMAIN_ID', '0')}; Ctrl-C stops them)", file=sys.stderr)
        start = time.monotonic()
        while not received:
            done = [(n, p.returncode) for n, p in procs.items() if p.poll() is not None]
            if done:
                failed = done[0]
                break
            if args.duration and time.monotonic() - start > args.duration:
                break
            time.sleep(0.1)
    finally:
        # SIGTERM: the nodes stop on it as on SIGINT, and one still importing (compiling its
        # kernels) ends quietly instead of with a KeyboardInterrupt traceback
        stop_processes(procs, signal.SIGTERM)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed is not None:
        name, code = failed
        print(f"error: {name} exited with code {code}; stopped the other nodes",
              file=sys.stderr)
        return code if code and code > 0 else 1
    return 0


DEMO_SCENARIOS = ("arm", "space", "snake", "acrobot", "pendubot")


def cmd_demo(args: argparse.Namespace) -> int:
    """The closed-loop scenario demos over DDS (MuJoCo + nodes, ``scenarios/``): ``arm`` (the
    resolver demo, then the hand path), ``space``, ``snake``, ``acrobot`` and ``pendubot``."""
    from .scenarios import run_scenario
    from .scenarios.harness import demo_domain

    if args.duration is not None and not (np.isfinite(args.duration) and args.duration > 0):
        raise ValueError(f"--duration must be a positive number of seconds, got {args.duration}")
    domain, source = demo_domain()
    print(f"[demo] scenario {args.scenario}, ROS_DOMAIN_ID={domain} ({source})")
    if args.scenario in ("acrobot", "pendubot"):
        from .scenarios.swing_up import run_swing_up

        run_swing_up(args.scenario, Path(args.out) / args.scenario,
                     duration=args.duration or 10.0, domain=domain)
        return 0
    if args.scenario in ("space", "snake"):  # "arm" below: the resolver demo, then its path
        summary = run_scenario(args.scenario, Path(args.out), duration=args.duration,
                               domain=domain)
        return 0 if summary.get("success") else 1
    import json

    from .scenarios.resolver_demo import run_demo

    resolver_demo = run_demo(Path(resolve_robot("arm7")), Path(args.out), motion=args.motion,
                             domain=domain)
    summary = run_scenario("arm", Path(args.out), duration=args.duration, domain=domain)
    summary["resolver_demo"] = resolver_demo  # today's phases: demo.json, demo.png
    (Path(args.out) / "arm" / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if summary.get("success") else 1


def cmd_replay(args: argparse.Namespace) -> int:
    """Republish a recorded bag with its timing (as ``ros2 bag play``; nodes/bags.py)."""
    from .nodes.bags import play_bag

    try:
        play_bag(args.bag, args.topics, rate=args.rate, clock=args.clock,
                 wait_for_subscribers=args.wait_for_subscribers, delay=args.delay)
    except KeyboardInterrupt:
        print("[replay] interrupted", file=sys.stderr)
        return 130
    return 0


def cmd_ellipsoid(args: argparse.Namespace) -> int:
    """Belted vs ordinary inertia ellipsoids of the frame's linear Λ⁻¹ block for several
    configurations of one arm (Khatib §4.4, the situation of his Fig. 7), one PNG."""
    from .operational_space import belted_ellipsoid, effective_mass, task_inertia_inverse

    out = _check_output(args.out, "--out", (".png",))
    try:
        import matplotlib
    except ImportError:
        raise ValueError("--out needs matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = _load_model(args)
    model.frame(args.frame)
    configurations = args.q or [model.neutral_configuration().tolist()]
    fig = plt.figure(figsize=(5 * len(configurations), 5))
    for k, qk in enumerate(configurations):
        q = np.asarray(qk, dtype=float)
        if q.shape != (model.nq,):
            raise ValueError(f"--q number {k + 1} has {q.size} values, the model has nq = "
                             f"{model.nq} ({list(model.joint_names)})")
        model.check_state(q=q)
        blocks = task_inertia_inverse(model, q, args.frame)
        shapes = belted_ellipsoid(blocks.linear, n=24)
        ax = fig.add_subplot(1, len(configurations), k + 1, projection="3d")
        ax.plot_surface(*shapes.belted.transpose(2, 0, 1), color="tab:red", alpha=0.35,
                        linewidth=0)
        scale = shapes.radii.max() / np.abs(shapes.ellipsoid).max()
        ax.plot_wireframe(*(scale * shapes.ellipsoid).transpose(2, 0, 1), color="tab:blue",
                          linewidth=0.4, rstride=2, cstride=2)
        masses = [effective_mass(model, q, args.frame, u) for u in np.eye(3)]
        ax.set_title(f"q{k + 1}: m_x {masses[0]:.2f}, m_y {masses[1]:.2f}, "
                     f"m_z {masses[2]:.2f} kg", fontsize=9)
        ax.set_xlabel("x [kg]")
        ax.set_ylabel("y [kg]")
        ax.set_zlabel("z [kg]")
        reach = 1.05 * shapes.radii.max()
        for axis in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
            axis(-reach, reach)
        ax.set_box_aspect((1, 1, 1))
        print(f"q{k + 1} = {np.round(q, 3).tolist()}: effective mass at '{args.frame}' along "
              f"x, y, z = {masses[0]:.3f}, {masses[1]:.3f}, {masses[2]:.3f} kg; range "
              f"{shapes.radii.min():.3f} .. {shapes.radii.max():.3f} kg")
    fig.suptitle(f"{model.name} '{args.frame}': belted ellipsoid (red, radius = effective "
                 "mass) and inertia ellipsoid (blue, scaled)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    """Torque-limited trajectory optimisation through the hybrid recursion (box DDP)."""
    import time

    from .optimal_control import solve_box_ddp
    from .optimal_control.problems import arrest_problem, goal_problem, write_solution

    model = RobotModel.from_urdf(resolve_robot(args.robot), passive_joints=args.passive,
                                 tip_link=args.tip_link)
    if args.arrest:  # the failure reaction's plan (control/failure_reaction.arrest_plan)
        if args.goal is not None or args.frame is not None:
            raise ValueError("--arrest plans to rest from --start: give no --goal or --frame")
        start = np.zeros(model.nq) if args.start is None else np.asarray(args.start, float)
        if start.shape != (model.nq,):
            raise ValueError(f"--start: give {model.nq} values, one per joint "
                             f"{list(model.joint_names)}")
        problem = arrest_problem(model, start, np.zeros(model.nv), args.horizon, args.dt)
    else:
        problem = goal_problem(model, args.goal, args.start, args.horizon, args.dt,
                               args.frame, args.position)

    def progress(iteration: int, cost: float, alpha: float) -> None:
        if not args.quiet:
            print(f"  iteration {iteration:3d}: cost {cost:.6g}, step {alpha:g}", flush=True)

    print(f"optimising '{model.name}': active {list(model.active_joints)}, passive "
          f"{list(model.passive_joints)}, {len(problem.us_init)} knots of {args.dt} s (the "
          "first run after an install or update compiles the kernels: a minute or two)",
          flush=True)
    t0 = time.perf_counter()
    sol = solve_box_ddp(problem.step, problem.x0, problem.us_init, problem.running,
                        problem.terminal, max_iterations=args.max_iterations, progress=progress)
    elapsed = time.perf_counter() - t0
    n = model.nv
    print(f"{'converged' if sol.converged else 'NOT converged'} after {sol.iterations} "
          f"iterations in {elapsed:.2f} s: cost {sol.cost:.6g}, KKT residual {sol.gradient:.2e}, "
          f"final q {np.round(sol.xs[-1, :n], 4).tolist()}, |v| "
          f"{float(np.abs(sol.xs[-1, n:]).max()):.3g}")
    for path in write_solution(sol, problem, args.out):
        print(f"wrote {path}")
    if args.arrest:  # judged as the failure reaction judges it: within the limits
        from .control.failure_reaction import LIMIT_TOLERANCE, PLAN_SPEED, trajectory_excess

        peak, over, _ = trajectory_excess(model, sol.xs)
        braked = trajectory_excess(model, problem.first_guess)[0]
        kept = peak <= PLAN_SPEED and over <= LIMIT_TOLERANCE
        print(f"arrest: peak {peak:.2f} of the speed limits (braked: {braked:.2f}), "
              f"{over:.3f} rad|m past a position limit: "
              f"{'within the limits' if kept else 'NOT within the limits'}")
        return 0 if kept else 1
    return 0 if sol.converged else 1


def cmd_identify_payload(args: argparse.Namespace) -> int:
    """Holding poses on a running controller (and robot), the payload estimated from the
    efforts (nodes/identify_payload.py)."""
    from .nodes.identify_payload import IdentificationError, IdentifyOptions, run_identify_payload

    if args.out is not None:
        _check_output(args.out, "--out", (".yaml", ".yml"))
    opts = IdentifyOptions(controller=args.controller, frame=args.frame or "", poses=args.poses,
                           span=args.span, seed=args.seed, effort=args.effort,
                           speed=args.speed, settle_velocity=args.settle_velocity,
                           settle_time=args.settle_time, record_time=args.record_time,
                           timeout=args.timeout, out=args.out or "",
                           set_parameters=args.set_parameters)
    try:
        run_identify_payload(opts)
    except IdentificationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_robots(_: argparse.Namespace) -> int:
    for name, path in builtin_robots().items():
        print(f"{name:<16}{path}")
    return 0


def cmd_warm_up(args: argparse.Namespace) -> int:
    from .warmup import warm_up

    warm_up(report=None if args.quiet else print)
    return 0


def _model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("urdf", help="URDF path, URDF XML, or a bundled robot name (see 'robots')")
    p.add_argument("--passive", nargs="*", default=[], metavar="JOINT",
                   help="joints without actuator (added to those inferred from <ros2_control>)")
    p.add_argument("--root-link")
    p.add_argument("--tip-link")
    p.add_argument("--floating-base", action="store_true",
                   help="add a passive 6-DOF joint between the world and the root link")
    p.add_argument("--gravity", nargs=3, type=float, default=(0.0, 0.0, -9.81),
                   metavar=("GX", "GY", "GZ"), help="[m/s^2] in root axes")
    p.add_argument("--mimic", choices=("error", "independent"), default="error")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="underactuated-control",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "inspect", help="print a model, its active/passive split and one hybrid-dynamics evaluation"
    )
    p.add_argument("urdf", help="URDF path, URDF XML, or a bundled robot name (see 'robots')")
    p.add_argument(
        "--passive",
        nargs="*",
        default=[],
        metavar="JOINT",
        help="joints without actuator (added to those inferred from <ros2_control>)",
    )
    p.add_argument("--root-link")
    p.add_argument("--tip-link")
    p.add_argument(
        "--floating-base",
        action="store_true",
        help="add a passive 6-DOF joint between the world and the root link",
    )
    p.add_argument("--mimic", choices=("error", "independent"), default="error")
    p.add_argument("--q", nargs="+", type=float, help="configuration [rad|m] (default: neutral)")
    p.add_argument("--v", nargs="+", type=float, help="velocity [rad/s|m/s] (default: zero)")
    p.set_defaults(func=cmd_inspect)
    pl = sub.add_parser("plan", help="offline mode: integrate an end-effector path into T_a(t) "
                                     "and the passive joints' motion (paper 6.2)")
    _model_arguments(pl)
    pl.add_argument("--frame", required=True, help="tracked link frame")
    pl.add_argument("--task", choices=("pose", "position", "orientation", "pointing", "planar"),
                    default="pose")
    pl.add_argument("--q", nargs="+", type=float,
                    help="start configuration [rad|m] (with --floating-base: the arm joints)")
    shape = pl.add_mutually_exclusive_group()
    shape.add_argument("--line", nargs=3, type=float, metavar=("DX", "DY", "DZ"),
                       help="straight line: frame displacement [m], cycloidal timing")
    shape.add_argument("--circle", type=float, metavar="RADIUS", help="circle radius [m]")
    pl.add_argument("--rotate", nargs=3, type=float, metavar=("RX", "RY", "RZ"),
                    help="with --line: rotation vector [rad] of the frame, root axes")
    pl.add_argument("--normal", nargs=3, type=float, default=(1.0, 0.0, 0.0),
                    help="with --circle: plane normal")
    pl.add_argument("--duration", type=float, default=2.0, help="[s]")
    pl.add_argument("--dt", type=float, default=1e-3, help="integration step [s]")
    pl.add_argument("--kp", type=float, default=100.0, help="task stiffness [1/s^2]")
    pl.add_argument("--kd", type=float, default=20.0, help="task damping [1/s]")
    pl.add_argument("--passive-weight", type=float, default=0.0,
                    help="weight of 'passive joints keep still' rows (7.1)")
    pl.add_argument("--passive-kp", type=float, default=0.0, help="[1/s^2]")
    pl.add_argument("--passive-kd", type=float, default=0.0, help="[1/s]")
    pl.add_argument("--out", help="profile file (.csv or .npz)")
    pl.add_argument("--plot", help="PNG of errors, T_a and passive velocities")
    pl.add_argument("--max-error", type=float, default=0.01,
                    help="[m] largest acceptable position error of the plan (else exit 1)")
    pl.add_argument("--max-orientation-error", type=float, default=0.05,
                    help="[rad] largest acceptable orientation error of the plan (else exit 1)")
    pl.set_defaults(func=cmd_plan)
    b = sub.add_parser("bringup", help="start hybrid_dynamics_controller (and the simulated "
                                       "arm, the elbow resolver) without launch_ros, as "
                                       "launch/controller.launch.py does")
    b.add_argument("--urdf", default="arm7", help="URDF file or bundled robot name")
    b.add_argument("--config", help="controller parameters YAML (default for arm7: "
                                    "config/arm7_controller.yaml)")
    b.add_argument("--node", action="append", metavar="NAME",
                   help=f"also start one of {list(EXTRA_NODES)} (repeatable)")
    b.add_argument("--sim-config", help="mujoco_sim parameters YAML (default for arm7: "
                                        "config/arm7_sim.yaml)")
    b.add_argument("--resolver-config", help="elbow_redundancy_resolver parameters YAML "
                                             "(default for arm7: config/arm7_resolver.yaml)")
    b.add_argument("--resolver-links", nargs=3, metavar=("SHOULDER", "ELBOW", "WRIST"),
                   help="the resolver's S, E, W links (override the YAML)")
    b.add_argument("--duration", type=float, default=0.0, help="stop after this many s (0: "
                                                              "until Ctrl-C)")
    b.add_argument("--print", dest="print_only", action="store_true",
                   help="check everything, print the node command lines and exit")
    b.set_defaults(func=cmd_bringup)
    d = sub.add_parser("demo", help="closed loop: simulated arm7 (MuJoCo), controller and "
                                    "elbow resolver over DDS; an actuator fails half-way")
    d.add_argument("--out", default="demo_output", help="directory for logs, JSON and PNG")
    d.add_argument("--scenario", choices=DEMO_SCENARIOS, default="arm",
                   help="arm: hand path, a motor fails mid-path; space: free-flying bus, "
                        "attitude held vs naive; snake: planar snake, every other joint "
                        "passive; acrobot/pendubot: swing-up and balance (default: arm)")
    d.add_argument("--duration", type=float, default=None,
                   help="[s] length of the recorded run (default: the scenario's own)")
    d.add_argument("--motion", type=float, default=4.0,
                   help="goal motion duration [s] (simulated)")
    d.set_defaults(func=cmd_demo)
    rp = sub.add_parser("replay", help="republish a recorded rosbag2 bag (MCAP or sqlite3) "
                                       "with its timing, as 'ros2 bag play' does")
    rp.add_argument("bag", help="bag directory (with metadata.yaml)")
    rp.add_argument("--topics", nargs="+", metavar="TOPIC",
                    help="replay only these topics (default: all)")
    rp.add_argument("--rate", type=float, default=1.0,
                    help="playback speed: recorded gaps are divided by it (default 1)")
    rp.add_argument("--clock", action="store_true",
                    help="also publish /clock with the bag's time (for use_sim_time nodes)")
    rp.add_argument("--wait-for-subscribers", type=float, default=0.0, metavar="S",
                    help="wait up to S s until every replayed topic has a subscriber")
    rp.add_argument("--delay", type=float, default=0.0, metavar="S",
                    help="wait S s before the first message")
    rp.set_defaults(func=cmd_replay)
    e = sub.add_parser("ellipsoid", help="belted vs ordinary inertia ellipsoids of a frame "
                                         "for configurations of one arm (Khatib §4.4)")
    _model_arguments(e)
    e.add_argument("--frame", required=True, help="link frame")
    e.add_argument("--q", nargs="+", type=float, action="append",
                   help="a configuration [rad|m] (repeat --q for several)")
    e.add_argument("--out", default="ellipsoids.png", help="PNG file")
    e.set_defaults(func=cmd_ellipsoid)
    o = sub.add_parser("optimize", help="torque-limited trajectory optimisation through the "
                       "hybrid recursion (box DDP): trajectory, Riccati gains and a plot")
    o.add_argument("robot", help="URDF path, URDF XML, or a bundled robot name")
    o.add_argument("--passive", nargs="*", default=[], metavar="JOINT",
                   help="joints without actuator (added to those of <ros2_control>)")
    o.add_argument("--tip-link")
    o.add_argument("--goal", nargs="+", type=float, metavar="Q",
                   help="final configuration [rad|m], one per joint (reached at rest)")
    o.add_argument("--start", nargs="+", type=float, metavar="Q",
                   help="start configuration [rad|m] (default: zero), at rest")
    o.add_argument("--frame", help="a frame to bring to --position at the end")
    o.add_argument("--position", nargs=3, type=float, metavar=("X", "Y", "Z"),
                   help="[m] root axes")
    o.add_argument("--arrest", action="store_true",
                   help="plan the arrest of the fall from --start at rest with the --passive "
                   "joints failed, within the speed and position limits (the failure "
                   "reaction's plan); exit 0 when the plan keeps them")
    o.add_argument("--horizon", type=float, default=2.0, help="[s] (default 2)")
    o.add_argument("--dt", type=float, default=0.01, help="knot spacing [s] (default 0.01)")
    o.add_argument("--max-iterations", type=int, default=300)
    o.add_argument("--out", default="optimize_out", help="output directory")
    o.add_argument("--quiet", action="store_true", help="no line per iteration")
    o.set_defaults(func=cmd_optimize)
    ip = sub.add_parser("identify-payload", help="move a running controller's arm through "
                        "holding poses and estimate the payload at a frame from the efforts")
    ip.add_argument("--controller", default="hybrid_dynamics_controller",
                    help="the controller node's name (default hybrid_dynamics_controller)")
    ip.add_argument("--frame", help="frame holding the payload (default: the controller's "
                                    "task_frame, else its tip)")
    ip.add_argument("--poses", type=int, default=6, help="number of holding poses (default 6)")
    ip.add_argument("--span", type=float, default=1.0,
                    help="[rad] how far the last three joints may turn from the start pose")
    ip.add_argument("--seed", type=int, default=0, help="seed of the pose proposal")
    ip.add_argument("--effort", choices=("auto", "measured", "commanded"), default="auto",
                    help="/joint_states effort (measured) or the controller's command "
                         "(commanded); auto: measured when the robot reports it")
    ip.add_argument("--speed", type=float, default=0.3, help="[rad/s] mean speed of the moves")
    ip.add_argument("--settle-velocity", type=float, default=0.005,
                    help="[rad/s] settled below this joint speed (default 0.005)")
    ip.add_argument("--settle-time", type=float, default=0.5, help="[s] still for this long "
                                                                   "before recording")
    ip.add_argument("--record-time", type=float, default=0.5, help="[s] averaging window")
    ip.add_argument("--timeout", type=float, default=60.0,
                    help="[s] wall time allowed for discovery and for each pose")
    ip.add_argument("--out", help="write the estimate as payload_* parameters (.yaml)")
    ip.add_argument("--set", dest="set_parameters", action="store_true",
                    help="set the estimate on the controller (one atomic parameter call)")
    ip.set_defaults(func=cmd_identify_payload)
    r = sub.add_parser("robots", help="list bundled robots")
    r.set_defaults(func=cmd_robots)
    w = sub.add_parser("warm-up", help="compile every numba kernel once (numba's on-disk cache), "
                       "so that the nodes' first launch starts warm; scripts/setup.sh runs it")
    w.add_argument("--quiet", action="store_true", help="no line per step")
    w.set_defaults(func=cmd_warm_up)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
