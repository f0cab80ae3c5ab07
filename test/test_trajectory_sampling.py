"""control/trajectory_sampling.py against properties the splines guarantee (boundary values,
continuity at the points, finite differences of the sampled position equal the sampled velocity),
closed forms (smoothstep, minimum jerk) and JTC's goal and tolerance rules; ~/joint_reference
and ~/follow_joint_trajectory share its checks and its sampler."""

from types import SimpleNamespace

import numpy as np
import pytest
from helpers import ARM7_PATH

from underactuated_control.control.joint_space import JointReference
from underactuated_control.control.trajectory_sampling import (
    StateTolerance,
    Tolerances,
    TrajectoryError,
    TrajectoryExecution,
    check_trajectory,
    goal_tolerances,
    interpolate,
    peak_speed,
    trajectory_from_message,
    trajectory_rules,
)
from underactuated_control.model import RobotModel

RNG = np.random.default_rng(7)
S = 1_000_000_000  # ns per s


def _dur(t):
    return (int(np.floor(t)), int(round((t - np.floor(t)) * 1e9)))


def make(times, P, V=None, A=None, start_ns=0, now_ns=10 * S, names=("a", "b")):
    n = len(times)
    return check_trajectory(list(names), [_dur(t) for t in times], P,
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
    with pytest.raises(TrajectoryError) as info:
        check_trajectory(**{k: base[k] for k in ("names", "times", "positions", "velocities",
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
    check_trajectory(["a"], [(1, 0)], [[0.0]], [[]], [[]], [[]], active_joints=["a", "b"],
               passive_joints=[], allow_partial=True, allow_nonzero_end_velocity=False,
               start_ns=0, now_ns=0)
    check_trajectory(["a", "b"], [(1, 0)], [[0.0, 0.0]], [[0.0, 0.5]], [[]], [[]],
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
    with pytest.raises(TrajectoryError) as info:
        goal_tolerances(defaults, ["a", "b"], [("a", -0.5, 0, 0)], [], (0, 0))
    assert info.value.code == "INVALID_GOAL" and "path_tolerance[0] ('a') position" in str(
        info.value)
    with pytest.raises(TrajectoryError) as info:
        goal_tolerances(defaults, ["a", "b"], [], [("z", 0.1, 0, 0)], (0, 0))
    assert info.value.code == "INVALID_JOINTS"
    assert goal_tolerances(defaults, ["a", "b"], [], [], (-1, 0)).goal_time == 0.0  # erased
    with pytest.raises(TrajectoryError):
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


# ------------------------------------------------- one sampler for the topic and the action
ACTIVE, PASSIVE = ("a", "b", "c"), ("p",)
MODEL = SimpleNamespace(active_joints=ACTIVE, passive_joints=PASSIVE)
PARAMS = {"allow_partial_joints_goal": False, "allow_nonzero_velocity_at_trajectory_end": False}


def _message(names, points, stamp_ns=0):
    """A trajectory_msgs/JointTrajectory look-alike; points: (t, positions[, velocities[,
    accelerations[, effort]]])."""
    def stamp(ns):
        return SimpleNamespace(sec=ns // S, nanosec=ns % S)

    pts = []
    for t, *fields in points:
        fields = [list(map(float, f)) for f in fields] + [[]] * (4 - len(fields))
        pts.append(SimpleNamespace(time_from_start=stamp(int(round(t * S))),
                                   positions=fields[0], velocities=fields[1],
                                   accelerations=fields[2], effort=fields[3]))
    return SimpleNamespace(joint_names=list(names), points=pts,
                           header=SimpleNamespace(stamp=stamp(stamp_ns)))


def _topic(msg, now_ns=10 * S, params=PARAMS):
    """What hybrid_dynamics_controller's ~/joint_reference callback builds."""
    return trajectory_from_message(msg, now_ns, **trajectory_rules(MODEL, params, topic=True))


def _action(msg, now_ns=10 * S, params=PARAMS):
    """What ~/follow_joint_trajectory's goal check builds."""
    return trajectory_from_message(msg, now_ns, **trajectory_rules(MODEL, params, topic=False),
                                   multi_dof_joints=[], multi_dof_points=0)


def _samples(traj, t_ns, ref0):
    """The law's reference (over ACTIVE) sampled by the controller's cycle at ``t_ns``."""
    ref = JointReference(ref0.position.copy(), ref0.velocity.copy(), ref0.acceleration.copy())
    out = []
    for t in t_ns:
        traj.sample_into(ref, ACTIVE, int(t))
        out.append(np.concatenate([ref.position, ref.velocity, ref.acceleration]))
    return np.array(out)


def _valid_messages():
    P = RNG.normal(size=(4, 3))
    V = RNG.normal(size=(4, 3))
    V[-1] = 0.0
    A = RNG.normal(size=(4, 3))
    times = [0.4, 1.0, 1.7, 2.5]
    return {
        "positions": _message(("c", "a", "b"), [(t, p) for t, p in zip(times, P)]),
        "velocities": _message(ACTIVE, [(t, p, v) for t, p, v in zip(times, P, V)]),
        "accelerations": _message(ACTIVE, [(t, p, v, a) for t, p, v, a in
                                           zip(times, P, V, A)]),
        "mixed": _message(ACTIVE, [(0.4, P[0], V[0], A[0]), (1.0, P[1]), (1.7, P[2], V[2]),
                                   (2.5, P[3], V[3], A[3])]),
        "stamped": _message(ACTIVE, [(t, p, v) for t, p, v in zip(times, P, V)],
                            stamp_ns=11 * S),
        "one point at 0": _message(ACTIVE, [(0.0, P[0])]),
    }


@pytest.mark.parametrize("kind", list(_valid_messages()))
def test_topic_and_action_sample_the_same_message_identically(kind):
    msg = _valid_messages()[kind]
    ref0 = JointReference(RNG.normal(size=3), RNG.normal(size=3), RNG.normal(size=3))
    t_ns = 10 * S + np.linspace(0.0, 4.0, 401) * S
    topic, action = _samples(_topic(msg), t_ns, ref0), _samples(_action(msg), t_ns, ref0)
    np.testing.assert_array_equal(topic, action)
    # and it reaches the last point and holds it
    last = msg.points[-1]
    order = [msg.joint_names.index(n) for n in ACTIVE]
    np.testing.assert_allclose(topic[-1, :3], np.array(last.positions)[order], atol=1e-12)


def _bad_messages():
    ok = [0.0, 0.0, 0.0]
    return {
        "unknown": _message(("a", "b", "x"), [(1.0, ok)]),
        "repeated": _message(("a", "b", "b"), [(1.0, ok)]),
        "missing": _message(("a", "b"), [(1.0, [0.0, 0.0])]),
        "no joints": _message((), [(1.0, [])]),
        "no points": _message(ACTIVE, []),
        "sizes": _message(ACTIVE, [(1.0, [0.0, 0.0])]),
        "not finite": _message(ACTIVE, [(1.0, [0.0, np.inf, 0.0])]),
        "accelerations alone": _message(ACTIVE, [(1.0, ok, [], ok)]),
        "effort": _message(ACTIVE, [(1.0, ok, [], [], [1.0, 1.0, 1.0])]),
        "negative time": _message(ACTIVE, [(-0.5, ok)]),
        "not increasing": _message(ACTIVE, [(1.0, ok), (1.0, ok)]),
        "ends in the past": _message(ACTIVE, [(1.0, ok)], stamp_ns=5 * S),
    }


@pytest.mark.parametrize("kind", list(_bad_messages()))
def test_a_message_refused_by_one_is_refused_by_the_other_for_the_same_reason(kind):
    msg = _bad_messages()[kind]
    with pytest.raises(TrajectoryError) as topic:
        _topic(msg)
    with pytest.raises(TrajectoryError) as action:
        _action(msg)
    assert (topic.value.code, str(topic.value)) == (action.value.code, str(action.value))


def test_the_topics_two_exceptions_and_the_shared_parameters():
    """Streamed setpoints (elbow_redundancy_resolver names every joint, its points move): on
    the topic a moving last point is accepted and a passive joint's entries left out; the
    action refuses both. allow_* parameters apply to both."""
    moving = _message(ACTIVE, [(0.1, [1.0, 2.0, 3.0], [0.5, 0.0, 0.0])])
    assert "'a' is 0.5, not zero" in _refused_message(_action, moving)
    np.testing.assert_array_equal(_topic(moving).velocities, [[0.5, 0.0, 0.0]])
    allowed = dict(PARAMS, allow_nonzero_velocity_at_trajectory_end=True)
    np.testing.assert_array_equal(_action(moving, params=allowed).velocities, [[0.5, 0.0, 0.0]])

    with_passive = _message(("p", "c", "a", "b"), [(0.5, [9.0, 3.0, 1.0, 2.0])])
    assert "'p' is passive" in _refused_message(_action, with_passive)
    without = _message(("c", "a", "b"), [(0.5, [3.0, 1.0, 2.0])])
    ref0 = JointReference(np.zeros(3), np.zeros(3), np.zeros(3))
    t_ns = 10 * S + np.linspace(0.0, 1.0, 51) * S
    np.testing.assert_array_equal(_samples(_topic(with_passive), t_ns, ref0),
                                  _samples(_action(without), t_ns, ref0))
    # a passive joint's entries are still checked (sizes, finite values); none active: refused
    only_passive = _message(("p",), [(1.0, [0.0])])
    partial_ok = dict(PARAMS, allow_partial_joints_goal=True)
    assert "names no active joint" in _refused_message(_topic, only_passive, params=partial_ok)
    assert "'p' is passive" in _refused_message(_action, only_passive, params=partial_ok)
    assert "not finite for joint 'p'" in _refused_message(
        _topic, _message(("p", "a", "b", "c"), [(0.5, [np.nan, 1.0, 2.0, 3.0])]))

    partial = _message(("a", "c"), [(0.5, [1.0, 3.0])])
    for path in (_topic, _action):
        assert "lacks the active joints ['b']" in _refused_message(path, partial)
        traj = path(partial, params=dict(PARAMS, allow_partial_joints_goal=True))
        assert traj.names == ["a", "c"]


def _refused_message(path, msg, **kw):
    with pytest.raises(TrajectoryError) as info:
        path(msg, **kw)
    return str(info.value)


@pytest.mark.parametrize("degree", [1, 3, 5])
def test_the_spline_passes_through_every_point_and_is_smooth_to_its_degree(degree):
    """At each point: its position, and its velocity / acceleration where the degree fixes
    them; from both sides (C0, C1 for cubic, C2 for quintic); and the sampled velocity and
    acceleration are the finite differences of the sampled position and velocity."""
    times = np.array([0.3, 0.9, 1.6, 2.0, 2.8])
    P, V, A = RNG.normal(size=(3, 5, 3))
    V[-1] = 0.0
    fields = [P] + ([V] if degree >= 3 else []) + ([A] if degree == 5 else [])
    msg = _message(ACTIVE, [(t, *(f[k] for f in fields)) for k, t in enumerate(times)])
    traj = _action(msg, now_ns=0)
    traj.begin(0, np.zeros(3), np.zeros(3), np.zeros(3))
    eps = 1e-9
    for k, t in enumerate(times):
        for side in ((-eps, eps) if 0 < k < len(times) - 1 else (eps,)):
            p, v, a = _sampled(traj, [t + side])
            np.testing.assert_allclose(p[0], P[k], atol=1e-6)
            if degree >= 3:
                np.testing.assert_allclose(v[0], V[k], atol=1e-5)
            if degree == 5:
                np.testing.assert_allclose(a[0], A[k], atol=1e-4)
    h = 1e-5
    t = np.linspace(times[0] + 0.01, times[-1] - 0.01, 97)
    p_plus, v_plus, _ = _sampled(traj, t + h)
    p_minus, v_minus, _ = _sampled(traj, t - h)
    near = np.min(np.abs(t[:, None] - times[None]), axis=1) < 2 * h
    _, v, a = _sampled(traj, t)
    np.testing.assert_allclose(((p_plus - p_minus) / (2 * h))[~near], v[~near], atol=1e-5)
    if degree >= 3:
        np.testing.assert_allclose(((v_plus - v_minus) / (2 * h))[~near], a[~near], atol=1e-3)
    if degree == 5:  # C2 across the points: the acceleration's jump vanishes with eps
        left, right = _sampled(traj, times[1:-1] - 1e-7), _sampled(traj, times[1:-1] + 1e-7)
        np.testing.assert_allclose(left[2], right[2], atol=1e-3)


# ------------------------------------------------------------------------- velocity limits
LIMITS = {"a": (1.0, "rad/s"), "b": (2.0, "m/s")}


def _limited(times, P, V=None, A=None, policy="scale", start_state=None, start_ns=0):
    n = len(times)
    return check_trajectory(["a", "b"], [_dur(t) for t in times], P,
                            V if V is not None else [[]] * n, A if A is not None else [[]] * n,
                            [[]] * n, active_joints=["a", "b"], passive_joints=[],
                            allow_partial=False, allow_nonzero_end_velocity=False,
                            start_ns=start_ns, now_ns=10 * S, velocity_limits=LIMITS,
                            velocity_policy=policy, start_state=start_state)


def _dense_peak(traj, t0_ns, samples=20001):
    """Independent of the code's extremum search: the largest |finite difference| of densely
    sampled positions (each equals the velocity somewhere in its interval, so it never
    overstates the peak) and the largest sampled |velocity|."""
    t = np.linspace(t0_ns, t0_ns + (traj.times[-1] + 0.1) * S, samples)
    states = [traj.state_at(int(round(x))) for x in t]
    p = np.array([s.position for s in states])
    v = np.array([s.velocity for s in states])
    dt = np.diff(np.round(t)) * 1e-9
    return np.abs(np.diff(p, axis=0) / dt[:, None]).max(axis=0), np.abs(v).max(axis=0)


@pytest.mark.parametrize("degree", [1, 3, 5])
def test_peak_speed_is_the_densely_sampled_maximum(degree):
    for _ in range(20):
        p0, v0, a0, p1, v1, a1 = RNG.normal(size=(6, 3))
        T = float(RNG.uniform(0.05, 2.0))
        t = np.linspace(0.0, T, 10001)
        dense = np.max([np.abs(interpolate(x, T, p0, v0, a0, p1, v1, a1, degree)[1])
                        for x in t], axis=0)
        np.testing.assert_allclose(peak_speed(T, p0, v0, a0, p1, v1, a1, degree), dense,
                                   rtol=1e-5)


@pytest.mark.parametrize("given", ["positions", "velocities", "accelerations"])
def test_a_fast_trajectory_is_time_scaled_to_the_velocity_limits(given):
    """First point 0.05 s away (JTC accepts it): stretched until the fastest joint's peak
    speed, ramp from a moving start state included, is its limit, and no further; the path
    (the points, in order) is kept, the ramp still starts from the start state."""
    for _ in range(3):
        P = RNG.uniform(-1.0, 1.0, size=(3, 2))
        V = RNG.uniform(-0.5, 0.5, size=(3, 2))
        V[-1] = 0.0
        A = RNG.uniform(-1.0, 1.0, size=(3, 2))
        traj = _limited([0.05, 0.3, 0.6], P.tolist(),
                        V.tolist() if given != "positions" else None,
                        A.tolist() if given == "accelerations" else None)
        t0 = 3 * S
        start = (np.array([0.1, -0.2]), np.array([0.4, -0.9]), np.array([1.0, 0.0]))
        traj.begin(t0, *start)
        assert traj.scale > 1.0 and "time-scaled" in traj.scale_note
        fd_peak, v_peak = _dense_peak(traj, t0)
        lim = np.array([1.0, 2.0])
        assert np.all(fd_peak <= lim * (1 + 1e-6)), (fd_peak, traj.scale)
        assert np.all(v_peak <= lim * (1 + 1e-6)), (v_peak, traj.scale)
        assert np.max(v_peak / lim) > 0.99  # the least stretch: the worst joint at its limit
        s0 = traj.state_at(t0)
        np.testing.assert_allclose(s0.position, start[0], atol=1e-12)
        if given != "positions":  # (a linear ramp starts at its slope)
            np.testing.assert_allclose(s0.velocity, start[1], atol=1e-12)
        for k in range(3):
            np.testing.assert_allclose(traj.state_at(t0 + int(round(traj.times[k] * S))).position,
                                       P[k], atol=1e-9)
        np.testing.assert_allclose(traj.times / traj.times[0], [1.0, 6.0, 12.0])


def _one_point(T, p, v, a, policy="scale"):
    """Joint a's single point ``T`` s ahead (a streamed setpoint, moving), joint b still."""
    return check_trajectory(["a", "b"], [_dur(T)], [[p, 0.0]], [[v, 0.0]], [[a, 0.0]], [[]],
                            active_joints=["a", "b"], passive_joints=[], allow_partial=False,
                            allow_nonzero_end_velocity=True, start_ns=0, now_ns=10 * S,
                            velocity_limits=LIMITS, velocity_policy=policy)


@pytest.mark.parametrize("a0, fits", [(0.52, True), (20.0, False)])
def test_a_ramp_starting_just_under_the_limit_and_accelerating_is_not_stretched_a_thousandfold(
        a0, fits):
    """A streamed point 0.018 s ahead of a start state at 0.9996-0.99999 of joint a's limit
    and still accelerating (a delayed stream, seen over DDS: the resolver's setpoints after a
    stall). Only a narrow band of stretches fits (shorter: too fast; longer: it speeds up
    for longer) or none does; doubling stepped over the band and stretched x1024, an 18 s
    ramp. Now: within the limits when a stretch fits, else the stretch that comes closest,
    judged by dense sampling of fixed stretches (policy ignore), not by the code's search."""
    v0 = 0.9996 if fits else 0.99999
    start = (np.zeros(2), np.array([v0, 0.0]), np.array([a0, 0.0]))
    t0 = 10 * S
    traj = _one_point(0.018, 0.0756, 0.433, 0.54)
    traj.begin(t0, *start)
    assert 1.0 < traj.scale < 20.0, traj.scale_note
    peak = _dense_peak(traj, t0)[1][0]
    if fits:
        assert 0.99 < peak <= 1.0 + 1e-6 and "comes closest" not in traj.scale_note
    else:
        assert "comes closest" in traj.scale_note
        others = []
        for s in (1.0, 2.0, 5.0, 20.0, 100.0, 1000.0):
            fixed = _one_point(0.018 * s, 0.0756, 0.433 / s, 0.54 / s**2, policy="ignore")
            fixed.begin(t0, *start)
            others.append(_dense_peak(fixed, t0)[1][0])
        assert 1.0 < peak <= min(others) * (1 + 1e-3), (peak, others)
    assert "0.0756 rad from the start state" in traj.scale_note


def test_a_joint_already_past_its_limit_at_the_start_is_not_called_time_scaled():
    """Joint a starts at 1.05 of its limit (no stretch can slow it there: left out of the
    ramp's test) and joint b needs nothing: no stretch, and no note saying "time-scaled x1"
    (logged over DDS for such streamed points before)."""
    traj = _one_point(0.1, 0.105, 1.0, 0.0)
    traj.begin(10 * S, np.zeros(2), np.array([1.05, 0.0]), np.zeros(2))
    assert _dense_peak(traj, 10 * S)[1][0] > 1.0  # the premise: the ramp is past the limit
    assert traj.scale == 1.0 and traj.scale_note == ""


def test_a_slow_trajectory_and_the_ignore_policy_are_not_scaled():
    P = [[0.1, 0.2], [0.2, 0.1]]
    slow = _limited([1.0, 2.0], P)
    slow.begin(0, np.zeros(2), np.zeros(2), np.zeros(2))
    assert slow.scale == 1.0 and slow.scale_note == ""
    np.testing.assert_allclose(slow.times, [1.0, 2.0])
    fast = _limited([0.05, 0.1], [[1.0, 0.0], [1.0, 0.0]], policy="ignore")
    fast.begin(0, np.zeros(2), np.zeros(2), np.zeros(2))
    assert fast.scale == 1.0
    assert _dense_peak(fast, 0)[1][0] == pytest.approx(1.0 / 0.05, rel=1e-3)  # 20 rad/s as given


def test_the_reject_policy_names_the_joint_and_the_speed_it_needs():
    # positions only: a linear ramp from the start; joint b needs 0.5 m / 0.05 s = 10 m/s
    with pytest.raises(TrajectoryError) as exc:
        _limited([0.05, 1.0], [[0.02, 0.5], [0.0, 0.5]], policy="reject",
                 start_state={"a": (0.0, 0.0, 0.0), "b": (0.0, 0.0, 0.0)})
    assert exc.value.code == "INVALID_GOAL"
    assert "joint 'b' would need 10 m/s" in str(exc.value)
    assert "URDF velocity limit 2 m/s" in str(exc.value)
    # between the points (no start state needed): rest-to-rest cubic, 1.5 · 0.3 / 0.1 = 4.5
    with pytest.raises(TrajectoryError, match="joint 'a' would need 4.5 rad/s"):
        _limited([1.0, 1.1], [[0.0, 0.0], [0.3, 0.0]], [[0.0, 0.0], [0.0, 0.0]],
                 policy="reject")
    ok = _limited([1.0, 2.0], [[0.1, 0.5], [0.0, 0.5]], policy="reject",
                  start_state={"a": (0.0, 0.0, 0.0), "b": (0.0, 0.0, 0.0)})
    assert ok.velocity_limits.policy == "reject"


def test_the_rules_take_the_urdf_limits_and_the_parameter():
    model = RobotModel.from_urdf(ARM7_PATH, passive_joints=["joint4"])
    params = dict(PARAMS, trajectory_velocity_limits="reject")
    rules = trajectory_rules(model, params, topic=False)
    assert rules["velocity_policy"] == "reject"
    assert set(rules["velocity_limits"]) == set(model.active_joints)  # not the passive joint4
    assert rules["velocity_limits"]["joint1"] == (2.5, "rad/s")  # <limit velocity="2.5"/>
    assert trajectory_rules(model, PARAMS, topic=True)["velocity_policy"] == "scale"  # default
