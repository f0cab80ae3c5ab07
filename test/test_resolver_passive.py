"""The elbow resolver with a failed joint (Jain & Rodriguez, patent US 5,377,310 claims 11, 22;
issue 23 item 5): ``passive_joint_motion: disturbance`` plans a passive joint as moved by the
active ones, dθ_p = J_D dθ_a, with every row generalized (hand: J_G = J_a + J_p J_D).

Oracles: Pinocchio's mass matrix (J_D = -M_pp⁻¹ M_pa), frame Jacobian and forward kinematics
(hand, arm angle), and MuJoCo's physics of arm7 with no motor on the failed joint, driven by the
controller's joint law as the node runs it (``scenarios/resolver_failure.py``)."""

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH, PANDA_Q0, g1_left_arm, issue_arm

from underactuated_control import RobotModel
from underactuated_control.jacobians import frame_placement
from underactuated_control.redundancy.arm_angle import ArmAngle, arm_angle_from_points
from underactuated_control.redundancy.configuration_control import ConfigurationControl
from underactuated_control.redundancy.functions import (
    ArmAngleFunction,
    JointLimitAvoidance,
    JointLocking,
    OptimalJointMovement,
)
from underactuated_control.redundancy.resolver import ElbowPlanner, Settings, Waypoint
from underactuated_control.scenarios.resolver_failure import (
    LINKS,
    POSITION_TASK,
    Q0,
    TriangleArm,
    run_triangle,
    triangle,
    triangle_errors,
)

PM = pin.buildModelFromUrdf(str(ARM7_PATH))
PD = PM.createData()
TOOL = PM.getFrameId("tool")


def pin_disturbance(q, j):
    """J_D = -M_pp⁻¹ M_pa of passive joint j (Pinocchio's CRBA)."""
    M = pin.crba(PM, PD, q)
    M = np.triu(M) + np.triu(M, 1).T
    act = [i for i in range(7) if i != j]
    return -M[j, act][None, :] / M[j, j], act


def pin_hand(q):
    pin.framesForwardKinematics(PM, PD, q)
    return PD.oMf[TOOL].translation.copy()


def pin_psi(q):
    pin.framesForwardKinematics(PM, PD, q)
    return arm_angle_from_points(*(PD.oMf[PM.getFrameId(n)].translation for n in LINKS))


@pytest.fixture(scope="module")
def arm():
    return RobotModel.from_urdf(ARM7_PATH, tip_link="tool")


@pytest.mark.parametrize("failed", ["joint1", "joint3", "joint5"])
def test_hand_rows_are_the_generalized_jacobian(arm, failed):
    """Hand rows only, six active joints: the step is the exact inverse of J_G. Its J_D is
    Pinocchio's -M_pp⁻¹ M_pa, J_G dθ_a is the asked hand change with J_G = J_a + J_p J_D from
    Pinocchio's frame Jacobian, and dθ_p = J_D dθ_a; compiled and Python steps agree."""
    m = arm.with_passive([failed])
    j = m.joint_index(failed)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = Q0 + rng.normal(0.0, 0.3, 7)
        J_D, act = pin_disturbance(q, j)
        pin.computeJointJacobians(PM, PD, q)
        pin.framesForwardKinematics(PM, PD, q)
        J = pin.getFrameJacobian(PM, PD, TOOL, pin.LOCAL_WORLD_ALIGNED)
        J_G = J[:, act] + J[:, [j]] @ J_D
        p, R = PD.oMf[TOOL].translation.copy(), PD.oMf[TOOL].rotation.copy()
        dX = np.array([1e-4, -2e-4, 1.5e-4, 2e-4, 1e-4, -1e-4])
        steps = []
        for compiled in (True, False):
            cc = ConfigurationControl(m, "tool", [], task_weights=1.0, compiled=compiled,
                                      passive_motion="disturbance")
            res = cc.step(q, (p + dX[:3], pin.exp3(dX[3:]) @ R))
            np.testing.assert_allclose(res.J_D, J_D, atol=1e-12)
            np.testing.assert_allclose(J_G @ res.dq[act], dX, atol=1e-13)
            np.testing.assert_allclose(res.dq[[j]], J_D @ res.dq[act], atol=1e-16)
            steps.append(res.q_next)
        np.testing.assert_allclose(steps[0], steps[1], atol=1e-12)


@pytest.mark.parametrize("failed", ["joint2", "joint4"])
def test_arm_angle_row_is_generalized(arm, failed):
    """The arm-angle row alone (hand weights 0), away from the planar Q0 (where the passive
    joint would not turn ψ): a step of δψ = 1e-4 rad, with the passive joint moving by
    J_D dθ_a, changes Pinocchio's ψ by δψ to second order; the locked plan's step, when the
    passive joint then moves as the dynamics make it (J_D dθ_a), misses by a first-order
    amount. With joint limits, locking and springs on, compiled = Python."""
    m = arm.with_passive([failed])
    j = m.joint_index(failed)
    aa = ArmAngle(m, *LINKS)
    q0 = Q0 + np.array([0.2, 0.1, 0.3, 0.2, -0.3, 0.1, 0.2])
    psi0 = pin_psi(q0)
    p, R = frame_placement(m, q0, "tool")
    change = {}
    for mode in ("disturbance", "locked"):
        cc = ConfigurationControl(m, "tool", [ArmAngleFunction(aa)], task_weights=0.0,
                                  passive_motion=mode)
        res = cc.step(q0, (p, R), {"arm_angle": psi0 + 1e-4})
        J_D, act = pin_disturbance(q0, j)
        q = res.q_next.copy()
        q[j] = q0[j] + (J_D @ res.dq[act])[0]  # where the passive joint goes
        change[mode] = pin_psi(q) - psi0
    assert abs(change["disturbance"] - 1e-4) < 1e-7
    assert abs(change["locked"] - 1e-4) > 1e-6
    functions = [ArmAngleFunction(aa), JointLimitAvoidance(m, 0.3), JointLocking(m, ["joint7"]),
                 OptimalJointMovement(m, np.arange(1.0, 8.0), rest=Q0 + 0.1)]
    steps = [ConfigurationControl(m, "tool", functions, task_weights=POSITION_TASK,
                                  compiled=compiled, passive_motion="disturbance").step(
        q0, (p + 0.01, R), {"arm_angle": psi0 + 0.05}).q_next for compiled in (True, False)]
    np.testing.assert_allclose(steps[0], steps[1], atol=1e-9)


def test_planner_with_a_failed_joint_and_an_ideal_servo(arm):
    """joint1 failed, the servo ideal (every joint where its setpoint says): the triangle of
    hand positions and arm angles as waypoints ends on p0 (Pinocchio), each setpoint's passive
    angle moves by J_D of the active step (Pinocchio's M) to second order, and the hand of
    every setpoint stays near the straight legs. The locked plan refuses the same triangle (the
    other six joints would have to leave their limits), and the healthy arm, hand position only
    (orientation weights 0, not judged), plans it."""
    m = arm.with_passive(["joint1"])
    p0, R0 = frame_placement(m, Q0, "tool")
    psi0 = pin_psi(Q0)
    waypoints = [Waypoint((p, R0), float((psi + np.pi) % (2 * np.pi) - np.pi), 3.0)
                 for p, psi in triangle(p0, psi0)]
    locked = ElbowPlanner(m, "tool", LINKS, Settings(hand_weights=POSITION_TASK,
                                                     passive_joint_motion="locked"))
    refused = locked.start(waypoints, Q0)
    assert not refused.accepted and "position limit" in refused.reason, refused.reason
    healthy = ElbowPlanner(arm, "tool", LINKS, Settings(hand_weights=POSITION_TASK))
    assert healthy.plan(waypoints, Q0).accepted
    planner = ElbowPlanner(m, "tool", LINKS, Settings(hand_weights=POSITION_TASK))
    result = planner.start(waypoints, Q0)
    assert result.accepted, result.reason
    q, qs, arrival = Q0.copy(), [Q0.copy()], None
    for _ in range(3000):
        sp = planner.step(q, 0.01)
        q = sp.q.copy()
        qs.append(q)
        if sp.arrival is not None:
            arrival = sp.arrival
            break
    assert arrival is not None and arrival.reached, arrival
    qs = np.array(qs)
    worst = 0.0  # the setpoints' passive step against J_D (Pinocchio) of the active step
    for a, b in zip(qs[:-1], qs[1:]):
        J_D, act = pin_disturbance(a, 0)
        worst = max(worst, abs(b[0] - a[0] - (J_D @ (b - a)[act])[0]))
    hand = np.array([pin_hand(x) for x in qs])
    corners = [p0, *(c for c, _ in triangle(p0, psi0))]
    off = np.min([segment_distance(hand, a, b) for a, b in zip(corners[:-1], corners[1:])],
                 axis=0).max()
    print(f"\n[failed joint1, ideal servo] joint1 travels {np.ptp(qs[:, 0]):.2f} rad; "
          f"hand {1e3 * np.linalg.norm(hand[-1] - p0):.3f} mm from p0 at the end, at most "
          f"{1e3 * off:.3f} mm off the triangle, ψ {np.degrees(abs(pin_psi(qs[-1]) - psi0)):.2f}°"
          f" off; |Δθ_p - J_D Δθ_a| ≤ {worst:.1e} rad; joints end "
          f"{np.abs(qs[-1] - Q0).max():.2f} rad from the start")
    assert np.ptp(qs[:, 0]) > 1.0  # the failed joint is carried a long way
    assert np.linalg.norm(hand[-1] - p0) < 1e-3
    assert abs(pin_psi(qs[-1]) - psi0) < np.radians(0.5)
    assert worst < 1e-12
    assert off < 2e-3


def segment_distance(points, a, b):
    """Distance of each point to the segment ab."""
    u = b - a
    s = np.clip((points - a) @ u / (u @ u), 0.0, 1.0)
    return np.linalg.norm(points - a - s[:, None] * u, axis=1)


def test_failed_joint_on_mujoco_follows_the_triangle():
    """Closed loop with physics (zero gravity): arm7 with a failed joint1 that turns freely, the
    controller's joint law tracking the resolver's setpoints, MuJoCo moving joint1 by the
    reaction. The J_D plan takes the hand along the triangle (Pinocchio FK) and joint1 where
    the plan said; the locked plan refuses it."""
    run = run_triangle("joint1", "disturbance", free=True)
    assert not run.refused, run.refused
    e = triangle_errors(run, pin_hand)
    predicted, measured = np.ptp(run.setpoints[:, 0]), np.ptp(run.q[:, 0])
    print(f"\n[failed joint1, MuJoCo] corners {np.round(e['corner_mm'], 2)} mm, end "
          f"{e['end_mm']:.2f} mm, at most {e['path_mm']:.2f} mm off the legs; joint1 moved "
          f"{measured:.3f} rad (planned {predicted:.3f})")
    assert len(e["corner_mm"]) == 3 and max(e["corner_mm"]) < 1.0 and e["end_mm"] < 1.0
    assert e["path_mm"] < 3.0
    assert measured > 2.0 and abs(measured - predicted) < 0.02 * predicted
    assert "position limit" in run_triangle("joint1", "locked", free=True).refused


def test_failed_joint_held_by_its_friction():
    """joint5 failed with its URDF damping and dry friction, 6 s legs: the reactions hardly
    turn it (its friction holds it), so the locked plan is the right model there; the J_D plan,
    which expects it to turn, still reaches every corner and keeps near the legs, because each
    step starts from the joint's measured angle."""
    runs = {mode: run_triangle("joint5", mode, free=False, leg=6.0)
            for mode in ("locked", "disturbance")}
    errors = {mode: triangle_errors(run, pin_hand) for mode, run in runs.items()}
    print("\n[failed joint5 with friction, MuJoCo] " + "; ".join(
        f"{mode}: corners {np.round(e['corner_mm'], 2)} mm, {e['path_mm']:.2f} mm off the "
        f"legs, joint5 moved {np.ptp(runs[mode].q[:, 4]):.3f} rad" for mode, e in errors.items()))
    for e in errors.values():
        assert len(e["corner_mm"]) == 3 and max(e["corner_mm"]) < 1.0 and e["end_mm"] < 1.0
    assert errors["locked"]["path_mm"] < 1.0
    assert errors["disturbance"]["path_mm"] < 3.0


def test_a_failed_elbow_the_arm_does_not_follow_is_stopped_not_chased():
    """The panda (example-robot-data, never used to develop the resolver; issue 23's damping
    and friction on every joint), its elbow ``panda_joint4`` failed and turning freely, zero
    gravity: the J_D plan accepts the triangle, but the real elbow leaves the planned path
    (the velocity term J_D leaves out: the elbow's angle changes the arm's inertia) and the
    re-planned steps become near-singular, cut by the limits while the joints move (before
    the stall rule: no report in 23 s, joints at 2.4 rad/s, the hand 181 mm from p0).
    Judged with MuJoCo: the planner reports the motion stalled, not reached, within 10 s;
    half a second after the report the active joints are at rest; no joint ever passes 1.2x
    its URDF speed limit (issue 23's bound)."""
    text = issue_arm("panda_description/urdf/panda.urdf")
    arm = TriangleArm(text, "panda_hand_tcp", ("panda_link2", "panda_link4", "panda_link6"),
                      np.array(PANDA_Q0))
    run = run_triangle("panda_joint4", "disturbance", free=True, leg=6.0, settle=5.0,
                       arm=arm)
    assert not run.refused, run.refused
    arrival = run.arrival
    assert arrival is not None and arrival.stalled and not arrival.reached, arrival
    assert arrival.elapsed < 10.0
    model = RobotModel.from_urdf(text, tip_link="panda_hand_tcp")
    dt = run.t[1] - run.t[0]
    speed = np.abs(np.diff(run.q, axis=0)) / dt
    after = speed[np.searchsorted(run.t, arrival.elapsed + 0.5):]
    active = [i for i in range(7) if i != 3]
    print(f"\n[panda, elbow failed] stalled at {arrival.elapsed:.2f} s, hand "
          f"{1e3 * arrival.position_error:.0f} mm from the goal; peak speed / limit "
          f"{(speed.max(axis=0) / model.speed_limit).max():.2f}; active joints after the "
          f"report {after[:, active].max():.4f} rad/s")
    assert np.all(speed.max(axis=0) <= 1.2 * model.speed_limit)
    assert after[:, active].max() < 0.01


def test_auto_plans_a_failed_joint_locked_where_the_disturbance_plan_is_refused():
    """The Unitree G1's left arm (example-robot-data, never used to develop the resolver;
    issue 23's damping and friction on every joint), its wrist pitch failed with that
    friction, zero gravity: the J_D plan refuses the triangle (its dry run predicts the light
    wrist swung to its limits); ``auto`` then plans it with the wrist locked, which its
    friction nearly makes true, and MuJoCo's hand (Pinocchio's forward kinematics) passes
    every corner within 1 mm and ends within 0.1 mm of p0, the goal reported reached."""
    text, hand, q0 = g1_left_arm()
    arm = TriangleArm(text, hand, ("left_shoulder_roll_link", "left_elbow_link",
                                   "left_wrist_pitch_link"), q0)
    refused = run_triangle("left_wrist_pitch_joint", "disturbance", free=False, arm=arm)
    assert "position limit" in refused.refused, refused.refused
    run = run_triangle("left_wrist_pitch_joint", "auto", free=False, leg=6.0, settle=3.0,
                       arm=arm)
    assert not run.refused, run.refused
    pm = pin.buildModelFromXML(text)
    pd, frame = pm.createData(), pm.getFrameId("left_rubber_hand")

    def hand(q):
        pin.framesForwardKinematics(pm, pd, q)
        return pd.oMf[frame].translation.copy()

    e = triangle_errors(run, hand)
    print(f"\n[G1, wrist pitch failed, auto] the J_D plan: {refused.refused}; locked: corners "
          f"{np.round(e['corner_mm'], 2)} mm, end {e['end_mm']:.2f} mm, wrist moved "
          f"{np.ptp(run.q[:, 5]):.3f} rad")
    assert len(e["corner_mm"]) == 3 and max(e["corner_mm"]) < 1.0
    assert e["end_mm"] < 0.1
    assert run.arrival is not None and run.arrival.reached
