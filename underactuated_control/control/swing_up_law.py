"""Mode ``swing_up``: swing an acrobot or a pendubot up from hanging and balance it upright.

For any robot of two 1-DOF revolute joints, one passive, in a vertical plane (parallel axes
perpendicular to gravity), given by its URDF (acrobot: passive shoulder; pendubot: passive
elbow). Everything is computed from the model at start-up; nothing is a two-link formula.

Scales (from the model): ΔE = E_up − E_down (potential energies at the configurations of
largest and smallest potential energy; the upright is the former, where the tip is highest for
links whose centres of mass lie on them), ω0 = the fastest falling rate at the upright (the
unstable eigenvalue of the linearisation), D_max = the largest mass the motor feels.

**Pumping** — collocated partial feedback linearisation through the hybrid recursion. The
control input is the active joint's acceleration u = qdd_a. The recursion (section 5) is affine
in u, so two passes of (5.4) give T_a = tau0 + D u and qdd_p = p0 + J_D u (T_p, the passive
joint's URDF damping and friction, inside tau0 and p0). The energy E = ½ vᵀ M v + V(q) uses M
from ``mass_matrix`` and V from the bodies' centres of mass placed by the kinematics. With
Ẽ = E − E_target (E_target = E_up + swing_energy_margin·ΔE) and e_a the active joint's angle
from upright (nearest 2π branch, with hysteresis):

    u = −k_p e_a − 2ζ√k_p v_a + A tanh(σ k_e Ẽ v_p / A) − k_w Ẽ v_a / D

k_p = swing_kp·ω0², ζ = swing_damping, k_e = swing_ke·ω0/ΔE, A = swing_amplitude·τ_max/D_max
and σ = +1 (swing_sign; Spong's rule, as in the acrobot and pendubot energy controllers of the
literature: below the target energy the active joint accelerates against the passive joint's
motion). The last term is a motor torque −k_w Ẽ v_a, k_w = swing_power_gain·τ_max/(ΔE·ω0):
the energy changes only by the motor's power, dE/dt = T_a v_a (+ the passive joint's own
losses), so this term always moves E toward the target, whatever the configuration — Spong's
term alone can stall below it (a pendubot circling its elbow under a stiffly held shoulder).
Hanging at rest u = 0, so the active joint's target is offset by ``swing_kick`` until the
energy has risen by 5 % of ΔE. The motor's limit is in the design: u is bounded so that the
torque stays within swing_torque_fraction of the URDF effort limit (times the node's
effort_limit_scale), and the reported passive acceleration is the recursion's for the bounded u.

**Locking** — the homoclinic approach. Pumping ends precisely by locking the active joint at
its upright angle at the right moment: a lock (fast against the swing) conserves the passive
joint's generalized momentum p_p = (M v)_p, after which the robot is a rigid pendulum of energy
E_lock = p_p² / (2 M_pp) + V(q). When |e_a| < lock_angle and |E_lock − E_target| <
lock_energy_tolerance·ΔE, the active joint is locked (critically damped, bandwidth
lock_bandwidth·ω0) and the robot coasts up the homoclinic orbit of the upright; after
lock_timeout/ω0 without reaching the LQR it pumps again.

**Balancing** — LQR about the upright. A, B: central finite differences of the forward
dynamics (the recursion with every joint passive, URDF viscous damping included) about the
upright; the motor command passes through a first-order filter of time constant
torque_filter_time (smooth torque), part of the design state z = [q − q_up, v, τ]. The
continuous Riccati equation is solved with numpy (stable invariant subspace of the Hamiltonian,
then Newton–Kleinman steps); weights normalised: angles in rad, speeds by ω0, torque by the
effort limit. Region of attraction, found at start-up: the largest level zᵀPz of states on the
homoclinic orbit from which the LQR (saturated, filtered) brings the model to rest upright (a
bisection over the distance from the top, simulating the model's forward dynamics), and no
smaller than the level on which dV/dt < 0 at a fixed sample of states; times lqr_roa_scale.
Every phase switches to the LQR inside zᵀPz < ρ_in and the LQR falls back to pumping beyond
lqr_exit_factor·ρ_in.

**Torque rate.** The motor torque follows dτ/dt = clip((command − τ)/torque_filter_time, −S, S)
with S = swing_torque_rate·τ_max·ω0 while pumping and lqr_torque_rate·τ_max·ω0 when locked or
balancing (0: no limit); the region-of-attraction simulation uses the same rate limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..dynamics import forward_dynamics, mass_matrix
from ..jacobians import JacobianWorkspace
from ..model import REVOLUTE, RobotModel
from ..parameters import ParameterSpec
from ..passive_forces import PassiveForceModel
from .law import ControlLaw, LawOutput
from .swing_up_plan import (
    BackgroundPlanner,
    PlanCache,
    PlanTracker,
    PlanWeights,
    SwingUpPlan,
    plan_key,
    plan_swing_up,
)

__all__ = ["SwingUpLaw", "solve_care", "lqr_gain", "PUMPING", "LOCKED", "BALANCING"]

PUMPING, LOCKED, BALANCING = "pumping", "locked", "balancing"
TRACKING, REPLANNING = "tracking", "replanning"  # the planned strategy
REPLAN_DT, REPLAN_HORIZON = 0.005, 3.0  # s: a re-plan's longest step and shortest horizon
# Defaults that differ between the two kinds, tuned in normalised units on three mass/length
# sets each (`bench/bench_swing_up.py --tune`, (1+1)-ES); a parameter left at 0 (those whose 0
# is a value: negative) takes these. The swing-up is sensitive to them (the number of swings
# can change with the fourth digit), so they are kept as the search found them.
# the planned strategy's (P1) on design C.1, searched for the leaderboards' score offline
# ((1+1)-ES on the logarithms, MuJoCo RK4 2 ms, 10 s: bench/bench_swing_up.py --tune-plan)
PLAN_DEFAULTS = {
    "acrobot": {"plan_horizon": 2.436, "plan_dt": 0.002, "plan_state_weight": 6.019,
                "plan_velocity_weight": 67.78, "plan_torque_weight": 2127.0,
                "plan_rate_weight": 1089.4, "plan_terminal_weight": 8413.0},
    "pendubot": {"plan_horizon": 1.7811, "plan_dt": 0.005, "plan_state_weight": 3.9427,
                 "plan_velocity_weight": 153.74, "plan_torque_weight": 911.47,
                 "plan_rate_weight": 1286.2, "plan_terminal_weight": 3205.6},
}
KIND_DEFAULTS = {
    "acrobot": {"swing_power_gain": 0.7956434235621649,
                "swing_ke": 9.93547755071595,
                "swing_kp": 0.19478145894178245,
                "swing_damping": 0.8846442960022634,
                "swing_torque_fraction": 0.46089727784580586,
                "swing_kick": 0.028975088938821336,
                "lock_energy_tolerance": 0.012655848788123314,
                "lqr_roa_scale": 0.6443939511115839,
                "swing_torque_rate": 6.00747980696829,
                "lqr_torque_rate": 2.965796442789794,
                "lqr_r_torque": 3.7321349795875145,
                **PLAN_DEFAULTS["acrobot"]},
    "pendubot": {"swing_power_gain": 2.9016177067568156,
                 "swing_ke": 1.1597240998296243,
                 "swing_kp": 1.2870131895886991,
                 "swing_damping": 0.3577147504942883,
                 "swing_torque_fraction": 0.6457509836553399,
                 "swing_kick": 0.5389041302520706,
                 "lock_energy_tolerance": 0.00886989700222982,
                 "lqr_roa_scale": 0.5863001658842156,
                 "swing_torque_rate": 6.425063629195027,
                 "lqr_torque_rate": 9.249143643832374,
                 "lqr_r_torque": 9.065941634267553,
                 **PLAN_DEFAULTS["pendubot"]},
}
# parameters whose 0 is a value (negative: the kind's default); for the others 0 is
_ZERO_IS_A_VALUE = ("swing_kick", "swing_damping", "swing_torque_rate", "lqr_torque_rate",
                    "swing_power_gain", "plan_state_weight", "plan_velocity_weight",
                    "plan_rate_weight")
_KICK_ENERGY = 0.05  # the kick fades out over the first 5 % of ΔE
_MAX_STEP = 0.05  # s: a longer gap between states does not advance the torque filter further


def _kinds(name: str) -> str:
    """The kinds' defaults of ``name`` for its description: "acrobot 5.44, pendubot 2.48"."""
    return ", ".join(f"{kind} {values[name]:.3g}" for kind, values in KIND_DEFAULTS.items())


def _rk4_step(rate: Callable[[np.ndarray], np.ndarray], x: np.ndarray, h: float
              ) -> np.ndarray:
    """One classical Runge–Kutta step of dx/dt = rate(x)."""
    k1 = rate(x)
    k2 = rate(x + 0.5 * h * k1)
    k3 = rate(x + 0.5 * h * k2)
    k4 = rate(x + h * k3)
    return x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _wrap(x):
    return (np.asarray(x) + np.pi) % (2.0 * np.pi) - np.pi


# ====================================================================== Riccati (numpy only)
def _lyapunov(A: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """X with AᵀX + XA + Q = 0 (Kronecker form; small systems only)."""
    n = A.shape[0]
    eye = np.eye(n)
    L = np.kron(eye, A.T) + np.kron(A.T, eye)
    X = np.linalg.solve(L, -Q.reshape(-1, order="F")).reshape((n, n), order="F")
    return 0.5 * (X + X.T)


def solve_care(A: np.ndarray, B: np.ndarray, Q: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The stabilising solution P of AᵀP + PA − PBR⁻¹BᵀP + Q = 0.

    The stable invariant subspace of the Hamiltonian [[A, −BR⁻¹Bᵀ], [−Q, −Aᵀ]] gives P, then
    Newton–Kleinman steps polish it. ``ValueError`` when (A, B) is not stabilisable."""
    n = A.shape[0]
    Rinv = np.linalg.inv(R)
    G = B @ Rinv @ B.T
    H = np.block([[A, -G], [-Q, -A.T]])
    w, V = np.linalg.eig(H)
    stable = np.argsort(w.real)[:n]
    if np.any(w.real[stable] >= -1e-12 * max(1.0, np.abs(w).max())):
        raise ValueError("the linearisation is not stabilisable (Hamiltonian eigenvalues on "
                         "the imaginary axis)")
    U1, U2 = V[:n, stable], V[n:, stable]
    if np.linalg.cond(U1) > 1e12:
        raise ValueError("the linearisation is not stabilisable (no stable invariant subspace "
                         "of full rank)")
    P = np.real(np.linalg.solve(U1.T, U2.T).T)
    P = 0.5 * (P + P.T)
    for _ in range(5):  # Newton-Kleinman: P <- lyap(A - G P, Q + P G P)
        Acl = A - G @ P
        if np.linalg.eigvals(Acl).real.max() >= 0:
            break
        P_new = _lyapunov(Acl, Q + P @ G @ P)
        if np.abs(P_new - P).max() <= 1e-13 * max(1.0, np.abs(P).max()):
            P = P_new
            break
        P = P_new
    residual = A.T @ P + P @ A - P @ G @ P + Q
    if not np.all(np.isfinite(P)) or np.linalg.eigvals(A - G @ P).real.max() >= 0.0:
        raise ValueError("the linearisation is not stabilisable (the Riccati solution does "
                         "not stabilise it)")
    if np.abs(residual).max() > 1e-6 * max(1.0, np.abs(Q).max(), np.abs(P).max()):
        raise ValueError("the Riccati equation has no stabilising solution for this "
                         "linearisation")
    return P


def lqr_gain(A: np.ndarray, B: np.ndarray, Q: np.ndarray, R: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """(K, P) of the continuous LQR: u = −K x minimises ∫ xᵀQx + uᵀRu."""
    P = solve_care(A, B, Q, R)
    return np.linalg.solve(R, B.T @ P), P


# ====================================================================== the law
class SwingUpLaw(ControlLaw):
    mode = "swing_up"
    reference_kind = "none"
    parameters = (
        ParameterSpec("swing_ke", 0.0, "swing-up: energy-pumping gain k_e in units of ω0/ΔE "
                      "(the active joint's acceleration σ·k_e·Ẽ·v_passive); 0: the default of the "
                      f"robot's kind ({_kinds('swing_ke')})", unit="ω0/ΔE", low=0.0,
                      high=1e3),
        ParameterSpec("swing_kp", 0.0, "swing-up: stiffness pulling the active joint to its "
                      "upright angle while pumping, in units of ω0² (ω0: the upright's falling "
                      f"rate); 0: the default of the robot's kind ({_kinds('swing_kp')})",
                      unit="ω0²", low=0.0, high=100.0),
        ParameterSpec("swing_damping", -1.0, "swing-up: damping ratio of the active joint while "
                      f"pumping; negative: the default of the robot's kind "
                      f"({_kinds('swing_damping')})",
                      unit="1", low=-1.0, high=10.0),
        ParameterSpec("swing_power_gain", -1.0, "swing-up: pumping by the motor's power, the "
                      "torque −k_w·Ẽ·v_active with k_w in units of τ_max/(ΔE·ω0); 0: none; "
                      f"negative: the default of the robot's kind ({_kinds('swing_power_gain')})",
                      unit="τ_max/(ΔE·ω0)", low=-1.0, high=100.0),
        ParameterSpec("swing_amplitude", 5.0, "swing-up: the pumping acceleration saturates "
                      "(tanh) at this multiple of τ_max/D_max (what the motor gives)",
                      unit="τ_max/D_max", low=0.01, high=100.0),
        ParameterSpec("swing_sign", "positive", "swing-up: sign σ of the pumping term "
                      "(positive: while energy is lacking the active joint accelerates against "
                      "the passive joint's motion, Spong's rule)",
                      choices=("positive", "negative")),
        ParameterSpec("swing_energy_margin", 0.0, "swing-up: energy aimed at above the upright "
                      "rest energy, in units of ΔE (offsets damping losses on the way up)",
                      unit="ΔE", low=-0.2, high=0.5),
        ParameterSpec("swing_torque_fraction", 0.0, "swing-up: share of the motor's effort "
                      "limit the pumping may use; 0: the default of the robot's kind "
                      f"({_kinds('swing_torque_fraction')})", unit="1", low=0.0, high=1.0),
        ParameterSpec("swing_kick", -1.0, "swing-up: offset of the active joint's target while "
                      "the energy is within 5 % of ΔE of hanging at rest (where the pumping "
                      "term vanishes); negative: the default of the robot's kind "
                      f"({_kinds('swing_kick')})", unit="rad", low=-1.0, high=3.0),
        ParameterSpec("lock_energy_tolerance", 0.0, "swing-up: lock the active joint when the "
                      "rigid pendulum it leaves has the target energy within this share of ΔE; "
                      f"0: the default of the robot's kind ({_kinds('lock_energy_tolerance')})",
                      unit="ΔE", low=0.0, high=0.5),
        ParameterSpec("lock_angle", 0.1, "swing-up: ... and the active joint is this close to "
                      "upright", unit="rad", low=1e-3, high=1.0),
        ParameterSpec("lock_bandwidth", 1.5, "swing-up: bandwidth of the locked active joint "
                      "(critically damped), in units of ω0", unit="ω0", low=0.1, high=20.0),
        ParameterSpec("lock_timeout", 20.0, "swing-up: pump again after this long locked "
                      "without reaching the LQR, in units of 1/ω0", unit="1/ω0", low=1.0, high=1e3),
        ParameterSpec("lqr_q_passive", 1.0, "balancing LQR: weight of the passive joint's "
                      "angle error", unit="1/rad^2", low=1e-6, high=1e6),
        ParameterSpec("lqr_q_active", 1.0, "balancing LQR: weight of the active joint's angle "
                      "error", unit="1/rad^2", low=1e-6, high=1e6),
        ParameterSpec("lqr_q_velocity", 0.1, "balancing LQR: weight of the joint speeds in "
                      "units of ω0", unit="ω0", low=1e-6, high=1e6),
        ParameterSpec("lqr_r_torque", 0.0, "balancing LQR: weight of the motor torque in "
                      "units of its effort limit; 0: the default of the robot's kind "
                      f"({_kinds('lqr_r_torque')})", unit="τ_max", low=0.0, high=1e6),
        ParameterSpec("lqr_roa_scale", 0.0, "switch to the LQR inside this multiple of the "
                      "region-of-attraction level found at start-up; 0: the default of the "
                      f"robot's kind ({_kinds('lqr_roa_scale')})", unit="1", low=0.0,
                      high=100.0),
        ParameterSpec("lqr_exit_factor", 4.0, "fall back to pumping beyond this multiple of "
                      "the switch level", unit="1", low=1.0, high=1000.0),
        ParameterSpec("torque_filter_time", 0.015, "swing-up: time constant of the first-order "
                      "filter on the motor command (in the LQR design; 0: none)", unit="s",
                      low=0.0, high=0.5),
        ParameterSpec("swing_torque_rate", -1.0, "swing-up: largest rate of change of the motor "
                      "torque while pumping, in units of τ_max·ω0 per second (smooth "
                      "torque); 0: none; negative: the default of the robot's kind "
                      f"({_kinds('swing_torque_rate')})",
                      unit="τ_max·ω0/s", low=-1.0, high=100.0),
        ParameterSpec("lqr_torque_rate", -1.0, "locked and balancing: largest rate of change of "
                      "the motor torque, in units of τ_max·ω0 per second (in the "
                      "region-of-attraction simulation); 0: none; negative: the default of the "
                      f"robot's kind ({_kinds('lqr_torque_rate')})", unit="τ_max·ω0/s", low=-1.0,
                      high=100.0),
        ParameterSpec("swing_up_strategy", "energy", "swing-up: 'energy' pumps energy with "
                      "the motor and locks it at the right moment; 'planned' follows a "
                      "torque-limited swing-up optimised through the recursion (DDP, cached on "
                      "disk) with time-varying LQR, and re-plans after a knock",
                      choices=("energy", "planned")),
        ParameterSpec("plan_horizon", -1.0, "planned swing-up: duration of the plan from "
                      "hanging to upright; negative: the default of the robot's kind "
                      f"({_kinds('plan_horizon')})", unit="s", low=-1.0, high=30.0),
        ParameterSpec("plan_dt", -1.0, "planned swing-up: the plan's time step (between knots "
                      "the tracking interpolates); negative: the default of the robot's kind "
                      f"({_kinds('plan_dt')})", unit="s", low=-1.0, high=0.05),
        ParameterSpec("plan_state_weight", -1.0, "planned swing-up: weight w_q of the angles' "
                      "distance from upright along the plan (per second); negative: the "
                      f"default of the robot's kind ({_kinds('plan_state_weight')})",
                      unit="1/(rad²·s)", low=-1.0, high=1e6),
        ParameterSpec("plan_velocity_weight", -1.0, "planned swing-up: weight w_v of the joint "
                      "speeds in units of ω0 along the plan (per second); negative: the "
                      f"default of the robot's kind ({_kinds('plan_velocity_weight')})",
                      unit="1/s", low=-1.0, high=1e6),
        ParameterSpec("plan_torque_weight", -1.0, "planned swing-up: weight w_u of the motor "
                      "torque in units of its effort limit (per second); negative: the default "
                      f"of the robot's kind ({_kinds('plan_torque_weight')})", unit="1/s",
                      low=-1.0, high=1e6),
        ParameterSpec("plan_rate_weight", -1.0, "planned swing-up: weight of the motor torque's "
                      "rate in units of τ_max·ω0 (per second); > 0 plans through the command "
                      "filter (torque_filter_time), which the tracking then keeps; 0: no "
                      "filter while tracking; negative: the default of the robot's kind "
                      f"({_kinds('plan_rate_weight')})", unit="1/s", low=-1.0, high=1e6),
        ParameterSpec("plan_terminal_weight", -1.0, "planned swing-up: weight of the final "
                      "state's distance from upright at rest; negative: the default of the "
                      f"robot's kind ({_kinds('plan_terminal_weight')})", unit="1", low=-1.0,
                      high=1e9),
        ParameterSpec("plan_tracking_weight", 0.0, "planned swing-up: > 0: the tracking gains "
                      "are the time-varying LQR of the plan's linearisation with this weight on "
                      "the state (angles in rad, speeds in ω0) against the torque in units of "
                      "τ_max, unbounded; 0: the DDP's own Riccati gains (zero where the plan's "
                      "torque is at its limit). Re-plans use at least 1", unit="1", low=0.0,
                      high=1e9),
        ParameterSpec("plan_deviation", 1.0, "planned swing-up: re-plan when the state is this "
                      "far from the plan (|Δq| in rad + |Δv| in units of ω0)", unit="1",
                      low=0.01, high=100.0),
        ParameterSpec("plan_replan_time", 0.3, "planned swing-up: a re-plan starts from the "
                      "state predicted this long after the request (zero torque meanwhile); "
                      "the solve must finish within it", unit="s", low=0.0, high=5.0),
        ParameterSpec("plan_replan_inline", False, "planned swing-up: solve re-plans in the "
                      "control cycle (repeatable runs; the cycle blocks for the solve) instead "
                      "of a background thread"),
        ParameterSpec("plan_cache_dir", "", "planned swing-up: directory of the plan cache; "
                      "empty: $XDG_CACHE_HOME (or ~/.cache)/underactuated_control/"
                      "swing_up_plans"),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        self._check_model(model)
        super().__init__(model, settings, frame, workspace)
        s = {spec.name: settings.get(spec.name, spec.default) for spec in self.parameters}
        self.a = int(model.active_dofs[0])
        self.p = int(model.passive_dofs[0])
        self.kind = "acrobot" if self.p < self.a else "pendubot"  # passive joint at the base?
        for name, value in KIND_DEFAULTS[self.kind].items():
            if s[name] < 0.0 or (s[name] == 0.0 and name not in _ZERO_IS_A_VALUE):  # kind's
                s[name] = value
        self.settings = s
        self.active_name, self.passive_name = model.active_joints[0], model.passive_joints[0]
        limit = float(model.effort_limit[self.a]) * float(settings.get("effort_limit_scale", 1.0))
        if not (np.isfinite(limit) and limit > 0.0):
            raise ValueError(f"swing_up needs a finite effort limit > 0 on the motor of "
                             f"'{self.active_name}' (URDF <limit effort>), got {limit}")
        self.effort_limit = limit
        self.continuous = np.array([model.joint_types[k] == "continuous"
                                    for k in range(model.nb)])
        self._continuous_dofs = np.flatnonzero(self.continuous)  # two 1-DOF joints
        self.dynamics = self.workspace.dynamics
        self._active_ws = self.workspace.shared.hybrid("active")
        self._forward_ws = self.workspace.shared.hybrid("passive")
        self.friction = PassiveForceModel(model.with_passive(model.joint_names))
        self._masses = model.inertia[:, 3, 3].copy()
        self._com = np.array([[I[2, 4], I[0, 5], I[1, 3]] for I in model.inertia])  # m·c
        self._com /= np.maximum(self._masses, 1e-300)[:, None]
        self._gravity_vector = np.asarray(model.gravity, float)
        self._unit = np.ones(1)
        self._zero = np.zeros(1)
        self._tau = np.zeros(1)
        self._qdd_p = np.zeros(1)

        # -- the model's configurations and scales -------------------------------------------
        self.q_down = self._extremum(-1.0)
        self.q_up = self._extremum(+1.0)
        for k, name in enumerate(model.joint_names):
            lo, hi = model.position_lower[k], model.position_upper[k]
            if not self.continuous[k] and not (lo - 1e-9 <= self.q_up[k] <= hi + 1e-9):
                raise ValueError(f"the upright angle {self.q_up[k]:.3f} rad of '{name}' is "
                                 f"outside its URDF limits [{lo:g}, {hi:g}]")
        self.energy_up = self.potential(self.q_up)
        self.energy_down = self.potential(self.q_down)
        self.delta_energy = self.energy_up - self.energy_down
        if self.delta_energy <= 1e-9:
            raise ValueError("swing_up: the robot's potential energy does not depend on its "
                             "configuration (no gravity in its plane)")
        grid = np.linspace(-np.pi, np.pi, 13)[:-1]
        self.d_max = max(self._affine(np.array([x, y]), np.zeros(2))[1]
                         for x in grid for y in grid)

        # -- linearisation about the upright, LQR, region of attraction ----------------------
        self.filter_time = float(s["torque_filter_time"])
        self.A, self.B = self.linearisation()
        opened = np.linalg.eigvals(self.A).real.max()
        if opened <= 0.0:
            raise ValueError("swing_up: the upright configuration is not unstable; is the "
                             "robot hanging in a vertical plane?")
        self.omega0 = float(opened)
        self.A_design, self.B_design = self._augmented(self.A, self.B)
        self.swing_rate = s["swing_torque_rate"] * self.effort_limit * self.omega0  # N·m/s
        self.lqr_rate = s["lqr_torque_rate"] * self.effort_limit * self.omega0
        n = self.A_design.shape[0]
        qdiag = np.zeros(n)
        qdiag[self.p], qdiag[self.a] = s["lqr_q_passive"], s["lqr_q_active"]
        qdiag[2:4] = s["lqr_q_velocity"] / self.omega0 ** 2
        self.Q = np.diag(qdiag)
        self.R = np.array([[s["lqr_r_torque"] / self.effort_limit ** 2]])
        try:
            self.K, self.P = lqr_gain(self.A_design, self.B_design, self.Q + 1e-9 * np.eye(n),
                                      self.R)
        except ValueError as exc:
            raise ValueError(f"swing_up: no LQR about the upright of '{model.name}': {exc}"
                             ) from None
        self.rho_saturation = float(self.effort_limit ** 2 / (
            self.K @ np.linalg.solve(self.P, self.K.T))[0, 0])
        self.rho_certified = self._certified_level()
        self.orbit_reach, self.rho_orbit = self._orbit_level()
        self.rho_roa = max(self.rho_certified, self.rho_orbit)
        self.rho_in = s["lqr_roa_scale"] * self.rho_roa
        self.rho_out = s["lqr_exit_factor"] * self.rho_in

        # -- pumping and locking (normalised gains, sign from the model) ------------------------
        self.pump_sign = 1.0 if s["swing_sign"] == "positive" else -1.0
        self.k_p = s["swing_kp"] * self.omega0 ** 2
        self.k_e = s["swing_ke"] * self.omega0 / self.delta_energy
        self.k_w = s["swing_power_gain"] * self.effort_limit / (self.delta_energy * self.omega0)
        self.reach = s["swing_amplitude"] * self.effort_limit / self.d_max
        self.lock_omega = s["lock_bandwidth"] * self.omega0
        self.lock_timeout = s["lock_timeout"] / self.omega0
        self.energy_target = self.energy_up + s["swing_energy_margin"] * self.delta_energy
        self._loss_x, self._loss_i = self._orbit_loss_table()
        self.orbit_loss = float(self._loss_i[-1])  # the passive joint's losses, bottom to top
        self.pump_target = self.energy_target + self.orbit_loss

        # -- run-time state --------------------------------------------------------------------
        self.phase = PUMPING
        self.switches = 0  # -> balancing
        self.fallbacks = 0  # balancing -> pumping
        self.locks = 0
        self.tau_filtered = 0.0
        self._last_t: float | None = None
        self._lock_t = 0.0
        self._branch = 0.0  # 2π multiple of the active joint's target
        self.level = np.inf  # last zᵀPz
        self.energy_now = np.nan

        # -- the planned strategy (control/swing_up_plan.py) ------------------------------------
        self.planned = s["swing_up_strategy"] == "planned"
        self.tracker: PlanTracker | None = None
        self.replans = 0
        self.plan_status = ""
        if self.planned:
            self.plan_weights = PlanWeights(
                horizon=s["plan_horizon"], dt=s["plan_dt"], state=s["plan_state_weight"],
                velocity=s["plan_velocity_weight"], torque=s["plan_torque_weight"],
                rate=s["plan_rate_weight"], terminal=s["plan_terminal_weight"],
                filter_time=self.filter_time if s["plan_rate_weight"] > 0.0 else 0.0,
                tracking=s["plan_tracking_weight"])
            self.plan_cache = PlanCache(s["plan_cache_dir"] or None)
            # from a knocked (fast) state: finer steps, time to shed the energy
            self.replan_weights = replace(
                self.plan_weights, dt=min(self.plan_weights.dt, REPLAN_DT),
                horizon=max(self.plan_weights.horizon, REPLAN_HORIZON),
                tracking=max(self.plan_weights.tracking, 1.0))
            self._planner = BackgroundPlanner(self._solve_plan, s["plan_replan_inline"],
                                              "swing_up_planner")
            self._replan_at: float | None = None  # when the requested plan starts
            self._replan_offset = np.zeros(2)
            self.hanging_plan = self.plan_from(np.concatenate([self.q_down, np.zeros(2)]))

    # ------------------------------------------------------------------ model checks
    @staticmethod
    def _check_model(model: RobotModel) -> None:
        name = model.name
        if model.nb != 2 or model.nv != 2:
            raise ValueError(f"swing_up needs a robot of two 1-DOF revolute joints; '{name}' "
                             f"has {model.nb} moving joints ({list(model.joint_names)})")
        for k, j in enumerate(model.joint_names):
            if model.hinge_type[k] != REVOLUTE:
                raise ValueError(f"swing_up needs revolute joints; '{j}' is "
                                 f"{model.joint_types[k]}")
        if model.n_passive != 1:
            raise ValueError(f"swing_up needs exactly one passive joint (acrobot or pendubot); "
                             f"'{name}' has {model.n_passive}: {list(model.passive_joints)}")
        ws = JacobianWorkspace(model)
        ws.set_configuration(np.zeros(2))
        axes = [ws.E_world[k].T @ model.axis[k] for k in range(2)]
        g = np.asarray(model.gravity, float)
        if np.linalg.norm(g) == 0.0:
            raise ValueError("swing_up needs gravity (the model's gravity is zero)")
        if np.linalg.norm(np.cross(axes[0], axes[1])) > 1e-6:
            raise ValueError(f"swing_up needs parallel joint axes (a planar double pendulum); "
                             f"'{model.joint_names[0]}' and '{model.joint_names[1]}' are not")
        if abs(axes[0] @ g) > 1e-6 * np.linalg.norm(g):
            raise ValueError(f"swing_up needs joint axes perpendicular to gravity; "
                             f"'{model.joint_names[0]}' is not")

    # ------------------------------------------------------------------ energy (from the model)
    def potential(self, q: np.ndarray) -> float:
        """V(q) = −Σ m_k gᵀ c_k: the bodies' centres of mass placed by the kinematics."""
        ws = self.workspace
        ws.set_configuration(np.asarray(q, float))
        c = ws.p_world + (self._com[:, None, :] @ ws.E_world)[:, 0, :]  # c_k = p_k + E_kᵀ r_k
        return -float((c @ self._gravity_vector) @ self._masses)

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) from the recursion (``mass_matrix``, every joint active)."""
        return mass_matrix(self.model, np.asarray(q, float), workspace=self._active_ws)

    def kinetic(self, q: np.ndarray, v: np.ndarray) -> float:
        """½ vᵀ M(q) v."""
        return float(0.5 * v @ self.mass_matrix(q) @ v)

    def energy(self, q: np.ndarray, v: np.ndarray) -> float:
        return self.kinetic(q, v) + self.potential(q)

    def _extremum(self, sign: float) -> np.ndarray:
        """The configuration of largest (sign +1) or smallest (−1) potential energy: a grid,
        then Newton steps on the gravity torques g(q) = ∂V/∂q (the recursion at rest)."""
        grid = np.linspace(-np.pi, np.pi, 25)[:-1]
        best = max(((x, y) for x in grid for y in grid),
                   key=lambda x: sign * self.potential(np.array(x)))
        q = np.array(best, float)
        for _ in range(30):
            step = np.linalg.lstsq(self._gravity_hessian(q), -self._gravity(q), rcond=None)[0]
            q = q + np.clip(step, -0.2, 0.2)
            if np.abs(step).max() < 1e-12:
                break
        return np.where(self.continuous, _wrap(q), q)

    def _gravity(self, q: np.ndarray) -> np.ndarray:
        return self._active_ws.compute(q, np.zeros(2), np.zeros(2), np.zeros(0)).tau.copy()

    def _gravity_hessian(self, q: np.ndarray, h: float = 1e-6) -> np.ndarray:
        H = np.empty((2, 2))
        for j in range(2):
            dq = np.zeros(2)
            dq[j] = h
            H[:, j] = (self._gravity(q + dq) - self._gravity(q - dq)) / (2 * h)
        return H

    # ------------------------------------------------------------------ the recursion, affine in u
    def _affine(self, q: np.ndarray, v: np.ndarray, forces: np.ndarray | None = None
                ) -> tuple[float, float, float, float]:
        """(tau0, D, p0, J): T_a = tau0 + D u and qdd_p = p0 + J u for u = qdd_a, from two
        passes of the hybrid recursion (T_p from the URDF's damping and friction: ``forces``,
        the passive-force model of every joint at (q, v), when the caller has it)."""
        if forces is None:
            forces = self.friction.all_joints(q, v)
        Tp = forces[self.p:self.p + 1]
        res = self.dynamics.compute(q, v, self._zero, Tp)
        tau0, p0 = float(res.tau_active[0]), float(res.qdd_passive[0])
        res = self.dynamics.solve(self._unit, Tp)
        return tau0, float(res.tau_active[0]) - tau0, p0, float(res.qdd_passive[0]) - p0

    # ------------------------------------------------------------------ linearisation
    def _qdd(self, q: np.ndarray, v: np.ndarray, tau_motor: float) -> np.ndarray:
        """Forward dynamics with the motor torque and the URDF's viscous damping."""
        tau = -self.model.damping * v
        tau[self.a] += tau_motor
        return forward_dynamics(self.model, q, v, tau, workspace=self._forward_ws)

    def linearisation(self, q0: np.ndarray | None = None, h: float = 1e-6
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(A, B) of x = [q − q0, v] with the motor torque as input, about (q0, v = 0, τ = 0):
        central finite differences of the forward dynamics."""
        q0 = self.q_up if q0 is None else np.asarray(q0, float)
        A = np.zeros((4, 4))
        A[:2, 2:] = np.eye(2)
        for j in range(4):
            dx = np.zeros(4)
            dx[j] = h
            plus = self._qdd(q0 + dx[:2], dx[2:], 0.0)
            minus = self._qdd(q0 - dx[:2], -dx[2:], 0.0)
            A[2:, j] = (plus - minus) / (2 * h)
        B = np.zeros((4, 1))
        B[2:, 0] = (self._qdd(q0, np.zeros(2), h) - self._qdd(q0, np.zeros(2), -h)) / (2 * h)
        return A, B

    def _augmented(self, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The design model: with a torque filter, z = [x, τ] and the command as input."""
        if self.filter_time <= 0.0:
            return A.copy(), B.copy()
        Ta = np.zeros((5, 5))
        Ta[:4, :4], Ta[:4, 4:] = A, B
        Ta[4, 4] = -1.0 / self.filter_time
        Tb = np.zeros((5, 1))
        Tb[4, 0] = 1.0 / self.filter_time
        return Ta, Tb

    def _balancing_command(self, z: np.ndarray) -> float:
        """The balancing LQR's motor command −K z, within the effort limit."""
        return min(max(-float((self.K @ z)[0]), -self.effort_limit), self.effort_limit)

    def _closed_loop_rate(self, z: np.ndarray) -> np.ndarray:
        """dz/dt of the nonlinear robot under the (saturated) LQR command."""
        q, v = self.q_up + z[:2], z[2:4]
        command = self._balancing_command(z)
        if self.filter_time > 0.0:
            tau = z[4]
            rate = (command - tau) / self.filter_time
            if self.lqr_rate > 0.0:
                rate = min(max(float(rate), -self.lqr_rate), self.lqr_rate)
            return np.concatenate([v, self._qdd(q, v, tau), [rate]])
        return np.concatenate([v, self._qdd(q, v, command)])

    def _certified_level(self, directions: int = 160, levels: int = 20) -> float:
        """The largest level ρ such that dV/dt < 0 (V = zᵀPz) at every sampled state with
        zᵀPz ≤ ρ (a fixed set of directions on each of ``levels`` level sets up to
        4 ρ_saturation, where the linear command reaches the limit)."""
        n = self.P.shape[0]
        rng = np.random.default_rng(1)
        w = rng.normal(size=(directions, n))
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        shapes = np.linalg.solve(np.linalg.cholesky(self.P).T, w.T).T  # zᵀPz = 1 on each
        best = 0.0
        for rho in 4.0 * self.rho_saturation * np.geomspace(1e-4, 1.0, levels):
            for z in np.sqrt(rho) * shapes:
                if 2.0 * z @ self.P @ self._closed_loop_rate(z) >= 0.0:
                    return best
            best = rho
        return best

    def orbit_state(self, distance: float) -> np.ndarray:
        """z on the homoclinic orbit of the upright with the active joint locked upright:
        the passive joint ``distance`` rad from upright, moving toward it with the speed the
        upright's energy leaves it (filter state 0)."""
        q = self.q_up.copy()
        q[self.p] += distance
        M = self.mass_matrix(q)
        speed = np.sqrt(max(0.0, 2.0 * (self.energy_up - self.potential(q)) / M[self.p, self.p]))
        z = np.zeros(self.A_design.shape[0])
        z[self.p] = distance
        z[2 + self.p] = -np.sign(distance) * speed
        return z

    def _captures(self, z: np.ndarray, duration: float, dt: float = 0.004) -> bool:
        """The model (forward dynamics, RK4) under the saturated, filtered LQR from z comes to
        rest upright within ``duration``."""
        z = z.copy()
        for _ in range(int(duration / dt)):
            z = _rk4_step(self._closed_loop_rate, z, dt)
            if not np.all(np.abs(z[:4]) < 10.0):
                return False
        return bool(np.abs(z[:2]).max() < 1e-3 and np.abs(z[2:4]).max() < 1e-2)

    def _orbit_level(self, steps: int = 6) -> tuple[float, float]:
        """(distance, level): the farthest point of the homoclinic orbit (bisection over the
        passive joint's distance from upright, up to 2 rad) from which the LQR captures the
        model, and its level zᵀPz."""
        duration = 25.0 / float(np.linalg.eigvals(self.A).real.max())
        lo, hi = 0.0, 2.0
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            if self._captures(self.orbit_state(mid), duration) and \
                    self._captures(self.orbit_state(-mid), duration):
                lo = mid
            else:
                hi = mid
        if lo == 0.0:
            return 0.0, 0.0
        z = self.orbit_state(lo)
        return lo, float(z @ self.P @ z)

    # ------------------------------------------------------------------ the law
    def hold_reference(self, q: np.ndarray) -> None:
        return None

    def state_error(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """z = [q − q_up (continuous joints wrapped), v, filtered torque]."""
        n = self.q_up.shape[0]
        z = np.empty(2 * n + 1 if self.filter_time > 0.0 else 2 * n)
        z[:n] = q
        z[:n] -= self.q_up
        z[self._continuous_dofs] = _wrap(z[self._continuous_dofs])
        z[n:2 * n] = v
        if self.filter_time > 0.0:
            z[2 * n] = self.tau_filtered
        return z

    def compute(self, q: np.ndarray, v: np.ndarray, reference: Any, t: float,
                with_jacobians: bool) -> LawOutput:
        q = np.asarray(q, float)
        v = np.asarray(v, float)
        dt = 0.0 if self._last_t is None else min(max(t - self._last_t, 0.0), _MAX_STEP)
        self._last_t = t
        J_G = J_D = None
        if with_jacobians:
            J_G, J_D = self.workspace.generalized(self.frame, q)
        forces = self.friction.all_joints(q, v)
        tau0, D, p0, Jd = self._affine(q, v, forces)
        compensation = -float(forces[self.a])  # the motor's own joint
        z = self.state_error(q, v)
        self.level = float(z @ self.P @ z)
        if self.phase != BALANCING and self.level < self.rho_in:
            self.phase = BALANCING
            self.switches += 1
        elif self.phase == BALANCING and self.level > self.rho_out:
            self.phase = PUMPING
            self.fallbacks += 1
            if self.planned:
                self._request_plan(q, v, t)
        limit = self.effort_limit
        if self.phase == BALANCING:
            command = self._balancing_command(z)
        elif self.planned:
            command = self._follow_plan(q, v, t, compensation)
        else:
            command = self._swing(q, v, t, tau0, D, compensation)
        if self.phase == TRACKING and self.tracker.plan.filter_time == 0.0:
            self.tau_filtered = command  # a plan without the filter: its torque as it is (P2)
        # the command through the first-order filter (implicit Euler) and the rate limit:
        # dτ/dt = clip((command − τ)/T_f, −S, S)
        change = dt * (command - self.tau_filtered) / (self.filter_time + dt) \
            if self.filter_time > 0.0 else command - self.tau_filtered
        rate = self.swing_rate if self.phase == PUMPING else \
            self.lqr_rate if self.phase in (LOCKED, BALANCING) else 0.0
        if rate > 0.0:
            change = min(max(change, -rate * dt), rate * dt) if dt > 0.0 else 0.0
        self.tau_filtered += change
        tau_motor = min(max(float(self.tau_filtered), -limit), limit)
        # the accelerations this torque gives, from the same two passes of the recursion
        u = (tau_motor - compensation - tau0) / D
        self._tau[0] = tau_motor
        self._qdd_p[0] = p0 + Jd * u
        return LawOutput(self._tau, self._qdd_p, J_G, J_D, self.phase,
                         friction_compensated=True)  # its motor joint's friction: above

    # ------------------------------------------------------------------ the planned strategy
    def plan_from(self, x0: np.ndarray) -> SwingUpPlan:
        """(P1) from ``x0``, from the disk cache when it has it."""
        key = plan_key(self.model, x0, self.q_up, self.effort_limit, self.plan_weights)
        plan = self.plan_cache.load(key)
        if plan is None:
            plan = self._solve_plan(x0)
            self.plan_cache.store(key, plan)
        return plan

    def warm_kernels(self, q: np.ndarray) -> np.ndarray:
        """For ``warmup.warm_law``: the planned strategy compiles its re-plans' kernels (a
        two-knot solve) and is warmed where its plan starts (hanging at rest: no re-plan);
        returns the configuration to warm the cycle at."""
        if not self.planned:
            return q
        x0 = np.concatenate([self.q_down, np.zeros(2)])
        self._solve_plan(x0, replace(self.replan_weights, horizon=2 * self.replan_weights.dt,
                                     iterations=2))
        return self.q_down.copy()

    def _solve_plan(self, x0: np.ndarray, weights: PlanWeights | None = None) -> SwingUpPlan:
        return plan_swing_up(self.model, x0, self.q_up, self.effort_limit, self.omega0,
                             weights or self.plan_weights)

    def _turns(self, q: np.ndarray, reference: np.ndarray) -> np.ndarray:
        """2π multiples taking ``reference`` nearest to ``q`` (continuous joints)."""
        return np.where(self.continuous,
                        2 * np.pi * np.round((q - reference) / (2 * np.pi)), 0.0)

    def _deviation(self, tracker: PlanTracker, t: float, q: np.ndarray, v: np.ndarray
                   ) -> float:
        e = tracker.error(t, q, v, self.tau_filtered)
        return float(np.abs(e[:2]).max() + np.abs(e[2:4]).max() / self.omega0)

    def _request_plan(self, q: np.ndarray, v: np.ndarray, t: float) -> None:
        """A new plan from the state predicted ``plan_replan_time`` ahead (zero torque, RK4),
        tracked from then on."""
        x = np.concatenate([q, v])
        horizon = self.settings["plan_replan_time"]
        steps = int(np.ceil(horizon / 0.002))
        h = horizon / steps if steps else 0.0

        def rate(y: np.ndarray) -> np.ndarray:
            return np.concatenate([y[2:], self._qdd(y[:2], y[2:], 0.0)])

        for _ in range(steps):
            x = _rk4_step(rate, x, h)
        offset = self._turns(x[:2], np.zeros(2))
        x[:2] -= offset
        self.tracker = None
        self._replan_at, self._replan_offset = t + horizon, offset
        self.phase = REPLANNING
        self.replans += 1
        self._planner.request(x, self.replan_weights)

    def _follow_plan(self, q: np.ndarray, v: np.ndarray, t: float, compensation: float
                     ) -> float:
        """Tracking (P2), or zero torque while a re-plan is being solved."""
        if self.tracker is None and self._replan_at is None:  # the first state
            plan = self.hanging_plan
            offset = self._turns(q, plan.xs[0, :2])
            tracker = PlanTracker(plan, t, offset)
            if self._deviation(tracker, t, q, v) <= self.settings["plan_deviation"]:
                self.tracker, self.phase = tracker, TRACKING
                return 0.0  # the first state's torque is zero, as the filter's (dt = 0)
            self._request_plan(q, v, t)
        if self.phase == REPLANNING and self._replan_at is not None and t >= self._replan_at:
            result = self._planner.take()
            if isinstance(result, Exception):  # the energy strategy from now on
                self.planned, self.phase = False, PUMPING
                self.plan_status = f"re-plan failed ({result}): pumping energy"
                return 0.0
            if result is not None:
                self.tracker = PlanTracker(result, self._replan_at, self._replan_offset)
                self._replan_at, self.phase = None, TRACKING
        if self.phase == REPLANNING or self.tracker is None:
            return 0.0
        if self.tracker.ended(t):
            if self.level < self.rho_out:
                self.phase = BALANCING
                self.switches += 1
                return self._balancing_command(self.state_error(q, v))
            self._request_plan(q, v, t)
            return 0.0
        if self._deviation(self.tracker, t, q, v) > self.settings["plan_deviation"]:
            self._request_plan(q, v, t)
            return 0.0
        return self.tracker.command(t, q, v, self.tau_filtered, self.effort_limit) + compensation

    def _orbit_loss_table(self, samples: int = 91) -> tuple[np.ndarray, np.ndarray]:
        """(x, W(x)): the energy the passive joint's URDF damping d and friction f take on
        the homoclinic orbit (active joint locked upright) from x rad off upright to the top,
        W(x) = d ∫ |v_p| dq_p + f |x| with the orbit's speed v_p(q) from the energy, for
        x in [0, π] (the orbit is symmetric)."""
        d = float(self.model.damping[self.p])
        f = float(self.model.friction[self.p])
        x = np.linspace(0.0, np.pi, samples)
        if d == 0.0 and f == 0.0:
            return x, np.zeros(samples)
        speed = np.empty(samples)
        for i, xi in enumerate(x):
            q = self.q_up.copy()
            q[self.p] += xi
            M = self.mass_matrix(q)
            speed[i] = np.sqrt(max(0.0, 2.0 * (self.energy_up - self.potential(q))
                                   / M[self.p, self.p]))
        dx = np.diff(x)
        integral = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * dx)])
        return x, d * integral + f * x

    def coast_loss(self, offset: float, speed: float) -> float:
        """Energy lost coasting from ``offset`` rad off upright (passive joint) to the top, the
        short way when moving toward it, else round through the bottom."""
        if self.orbit_loss == 0.0:
            return 0.0
        x = float(abs(_wrap(offset)))
        near = float(np.interp(x, self._loss_x, self._loss_i))
        toward = speed * _wrap(offset) <= 0.0
        return near if toward else 2.0 * self.orbit_loss - near

    def _active_error(self, q: np.ndarray, offset: float) -> float:
        """The active joint's angle from upright (+ offset), on the nearest 2π branch with
        hysteresis (a continuous joint may have turned over while pumping)."""
        a = self.a
        target = self.q_up[a] + offset
        if not self.continuous[a]:
            return float(q[a] - target)
        e = q[a] - target - self._branch
        if abs(e) > np.pi + 0.5:
            self._branch += 2.0 * np.pi * np.round(e / (2.0 * np.pi))
            e = q[a] - target - self._branch
        return float(e)

    def _swing(self, q: np.ndarray, v: np.ndarray, t: float, tau0: float, D: float,
               compensation: float) -> float:
        """Pumping or locked: the motor torque of the PFL acceleration (bounded)."""
        s = self.settings
        a, p = self.a, self.p
        M = self.mass_matrix(q)
        potential = self.potential(q)
        energy = float(0.5 * v @ M @ v) + potential
        self.energy_now = energy
        e_energy = energy - self.pump_target
        kick = s["swing_kick"] * min(max(
            1.0 - (energy - self.energy_down) / (_KICK_ENERGY * self.delta_energy), 0.0), 1.0)
        e = self._active_error(q, kick)
        if self.phase == PUMPING:
            momentum = float(M[p] @ v)  # conserved through a quick lock of the active joint
            rigid = 0.5 * momentum ** 2 / M[p, p] + potential
            needed = self.energy_target + self.coast_loss(q[p] - self.q_up[p], v[p])
            if abs(e) < s["lock_angle"] and abs(rigid - needed) < \
                    s["lock_energy_tolerance"] * self.delta_energy:
                self.phase = LOCKED
                self.locks += 1
                self._lock_t = t
        elif t - self._lock_t > self.lock_timeout:
            self.phase = PUMPING
        if self.phase == LOCKED:
            w = self.lock_omega
            u = -w * w * e - 2.0 * w * v[a]
            bound = self.effort_limit
        else:
            pumping = self.reach * float(np.tanh(
                self.pump_sign * self.k_e * e_energy * v[p] / self.reach))
            power = -self.k_w * e_energy * v[a] / D  # the torque −k_w Ẽ v_a as an acceleration
            u = -self.k_p * e - 2.0 * s["swing_damping"] * np.sqrt(self.k_p) * v[a] + pumping \
                + power
            bound = s["swing_torque_fraction"] * self.effort_limit
        lo, hi = (-bound - compensation - tau0) / D, (bound - compensation - tau0) / D
        u = min(max(float(u), lo), hi)
        return tau0 + D * u + compensation
