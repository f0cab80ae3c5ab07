"""First launch on a fresh kernel cache: ``run_steps`` compiled by a worker process while the
node compiles the rest (``warmup.KernelWorker``), and its fallback when the worker fails."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import ARM7_PATH as ARM7

from underactuated_control import RobotModel, dynamics
from underactuated_control.dynamics import HybridDynamics, run_steps
from underactuated_control.warmup import KernelWorker


def test_a_failing_worker_costs_one_line_and_the_kernel_compiles_here():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    lines: list[str] = []
    worker = KernelWorker([sys.executable, "-c", "import sys; sys.exit('no compiler here')"])
    assert not worker.finish(lines.append)
    assert len(lines) == 1 and "kernel worker failed (exit code 1: no compiler here)" in lines[0]
    assert not dynamics._run_steps_deferred
    ws = HybridDynamics(model)  # run_steps: its one signature, nothing else
    q = model.random_configuration(np.random.default_rng(1))
    ws.compute(q, np.zeros(7), np.zeros(6), np.zeros(1))
    assert len(run_steps.signatures) == 1
    with pytest.raises(TypeError):
        run_steps(*ws.buffers, q.astype(np.float32), np.zeros(7), np.zeros(6), np.zeros(1), 0)


def test_no_worker_once_the_kernel_is_loaded_and_a_cancelled_one_stops():
    HybridDynamics(RobotModel.from_urdf(ARM7))
    assert KernelWorker.start() is None  # loaded in this process: nothing to gain
    worker = KernelWorker([sys.executable, "-c", "import time; time.sleep(60)"])
    worker.cancel()
    assert worker.process.returncode is not None and not dynamics._run_steps_deferred


_FRESH = textwrap.dedent("""
    import sys
    from numba.core import event
    from underactuated_control import RobotModel
    from underactuated_control.control.registry import CONTROL_LAWS
    from underactuated_control.warmup import KernelWorker, _default_settings, warm_law

    compiled = []
    class Compiles(event.Listener):
        def on_start(self, e):
            compiled.append(e.data["dispatcher"].py_func.__module__ + "."
                            + e.data["dispatcher"].py_func.__name__)
        def on_end(self, e):
            pass
    event.register("numba:compile", Compiles())
    worker = KernelWorker.start()
    model = RobotModel.from_urdf(sys.argv[1], passive_joints=["joint2", "joint4"])
    warm_law(CONTROL_LAWS["joint"], model, _default_settings(), "link7", worker=worker)
    ours = sorted({c for c in compiled if c.startswith("underactuated_control")})
    print("worker" if worker is not None else "none", ",".join(ours))
""")


def test_on_a_fresh_cache_the_worker_compiles_run_steps_and_the_cache_is_then_complete(
        tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def launch() -> tuple[str, list[str]]:
        out = subprocess.run([sys.executable, "-c", _FRESH, str(ARM7)], env=env, check=True,
                             capture_output=True, text=True, timeout=900).stdout.split()
        return out[0], (out[1].split(",") if len(out) > 1 else [])

    worker, compiled_here = launch()
    assert worker == "worker"
    assert "underactuated_control.jacobians.generalized_jacobian_sweeps" in compiled_here
    assert "underactuated_control.dynamics.run_steps" not in compiled_here  # the worker's
    worker, compiled_here = launch()  # warm: every kernel of the cycle loaded from the cache
    assert (worker, compiled_here) == ("none", [])
