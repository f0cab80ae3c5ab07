"""Discrete dynamics of a robot with passive joints for trajectory optimisation.

State x = (q, v), control u = T_a, the active joints' torques: their effort limits are then a
box on u, which a box-constrained DDP keeps exactly (with u = the active accelerations, the
same limits become state-dependent polytopes T_a(q, v, u)). The passive joints are free: their
torques are the passive-force model T_p(q, v) (URDF damping and friction, or overrides).

    qdd = H(q, v, T)   the hybrid recursion with every joint's force known (section 5 with the
                       active set empty: the articulated-body forward dynamics), T_a = u,
                       T_p = T_p(q, v)
    v' = v + dt qdd,   q' = q + dt v'             (semi-implicit Euler)

with the passive joints' viscous damping d implicit (as MuJoCo's Euler integrator treats joint
damping): the recursion runs with the armature A = dt d on those joints, so that
(M + dt D) qdd = T − C − D v, i.e. M qdd = T − C − D v'. An explicit damper is stable only
while dt (M⁻¹)_ii d_i < 2, which a light wrist passes at 2.5 ms (doc/failure_analysis.md);
the implicit one damps at any step. ``implicit_damping=False`` gives the explicit step.

``derivatives`` gives f and its Jacobians F_x, F_u from the analytic partials of the
recursion (``derivatives.py``, doc/theory/derivatives.md) with every joint's force known,
∂qdd/∂(q, v, T), closed through the passive-force model (T_p = T_p(q, v), (D17) there):

    ∂qdd/∂q = ∂qdd/∂q|_T + ∂qdd/∂T_p ∂T_p/∂q,   ∂qdd/∂v likewise,   ∂qdd/∂u = ∂qdd/∂T_a
"""

from __future__ import annotations

import numpy as np

from ..derivatives import dwork_size
from ..dynamics import OK, HybridDynamics, mass_matrix
from ..model import RobotModel
from ..passive_forces import JointForceParameters, PassiveForceModel
from .kernels import linearize_kernel, rollout_kernel

__all__ = ["DiscreteDynamics", "HybridStep", "FilteredTorques", "resolved_passive_forces"]

RESOLVED_FLOOR = 0.25  # the share of the monotone bound left to a DOF's friction at the least


def resolved_passive_forces(model: RobotModel, q: np.ndarray, dt: float,
                            forces: PassiveForceModel | None = None,
                            implicit_damping: bool = True) -> PassiveForceModel:
    """``forces`` (default: the URDF's) with each passive DOF's smooth-Coulomb width v_s
    widened where the step of ``dt`` would not resolve it at ``q``. At rest the Coulomb term
    −f_c tanh(v/v_s) acts as an explicit damper of slope f_c/v_s, and the semi-implicit step
    (D2) damps DOF i, of inverse inertia (M⁻¹)_ii, without overshoot only while

        dt (M⁻¹)_ii f_c,i / v_s,i ≤ 1                  (``HybridStep``'s implicit damping)
        dt (M⁻¹)_ii (d_i + f_c,i / v_s,i) ≤ 1          (``implicit_damping=False``)

    (past 2 it diverges; the Unitree G1's wrist yaw, (M⁻¹)_ii ≈ 970 1/(kg·m²), d 0.3,
    f_c 0.05, v_s 0.01 at 2.5 ms: 12.8; the planned wrist chattered at every knot and a re-plan
    swung the wrist roll into its limit on it). So v_s,i ≥ f_c,i dt (M⁻¹)_ii, or with an
    explicit damper f_c,i dt (M⁻¹)_ii / max(1 − dt (M⁻¹)_ii d_i, ``RESOLVED_FLOOR``): the
    friction keeps what the damping leaves of the bound (at least its floor, where the damping
    alone nearly or already passes it). DOF the step resolves keep their width; a model with
    no passive friction is returned as it is."""
    base = forces if forces is not None else PassiveForceModel(model)
    damping, coulomb, scale, stiffness, rest = base.coefficients()
    passive = [i for i in model.passive_dofs if coulomb[i] > 0.0]
    if not passive or model.nq != model.nv:  # (HybridStep refuses multi-DOF joints)
        return base
    inverse = np.diag(np.linalg.inv(mass_matrix(model, np.asarray(q, float))))
    overrides = dict(base.overrides)
    for i in passive:
        reach = dt * inverse[i]  # s/(kg m²): dt (M⁻¹)_ii
        left = 1.0 if implicit_damping else max(1.0 - reach * damping[i], RESOLVED_FLOOR)
        width = coulomb[i] * reach / left
        if width > scale[i]:
            name = model.dof_names[i]
            overrides[name] = JointForceParameters(
                damping=float(damping[i]), coulomb=float(coulomb[i]),
                stiffness=float(stiffness[i]), rest_position=float(rest[i]),
                coulomb_velocity_scale=float(width))
    return PassiveForceModel(model, overrides)


class DiscreteDynamics:
    """x' = f(x, u) as the solver sees it: ``__call__``, ``derivatives`` (f, F_x, F_u),
    optional ``lower``/``upper`` control bounds, and the whole-horizon ``rollout`` and
    ``linearize`` (here knot by knot; ``HybridStep`` runs them compiled)."""

    def __call__(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def derivatives(self, x: np.ndarray, u: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def rollout(self, x0: np.ndarray, us_ref: np.ndarray, xs_ref: np.ndarray, K: np.ndarray,
                kff: np.ndarray, alpha: float, lower: np.ndarray, upper: np.ndarray,
                xs: np.ndarray, us: np.ndarray) -> bool:
        """xs, us of u_k = clip(ū_k + α k_k + K_k (x_k − x̄_k)) from x0; False if the states
        stop being finite."""
        xs[0] = x0
        for k in range(len(us)):
            with np.errstate(over="ignore", invalid="ignore"):  # a diverging trial step
                us[k] = np.clip(us_ref[k] + alpha * kff[k] + K[k] @ (xs[k] - xs_ref[k]),
                                lower, upper)
                xs[k + 1] = self(xs[k], us[k])
            if not np.all(np.isfinite(xs[k + 1])):
                return False
        return True

    def linearize(self, xs: np.ndarray, us: np.ndarray, Fx: np.ndarray, Fu: np.ndarray
                  ) -> None:
        for k in range(len(us)):
            _, Fx[k], Fu[k] = self.derivatives(xs[k], us[k])


class HybridStep(DiscreteDynamics):
    """x' = f(x, u) over ``dt`` [s] for ``model`` (its passive set decides which joints ``u``
    drives). Joints must have one DOF each (q and v of the same size). ``implicit_damping``:
    the passive joints' viscous damping taken at v' (the module's docstring), else at v."""

    def __init__(self, model: RobotModel, dt: float,
                 passive_forces: PassiveForceModel | None = None,
                 implicit_damping: bool = True) -> None:
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be > 0 s, got {dt}")
        multi = [model.joint_names[k] for k in range(model.nb) if model.nv_joint[k] != 1]
        if multi or model.nq != model.nv:
            raise ValueError(f"joints {multi} have more than one DOF: trajectory optimisation "
                             "takes 1-DOF joints (revolute, continuous, prismatic) only")
        if model.n_active == 0:
            raise ValueError("every joint is passive: nothing to optimise")
        self.model, self.dt = model, float(dt)
        self.nv = model.nv
        self.nx, self.nu = 2 * model.nv, model.n_active
        self.active, self.passive = model.active_dofs, model.passive_dofs
        limits = np.asarray(model.effort_limit, float)[self.active]
        self.lower, self.upper = -limits, limits  # ±inf where the URDF gives none
        self.passive_forces = passive_forces if passive_forces is not None else \
            PassiveForceModel(model)
        self._coefficients = self.passive_forces.coefficients()
        self.implicit_damping = bool(implicit_damping)
        armature = np.zeros(model.nv)  # A = dt d: M qdd = T − C − D v' (module docstring)
        if self.implicit_damping:
            armature[self.passive] = self.dt * self._coefficients[0][self.passive]  # d >= 0
        self._forward = HybridDynamics(model, np.ones(model.nb, dtype=bool), armature)
        self._empty = np.zeros(0)
        self._tau = np.zeros(model.nv)
        # compiled whole-horizon loops: the buffers of the all-passive recursion (with the
        # armature) and of its derivatives, the passive-force coefficients
        self._ints, self._consts, self._work = self._forward.buffers
        self._dwork = np.zeros(dwork_size(model.nb, model.nv, 0, model.nv))
        self._active_i = np.ascontiguousarray(self.active, dtype=np.int64)
        self._passive_i = np.ascontiguousarray(self.passive, dtype=np.int64)

    # ------------------------------------------------------------------ dynamics
    def acceleration(self, q: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
        """qdd (all DOF) for the active torques ``u`` and the passive-force model."""
        tau = self._tau
        tau[self.active] = u
        tau[self.passive] = self.passive_forces(q, v)
        return self._forward.compute(q, v, self._empty, tau).qdd.copy()

    def holding_torques(self, q: np.ndarray) -> np.ndarray:
        """The active torques that keep the active joints still at ``q`` (zero velocity),
        within the limits (the passive joints may still move)."""
        hybrid = HybridDynamics(self.model)
        tau = hybrid.compute(q, np.zeros(self.nv), np.zeros(self.nu),
                             self.passive_forces(q, np.zeros(self.nv))).tau_active
        return np.clip(tau, self.lower, self.upper)

    def braked_rollout(self, x0: np.ndarray, knots: int, kp: float, kd: float
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The torques (knots, nu) and states (knots + 1, nx) of the active joints braked to
        where they are at ``x0``, the passive joints free: q̈_a = −kd v_a − kp (q_a − q_a(0))
        [1/s², 1/s], T_a from the hybrid recursion (with the step's armature, so the passive
        joints answer as the step moves them), clipped to the effort limits. A first guess
        that stays near x0 where constant torques let a moving, loaded arm fall. From where
        the rollout stops being finite the states are NaN and the torques the last finite
        ones (zero if none)."""
        n = self.nv
        brake = HybridDynamics(self.model, None, self._forward.armature)
        us = np.zeros((knots, self.nu))
        xs = np.full((knots + 1, self.nx), np.nan)
        xs[0] = x0
        q0_active = np.asarray(x0, float)[self.active]
        for k in range(knots):
            q, v = xs[k, :n], xs[k, n:]
            try:
                qdd_active = -kd * v[self.active] - kp * (q[self.active] - q0_active)
                us[k] = np.clip(brake.compute(q, v, qdd_active, self.passive_forces(q, v))
                                .tau_active, self.lower, self.upper)
                xs[k + 1] = self(xs[k], us[k])
            except ValueError:  # non-finite: the braked model diverged (dt too long for it)
                us[k:] = us[k - 1] if k else 0.0  # (xs past k: NaN from the start)
                break
        return us, xs

    def __call__(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        n, dt = self.nv, self.dt
        q, v = x[:n], x[n:]
        v_next = v + dt * self.acceleration(q, v, u)
        return np.concatenate([q + dt * v_next, v_next])

    def rollout(self, x0, us_ref, xs_ref, K, kff, alpha, lower, upper, xs, us,
                filter_a: float = 0.0) -> bool:
        """The compiled rollout; ``filter_a`` > 0: behind ``FilteredTorques``' filter."""
        status = rollout_kernel(self._ints, self._consts, self._work, x0, us_ref, xs_ref, K,
                                kff, float(alpha), lower, upper, self._active_i,
                                self._passive_i, self._coefficients, self.dt, filter_a, xs, us)
        return status == OK

    def linearize(self, xs, us, Fx, Fu) -> None:
        status = linearize_kernel(self._ints, self._consts, self._dwork, xs, us, self._active_i,
                                  self._passive_i, self._coefficients, self.dt, Fx, Fu)
        if status != OK:
            raise ValueError(f"the dynamics cannot be linearised along the trajectory "
                             f"(status {status}: a non-finite state or a singular inertia)")

    def derivatives(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
        """(f(x, u), F_x, F_u) of the semi-implicit Euler step: ``linearize`` on one knot."""
        return _one_knot(self, x, u)


class FilteredTorques(DiscreteDynamics):
    """A motor behind a first-order filter: state x = (q, v, τ), control u = the command,
    τ_{k+1} = τ_k + a (u_k − τ_k), a = Δt/(T_f + Δt) (implicit Euler of T_f τ̇ = u − τ, as
    the swing-up law filters its command), and ``step`` driven by the filtered τ_k. A bounded
    command keeps τ within the same bounds; a cost on u − τ is a cost on the torque's rate."""

    def __init__(self, step: HybridStep, time_constant: float) -> None:
        if not (np.isfinite(time_constant) and time_constant > 0):
            raise ValueError(f"time_constant must be > 0 s, got {time_constant}")
        self.step, self.dt = step, step.dt
        self.n, self.nu = step.nx, step.nu
        self.nx = self.n + self.nu
        self.a = step.dt / (time_constant + step.dt)
        self.lower, self.upper = step.lower, step.upper

    def __call__(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        tau = x[self.n:]
        return np.concatenate([self.step(x[:self.n], tau), tau + self.a * (u - tau)])

    def rollout(self, x0, us_ref, xs_ref, K, kff, alpha, lower, upper, xs, us) -> bool:
        return self.step.rollout(x0, us_ref, xs_ref, K, kff, alpha, lower, upper, xs, us,
                                 filter_a=self.a)

    def linearize(self, xs: np.ndarray, us: np.ndarray, Fx: np.ndarray, Fu: np.ndarray
                  ) -> None:
        n = self.n
        N = len(us)
        Fx_step, Fu_step = np.empty((N, n, n)), np.empty((N, n, self.nu))
        self.step.linearize(np.ascontiguousarray(xs[:N, :n]),
                            np.ascontiguousarray(xs[:N, n:]), Fx_step, Fu_step)
        Fx[:] = 0.0
        Fx[:, :n, :n], Fx[:, :n, n:] = Fx_step, Fu_step
        Fu[:] = 0.0
        for i in range(self.nu):
            Fx[:, n + i, n + i] = 1.0 - self.a
            Fu[:, n + i, i] = self.a

    def derivatives(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
        return _one_knot(self, x, u)


def _one_knot(dynamics, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """(f(x, u), F_x, F_u) from the dynamics' whole-horizon ``linearize`` on one knot."""
    Fx, Fu = np.empty((1, dynamics.nx, dynamics.nx)), np.empty((1, dynamics.nx, dynamics.nu))
    dynamics.linearize(np.asarray(x, float)[None], np.asarray(u, float)[None], Fx, Fu)
    return dynamics(x, u), Fx[0], Fu[0]
