"""Compiled-kernel plumbing: block views, named buffer layouts, status codes, the
fixed-signature dispatch, the workspaces of the free functions and the cache keying."""

import gc
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import ARM7_PATH as ARM7
from numba import njit

import underactuated_control
from underactuated_control import RobotModel, dynamics, jacobians
from underactuated_control._kernel_cache import package_source_stamp, source_stamp
from underactuated_control.buffers import block_view, numpy_view
from underactuated_control.dynamics import (
    OK,
    Buffers,
    Constants,
    HybridDynamics,
    SingularPassiveInertiaError,
    Topology,
    Work,
    const_views,
    int_views,
    run_steps,
    work_views,
)
from underactuated_control.jacobians import JacobianWorkspace, generalized_jacobian_sweeps


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
        run_steps(*ws.buffers, q.astype(np.float32), v, qa, tp, 0)
    with pytest.raises(ValueError, match="qdd_active"):
        ws.compute(q, v, qa[:4].tolist(), tp)


def test_kernels_are_cached_under_the_stamp_of_the_whole_package():
    from underactuated_control.redundancy.kernels import configuration_step

    for kernel in (run_steps, generalized_jacobian_sweeps, configuration_step):  # subpackage too
        locator = kernel._cache._impl.locator
        assert type(locator).__name__.startswith("PackageKeyed")
        assert locator.get_source_stamp() == package_source_stamp()


@pytest.mark.parametrize("edited", ["spatial.py", "redundancy/kernels.py", "nodes/common.py"])
def test_the_stamp_changes_when_any_module_of_the_package_changes(tmp_path, edited):
    package = Path(underactuated_control.__file__).parent
    for path in package.rglob("*.py"):
        target = tmp_path / path.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    assert source_stamp(tmp_path) == package_source_stamp()
    module = tmp_path / edited
    module.write_text(module.read_text() + "\n# an edit of an inlined helper\n")
    assert source_stamp(tmp_path) != package_source_stamp()


def test_layouts_fill_their_buffers_exactly_and_name_every_block():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    ws = HybridDynamics(model)
    assert isinstance(ws.buffers, Buffers)
    ints, consts, work = ws.buffers
    t, end = int_views(ints)
    assert isinstance(t, Topology) and end == ints.size
    assert (t.nb, t.nq, t.nv, t.na, t.npas) == (7, 7, 7, 5, 2)
    np.testing.assert_array_equal(numpy_view(t.parent, ints), model.parent)
    np.testing.assert_array_equal(numpy_view(t.passive_dofs, ints), model.passive_dofs)
    c, end = const_views(consts, t.nb)
    assert isinstance(c, Constants) and end == consts.size
    np.testing.assert_array_equal(numpy_view(c.inertia, consts), model.inertia)
    assert numpy_view(c.tol, consts)[0] == ws.singular_tolerance
    w, s, end = work_views(work, t.nb, t.nq, t.nv, t.na, t.npas)
    assert end == work.size
    for name, block in zip(Work._fields, w):  # each attribute is its block of the buffer
        assert np.shares_memory(getattr(ws, name), work)
        assert getattr(ws, name).ctypes.data == block.ctypes.data
        assert getattr(ws, name).shape == block.shape
    assert ws.work.P is not None and ws.work._fields == Work._fields


def test_status_codes_are_named_and_raise_the_matching_error():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint7"])
    ws = HybridDynamics(model)
    q, v = np.zeros(7), np.zeros(7)
    e = np.zeros(0)
    assert run_steps(*ws.buffers, q, v, np.zeros(6), np.zeros(1), dynamics.ALL_STEPS) == OK
    q_bad = q.copy()
    q_bad[3] = np.nan
    assert run_steps(*ws.buffers, q_bad, e, e, e, dynamics.CONFIGURATION) == dynamics.NONFINITE_Q
    assert run_steps(*ws.buffers, e, q_bad, e, e, dynamics.VELOCITY) == dynamics.NONFINITE_V
    assert run_steps(*ws.buffers, np.zeros(6), e, e, e,
                     dynamics.CONFIGURATION) == dynamics.WRONG_LENGTH
    assert run_steps(*ws.buffers, e, e, np.full(6, np.inf), np.zeros(1),
                     dynamics.SOLVE) == dynamics.NONFINITE_INPUT
    with pytest.raises(ValueError, match="joint4"):
        ws.raise_for_status(dynamics.NONFINITE_Q, q=q_bad)
    # a passive hinge that moves nothing: status = its body index
    massless = HybridDynamics(model)
    inertia = numpy_view(const_views(massless.buffers.consts, 7)[0].inertia,
                         massless.buffers.consts)
    inertia[6] = 0.0
    assert run_steps(*massless.buffers, q, e, e, e, dynamics.CONFIGURATION) == 6
    with pytest.raises(SingularPassiveInertiaError, match="joint7"):
        massless.set_configuration(q)


def test_free_functions_keep_their_workspaces_outside_the_model():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    assert not hasattr(model, "_workspace_cache")
    rng = np.random.default_rng(5)
    q, v = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
    qa, tp = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 1)
    shared = dynamics.hybrid_dynamics(model, q, v, qa, tp)
    assert dynamics.shared_workspace(model) is dynamics.shared_workspace(model)
    own = HybridDynamics(model)
    mine = dynamics.hybrid_dynamics(model, q, v, qa, tp, workspace=own)
    np.testing.assert_array_equal(mine.tau_active, shared.tau_active)
    assert own.result.tau_active is not mine.tau_active  # copies, as without workspace=
    active = HybridDynamics(model, np.zeros(7, bool))
    np.testing.assert_array_equal(dynamics.mass_matrix(model, q, workspace=active),
                                  dynamics.mass_matrix(model, q))
    np.testing.assert_array_equal(dynamics.inverse_dynamics(model, q, v, v, workspace=active),
                                  dynamics.inverse_dynamics(model, q, v, v))
    with pytest.raises(ValueError, match="active"):
        dynamics.inverse_dynamics(model, q, v, v, workspace=own)
    with pytest.raises(ValueError, match="passive"):
        dynamics.forward_dynamics(model, q, v, v, workspace=active)
    with pytest.raises(ValueError, match="passive set"):
        dynamics.hybrid_dynamics(model, q, v, qa, tp, workspace=active)
    other = RobotModel.from_urdf(ARM7, passive_joints=["joint2"])
    with pytest.raises(ValueError, match="another robot"):
        dynamics.hybrid_dynamics(other, q, v, qa, tp, workspace=own)
    jws = JacobianWorkspace(model)
    np.testing.assert_array_equal(jacobians.generalized_jacobian(model, q, "tool", workspace=jws),
                                  jacobians.generalized_jacobian(model, q, "tool"))
    with pytest.raises(ValueError, match="another model"):
        jacobians.disturbance_jacobian(other, q, workspace=jws)


def test_shared_workspaces_are_one_bounded_cache():
    from underactuated_control import operational_space

    models = [RobotModel.from_urdf(ARM7) for _ in range(dynamics._CACHED_MODELS + 3)]
    for m in models:
        dynamics.shared_workspace(m)
        jacobians.shared_workspace(m)
        operational_space.shared_workspace(m)
    assert len(dynamics._workspaces) == dynamics._CACHED_MODELS
    assert models[0] not in dynamics._workspaces  # the oldest went first
    assert models[-1] in dynamics._workspaces
    m = models[-1]
    shared = dynamics.model_workspace(m)  # one per model, holding every part
    assert jacobians.shared_workspace(m).shared is shared
    assert operational_space.shared_workspace(m).shared is shared
    assert jacobians.shared_workspace(m).dynamics is dynamics.shared_workspace(m)
    assert operational_space.shared_workspace(m).dynamics is dynamics.shared_workspace(
        m, "passive")
    assert dynamics.shared_workspace(m, "active") is dynamics.shared_workspace(m)  # no passive


def test_configuration_is_computed_once_per_q_and_recomputed_for_another():
    model = RobotModel.from_urdf(ARM7, passive_joints=["joint2", "joint4"])
    ws = HybridDynamics(model)
    rng = np.random.default_rng(3)
    q1, q2 = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
    ws.set_configuration(q1)
    assert ws.q_valid[0] == 1.0 and np.array_equal(ws.q_at, q1)
    P1 = ws.P.copy()
    ws.P[:] = 0.0  # not recomputed for the same q: the marker is the proof
    ws.set_configuration(q1.copy())
    assert not ws.P.any()
    ws.set_configuration(q2)  # another q: recomputed
    fresh = HybridDynamics(model)
    fresh.set_configuration(q2)
    np.testing.assert_array_equal(ws.P, fresh.P)
    q2[3] += 1e-9  # changed in place: still seen
    ws.set_configuration(q2)
    fresh.set_configuration(q2)
    np.testing.assert_array_equal(ws.E_up, fresh.E_up)
    ws.set_configuration(q1)
    np.testing.assert_array_equal(ws.P, P1)
    bad = q1.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="joint1"):
        ws.set_configuration(bad)
    assert ws.q_valid[0] == 0.0


_ONE_VERSION = textwrap.dedent("""
    import sys
    import numpy as np
    from helpers import issue_arm
    from underactuated_control import RobotModel
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import CONTROL_LAWS, default_settings
    from underactuated_control.jacobians import JacobianWorkspace
    from underactuated_control import passive_forces, spatial
    from underactuated_control.control import (command, friction, joint_space, limits,
                                               operational_space_law, task_space)

    rng = np.random.default_rng(0)
    robots = [(open(sys.argv[1]).read(), "tool"),
              (issue_arm("xarm_description/urdf/xarm7.urdf"), "link_eef")]
    modes = [("joint", {}), ("hold", {}), ("task", {"task": "pose"}),
             ("task", {"task": "position", "task_kp_position": 400, "task_kd_position": 40}),
             ("task", {"task": "pointing"}), ("task", {"task": "position", "passive_weight": 1}),
             ("operational_space", {"os_task": "pose"}),
             ("operational_space", {"os_task": "position", "task_kp_position": 400})]
    for text, frame in robots:
        for passive in ([], ["joint3"]):
            model = RobotModel.from_urdf(text, passive_joints=passive)
            for mode, overrides in modes:
                settings = default_settings(**overrides)
                workspace = JacobianWorkspace(model)
                law = CONTROL_LAWS[mode](model, settings, frame, workspace)
                shaper = CommandShaper(model, settings, workspace)
                mapper = EffortMapper(model, None, 1.0)
                q = model.neutral_configuration() + 0.3
                reference = law.hold_reference(q)
                for k in range(4):  # states as a node gets them, and strided views
                    state = np.stack([q + rng.uniform(-0.05, 0.05, q.shape),
                                      rng.uniform(-0.5, 0.5, model.nv)], axis=1)
                    qk, vk = (state[:, 0], state[:, 1]) if k % 2 else (state[:, 0].copy(),
                                                                       state[:, 1].copy())
                    out = law.compute(qk, vk, reference, 1e-3 * k, k == 3)
                    shaper.apply(qk, vk, out)
                    mapper.map(out.tau_active)
    kernels = {"rotation_exp": spatial.rotation_exp, "rotation_log": spatial.rotation_log,
               "rotation_error_log": spatial.rotation_error_log,
               "passive_element_forces": passive_forces.passive_element_forces,
               "compensation_torques": friction.compensation_torques,
               "map_efforts": joint_space.map_efforts, "follower_step": limits.follower_step,
               "joint_law_step": joint_space.joint_law_step,
               "braked_joints": limits.braked_joints,
               "bound_own_accelerations": limits.bound_own_accelerations,
               "own_command_kernel": command.own_command_kernel,
               "operational_space_cycle_kernel":
                   operational_space_law.operational_space_cycle_kernel,
               "generalized_cycle_kernel": operational_space_law.generalized_cycle_kernel,
               "damped_solve_kernel": task_space.damped_solve_kernel,
               "task_solve_kernel": task_space.task_solve_kernel,
               "task_cycle_kernel": task_space.task_cycle_kernel,
               "self_motion_kernel": task_space.self_motion_kernel,
               "intent_kernel": task_space.intent_kernel,
               "small_svd": task_space.small_svd}
    print(" ".join(f"{name}={len(k.signatures)}" for name, k in kernels.items()))
""")


def test_every_mode_runs_one_compiled_version_of_each_kernel_of_its_cycle():
    """The kernels compiled on first use (no fixed signature) get one version each whatever
    the modes, robots, passive sets, integer-valued settings and strided state views: a
    second version would be a compile in the middle of a running controller."""
    out = subprocess.run([sys.executable, "-c", _ONE_VERSION, str(ARM7)], check=True,
                         capture_output=True, text=True, timeout=900,
                         cwd=Path(__file__).parent).stdout.split()
    counts = {name: int(n) for name, n in (item.split("=") for item in out)}
    # called from Python every cycle: one version each; the others are called from inside
    # kernels (compiled into them: no version of their own when those load from the cache)
    # or by no cycle (a lone rotation's log)
    called = ("rotation_error_log", "passive_element_forces", "compensation_torques",
              "map_efforts", "follower_step", "damped_solve_kernel", "task_solve_kernel",
              "task_cycle_kernel",
              "intent_kernel", "self_motion_kernel", "joint_law_step", "braked_joints",
              "own_command_kernel", "operational_space_cycle_kernel",
              "generalized_cycle_kernel")
    assert len(counts) == 19 and all(counts[name] == 1 for name in called), counts
    assert all(n <= 1 for n in counts.values()), counts


_AFTER_WARM_LAW = textwrap.dedent("""
    import sys
    import numpy as np
    from numba.core.registry import CPUDispatcher
    from underactuated_control import RobotModel
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import CONTROL_LAWS, default_settings
    from underactuated_control.warmup import warm_law

    urdf, frame, mode, passive = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]

    def versions():
        return {f"{name}.{attr}": len(obj.signatures) for name, module in list(sys.modules.items())
                if name.startswith("underactuated_control")
                for attr, obj in list(vars(module).items()) if isinstance(obj, CPUDispatcher)}

    model = RobotModel.from_urdf(urdf, passive_joints=passive)
    settings = default_settings(**({"task": "planar"} if frame == "head" else {}))
    law_class = CONTROL_LAWS[mode]
    q = model.neutral_configuration() + 0.3
    warm_law(law_class, model, settings, frame, q, report=None)
    warmed = versions()
    # then a controller as the node runs one: a moved reference, 1 ms cycles, Jacobians
    # published every other cycle, the command shaped and mapped
    law = law_class(model, settings, frame)
    shaper, mapper = CommandShaper(model, settings, law.workspace), EffortMapper(model)
    reference = law.hold_reference(q + 0.05)
    rng = np.random.default_rng(1)
    for k in range(20):
        qk = q + rng.uniform(-0.02, 0.02, q.shape)
        vk = rng.uniform(-0.3, 0.3, model.nv)
        mapper.map(shaper.apply(qk, vk, law.compute(qk, vk, reference, 1e-3 * k,
                                                    k % 2 == 0)).tau_active)
    after = versions()
    print(" ".join(f"{k}={warmed.get(k, 0)}->{n}" for k, n in after.items()
                   if n != warmed.get(k, 0)))
""")


@pytest.mark.parametrize("robot, frame, mode, passive", [
    (ARM7, "tool", "joint", []), (ARM7, "tool", "hold", ["joint3"]),
    (ARM7, "tool", "task", []), (ARM7, "tool", "operational_space", ["joint3"]),
    (Path(underactuated_control.__file__).parents[1] / "urdf" / "snake.urdf", "head", "task",
     []),
])
def test_a_warmed_law_compiles_nothing_while_it_runs(robot, frame, mode, passive):
    """After ``warm_law`` (what a node runs before it subscribes), a controller's cycles with
    a moving setpoint, the command stages and the effort map load no further kernel: a kernel
    first met in a running controller compiles there (seconds) on a fresh cache."""
    out = subprocess.run([sys.executable, "-c", _AFTER_WARM_LAW, str(robot), frame, mode,
                          *passive], check=True, capture_output=True, text=True, timeout=900,
                         cwd=Path(__file__).parent)
    assert out.stdout.strip() == "", f"kernels first used after the warm-up: {out.stdout}"
