"""``underactuated-control`` console entry point (no ROS needed for the library commands).

underactuated-control inspect arm7 --passive joint2 joint4
underactuated-control inspect path/to/robot.urdf --tip-link tool --q 0 -0.3 0 -2.2 0 2 0.8
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import RobotModel

__all__ = ["main", "resolve_robot", "builtin_robots", "NodeLaunch", "bringup_nodes",
           "die_with_parent"]


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


def _share_file(sub: str, name: str) -> Path:
    for d in _robot_dirs():
        candidate = d.parent / sub / name
        if candidate.is_file():
            return candidate
    raise ValueError(f"{sub}/{name} not found in the package's share directories")


# ====================================================================== bring-up
CONTROLLER = "hybrid_dynamics_controller"
SIMULATOR = "mujoco_sim"
RESOLVER = "elbow_redundancy_resolver"
EXTRA_NODES = (SIMULATOR, RESOLVER)  # what ``bringup --node`` may add to the controller
# the resolver's setpoints feed the controller's joint reference (as in the demo)
REFERENCE_REMAP = (f"/{CONTROLLER}/joint_reference", f"/{RESOLVER}/joint_setpoints")
ARM7_CONFIGS = {CONTROLLER: "arm7_controller.yaml", SIMULATOR: "arm7_sim.yaml",
                RESOLVER: "arm7_resolver.yaml"}


@dataclass
class NodeLaunch:
    """One node of a bring-up: what ``bringup`` runs and what the launch files start."""

    executable: str
    params_files: list[str]
    parameters: dict[str, Any]  # after the files: -p name:=value
    remappings: list[tuple[str, str]]

    def ros_args(self) -> list[str]:
        args = ["--ros-args"]
        for f in self.params_files:
            args += ["--params-file", f]
        for k, v in self.parameters.items():
            args += ["-p", f"{k}:={_param_text(v)}"]
        for a, b in self.remappings:
            args += ["-r", f"{a}:={b}"]
        return args


def _param_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_param_text(x) for x in v) + "]"
    return str(v)


def _is_arm7(urdf_path: str) -> bool:
    """The bundled arm7 (this checkout's or an installed copy: same content)."""
    arm7 = builtin_robots().get("arm7")
    try:
        return arm7 is not None and Path(urdf_path).read_bytes() == arm7.read_bytes()
    except OSError:
        return False


def default_config(urdf_path: str, executable: str) -> str:
    """The bundled parameter file of ``executable`` for the bundled arm7, '' for any other
    robot (its node then starts from its own defaults)."""
    if not _is_arm7(urdf_path):
        return ""
    return str(_share_file("config", ARM7_CONFIGS[executable]))


def node_section(path: str, executable: str) -> dict[str, Any]:
    """The ``ros__parameters`` of ``executable`` (or ``/**``) in a parameter file."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"parameter file '{path}': {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ValueError(f"parameter file '{path}': not a mapping of node names")
    out: dict[str, Any] = {}
    for key in ("/**", executable, "/" + executable):
        section = data.get(key)
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            out.update(section["ros__parameters"])
    return out


def bringup_nodes(urdf_path: str, config: str | None = None, *, sim: bool = False,
                  resolver: bool = False, sim_config: str | None = None,
                  resolver_config: str | None = None,
                  resolver_links: tuple[str, str, str] | None = None,
                  robot_description: str | None = None) -> list[NodeLaunch]:
    """The nodes of a bring-up, for ``underactuated-control bringup`` and the launch files
    alike: the controller (``config``), optionally the simulated arm (``sim_config``) and the
    elbow resolver (``resolver_config``, ``resolver_links`` = shoulder, elbow, wrist).

    A config of None means the bundled one for arm7 (none for another robot). The controller's
    ``passive_joints`` go to the simulator (no motor there either) and the resolver (planned
    as locked). With the resolver, its ``~/joint_setpoints`` feed the controller's
    ``~/joint_reference`` and the controller starts in ``mode: joint`` to follow them."""
    def pick(given: str | None, executable: str) -> list[str]:
        path = default_config(urdf_path, executable) if given is None else given
        if path and not Path(path).is_file():
            raise ValueError(f"parameter file '{path}' for {executable} not found")
        return [path] if path else []

    robot = ({"robot_description": robot_description} if robot_description
             else {"urdf_path": str(urdf_path)})
    controller_files = pick(config, CONTROLLER)
    passive: list[str] = []
    for f in controller_files:
        passive = [j for j in node_section(f, CONTROLLER).get("passive_joints", passive) if j]
    controller = NodeLaunch(CONTROLLER, controller_files, dict(robot), [])
    nodes = [controller]
    if sim:
        params = dict(robot)
        if passive:
            params["passive_joints"] = passive
        nodes.append(NodeLaunch(SIMULATOR, pick(sim_config, SIMULATOR), params, []))
    if resolver:
        params = dict(robot)
        if passive:
            params["passive_joints"] = passive
        if resolver_links:
            params.update(zip(("shoulder_link", "elbow_link", "wrist_link"), resolver_links))
        nodes.append(NodeLaunch(RESOLVER, pick(resolver_config, RESOLVER), params, []))
        controller.parameters["mode"] = "joint"
        controller.remappings.append(REFERENCE_REMAP)
    return nodes


def _node_names(names: list[str]) -> tuple[bool, bool]:
    """(sim, resolver) from ``--node`` values; one-line errors for anything else."""
    import difflib

    for name in names:
        if name == CONTROLLER:
            raise ValueError(f"--node {name}: bringup always starts the controller")
        if name not in EXTRA_NODES:
            close = difflib.get_close_matches(name, EXTRA_NODES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"--node '{name}' is not a node of this package{hint}; choose "
                             f"from {list(EXTRA_NODES)}")
    return SIMULATOR in names, RESOLVER in names


def _check_bringup(urdf: str, nodes: list[NodeLaunch]) -> list[str]:
    """Load the robot and check what the nodes will need from it before anything starts:
    executables present, passive joints, the resolver's links, the simulator's start
    configuration. Returns notes on what the first run will do (a passive joint under
    gravity)."""
    from .parameters import per_joint

    bindir = Path(sys.executable).parent
    for n in nodes:
        if not (bindir / n.executable).is_file():
            raise ValueError(f"executable '{n.executable}' not found in {bindir} (is the "
                             "package installed in this environment?)")
    model = RobotModel.from_urdf(Path(urdf).read_text(encoding="utf-8-sig"))
    values = {n.executable: {k: v for f in n.params_files
                             for k, v in node_section(f, n.executable).items()} | n.parameters
              for n in nodes}
    passive = [j for j in values[CONTROLLER].get("passive_joints", []) if j]
    unknown = [j for j in passive if j not in model.joint_names]
    if unknown:
        raise ValueError(f"passive_joints {unknown} of the controller config are not joints "
                         f"of '{model.name}' ({list(model.joint_names)})")
    if RESOLVER in values:
        links = {k: values[RESOLVER].get(k, "") for k in ("shoulder_link", "elbow_link",
                                                         "wrist_link", "tip_link")}
        missing = [k for k in ("shoulder_link", "elbow_link", "wrist_link") if not links[k]]
        if missing:
            raise ValueError(f"{RESOLVER} needs {', '.join(missing)}: give --resolver-links "
                             "SHOULDER ELBOW WRIST or a --resolver-config YAML")
        bad = [f"{k} '{v}'" for k, v in links.items() if v and v not in model.frames]
        if bad:
            raise ValueError(f"{RESOLVER}: {', '.join(bad)} not a link of '{model.name}'")
    notes = []
    if SIMULATOR in values and passive:
        q0 = np.clip(per_joint("initial_positions", values[SIMULATOR].get(
            "initial_positions", [0.0]), model.joint_names), model.position_lower,
            model.position_upper)
        notes += _passive_fall_notes(model.with_passive(passive), q0)
    return notes


def _passive_fall_notes(model: RobotModel, q0: np.ndarray) -> list[str]:
    """Which passive joints gravity accelerates at the start configuration while the motors
    hold the active joints (what hold mode does): those fall."""
    from .dynamics import hybrid_dynamics
    from .passive_forces import PassiveForceModel

    v0 = np.zeros(model.nv)
    res = hybrid_dynamics(model, q0, v0, np.zeros(model.n_active), PassiveForceModel(model)(
        q0, v0))
    notes = []
    for name, acc in zip(model.passive_joints, res.qdd_passive):
        if abs(acc) > 0.05:
            j = model.joint_names.index(name)
            limit = model.position_upper[j] if acc > 0 else model.position_lower[j]
            notes.append(
                f"{name} is passive (no motor) and gravity accelerates it at {acc:+.2f} rad/s² "
                f"from the start configuration while the motors hold the others (hold mode): "
                f"it will swing down toward its limit ({limit:g} rad). For a first run use "
                "passive_joints: [] (or a joint without gravity load, e.g. a vertical axis).")
    return notes


def die_with_parent(parent_pid: int):
    """A ``preexec_fn`` for child processes: a process group of their own (a terminal's
    Ctrl-C reaches the parent, which forwards it once) and, on Linux, SIGTERM when the parent
    dies, however it dies (kill -9 included: prctl(PR_SET_PDEATHSIG))."""
    import ctypes
    import ctypes.util
    import os
    import signal

    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                                use_errno=True).prctl
        except (OSError, AttributeError):  # pragma: no cover - no usable libc
            prctl = None

    def preexec() -> None:
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
            if os.getppid() != parent_pid:  # the parent died before prctl: do not start
                os._exit(1)

    return preexec


def stop_processes(procs: dict[str, Any], first_signal: int, timeout: float = 10.0) -> None:
    """``first_signal`` to every running process, then SIGTERM, then SIGKILL."""
    import signal
    import subprocess
    import time

    for sig, wait in ((first_signal, timeout), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        running = [p for p in procs.values() if p.poll() is None]
        if not running:
            return
        for p in running:
            try:
                p.send_signal(sig)
            except ProcessLookupError:  # pragma: no cover - exited meanwhile
                pass
        end = time.monotonic() + wait
        for p in running:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def cmd_bringup(args: argparse.Namespace) -> int:
    """Start the nodes as processes (the launch files' job, without launch_ros)."""
    import os
    import signal
    import subprocess
    import time

    sim, resolver = _node_names(args.node or [])  # before anything else
    urdf = resolve_robot(args.urdf)
    if urdf.lstrip().startswith("<"):
        raise ValueError("bringup needs a URDF file or bundled robot name, not XML text")
    if args.config is not None and not Path(args.config).is_file():
        raise ValueError(f"--config file '{args.config}' not found")
    nodes = bringup_nodes(urdf, args.config, sim=sim, resolver=resolver,
                          sim_config=args.sim_config, resolver_config=args.resolver_config,
                          resolver_links=tuple(args.resolver_links) if args.resolver_links
                          else None)
    notes = _check_bringup(urdf, nodes)
    bindir = Path(sys.executable).parent
    commands = {n.executable: [str(bindir / n.executable), *n.ros_args()] for n in nodes}
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    for text in notes:
        print(f"[bringup] warning: {text}", file=sys.stderr)
    if resolver:
        print(f"[bringup] {RESOLVER}'s ~/joint_setpoints feed {CONTROLLER}'s ~/joint_reference "
              "(mode: joint); send goals to /elbow_redundancy_resolver/target_pose and "
              "/elbow_redundancy_resolver/target_arm_angle", file=sys.stderr)
    if args.print_only:
        for cmd in commands.values():
            print(" ".join(cmd))
        return 0

    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    procs: dict[str, subprocess.Popen] = {}
    failed: tuple[str, int] | None = None
    try:
        for name, cmd in commands.items():
            procs[name] = subprocess.Popen(cmd, env=env, preexec_fn=die_with_parent(
                os.getpid()))
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
    """The closed-loop scenario demos over DDS (MuJoCo + nodes): ``arm`` (nodes/demo.py),
    ``space`` and ``snake`` (nodes/scenarios.py), ``acrobot`` and ``pendubot``
    (nodes/swing_up_demo.py)."""
    from .nodes.demo import demo_domain

    if args.duration is not None and not (np.isfinite(args.duration) and args.duration > 0):
        raise ValueError(f"--duration must be a positive number of seconds, got {args.duration}")
    domain, source = demo_domain()
    print(f"[demo] scenario {args.scenario}, ROS_DOMAIN_ID={domain} ({source})")
    if args.scenario in ("acrobot", "pendubot"):
        from .nodes.swing_up_demo import run_swing_up

        run_swing_up(args.scenario, Path(args.out) / args.scenario,
                     duration=args.duration or 10.0, domain=domain)
        return 0
    if args.scenario in ("space", "snake"):  # "arm" below: the resolver demo, then its path
        from .nodes.scenarios import run_scenario

        summary = run_scenario(args.scenario, Path(args.out), duration=args.duration,
                               domain=domain)
        return 0 if summary.get("success") else 1
    import json

    from .nodes.demo import run_demo
    from .nodes.scenarios import run_scenario

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
    d.add_argument("--motion", type=float, default=2.5, help="goal motion duration [s]")
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
