"""Setpoint limits of the resolver (redundancy/limits.py), without ROS: the bounds are the
URDF's own numbers (read with ElementTree), reach against Pinocchio's kinematics."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
from helpers import ROOT

from underactuated_control import RobotModel
from underactuated_control.redundancy.arm_angle import ArmAngle
from underactuated_control.redundancy.configuration_control import (
    ConfigurationControl,
    ConfigurationTrajectory,
)
from underactuated_control.redundancy.functions import ArmAngleFunction, JointLimitAvoidance
from underactuated_control.redundancy.limits import SetpointLimiter, plan_motion, reach

ARM7 = ROOT / "urdf/arm7.urdf"
NAMES = [f"joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


def urdf_limits():
    root = ET.parse(ARM7).getroot()
    lim = {j.get("name"): j.find("limit") for j in root.findall("joint")}
    return (np.array([float(lim[n].get(k)) for n in NAMES]) for k in ("lower", "upper",
                                                                       "velocity"))


LOWER, UPPER, VELOCITY = urdf_limits()


@pytest.fixture(scope="module")
def arm():
    return RobotModel.from_urdf(ARM7.read_text(), tip_link="tool")


@pytest.mark.parametrize("acceleration,dt", [(10.0, 0.01), (0.5, 0.01), (1000.0, 0.05),
                                             (10.0, 0.002)])
def test_limiter_keeps_every_bound_under_random_requests(arm, acceleration, dt):
    """Requests from tiny to 1e3 rad per sample, changing direction every 200 samples,
    pressing the joints against their limits: positions, velocities and accelerations stay
    inside the bounds (accelerations to rounding), and the position clamp never cuts in."""
    rng = np.random.default_rng(7)
    lim = SetpointLimiter(arm, acceleration)
    q, v = Q0.copy(), np.zeros(7)
    pressed = 0
    for k in range(6000):
        if k % 200 == 0:
            direction = rng.normal(size=7) * 10 ** rng.uniform(-3, 3)
        step = lim.step(q, v, direction * dt * rng.uniform(0.5, 1.5), dt)
        assert np.all(step.q >= LOWER) and np.all(step.q <= UPPER)
        assert np.all(np.abs(step.v) <= VELOCITY * (1 + 1e-12))
        assert np.abs(step.a).max() <= acceleration * (1 + 1e-6)
        assert np.allclose(step.v, (step.q - q) / dt) and np.allclose(step.a, (step.v - v) / dt)
        pressed += bool(step.at_limit)
        q, v = step.q, step.v
    assert pressed > 0  # the test did reach the limits


def test_limiter_scales_a_feasible_request_along_its_direction(arm):
    lim = SetpointLimiter(arm, 10.0)
    dt = 0.01
    dq = np.array([0.3, -0.1, 0.2, 0.05, 0.0, -0.2, 0.1]) * dt * 100  # 30 rad/s asked
    v = dq / dt / np.abs(dq / dt).max() * 2.45  # already moving that way near the limit
    step = lim.step(Q0, v, dq, dt)
    assert not step.clipped and 0 < step.scale < 1
    assert np.allclose(step.v, step.scale * dq / dt, rtol=0, atol=1e-12)  # same direction
    assert np.abs(step.v).max() == pytest.approx(2.5)  # as fast as the fastest joint may go
    assert lim.step(Q0, np.zeros(7), dq * 1e-4, dt).scale == 1.0  # a small one is untouched
    with pytest.raises(ValueError, match="non-finite step for \\['joint3'\\]"):
        lim.step(Q0, np.zeros(7), np.array([0, 0, np.nan, 0, 0, 0, 0]), dt)


def test_reach_bounds_the_tip_distance(arm):
    """No sampled configuration (not even outside the limits) puts the tool farther from
    joint1's origin than the bound; the bound is not loose by more than the elbow offsets."""
    point, radius = reach(arm, "tool")
    pm = pin.buildModelFromUrdf(str(ARM7))
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, pin.neutral(pm))
    assert np.allclose(point, pd.oMi[1].translation)
    rng = np.random.default_rng(0)
    far = 0.0
    for _ in range(5000):
        pin.framesForwardKinematics(pm, pd, rng.uniform(-np.pi, np.pi, 7))
        far = max(far, np.linalg.norm(pd.oMf[pm.getFrameId("tool")].translation - point))
    print(f"\n[reach] arm7 tool: bound {radius:.3f} m, farthest sampled {far:.3f} m")
    assert far <= radius and radius < 1.25 * far


def test_arm_angle_goal_takes_the_short_way_round():
    R = np.eye(3)
    p = np.zeros(3)
    traj = ConfigurationTrajectory(p, R, math.radians(170), p, R, math.radians(-170), 1.0)
    psi_mid = traj(0.5)[2]
    assert abs(abs(math.degrees(psi_mid)) - 180) < 1e-9  # through 180°, not through 0°
    with pytest.raises(ValueError, match="finite"):
        ConfigurationTrajectory(p, R, 0.0, p, R, float("nan"), 1.0)


def _controller(arm):
    psi = ArmAngle(arm, "link2", "link4", "link6")
    cc = ConfigurationControl(arm, "tool", [ArmAngleFunction(psi), JointLimitAvoidance(arm)],
                              task_weights=16.0)
    return cc, psi


def test_plan_stretches_a_fast_goal_and_the_run_keeps_the_limits(arm):
    """A 30° elbow swing asked in 0.05 s: the plan's duration, run sample by sample at
    100 Hz through the limiter, needs no clock slow-down and reaches the goal."""
    cc, psi = _controller(arm)
    lim = SetpointLimiter(arm, 10.0)
    cc.workspace.set_configuration(Q0)
    p0, R0 = cc.workspace.frame_placement("tool")
    psi0 = psi.evaluate(Q0).psi
    goal = (p0, R0, psi0 + math.radians(30))
    plan = plan_motion(cc, lim, Q0, (p0, R0, psi0), goal, 0.05)
    assert plan.reached and plan.duration > 0.5
    traj = ConfigurationTrajectory(p0, R0, psi0, *goal, plan.duration)
    q, v, t, dt = Q0.copy(), np.zeros(7), 0.0, 0.01
    v_peak = 0.0
    for _ in range(int(plan.duration / dt) + 30):
        p_d, R_d, psi_d = traj(t + dt)
        step = lim.step(q, v, cc.step(q, (p_d, R_d), {"arm_angle": psi_d}).q_next - q, dt)
        assert step.scale == 1.0 and not step.clipped
        t += dt
        q, v = step.q, step.v
        v_peak = max(v_peak, np.abs(v).max())
    print(f"\n[plan] 30° swing in 0.05 s asked -> {plan.duration:.2f} s, peak joint speed "
          f"{v_peak:.2f} rad/s (limit 2.5)")
    assert v_peak <= 2.5
    assert abs(math.degrees(psi.evaluate(q).psi - goal[2])) < 0.01


def test_plan_reports_a_goal_outside_the_workspace(arm):
    cc, psi = _controller(arm)
    lim = SetpointLimiter(arm, 10.0)
    cc.workspace.set_configuration(Q0)
    p0, R0 = cc.workspace.frame_placement("tool")
    psi0 = psi.evaluate(Q0).psi
    target = np.array([0.95, 0.0, 0.633])  # inside the reach bound, outside the workspace
    assert np.linalg.norm(target - reach(arm, "tool")[0]) < reach(arm, "tool")[1]
    plan = plan_motion(cc, lim, Q0, (p0, R0, psi0), (target, R0, psi0), 3.0)
    assert not plan.reached and plan.position_error > 0.01
    assert np.all(plan.q_end >= LOWER) and np.all(plan.q_end <= UPPER)
