"""Issue 23's circle, in-process (no DDS): the one harness of the failure tests and
``bench/failure_cases.py``.

A 7-DOF arm holds its start for ``settle`` s, then its hand goes once round a 5 cm circle
(``harness.circle_path``: x-z plane, cycloidal) in ``period`` s in task mode, the reference
streamed at 100 Hz as ``harness.stream_path`` streams it to the node (stamped with its time, or
unstamped: each sample chased to a stop); half-way one motor fails as the node's run-time
``passive_joints`` change does it (a new ``TaskLaw``, ``CommandShaper`` and ``EffortMapper`` for
``model.with_passive``, the reference carried with ``carry_reference``, the law re-latched at
the measured state); ``tail`` s after the path's end the run stops. MuJoCo RK4 at 1 kHz
(``sim.build_plant``), lock-stepped (the law answers each state before the next step), or paced
to the wall clock (``real_time``) as a robot that does not wait for the controller.

The run keeps, cycle by cycle, what every judge of it reads (the hand's error against the
streamed path and its turn from the circle's rotation, the joints' state, the law's status and
its wall time); ``observe`` sees each cycle's hand, law and shaper for more. Importing this
module needs no ROS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..control.command import CommandShaper
from ..control.joint_space import EffortMapper
from ..control.task_law import TaskLaw
from ..control.task_space import TaskReference
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..sim import build_plant
from ..so3 import rotation_angle
from .harness import circle_path

__all__ = ["CircleRun", "failure_cycle", "run_failure_circle"]

DT = 1e-3  # s: the physics step and the law's cycle (1 kHz)
STREAM_EVERY = 10  # physics steps between the path's samples (100 Hz)
RADIUS = 0.05  # m: the circle's
DIVERGED_SPEED = 1e3  # rad/s: a state this fast ends the run (the plant diverged)
PROGRESS_EVERY = 2.0  # s of simulated time between progress lines


@dataclass
class CircleRun:
    """One run, cycle by cycle (index k: the state at k DT s, the cycle that answered it)."""

    model: RobotModel  # the arm, every joint active (before the failure)
    law: TaskLaw  # the last law (after the failure: the failed motor's)
    settle_steps: int  # the path starts at this cycle
    failed_at: int  # the cycle of the failure (None failing: the path's half-way all the same)
    q: np.ndarray  # (cycles, nq) rad
    v: np.ndarray  # (cycles, nv) rad/s
    hand_error: np.ndarray  # m: the hand from the streamed path's point at each cycle's time
    hand_turn: np.ndarray  # rad: the hand's rotation from the circle's (constant) one
    statuses: list[str]  # the law's status, each cycle
    cycle_seconds: np.ndarray  # wall time of the law's cycle (0 where the command was held)
    law_errors: list[str]  # the ValueErrors the law raised (each cycle's command then zero)
    diverged: str  # why the run ended early (a non-finite or runaway state), else empty
    wall_seconds: float  # the whole loop's wall time (real_time: the paced clock's)


def failure_cycle(settle: float, period: float) -> int:
    """The cycle a run's motor fails at: the path's half-way after ``settle`` s at rest."""
    return round(settle / DT) + round(period / DT) // 2


def run_failure_circle(urdf: str, law_settings: dict, frame: str, q0: np.ndarray,
                       period: float, failing: str | None = None, gravity: bool = True,
                       settle: float = 0.5, tail: float = 1.0, stamped: bool = True,
                       stream_at_rest: bool = False, real_time: bool = False,
                       control_every: int = 1,
                       tune: Callable[[TaskLaw], None] | None = None,
                       observe: Callable[[int, np.ndarray, np.ndarray, TaskLaw, CommandShaper,
                                          bool], None] | None = None,
                       progress: Callable[[str], None] | None = None,
                       model: RobotModel | None = None) -> CircleRun:
    """One run (the module docstring) of the arm of ``urdf`` from ``q0`` with the law's
    ``law_settings``, hand ``frame``; ``failing``'s motor fails half-way (None: none).
    ``stream_at_rest``: the stream starts at once (the start's point, while at rest), else
    with the path. ``real_time``: each cycle waits for its wall time (a late one does not),
    but the clock waits for the cycle that decides the failure reaction (its first solve), as
    a lock-stepped simulator does. ``control_every``: the law answers every that many steps,
    its command held between (the node's rate under ``mujoco_sim``'s ``publish_every``).
    ``tune(law)`` may change each law built (the start's and the failure's) before it runs;
    ``observe(k, q, hand, law, shaper, saturated)`` runs after each cycle's law (``hand``: the
    frame's position, m; the law's workspace holds the cycle's J_G and J_D); ``progress`` gets
    a line every ``PROGRESS_EVERY`` s. ``model``: the arm's, if the caller has parsed it (with
    every joint active and this ``gravity``), else parsed from ``urdf``."""
    g = (0.0, 0.0, -9.81) if gravity else (0.0, 0.0, 0.0)
    if model is None:
        model = RobotModel.from_urdf(urdf, gravity=g)
    elif model.n_passive or not np.allclose(model.gravity, g):
        raise ValueError(f"run_failure_circle: the model given must have every joint active and "
                         f"gravity {g}")
    plant = build_plant(urdf, model, timestep=DT, integrator="rk4", gravity=g)
    names = list(model.joint_names)
    n_settle, n_path = round(settle / DT), round(period / DT)
    n_total = n_settle + n_path + round(tail / DT)
    k_fail = failure_cycle(settle, period)

    def build(m: RobotModel) -> tuple[TaskLaw, CommandShaper, EffortMapper]:
        ws = JacobianWorkspace(m)
        law = TaskLaw(m, law_settings, frame, ws)
        if tune is not None:
            tune(law)
        return law, CommandShaper(m, law_settings, ws), EffortMapper(m, names, 1.0)

    law, shaper, mapper = build(model)
    plant.set_state(q0, np.zeros(model.nv))
    ref = law.hold_reference(q0)
    rotation = ref.rotation.copy()  # the circle's, constant
    path = circle_path(ref.position.copy(), RADIUS, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], period)
    check = JacobianWorkspace(model)
    qs, vs = np.full((n_total + 1, model.nq), np.nan), np.full((n_total + 1, model.nv), np.nan)
    hand_error, hand_turn = np.full(n_total + 1, np.nan), np.full(n_total + 1, np.nan)
    cycle_seconds = np.zeros(n_total + 1)
    statuses: list[str] = []
    law_errors: list[str] = []
    diverged = ""
    stream_from = 0 if stream_at_rest else n_settle
    tau, saturated = np.zeros(len(names)), False
    wall_start = time.perf_counter()
    k = 0
    for k in range(n_total + 1):
        if real_time:
            time.sleep(max(0.0, wall_start + k * DT - time.perf_counter()))
        q, v = plant.state()
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))) \
                or np.abs(v).max() > DIVERGED_SPEED:
            diverged = f"state non-finite or > {DIVERGED_SPEED:g} rad/s at t = {k * DT:.3f} s"
            break
        t = k * DT
        if k == k_fail and failing is not None:  # passive_joints := [failing]
            replaced = law
            law, shaper, mapper = build(model.with_passive([failing]))
            ref = law.carry_reference(ref, replaced.model, replaced)  # the node's _commit
        goal = path(t - settle)  # the start's point before the path, its end after
        if k >= stream_from and (k - stream_from) % STREAM_EVERY == 0:  # the 100 Hz stream
            ref = TaskReference(position=goal, rotation=rotation.copy(),
                                stamp=t if stamped else 0.0)
        if k % control_every == 0:  # else the last command held (the node's rate)
            try:
                tick = time.perf_counter()
                out = law.compute(q, v, ref, t, False)
                cycle_seconds[k] = time.perf_counter() - tick
                if k == k_fail:  # the first solve's wait, as a lock-stepped simulator waits
                    wall_start += cycle_seconds[k]
                out = shaper.apply(q, v, out)
                tau = plant.clip(mapper.map(out.tau_active).copy())
                saturated = bool(mapper.saturated.any())
                statuses.append(out.status)
            except ValueError as error:
                law_errors.append(f"t = {t:.3f} s: {error}")
                tau, saturated = np.zeros(len(names)), False
                statuses.append(f"law error: {error}")
        else:
            statuses.append(statuses[-1] if statuses else "")
        plant.d.ctrl[plant.ctrl] = tau
        check.set_configuration(q)
        hand, turned = check.frame_placement(frame)
        qs[k], vs[k] = q, v
        hand_error[k] = np.linalg.norm(hand - goal)
        hand_turn[k] = rotation_angle(turned @ rotation.T)
        if observe is not None:
            observe(k, q, hand, law, shaper, saturated)
        if progress is not None and k % round(PROGRESS_EVERY / DT) == 0:
            progress(f"    t = {t:4.1f} s  hand error {1e3 * hand_error[k]:7.1f} mm")
        if k < n_total:
            plant.step()
    cycles = k + 1 if not diverged else k
    return CircleRun(model=model, law=law, settle_steps=n_settle, failed_at=k_fail,
                     q=qs[:cycles], v=vs[:cycles], hand_error=hand_error[:cycles],
                     hand_turn=hand_turn[:cycles], statuses=statuses,
                     cycle_seconds=cycle_seconds[:cycles], law_errors=law_errors,
                     diverged=diverged, wall_seconds=time.perf_counter() - wall_start)
