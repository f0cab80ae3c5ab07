"""The planned swing-up (control/swing_up_plan.py, ``swing_up_strategy: planned``).

Oracles: central finite differences (the filtered-motor dynamics and the rate cost), Pinocchio's
ABA (the plan obeys the robot's physics knot by knot), MuJoCo stepped in this process (the
plan tracked on a simulated robot, scored like the leaderboards, and after a knock), and the
published planning controllers' leaderboard scores (TVLQR 0.504, iLQR-Riccati 0.536) as the
bar the planned strategy must clear.
"""

import numpy as np
import pytest
from helpers import ROOT
from oracle import PinRef

from underactuated_control import RobotModel
from underactuated_control.control.swing_up_law import BALANCING, SwingUpLaw
from underactuated_control.control.swing_up_plan import (
    CommandRateCost,
    PlanCache,
    PlanTracker,
    SwingUpPlan,
    plan_key,
)
from underactuated_control.optimal_control import FilteredTorques, HybridStep
from underactuated_control.optimal_control.costs import Derivatives
from underactuated_control.parameters import coerce
from underactuated_control.scenarios.swing_up import TwoLink, simulate_offline, two_link_urdf
from underactuated_control.scoring import full_tip_height, score_run, tip_heights

PUBLISHED_PLANNERS = 0.536  # the best planning controller on the leaderboards (iLQR-Riccati)


def planned_law(robot: str, tmp_path, **overrides) -> SwingUpLaw:
    settings = {s.name: coerce(s, s.default) for s in SwingUpLaw.parameters}
    settings.update(swing_up_strategy="planned", plan_cache_dir=str(tmp_path), **overrides)
    return SwingUpLaw(RobotModel.from_urdf((ROOT / f"urdf/{robot}.urdf").read_text()),
                      settings, "tip")


# ====================================================================== building blocks
def test_filtered_torques_linearisation_is_the_finite_difference():
    model = RobotModel.from_urdf(two_link_urdf("pendubot"))
    step = FilteredTorques(HybridStep(model, 0.01), 0.015)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x, u = rng.normal(size=5), rng.normal(size=1)
        _, Fx, Fu = step.derivatives(x, u)
        h = 1e-6
        for j in range(5):
            dx = np.zeros(5)
            dx[j] = h
            assert np.allclose((step(x + dx, u) - step(x - dx, u)) / (2 * h), Fx[:, j],
                               atol=1e-7)
        fd = (step(x, u + h) - step(x, u - h)) / (2 * h)
        assert np.allclose(fd, Fu[:, 0], atol=1e-7)
    # a bounded command keeps the filtered torque within the same bounds
    x = np.array([0.0, 0.0, 0.0, 0.0, 5.9])
    for _ in range(50):
        x = step(x, np.array([6.0]))
        assert abs(x[4]) <= 6.0


def test_command_rate_cost_derivatives_are_the_finite_difference():
    cost = CommandRateCost(3.0, 1)
    x, u = np.array([0.1, -0.2, 0.3, 0.4, 1.5]), np.array([-0.7])
    d = Derivatives.zeros(5, 1)
    cost.add_derivatives(x, u, d)
    h = 1e-6
    for j in range(5):
        dx = np.zeros(5)
        dx[j] = h
        assert np.isclose((cost.value(x + dx, u) - cost.value(x - dx, u)) / (2 * h), d.lx[j])
    assert np.isclose((cost.value(x, u + h) - cost.value(x, u - h)) / (2 * h), d.lu[0])
    assert d.luu[0, 0] == 3.0 and d.lxx[4, 4] == 3.0 and d.lux[0, 4] == -3.0
    stacked = Derivatives(np.zeros((2, 5)), np.zeros((2, 1)), np.zeros((2, 5, 5)),
                          np.zeros((2, 1, 1)), np.zeros((2, 1, 5)))
    cost.add_all_derivatives(np.stack([x, x]), np.stack([u, u]), stacked)
    assert np.allclose(stacked.lx[1], d.lx) and np.allclose(stacked.lux[0], d.lux)
    assert np.isclose(cost.total(np.stack([x, x]), np.stack([u, u])), 2 * cost.value(x, u))


def test_tracker_interpolates_knots_and_applies_its_gain():
    xs = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]])
    K = np.array([[1.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    plan = SwingUpPlan(0.1, xs, np.array([1.0, 2.0]), K, np.zeros(2), 0.0, True, 1)
    tracker = PlanTracker(plan, 5.0, np.array([2 * np.pi, 0.0]))
    x_ref, u, gain = tracker.reference(5.05)
    assert np.allclose(x_ref, [0.5, 1.0, 1.5, 2.0]) and u == pytest.approx(1.5)
    assert np.allclose(gain[0], 2.0)
    q, v = x_ref[:2] + [2 * np.pi, 0.0], x_ref[2:]  # on the plan, a turn further round
    assert tracker.command(5.05, q, v, 0.0, 10.0) == pytest.approx(1.5)
    assert tracker.command(5.05, q + [0.1, 0.0], v, 0.0, 10.0) == pytest.approx(1.7)
    assert tracker.command(5.05, q + [100.0, 0.0], v, 0.0, 10.0) == 10.0  # the limit
    assert not tracker.ended(5.19) and tracker.ended(5.2)


def test_plan_cache_round_trip_and_key(tmp_path):
    model = RobotModel.from_urdf(two_link_urdf("pendubot"))
    heavier = RobotModel.from_urdf(two_link_urdf("pendubot", TwoLink(m2=0.7)))
    law = planned_law("pendubot", tmp_path)
    x0 = np.zeros(4)
    key = plan_key(model, x0, law.q_up, 6.0, law.plan_weights)
    assert key != plan_key(heavier, x0, law.q_up, 6.0, law.plan_weights)
    assert key != plan_key(model, x0, law.q_up, 5.0, law.plan_weights)
    assert key != plan_key(model, x0 + 0.1, law.q_up, 6.0, law.plan_weights)
    assert key != plan_key(model.with_passive([]), x0, law.q_up, 6.0, law.plan_weights)
    cache = PlanCache(tmp_path / "c")
    plan = law.hanging_plan
    cache.store("k", plan)
    back = cache.load("k")
    assert np.array_equal(back.xs, plan.xs) and np.array_equal(back.K, plan.K)
    assert back.filter_time == plan.filter_time and back.dt == plan.dt
    (tmp_path / "c" / "bad.npz").write_bytes(b"not a plan")
    assert cache.load("bad") is None and cache.load("missing") is None
    # the law found its plan in the cache it wrote: a second law loads the same arrays
    again = planned_law("pendubot", tmp_path)
    assert np.array_equal(again.hanging_plan.us, plan.us)


@pytest.mark.parametrize("robot", ["acrobot", "pendubot"])
def test_plan_obeys_the_robots_physics(robot, tmp_path):
    """Knot by knot, the plan's states follow Pinocchio's ABA under its torques (the step the
    solver optimises through), the motor stays within its limit and the plan ends upright at
    rest."""
    law = planned_law(robot, tmp_path)
    plan = law.hanging_plan
    urdf = (ROOT / f"urdf/{robot}.urdf").read_text()
    ref = PinRef(RobotModel.from_urdf(urdf), urdf)
    n = 2
    torques = plan.xs[:-1, 4] if plan.filter_time > 0 else plan.us
    assert np.abs(torques).max() <= law.effort_limit + 1e-9
    assert np.abs(plan.us).max() <= law.effort_limit + 1e-9
    worst = 0.0
    for k in range(len(plan.us)):
        q, v = plan.xs[k, :n], plan.xs[k, n:2 * n]
        tau = np.zeros(n)
        tau[law.a] = torques[k]
        qdd = ref.aba(q, v, tau)
        v_next = v + plan.dt * qdd
        worst = max(worst, np.abs(plan.xs[k + 1, n:2 * n] - v_next).max(),
                    np.abs(plan.xs[k + 1, :n] - (q + plan.dt * v_next)).max())
    assert worst < 1e-9
    assert np.abs(plan.xs[-1, :n] - plan.goal).max() < 0.05
    assert np.abs(plan.xs[-1, n:2 * n]).max() < 0.5
    assert np.allclose(np.cos(plan.goal), np.cos(law.q_up))  # a 2π branch of the upright


# ====================================================================== closed loop (MuJoCo)
@pytest.mark.parametrize("robot", ["acrobot", "pendubot"])
def test_planned_swing_up_on_mujoco_beats_the_published_planners(robot, tmp_path):
    urdf = (ROOT / f"urdf/{robot}.urdf").read_text()
    model = RobotModel.from_urdf(urdf)
    run = simulate_offline(urdf, 10.0, {"swing_up_strategy": "planned",
                                        "plan_cache_dir": str(tmp_path)})
    law = run["law"]
    scores = score_run(run["t"], run["q"], run["v"], run["tau"],
                       tip_heights(model, run["q"], "tip"), full_tip_height(model, "tip"))
    print(f"\n[{robot} planned, MuJoCo in-process] " + ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items()))
    assert scores["success"] and scores["score"] > PUBLISHED_PLANNERS
    assert law.phase == BALANCING and law.replans == 0 and law.fallbacks == 0
    held = run["t"] >= scores["swingup_time"] + 1.0
    assert np.abs((run["q"][held] - law.q_up + np.pi) % (2 * np.pi) - np.pi).max() < 0.1
    assert np.abs(run["tau"]).max() <= model.effort_limit[law.a] + 1e-9


def test_a_knock_is_answered_by_a_new_plan(tmp_path):
    """Balanced upright, the pendubot is pushed hard (its joints' speeds changed by 1.9 and
    0.6 rad/s): the LQR cannot catch it, the law re-plans from the state it predicts and is
    balancing upright again before the end."""
    urdf = (ROOT / "urdf/pendubot.urdf").read_text()
    run = simulate_offline(urdf, 10.0, {"swing_up_strategy": "planned",
                                        "plan_cache_dir": str(tmp_path),
                                        "plan_replan_inline": True},
                           pushes=[(4.0, (1.9, 0.6))])
    law = run["law"]
    after = run["t"] > 4.01
    assert run["balancing"][run["t"] < 3.99][-1] and not run["balancing"][after].all()
    assert law.replans >= 1 and law.phase == BALANCING
    assert np.abs((run["q"][-1] - law.q_up + np.pi) % (2 * np.pi) - np.pi).max() < 0.05


def test_filtered_rollout_kernel_is_the_step_by_step_rollout():
    """The compiled rollout with the motor filter against the knot-by-knot one
    (``DiscreteDynamics.rollout`` calling the step), with feedback and clipping."""
    from underactuated_control.optimal_control.dynamics import DiscreteDynamics

    model = RobotModel.from_urdf(two_link_urdf("acrobot"))
    step = FilteredTorques(HybridStep(model, 0.005), 0.015)
    rng = np.random.default_rng(5)
    N = 40
    us_ref, xs_ref = rng.normal(0, 4, (N, 1)), rng.normal(0, 0.3, (N + 1, 5))
    K, kff = rng.normal(0, 3, (N, 1, 5)), rng.normal(0, 1, (N, 1))
    lower, upper = np.array([-6.0]), np.array([6.0])
    x0 = np.array([0.1, -0.2, 0.0, 0.5, 1.0])
    xs, us = np.empty((N + 1, 5)), np.empty((N, 1))
    xs2, us2 = np.empty_like(xs), np.empty_like(us)
    assert step.rollout(x0, us_ref, xs_ref, K, kff, 0.5, lower, upper, xs, us)
    assert DiscreteDynamics.rollout(step, x0, us_ref, xs_ref, K, kff, 0.5, lower, upper, xs2,
                                    us2)
    assert np.abs(us).max() == 6.0  # some commands clipped
    assert np.allclose(xs, xs2, atol=1e-12) and np.allclose(us, us2, atol=1e-12)
