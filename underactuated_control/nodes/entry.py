"""Console entry points of the nodes (setup.py). Each sets quiet SIGINT/SIGTERM handlers before
importing its node, so that Ctrl-C during the first run's kernel compilation (10-20 s, at import)
ends the process with exit code 0 and no traceback; ``run_node`` then installs its own."""

from __future__ import annotations

import signal
import sys
from importlib import import_module


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _run(module: str) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _leave)
    return import_module(f"underactuated_control.nodes.{module}").main(sys.argv)


def hybrid_dynamics_controller() -> int:
    return _run("hybrid_dynamics_controller")


def elbow_redundancy_resolver() -> int:
    return _run("elbow_redundancy_resolver")


def mujoco_sim() -> int:
    return _run("mujoco_sim")
