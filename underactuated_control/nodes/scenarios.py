"""Scenario demos over DDS (``underactuated-control demo --scenario arm|space|snake``).

Each scenario starts ``mujoco_sim`` and ``hybrid_dynamics_controller`` (its own processes, the
bundled URDF and ``config/<scenario>.yaml``), streams a hand path to the controller's
``~/pose_reference``, records every topic of the run to a rosbag2 (MCAP) bag and writes
``DIR/summary.json`` (metrics with their units) and PNG plots.

- ``space``: the 7-DOF arm on a 200 kg free-flying bus in orbit (``urdf/space_arm.urdf``)
  moves its hand around a circle three times: holding the bus attitude through the rotation
  rows of J_D (paper §7, the reaction null space), with the naive controller
  (``passive_weight: 0``), and holding it again without a base sensor (``base_state:
  momentum``), whose estimate is compared with MuJoCo's truth.

The metrics are recomputed here from the recorded messages (MuJoCo's /joint_states and
/odom), not taken from the controller's own bookkeeping; the tests recompute them again from
the bag with Pinocchio.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..floating_base import system_momentum
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..so3 import quaternion_to_matrix, rotation_angle
from .swing_up_demo import _param, bundled

__all__ = ["SCENARIOS", "run_scenario", "ScenarioRun", "circle_path", "space_metrics"]

CONTROLLER = "hybrid_dynamics_controller"
REFERENCE_TOPIC = f"/{CONTROLLER}/pose_reference"
ESTIMATE_TOPIC = f"/{CONTROLLER}/base_estimate"
COMMAND_TOPIC = "/effort_controller/commands"


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


class ScenarioRun:
    """The nodes of one run in their own processes, and a recorder node on the same domain.

    ``start(nodes, overrides)`` launches ``nodes`` with the scenario's URDF and params file
    (plus ``-p`` overrides per node); ``spin``/``wait_for`` serve the recorder; ``close()``
    stops everything (SIGINT, then the nodes' zero-effort on shutdown) and closes the logs."""

    TOPICS = ("/joint_states", "/odom", COMMAND_TOPIC, REFERENCE_TOPIC, ESTIMATE_TOPIC,
              "/diagnostics", "/clock")

    def __init__(self, out_dir: Path, domain: int, urdf: Path, config: Path, tag: str,
                 log: Callable[[str], None] = print) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.experimental import EventsExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from .bags import BagRecorder

        self.out_dir, self.domain, self.urdf, self.config = out_dir, domain, urdf, config
        self.tag, self.log = tag, log
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, object] = {}
        os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(f"scenario_recorder_{tag}", context=self.context)
        self.executor = EventsExecutor(context=self.context)
        self.executor.add_node(self.node)
        types = dict(zip(self.TOPICS, (JointState, Odometry, Float64MultiArray, PoseStamped,
                                        Odometry, DiagnosticArray, Clock)))
        self.recorder = BagRecorder(self.node, types, clock=time.monotonic_ns)
        self.sim_time = -1.0  # s, the simulator's /clock (the path runs on simulated time)
        self.node.create_subscription(Clock, "/clock", self._on_clock, 10)
        self.reference_pub = self.node.create_publisher(PoseStamped, REFERENCE_TOPIC, 10)
        self._pose = PoseStamped

    def _on_clock(self, msg) -> None:
        self.sim_time = msg.clock.sec + 1e-9 * msg.clock.nanosec

    def start(self, nodes: list[str], overrides: dict[str, dict] | None = None,
              limit_s: float = 300.0) -> None:
        from ..cli import die_with_parent

        env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
        env.update(ROS_DOMAIN_ID=str(self.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        bindir = Path(sys.executable).parent
        for name in nodes:
            extra = [x for k, v in (overrides or {}).get(name, {}).items()
                     for x in ("-p", f"{k}:={_param(v)}")]
            args = ["--params-file", str(self.config), "-p", f"urdf_path:={self.urdf}", *extra]
            log_path = self.out_dir / f"{name}-{self.tag}.log"
            self.logs[name] = open(log_path, "w")  # noqa: SIM115 - closed in close()
            self.procs[name] = subprocess.Popen(
                ["timeout", "-k", "5", str(int(limit_s)), str(bindir / name), "--ros-args",
                 *args], env=env, stdout=self.logs[name], stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(os.getpid()))

    def check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with code {p.returncode}: see "
                                   f"{self.out_dir / f'{name}-{self.tag}.log'}")

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.005, max(0.0, end - time.monotonic())))

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > end:
                raise RuntimeError(f"{what} within {timeout:g} s (see the logs in "
                                   f"{self.out_dir})")
            self.spin(0.05)
            self.check_alive()

    def publish_position(self, position: np.ndarray) -> None:
        msg = self._pose()
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
        msg.pose.orientation.w = 1.0
        self.reference_pub.publish(msg)

    def set_parameters(self, node: str, values: dict, timeout: float = 10.0) -> None:
        """Set parameters of a running node (as rqt or ``ros2 param set`` would)."""
        from rclpy.parameter import Parameter
        from rclpy.parameter_client import AsyncParameterClient

        client = AsyncParameterClient(self.node, node)
        if not client.wait_for_services(timeout_sec=timeout):
            raise RuntimeError(f"{node}'s parameter services did not appear")
        future = client.set_parameters([Parameter(k, value=v) for k, v in values.items()])
        self.wait_for(future.done, timeout, f"{node} did not answer the parameter update")
        failed = [r.reason for r in future.result().results if not r.successful]
        if failed:
            raise RuntimeError(f"{node} refused {values}: {failed}")

    def stream_path(self, path: Callable[[float], np.ndarray], seconds: float, tag: str,
                    events: dict[float, Callable[[], None]] | None = None) -> float:
        """Publish ``path(t)`` at 100 Hz of simulated time for ``seconds`` of it (progress
        every simulated second); ``events``: {t: action} run once when the path's time t is
        passed. Returns the wall time (monotonic, s) at which the path started."""
        t0, last_sim = time.monotonic(), self.sim_time
        pending = dict(sorted((events or {}).items()))
        next_report, sent, elapsed = 1.0, -1.0, 0.0
        while elapsed < seconds:
            # the path's clock follows simulated time in steps of at most 20 ms: a stalled
            # runner pauses the path instead of making the reference jump along it
            now = self.sim_time
            elapsed += min(max(now - last_sim, 0.0), 0.02)
            last_sim = now
            if elapsed >= sent + 0.01:
                self.publish_position(path(elapsed))
                sent = elapsed
            for at in [a for a in pending if a <= elapsed]:
                pending.pop(at)()
            self.spin(0.002)
            self.check_alive()
            if elapsed >= next_report:
                next_report += 1.0
                self.log(f"[{tag}]   t = {elapsed:4.1f} s simulated ({time.monotonic() - t0:4.1f} "
                         f"s wall), states {self.recorder.counts()['/joint_states']}")
        return t0

    def close(self) -> None:
        from ..cli import stop_processes

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


# ====================================================================== states and metrics
def floating_states(model: RobotModel, joint_states: list, odometry: list
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(receive times s, q, v) of the recorded MuJoCo states of a floating-base model: each
    /joint_states paired with the /odom of the same stamp (published together)."""
    by_stamp = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in odometry}
    names = [model.joint_names[k] for k in range(1, model.nb)]
    times, qs, vs = [], [], []
    for t, msg in joint_states:
        odom = by_stamp.get((msg.header.stamp.sec, msg.header.stamp.nanosec))
        if odom is None or list(msg.name) != names:
            continue
        p, o = odom.pose.pose.position, odom.pose.pose.orientation
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        times.append(t * 1e-9)
        qs.append([p.x, p.y, p.z, o.x, o.y, o.z, o.w, *msg.position])
        vs.append([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z, *msg.velocity])
    return np.array(times), np.array(qs), np.array(vs)


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


def reference_at(t: np.ndarray, references: list) -> np.ndarray:
    """The last ~/pose_reference position received before each time of ``t`` (s; receive
    times of the same recorder), the hand's start before the first: what the controller was
    asked at that moment."""
    times = np.array([r for r, _ in references]) * 1e-9
    points = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                       for _, m in references])
    idx = np.searchsorted(times, t, side="right") - 1
    return points[np.clip(idx, 0, len(points) - 1)]


def space_metrics(model: RobotModel, frame: str, t: np.ndarray, q: np.ndarray, v: np.ndarray,
                  references: list, t_path: float, commands: list) -> dict:
    """Hand error against the streamed reference (m), the bus's rotation from its first
    attitude (deg), the system's momentum drift, the effort peak and the command rate, from
    recorded states (receive times ``t``, s; the path starts at ``t_path``)."""
    ws = JacobianWorkspace(model)
    hand = frame_positions(ws, frame, q)
    error = np.linalg.norm(hand - reference_at(t, references), axis=1)
    R0 = quaternion_to_matrix(q[0, 3:7])
    attitude = np.degrees([rotation_angle(R0.T @ quaternion_to_matrix(x[3:7])) for x in q])
    h = np.array([system_momentum(model, a, b, ws) for a, b in zip(q[::25], v[::25])])
    efforts = np.array([c.data for _, c in commands]) if commands else np.zeros((1, 1))
    ctimes = np.array([s for s, _ in commands]) * 1e-9
    rate = (len(ctimes) - 1) / (ctimes[-1] - ctimes[0]) if len(ctimes) > 1 else 0.0
    moving = t >= t_path
    return {
        "hand_rms_mm": float(1e3 * np.sqrt(np.mean(error[moving] ** 2))),
        "hand_max_mm": float(1e3 * error[moving].max()),
        "base_attitude_drift_max_deg": float(attitude.max()),
        "base_attitude_drift_final_deg": float(attitude[-1]),
        "base_translation_final_mm": float(1e3 * np.linalg.norm(q[-1, :3] - q[0, :3])),
        "momentum_drift_linear_Ns": float(np.abs(h[:, :3] - h[0, :3]).max()),
        "momentum_drift_angular_Nms": float(np.abs(h[:, 3:] - h[0, 3:]).max()),
        "effort_peak_Nm": float(np.abs(efforts).max()),
        "loop_rate_hz": float(rate),
        "_series": {"t": t - t_path, "error": error, "attitude": attitude, "hand": hand},
    }


def estimate_drift(estimates: list, odometry: list) -> dict:
    """How far the controller's momentum estimate (~/base_estimate) is from MuJoCo's base
    (/odom) at the same stamps: attitude (deg) and position (mm), largest and last."""
    truth = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in odometry}
    att, pos = [], []
    for _, e in estimates:
        m = truth.get((e.header.stamp.sec, e.header.stamp.nanosec))
        if m is None:
            continue
        a, b = e.pose.pose, m.pose.pose
        Ra = quaternion_to_matrix([a.orientation.x, a.orientation.y, a.orientation.z,
                                   a.orientation.w])
        Rb = quaternion_to_matrix([b.orientation.x, b.orientation.y, b.orientation.z,
                                   b.orientation.w])
        att.append(np.degrees(rotation_angle(Ra.T @ Rb)))
        pos.append(1e3 * np.linalg.norm([a.position.x - b.position.x,
                                         a.position.y - b.position.y,
                                         a.position.z - b.position.z]))
    if not att:
        return {"estimate_samples": 0}
    return {"estimate_samples": len(att), "estimate_attitude_error_max_deg": float(max(att)),
            "estimate_attitude_error_final_deg": float(att[-1]),
            "estimate_position_error_max_mm": float(max(pos)),
            "estimate_position_error_final_mm": float(pos[-1])}


# ====================================================================== space
SPACE_RUNS = {  # run -> controller overrides
    "held": {},
    "naive": {"passive_weight": 0.0},
    "momentum": {"base_state": "momentum"},
}


def run_space(out_dir: Path, duration: float | None, domain: int,
              log: Callable[[str], None] = print, runs: tuple[str, ...] = tuple(SPACE_RUNS),
              radius: float = 0.05) -> dict:
    """The ``space`` scenario: one run per entry of ``runs`` (see ``SPACE_RUNS``)."""
    period = duration or 8.0
    urdf, config = bundled("urdf", "space_arm.urdf"), bundled("config", "space.yaml")
    model = RobotModel.from_urdf(urdf, floating_base=True, gravity=(0.0, 0.0, 0.0))
    frame = "tool"
    results: dict[str, dict] = {}
    for k, name in enumerate(runs):
        run = ScenarioRun(out_dir, domain, urdf, config, name, log)
        try:
            log(f"[space] run '{name}' ({k + 1}/{len(runs)}): starting mujoco_sim and "
                f"{CONTROLLER} {SPACE_RUNS[name] or '(config/space.yaml)'} ...")
            run.start(["mujoco_sim", CONTROLLER], {CONTROLLER: SPACE_RUNS[name]})
            rec = run.recorder
            run.wait_for(lambda rec=rec: rec.counts()["/odom"] > 0 and
                         rec.counts()[COMMAND_TOPIC] > 5, 120.0, "the controller sent no effort")
            # the latest state whose /odom has arrived (two topics: the last /joint_states
            # may come before its /odom)
            _, q, _ = floating_states(model, rec.messages("/joint_states")[-50:],
                                      rec.messages("/odom"))
            if not len(q):
                raise RuntimeError("no paired /joint_states and /odom received")
            ws = JacobianWorkspace(model)
            ws.set_configuration(q[-1])
            start = ws.frame_placement(frame)[0].copy()
            path = circle_path(start, radius, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], period)
            log(f"[space] hand around a {100 * radius:g} cm circle in {period:g} s")
            t0 = run.stream_path(path, period + 1.0, "space")
        finally:
            run.close()
        t, q, v = floating_states(model, rec.messages("/joint_states"), rec.messages("/odom"))
        keep = t >= t0 - 0.5
        metrics = space_metrics(model, frame, t[keep], q[keep], v[keep],
                                rec.messages(REFERENCE_TOPIC), t0,
                                [c for c in rec.messages(COMMAND_TOPIC) if c[0] * 1e-9 >= t0])
        if name == "momentum":
            metrics.update(estimate_drift(rec.messages(ESTIMATE_TOPIC), rec.messages("/odom")))
        rec.write(out_dir / f"bag_{name}")
        results[name] = metrics
        log(f"[space] {name}: hand RMS {metrics['hand_rms_mm']:.2f} mm (max "
            f"{metrics['hand_max_mm']:.2f}), bus rotation max "
            f"{metrics['base_attitude_drift_max_deg']:.4f} deg, momentum drift "
            f"{metrics['momentum_drift_angular_Nms']:.2e} N·m·s")
    summary_runs = {n: {k: v for k, v in m.items() if not k.startswith("_")}
                    for n, m in results.items()}
    summary = {"scenario": "space", "urdf": str(urdf), "config": str(config),
               "path": {"shape": "circle", "radius_m": radius, "period_s": period},
               "runs": summary_runs}
    if "held" in results and "naive" in results:
        ratio = results["naive"]["base_attitude_drift_max_deg"] / max(
            results["held"]["base_attitude_drift_max_deg"], 1e-9)
        summary["attitude_drift_ratio_naive_over_held"] = float(ratio)
        summary["success"] = bool(ratio >= 5.0 and results["held"]["hand_rms_mm"] < 5.0)
        log(f"[space] bus attitude drift: naive / held = {ratio:.1f}x")
    else:
        summary["success"] = all(m["hand_rms_mm"] < 5.0 for m in results.values())
    summary["plot"] = str(plot_space(out_dir / "space.png", results))
    return summary


def plot_space(path: Path, results: dict) -> Path | str:
    plt = pyplot()
    if plt is None:
        return "not written: matplotlib is not installed"
    fig, ax = plt.subplots(3, 1, figsize=(8, 9))
    for name, m in results.items():
        s = m["_series"]
        ax[0].plot(s["t"], s["attitude"], label=name)
        ax[1].plot(s["t"], 1e3 * s["error"], label=name)
        ax[2].plot(s["hand"][:, 1], s["hand"][:, 2], label=name)
    ax[0].set_ylabel("bus rotation [deg]")
    ax[0].set_yscale("symlog", linthresh=1e-3)
    ax[0].legend(fontsize=8)
    ax[1].set_ylabel("hand error [mm]")
    ax[1].set_xlabel("t [s] (path starts at 0)")
    ax[2].set_xlabel("hand y [m]")
    ax[2].set_ylabel("hand z [m]")
    ax[2].set_aspect("equal")
    ax[0].set_title("space: 7-DOF arm on a free-flying bus, bus attitude held vs naive")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ====================================================================== arm
def run_arm(out_dir: Path, duration: float | None, domain: int,
            log: Callable[[str], None] = print, failing: str = "joint1",
            radius: float = 0.05) -> dict:
    """The ``arm`` scenario's path phase: a hand circle in task mode, ``failing``'s motor
    fails half-way (``passive_joints`` set at run time), tracking goes on through J_G."""
    period = duration or 8.0
    urdf, config = bundled("urdf", "arm7.urdf"), bundled("config", "arm.yaml")
    model = RobotModel.from_urdf(urdf)
    frame, failure_time = "tool", 0.5 * period
    run = ScenarioRun(out_dir, domain, urdf, config, "path", log)
    try:
        log("[arm] starting mujoco_sim and hybrid_dynamics_controller (config/arm.yaml) ...")
        run.start(["mujoco_sim", CONTROLLER])
        rec = run.recorder
        run.wait_for(lambda: rec.counts()[COMMAND_TOPIC] > 5 and rec.counts()["/joint_states"],
                     120.0, "the controller sent no effort")
        ws = JacobianWorkspace(model)
        ws.set_configuration(_joint_positions(model, rec.messages("/joint_states")[-1][1]))
        start = ws.frame_placement(frame)[0].copy()
        path = circle_path(start, radius, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], period)
        failed_at: list[float] = []

        def fail() -> None:
            failed_at.append(time.monotonic())
            log(f"[arm] t = {failure_time:g} s: {failing}'s motor fails (passive_joints := "
                f"[{failing}])")
            run.set_parameters(CONTROLLER, {"passive_joints": [failing]})

        log(f"[arm] hand around a {100 * radius:g} cm circle in {period:g} s, {failing} fails "
            "half-way")
        t0 = run.stream_path(path, period + 1.0, "arm", {failure_time: fail})
    finally:
        run.close()
    states = rec.messages("/joint_states")
    t = np.array([s for s, _ in states]) * 1e-9
    q = np.array([_joint_positions(model, m) for _, m in states])
    hand = frame_positions(ws, frame, q)
    error = np.linalg.norm(hand - reference_at(t, rec.messages(REFERENCE_TOPIC)), axis=1)
    commands = rec.messages(COMMAND_TOPIC)
    data = np.array([c.data for _, c in commands])
    t_fail = failed_at[0] if failed_at else np.inf
    before, after = (t >= t0) & (t < t_fail), t >= t_fail
    k = model.joint_names.index(failing)
    fail_q = q[after, k] if after.any() else np.zeros(1)
    metrics = {
        "hand_rms_before_failure_mm": float(1e3 * np.sqrt(np.mean(error[before] ** 2))),
        "hand_max_before_failure_mm": float(1e3 * error[before].max()),
        "hand_rms_after_failure_mm": float(1e3 * np.sqrt(np.mean(error[after] ** 2))),
        "hand_max_after_failure_mm": float(1e3 * error[after].max()),
        "failed_joint_excursion_rad": float(np.abs(fail_q - fail_q[0]).max()),
        # from 0.1 s after the update: commands in flight were computed before it
        "failed_joint_command_after_Nm": float(np.abs(data[np.array(
            [c >= (t_fail + 0.1) * 1e9 for c, _ in commands])][:, k]).max())
        if after.any() else None,
        "nonfinite_commands": int((~np.isfinite(data)).any(axis=1).sum()),
        "effort_peak_Nm": float(np.abs(data).max()),
        "loop_rate_hz": float((len(commands) - 1) / ((commands[-1][0] - commands[0][0]) * 1e-9)),
    }
    rec.write(out_dir / "bag")
    log(f"[arm] hand RMS before the failure {metrics['hand_rms_before_failure_mm']:.2f} mm, "
        f"after {metrics['hand_rms_after_failure_mm']:.2f} mm; {failing} moved "
        f"{metrics['failed_joint_excursion_rad']:.3f} rad; non-finite commands "
        f"{metrics['nonfinite_commands']}")
    summary = {"scenario": "arm", "urdf": str(urdf), "config": str(config),
               "path": {"shape": "circle", "radius_m": radius, "period_s": period,
                        "failure_at_s": failure_time, "failing_joint": failing},
               "metrics": metrics,
               "success": bool(metrics["nonfinite_commands"] == 0 and
                               metrics["hand_rms_after_failure_mm"] < 5.0 and
                               metrics["hand_rms_before_failure_mm"] < 5.0)}
    summary["plot"] = str(_plot_arm(out_dir / "arm.png", t - t0, (t_fail - t0), error, q,
                                    model, failing))
    return summary


def _joint_positions(model: RobotModel, msg) -> np.ndarray:
    index = {n: i for i, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in model.joint_names])


def _plot_arm(path: Path, t, t_fail, error, q, model, failing) -> Path | str:
    plt = pyplot()
    if plt is None:
        return "not written: matplotlib is not installed"
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, 1e3 * error)
    ax[0].set_ylabel("hand error [mm]")
    for a in ax:
        a.axvline(t_fail, color="r", ls=":", lw=1)
    for k, name in enumerate(model.joint_names):
        ax[1].plot(t, q[:, k], lw=2 if name == failing else 0.8,
                   label=f"{name} (fails)" if name == failing else name)
    ax[1].set_ylabel("joint angle [rad]")
    ax[1].set_xlabel("t [s] (path starts at 0; red: the motor fails)")
    ax[1].legend(fontsize=7, ncol=4)
    ax[0].set_title("arm: hand circle through J_G, a motor fails half-way")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ====================================================================== entry
def _run_snake(out_dir: Path, duration: float | None, domain: int,
               log: Callable[[str], None] = print) -> dict:
    """The ``snake`` scenario: ``scenario_snake.run_snake`` (imported when it runs)."""
    from .scenario_snake import run_snake

    return run_snake(out_dir, duration, domain, log)


SCENARIOS: dict[str, Callable[..., dict]] = {"space": run_space, "arm": run_arm,
                                              "snake": _run_snake}


def run_scenario(name: str, out_dir: Path | str, duration: float | None = None,
                 domain: int | None = None, log: Callable[[str], None] = print) -> dict:
    """Run scenario ``name`` into ``out_dir/<name>/``; returns (and writes) its summary."""
    from .demo import demo_domain

    if name not in SCENARIOS:
        raise ValueError(f"scenario must be one of {sorted(SCENARIOS)}, got '{name}'")
    if duration is not None and not (np.isfinite(duration) and 1.0 <= duration <= 600.0):
        raise ValueError(f"--duration must be within 1 .. 600 s, got {duration}")
    out = Path(out_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    domain = domain if domain is not None else demo_domain()[0]
    started = time.monotonic()
    summary = SCENARIOS[name](out, duration, domain, log)
    summary["wall_time_s"] = round(time.monotonic() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(f"[{name}] {'success' if summary.get('success') else 'FAILED'}: wrote "
        f"{out / 'summary.json'}")
    return summary
