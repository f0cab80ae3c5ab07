"""Compiled-kernel plumbing: block views, the fixed-signature dispatch and the cache keying."""

import gc
import shutil
from pathlib import Path

import numpy as np
import pytest
from numba import njit

import underactuated_control
from underactuated_control import RobotModel
from underactuated_control._kernel_cache import package_source_stamp, source_stamp
from underactuated_control.dynamics import HybridDynamics, numpy_view, run_steps
from underactuated_control.jacobians import generalized_jacobian_sweeps
from underactuated_control.spatial import block_view

ARM7 = Path(__file__).resolve().parents[1] / "urdf/arm7.urdf"


@njit
def _views(buf, nb):
    return block_view(buf, 3, (nb, 2, 3)), block_view(buf, 3 + 6 * nb, (4,))


def test_block_view_equals_reshape_and_shares_memory():
    buf = np.arange(40.0)
    a, b = _views(buf, 2)  # borrowed views: valid while buf lives
    np.testing.assert_array_equal(a, buf[3:15].reshape(2, 2, 3))
    np.testing.assert_array_equal(b, buf[15:19])
    assert a.flags.c_contiguous and a.strides == (48, 24, 8)
    a[1, 0, 2] = -1.0
    assert buf[3 + 6 + 2] == -1.0
    owned = numpy_view(a, buf)  # the same block as a NumPy view that keeps buf alive
    assert owned.base is not None and np.shares_memory(owned, buf)
    del a, b, buf
    assert owned[1, 0, 2] == -1.0 and owned.sum() == np.arange(3.0, 15.0).sum() - 11.0 - 1.0


def test_workspace_views_are_numpy_views_of_its_buffer():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    ws = HybridDynamics(model)
    P, tau_active = ws.P, ws.result.tau_active
    rng = np.random.default_rng(0)
    q, v = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
    res = ws.compute(q, v, np.ones(6), np.zeros(1))
    expected_P0 = ws.P[0].copy()
    expected_tau = res.tau_active.copy()
    del ws, res
    gc.collect()
    np.testing.assert_array_equal(P[0], expected_P0)  # still valid memory after the workspace
    np.testing.assert_array_equal(tau_active, expected_tau)


def test_compute_converts_other_input_types_to_the_same_result():
    """The fixed signature rejects anything but writeable C-contiguous float64 at dispatch;
    the workspace then converts (lists, float32, strided, read-only arrays)."""
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    ws = HybridDynamics(model)
    rng = np.random.default_rng(3)
    q, v = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
    qa, tp = rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 2)
    expected = ws.compute(q, v, qa, tp).tau_active.copy()
    frozen = q.copy()
    frozen.flags.writeable = False
    strided = np.repeat(v, 2)[::2]
    for args in ((q.tolist(), v, qa, tp), (q, strided, qa, tp), (frozen, v, qa, tp),
                 (q, v, qa, tuple(tp))):
        np.testing.assert_allclose(ws.compute(*args).tau_active, expected, rtol=0, atol=1e-12)
    got = ws.compute(q.astype(np.float32), v, qa, tp).tau_active
    np.testing.assert_allclose(got, HybridDynamics(model).compute(
        q.astype(np.float32).astype(np.float64), v, qa, tp).tau_active, atol=1e-12)
    with pytest.raises(TypeError):  # no silent new specialization of the kernel
        run_steps(ws._ints, ws._consts, ws._work, q.astype(np.float32), v, qa, tp, 0)
    with pytest.raises(ValueError, match="qdd_active"):
        ws.compute(q, v, qa[:4].tolist(), tp)


def test_kernels_are_cached_under_the_stamp_of_the_whole_package():
    for kernel in (run_steps, generalized_jacobian_sweeps):
        locator = kernel._cache._impl.locator
        assert type(locator).__name__.startswith("PackageKeyed")
        assert locator.get_source_stamp() == package_source_stamp()


def test_the_stamp_changes_when_any_core_module_changes(tmp_path):
    package = Path(underactuated_control.__file__).parent
    for path in package.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    assert source_stamp(tmp_path) == package_source_stamp()
    spatial = tmp_path / "spatial.py"
    spatial.write_text(spatial.read_text() + "\n# an edit of an inlined helper\n")
    assert source_stamp(tmp_path) != package_source_stamp()
