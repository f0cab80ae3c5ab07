"""control/trajectory_sampling.py against properties the splines guarantee (boundary values,
continuity at the points, finite differences of the sampled position equal the sampled velocity),
closed forms (smoothstep, minimum jerk) and JTC's goal and tolerance rules."""

import numpy as np
import pytest

from underactuated_control.control.joint_space import JointReference
from underactuated_control.control.trajectory_sampling import (
    GoalError,
    StateTolerance,
    Tolerances,
    TrajectoryExecution,
    check_goal,
    goal_tolerances,
    interpolate,
)

RNG = np.random.default_rng(7)
S = 1_000_000_000  # ns per s


def _dur(t):
    return (int(np.floor(t)), int(round((t - np.floor(t)) * 1e9)))


def make(times, P, V=None, A=None, start_ns=0, now_ns=10 * S, names=("a", "b")):
    n = len(times)
    return check_goal(list(names), [_dur(t) for t in times], P,
                      V if V is not None else [[]] * n, A if A is not None else [[]] * n,
                      [[]] * n, active_joints=list(names), passive_joints=[],
                      allow_partial=False, allow_nonzero_end_velocity=False,
                      start_ns=start_ns, now_ns=now_ns)


@pytest.mark.parametrize("degree", [1, 3, 5])
def test_boundary_values_are_met(degree):
    p0, v0, a0, p1, v1, a1 = RNG.normal(size=(6, 4))
    T = 0.7
    for t, (p, v, a) in ((0.0, (p0, v0, a0)), (T, (p1, v1, a1))):
        ps, vs, as_ = interpolate(t, T, p0, v0, a0, p1, v1, a1, degree)
        np.testing.assert_allclose(ps, p, atol=1e-12)
        if degree >= 3:
            np.testing.assert_allclose(vs, v, atol=1e-11)
        if degree == 5:
            np.testing.assert_allclose(as_, a, atol=1e-10)


def test_closed_forms_smoothstep_and_minimum_jerk():
    """Rest-to-rest: the cubic is p0 + Δp (3s² - 2s³), the quintic the minimum-jerk
    p0 + Δp (10s³ - 15s⁴ + 6s⁵), s = t/T."""
    p0, p1, z = np.array([0.3]), np.array([-1.1]), np.zeros(1)
    T = 2.0
    for t in np.linspace(0, T, 9):
        s = t / T
        cubic = interpolate(t, T, p0, z, z, p1, z, z, 3)[0]
        quintic = interpolate(t, T, p0, z, z, p1, z, z, 5)[0]
        np.testing.assert_allclose(cubic, p0 + (p1 - p0) * (3 * s**2 - 2 * s**3), atol=1e-12)
        np.testing.assert_allclose(quintic, p0 + (p1 - p0) * (10 * s**3 - 15 * s**4 + 6 * s**5),
                                   atol=1e-12)


def _sampled(traj, t_s):
    out = [traj.sample(int(round(t * S))) for t in t_s]
    return (np.array([s.position for s in out]), np.array([s.velocity for s in out]),
            np.array([s.acceleration for s in out]))


@pytest.mark.parametrize("given", ["positions", "velocities", "accelerations"])
def test_finite_differences_and_continuity(given):
    """d/dt of the sampled position is the sampled velocity (and of the velocity the
    acceleration, for cubic and quintic); across each point the sample is continuous to the
    order the points fix."""
    times = [0.5, 1.2, 2.0, 2.6]
    P = RNG.normal(size=(4, 2)).tolist()
    V = RNG.normal(size=(4, 2))
    V[-1] = 0.0
    A = RNG.normal(size=(4, 2)).tolist()
    traj = make(times, P, V.tolist() if given != "positions" else None,
                A if given == "accelerations" else None)
    traj.begin(0, np.array([0.1, -0.2]), np.array([0.0, 0.3]), np.array([0.5, 0.0]))
    h = 1e-6
    t = np.concatenate([np.linspace(0.01, 2.59, 157)])
    t = t[np.min(np.abs(t[:, None] - np.array([0.0] + times)[None]), axis=1) > 1e-3]
    p_plus, v_plus, _ = _sampled(traj, t + h)
    p_minus, v_minus, _ = _sampled(traj, t - h)
    _, v, a = _sampled(traj, t)
    np.testing.assert_allclose((p_plus - p_minus) / (2 * h), v, atol=2e-4)
    if given != "positions":
        np.testing.assert_allclose((v_plus - v_minus) / (2 * h), a, atol=2e-3)
    else:
        assert np.all(a == 0.0)
    # continuity at the points (from the left and the right)
    eps = 1e-7
    for tk in times[:-1]:
        left, right = _sampled(traj, [tk - eps]), _sampled(traj, [tk + eps])
        np.testing.assert_allclose(left[0], right[0], atol=1e-5)
        if given != "positions":
            np.testing.assert_allclose(left[1], right[1], atol=1e-4)
        if given == "accelerations":
            np.testing.assert_allclose(left[2], right[2], atol=1e-3)


def test_starts_from_the_begin_state_reaches_the_points_then_holds():
    P = [[1.0, 2.0], [1.5, 2.5]]
    traj = make([1.0, 2.0], P, [[0.2, 0.1], [0.0, 0.0]], start_ns=0)
    p0, v0 = np.array([0.0, 0.5]), np.array([0.3, -0.1])
    traj.begin(0, p0, v0, np.zeros(2))
    s = traj.sample(0)
    np.testing.assert_allclose(s.position, p0)
    np.testing.assert_allclose(s.velocity, v0, atol=1e-12)
    assert s.index == 0 and s.before_last_point
    s = traj.sample(1 * S)
    np.testing.assert_allclose(s.position, P[0], atol=1e-12)
    assert s.index == 1
    s = traj.sample(5 * S)
    np.testing.assert_allclose(s.position, P[1])
    np.testing.assert_allclose(s.velocity, 0.0)
    assert s.index == 2 and not s.before_last_point
    assert s.time_past_segment == pytest.approx(3.0)


def test_sample_into_maps_names_to_the_active_order():
    traj = make([1.0], [[1.0, 2.0]], names=("b", "a"))
    ref = JointReference(np.array([10.0, 20.0, 30.0]), np.zeros(3), np.zeros(3))
    traj.sample_into(ref, ["a", "c", "b"], 0)  # start: the reference itself
    np.testing.assert_allclose(ref.position, [10.0, 20.0, 30.0])
    traj.sample_into(ref, ["a", "c", "b"], 2 * S)
    np.testing.assert_allclose(ref.position, [2.0, 20.0, 1.0])  # 'c' untouched


def _refused(code, **kw):
    base = dict(names=["a", "b"], times=[(1, 0)], positions=[[0.0, 0.0]], velocities=[[]],
                accelerations=[[]], efforts=[[]], active_joints=["a", "b"],
                passive_joints=["p"], allow_partial=False, allow_nonzero_end_velocity=False,
                start_ns=0, now_ns=10 * S)
    base.update(kw)
    with pytest.raises(GoalError) as info:
        check_goal(**{k: base[k] for k in ("names", "times", "positions", "velocities",
                                           "accelerations", "efforts")},
                   **{k: v for k, v in base.items() if k not in (
                       "names", "times", "positions", "velocities", "accelerations",
                       "efforts")})
    assert info.value.code == code
    return str(info.value)


def test_goal_rules_and_their_codes():
    assert "'p' is passive" in _refused("INVALID_JOINTS", names=["a", "p"])
    assert "'x' is not a joint" in _refused("INVALID_JOINTS", names=["a", "x"])
    assert "lacks the active joints ['b']" in _refused("INVALID_JOINTS", names=["a"],
                                                       positions=[[0.0]])
    assert "repeats" in _refused("INVALID_JOINTS", names=["a", "a"])
    assert "empty" in _refused("INVALID_JOINTS", names=[])
    assert "multi_dof" in _refused("INVALID_JOINTS", multi_dof_joints=["base"])
    assert "points is empty" in _refused("INVALID_GOAL", times=[], positions=[],
                                         velocities=[], accelerations=[], efforts=[])
    assert "points[1] at 1 s" in _refused(
        "INVALID_GOAL", times=[(1, 0), (1, 0)], positions=[[0, 0], [1, 1]],
        velocities=[[], []], accelerations=[[], []], efforts=[[], []])
    assert "points[0].positions has 1 values" in _refused("INVALID_GOAL", positions=[[0.0]])
    assert "not finite" in _refused("INVALID_GOAL", positions=[[0.0, float("nan")]])
    assert "'b' is 0.5" in _refused("INVALID_GOAL", velocities=[[0.0, 0.5]])
    assert "accelerations but no velocities" in _refused("INVALID_GOAL",
                                                         accelerations=[[0.0, 0.0]])
    assert "effort" in _refused("INVALID_GOAL", efforts=[[1.0, 1.0]])
    assert "ends in the past" in _refused("OLD_HEADER_TIMESTAMP", start_ns=5 * S,
                                          now_ns=7 * S)
    # partial goals when allowed, non-zero end velocity when allowed
    check_goal(["a"], [(1, 0)], [[0.0]], [[]], [[]], [[]], active_joints=["a", "b"],
               passive_joints=[], allow_partial=True, allow_nonzero_end_velocity=False,
               start_ns=0, now_ns=0)
    check_goal(["a", "b"], [(1, 0)], [[0.0, 0.0]], [[0.0, 0.5]], [[]], [[]],
               active_joints=["a", "b"], passive_joints=[], allow_partial=False,
               allow_nonzero_end_velocity=True, start_ns=0, now_ns=0)


def test_goal_tolerances_default_replace_erase_refuse():
    defaults = Tolerances(StateTolerance(np.array([0.1, 0.2]), np.zeros(2), np.zeros(2)),
                          StateTolerance(np.array([0.01, 0.02]), np.full(2, 0.05), np.zeros(2)),
                          1.0)
    tol = goal_tolerances(defaults, ["a", "b"], [("b", 0.5, 0.0, 0.0)],
                          [("a", -1.0, 0.0, 0.0)], (0, 0))
    np.testing.assert_allclose(tol.path.position, [0.1, 0.5])  # 0 keeps, > 0 replaces
    np.testing.assert_allclose(tol.goal.position, [0.0, 0.02])  # -1 erases
    np.testing.assert_allclose(tol.goal.velocity, [0.05, 0.05])
    assert tol.goal_time == 1.0
    assert goal_tolerances(defaults, ["a", "b"], [], [], (2, 500_000_000)).goal_time == 2.5
    with pytest.raises(GoalError) as info:
        goal_tolerances(defaults, ["a", "b"], [("a", -0.5, 0, 0)], [], (0, 0))
    assert info.value.code == "INVALID_GOAL" and "path_tolerance[0] ('a') position" in str(
        info.value)
    with pytest.raises(GoalError) as info:
        goal_tolerances(defaults, ["a", "b"], [], [("z", 0.1, 0, 0)], (0, 0))
    assert info.value.code == "INVALID_JOINTS"
    assert goal_tolerances(defaults, ["a", "b"], [], [], (-1, 0)).goal_time == 0.0  # erased
    with pytest.raises(GoalError):
        goal_tolerances(defaults, ["a", "b"], [], [], (-2, 0))


def test_execution_outcomes():
    tol = Tolerances(StateTolerance(np.array([0.1, 0.1]), np.zeros(2), np.zeros(2)),
                     StateTolerance(np.array([0.01, 0.01]), np.full(2, 0.05), np.zeros(2)),
                     0.5)
    traj = make([1.0], [[1.0, 1.0]])
    traj.begin(0, np.zeros(2), np.zeros(2), np.zeros(2))
    z = np.zeros(2)

    def judge(t, measured, velocity=z, ex=None):
        ex = ex or TrajectoryExecution(["a", "b"], tol)
        s = traj.sample(int(t * S))
        return ex.update(s, s.position, s.velocity, np.asarray(measured), velocity)

    moving = TrajectoryExecution(["a", "b"], tol)
    assert judge(0.0, [0.0, 0.0], ex=moving) is None
    s = traj.sample(int(0.5 * S))
    code, msg = moving.update(s, s.position, s.velocity, s.position + [0.0, 0.2], s.velocity)
    assert code == "PATH_TOLERANCE_VIOLATED" and "'b' position" in msg
    assert judge(1.2, [1.0, 1.005])[0] == "SUCCESSFUL"
    assert judge(1.2, [1.0, 1.0], velocity=np.array([0.1, 0.0])) is None  # still moving
    assert judge(1.4, [1.0, 1.05]) is None  # within goal_time
    code, msg = judge(1.6, [1.0, 1.05])
    assert code == "GOAL_TOLERANCE_VIOLATED" and "goal_time_tolerance 0.5 s" in msg
    tol.goal_time = 0.0  # wait for ever
    assert judge(100.0, [1.0, 1.05]) is None
