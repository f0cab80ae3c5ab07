"""The snake scenario's robot, the planar task and the offline closed loop.

Oracles: Pinocchio (dense J_G = J_a + J_p J_D of §6.1, forward dynamics aba for the frame
acceleration a command produces) and MuJoCo (the closed loop's physics; the head is MuJoCo's
site at the URDF's head frame, not the controller's model)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ROOT
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.task_space import EndEffectorTracker, TaskReference
from underactuated_control.passive_forces import PassiveForceModel
from underactuated_control.scenarios.snake import (
    HEAD,
    HeadPath,
    SnakeDesign,
    closed_loop_eigenvalues,
    initial_configuration,
    law_settings,
    passive_drift,
    simulate_offline,
    snake_plant,
    snake_urdf,
)

SNAKE = (ROOT / "urdf/snake.urdf").read_text()


def test_bundled_urdf_passive_set_from_ros2_control_and_mujoco():
    model = RobotModel.from_urdf(SNAKE)
    assert 10 <= model.nv <= 20
    assert model.passive_joints == tuple(f"joint{i}" for i in range(2, model.nv + 1, 2))
    assert model.active_joints == tuple(f"joint{i}" for i in range(1, model.nv + 1, 2))
    assert SNAKE == snake_urdf()  # the bundled file is the generator's default design
    m = snake_plant(SNAKE).m
    assert m.nu == len(model.active_joints)
    for name in model.joint_names:  # every axis vertical; passive joints damped in MuJoCo
        j = m.joint(name)
        np.testing.assert_allclose(m.jnt_axis[j.id], [0, 0, 1])
        expected = SnakeDesign().passive_damping if name in model.passive_joints else 0.0
        assert m.dof_damping[m.jnt_dofadr[j.id]] == pytest.approx(expected)
    assert sorted(m.actuator(i).name for i in range(m.nu)) == sorted(
        f"motor_{n}" for n in model.active_joints)


def _hybrid_head_acceleration(ref: PinRef, model, q, v, tau_active, frame):
    """Pinocchio: qdd from aba with the passive joints' own forces, then the frame's classical
    linear acceleration (root axes)."""
    tau = np.zeros(model.nv)
    tau[model.active_dofs] = tau_active
    tau[model.passive_dofs] = PassiveForceModel(model)(q, v)
    qdd = ref.aba(q, v, tau)
    pin.forwardKinematics(ref.pm, ref.pd, ref.q(q), ref.v(v), ref.v(qdd))
    pin.updateFramePlacements(ref.pm, ref.pd)
    fid = ref.pm.getFrameId(frame)
    return pin.getFrameClassicalAcceleration(ref.pm, ref.pd, fid,
                                             pin.LOCAL_WORLD_ALIGNED).linear.copy()


@pytest.mark.parametrize("n_links", [3, 11])
def test_planar_task_commands_the_desired_head_acceleration(n_links):
    urdf = snake_urdf(SnakeDesign(n_links=n_links))
    model = RobotModel.from_urdf(urdf)
    ref = PinRef(model, urdf)
    rng = np.random.default_rng(n_links)
    tracker = EndEffectorTracker(model, HEAD, task="planar", null_space_damping=0.0,
                                 singular_threshold=1e-6)  # exact solve: no damping
    for _ in range(3):
        q = rng.uniform(-0.8, 0.8, model.nv)
        v = rng.uniform(-0.5, 0.5, model.nv)
        # J_G's x, y rows against the dense oracle (our J_G, §6.1)
        J_G, _ = tracker.workspace.generalized(HEAD, q)
        J_G_ref, _ = ref.generalized_jacobians(q, HEAD, model.active_dofs, model.passive_dofs)
        np.testing.assert_allclose(J_G[:2], J_G_ref[:2], atol=1e-9)
        J = ref.frame_jacobian(q, HEAD)  # also leaves the placements in ref.pd.oMf
        p = ref.pd.oMf[ref.pm.getFrameId(HEAD)].translation.copy()
        goal = TaskReference(position=p + np.array([0.01, -0.02, 0.0]),
                             linear_velocity=np.array([0.05, 0.02, 0.0]),
                             linear_acceleration=np.array([0.1, -0.3, 0.0]))
        res = tracker.step(q, v, goal)
        assert not res.singular, res.sigma_min
        a = _hybrid_head_acceleration(ref, model, q, v, res.tau_active, HEAD)
        np.testing.assert_allclose(a[:2], res.frame_acceleration_desired[:2], atol=1e-7)
        # the desired one from its definition: a_ref + kd (v_ref - v) + kp (p_ref - p)
        twist = J @ v
        a_des = (goal.linear_acceleration + tracker.kd_position
                 * (goal.linear_velocity - twist[:3]) + tracker.kp_position * (goal.position - p))
        np.testing.assert_allclose(a[:2], a_des[:2], atol=1e-7)


def test_position_task_on_a_planar_robot_is_always_singular_planar_is_not():
    model = RobotModel.from_urdf(SNAKE)
    q = initial_configuration(model.nv)
    goal = TaskReference(position=np.zeros(3))
    position = EndEffectorTracker(model, HEAD, task="position").step(q, np.zeros(model.nv),
                                                                      goal)
    planar = EndEffectorTracker(model, HEAD, task="planar").step(q, np.zeros(model.nv), goal)
    assert position.singular and position.sigma_min < 1e-12  # no joint moves the head in z
    assert not planar.singular


def test_head_path_derivatives_and_bad_input():
    path = HeadPath(start=(0.3, 0.2, 0.05), radius=0.03, period=4.0, ramp=1.5, heading=0.7)
    p0, v0, a0 = path(0.0)
    np.testing.assert_allclose(p0, [0.3, 0.2, 0.05])
    assert np.allclose(v0, 0) and np.allclose(a0, 0)  # cycloidal start from rest
    h = 1e-5
    for t in (0.4, 1.2, 2.5, 5.0):  # central differences as the oracle
        p_m, v_m, _ = path(t - h)
        p_p, v_p, _ = path(t + h)
        _, v, a = path(t)
        np.testing.assert_allclose(v, (p_p - p_m) / (2 * h), atol=1e-8)
        np.testing.assert_allclose(a, (v_p - v_m) / (2 * h), atol=1e-6)
    with pytest.raises(ValueError, match="path shape"):
        HeadPath(start=(0, 0, 0), shape="square")
    with pytest.raises(ValueError, match="path radius"):
        HeadPath(start=(0, 0, 0), radius=-1.0)
    with pytest.raises(ValueError, match="n_links"):
        SnakeDesign(n_links=1)
    with pytest.raises(ValueError, match="unknown task-mode parameter 'task_kp'"):
        law_settings({"task_kp": 1.0})


@pytest.mark.parametrize("n_links, shape, unstable", [(11, "C", False), (12, "zigzag", True)])
def test_zero_dynamics_linearisation_predicts_mujoco(n_links, shape, unstable):
    """The head held still, a 1 mrad/s nudge of the passive joints: where the linearised
    closed loop has a fast positive eigenvalue, MuJoCo loses the head within a second; where
    it has none, the head stays within a millimetre and the passive joints slow down."""
    urdf = snake_urdf(SnakeDesign(n_links=n_links))
    q0 = (initial_configuration(n_links) if shape == "C"
          else np.where(np.arange(n_links) % 2 == 0, 0.3, -0.3))
    rate = float(closed_loop_eigenvalues(urdf, q0)[0].real)
    v0 = np.zeros(n_links)
    v0[1::2] = 1e-3
    res = simulate_offline(urdf, q0=q0, v0=v0, duration=1.0, path_kwargs={"radius": 1e-9})
    speed = np.abs(res.v[:, res.passive]).max(axis=1)
    print(f"\n{n_links} links, {shape}: largest Re(eigenvalue) {rate:.2f} 1/s, head max "
          f"{res.metrics['head_max_mm']:.3f} mm")
    if unstable:
        assert rate > 5.0
        assert res.metrics["head_max_mm"] > 10.0
    else:
        assert rate < 0.1
        assert res.metrics["head_max_mm"] < 1.0
        assert speed[-1] < 0.5 * speed.max()


def test_offline_closed_loop_head_follows_on_mujoco():
    """The controller's task law at 1 kHz (one step of delay) on MuJoCo, 4 s of the default
    circle: measured 0.11 mm RMS, 0.16 mm max (head error in the plane, MuJoCo's head)."""
    res = simulate_offline(duration=4.0)
    m = res.metrics
    print({k: round(v, 4) for k, v in m.items()})
    assert m["head_rms_mm"] < 1.0
    assert m["head_max_mm"] < 2.0
    assert m["passive_excursion_max_rad"] < 0.5  # the passive joints' internal motion
    travelled = np.linalg.norm(res.goal[-1, :2] - res.goal[0, :2])
    assert travelled > 0.01  # the head really moved (not a hold)
    # MuJoCo's head is the URDF's head, independent of the controller's kinematics
    model = RobotModel.from_urdf(SNAKE)
    ref = PinRef(model, SNAKE)
    ref.frame_jacobian(res.q[-1], HEAD)
    np.testing.assert_allclose(ref.pd.oMf[ref.pm.getFrameId(HEAD)].translation,
                               res.head[-1], atol=1e-9)


def test_passive_drift_balances_mujocos_passive_joints():
    """Each passive joint's displacement equals its momentum balance's three terms
    (``passive_drift``: ∫∂T/∂q/d − ∫g/d − Δ(Mv)/d, from the controller's model) on MuJoCo's
    trajectories: the snake's closed loop (no gravity on its vertical axes; the kinetic term is
    the one that grows lap after lap) and, with gravity, the pendubot with its passive elbow
    damped, swinging under a sinusoidal shoulder torque. Measured: 2e-5 rad (snake, 5 s of the
    first lap, terms up to 0.08 rad; MuJoCo's implicitfast, as the scenario) and 7e-7 rad
    (pendubot, 3 s, terms up to 0.8 rad; RK4): the trapezoid rule on 1 ms steps."""
    from underactuated_control.sim import closed_loop, mujoco_spec
    from underactuated_control.sim.model import Plant

    res = simulate_offline(duration=8.0)
    model = RobotModel.from_urdf(SNAKE)
    (lap,) = passive_drift(model, res.t, res.q, res.v, [(3.0, 8.0)])
    terms = lap["kinetic"] + lap["gravity"] + lap["momentum"]
    print({k: np.round(x, 5) for k, x in lap.items()})
    assert np.abs(lap["displacement"]).max() > 0.02  # the shape moved
    assert np.abs(lap["kinetic"]).max() > 0.02  # and not by the momentum term alone
    assert np.abs(lap["gravity"]).max() < 1e-12  # vertical axes
    np.testing.assert_allclose(terms, lap["displacement"], atol=2e-4)

    urdf = (ROOT / "urdf/pendubot.urdf").read_text().replace('damping="0"', 'damping="0.1"')
    pendubot = RobotModel.from_urdf(urdf)
    assert list(pendubot.passive_joints) == ["elbow"] and pendubot.damping[1] == 0.1
    plant = Plant.compile(mujoco_spec(urdf, pendubot, integrator="rk4"),
                          list(pendubot.joint_names), list(pendubot.active_joints))
    plant.set_state(np.array([0.4, -0.3]))
    qs, vs = [], []

    def control(k, q, v):
        qs.append(q.copy())
        vs.append(v.copy())
        return np.array([0.8 * np.sin(2 * np.pi * 1.3 * k * 1e-3)])

    closed_loop(plant, control, 3000)
    t = np.arange(len(qs)) * 1e-3
    (swing,) = passive_drift(pendubot, t, np.array(qs), np.array(vs), [(0.0, t[-1])])
    print({k: np.round(x, 5) for k, x in swing.items()}, "residual",
          np.abs(swing["kinetic"] + swing["gravity"] + swing["momentum"]
                 - swing["displacement"]).max())
    assert abs(swing["gravity"][0]) > 0.1  # gravity does work on the elbow
    np.testing.assert_allclose(swing["kinetic"] + swing["gravity"] + swing["momentum"],
                               swing["displacement"], atol=1e-5)
    for dynamics in ('damping="0"', 'damping="0.1" friction="0.05"'):  # the balance fails
        other = RobotModel.from_urdf(urdf.replace('damping="0.1" friction="0.0"', dynamics))
        with pytest.raises(ValueError, match="every passive joint damped"):
            passive_drift(other, t, np.array(qs), np.array(vs), [(0.0, 1.0)])


@pytest.mark.ros
@pytest.mark.parametrize("duration, rms_mm, max_mm", [
    # the ramp and two laps (19 s): over DDS 1.64 / 5.07 mm (ramp + lap 1) and 0.25 / 1.17 mm
    # (lap 2) RMS / max in the three-lap runs. Not the third lap, issue 23's goal (head RMS
    # <= 5 mm over three laps): it depends on the start shape. Offline, from 15 starts (the C
    # shape perturbed by 0.02 rad, latency 0-2 steps: bench/snake_offline.py --starts 15),
    # laps 1-2 stay within 2.95 mm RMS from every start, but three laps within 5 mm only from
    # 10 and the head is lost in lap 3 from 3; a fresh-clone CI run lost it too (45.8 mm over
    # 27 s, where four runs here had 3.23 mm): doc/scenarios.md
    (19.0, 5.0, 20.0),
])
def test_snake_scenario_over_dds_recomputed_from_the_bag(tmp_path, duration, rms_mm, max_mm):
    """`demo --scenario snake` over DDS (MuJoCo lock-stepped, on simulated time): head error
    recomputed from the bag's /joint_states with Pinocchio against the streamed
    ~/pose_reference, each state paired with the last reference stamped at or before it (both
    stamped with simulated time; not the recorder's receive order)."""
    import json

    from harness import new_domain

    from underactuated_control.nodes.bags import read_bag
    from underactuated_control.scenarios import run_scenario
    from underactuated_control.scenarios.harness import stamp_seconds

    summary = run_scenario("snake", tmp_path, duration=duration, domain=new_domain(),
                           log=lambda s: None)
    out = tmp_path / "snake"
    assert json.loads((out / "summary.json").read_text())["metrics"] == summary["metrics"]
    assert (out / "snake.png").is_file()
    node = "/hybrid_dynamics_controller"
    bag = read_bag(out / "bag", ["/joint_states", f"{node}/pose_reference",
                                 "/effort_controller/commands"])
    model = RobotModel.from_urdf(SNAKE)
    ref = PinRef(model, SNAKE)
    fid = ref.pm.getFrameId(HEAD)
    refs = bag[f"{node}/pose_reference"]
    ref_t = np.array([stamp_seconds(m) for _, m in refs])
    errors = []
    for _, js in bag["/joint_states"]:
        t = stamp_seconds(js)
        if t < ref_t[0]:
            continue
        q = np.array([dict(zip(js.name, js.position))[n] for n in model.joint_names])
        pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(q))
        goal = refs[np.searchsorted(ref_t, t, side="right") - 1][1].pose.position
        errors.append(np.linalg.norm(ref.pd.oMf[fid].translation[:2] - [goal.x, goal.y]))
    errors = 1e3 * np.array(errors)
    rms, worst = float(np.sqrt(np.mean(errors**2))), float(errors.max())
    print(f"\n[snake] {duration:g} s: head RMS {rms:.2f} mm, max {worst:.2f} mm over DDS "
          f"(summary {summary['metrics']['head_rms_mm']:.2f} / "
          f"{summary['metrics']['head_max_mm']:.2f})")
    assert rms == pytest.approx(summary["metrics"]["head_rms_mm"], rel=0.05, abs=0.05)
    commands = np.array([m.data for _, m in bag["/effort_controller/commands"]])
    assert np.all(np.isfinite(commands)) and commands.shape[1] == len(model.active_joints)
    assert rms < rms_mm and worst < max_mm
    assert summary["success"]


def test_planar_target_beyond_reach_is_refused():
    from underactuated_control.control.task_law import TaskLaw

    model = RobotModel.from_urdf(SNAKE)
    law = TaskLaw(model, law_settings(), HEAD)
    length = SnakeDesign().n_links * SnakeDesign().link_length  # 1.1 m from joint 1
    with pytest.raises(ValueError, match="beyond the reach"):
        law.check_reference(TaskReference(position=np.array([1.5 * length, 0.0, 0.05])))
    law.check_reference(TaskReference(position=np.array([0.5 * length, 0.0, 0.05])))
