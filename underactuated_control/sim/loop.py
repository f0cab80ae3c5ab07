"""A control law against the MuJoCo plant in this process (no ROS), with a stated latency.

Latency model (``latency_steps`` = n): the torque computed from the state at step k acts
during physics step k + n (from that step's state to the next); the motors give zero until the
first computed torque arrives. n = 0 is the lock-stepped simulator over DDS (``mujoco_sim``
with ``lockstep``: it waits for the answer to the state it published before stepping): the
swing-up's DDS test checks that run against this loop to 1e-6 N·m. n = 1 is one DDS round trip
per physics step (the snake's offline loop).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from .model import Plant


def closed_loop(plant: Plant, control: Callable[[int, np.ndarray, np.ndarray], np.ndarray],
                steps: int, latency_steps: int = 0,
                applied: Callable[[int, np.ndarray], bool | None] | None = None) -> int:
    """Run ``control(k, q, v) -> torques`` (one per ``plant.motors``) on states 0..``steps``
    (``steps`` physics steps between them) with the latency model above. ``applied(k, tau)``
    (optional) sees the torque acting from state k on, as commanded (the motors clip it to
    their ``ctrlrange``); it returns True to end the run there (no step after it). Returns the
    index of the last state answered."""
    if latency_steps < 0:
        raise ValueError(f"latency_steps must be >= 0, got {latency_steps}")
    pending = deque(np.zeros(len(plant.ctrl)) for _ in range(latency_steps))
    for k in range(steps + 1):
        q, v = plant.state()
        pending.append(np.asarray(control(k, q, v), float))
        tau = pending.popleft()
        plant.d.ctrl[plant.ctrl] = tau
        if applied is not None and applied(k, tau):
            return k
        if k < steps:
            plant.step()
    return steps
