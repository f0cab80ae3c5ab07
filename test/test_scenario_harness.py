"""``scenarios.harness.stream_path`` on a scripted clock: each point of the path's 10 ms grid
is sent ``lead`` ahead of the time it is stamped with; a stall of the runner longer than the
lead pauses the path by the excess (reported through ``on_stall``), a shorter one changes
nothing."""

import numpy as np
import pytest

from underactuated_control.scenarios.harness import stream_path


def run(lead: float, stall_at: float | None, stall: float) -> tuple[list, list, float]:
    """Stream path(t) = t for 1 s of a clock advancing 1 ms per spin, jumping by ``stall`` s
    once it passes ``stall_at``; returns the (position, stamp, clock when sent) published, the
    stalls reported and the start."""
    clock = [10.0]
    sent, stalls, stalled = [], [], [False]

    def spin() -> None:
        clock[0] += 0.001
        if stall_at is not None and not stalled[0] and clock[0] >= 10.0 + stall_at:
            stalled[0] = True
            clock[0] += stall

    start = stream_path(lambda t: np.array([t]), 1.0, lambda: clock[0],
                        lambda p, stamp: sent.append((float(p[0]), stamp, clock[0])), spin,
                        lead=lead, on_stall=lambda t, pause: stalls.append((t, pause)))
    return sent, stalls, start


@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_a_stall_shorter_than_the_lead_leaves_the_path_as_it_is(stall):
    sent, stalls, start = run(0.5, 0.4, stall)
    path_times = [p for p, _, _ in sent]
    assert np.allclose(path_times, 0.01 * np.arange(101))  # every grid point once, in order
    assert np.allclose([s - start for _, s, _ in sent], path_times)  # stamped with its time
    assert all(s - now <= 0.5 + 1e-9 for _, s, now in sent)  # never more than lead ahead
    assert stalls == []


def test_a_stall_longer_than_the_lead_pauses_the_path_by_the_excess():
    sent, stalls, start = run(0.5, 0.4, 0.8)
    path_times = np.array([p for p, _, _ in sent])
    assert np.allclose(path_times, 0.01 * np.arange(101))  # the path goes on where it stopped
    assert len(stalls) == 1 and stalls[0][1] == pytest.approx(0.3, abs=2e-3)
    shift = np.array([s - start for _, s, _ in sent]) - path_times
    before, after = shift[path_times < 0.885], shift[path_times > 0.915]
    assert np.allclose(before, 0.0)  # the points sent before the stall (0.4 s + 0.5 s lead)
    assert np.allclose(after, stalls[0][1])  # the rest stamped later by the pause
    # no point stamped in the past when it was sent: the controller gets each before its time
    assert all(s >= now - 1e-9 for _, s, now in sent)


def _pinocchio_arm(pin, whole: str, arm: list[str], seed: int):
    """Pinocchio's model and data of the whole URDF, a random arm configuration q (within
    ±0.5 rad), the whole robot's configuration with it (every other joint neutral) and the
    arm's velocity indices in it."""
    pm = pin.buildModelFromXML(whole)
    q = np.random.default_rng(seed).uniform(-0.5, 0.5, len(arm))
    q_pin, rows = pin.neutral(pm), []
    for name, value in zip(arm, q):
        joint = pm.joints[pm.getJointId(name)]
        q_pin[joint.idx_q] = value
        rows.append(joint.idx_v)
    return pm, pm.createData(), q, q_pin, rows


def test_only_joints_keeps_one_arm_whose_hand_is_where_pinocchio_puts_it_on_the_whole_robot():
    """only_joints: baxter's left arm cut from the whole robot (head, right arm, grippers'
    mimic fingers made rigid at zero): exactly the named joints move, and the left hand's
    placement matches Pinocchio's on the whole URDF with every other joint at zero."""
    import pinocchio as pin
    from helpers import EXAMPLE_ROBOTS

    from underactuated_control import RobotModel
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.scenarios.harness import only_joints

    whole = (EXAMPLE_ROBOTS / "baxter_description/urdf/baxter.urdf").read_text()
    arm = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
    model = RobotModel.from_urdf(only_joints(whole, arm))
    assert list(model.joint_names) == arm
    pm, pd, q, q_pin, _ = _pinocchio_arm(pin, whole, arm, 3)
    pin.framesForwardKinematics(pm, pd, q_pin)
    hand = pd.oMf[pm.getFrameId("left_gripper")]
    p, R = frame_placement(model, q, "left_gripper")
    np.testing.assert_allclose(p, hand.translation, atol=1e-12)
    np.testing.assert_allclose(R, hand.rotation, atol=1e-12)
    with pytest.raises(ValueError, match=r"\['left_elbow'\] are not movable joints"):
        only_joints(whole, ["left_s0", "left_elbow"])


def test_only_joints_keeps_tiagos_arm_dynamics_as_pinocchio_has_them_on_the_whole_robot():
    """only_joints on Tiago (example-robot-data): the links welded to the fixed root lose
    their <inertial> (the base antennas' inertias are not positive semidefinite, which the
    loader refuses), and the 7-DOF arm's mass matrix and gravity torques are the arm's block
    of Pinocchio's on the whole URDF, every other joint at its neutral value."""
    import pinocchio as pin
    from helpers import EXAMPLE_ROBOTS
    from oracle import full_crba

    from underactuated_control import RobotModel
    from underactuated_control.dynamics import inverse_dynamics, mass_matrix
    from underactuated_control.scenarios.harness import only_joints

    whole = (EXAMPLE_ROBOTS / "tiago_description/robots/tiago_no_hand.urdf").read_text()
    arm = [f"arm_{i}_joint" for i in range(1, 8)]
    with pytest.raises(ValueError, match="base_antenna_left_link"):
        RobotModel.from_urdf(whole)
    model = RobotModel.from_urdf(only_joints(whole, arm))
    assert list(model.joint_names) == arm
    pm, pd, q, q_pin, rows = _pinocchio_arm(pin, whole, arm, 4)
    M = full_crba(pm, pd, q_pin)
    g = pin.computeGeneralizedGravity(pm, pd, q_pin)
    np.testing.assert_allclose(mass_matrix(model, q), M[np.ix_(rows, rows)], atol=1e-12)
    np.testing.assert_allclose(inverse_dynamics(model, q, np.zeros(7), np.zeros(7)), g[rows],
                               atol=1e-11)
