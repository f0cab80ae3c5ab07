"""``underactuated-control`` console entry point (no ROS needed for the library commands).

underactuated-control inspect arm7 --passive joint2 joint4
underactuated-control inspect path/to/robot.urdf --tip-link tool --q 0 -0.3 0 -2.2 0 2 0.8
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from pathlib import Path

import numpy as np

from . import RobotModel
from .dynamics import hybrid_dynamics, inverse_dynamics, mass_matrix
from .passive_forces import PassiveForceModel

__all__ = ["main", "resolve_robot", "builtin_robots"]


def _robot_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent
    dirs = [
        here.parent / "urdf",  # source checkout / editable install
        Path(sysconfig.get_paths()["data"]) / "share/underactuated_control/urdf",
    ]
    try:  # a colcon/ament install
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("underactuated_control")) / "urdf")
    except Exception:  # noqa: BLE001 - ament index absent or package not in it
        pass
    return [d for d in dirs if d.is_dir()]


def builtin_robots() -> dict[str, Path]:
    """Bundled robots by name (``arm7``, ``acrobot``, ...)."""
    found: dict[str, Path] = {}
    for d in _robot_dirs():
        for f in sorted(d.glob("*.urdf")):
            found.setdefault(f.stem, f)
    return found


def resolve_robot(name_or_path: str) -> str:
    """A bundled robot's name, a URDF path, or URDF XML -> something ``from_urdf`` accepts."""
    if name_or_path.lstrip().startswith("<") or Path(name_or_path).is_file():
        return name_or_path
    robots = builtin_robots()
    if name_or_path in robots:
        return str(robots[name_or_path])
    raise ValueError(
        f"'{name_or_path}' is neither a URDF file nor a bundled robot ({sorted(robots)})"
    )


def _fmt(names, values, linear, units: tuple[str, str]) -> str:
    return "\n".join(
        f"    {n:<28}{v:>14.6f} {units[1] if lin else units[0]}"
        for n, v, lin in zip(names, values, linear)
    )


def cmd_inspect(args: argparse.Namespace) -> int:
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


def cmd_plan(args: argparse.Namespace) -> int:
    """Offline mode (§6.2, patent claim 10): T_a(t) and passive motion for a frame path."""
    from . import so3
    from .control import EndEffectorTracker
    from .control.offline import plan_trajectory
    from .control.trajectories import CircleTrajectory, LineTrajectory
    from .jacobians import frame_placement

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
        normal = np.asarray(args.normal, dtype=float)
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
    if args.out:
        print(f"wrote {plan.save(args.out)}")
    if args.plot:
        try:
            print(f"wrote {plan.plot(args.plot)}")
        except ImportError:
            raise ValueError("--plot needs matplotlib (pip install matplotlib)") from None
    return 0


def _share_file(sub: str, name: str) -> Path:
    for d in _robot_dirs():
        candidate = d.parent / sub / name
        if candidate.is_file():
            return candidate
    raise ValueError(f"{sub}/{name} not found in the package's share directories")


def cmd_bringup(args: argparse.Namespace) -> int:
    """Start the nodes as processes (the launch files' job, without launch_ros)."""
    import os
    import signal
    import subprocess
    import time

    urdf = resolve_robot(args.urdf)
    if urdf.lstrip().startswith("<"):
        raise ValueError("bringup needs a URDF file or bundled robot name, not XML text")
    config = Path(args.config) if args.config else _share_file("config", "arm7_controller.yaml")
    if not config.is_file():
        raise ValueError(f"config file '{config}' not found")
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    bindir = Path(sys.executable).parent
    commands = [[str(bindir / "hybrid_dynamics_controller"), "--ros-args", "--params-file",
                 str(config), "-p", f"urdf_path:={urdf}"]]
    for extra in args.node or []:
        commands.append([str(bindir / extra), "--ros-args", "-p", f"urdf_path:={urdf}"])
    procs_start = time.monotonic()
    procs = [subprocess.Popen(c, env=env) for c in commands]
    print(f"started {[Path(c[0]).name for c in commands]} (Ctrl-C stops them)", file=sys.stderr)
    try:
        while all(p.poll() is None for p in procs):
            if args.duration and time.monotonic() - procs_start > args.duration:
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    codes = [p.returncode for p in procs]
    return max((c for c in codes if c not in (0, -2, None)), default=0)


def cmd_demo(args: argparse.Namespace) -> int:
    """The closed-loop demo (MuJoCo + controller + resolver over DDS); see nodes/demo.py."""
    from .nodes.demo import run_demo

    run_demo(Path(resolve_robot("arm7")), Path(args.out), motion=args.motion)
    return 0


def cmd_robots(_: argparse.Namespace) -> int:
    for name, path in builtin_robots().items():
        print(f"{name:<16}{path}")
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
    pl.add_argument("--task", choices=("pose", "position", "orientation", "pointing"),
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
    pl.set_defaults(func=cmd_plan)
    b = sub.add_parser("bringup", help="start hybrid_dynamics_controller (and other nodes) "
                                       "without launch_ros")
    b.add_argument("--urdf", default="arm7", help="URDF file or bundled robot name")
    b.add_argument("--config", help="controller parameters YAML (default: arm7_controller)")
    b.add_argument("--node", action="append", help="another executable of this package to "
                                                   "start with urdf_path set (repeatable)")
    b.add_argument("--duration", type=float, default=0.0, help="stop after this many s (0: "
                                                              "until Ctrl-C)")
    b.set_defaults(func=cmd_bringup)
    d = sub.add_parser("demo", help="closed loop: simulated arm7 (MuJoCo), controller and "
                                    "elbow resolver over DDS; an actuator fails half-way")
    d.add_argument("--out", default="demo_output", help="directory for logs, JSON and PNG")
    d.add_argument("--motion", type=float, default=2.5, help="goal motion duration [s]")
    d.set_defaults(func=cmd_demo)
    r = sub.add_parser("robots", help="list bundled robots")
    r.set_defaults(func=cmd_robots)
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
