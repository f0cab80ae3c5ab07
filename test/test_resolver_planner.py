"""The elbow resolver's planner (``redundancy.resolver.ElbowPlanner``) in-process, no ROS:
the same closed paths as ``test/ros/test_resolver_cyclicity.py`` (Seraji §3.1, FIG. 6: a closed
task-space cycle returns every joint to where it started), goals refused with their reason,
goals reached within the planned time inside the URDF's limits, the running goal's anchors
carried over a rebuild. The robot is an ideal (or lagging) position servo; results are judged
with Pinocchio's forward kinematics of the same URDF and the URDF's own numbers."""

import math
import threading
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.redundancy.arm_angle import arm_angle_from_points
from underactuated_control.redundancy.limits import LimitedStep
from underactuated_control.redundancy.resolver import (
    FOLLOW_TOLERANCE,
    FOLLOW_WINDOW,
    OVERRUN,
    OVERRUN_MARGIN,
    SETTLE_HOLD,
    STALL_PACE,
    STALL_WINDOW,
    Anchors,
    ElbowPlanner,
    FollowingCheck,
    Settings,
    Waypoint,
)

Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
NAMES = [f"joint{i}" for i in range(1, 8)]
LINKS = ("link2", "link4", "link6")
DT = 0.01  # s: 100 Hz, the node's default rate
ACCELERATION = 10.0  # rad/s², Settings' default acceleration_limit
PM = pin.buildModelFromUrdf(str(ARM7_PATH))
PD = PM.createData()


def urdf_limits():
    """lower, upper, velocity of joint1..7 from the URDF text."""
    root = ET.parse(ARM7_PATH).getroot()
    lim = {j.get("name"): j.find("limit") for j in root.findall("joint")}
    return (np.array([float(lim[n].get(k)) for n in NAMES]) for k in ("lower", "upper",
                                                                       "velocity"))


LOWER, UPPER, VELOCITY = urdf_limits()


def fk(q):
    """Pinocchio: hand position, rotation and arm angle ψ of q."""
    pin.framesForwardKinematics(PM, PD, np.asarray(q, dtype=float))
    pos = {n: PD.oMf[PM.getFrameId(n)].translation.copy() for n in LINKS}
    tool = PD.oMf[PM.getFrameId("tool")]
    return tool.translation.copy(), tool.rotation.copy(), arm_angle_from_points(
        pos["link2"], pos["link4"], pos["link6"])


def wrap(x):
    return (x + np.pi) % (2 * np.pi) - np.pi


@pytest.fixture(scope="module")
def model():
    return RobotModel.from_urdf(ARM7_PATH, tip_link="tool")


def make(model, **settings) -> ElbowPlanner:
    return ElbowPlanner(model, "tool", LINKS, Settings(**settings))


class Servo:
    """A position servo: each setpoint moves the joints by ``follow`` of the way there."""

    def __init__(self, planner: ElbowPlanner, q=Q0, follow: float = 1.0) -> None:
        self.planner, self.follow = planner, follow
        self.q = np.array(q, dtype=float)
        self.setpoints = []  # (q, v, a) of every sample

    def run(self, seconds: float, until_arrival: bool = False):
        """Step for up to ``seconds`` (or until a goal's arrival); the arrival or None."""
        for _ in range(round(seconds / DT)):
            sp = self.planner.step(self.q, DT)
            if sp is None:
                return None
            self.setpoints.append((sp.q.copy(), sp.v.copy(), sp.a.copy()))
            self.q = self.q + self.follow * (sp.q - self.q)
            if until_arrival and sp.arrival is not None:
                return sp.arrival
        return None

    def settle(self, seconds: float) -> None:
        """Step until the setpoints stop changing (or ``seconds``)."""
        for _ in range(round(seconds / 0.5)):
            last = self.q.copy()
            self.run(0.5)
            if np.abs(self.q - last).max() < 1e-7:
                return

    def start(self, *waypoints: Waypoint):
        result = self.planner.start(list(waypoints), self.q)
        assert result.accepted, result.reason
        return result.plan


def triangle(p0, psi0):
    """Seraji's FIG. 6 triangle: hand p0 -> P1 -> P2 -> p0, ψ0 -> ψ0 - 90° -> ψ0 + 45° -> ψ0."""
    P1, P2 = p0 + np.array([0.1, 0.1, 0.1]), p0 + np.array([-0.1, 0.1, 0.1])
    return [(P1, psi0 + np.radians(-90)), (P2, psi0 + np.radians(45)), (p0, psi0)]


def check_inside_limits(points):
    """Every setpoint finite, inside the URDF position and velocity limits and the
    acceleration bound."""
    q, v, a = (np.array([p[k] for p in points]) for k in range(3))
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.all(np.isfinite(a))
    assert np.all(q >= LOWER - 1e-12) and np.all(q <= UPPER + 1e-12)
    assert np.all(np.abs(v) <= VELOCITY * (1 + 1e-9)), np.abs(v).max(axis=0)
    assert np.abs(a).max() <= ACCELERATION * (1 + 1e-6), np.abs(a).max()


def test_triangle_waypoints_return_the_joints(model):
    servo = Servo(make(model))
    p0, R0, psi0 = fk(Q0)
    servo.start(*(Waypoint((P, R0), float(wrap(psi)), 2.0) for P, psi in triangle(p0, psi0)))
    arrival = servo.run(60.0, until_arrival=True)
    assert arrival is not None and arrival.reached, arrival
    servo.settle(5.0)
    p, R, psi = fk(servo.q)
    back = np.abs(servo.q - Q0).max()
    print(f"\n[planner cyclicity] triangle of waypoints in-process: joints back within "
          f"{back:.2e} rad after {len(servo.setpoints)} setpoints")
    assert np.linalg.norm(p - p0) < 1e-3 and np.abs(R - R0).max() < 1e-3
    assert abs(wrap(psi - psi0)) < np.radians(0.5)
    assert back < 2e-3 and len(servo.setpoints) > 500
    check_inside_limits(servo.setpoints)


def test_triangle_of_single_goals_returns_the_joints(model):
    planner = make(model)
    servo = Servo(planner)
    p0, R0, psi0 = fk(Q0)
    moved = 0.0
    for P, psi in triangle(p0, psi0):
        servo.start(Waypoint((P, R0), float(wrap(psi)), 2.0))
        arrival = servo.run(60.0, until_arrival=True)
        assert arrival is not None and arrival.reached, arrival
        servo.settle(3.0)
        p, _, psi_now = fk(servo.q)  # each corner reached (Pinocchio)
        assert np.linalg.norm(p - P) < 1e-3 and abs(wrap(psi_now - psi)) < np.radians(0.5)
        moved = max(moved, np.abs(servo.q - Q0).max())
    p, R, psi = fk(servo.q)
    back = np.abs(servo.q - Q0).max()
    print(f"\n[planner cyclicity] triangle of single goals in-process: joints moved up to "
          f"{moved:.2f} rad and came back within {back:.2e} rad")
    assert moved > 0.3
    assert np.linalg.norm(p - p0) < 1e-3 and abs(wrap(psi - psi0)) < np.radians(0.5)
    assert back < 2e-3


def test_goals_out_of_reach_are_refused_with_the_reason(model):
    planner = make(model)
    p0, R0, psi0 = fk(Q0)
    far = Waypoint((p0 + np.array([3.0, 0.0, 0.0]), R0), psi0, 1.0)
    result = planner.start([Waypoint((p0, R0), psi0, 1.0), far], Q0)
    assert not result.accepted and result.waypoint == 1
    assert "beyond the reach" in result.reason and "the target is 3." in result.reason
    assert planner.motion is None  # nothing runs
    # within the sum of the link lengths but outside the workspace: the dry run does not get
    # there; a running goal goes on untouched
    servo = Servo(planner)
    servo.start(Waypoint(None, psi0 + np.radians(10), 0.5))
    motion, anchors = planner.motion, Anchors.of(planner.config.control)
    result = planner.start([Waypoint((np.array([0.95, 0.0, 0.633]), R0), None, 1.0)], servo.q)
    assert not result.accepted and result.waypoint == 0
    assert result.reason.startswith("the planned motion ends")
    assert planner.motion is motion
    assert Anchors.of(planner.config.control).rest is anchors.rest


def test_a_goal_is_reached_within_its_planned_time(model):
    """A 20° elbow swing with the hand held: the clock runs out after the planned duration
    (no sample limited), and the setpoint's forward kinematics is the commanded pose."""
    servo = Servo(make(model))
    p0, R0, psi0 = fk(Q0)
    target = psi0 + np.radians(20)
    plan = servo.start(Waypoint((p0, R0), target, 1.5))
    assert plan.stretched == [] and plan.segments[-1].duration == 1.5
    arrival = servo.run(1.5 + 5 * DT, until_arrival=True)
    assert arrival is not None and arrival.reached
    assert len(servo.setpoints) <= round(1.5 / DT) + 3
    p, R, psi = fk(servo.setpoints[-1][0])
    assert np.linalg.norm(p - p0) < 1e-3 and np.abs(R - R0).max() < 1e-3
    assert abs(wrap(psi - target)) < np.radians(0.5)
    check_inside_limits(servo.setpoints)


def held_still(scale: float, at_limit: tuple[str, ...] = ()):
    """A limiter step that keeps the setpoint where it is and reports ``scale`` (the clock's
    advance) and ``at_limit``."""
    def step(q, v, dq, dt):
        return LimitedStep(q=np.array(q, float), v=np.zeros(len(q)), a=-np.asarray(v) / dt,
                           scale=scale, clipped=False, at_limit=at_limit)
    return step


def test_a_motion_that_never_settles_is_stopped_and_reported(model, monkeypatch):
    """A goal whose every run-time step is cut to just above STALL_PACE (a motion slowed at
    the limits without end: its clock runs out after 25 s; one run of the failed-joint
    triangle over DDS chased its goal for 262 s) is stopped OVERRUN x its planned duration +
    OVERRUN_MARGIN on: reported once, not reached, judged against its goal; the setpoint
    then held."""
    planner = make(model)
    servo = Servo(planner)
    p0, R0, psi0 = fk(Q0)
    servo.start(Waypoint((p0, R0), psi0 + np.radians(20), 1.5))
    monkeypatch.setattr(planner.config.limiter, "step", held_still(STALL_PACE + 0.01))
    limit = OVERRUN * 1.5 + OVERRUN_MARGIN
    arrival = servo.run(limit + 1.0, until_arrival=True)
    assert arrival is not None and arrival.overran and not arrival.reached
    assert not arrival.stalled
    assert limit < arrival.elapsed <= limit + 2 * DT + 1e-9
    assert arrival.planned == 1.5
    assert abs(np.degrees(arrival.arm_angle_error) - 20.0) < 0.5  # it never left the start
    held = servo.q.copy()
    assert servo.run(1.0, until_arrival=True) is None  # reported once
    assert np.array_equal(servo.q, held)


def test_a_motion_whose_steps_are_cut_to_nothing_is_stopped_as_stalled(model, monkeypatch):
    """Every run-time step cut to nothing (near-singular steps the limits cut: a failed
    panda elbow's plan, left by the real elbow, drove joints at their speed limits while its
    clock stood still): stopped after one STALL_WINDOW, reported once as stalled, not reached,
    the setpoint then held. Pressing a position limit is not a stall (reported as such)."""
    planner = make(model)
    servo = Servo(planner)
    p0, R0, psi0 = fk(Q0)
    servo.start(Waypoint((p0, R0), psi0 + np.radians(20), 1.5))
    monkeypatch.setattr(planner.config.limiter, "step", held_still(0.0))
    arrival = servo.run(3 * STALL_WINDOW, until_arrival=True)
    assert arrival is not None and arrival.stalled and not arrival.reached
    assert not arrival.overran
    assert STALL_WINDOW - 2 * DT <= arrival.elapsed <= STALL_WINDOW + 2 * DT
    assert abs(np.degrees(arrival.arm_angle_error) - 20.0) < 0.5  # it never left the start
    held = servo.q.copy()
    assert servo.run(1.0, until_arrival=True) is None  # reported once
    assert np.array_equal(servo.q, held)

    planner = make(model)
    servo = Servo(planner)
    servo.start(Waypoint((p0, R0), psi0 + np.radians(20), 1.5))
    monkeypatch.setattr(planner.config.limiter, "step", held_still(0.0, ("joint4",)))
    assert servo.run(3 * STALL_WINDOW, until_arrival=True) is None
    assert not planner.motion.stalled


def test_the_arrival_says_whether_the_measured_arm_followed(model):
    """The same 5 cm goal with a servo that follows and one that never moves: both plans end
    on the goal, and the arrival's measured hand error is Pinocchio's distance from where the
    measured arm's hand is to the target (0, within the last sample's step the servo had not
    yet taken when it was measured, and the whole 4.7 cm step)."""
    p0, R0, psi0 = fk(Q0)
    target = p0 + np.array([0.03, -0.03, 0.02])
    for follow in (1.0, 0.0):
        servo = Servo(make(model), follow=follow)
        servo.start(Waypoint((target, R0), psi0, 1.0))
        arrival = servo.run(4.0, until_arrival=True)
        assert arrival is not None and arrival.reached
        measured = np.linalg.norm(fk(servo.q)[0] - target)
        assert abs(arrival.measured_position_error - measured) < 1e-6
        assert arrival.followed == (follow == 1.0)
    assert abs(arrival.measured_position_error - np.linalg.norm(target - p0)) < 1e-9


def test_an_arm_not_following_the_setpoints_is_seen_while_it_moves(model):
    """FollowingCheck on a 60° elbow swing's stream (1.5 s), the window FOLLOW_WINDOW plus a
    4-sample delay: an arm at the setpoint of 4 samples ago is on a setpoint of the window
    (0 rad); one held at the start (no controller, or a stream held on the way) is, once the
    plan has rested a window at its goal, exactly its largest active joint change away, named
    by that joint; an arm held for 0.5 s mid-swing and then following again is not seen
    within the window's length, then is (exactly its distance to the window's nearest
    setpoint), and is on the window again after."""
    delay, window = 4, FOLLOW_WINDOW + 4 * DT
    p0, R0, psi0 = fk(Q0)
    servo = Servo(make(model))
    servo.start(Waypoint((p0, R0), psi0 + np.radians(60), 1.5))
    servo.run(1.5 + 2 * window)
    stream = [q for q, _, _ in servo.setpoints]  # the motion's setpoints and its rest after it
    assert np.abs(stream[-1] - Q0).max() > 5 * FOLLOW_TOLERANCE  # a swing, not a wiggle

    def gaps(arm):  # the check's (distance, joint) at each sample, the arm at arm(k)
        check = FollowingCheck(model.active_dofs)
        return [check.update(k * DT, q, arm(k), window) for k, q in enumerate(stream)]

    late = gaps(lambda k: stream[max(k - delay, 0)])
    assert max(g for g, _ in late) == 0.0
    held = gaps(lambda k: Q0)
    change = np.abs(stream[-1] - Q0)
    assert held[-1][0] == pytest.approx(change.max(), abs=1e-12)
    assert held[-1][1] == int(change.argmax())
    k0, k1 = round(0.4 / DT), round(0.9 / DT)  # held mid-swing, then following again
    paused = gaps(lambda k: stream[k0] if k0 <= k < k1 else stream[max(k - delay, 0)])
    # a hold shorter than the window is not seen: the arm is on one of its setpoints
    assert max(g for g, _ in paused[:k0 + round(window / DT) + 1]) == 0.0
    last = k1 - 1  # the hold's last sample: the setpoints sent within the window before it
    inside = [stream[k] for k in range(last + 1) if k * DT >= last * DT - window]
    moved = np.abs(np.array(inside) - stream[k0]).max(axis=1).min()
    assert moved > FOLLOW_TOLERANCE  # every setpoint of the window farther than that
    assert paused[k1 - 1][0] == pytest.approx(moved, abs=1e-12)
    assert max(g for g, _ in paused[k1 + round(window / DT) + delay:]) == 0.0
    print(f"\n[following] held at the start: {held[-1][0]:.3f} rad; held 0.5 s mid-swing: "
          f"{paused[k1 - 1][0]:.3f} rad at its end")


def test_a_goal_held_while_the_plan_still_moves_is_reported_after_a_second(model, monkeypatch):
    """The clock run out and the hand and arm angle on the goal, but the plan never settles
    below 1e-3 rad/s (every setpoint's velocity here carries 2e-3 rad/s more; over DDS the
    failed-joint triangle's plan kept answering the passive joint, hand 0.00 mm and arm angle
    0.00° from its goal, and was never reported): reported reached SETTLE_HOLD s later."""
    planner = make(model)
    servo = Servo(planner)
    p0, R0, psi0 = fk(Q0)
    servo.start(Waypoint((p0, R0), psi0 + np.radians(20), 1.5))
    real = planner.config.limiter.step

    def jittering(q, v, dq, dt):
        step = real(q, v, dq, dt)
        return replace(step, v=step.v + 2e-3)

    monkeypatch.setattr(planner.config.limiter, "step", jittering)
    arrival = servo.run(1.5 + SETTLE_HOLD + 2.0, until_arrival=True)
    assert arrival is not None and arrival.reached and not arrival.overran
    assert 1.5 + SETTLE_HOLD - 2 * DT <= arrival.elapsed <= 1.5 + SETTLE_HOLD + 0.5
    assert np.degrees(arrival.arm_angle_error) < 0.5


def test_a_goal_too_fast_for_the_limits_is_stretched(model):
    """A 30° elbow swing asked in 0.05 s (25 rad/s of 2.5 rad/s joints): planned longer, every
    setpoint inside the URDF's limits, still reached."""
    servo = Servo(make(model))
    p0, R0, psi0 = fk(Q0)
    plan = servo.start(Waypoint(None, psi0 + math.radians(30), 0.05))
    assert plan.stretched and plan.stretched[0][:2] == (0, 0.05)
    assert plan.segments[0].duration > 0.5
    arrival = servo.run(15.0, until_arrival=True)
    assert arrival is not None and arrival.reached
    assert len(servo.setpoints) > 20
    p, _, psi = fk(servo.q)
    assert abs(math.degrees(wrap(psi - psi0)) - 30) < 0.5 and np.linalg.norm(p - p0) < 1e-3
    check_inside_limits(servo.setpoints)


def test_sensed_iteration_with_a_lagging_servo(model):
    """The servo covers only 30 % of each step: starting each step from the sensed joints
    (claims 1, 3) still ends on the goal."""
    servo = Servo(make(model, iterate_from="sensed"), follow=0.3)
    p0, R0, psi0 = fk(Q0)
    target = p0 + np.array([0.05, -0.05, 0.05])
    servo.start(Waypoint((target, R0), None, 1.0))
    servo.run(4.0)
    servo.settle(3.0)
    p, _, psi = fk(servo.q)
    assert np.linalg.norm(p - target) < 1e-3
    assert abs(wrap(psi - psi0)) < np.radians(1.0)


def test_the_goal_state_is_carried_over_a_rebuild(model):
    """joint7 locked at its angle at the start of the goal (Seraji §3.4(i)): a parameter
    change in the middle of the motion keeps the lock where it was, and the hand still gets
    to its goal with joint7 held; locking other joints does not carry the lock over."""
    planner = make(model, locked_joints=("joint7",), joint_locking_weight=1e3)
    servo = Servo(planner)
    p0, R0, psi0 = fk(Q0)
    target = p0 + np.array([0.05, 0.0, 0.03])
    servo.start(Waypoint((target, R0), psi0, 1.5))
    servo.run(0.5)
    motion = planner.motion
    planner.use(planner.configure(replace(planner.settings, arm_angle_weight=2.0)))
    assert Anchors.of(planner.config.control).locked.tolist() == [Q0[6]]
    assert planner.motion is motion and motion.clock > 0.3  # the motion went on
    arrival = servo.run(10.0, until_arrival=True)
    assert arrival is not None and arrival.reached
    servo.settle(3.0)
    p, _, _ = fk(servo.q)
    assert np.linalg.norm(p - target) < 1e-3
    assert abs(servo.q[6] - Q0[6]) < 1e-2  # the (soft) lock of joint 7 held
    planner.use(planner.configure(replace(planner.settings, locked_joints=("joint6",))))
    assert Anchors.of(planner.config.control).locked is None  # set at the next step


def test_a_dry_run_on_another_thread_leaves_the_running_motion_alone(model):
    """``plan`` uses the planning copy: running it on a thread while ``step`` runs gives the
    same setpoints as without it, and the same plan as on this thread."""
    p0, R0, psi0 = fk(Q0)
    goal = [Waypoint((p0 + np.array([0.05, 0.1, -0.05]), R0), psi0 + np.radians(30), 1.5)]
    reference, busy = Servo(make(model)), Servo(make(model))
    for servo in (reference, busy):
        servo.start(Waypoint(None, psi0 + np.radians(10), 0.5))
    reference.run(1.0)
    q_start = busy.planner.start_configuration(busy.q)
    plans = []
    worker = threading.Thread(target=lambda: plans.extend(
        busy.planner.plan(goal * 3, q_start) for _ in range(3)))
    worker.start()
    while worker.is_alive() and len(busy.setpoints) < 100:
        busy.run(DT)
    busy.run(1.0 - DT * len(busy.setpoints))
    worker.join()
    np.testing.assert_array_equal(np.array([s[0] for s in busy.setpoints]),
                                  np.array([s[0] for s in reference.setpoints]))
    same = busy.planner.plan(goal * 3, q_start)
    assert len(plans) == 3
    for result in plans:
        assert result.accepted
        for a, b in zip(result.plan.segments, same.plan.segments):
            assert a.duration == b.duration
            np.testing.assert_array_equal(a.goal[0], b.goal[0])


@pytest.mark.parametrize("setting, value", [("hand_weights", (1.0, 2.0)),
                                            ("acceleration_limit", (1.0, 2.0, 3.0)),
                                            ("joint_spring_stiffness", (1.0, 2.0))])
def test_bad_settings_are_refused_by_name(model, setting, value):
    planner = make(model)
    config = planner.config
    with pytest.raises(ValueError, match=setting):
        planner.configure(replace(planner.settings, **{setting: value}))
    assert planner.config is config  # nothing changed
