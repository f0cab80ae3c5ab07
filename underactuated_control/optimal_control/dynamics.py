"""Discrete dynamics of a robot with passive joints for trajectory optimisation.

State x = (q, v), control u = T_a, the active joints' torques: their effort limits are then a
box on u, which a box-constrained DDP keeps exactly (with u = the active accelerations, the
same limits become state-dependent polytopes T_a(q, v, u)). The passive joints are free: their
torques are the passive-force model T_p(q, v) (URDF damping and friction, or overrides).

    qdd = H(q, v, T)   the hybrid recursion with every joint's force known (section 5 with the
                       active set empty: the articulated-body forward dynamics), T_a = u,
                       T_p = T_p(q, v)
    v' = v + dt qdd,   q' = q + dt v'             (semi-implicit Euler)

``derivatives`` gives f and its Jacobians F_x, F_u from ∂qdd/∂(q, v, T) (finite differences
of the recursion until the analytic derivatives are wired in; see ``acceleration_partials``).
"""

from __future__ import annotations

import numpy as np

from ..dynamics import HybridDynamics
from ..model import RobotModel
from ..passive_forces import PassiveForceModel

__all__ = ["HybridStep"]


class HybridStep:
    """x' = f(x, u) over ``dt`` [s] for ``model`` (its passive set decides which joints ``u``
    drives). Joints must have one DOF each (q and v of the same size)."""

    def __init__(self, model: RobotModel, dt: float,
                 passive_forces: PassiveForceModel | None = None) -> None:
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
        self._forward = HybridDynamics(model, np.ones(model.nb, dtype=bool))
        self._empty = np.zeros(0)
        self._tau = np.zeros(model.nv)

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

    def __call__(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        n, dt = self.nv, self.dt
        q, v = x[:n], x[n:]
        v_next = v + dt * self.acceleration(q, v, u)
        return np.concatenate([q + dt * v_next, v_next])

    def acceleration_partials(self, q: np.ndarray, v: np.ndarray, u: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(∂qdd/∂q, ∂qdd/∂v, ∂qdd/∂u), by central differences of the recursion."""
        n, h = self.nv, 1e-6
        dq, dv, du = np.empty((n, n)), np.empty((n, n)), np.empty((n, self.nu))
        for cols, arg, which in ((dq, q, 0), (dv, v, 1), (du, u, 2)):
            for j in range(arg.size):
                plus, minus = [q.copy(), v.copy(), u.copy()], [q.copy(), v.copy(), u.copy()]
                plus[which][j] += h
                minus[which][j] -= h
                cols[:, j] = (self.acceleration(*plus) - self.acceleration(*minus)) / (2 * h)
        return dq, dv, du

    def derivatives(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
        """(f(x, u), F_x, F_u) of the semi-implicit Euler step."""
        n, dt = self.nv, self.dt
        q, v = x[:n], x[n:]
        a_q, a_v, a_u = self.acceleration_partials(q, v, u)
        I = np.eye(n)
        # v' = v + dt qdd → ∂v'/∂(q, v, u) = dt a_q, I + dt a_v, dt a_u; q' = q + dt v'
        dvn_dq, dvn_dv, dvn_du = dt * a_q, I + dt * a_v, dt * a_u
        Fx = np.block([[I + dt * dvn_dq, dt * dvn_dv], [dvn_dq, dvn_dv]])
        Fu = np.vstack([dt * dvn_du, dvn_du])
        return self(x, u), Fx, Fu
