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

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def new_domain() -> int:
    return next(_domains) % 200 + 1
