"""Passive joint force models T_p(q, v) (paper §4: friction, stiffness, ... at unactuated hinges).

For each passive DOF:  T_p = -d v - f_c tanh(v / v_s) - k (q - q_rest)
(viscous damping d [N·m·s/rad or N·s/m], smooth Coulomb friction f_c [N·m or N] with velocity
scale v_s [rad/s or m/s], linear spring k [N·m/rad or N/m] about q_rest [rad or m]).
Damping and friction default to the URDF ``<dynamics damping friction>``; everything can be
overridden per joint. A free-flying base (floating joint) has no passive force unless set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .model import FLOATING, RobotModel

__all__ = ["JointForceParameters", "PassiveForceModel"]


@dataclass(frozen=True)
class JointForceParameters:
    """Passive force parameters of one joint (SI units)."""

    damping: float = 0.0  # N·m·s/rad (revolute) or N·s/m (prismatic)
    coulomb: float = 0.0  # N·m or N
    stiffness: float = 0.0  # N·m/rad or N/m
    rest_position: float = 0.0  # rad or m
    coulomb_velocity_scale: float = 1e-2  # rad/s or m/s: width of the smooth sign tanh(v/v_s)

    def __post_init__(self) -> None:
        for name in ("damping", "coulomb", "stiffness"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0.0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if not np.isfinite(self.rest_position):
            raise ValueError(f"rest_position must be finite, got {self.rest_position}")
        if not (np.isfinite(self.coulomb_velocity_scale) and self.coulomb_velocity_scale > 0.0):
            raise ValueError("coulomb_velocity_scale must be > 0")


@dataclass
class PassiveForceModel:
    """T_p(q, v) for the passive joints of a model (vector in ``model.passive_dofs`` order)."""

    model: RobotModel
    overrides: Mapping[str, JointForceParameters] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = self.model
        for name in self.overrides:
            k = m.joint_index(name)  # ValueError naming an unknown joint
            if m.hinge_type[k] == FLOATING and self.overrides[name].stiffness:
                raise ValueError(f"joint '{name}' is floating: a spring about it is not defined")
        nv = m.nv
        # one table, rows: damping, Coulomb force, velocity scale, stiffness, rest position
        # (``coefficients``); the named rows are views of it
        self._coefficients = np.zeros((5, nv))
        self._coefficients[2] = 1e-2
        self._damping, self._coulomb, self._scale, self._stiffness, self._rest = \
            self._coefficients
        self._q_index = np.zeros(nv, dtype=np.int64)  # configuration index of each 1-DOF joint
        for k, name in enumerate(m.joint_names):
            dofs = m.joint_dofs(name)
            if m.hinge_type[k] != FLOATING:
                self._q_index[dofs] = m.q_start[k]
            params = self.overrides.get(name)
            if params is None:
                if m.hinge_type[k] == FLOATING:
                    continue
                params = JointForceParameters(
                    damping=float(m.damping[dofs[0]]), coulomb=float(m.friction[dofs[0]])
                )
            self._damping[dofs] = params.damping
            self._coulomb[dofs] = params.coulomb
            self._stiffness[dofs] = params.stiffness
            self._rest[dofs] = params.rest_position
            self._scale[dofs] = params.coulomb_velocity_scale

    def without_coulomb(self) -> PassiveForceModel:
        """The same model with no dry friction (damping and springs kept)."""
        m = self.model
        params = {}
        for k, name in enumerate(m.joint_names):
            if m.hinge_type[k] == FLOATING and name not in self.overrides:
                continue
            dof = m.joint_dofs(name)[0]
            params[name] = JointForceParameters(
                damping=float(self._damping[dof]), stiffness=float(self._stiffness[dof]),
                rest_position=float(self._rest[dof]))
        return PassiveForceModel(m, params)

    def with_model(self, model: RobotModel) -> PassiveForceModel:
        """The same parameters for another passive set of the same robot."""
        return PassiveForceModel(model, self.overrides)

    def all_joints(self, q: np.ndarray, v: np.ndarray,
                   coulomb_velocity: np.ndarray | None = None) -> np.ndarray:
        """The passive-element force of every DOF (what each joint's damper/spring would apply).
        ``coulomb_velocity`` (default ``v``): the velocity whose smooth sign the Coulomb term
        takes (a controller compensating friction gives the motion it intends)."""
        out = np.empty(self.model.nv)
        v = np.ascontiguousarray(v, dtype=float)
        passive_element_forces(np.ascontiguousarray(q, dtype=float), v,
                               v if coulomb_velocity is None else
                               np.ascontiguousarray(coulomb_velocity, dtype=float),
                               *self.kernel_arguments, out)
        return out

    @property
    def kernel_arguments(self) -> tuple[np.ndarray, np.ndarray]:
        """(configuration index per DOF, the (5, nv) coefficient table): what
        ``passive_element_forces`` takes after q, v and the Coulomb velocity."""
        return self._q_index, self._coefficients

    def __call__(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """T_p for the model's passive DOF, ready for ``hybrid_dynamics(..., tau_passive)``."""
        return self.all_joints(q, v)[self.model.passive_dofs]

    def derivatives(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dT_p/dq, dT_p/dv): (n_passive, nv) each, columns over the tangent space (v-space);
        dT/dq = -k, dT/dv = -d - (f_c / v_s) (1 - tanh²(v / v_s)) on each DOF's own column."""
        m = self.model
        idx = m.passive_dofs
        t = np.tanh(np.asarray(v, dtype=float)[idx] / self._scale[idx])
        dq = np.zeros((len(idx), m.nv))
        dv = np.zeros((len(idx), m.nv))
        rows = np.arange(len(idx))
        dq[rows, idx] = -self._stiffness[idx]
        dv[rows, idx] = -self._damping[idx] - self._coulomb[idx] / self._scale[idx] * (1 - t * t)
        return dq, dv

    def coefficients(self) -> np.ndarray:
        """(5, nv): per DOF the damping, Coulomb force, velocity scale, stiffness and rest
        position of the model above (for compiled loops). A copy."""
        return self._coefficients.copy()


@njit(cache=True, inline="always")
def element_force(coefficients, i, q, v, coulomb_velocity):
    """T_i = -d v - f_c tanh(v_c / v_s) - k (q - q_rest) of DOF i (the module docstring;
    ``coefficients``: rows d, f_c, v_s, k, q_rest; q, v, v_c: that DOF's), for every loop that
    needs it (this module's, the trajectory optimisation's)."""
    k = coefficients[3, i]
    spring = k * (q - coefficients[4, i]) if k > 0.0 else 0.0
    return -(coefficients[0, i] * v + coefficients[1, i] * math.tanh(
        coulomb_velocity / coefficients[2, i]) + spring)


@njit(cache=True, inline="always")
def dof_force(q, v, coulomb_velocity, q_index, coefficients, i):
    """``element_force`` of DOF i from the whole state; q is read only where k > 0 (1-DOF
    joints, at ``q_index``)."""
    q_i = q[q_index[i]] if coefficients[3, i] > 0.0 else 0.0
    return element_force(coefficients, i, q_i, v[i], coulomb_velocity[i])


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous float64 in)
def passive_element_forces(q, v, coulomb_velocity, q_index, coefficients, out):
    """``dof_force`` of every DOF into ``out``."""
    for i in range(out.shape[0]):
        out[i] = dof_force(q, v, coulomb_velocity, q_index, coefficients, i)
