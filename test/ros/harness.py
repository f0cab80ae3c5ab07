"""Real rclpy over DDS on loopback: a per-test ROS_DOMAIN_ID, discovery limited to localhost,
node processes started and stopped by the tests (``timeout -k`` guards every process)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import rclpy
from helpers import ROOT
from rclpy.experimental import EventsExecutor

BIN = Path(sys.executable).parent
# mujoco_sim lock-stepped with the controller as config/*.yaml do: a controller starved on a
# loaded machine is waited for (its default, 0.05 s, let the simulation step on with the held
# command, and a run then depended on the machine's timing)
LOCKSTEP = {"lockstep": True, "lockstep_timeout": 2.0}
_domains = itertools.count((os.getpid() * 7) % 150 + 20)


def child_env(domain: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1")
    return env


class NodeProcess:
    """An executable of this package in its own process."""

    def __init__(self, executable: str, domain: int, params: dict | None = None,
                 args: list[str] | None = None, limit_s: int = 300) -> None:
        cmd = ["timeout", "-k", "5", str(limit_s), str(BIN / executable)]
        cmd += args or []
        if params:
            cmd.append("--ros-args")
            for k, v in params.items():
                cmd += ["-p", f"{k}:={_param_text(v)}"]
        self.log_path = Path(os.environ.get("PYTEST_TMP", "/tmp")) / \
            f"{executable}-{domain}-{time.time_ns()}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=child_env(domain), stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=ROOT)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def _param_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_param_text(x) for x in v) + "]"
    return str(v)


class Ros:
    """This test's own rclpy context and node, spun by hand."""

    def __init__(self, domain: int, name: str = "test_driver") -> None:
        self.domain = domain
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = EventsExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.01, max(0.0, end - time.monotonic())))

    def wait_for(self, predicate, timeout: float = 20.0, step=None) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if step is not None:
                step()
            self.executor.spin_once(timeout_sec=0.02)
            if predicate():
                return True
        return predicate()

    def subscription_reliability(self, topic: str, node_name: str, timeout: float = 10.0
                                 ) -> set:
        """The reliability policies ``node_name``'s subscriptions to ``topic`` asked for, as
        discovered over DDS (waiting up to ``timeout`` for them to be discovered)."""
        def found() -> set:
            return {i.qos_profile.reliability for i in self.node.get_subscriptions_info_by_topic(
                topic) if i.node_name == node_name}
        self.wait_for(lambda: bool(found()), timeout)
        return found()

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def new_domain() -> int:
    return next(_domains) % 200 + 1


class SimTimeReferences:
    """A node's ``~/pose_reference`` streamed on simulated time: the simulator's /clock, and
    ``stream(path, seconds, lead)``, the scenarios' ``stream_path`` (each point of the path's
    10 ms grid stamped with the /clock it is for, sent ``lead`` s ahead). ``sent``: every
    (0, PoseStamped) the last ``stream`` published, for ``scenarios.harness.reference_at``;
    ``stalls``: (simulated time, pause) s of each stall of this process longer than the lead,
    after which the path went on from where it had stopped.
    A lock-stepped simulator runs as fast as the machine lets it; a path on simulated time is
    the same path however fast that is, so errors judged on the states' stamps do not depend
    on the machine."""

    def __init__(self, ros: Ros, node: str) -> None:
        from geometry_msgs.msg import PoseStamped
        from rosgraph_msgs.msg import Clock

        from underactuated_control.nodes.common import POSE_REFERENCE_DEPTH

        self.ros, self.sim_time, self.sent, self.stalls = ros, -1.0, [], []
        ros.node.create_subscription(Clock, "/clock", self._on_clock, 10)
        self.pub = ros.node.create_publisher(PoseStamped, f"/{node}/pose_reference",
                                             POSE_REFERENCE_DEPTH)

    def _on_clock(self, msg) -> None:
        self.sim_time = msg.clock.sec + 1e-9 * msg.clock.nanosec

    def stream(self, path, seconds: float, lead: float = 0.0) -> float:
        """Publish ``path(t)`` for ``seconds`` of simulated time; returns the /clock (s) at
        which it started."""
        from underactuated_control.scenarios.harness import position_reference, stream_path

        assert self.ros.wait_for(lambda: self.sim_time >= 0.0 and
                                 self.pub.get_subscription_count(), 60), "no /clock"
        self.sent, self.stalls = [], []

        def publish(p, stamp):
            msg = position_reference(p, stamp)
            self.pub.publish(msg)
            self.sent.append((0, msg))

        return stream_path(path, seconds, lambda: self.sim_time, publish,
                           lambda: self.ros.spin_for(0.002), lead=lead,
                           on_stall=lambda _, pause: self.stalls.append((self.sim_time, pause)))
