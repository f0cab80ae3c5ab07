"""Box-constrained DDP (optimal_control/): checks that do not trust the solver.

- On a linear-quadratic problem its controls and gains equal the finite-horizon discrete
  Riccati solution, written out here independently.
- Its adjoint gradient equals central finite differences of the rolled-out cost, and at its
  answer the projected gradient (the KKT residual of the box) vanishes.
- A torque-limited swing-up of the bundled pendubot, optimised through the hybrid recursion,
  re-simulated by MuJoCo (RK4, 1 ms) with its feed-forward plus Riccati feedback, ends upright.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import ROOT

from underactuated_control.model import RobotModel
from underactuated_control.optimal_control import (
    BoxCost,
    ControlCost,
    Cost,
    CostSum,
    FrameCost,
    FramePathCost,
    HybridStep,
    StateCost,
    solve_box_ddp,
)
from underactuated_control.optimal_control.ddp import box_qp, cost_gradient
from underactuated_control.optimal_control.dynamics import DiscreteDynamics
from underactuated_control.sim.model import build_plant


class LinearStep(DiscreteDynamics):
    def __init__(self, A, B, lower=None, upper=None):
        self.A, self.B = A, B
        if lower is not None:
            self.lower, self.upper = lower, upper

    def __call__(self, x, u):
        return self.A @ x + self.B @ u

    def derivatives(self, x, u):
        return self(x, u), self.A, self.B


def _lq(seed=0, nx=4, nu=2):
    rng = np.random.default_rng(seed)
    A = np.eye(nx) + 0.1 * rng.standard_normal((nx, nx))
    B = 0.1 * rng.standard_normal((nx, nu))
    q, r, qf = rng.uniform(0.5, 2, nx), rng.uniform(0.1, 1, nu), rng.uniform(5, 10, nx)
    return A, B, q, r, qf, rng.standard_normal(nx)


def test_lq_problem_equals_the_discrete_riccati_solution():
    A, B, q, r, qf, x0 = _lq()
    N = 30
    step = LinearStep(A, B)
    sol = solve_box_ddp(step, x0, np.zeros((N, 2)), CostSum([StateCost(np.zeros(4), q),
                        ControlCost(r, 2)]), StateCost(np.zeros(4), qf), regularization=0.0)
    # P_N = Q_f;  K_k = −(R + BᵀPB)⁻¹ BᵀPA;  P ← Q + AᵀPA + AᵀPB K_k
    P, gains = np.diag(qf), []
    for _ in range(N):
        K = -np.linalg.solve(np.diag(r) + B.T @ P @ B, B.T @ P @ A)
        P = np.diag(q) + A.T @ P @ A + A.T @ P @ B @ K
        gains.append(K)
    gains.reverse()
    x = x0.copy()
    for k in range(N):
        u = gains[k] @ x
        np.testing.assert_allclose(sol.us[k], u, atol=1e-9)
        np.testing.assert_allclose(sol.K[k], gains[k], atol=1e-9)
        x = A @ x + B @ u
    assert sol.converged and sol.iterations <= 3


def test_box_qp_meets_the_kkt_conditions():
    rng = np.random.default_rng(3)
    for _ in range(20):
        M = rng.standard_normal((5, 5))
        H, g = M @ M.T + 0.1 * np.eye(5), 3 * rng.standard_normal(5)
        lo, hi = -np.ones(5), np.ones(5)
        x, free = box_qp(H, g, lo, hi, np.zeros(5))
        grad = H @ x + g
        assert np.all(x >= lo) and np.all(x <= hi)
        np.testing.assert_allclose(grad[free], 0.0, atol=1e-9)
        assert np.all(grad[(x <= lo)] >= -1e-9) and np.all(grad[(x >= hi)] <= 1e-9)


def test_adjoint_gradient_equals_finite_differences_and_vanishes_at_the_answer():
    A, B, q, r, qf, x0 = _lq(seed=1)
    N = 15
    step = LinearStep(A, B, lower=-0.3 * np.ones(2), upper=0.3 * np.ones(2))
    running, terminal = CostSum([StateCost(np.ones(4), q), ControlCost(r, 2)]), \
        StateCost(np.ones(4), qf)

    def total(us):
        x, c = x0, 0.0
        for u in us:
            c += running.value(x, u)
            x = step(x, u)
        return c + terminal.value(x, None)

    us = np.random.default_rng(2).uniform(-0.2, 0.2, (N, 2))
    xs = [x0]
    for u in us:
        xs.append(step(xs[-1], u))
    grad = cost_gradient(step, np.array(xs), us, running, terminal)
    fd = np.zeros_like(us)
    for k in range(N):
        for j in range(2):
            e = np.zeros_like(us)
            e[k, j] = 1e-6
            fd[k, j] = (total(us + e) - total(us - e)) / 2e-6
    np.testing.assert_allclose(grad, fd, atol=1e-6)
    sol = solve_box_ddp(step, x0, np.zeros((N, 2)), running, terminal)
    assert np.abs(sol.us).max() == pytest.approx(0.3)  # the bound is active somewhere
    assert sol.gradient < 1e-6
    # a deadline already passed: one iteration, the solution as it stands (not converged),
    # no better than the converged one
    stopped = solve_box_ddp(step, x0, np.zeros((N, 2)), running, terminal,
                            deadline=time.perf_counter())
    assert sol.iterations > 1 and sol.converged
    assert stopped.iterations == 1 and not stopped.converged
    assert stopped.cost >= sol.cost and stopped.history[1] <= stopped.history[0]


class _Upright(Cost):
    """A user-supplied term: ½ w (1 − cos q_i)-style cost on every joint's angle to π."""

    def __init__(self, w):
        self.w = w

    def value(self, x, u):
        return float(self.w * np.sum(1.0 + np.cos(x[:2])))

    def add_derivatives(self, x, u, d):
        d.lx[:2] -= self.w * np.sin(x[:2])
        d.lxx[[0, 1], [0, 1]] += self.w * np.maximum(-np.cos(x[:2]), 0.0)
        return self.value(x, u)


def test_pendubot_swing_up_replayed_in_mujoco_with_riccati_feedback_ends_upright():
    urdf = (ROOT / "urdf" / "pendubot.urdf").read_text()
    model = RobotModel.from_urdf(urdf)
    dt, N = 0.01, 300
    step = HybridStep(model, dt)
    goal = np.array([np.pi, 0.0, 0.0, 0.0])
    running = CostSum([StateCost(goal, [0.01, 0.01, 0.001, 0.001]), ControlCost(0.01, 1),
                       _Upright(0.0)])
    sol = solve_box_ddp(step, np.zeros(4), np.zeros((N, 1)), running,
                        StateCost(goal, [1000, 1000, 100, 100]))
    assert sol.converged
    assert np.all(np.abs(sol.us) <= model.effort_limit[0] + 1e-12)
    plant = build_plant(urdf, model, timestep=0.001, integrator="rk4")
    plant.set_state(np.zeros(2), np.zeros(2))
    sub = round(dt / 0.001)
    for k in range(N):
        q, v = plant.state()
        plant.d.ctrl[plant.ctrl] = sol.control(k, np.concatenate([q, v]), step.lower,
                                               step.upper)
        for _ in range(sub):
            plant.step()
    q, v = plant.state()
    assert abs(q[0] - np.pi) < 0.05 and abs(q[1]) < 0.05, (q, v)
    assert np.all(np.abs(v) < 0.5), v


def test_frame_cost_gradient_matches_finite_differences():
    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text())
    rng = np.random.default_rng(5)
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    R *= np.sign(np.linalg.det(R))
    cost = FrameCost(model, model.body_names[-1], position=[0.3, 0.2, 0.5], rotation=R,
                     position_weight=2.0, rotation_weight=0.7)
    from underactuated_control.optimal_control.costs import Derivatives

    x = np.concatenate([rng.uniform(-1, 1, model.nq), np.zeros(model.nv)])
    d = Derivatives.zeros(x.size, 0)
    cost.add_derivatives(x, None, d)
    fd = np.zeros(model.nq)
    for i in range(model.nq):
        e = np.zeros_like(x)
        e[i] = 1e-6
        fd[i] = (cost.value(x + e, None) - cost.value(x - e, None)) / 2e-6
    np.testing.assert_allclose(d.lx[:model.nq], fd, atol=1e-6)


def _knot_gradient(cost, xs: np.ndarray, k: int, n: int) -> np.ndarray:
    """Central differences of a path cost's total in knot k's first n state entries."""
    fd = np.zeros(n)
    for i in range(n):
        step = np.zeros_like(xs)
        step[k, i] = 1e-6
        fd[i] = (cost.total(xs + step, None) - cost.total(xs - step, None)) / 2e-6
    return fd


def test_frame_path_cost_is_pinocchios_path_error_and_its_derivatives_finite_differences():
    """Σ_k ½ w |p(q_k) − p*_k|² over a path of knots: each knot's position is Pinocchio's (the
    tool frame, an offset from its link), the gradient central differences of the total, the
    Hessian w J_pᵀ J_p with J_p Pinocchio's position rows; a knot's own value is refused."""
    import pinocchio as pin
    from oracle import PinRef

    from underactuated_control.optimal_control.costs import Derivatives

    text = (ROOT / "urdf" / "arm7.urdf").read_text()
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    fid = ref.pm.getFrameId("tool")
    rng = np.random.default_rng(11)
    N, n, w = 6, model.nv, 3.0
    xs = np.concatenate([rng.uniform(-1.5, 1.5, (N, n)), rng.normal(size=(N, n))], axis=1)
    targets = rng.uniform(-0.5, 0.5, (N, 3))
    cost = FramePathCost(model, "tool", targets, weight=w)
    d = Derivatives(np.zeros((N, 2 * n)), np.zeros((N, 7)), np.zeros((N, 2 * n, 2 * n)),
                    np.zeros((N, 7, 7)), np.zeros((N, 7, 2 * n)))
    cost.add_all_derivatives(xs, None, d)
    expected = 0.0
    for k in range(N):
        q = ref.q(xs[k, :n])
        pin.framesForwardKinematics(ref.pm, ref.pd, q)
        e = ref.pd.oMf[fid].translation - targets[k]
        expected += 0.5 * w * float(e @ e)
        J = pin.computeFrameJacobian(ref.pm, ref.pd, q, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        J = J[:, ref.v_perm]
        np.testing.assert_allclose(d.lxx[k, :n, :n], w * J.T @ J, atol=1e-10)
        np.testing.assert_allclose(d.lx[k, :n], w * J.T @ e, atol=1e-10)
        np.testing.assert_allclose(d.lx[k, :n], _knot_gradient(cost, xs, k, n), atol=1e-6)
    assert not np.any(d.lx[:, n:]) and not np.any(d.lu)  # positions only
    assert cost.total(xs, None) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(TypeError, match="running cost"):
        cost.value(xs[0], None)
    with pytest.raises(ValueError, match="6 targets for 5 knots"):
        cost.total(xs[:5], None)
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        cost.targets = np.zeros((4, 2))


def test_a_path_cost_with_rotations_is_pinocchios_turn_and_its_derivatives():
    """The pose path: Σ_k ½ w |p − p*_k|² + w_R (3 − tr R R*_kᵀ), R Pinocchio's tool frame
    rotation (a fixed rotation off its link); the gradient central differences of the total;
    the Gauss–Newton Hessian w J_pᵀ J_p + 2 w_R J_ωᵀ J_ω (Pinocchio's rows), which at R = R*
    is the exact Hessian of the rotation term (central differences of the gradient)."""
    import pinocchio as pin
    from oracle import PinRef

    from underactuated_control.optimal_control.costs import Derivatives

    text = (ROOT / "urdf" / "arm7.urdf").read_text()
    model = RobotModel.from_urdf(text)
    ref = PinRef(model, text)
    fid = ref.pm.getFrameId("tool")
    rng = np.random.default_rng(12)
    N, n, w, wr = 4, model.nv, 3.0, 0.7
    xs = np.concatenate([rng.uniform(-1.5, 1.5, (N, n)), rng.normal(size=(N, n))], axis=1)
    targets = rng.uniform(-0.5, 0.5, (N, 3))
    rotations = np.array([pin.exp3(rng.normal(size=3)) for _ in range(N)])

    def derivatives(cost, xs):
        d = Derivatives(np.zeros((N, 2 * n)), np.zeros((N, 7)), np.zeros((N, 2 * n, 2 * n)),
                        np.zeros((N, 7, 7)), np.zeros((N, 7, 2 * n)))
        cost.add_all_derivatives(xs, None, d)
        return d

    cost = FramePathCost(model, "tool", targets, weight=w, rotations=rotations,
                         rotation_weight=wr)
    d = derivatives(cost, xs)
    expected = 0.0
    for k in range(N):
        q = ref.q(xs[k, :n])
        pin.framesForwardKinematics(ref.pm, ref.pd, q)
        e = ref.pd.oMf[fid].translation - targets[k]
        R = ref.pd.oMf[fid].rotation
        expected += 0.5 * w * float(e @ e) + 0.5 * wr * np.sum((R - rotations[k]) ** 2)
        J = pin.computeFrameJacobian(ref.pm, ref.pd, q, fid, pin.LOCAL_WORLD_ALIGNED)
        J = J[:, ref.v_perm]
        np.testing.assert_allclose(d.lxx[k, :n, :n],
                                   w * J[:3].T @ J[:3] + 2 * wr * J[3:].T @ J[3:], atol=1e-10)
        np.testing.assert_allclose(d.lx[k, :n], _knot_gradient(cost, xs, k, n), atol=1e-6)
    assert cost.total(xs, None) == pytest.approx(expected, rel=1e-12)
    # at R = R* the rotation term's Hessian is the Gauss-Newton one exactly
    at = FramePathCost(model, "tool", targets, weight=0.0, rotation_weight=wr)
    placed = []
    for k in range(N):
        pin.framesForwardKinematics(ref.pm, ref.pd, ref.q(xs[k, :n]))
        placed.append(ref.pd.oMf[fid].rotation.copy())
    at.rotations = np.array(placed)
    d = derivatives(at, xs)
    assert np.abs(d.lx).max() < 1e-12
    for i in range(n):
        step = np.zeros_like(xs)
        step[:, i] = 1e-6
        fd = (derivatives(at, xs + step).lx - derivatives(at, xs - step).lx)[:, :n] / 2e-6
        np.testing.assert_allclose(d.lxx[:, :n, i], fd, atol=1e-6)
    with pytest.raises(ValueError, match="3 rotations for 4 knots"):
        FramePathCost(model, "tool", targets, rotations=rotations[:3]).total(xs, None)
    with pytest.raises(ValueError, match=r"\(N, 3, 3\)"):
        cost.rotations = np.zeros((4, 3))


def test_a_path_cost_gives_the_adjoint_gradient_every_knot():
    """cost_gradient with a running cost that exists only over the whole horizon (a path):
    equal to central differences of the total cost in every control."""
    from underactuated_control.optimal_control.problems import swing_problem

    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text()).with_passive(
        ["joint4"])
    q = np.array([0.0, 0.5, 0.0, -1.0, 0.0, 0.8, 0.0])
    targets = np.linspace([0.3, 0.0, 0.6], [0.3, 0.05, 0.62], 6)
    p = swing_problem(model, q, np.zeros(7), "tool", targets, dt=0.01)
    us = p.us_init + np.random.default_rng(2).normal(scale=0.5, size=p.us_init.shape)
    xs = np.zeros((len(us) + 1, 14))
    p.step.rollout(p.x0, us, xs, np.zeros((len(us), 6, 14)), np.zeros_like(us), 0.0,
                   p.step.lower, p.step.upper, xs, us.copy())

    def total(u):
        x = np.zeros_like(xs)
        p.step.rollout(p.x0, u, x, np.zeros((len(u), 6, 14)), np.zeros_like(u), 0.0,
                       p.step.lower, p.step.upper, x, u.copy())
        return p.running.total(x[:-1], u) + p.terminal.value(x[-1], None)

    grad = cost_gradient(p.step, xs, us, p.running, p.terminal)
    fd = np.zeros_like(us)
    for k in range(len(us)):
        for i in range(us.shape[1]):
            e = np.zeros_like(us)
            e[k, i] = 1e-6
            fd[k, i] = (total(us + e) - total(us - e)) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    with pytest.raises(ValueError, match="N \\+ 1 >= 2 positions"):
        swing_problem(model, q, np.zeros(7), "tool", np.zeros((1, 3)))


def test_the_first_guess_brakes_the_active_joints_while_the_failed_one_swings():
    """HybridStep.braked_rollout, the first guess of arrest_problem (and of swing_problem
    where it costs less): on a moving arm under gravity with a passive (damped) elbow, every
    knot's active acceleration (v' − v)/dt is the brake's −kd v_a − kp (q_a − q_a(0)) to
    round-off (the recursion's T_a with the step's armature), so the active joints follow the
    critically damped brake's semi-implicit recurrence, integrated here on its own, and come
    to rest. swing_problem takes the brake for a moving arm under gravity kept at its hand,
    and the start's torques (zero) in zero g along the path the arm coasts."""
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.optimal_control import problems
    from underactuated_control.passive_forces import JointForceParameters, PassiveForceModel

    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text()).with_passive(
        ["joint4"])
    q0 = np.array([0.0, 0.5, 0.0, -1.0, 0.0, 0.8, 0.0])
    v0 = np.array([0.4, -0.3, 0.2, 0.5, -0.2, 0.3, 0.1])
    kp, kd = 25.0, 10.0

    def assert_braked(step: HybridStep, us: np.ndarray, xs: np.ndarray) -> None:
        assert np.all(np.isfinite(xs)) and np.all(np.isfinite(us))
        assert np.all(us > step.lower) and np.all(us < step.upper)  # no knot clipped
        a = step.active
        np.testing.assert_allclose((xs[1:, 7:][:, a] - xs[:-1, 7:][:, a]) / step.dt,
                                   -kd * xs[:-1, 7:][:, a] - kp * (xs[:-1, :7][:, a] - q0[a]),
                                   atol=1e-8)
        assert np.max(np.abs(xs[1:, 7 + 3] - xs[:-1, 7 + 3])) > 1e-4  # the elbow swings free

    step = HybridStep(model, 0.005, PassiveForceModel(
        model, {"joint4": JointForceParameters(damping=2.0)}))
    us, xs = step.braked_rollout(np.concatenate([q0, v0]), 300, kp, kd)
    assert us.shape == (300, 6) and xs.shape == (301, 14)
    assert_braked(step, us, xs)
    a = step.active
    q_a, v_a = q0[a].copy(), v0[a].copy()
    for _ in range(300):  # the brake's recurrence alone: v' = v + dt qdd, q' = q + dt v'
        v_a = v_a + step.dt * (-kd * v_a - kp * (q_a - q0[a]))
        q_a = q_a + step.dt * v_a
    np.testing.assert_allclose(xs[-1, :7][a], q_a, atol=1e-10)
    np.testing.assert_allclose(xs[-1, 7:][a], v_a, atol=1e-10)
    assert np.max(np.abs(v_a)) < 0.05 * np.max(np.abs(v0))  # 1.5 s of (s + 5)²: at rest

    def cost(p: problems.Problem, us: np.ndarray) -> float:  # knot by knot, the solver's cost
        xs = [p.x0]
        for u in us:
            xs.append(p.step(xs[-1], u))
        return p.running.total(np.array(xs[:-1]), us) + p.terminal.value(xs[-1], None)

    # swing_problem's first guess: the brake or the start's torques held, whichever costs less
    for gravity, coasting in (((0.0, 0.0, -9.81), False), ((0.0, 0.0, 0.0), True)):
        arm = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text(), gravity=gravity,
                                   passive_joints=["joint4"])
        path = np.tile(frame_placement(arm, q0, "tool")[0], (301, 1))
        if coasting:  # the path the hand takes with the torques held (zero here): coasting
            step = HybridStep(arm, 0.005)
            x = np.concatenate([q0, v0])
            for k in range(1, 301):
                x = step(x, np.zeros(6))
                path[k] = frame_placement(arm, x[:7], "tool")[0]
        p = problems.swing_problem(arm, q0, v0, "tool", path, dt=0.005)
        held = np.tile(p.step.holding_torques(q0), (300, 1))
        braked = p.step.braked_rollout(p.x0, 300, kp, kd)[0]
        chosen, other = (held, braked) if coasting else (braked, held)
        np.testing.assert_array_equal(p.us_init, chosen)
        assert cost(p, chosen) < 0.5 * cost(p, other)
        if not coasting:
            assert_braked(p.step, p.us_init, p.first_guess)  # its first guess, its own step


def test_bad_problems_name_the_fault():
    model = RobotModel.from_urdf((ROOT / "urdf" / "space_arm.urdf").read_text(),
                                 floating_base=True)
    with pytest.raises(ValueError, match="more than one DOF"):
        HybridStep(model, 0.01)
    with pytest.raises(ValueError, match="dt"):
        HybridStep(RobotModel.from_urdf((ROOT / "urdf" / "acrobot.urdf").read_text()), 0.0)


def test_optimize_command_writes_the_trajectory_gains_and_plot(tmp_path, capsys):
    from underactuated_control.cli import main

    out = tmp_path / "out"
    assert main(["optimize", "acrobot", "--goal", "0", "0.5", "--horizon", "1", "--dt", "0.02",
                 "--out", str(out), "--quiet"]) == 0
    data = np.load(out / "solution.npz")
    xs, us, K = data["xs"], data["us"], data["K"]
    assert xs.shape == (51, 4) and us.shape == (50, 1) and K.shape == (50, 1, 4)
    np.testing.assert_allclose(xs[-1, :2], [0.0, 0.5], atol=0.02)
    # the CSV is the same trajectory; the elbow's 6 N·m limit holds
    rows = np.genfromtxt(out / "trajectory.csv", delimiter=",", names=True)
    np.testing.assert_allclose(rows["q_elbow"], xs[:, 1], rtol=1e-8, atol=1e-9)
    assert np.nanmax(np.abs(rows["u_elbow"])) <= 6.0
    assert main(["optimize", "acrobot", "--goal", "0", "--out", str(out)]) == 2
    assert "goal: give 2 finite values" in capsys.readouterr().err


def test_optimize_arrest_plans_the_failure_reactions_arrest_and_says_if_it_keeps_the_limits(
        tmp_path, capsys):
    """`optimize --arrest`: the bundled arm7 at the arm scenario's start with its elbow failed
    (19 N m about it) gets a plan inside the URDF's position and speed limits (exit 0; checked
    on the written trajectory); with the shoulder failed no plan keeps them (exit 1, and the
    line says so); a goal with --arrest is refused (exit 2)."""
    from underactuated_control.cli import main

    start = ["0", "-0.3", "0", "-2.2", "0", "2.0", "0.8"]
    out = tmp_path / "arrest"
    assert main(["optimize", "arm7", "--passive", "joint4", "--start", *start, "--arrest",
                 "--horizon", "1.5", "--out", str(out), "--quiet"]) == 0
    assert "within the limits" in capsys.readouterr().out
    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text())
    rows = np.genfromtxt(out / "trajectory.csv", delimiter=",", names=True)
    q = np.column_stack([rows[f"q_{j}"] for j in model.joint_names])
    v = np.column_stack([rows[f"v_{j}"] for j in model.joint_names])
    assert np.all(q >= model.position_lower - 0.01) and np.all(q <= model.position_upper + 0.01)
    assert np.all(np.abs(v) <= np.asarray(model.velocity_limit))
    assert main(["optimize", "arm7", "--passive", "joint2", "--start", *start, "--arrest",
                 "--horizon", "1.5", "--out", str(out), "--quiet"]) == 1
    assert "NOT within the limits" in capsys.readouterr().out
    assert main(["optimize", "arm7", "--arrest", "--goal", *start, "--out", str(out)]) == 2
    assert "--arrest plans to rest" in capsys.readouterr().err


def test_step_jacobians_equal_central_differences_with_passive_forces():
    from underactuated_control.passive_forces import JointForceParameters, PassiveForceModel

    model = RobotModel.from_urdf((ROOT / "urdf" / "arm7.urdf").read_text(),
                                 passive_joints=["joint2", "joint5"])
    forces = PassiveForceModel(model, {
        "joint2": JointForceParameters(damping=0.7, coulomb=0.4, stiffness=3.0,
                                       rest_position=0.2, coulomb_velocity_scale=0.3),
        "joint5": JointForceParameters(damping=0.2, coulomb=0.1)})
    step = HybridStep(model, 0.01, forces)
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)])
    u = rng.uniform(-5, 5, step.nu)
    f, Fx, Fu = step.derivatives(x, u)
    np.testing.assert_allclose(f, step(x, u), rtol=0, atol=0)
    h = 1e-6
    fd_x = np.column_stack([(step(x + h * e, u) - step(x - h * e, u)) / (2 * h)
                            for e in np.eye(x.size)])
    fd_u = np.column_stack([(step(x, u + h * e) - step(x, u - h * e)) / (2 * h)
                            for e in np.eye(u.size)])
    np.testing.assert_allclose(Fx, fd_x, atol=1e-7)
    np.testing.assert_allclose(Fu, fd_u, atol=1e-7)


def test_box_cost_is_zero_inside_and_its_derivatives_match_finite_differences():
    """BoxCost: nothing inside the box; outside, l_x equals central differences of the value
    and l_xx is the weight on the entries outside (the penalty is quadratic there); the
    vectorised total and derivatives equal the per-knot ones."""
    from underactuated_control.optimal_control.costs import Derivatives

    lower, upper = np.array([-1.0, -np.inf, 0.0]), np.array([1.0, 2.0, np.inf])
    box = BoxCost(lower, upper, 7.0)
    assert box.value(np.array([0.5, -50.0, 3.0]), None) == 0.0
    x = np.array([1.3, 2.5, -0.4])
    d = Derivatives.zeros(3, 1)
    value = box.add_derivatives(x, None, d)
    assert value == pytest.approx(0.5 * 7.0 * (0.3**2 + 0.5**2 + 0.4**2))
    h = 1e-6
    fd = [(box.value(x + h * e, None) - box.value(x - h * e, None)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(d.lx, fd, rtol=1e-6)
    np.testing.assert_array_equal(d.lxx, 7.0 * np.eye(3))
    xs = np.array([x, [0.0, 0.0, 1.0], [-2.0, 3.0, -1.0]])
    stacked = Derivatives(np.zeros((3, 3)), np.zeros((3, 1)), np.zeros((3, 3, 3)),
                          np.zeros((3, 1, 1)), np.zeros((3, 1, 3)))
    box.add_all_derivatives(xs, np.zeros((3, 1)), stacked)
    for k in range(3):
        one = Derivatives.zeros(3, 1)
        box.add_derivatives(xs[k], None, one)
        np.testing.assert_allclose(stacked.lx[k], one.lx)
        np.testing.assert_allclose(stacked.lxx[k], one.lxx)
    assert box.total(xs, np.zeros((3, 1))) == pytest.approx(sum(box.value(r, None) for r in xs))
    with pytest.raises(ValueError, match="lower <= upper"):
        BoxCost([1.0], [0.0], 1.0)


def test_the_steps_implicit_damping_damps_a_wrist_an_explicit_damper_cannot():
    """Romeo's left wrist roll (example-robot-data, never used to develop the planner; issue
    23's damping 0.3 N m s/rad, no dry friction here) failed, zero gravity, the failure
    reaction's 2.5 ms knots: r = dt (M⁻¹)_ii d ≈ 2.9 at the start, past the explicit damper's
    bound 2. Set turning at 0.05 rad/s with the other joints held, the explicit step's wrist
    speed is multiplied by about 1 − r each knot: it reverses and grows, to NaN. The implicit
    step (``HybridStep``'s default) multiplies it by about 1 / (1 + r): it slows to rest
    without reversing, as a damper does."""
    from helpers import issue_arm

    from underactuated_control.dynamics import mass_matrix

    joints = ["LShoulderPitch", "LShoulderYaw", "LElbowRoll", "LElbowYaw", "LWristRoll",
              "LWristYaw", "LWristPitch"]
    text = issue_arm("romeo_description/urdf/romeo.urdf", friction=0.0, joints=joints)
    model = RobotModel.from_urdf(text, gravity=(0.0, 0.0, 0.0), passive_joints=["LWristRoll"])
    q0 = np.array([0.29, -0.1, -0.62, -1.13, -0.29, 0.15, 0.64])  # bench/failure_cases.py's
    dt, wrist = 0.0025, model.joint_dofs("LWristRoll")[0]
    r = dt * np.linalg.inv(mass_matrix(model, q0))[wrist, wrist] * 0.3

    def wrist_speeds(implicit: bool) -> np.ndarray:
        """The wrist's velocity at each of 40 knots (0.1 s), until the state stops being
        finite."""
        step = HybridStep(model, dt, implicit_damping=implicit)
        x = np.concatenate([q0, np.zeros(model.nv)])
        x[model.nv + wrist] = 0.05
        hold, speeds = step.holding_torques(q0), []
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(40):
                x = step(x, hold) if np.all(np.isfinite(x)) else x
                speeds.append(x[model.nv + wrist])
        return np.array([0.05, *speeds])

    explicit, implicit = wrist_speeds(False), wrist_speeds(True)
    print(f"\n[Romeo wrist roll] dt (M^-1)_ii d = {r:.2f}; knot-to-knot factor: explicit "
          f"{explicit[1] / explicit[0]:.2f} (1 - r = {1 - r:.2f}), implicit "
          f"{implicit[1] / implicit[0]:.3f} (1/(1 + r) = {1 / (1 + r):.3f})")
    assert r > 2.0  # the premise
    np.testing.assert_allclose(explicit[1:6] / explicit[:5], 1 - r, rtol=0.05)
    assert not np.all(np.isfinite(explicit))  # diverged within 0.1 s
    np.testing.assert_allclose(implicit[1:6] / implicit[:5], 1 / (1 + r), rtol=0.05)
    assert np.abs(implicit[20:]).max() < 1e-6  # at rest


def test_a_light_passive_joints_friction_is_widened_until_the_step_resolves_it():
    """``resolved_passive_forces`` (the failure reaction's plans): the Unitree G1's wrist yaw
    (example-robot-data, issue 23's damping 0.3 N m s/rad and dry friction 0.05 N m; never
    used to develop the planner) failed, zero gravity, the 2.5 ms knots of the kept task's
    plan. With the URDF's Coulomb width (0.01 rad/s) the semi-implicit step cannot resolve
    the friction of so light a joint (dt (M⁻¹)_ii f_c/v_s ≈ 12): the free wrist, set turning
    at 0.05 rad/s with the other joints held, chatters, its velocity changing sign at knot
    after knot (the premise). Widened, dt (M⁻¹)_ii f_c/v_s ≤ 1 at the start (the step's
    damping is implicit), or dt (M⁻¹)_ii (d + f_c/v_s) ≤ 1 for the explicit step, so its
    friction is resolved: the wrist slows to rest without once reversing, as a damper and a
    dry friction do, in either step. The heavier elbow keeps its width (resolved already), and
    so does the wrist at knots fine enough."""
    from helpers import g1_left_arm

    from underactuated_control.dynamics import mass_matrix
    from underactuated_control.optimal_control.dynamics import resolved_passive_forces
    from underactuated_control.passive_forces import PassiveForceModel

    text, _, q0 = g1_left_arm()
    model = RobotModel.from_urdf(text, gravity=(0.0, 0.0, 0.0),
                                 passive_joints=["left_wrist_yaw_joint"])
    dt, wrist = 0.0025, model.joint_dofs("left_wrist_yaw_joint")[0]
    inverse = np.linalg.inv(mass_matrix(model, q0))[wrist, wrist]

    def turns(forces: PassiveForceModel, implicit: bool = True) -> tuple[int, float]:
        """(sign changes of the wrist's velocity over 0.2 s, its last |velocity|)."""
        step = HybridStep(model, dt, forces, implicit_damping=implicit)
        x = np.concatenate([q0, np.zeros(model.nv)])
        x[model.nv + wrist] = 0.05
        hold, velocities = step.holding_torques(q0), []
        for _ in range(80):
            x = step(x, hold)
            velocities.append(x[model.nv + wrist])
        signs = np.sign(velocities)
        return int(np.count_nonzero(signs[1:] != signs[:-1])), abs(velocities[-1])

    urdf = PassiveForceModel(model)
    resolved = resolved_passive_forces(model, q0, dt)
    d, f, width = resolved.coefficients()[:3, wrist]
    explicit = resolved_passive_forces(model, q0, dt, implicit_damping=False)
    width_explicit = explicit.coefficients()[2, wrist]
    print(f"\n[G1 wrist yaw] dt (M^-1)_ii (d + f/v_s): URDF width "
          f"{dt * inverse * (d + f / 0.01):.1f}, widened to {width:.3f} rad/s: "
          f"dt (M^-1)_ii f/v_s {dt * inverse * f / width:.2f} (explicit damping: "
          f"{width_explicit:.3f} rad/s); sign changes {turns(urdf)[0]} -> "
          f"{turns(resolved)[0]}")
    assert dt * inverse * (d + f / 0.01) > 2.0  # the premise: not even stable at rest
    assert turns(urdf)[0] >= 20 and turns(urdf, implicit=False)[0] >= 20
    assert dt * inverse * f / width <= 1.0 + 1e-12
    assert dt * inverse * (d + f / width_explicit) <= 1.0 + 1e-12
    changes, last = turns(resolved)
    assert changes == 0 and last < 0.01  # slowed to (near) rest, never reversed
    changes, last = turns(explicit, implicit=False)
    assert changes == 0 and last < 0.01
    elbow = RobotModel.from_urdf(text, passive_joints=["left_elbow_joint"])
    k = elbow.joint_dofs("left_elbow_joint")[0]
    assert resolved_passive_forces(elbow, q0, dt).coefficients()[2, k] == 0.01
    assert resolved_passive_forces(model, q0, 1e-5).coefficients()[2, wrist] == 0.01
