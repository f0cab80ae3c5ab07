"""Compile every compiled kernel of the package once, so that the first launch starts warm.

numba compiles a kernel the first time it runs and keeps the machine code in its on-disk cache
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the package), keyed on the whole package's
source (``_kernel_cache.py``). On a fresh cache the controller would compile for tens of
seconds before its first command; ``underactuated-control warm-up`` (run by
``scripts/setup.sh``) fills the cache ahead of time, and every node calls :func:`warm_law` (or
its own equivalent) before it subscribes, so that it never compiles while states queue up.

ROS-free: used by the CLI, the nodes and the tests' session set-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .model import RobotModel

__all__ = ["KernelWorker", "warm_law", "warm_up"]

# a bent pose of the bundled 7-DOF arm, away from singularities and joint limits
_ARM_POSE = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


# the worker: SIGTERM when its parent dies (Linux), then run_steps into the cache
_WORKER_CODE = """import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("parent gone")
from underactuated_control.dynamics import compile_run_steps
compile_run_steps()
"""


class KernelWorker:
    """``dynamics.run_steps`` (the largest kernel, ~half of a fresh cache's compile time)
    compiled in a worker process that writes numba's cache, while this process compiles the
    other kernels of its first cycle; ``finish`` waits for it and loads the result. A worker
    that fails or hangs costs one log line: this process then compiles ``run_steps`` itself.

    ``start`` returns None when the cache already holds ``run_steps`` (a warm start: nothing
    to gain) or when that cannot be told."""

    def __init__(self, command: list[str] | None = None) -> None:
        root = str(Path(__file__).resolve().parents[1])  # this package, whoever imports it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            command or [sys.executable, "-c", _WORKER_CODE, str(os.getpid())], env=env,
            cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)  # no preexec_fn: rclpy has threads
        from .dynamics import defer_run_steps

        defer_run_steps(True)  # workspaces built meanwhile do not compile it here

    @classmethod
    def start(cls, command: list[str] | None = None) -> KernelWorker | None:
        from ._kernel_cache import is_cached
        from .dynamics import RUN_STEPS_SIGNATURE, run_steps

        if not run_steps._can_compile or is_cached(run_steps, RUN_STEPS_SIGNATURE) is not False:
            return None
        return cls(command)

    def finish(self, report: Callable[[str], None] | None = print,
               timeout: float = 300.0) -> bool:
        """Wait for the worker, then load ``run_steps`` from the cache (or compile it here if
        the worker failed: ``report`` gets one line); True if the worker succeeded."""
        from .dynamics import compile_run_steps, defer_run_steps

        try:
            _, err = self.process.communicate(timeout=timeout)
            last = (err or b"").decode(errors="replace").strip().splitlines()[-1:]
            failure = None if self.process.returncode == 0 else ": ".join(
                [f"exit code {self.process.returncode}", *last])
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            failure = f"no result after {timeout:.0f} s"
        if failure is not None and report is not None:
            report(f"kernel worker failed ({failure}): compiling run_steps in this process")
        defer_run_steps(False)
        compile_run_steps()
        return failure is None

    def cancel(self) -> None:
        """Stop the worker (the caller failed before its warm-up); ``run_steps`` compiles again
        when the next workspace is built."""
        from .dynamics import defer_run_steps

        self.process.kill()
        self.process.communicate()
        defer_run_steps(False)


def warm_law(law_class: type, model: RobotModel, settings: dict[str, Any], frame: str,
             q: np.ndarray | None = None, worker: KernelWorker | None = None,
             report: Callable[[str], None] | None = print) -> float:
    """Run a cycle of a throwaway ``law_class`` instance on ``model`` at ``q`` (default: a
    fixed generic configuration inside the joint limits) with the Jacobians on, then the
    command's stages (``control/command``: its settings default where ``settings`` lacks
    them) and the effort map, then a second cycle 1 ms later (the setpoint follower's step),
    so that every kernel the law's cycle, the shaper, the effort map and the J_G/J_D
    publication use is compiled or loaded; returns the seconds it took. The instance is
    discarded: the caller's own law keeps its state (filters, clocks) untouched.
    ``worker``: a ``KernelWorker`` compiling ``run_steps`` meanwhile; the Jacobian sweeps of
    ``frame`` are compiled first, then the worker is waited for (``report``: its failure)."""
    from .control.command import CommandShaper, shaper_parameters
    from .control.joint_space import EffortMapper
    from .parameters import coerce

    t0 = time.perf_counter()
    if q is None:
        q = model.random_configuration(np.random.default_rng(0), scale=1.0)
    if worker is not None:
        from .jacobians import JacobianWorkspace

        try:
            JacobianWorkspace(model).generalized(frame, q)  # §6.1: needs no run_steps
        finally:
            worker.finish(report)
    v = np.zeros(model.nv)
    settings = {**{s.name: coerce(s, s.default) for s in shaper_parameters()}, **settings}
    law = law_class(model, settings, frame)
    if hasattr(law, "warm_kernels"):  # kernels the law needs later (the swing-up's re-plans)
        q = law.warm_kernels(q)
    shaper = CommandShaper(model, settings, law.workspace)
    mapper = EffortMapper(model)
    reference = law.hold_reference(q)
    for t in (0.0, 1e-3):  # the second cycle has a time step: the setpoint follower moves
        out = law.compute(q, v, reference, t, True)
        # the command's stages (safety layer, friction compensation) and the effort map, as
        # the node runs them
        mapper.map(shaper.apply(q, v, out).tau_active)
    if out.task_rows is not None:  # an override that keeps the task (safety_keep_task)
        shaper.safety.warm_kernels()
    return time.perf_counter() - t0


def _default_settings() -> dict[str, Any]:
    from .control.registry import law_parameters
    from .parameters import coerce

    return {s.name: coerce(s, s.default) for s in law_parameters()}


def _steps(worker: KernelWorker | None = None, report: Callable[[str], None] | None = None
           ) -> list[tuple[str, Callable[[], None]]]:
    """(what, how) for every family of kernels, in the order a node needs them; with a
    ``worker`` compiling ``run_steps``, the Jacobian sweeps first, meanwhile."""
    from .bringup import builtin_robots
    from .control.registry import CONTROL_LAWS
    from .dynamics import forward_dynamics, hybrid_dynamics, inverse_dynamics

    robots = builtin_robots()
    arm = RobotModel.from_urdf(robots["arm7"])
    failed = arm.with_passive(["joint2"])
    settings = _default_settings()
    q, v = _ARM_POSE, np.zeros(arm.nv)

    def dynamics() -> None:
        for model in (arm, failed):
            hybrid_dynamics(model, q, v, np.zeros(model.n_active), np.zeros(model.n_passive))
        forward_dynamics(arm, q, v, np.zeros(arm.nv))
        inverse_dynamics(arm, q, v, np.zeros(arm.nv))

    def law(mode: str, **overrides: Any) -> Callable[[], None]:
        def run() -> None:
            # a fixed frame with an offset (tool) and a body's own frame (link7): the kernels
            # are specialized on both kinds
            for model in (arm, failed):
                for frame in ("tool", arm.body_names[-1]):
                    warm_law(CONTROL_LAWS[mode], model, {**settings, **overrides}, frame, q)
        return run

    def swing_up() -> None:
        acrobot = RobotModel.from_urdf(robots["acrobot"])
        warm_law(CONTROL_LAWS["swing_up"], acrobot, settings, acrobot.body_names[-1])

    def planned_swing_up() -> None:
        # the DDP's kernels, and the bundled robots' plans into the disk cache (the planned
        # strategy then starts by loading them)
        for name in ("acrobot", "pendubot"):
            robot = RobotModel.from_urdf(robots[name])
            warm_law(CONTROL_LAWS["swing_up"], robot, {**settings,
                                                       "swing_up_strategy": "planned"},
                     robot.body_names[-1])

    def path_cost() -> None:
        # the failure reaction's planned swing: its frame-path cost (the DDP's kernels are
        # the planned swing-up's)
        from .optimal_control import FramePathCost
        from .optimal_control.costs import Derivatives

        nx = 2 * failed.nv
        cost = FramePathCost(failed, "tool", np.zeros((2, 3)))
        xs = np.zeros((2, nx))
        cost.total(xs, None)
        cost.add_all_derivatives(xs, None, Derivatives(
            np.zeros((2, nx)), np.zeros((2, failed.n_active)), np.zeros((2, nx, nx)),
            np.zeros((2, failed.n_active, failed.n_active)),
            np.zeros((2, failed.n_active, nx))))

    def observer() -> None:
        from .observers import MomentumObserver

        MomentumObserver(arm).update(q, v, np.zeros(arm.nv), 0.001)

    def resolver() -> None:
        from .jacobians import frame_placement
        from .redundancy.arm_angle import ArmAngle
        from .redundancy.configuration_control import ConfigurationControl
        from .redundancy.functions import ArmAngleFunction

        chain = RobotModel.from_urdf(robots["arm7"], tip_link="tool")
        control = ConfigurationControl(chain, "tool", [ArmAngleFunction(ArmAngle(
            chain, "link2", "link4", "link6"))])
        control.step(q, frame_placement(chain, q, "tool"))

    def sweeps() -> None:
        from .jacobians import JacobianWorkspace

        try:
            for model in (arm, failed):
                for frame in ("tool", arm.body_names[-1]):
                    JacobianWorkspace(model).generalized(frame, q)
        finally:
            worker.finish(report)

    steps = [("hybrid, forward and inverse dynamics", dynamics)]
    if worker is not None:
        steps.insert(0, ("Jacobian sweeps, run_steps in a worker process meanwhile", sweeps))
    for mode in CONTROL_LAWS:
        if mode == "swing_up":
            steps.append(("control law 'swing_up' (acrobot)", swing_up))
        elif mode == "operational_space":
            for task in ("position", "pose"):
                steps.append((f"control law 'operational_space' (os_task {task})",
                              law(mode, os_task=task)))
        else:
            steps.append((f"control law '{mode}'", law(mode)))
        if mode == "task":  # its separate steps too: held passive rows (a free-flyer's base,
            # a failure reaction's hold) are not its one-call cycle's
            steps.append(("control law 'task' (passive rows held)",
                          law(mode, passive_weight=1.0)))
    steps.append(("planned swing-up: DDP kernels, the bundled acrobot's and pendubot's plans",
                  planned_swing_up))
    steps.append(("failure reaction's planned swing: frame-path cost", path_cost))
    steps.append(("momentum observer", observer))
    steps.append(("elbow resolver's configuration-control step", resolver))
    return steps


def warm_up(report: Callable[[str], None] | None = print) -> float:
    """Compile (or load) every kernel of the package; ``report`` gets one line per step (None:
    silent). Returns the total seconds."""
    t_start = time.perf_counter()
    for what, run in _steps(KernelWorker.start(), report):
        t0 = time.perf_counter()
        run()
        if report is not None:
            report(f"[warm-up] {what}: {time.perf_counter() - t0:.1f} s")
    total = time.perf_counter() - t_start
    if report is not None:
        report(f"[warm-up] every kernel compiled or loaded in {total:.1f} s")
    return total
