"""Collision detection on the momentum observer (observers.CollisionDetector), ROS-free.

Oracles: the detector's own rules on hand-made residuals (thresholds per joint, minimum
duration, latch, re-arm below the thresholds), and MuJoCo's physics: the 7-DOF arm held by the
package's joint law, a push applied by ``xfrc_applied`` at the hand; the joint torques it
causes are Jᵀ f (Pinocchio's frame Jacobian), the threshold is set at half the largest of
them, and the detection must come within 20 ms of the push and name the joints that feel it,
with no detection before it."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.observers import CollisionDetector, MomentumObserver

ARM7 = ARM7_PATH.read_text()
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


def test_thresholds_duration_latch_and_rearm():
    model = RobotModel.from_urdf(ARM7)
    det = CollisionDetector(model, [0, 5, 0, 5, 0, 0, 0], min_duration=0.002)
    assert det.enabled
    r = np.zeros(7)
    r[0] = 100.0  # unmonitored joint
    assert det.update(r, 0.0) is None
    r[3] = -6.0
    assert det.update(r, 0.001) is None  # above since 0.001: not yet 2 ms
    assert det.update(r, 0.002) is None
    event = det.update(r, 0.003)
    assert event is not None and event.joints == ("joint4",) and event.torques == (-6.0,)
    assert event.time == 0.003 and det.count == 1 and det.collision is event
    assert det.update(r, 0.004) is None  # latched
    det.clear()
    assert det.collision is None and det.update(r, 0.005) is None  # still above: not armed
    r[3] = 4.0
    assert det.update(r, 0.006) is None and det.armed  # below: armed again
    r[1] = 7.0
    assert det.update(r, 0.007) is None  # a new streak: 2 ms again
    r[1] = 3.0
    assert det.update(r, 0.008) is None  # fell back: the streak restarts
    r[1] = 7.0
    assert det.update(r, 0.009) is None and det.update(r, 0.010) is None
    assert det.update(r, 0.011).joints == ("joint2",) and det.count == 2


def test_off_and_bad_input():
    model = RobotModel.from_urdf(ARM7)
    assert not CollisionDetector(model, 0.0).enabled
    assert CollisionDetector(model, 0.0).update(np.full(7, 1e6), 0.0) is None
    with pytest.raises(ValueError, match="one per joint"):
        CollisionDetector(model, [1.0, 2.0])
    with pytest.raises(ValueError, match="joint3"):
        CollisionDetector(model, [1, 1, -1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="min_duration"):
        CollisionDetector(model, 1.0, min_duration=np.nan)


def test_mujoco_push_detected_within_20_ms_on_the_joints_that_feel_it():
    from underactuated_control.control.command import CommandShaper
    from underactuated_control.control.joint_law import JointLaw
    from underactuated_control.control.joint_space import EffortMapper
    from underactuated_control.control.registry import default_settings
    from underactuated_control.sim import build_plant, closed_loop

    urdf = ARM7.replace('friction="0.1"', 'friction="0"')  # MuJoCo's dry friction: a constraint
    model = RobotModel.from_urdf(urdf)
    plant = build_plant(urdf, model, timestep=1e-3)
    plant.set_state(Q0, np.zeros(7))
    s = default_settings()
    s["effort_limit_scale"] = 1.0
    law = JointLaw(model, s, "tool")
    shaper, mapper = CommandShaper(model, s, law.workspace), EffortMapper(model)
    ref = law.hold_reference(Q0)
    dt, push_at, force = 1e-3, 300, np.array([0.0, 20.0, -10.0])
    body = plant.m.body(model.body_names[model.frame("tool").body]).id
    # the oracle: the joint torques of the push, Jᵀ f at the hand body's centre of mass
    pm = pin.buildModelFromUrdf(str(ARM7_PATH))
    pd = pm.createData()
    pin.computeJointJacobians(pm, pd, Q0)
    pin.updateFramePlacements(pm, pd)
    hand = pm.frames[pm.getFrameId("tool")].parentJoint
    com = plant.d.xipos[body].copy()
    J = pin.getJointJacobian(pm, pd, hand, pin.LOCAL_WORLD_ALIGNED)
    lever = com - pd.oMi[hand].translation
    tau_push = J[:3].T @ force + J[3:].T @ np.cross(lever, force)
    threshold = 0.5 * np.abs(tau_push).max()
    obs = MomentumObserver(model, 50.0)  # the node's default gain
    det = CollisionDetector(model, threshold)
    last = np.zeros(7)
    events, max_before = [], [0.0]

    def control(k, q, v):
        r = obs.update(q, v, last, dt)
        if k < push_at:
            max_before[0] = max(max_before[0], float(np.abs(r).max()))
        event = det.update(r, k * dt)
        if event is not None:
            events.append(event)
        if k == push_at:
            plant.d.xfrc_applied[body, :3] = force
        return mapper.map(shaper.apply(q, v, law.compute(q, v, ref, k * dt, False))
                          .tau_active).copy()

    def applied(k, tau):
        last[:] = tau
        return k == push_at + 100

    closed_loop(plant, control, push_at + 100, applied=applied)
    assert len(events) == 1, events
    delay = events[0].time - push_at * dt
    # first-order filter of a step: |r| crosses half the step after ln 2 / K_O = 13.9 ms
    print(f"\npush {force} N at the hand: J^T f = {np.round(tau_push, 2)} N·m, threshold "
          f"{threshold:.2f} N·m; detected {1e3 * delay:.0f} ms after it on {events[0].joints} "
          f"({np.round(events[0].torques, 2)} N·m); max |r| before it {max_before[0]:.2e} N·m")
    assert 0.0 < delay <= 0.020
    assert max_before[0] < 0.05 * threshold  # no false alarm at rest
    # the joints that feel the push most cross first; none that feels less than the threshold
    assert model.dof_names[int(np.argmax(np.abs(tau_push)))] in events[0].joints
    assert set(events[0].joints) <= {model.dof_names[k] for k in
                                     np.flatnonzero(np.abs(tau_push) > threshold)}


def test_observer_on_a_shared_workspace_matches_its_own():
    """The node's observer shares the law's workspace (its all-active dynamics: the law's own
    without passive joints; with some, the shared Workspace's "active" entry): the same r and
    wrench as on its own workspace, with the law's dynamics used in between."""
    from test_observers import trajectory

    from underactuated_control.jacobians import JacobianWorkspace

    for passive in ((), ("joint2", "joint4")):
        model = RobotModel.from_urdf(ARM7, passive_joints=passive)
        ws = JacobianWorkspace(model)
        own = MomentumObserver(model, 50.0, frame="tool")
        shared = MomentumObserver(model, 50.0, frame="tool", shared=ws.shared, jacobians=ws)
        tau = np.linspace(-3.0, 3.0, model.n_active)
        for k in range(50):
            q, v, a = trajectory(model, 1e-3 * k)
            ws.dynamics.set_configuration(q + 0.1)  # the law elsewhere in between
            ws.set_configuration(q - 0.1)
            r0 = own.update(q, v, tau, 1e-3).copy()
            r1 = shared.update(q, v, tau, 1e-3)
            np.testing.assert_allclose(r1, r0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(shared.wrench(), own.wrench(), rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="another model"):
        MomentumObserver(model.with_passive(()), shared=ws.shared)
