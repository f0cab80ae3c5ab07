"""Joint-space control through the hybrid recursion, and the plumbing a controller node needs
(name matching of measured states, command ordering and clamping); trajectories are sampled
into a ``JointReference`` by ``trajectory_sampling.py``.

Joint mode:  qdd_a = qdd_ref + kd (v_ref - v) + kp e + ki ∫e dt,  e = q_ref - q,  on the active
joints, then T_a and qdd_p from the hybrid recursion (section 5) with T_p from the passive-force
model. A reference equal to the measured state (and no integral) gives exactly the
feed-forward hybrid torque. Hold mode is joint mode with the reference latched at the
configuration where it started.

Integral action (JTC's effort PID has one): ki [1/s³] in the same acceleration units as kp
and kd, so that with an exact model every joint's error obeys d³e/dt³ + kd ë + kp ė + ki e = 0
whatever its inertia (stable for ki < kp kd; one default fits a heavy shoulder and a light
wrist, which a gain in N·m/(rad·s) could not); the hybrid recursion turns the integral's
acceleration into the torque that rejects a constant disturbance (unmodelled friction, load).
The integral term ki ∫e is kept within ±i_clamp [rad/s²] and integrated only where the caller
allows (anti-windup: not while the command is saturated or overridden, see ``joint_law.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..buffers import float_array
from ..dynamics import HybridDynamics, HybridResult
from ..model import FLOATING, RobotModel
from ..parameters import per_joint
from ..passive_forces import PassiveForceModel, passive_element_forces

__all__ = ["JointSpaceController", "JointStateMatcher", "EffortMapper", "JointReference",
           "MissingJointsError", "DuplicateJointsError"]


class MissingJointsError(ValueError):
    """A measured state does not contain every joint of the model."""

    def __init__(self, missing: Sequence[str]) -> None:
        self.missing = list(missing)
        super().__init__(f"joint state lacks joints {self.missing}")


class DuplicateJointsError(ValueError):
    """A measured state names a joint more than once (which entry holds is undefined)."""

    def __init__(self, duplicates: Sequence[str]) -> None:
        self.duplicates = list(duplicates)
        super().__init__(f"joint state names {self.duplicates} more than once")


class JointStateMatcher:
    """Maps (names, positions, velocities) in any order, with extra joints, to model q and v.

    The name->index map is cached per name tuple, so a steady stream costs one dict lookup.
    Floating joints are not carried by sensor_msgs/JointState: rejected at creation unless
    ``floating_from_elsewhere`` (their q, v entries are then left for the caller to fill).
    """

    def __init__(self, model: RobotModel, floating_from_elsewhere: bool = False) -> None:
        floating = [model.joint_names[k] for k in range(model.nb)
                    if model.hinge_type[k] == FLOATING]
        if floating and not floating_from_elsewhere:
            raise ValueError(f"floating joints {floating} are not in sensor_msgs/JointState: "
                             "give their state from odometry")
        self.model = model
        self.names = [model.joint_names[k] for k in range(model.nb)
                      if model.hinge_type[k] != FLOATING]
        self._q_slots = np.array([model.q_start[k] for k in range(model.nb)
                                  if model.hinge_type[k] != FLOATING], dtype=np.int64)
        self._v_slots = np.array([model.v_start[k] for k in range(model.nb)
                                  if model.hinge_type[k] != FLOATING], dtype=np.int64)
        self._all_joints = not floating
        self._cache: dict[tuple[str, ...], np.ndarray] = {}
        self.q = np.zeros(model.nq)
        self.v = np.zeros(model.nv)

    def _indices(self, names: Sequence[str]) -> np.ndarray:
        key = tuple(names)
        idx = self._cache.get(key)
        if idx is None:
            position = {n: i for i, n in enumerate(key)}
            if len(position) != len(key):
                raise DuplicateJointsError(sorted({n for n in key if key.count(n) > 1}))
            missing = [n for n in self.names if n not in position]
            if missing:
                raise MissingJointsError(missing)
            idx = np.array([position[n] for n in self.names], dtype=np.int64)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = idx
        return idx

    def match(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float]
              ) -> tuple[np.ndarray, np.ndarray]:
        """q, v in model order (views of preallocated arrays, overwritten by the next call)."""
        if len(position) != len(names):
            raise ValueError(f"joint state has {len(names)} names but {len(position)} positions")
        if len(velocity) != len(names):
            raise ValueError(f"joint state has {len(names)} names but {len(velocity)} "
                             "velocities (velocities are required)")
        idx = self._indices(names)
        if self._all_joints:
            np.take(np.asarray(position, dtype=float), idx, out=self.q)
            np.take(np.asarray(velocity, dtype=float), idx, out=self.v)
        else:  # the floating joints' entries are the caller's
            self.q[self._q_slots] = np.asarray(position, dtype=float)[idx]
            self.v[self._v_slots] = np.asarray(velocity, dtype=float)[idx]
        return self.q, self.v


class EffortMapper:
    """T_a (active DOF order) -> effort command in ``command_joints`` order, clamped.

    Passive joints named in ``command_joints`` (an actuator that failed while its controller
    still expects a slot) get 0. Limits: the URDF effort limits times ``limit_scale``.
    """

    def __init__(self, model: RobotModel, command_joints: Sequence[str] | None = None,
                 limit_scale: float = 1.0) -> None:
        names = list(model.active_joints) if not command_joints else list(command_joints)
        unknown = [n for n in names if n not in model.joint_names]
        if unknown:
            raise ValueError(f"unknown joints in command_joints: {unknown}; the model's joints "
                             f"are {list(model.joint_names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"command_joints has duplicates: {names}")
        if not (np.isfinite(limit_scale) and limit_scale > 0):
            raise ValueError(f"effort limit scale must be > 0, got {limit_scale}")
        self.names = names
        active_position = {int(d): i for i, d in enumerate(model.active_dofs)}
        self._source = np.array([active_position.get(int(model.joint_dofs(n)[0]), -1)
                                 for n in names], dtype=np.int64)
        self.limits = np.array([model.effort_limit[model.joint_dofs(n)[0]] for n in names])
        self.limits *= limit_scale
        self.command = np.zeros(len(names))
        self.saturated = np.zeros(len(names), dtype=bool)

    def map(self, tau_active: np.ndarray) -> np.ndarray:
        """The command (a preallocated array, overwritten by the next call)."""
        map_efforts(np.ascontiguousarray(tau_active, dtype=float), self._source, self.limits,
                    self.command, self.saturated)
        return self.command

    def saturated_joints(self) -> list[str]:
        return [n for n, s in zip(self.names, self.saturated) if s]


@dataclass
class JointReference:
    """Reference of the active joints (model active-DOF order)."""

    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray


class JointSpaceController:
    """qdd_a = qdd_ref + kd (v_ref - v) + kp e + ki ∫e dt, then the hybrid recursion.

    ``kp`` [1/s²], ``kd`` [1/s], ``ki`` [1/s³] and ``i_clamp`` [rad/s² or m/s²] are per active
    DOF (arrays of n_active) or scalars; ki 0 (the default): no integral action.
    """

    def __init__(self, model: RobotModel, kp: float | np.ndarray = 100.0,
                 kd: float | np.ndarray = 20.0,
                 passive_forces: PassiveForceModel | None = None,
                 dynamics: HybridDynamics | None = None, ki: float | np.ndarray = 0.0,
                 i_clamp: float | np.ndarray = np.inf) -> None:
        floating = [model.joint_names[k] for k in range(model.nb)
                    if model.hinge_type[k] == FLOATING and not model.passive_joint_mask[k]]
        if floating:
            raise ValueError(f"joint-space control of active floating joints {floating} is not "
                             "supported (make them passive or use the task-space controller)")
        self.model = model
        self.dynamics = dynamics if dynamics is not None else HybridDynamics(model)
        self.passive_forces = passive_forces if passive_forces is not None else \
            PassiveForceModel(model)
        self.set_gains(kp, kd)
        self.set_integral(ki, i_clamp)
        self.active_q = np.array([model.q_start[model.joint_index(n)]  # their q entries
                                   for n in model.active_joints], dtype=np.int64)
        na = model.n_active
        self.qdd_active = np.zeros(na)  # the last compute's qdd_a
        self.tau_passive = np.zeros(model.n_passive)  # and its passive forces
        self.integral = np.zeros(na)  # the integral term ki ∫e dt [rad/s²], within ±i_clamp
        self.intended_velocity = np.zeros(na)  # v_ref + (kp e + ki ∫e) / kd
        self._active_dofs = np.array(model.active_dofs, dtype=np.int64)  # writable: a kernel's
        self._everywhere = np.ones(na, dtype=bool)  # integrate=None: every joint may integrate
        self._passive_dofs = np.array(model.passive_dofs, dtype=np.int64)
        self._forces = np.zeros(model.nv)  # the passive-force model on every DOF

    def set_integral(self, ki: float | np.ndarray, i_clamp: float | np.ndarray) -> None:
        """ki [1/s³] and the clamp of the integral term [rad/s²]: one value or one per active
        joint; finite ki >= 0, i_clamp >= 0 (inf: no clamp)."""
        ki_arr = per_joint("ki", ki, self.model.active_joints)
        clamp = per_joint("i_clamp", i_clamp, self.model.active_joints)
        if not np.all(np.isfinite(ki_arr)) or np.any(ki_arr < 0):
            raise ValueError(f"ki must be finite and >= 0, got {ki_arr.tolist()}")
        if np.any(np.isnan(clamp)) or np.any(clamp < 0):
            raise ValueError(f"i_clamp must be >= 0, got {clamp.tolist()}")
        self.ki = np.ascontiguousarray(ki_arr, dtype=float)
        self.i_clamp = np.ascontiguousarray(clamp, dtype=float)

    def reset_integral(self) -> None:
        self.integral[:] = 0.0

    def set_gains(self, kp: float | np.ndarray, kd: float | np.ndarray) -> None:
        """One value (every active joint) or one per active joint; finite and >= 0."""
        gains = []
        for name, g in (("kp", kp), ("kd", kd)):
            arr = per_joint(name, g, self.model.active_joints)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"{name} must be finite and >= 0, got {arr.tolist()}")
            gains.append(arr)
        self.kp, self.kd = (np.ascontiguousarray(g, dtype=float) for g in gains)

    def active_positions(self, q: np.ndarray) -> np.ndarray:
        return q[self.active_q]

    def compute(self, q: np.ndarray, v: np.ndarray, ref: JointReference,
                configured: bool = False, dt: float = 0.0,
                integrate: np.ndarray | None = None) -> HybridResult:
        """T_a, qdd_p for the state and reference (results in the preallocated workspace).
        ``configured``: the workspace already holds (4.6) for ``q`` (e.g. from J_G). ``dt`` [s]:
        the time since the last call, over which the integral advances by ki e dt on the
        joints ``integrate`` allows (bool per active joint; None: all)."""
        q, v = float_array(q), float_array(v)
        joint_law_step(q, v, self.active_q, self._active_dofs, float_array(ref.position),
                       float_array(ref.velocity), float_array(ref.acceleration), self.kp,
                       self.kd, self.ki, self.i_clamp, float(dt),
                       self._everywhere if integrate is None
                       else np.ascontiguousarray(integrate, dtype=bool),
                       self.integral, self.intended_velocity, self.qdd_active,
                       *self.passive_forces.kernel_arguments, self._forces,
                       self._passive_dofs, self.tau_passive)
        tau_passive = self.tau_passive
        if configured:
            self.dynamics.set_velocity(v)
            return self.dynamics.solve(self.qdd_active, tau_passive)
        return self.dynamics.compute(q, v, self.qdd_active, tau_passive)


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous float64 in)
def map_efforts(tau_active, source, limits, command, saturated):
    """``EffortMapper.map``: each commanded joint's effort from the active order (0 for a
    joint that is not active), ``saturated`` where beyond its limit, then clipped to it."""
    for i in range(source.shape[0]):
        tau = tau_active[source[i]] if source[i] >= 0 else 0.0
        saturated[i] = abs(tau) > limits[i]
        command[i] = min(max(tau, -limits[i]), limits[i]) if tau == tau else tau  # NaN kept


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous float64 in)
def joint_law_step(q, v, active_q, active_dofs, position, velocity, acceleration, kp, kd, ki,
                   i_clamp, dt, integrate, integral, intended, qdd, q_index, coefficients,
                   forces, passive_dofs, tau_passive):
    """``JointSpaceController.compute``'s law (its docstring) into ``integral``,
    ``intended`` and ``qdd``: e = q_ref − q; with dt > 0 and some ki > 0 the integral
    advances by ki e dt where ``integrate`` allows and stays within ±i_clamp; the intended
    velocity v_ref + (kp e + ki ∫e)/kd (kd 0: the pull's sign × 1e6); qdd_a = kp e + ki ∫e +
    kd (v_ref − v) + qdd_ref. Then T_p, the passive-force model (``q_index``,
    ``coefficients``: ``PassiveForceModel.kernel_arguments``) at the passive DOF, into
    ``tau_passive`` (``forces``: every DOF's)."""
    n = active_q.shape[0]
    any_ki = False
    for i in range(n):
        any_ki = any_ki or ki[i] > 0.0
    for i in range(n):
        e = position[i] - q[active_q[i]]
        if dt > 0.0 and any_ki:
            step = ki[i] * e * dt if integrate[i] else 0.0
            integral[i] = min(max(integral[i] + step, -i_clamp[i]), i_clamp[i])
        pull = kp[i] * e + integral[i]
        if kd[i] > 0.0:
            intended[i] = pull / kd[i] + velocity[i]
        else:  # the pull's sign, as a velocity far beyond any smoothing scale
            intended[i] = (1e6 if pull > 0.0 else -1e6 if pull < 0.0 else 0.0) + velocity[i]
        qdd[i] = pull + kd[i] * (velocity[i] - v[active_dofs[i]]) + acceleration[i]
    passive_element_forces(q, v, v, q_index, coefficients, forces)
    for k in range(passive_dofs.shape[0]):
        tau_passive[k] = forces[passive_dofs[k]]
