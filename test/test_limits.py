"""Limits the laws respect (control/limits.py): the task setpoint approaches any goal within its
speed and acceleration bounds and stops on it; the joint-limit guard stops joints before their
URDF limits whatever acceleration is asked."""

import numpy as np
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.control.limits import JointLimitGuard, PoseSetpointFollower
from underactuated_control.control.task_space import TaskReference
from underactuated_control.so3 import exp, rotation_angle


def test_setpoint_reaches_a_far_goal_within_its_bounds():
    v_max, a_max, w_max, al_max, dt = 0.5, 2.0, 1.5, 6.0, 1e-3
    follower = PoseSetpointFollower(v_max, a_max, w_max, al_max)
    follower.reset(np.zeros(3), np.eye(3))
    goal = TaskReference(position=np.array([3.0, -1.0, 0.5]),
                         rotation=exp(np.array([0.0, 2.5, 0.0])))
    distance = np.linalg.norm(goal.position)
    previous_v, previous_w = np.zeros(3), np.zeros(3)
    for _ in range(20000):
        sp = follower.step(goal, dt)
        assert np.linalg.norm(sp.linear_velocity) <= v_max * (1 + 1e-9)
        assert np.linalg.norm(sp.angular_velocity) <= w_max * (1 + 1e-9)
        assert np.linalg.norm(sp.linear_velocity - previous_v) <= a_max * dt * (1 + 1e-9)
        assert np.linalg.norm(sp.angular_velocity - previous_w) <= al_max * dt * (1 + 1e-9)
        previous_v, previous_w = sp.linear_velocity.copy(), sp.angular_velocity.copy()
    # a straight line at bounded speed: no faster than distance / v_max, and it arrives
    assert np.linalg.norm(sp.position - goal.position) < 1e-3
    assert rotation_angle(sp.rotation.T @ goal.rotation) < 1e-3
    assert np.linalg.norm(sp.linear_velocity) < 1e-2 and distance / v_max < 20000 * dt


def test_guard_stops_joints_before_their_limits():
    model = RobotModel.from_urdf(ARM7_PATH, passive_joints=["joint2"])
    guard = JointLimitGuard(model, braking=10.0)
    q = np.array([0.0, -0.3, 0.0, -1.0, 0.0, 1.5, 0.0])
    v = np.zeros(7)
    dt = 1e-3
    a = model.active_dofs
    push = np.full(len(a), 50.0)  # 50 rad/s² toward every upper limit, forever
    upper = model.position_upper[a]
    for _ in range(5000):
        qdd = guard.clamp(q, v, push)
        v[a] += qdd * dt
        q[a] += v[a] * dt
        assert np.all(q[a] <= upper + 1e-3), (q[a], upper)
    assert guard.active.all()  # every joint braking at its limit
    assert np.all(np.abs(v[a]) < 1e-2) and np.all(upper - q[a] < 2e-2)
    lo, hi = guard.bounds(np.array([0.0, -0.3, 0.0, -1.0, 0.0, 1.5, 0.0]), np.zeros(7))
    assert np.all(hi > 20) and np.all(lo < -20)  # far from the limits: no effect on a task
