"""Modes ``joint`` and ``hold``: joint-space control through the hybrid recursion.

joint: qdd_a = qdd_ref + kd (v_ref - v) + kp e + ki ∫e dt (e = q_ref - q) on the active joints,
then T_a and qdd_p from the hybrid recursion (section 5) with T_p from the passive-force model;
the reference follows ``~/joint_reference`` or a ``~/follow_joint_trajectory`` goal (one
sampler, ``trajectory_sampling.py``). hold: the same law, reference latched at the measured
configuration (incoming joint references are kept for a later ``mode:=joint``).

Integral action (``joint_space.py``), as JTC's effort PID: the integral advances over the time
between two states (the states' own stamps: simulated time under ``use_sim_time``; a gap longer
than ``_MAX_DT`` counts as ``_MAX_DT``). Anti-windup, from this law's previous output as the
command stages and the node left it (``command.py`` shapes the output in place; the law reads
it back at its next cycle): a joint whose final torque reached its effort limit (URDF limit
times ``effort_limit_scale``) does not integrate further into the saturation (unwinding is
allowed); while a stage overrode the law (``status`` set, e.g. the safety layer), no joint
integrates; unless ``integrate_while_moving``, a joint integrates only while its reference is at
rest (|v_ref| ≤ 1e-6: holding, hold mode, after a goal's last point). The feed-forward model makes
a moving joint's error a transient, not a steady disturbance; integrated, it leaves a slowly
decaying tail after the motion (see doc/benchmarks.md, trajectory goals). A new latch of the
reference (``hold_reference``: the mode's start, after a safety stop or a cancelled goal) and a
new law (mode change, new gains or passive set) start from a zero integral; ki 0 switches it
off. The output carries the velocity the law drives each joint
toward (``intended_velocity``), the sign of the friction compensation (``friction.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from ..buffers import float_array
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec, per_joint
from .joint_space import JointReference, JointSpaceController
from .law import ControlLaw, LawOutput

__all__ = ["JointLaw", "HoldLaw"]

_MAX_DT = 0.05  # s: the longest step the integral takes (a gap in the states counts as this)
_AT_REST = 1e-6  # rad/s or m/s: a reference this slow is at rest (integral on)


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous arrays in)
def integrating_joints(q, position, velocity, tau, active_q, effort_limit, while_moving,
                       has_last, overridden, out):
    """``JointLaw``'s anti-windup (the module docstring) into ``out``: joint i integrates
    while its reference is at rest (or ``while_moving``), not at all after a cycle a stage
    overrode, and, where its last torque ``tau`` reached its effort limit, only to unwind
    (the error's sign differs from the torque's). False, with ``out`` untouched, where a
    reference position is NaN (a joint that became active: the caller fills it first)."""
    for i in range(active_q.shape[0]):
        if math.isnan(position[i]):
            return False
    for i in range(active_q.shape[0]):
        allowed = while_moving or abs(velocity[i]) <= _AT_REST
        if has_last:
            if overridden:
                allowed = False
            elif abs(tau[i]) >= effort_limit[i]:
                allowed = allowed and np.sign(position[i] - q[active_q[i]]) != np.sign(tau[i])
        out[i] = allowed
    return True


def _one_per_joint(name: str):
    def check(value: list[float], model: RobotModel | None) -> None:
        if model is not None:
            per_joint(name, value, model.joint_names)
    return check


class JointLaw(ControlLaw):
    mode = "joint"
    reference_kind = "joint"
    parameters = (
        ParameterSpec("kp", [100.0], "joint stiffness, one value (all joints) or one per joint "
                      "of the model", unit="1/s^2", low=0.0, high=1e6, per_joint=True,
                      validator=_one_per_joint("kp")),
        ParameterSpec("kd", [20.0], "joint damping, one value (all joints) or one per joint "
                      "of the model", unit="1/s", low=0.0, high=1e4, per_joint=True,
                      validator=_one_per_joint("kd")),
        ParameterSpec("ki", [200.0], "joint integral gain (acceleration units, like kp and kd: "
                      "the error obeys d³e/dt³ + kd ë + kp ė + ki e = 0 on an exact model, stable "
                      "for ki < kp kd), one value (all joints) or one per joint of the model; 0: "
                      "no integral action", unit="1/s^3", low=0.0, high=1e8, per_joint=True,
                      validator=_one_per_joint("ki")),
        ParameterSpec("i_clamp", [1e4], "bound on the integral term |ki ∫e dt| of each joint, "
                      "one value (all joints) or one per joint of the model", unit="rad/s^2",
                      low=0.0, high=1e6, per_joint=True, validator=_one_per_joint("i_clamp")),
        ParameterSpec("integrate_while_moving", False, "integrate a joint's error also while "
                      "its reference moves (false: only while it is at rest — holding, hold "
                      "mode, after a goal's last point — so that tracking transients leave no "
                      "tail)"),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        super().__init__(model, settings, frame, workspace)
        active = [model.joint_index(n) for n in model.active_joints]
        kp = per_joint("kp", settings["kp"], model.joint_names)[active]
        kd = per_joint("kd", settings["kd"], model.joint_names)[active]
        ki = per_joint("ki", settings.get("ki", 0.0), model.joint_names)[active]
        i_clamp = per_joint("i_clamp", settings.get("i_clamp", np.inf), model.joint_names)[active]
        self.controller = JointSpaceController(model, kp, kd, dynamics=self.workspace.dynamics,
                                               ki=ki, i_clamp=i_clamp)
        scale = float(settings.get("effort_limit_scale", 1.0))
        self._effort_limit = np.asarray(model.effort_limit, float)[model.active_dofs] * scale
        self._while_moving = bool(settings.get("integrate_while_moving", False))
        self._integrate = np.ones(model.n_active, dtype=bool)  # the joints that integrate
        self._none = np.zeros(0)
        self._last: LawOutput | None = None  # the previous output, as the stages shaped it
        self._last_t: float | None = None

    def hold_reference(self, q: np.ndarray) -> JointReference:
        self.controller.reset_integral()  # a new latch starts from a zero integral
        self._last_t = None
        na = self.model.n_active
        return JointReference(self.controller.active_positions(q).copy(), np.zeros(na),
                              np.zeros(na))

    def carry_reference(self, reference: JointReference | None, old_model: RobotModel,
                        previous: ControlLaw | None = None) -> JointReference | None:
        """By joint name; a newly active joint holds where it is (NaN: filled from q)."""
        if reference is None:
            return None
        old = {n: i for i, n in enumerate(old_model.active_joints)}
        na = self.model.n_active
        ref = JointReference(np.full(na, np.nan), np.zeros(na), np.zeros(na))
        for i, n in enumerate(self.model.active_joints):
            if n in old:
                ref.position[i] = reference.position[old[n]]
                ref.velocity[i] = reference.velocity[old[n]]
                ref.acceleration[i] = reference.acceleration[old[n]]
        return ref

    def compute(self, q: np.ndarray, v: np.ndarray, reference: JointReference, t: float,
                with_jacobians: bool) -> LawOutput:
        integrate = self._integrating(reference, q)
        if integrate is None:  # joints that became active hold their measured position
            gaps = np.isnan(reference.position)
            reference.position[gaps] = self.controller.active_positions(q)[gaps]
            integrate = self._integrating(reference, q)
        dt = 0.0 if self._last_t is None else min(max(t - self._last_t, 0.0), _MAX_DT)
        self._last_t = t
        J_G = J_D = None
        if with_jacobians:  # one (4.6) pass for J_G, J_D and the command
            J_G, J_D = self.workspace.generalized(self.frame, q)
            res = self.controller.compute(q, v, reference, True, dt, integrate)
        else:
            res = self.controller.compute(q, v, reference, False, dt, integrate)
        c = self.controller
        self._last = LawOutput(res.tau_active, res.qdd_passive, J_G, J_D,
                               intended_velocity=c.intended_velocity,
                               qdd_active=c.qdd_active, tau_passive=c.tau_passive)
        return self._last

    def _integrating(self, reference: JointReference, q: np.ndarray) -> np.ndarray | None:
        """Anti-windup: the joints whose integral may advance this cycle (None while a
        reference position is NaN)."""
        last = self._last
        # a stage overrode the law (status set): its error is not the law's to integrate
        complete = integrating_joints(
            float_array(q), float_array(reference.position), float_array(reference.velocity),
            self._none if last is None else float_array(last.tau_active),
            self.controller.active_q, self._effort_limit, self._while_moving, last is not None,
            last is not None and bool(last.status), self._integrate)
        return self._integrate if complete else None


class HoldLaw(JointLaw):
    """Joint law whose reference stays where the mode started."""

    mode = "hold"
    reference_kind = "none"
