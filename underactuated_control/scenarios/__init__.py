"""The closed-loop scenarios over DDS (``underactuated-control demo --scenario ...``).

One harness (``harness.py``: node processes, ROS domain, recording, timing, summary) and one
file per scenario: ``arm.py`` (hand circle, a motor fails half-way), ``space.py`` (free-flying
bus), ``snake.py`` (planar snake, every other joint passive), ``swing_up.py`` (acrobot and
pendubot) and ``resolver_demo.py`` (the elbow resolver feeding the controller).
``failure_circle.py`` runs issue 23's circle with a failing motor in-process (no DDS): the
failure tests' and ``bench/failure_cases.py``'s one loop. The robots, paths and metrics the
tests and benches use import no ROS; a run imports rclpy when it starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["SCENARIOS", "run_scenario"]

SCENARIOS = ("arm", "space", "snake")  # run_scenario's; swing_up.run_swing_up is the others'


def run_scenario(name: str, out_dir: Path | str, duration: float | None = None,
                 domain: int | None = None, log: Callable[[str], None] = print) -> dict:
    """Run scenario ``name`` into ``out_dir/<name>/``; returns (and writes) its summary."""
    from .harness import demo_domain, write_summary

    if name not in SCENARIOS:
        raise ValueError(f"scenario must be one of {sorted(SCENARIOS)}, got '{name}'")
    if duration is not None and not (np.isfinite(duration) and 1.0 <= duration <= 600.0):
        raise ValueError(f"--duration must be within 1 .. 600 s, got {duration}")
    if name == "arm":
        from .arm import run_arm as run
    elif name == "space":
        from .space import run_space as run
    else:
        from .snake import run_snake as run
    out = Path(out_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    domain = domain if domain is not None else demo_domain()[0]
    started = time.monotonic()
    summary = run(out, duration, domain, log)
    summary["wall_time_s"] = round(time.monotonic() - started, 1)
    write_summary(out / "summary.json", summary)
    log(f"[{name}] {'success' if summary.get('success') else 'FAILED'}: wrote "
        f"{out / 'summary.json'}")
    return summary
