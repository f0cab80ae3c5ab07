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


def cmd_robots(_: argparse.Namespace) -> int:
    for name, path in builtin_robots().items():
        print(f"{name:<16}{path}")
    return 0


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
