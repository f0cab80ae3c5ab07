"""The scenario harness: node processes, a ROS domain, recording, timing and outputs.

``ScenarioRun`` starts the nodes of one run as processes (``bringup.start_node``: a ROS domain
of the run's own, discovery on this machine only, children that die with this process, one log
per node) and a recorder node on the same domain that keeps every message of the run's topics
with its receive time (``nodes/bags.py``: written as a rosbag2 MCAP bag). The simulator
publishes ``/clock``; ``stream_path`` streams a hand/head path on simulated time (lock-stepped
or paced, a stalled run pauses the path), each reference stamped with the simulated time it is
for, so that the metrics pair states (stamped with the simulated time: ``use_sim_time``) and
references by stamps, whatever order the recorder received them in. ``close()`` stops the
nodes (SIGINT: their zero effort on shutdown) and the recorder.

The helpers below are shared by the scenarios (``arm``, ``space``, ``snake``, ``swing_up``,
``resolver_demo``): the reference in force at each state, frame positions along a run, the
command rate, matplotlib's pyplot and ``summary.json``. Importing this module needs no ROS
(rclpy is imported when a run starts).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np

from ..bringup import CONTROLLER, NodeLaunch, node_environment, start_node, stop_processes
from ..jacobians import JacobianWorkspace

__all__ = ["ScenarioRun", "demo_domain", "circle_path", "frame_positions", "reference_at",
           "stamp_seconds", "stream_path", "position_reference",
           "command_rate", "fixed_fingers", "joint_positions", "only_joints", "pyplot",
           "with_joint_dynamics", "without_joint_dynamics", "write_summary"]

REFERENCE_TOPIC = f"/{CONTROLLER}/pose_reference"
ESTIMATE_TOPIC = f"/{CONTROLLER}/base_estimate"
COMMAND_TOPIC = "/effort_controller/commands"
MAX_DOMAIN_ID = 232  # the largest ROS_DOMAIN_ID the DDS port mapping allows


def demo_domain(environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(ROS domain, where it came from): ``ROS_DOMAIN_ID`` when set (a bad value is a
    ``ValueError`` naming it), else one picked from this process id (100-199), so that two
    demos on one machine do not talk to each other."""
    environ = os.environ if environ is None else environ
    text = environ.get("ROS_DOMAIN_ID", "").strip()
    if text:
        if not text.isdigit() or int(text) > MAX_DOMAIN_ID:
            raise ValueError(f"ROS_DOMAIN_ID must be an integer in 0..{MAX_DOMAIN_ID}, got "
                             f"'{text}'")
        return int(text), "from the environment"
    return 100 + os.getpid() % 100, "picked from the process id; set ROS_DOMAIN_ID to choose"


def with_joint_dynamics(urdf: str, damping: float, friction: float) -> str:
    """``urdf`` (its text) with every ``<dynamics .../>`` element set to ``damping``
    [N m s/rad] and dry ``friction`` [N m], and one added to each movable joint that has none
    (issue 23's arms: 0.3 and 0.05 on every joint; the Unitree G1's URDF declares none)."""
    element = f'<dynamics damping="{damping}" friction="{friction}"/>'
    text = re.sub(r"<dynamics[^>]*/>", element, urdf)

    def add(match: re.Match) -> str:
        block = match.group(0)
        return block if "<dynamics" in block else block.replace("</joint>", f"  {element}\n"
                                                                 "  </joint>")
    movable = r'<joint\s[^>]*type="(?:revolute|continuous|prismatic)"[^>]*>.*?</joint>'
    return re.sub(movable, add, text, flags=re.S)


def without_joint_dynamics(urdf: str, joint: str) -> str:
    """``urdf`` (its text) with ``joint``'s ``<dynamics .../>`` removed: a failed joint that
    turns freely (unchanged if it has none). A joint the URDF has not is a ``ValueError``."""
    if not re.search(rf'<joint\s+name="{re.escape(joint)}"', urdf):
        raise ValueError(f"the URDF has no joint '{joint}'")
    pattern = rf'(<joint\s+name="{re.escape(joint)}"(?:(?!</joint>).)*?)<dynamics[^>]*/>'
    return re.sub(pattern, r"\1", urdf, count=1, flags=re.S)


def fixed_fingers(urdf: str) -> str:
    """``urdf`` (its text) with a gripper's prismatic finger joints made fixed (they are
    often mimic joints, which the package refuses)."""
    return re.sub(r'(<joint name="[^"]*finger[^"]*" type=)"prismatic"', r'\1"fixed"', urdf)


def only_joints(urdf: str, joints: list[str]) -> str:
    """``urdf`` (its text) with every movable joint not named in ``joints`` made fixed (their
    mimic tags dropped): one arm of a multi-arm robot or a humanoid, the rest of the body
    rigid. The links then welded to the root link lose their ``<inertial>``: they never
    move, so they carry no dynamics of the fixed-base arm, and robots' URDFs give some of them
    inertias no rigid body has, which the loader and MuJoCo refuse (Tiago's base antennas,
    the PR2's head sensor mount). A name in ``joints`` that the URDF has not is a
    ``ValueError``."""
    root = ElementTree.fromstring(urdf)
    movable = set()
    for joint in root.iter("joint"):
        if joint.get("type") == "fixed":
            continue
        movable.add(joint.get("name"))
        if joint.get("name") not in joints:
            joint.set("type", "fixed")
            for mimic in joint.findall("mimic"):
                joint.remove(mimic)
    unknown = [name for name in joints if name not in movable]
    if unknown:
        raise ValueError(f"joints {unknown} are not movable joints of the URDF")
    children: dict[str, list[tuple[str, str]]] = {}
    for joint in root.findall("joint"):
        children.setdefault(joint.find("parent").get("link"), []).append(
            (joint.get("type"), joint.find("child").get("link")))
    has_parent = {child for kids in children.values() for _, child in kids}
    welded = [link.get("name") for link in root.findall("link")
              if link.get("name") not in has_parent]  # the root link
    for name in welded:  # grows while it is walked: the links fixed to the root
        welded.extend(child for kind, child in children.get(name, ()) if kind == "fixed")
    welded_set = set(welded)
    for link in root.findall("link"):
        if link.get("name") in welded_set:
            for inertial in link.findall("inertial"):
                link.remove(inertial)
    return ElementTree.tostring(root, encoding="unicode")


def circle_path(start: np.ndarray, radius: float, normal: np.ndarray, first: np.ndarray,
                period: float) -> Callable[[float], np.ndarray]:
    """p(t): once around a circle through ``start`` (the circle's centre is ``radius`` away
    along ``-first``), in the plane of ``normal``, with a cycloidal angle profile (zero speed
    and acceleration at both ends); p(t) = start outside [0, period]."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    e1 = np.asarray(first, float) - np.dot(first, n) * n
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    center = np.asarray(start, float) - radius * e1

    def p(t: float) -> np.ndarray:
        s = min(max(t / period, 0.0), 1.0)
        angle = 2.0 * np.pi * (s - np.sin(2.0 * np.pi * s) / (2.0 * np.pi))
        return center + radius * (np.cos(angle) * e1 + np.sin(angle) * e2)

    return p


def position_reference(position: np.ndarray, stamp: float,
                       orientation: np.ndarray | None = None):
    """A ~/pose_reference message (geometry_msgs/PoseStamped): ``position``, ``orientation``
    (quaternion x, y, z, w; None: identity, which a position task ignores), stamped ``stamp``
    s (simulated time)."""
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(max(round(stamp * 1e9), 0),
                                                            1_000_000_000)
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = (0.0, 0.0, 0.0, 1.0) if orientation is None else map(float, orientation)
    return msg


# s of simulated time: how far ahead of its time a scenario sends a point (a stall of the runner
# shorter than this leaves the path as it is; the controller's reference_max_lead is 1 s)
REFERENCE_LEAD = 0.5


def stream_path(path: Callable[[float], np.ndarray], seconds: float,
                sim_time: Callable[[], float], publish: Callable[[np.ndarray, float], None],
                spin: Callable[[], None], events: dict[float, Callable[[], None]] | None = None,
                progress: Callable[[float], None] | None = None, lead: float = 0.0,
                on_stall: Callable[[float, float], None] | None = None) -> float:
    """Publish ``path(t)`` (``publish(position, stamp)``) at 100 Hz of simulated time for
    ``seconds`` of it: ``sim_time()`` is the latest /clock (s), ``spin()`` serves callbacks for
    a moment; ``events``: {t: action} run once when the path's time t is passed;
    ``progress(t)`` every simulated second. The path's points are those of a 10 ms grid, each
    stamped with the simulated time it is for and sent ``lead`` s ahead of it, so that a
    controller applying stamped references when its states reach them (the controller node's
    ``reference_max_lead``) follows the path at the times it is for, whatever the delivery's
    delay. The path's clock is simulated time, but a stall of this runner longer than ``lead``
    (at least 20 ms) pauses the path by the excess instead of making the reference jump along
    it; ``on_stall(t, pause)`` is told of each such pause (s) at the path's time t. Returns the
    simulated time at which the path started."""
    spin()  # the latest /clock: a value left from before would read as a stall below
    last_sim = sim_time()
    start = last_sim
    pending = dict(sorted((events or {}).items()))
    next_report, paused, elapsed, tick = 1.0, 0.0, 0.0, 0
    longest = max(0.02, lead)  # s: a longer step of the clock between two looks is a stall
    while elapsed < seconds:
        now = sim_time()
        stall = now - last_sim - longest
        if stall > 0.0:
            paused += stall
            if on_stall is not None:
                on_stall(elapsed, stall)
        last_sim = now
        elapsed = now - start - paused
        while tick * 0.01 <= min(elapsed + lead, seconds):  # the grid's points now due
            publish(path(tick * 0.01), start + paused + tick * 0.01)
            tick += 1
        for at in [a for a in pending if a <= elapsed]:
            pending.pop(at)()
        spin()
        if elapsed >= next_report:
            next_report += 1.0
            if progress is not None:
                progress(elapsed)
    return start


def _receive_clock() -> Callable[[], int]:
    """Receive times (ns, monotonic) that strictly increase, so that the order in which the
    recorder received messages of different topics is the order of their times."""
    last = [0]

    def now() -> int:
        last[0] = max(time.monotonic_ns(), last[0] + 1)
        return last[0]

    return now


class ScenarioRun:
    """The nodes of one run in their own processes, and a recorder node on the same domain.

    ``start(nodes, overrides)`` launches ``nodes`` with the run's URDF and params file (either
    may be None) plus ``-p`` overrides and ``-r`` remappings per node; ``spin``/``wait_for``
    serve the recorder; ``close()`` stops everything (SIGINT, then the nodes' zero effort on
    shutdown) and closes the logs. ``topics``: what the recorder keeps (default ``TOPICS``);
    ``keep(topic, msg)`` may drop messages (see ``BagRecorder``). The logs are
    ``out_dir/<node>-<tag>.log`` (``<node>.log`` for an empty tag)."""

    TOPICS = ("/joint_states", "/odom", COMMAND_TOPIC, REFERENCE_TOPIC, ESTIMATE_TOPIC,
              "/diagnostics", "/clock")

    def __init__(self, out_dir: Path, domain: int, urdf: Path | None, config: Path | None,
                 tag: str, log: Callable[[str], None] = print,
                 topics: tuple[str, ...] | None = None,
                 keep: Callable[[str, Any], bool] | None = None) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.experimental import EventsExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from ..nodes.bags import BagRecorder
        from ..nodes.common import POSE_REFERENCE_DEPTH

        self.out_dir, self.domain, self.urdf, self.config = out_dir, domain, urdf, config
        Path(out_dir).mkdir(parents=True, exist_ok=True)  # its logs and bags
        self.tag, self.log = tag, log
        self.procs: dict[str, Any] = {}
        self.logs: dict[str, Any] = {}
        os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(f"scenario_recorder_{tag}" if tag else
                                      "scenario_recorder", context=self.context)
        self.executor = EventsExecutor(context=self.context)
        self.executor.add_node(self.node)
        types = dict(zip(self.TOPICS, (JointState, Odometry, Float64MultiArray, PoseStamped,
                                        Odometry, DiagnosticArray, Clock)))
        self.recorder = BagRecorder(self.node, {t: types[t] for t in topics or self.TOPICS},
                                    clock=_receive_clock(), keep=keep)
        self.sim_time = -1.0  # s, the simulator's /clock (the path runs on simulated time)
        self.reference_orientation: np.ndarray | None = None  # x, y, z, w of ~/pose_reference
        self.path_wall_start = 0.0  # s, monotonic: when stream_path started (see there)
        self.node.create_subscription(Clock, "/clock", self._on_clock, 10)
        self.reference_pub = self.node.create_publisher(PoseStamped, REFERENCE_TOPIC,
                                                        POSE_REFERENCE_DEPTH)

    def _on_clock(self, msg) -> None:
        self.sim_time = msg.clock.sec + 1e-9 * msg.clock.nanosec

    def log_path(self, name: str) -> Path:
        return self.out_dir / (f"{name}-{self.tag}.log" if self.tag else f"{name}.log")

    def start(self, nodes: list[str], overrides: Mapping[str, Mapping[str, Any]] | None = None,
              limit_s: float = 300.0,
              remappings: Mapping[str, list[tuple[str, str]]] | None = None) -> None:
        env = node_environment(self.domain, OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        for name in nodes:
            params = {} if self.urdf is None else {"urdf_path": str(self.urdf)}
            params.update((overrides or {}).get(name, {}))
            launch = NodeLaunch(name, [str(self.config)] if self.config else [], params,
                                list((remappings or {}).get(name, [])))
            self.logs[name] = open(self.log_path(name), "w")  # noqa: SIM115 - closed in close()
            self.procs[name] = start_node(launch, env, self.logs[name], limit_s)

    def check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with code {p.returncode}: see "
                                   f"{self.log_path(name)}")

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.005, max(0.0, end - time.monotonic())))

    def wait_for_clock(self) -> None:
        """Until the first /clock from the simulator (60 s at most)."""
        self.wait_for(lambda: self.sim_time >= 0.0, 60.0, "no /clock from the simulator")

    def spin_simulated(self, seconds: float, what: str = "the simulation") -> None:
        """Serve callbacks until the simulator's /clock has advanced ``seconds`` (a loaded
        machine runs the simulation slower than wall time; the nodes, on ``use_sim_time``,
        slow down with it)."""
        self.wait_for_clock()
        end = self.sim_time + seconds
        self.wait_for(lambda: self.sim_time >= end, 60.0 + 20.0 * seconds,
                      f"{what} did not advance {seconds:g} s of simulated time")

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > end:
                raise RuntimeError(f"{what} within {timeout:g} s (see the logs in "
                                   f"{self.out_dir})")
            self.spin(0.05)
            self.check_alive()

    def publish_position(self, position: np.ndarray, stamp: float | None = None) -> None:
        """``position`` to ~/pose_reference with ``reference_orientation`` (None: identity),
        stamped ``stamp`` (s, simulated time; None: the latest /clock)."""
        self.reference_pub.publish(position_reference(
            position, self.sim_time if stamp is None else stamp, self.reference_orientation))

    def set_parameters(self, node: str, values: dict, timeout: float = 10.0,
                       check: bool = True) -> bool:
        """Set parameters of a running node (as rqt or ``ros2 param set`` would); whether it
        accepted them (``check``: a refusal is an error)."""
        from rclpy.parameter import Parameter
        from rclpy.parameter_client import AsyncParameterClient

        client = AsyncParameterClient(self.node, node)
        if not client.wait_for_services(timeout_sec=timeout):
            raise RuntimeError(f"{node}'s parameter services did not appear")
        future = client.set_parameters([Parameter(k, value=v) for k, v in values.items()])
        self.wait_for(future.done, timeout, f"{node} did not answer the parameter update")
        failed = [r.reason for r in future.result().results if not r.successful]
        if failed and check:
            raise RuntimeError(f"{node} refused {values}: {failed}")
        return not failed

    def stream_path(self, path: Callable[[float], np.ndarray], seconds: float, tag: str,
                    events: dict[float, Callable[[], None]] | None = None,
                    lead: float = REFERENCE_LEAD) -> float:
        """``stream_path`` (above) on this run's /clock and ~/pose_reference, each point
        ``lead`` s ahead of its time and stamped with it, progress every simulated second;
        ``path_wall_start`` is its wall time (monotonic s, the recorder's receive clock).
        Returns the simulated time (s, /clock) at which the path started."""
        self.wait_for_clock()
        t0 = time.monotonic()
        self.path_wall_start = t0

        def spin() -> None:
            self.spin(0.002)
            self.check_alive()

        def progress(elapsed: float) -> None:
            self.log(f"[{tag}]   t = {elapsed:4.1f} s simulated ({time.monotonic() - t0:4.1f} "
                     f"s wall), states {self.recorder.counts()['/joint_states']}")

        def stall(elapsed: float, pause: float) -> None:
            self.log(f"[{tag}]   this runner stalled: the path paused {pause:.3f} s at t = "
                     f"{elapsed:.2f} s")

        return stream_path(path, seconds, lambda: self.sim_time, self.publish_position, spin,
                           events, progress, lead, stall)

    def close(self) -> None:
        try:
            stop_processes(self.procs, signal.SIGINT)
            self.spin(0.2)  # the controllers' zero commands on shutdown
        finally:
            self.recorder.close()
            self.executor.shutdown()
            self.node.destroy_node()
            import rclpy

            rclpy.shutdown(context=self.context)
            for fh in self.logs.values():
                fh.close()


# ====================================================================== recorded runs
def joint_positions(names: list[str] | tuple[str, ...], msg, field: str = "position"
                    ) -> np.ndarray:
    """The positions (or another ``field``: velocity, effort) of a JointState message in the
    order of ``names``."""
    index = {n: i for i, n in enumerate(msg.name)}
    values = getattr(msg, field)
    return np.array([values[index[n]] for n in names])


def frame_positions(ws: JacobianWorkspace, frame: str, q: np.ndarray) -> np.ndarray:
    """Position of ``frame`` (root axes) at each configuration row of ``q``."""
    out = np.empty((len(q), 3))
    for i, qi in enumerate(q):
        ws.set_configuration(qi)
        out[i] = ws.frame_placement(frame)[0]
    return out


def pyplot():
    """matplotlib's pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def stamp_seconds(msg) -> float:
    """A message's header stamp in seconds (simulated time for the simulator's states and the
    harness's references)."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def reference_at(t: np.ndarray, references: list) -> np.ndarray:
    """The last ~/pose_reference position stamped at or before each time of ``t`` (s,
    simulated: the states' stamps), the first reference before it: what the controller was
    asked at that moment. Stamps, not receive times: a stalled recorder receives queued
    messages of different topics out of their order in time."""
    times = np.array([stamp_seconds(m) for _, m in references])
    points = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                       for _, m in references])
    idx = np.searchsorted(times, t, side="right") - 1
    return points[np.clip(idx, 0, len(points) - 1)]


def command_rate(commands: list) -> float:
    """Commands per second (Hz) of recorded (receive time ns, message) pairs."""
    if len(commands) < 2:
        return 0.0
    return float((len(commands) - 1) / ((commands[-1][0] - commands[0][0]) * 1e-9))


def write_summary(path: Path, summary: dict) -> Path:
    """``summary`` as JSON (indented) at ``path``."""
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path
