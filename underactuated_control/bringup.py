"""Bring-up: which nodes run with which parameters, and their processes.

The node specifications (``bringup_nodes``, ``NodeLaunch``) are shared by ``underactuated-control
bringup`` and the launch files (``launch/*.launch.py``); the process helpers (``start_node``,
``die_with_parent``, ``stop_processes``) by the bring-up command and the scenario harness
(``scenarios/harness.py``); the share-file lookup (``builtin_robots``, ``resolve_robot``,
``bundled``) by all of them. Importing this module needs no ROS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .model import RobotModel

__all__ = ["NodeLaunch", "bringup_nodes", "default_config", "node_section", "builtin_robots",
           "resolve_robot", "bundled", "start_node", "node_environment", "die_with_parent",
           "stop_processes", "CONTROLLER", "SIMULATOR", "RESOLVER"]

ROOT = Path(__file__).resolve().parents[1]  # a source checkout (or the site-packages dir)


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


def _share_file(sub: str, name: str) -> Path:
    for d in _robot_dirs():
        candidate = d.parent / sub / name
        if candidate.is_file():
            return candidate
    raise ValueError(f"{sub}/{name} not found in the package's share directories")


def bundled(kind: str, name: str) -> Path:
    """A bundled file (``urdf/…``, ``config/…``) of a source checkout or an installed package
    (``share/underactuated_control/…``); the checkout's path when none exists."""
    try:
        return _share_file(kind, name)
    except ValueError:
        return ROOT / kind / name


# ====================================================================== bring-up
CONTROLLER = "hybrid_dynamics_controller"
SIMULATOR = "mujoco_sim"
RESOLVER = "elbow_redundancy_resolver"
EXTRA_NODES = (SIMULATOR, RESOLVER)  # what ``bringup --node`` may add to the controller
# the resolver's setpoints feed the controller's joint reference (as in the demo)
REFERENCE_REMAP = (f"/{CONTROLLER}/joint_reference", f"/{RESOLVER}/joint_setpoints")
# s: the resolver's setpoints three samples (100 Hz) ahead on /clock: a message delivered
# later than the lead makes the controller ramp from the held point in less than a sample
# (one sample ahead, CI once saw a point time-scaled and the hand 3.8 mm off the triangle)
SIM_SETPOINT_LEAD = 0.03
ARM7_CONFIGS = {CONTROLLER: "arm7_controller.yaml", SIMULATOR: "arm7_sim.yaml",
                RESOLVER: "arm7_resolver.yaml"}


@dataclass
class NodeLaunch:
    """One node of a bring-up: what ``bringup`` runs and what the launch files start."""

    executable: str
    params_files: list[str]
    parameters: dict[str, Any]  # after the files: -p name:=value
    remappings: list[tuple[str, str]]

    def set_unless_given(self, values: dict[str, Any]) -> None:
        """``values`` into ``parameters``, but not those its parameter files set."""
        given = set().union(*(node_section(f, self.executable) for f in self.params_files))
        self.parameters.update({k: v for k, v in values.items() if k not in given})

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
                  robot_description: str | None = None,
                  sim_clock: bool = False) -> list[NodeLaunch]:
    """The nodes of a bring-up, for ``underactuated-control bringup`` and the launch files
    alike: the controller (``config``), optionally the simulated arm (``sim_config``) and the
    elbow resolver (``resolver_config``, ``resolver_links`` = shoulder, elbow, wrist).

    A config of None means the bundled one for arm7 (none for another robot). The controller's
    ``passive_joints`` go to the simulator (no motor there either) and the resolver (planned
    as locked). With the resolver, its ``~/joint_setpoints`` feed the controller's
    ``~/joint_reference`` and the controller starts in ``mode: joint`` to follow them. With
    the simulator every node runs on its ``/clock`` (``use_sim_time``, unless a node's file
    sets it) and the resolver stamps its setpoints three samples ahead on it (``setpoint_lead``
    ``SIM_SETPOINT_LEAD``, unless its file sets it); ``sim_clock``: the same for a simulator
    started elsewhere (Gazebo)."""
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
        # a 100 Hz stream: a lost point is skipped, not waited for
        controller.set_unless_given({"reference_reliability": "best_effort"})
        controller.remappings.append(REFERENCE_REMAP)
    if sim or sim_clock:  # every node on the simulator's /clock (as gz_ros2_control's
        # launches do): a simulation slower than wall time on a loaded machine then slows the
        # plan with it; on one clock, the resolver's setpoints are stamped ahead (the lead)
        for node in nodes:
            on_clock = {"use_sim_time": True}
            if node.executable == RESOLVER:
                on_clock["setpoint_lead"] = SIM_SETPOINT_LEAD
            node.set_unless_given(on_clock)
    return nodes


def node_names(names: list[str]) -> tuple[bool, bool]:
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


def check_bringup(urdf: str, nodes: list[NodeLaunch]) -> list[str]:
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




def node_environment(domain: int | None = None, **extra: str) -> dict[str, str]:
    """The environment of a node process: this one's, without the ROS wheels' bootstrap
    marker (a child must set up its own paths), discovery on this machine unless set, and
    ``domain`` (ROS_DOMAIN_ID) and ``extra`` when given."""
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if domain is not None:
        env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.update(extra)
    return env


def node_command(node: NodeLaunch) -> list[str]:
    """The command line of ``node``: its executable beside this Python, with its ROS args."""
    return [str(Path(sys.executable).parent / node.executable), *node.ros_args()]


def start_node(node: NodeLaunch, env: Mapping[str, str], output: IO | None = None,
               limit_s: float | None = None) -> subprocess.Popen:
    """Start ``node`` as a child process that dies with this one (``die_with_parent``);
    ``output``: its stdout and stderr (default: this process's); ``limit_s``: killed after
    that many seconds of wall time (``timeout``)."""
    cmd = node_command(node)
    if limit_s is not None:
        cmd = ["timeout", "-k", "5", str(int(limit_s)), *cmd]
    return subprocess.Popen(cmd, env=dict(env), stdout=output,
                            stderr=subprocess.STDOUT if output is not None else None,
                            preexec_fn=die_with_parent(os.getpid()))
