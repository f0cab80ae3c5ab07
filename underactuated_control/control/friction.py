"""Friction and damping compensation of the active joints (ROS-free; see ``command.py``).

The laws plan in a frictionless model of the active joints (the hybrid recursion of section 5
carries the passive-force model T_p on the passive joints only). A real gearbox, and
``mujoco_sim`` (URDF damping -> MuJoCo damping, friction -> frictionloss), resist every joint
with its URDF ``<dynamics>``; on the active joints this stage adds the opposite of the
passive-force model (``passive_forces.PassiveForceModel``, T = -d v - f_c tanh(v/v_s) - k(q -
q_rest)) as feed-forward:

    T_a += s_d d (v + h a) + s_f f_c tanh(w / v_s)

- viscous part on the velocity the command drives the joint to one control period h later,
  v + h a (a: the accelerations the command implies, the safety layer's forward dynamics): it
  cancels the damping the joint really feels, so the law's designed error dynamics (kp, kd, ki
  per joint) hold; on a joint whose damping time constant I/d is shorter than the period (xarm7's
  wrist: 0.07 ms) the speed settles on the torque within a period ((M + h D) Δv/h = τ, as
  MuJoCo's Euler and implicit steps integrate it), and d v alone would pass M/(M + h d) of the
  law's accelerations;
- Coulomb part with a smooth sign of w, the motion the law intends (``LawOutput
  .intended_velocity``): the joint law gives w = v_ref + (kp e + ki ∫e)/kd, the velocity its
  damping term drives the joint toward. Before a joint moves (v = 0, stuck in its dry
  friction) w already says which way it must break away, and at rest on the reference (w = 0)
  the compensation fades out instead of chattering on the sign of a noisy velocity; no
  feedback of the measured velocity through the steep smooth sign (on a light joint, f_c/v_s
  on a sampled velocity is a negative damping the loop cannot carry). The task law gives the
  joint velocity its PD drives the frame toward, (S J_G)⁺ S (v_ref + (kp/kd) e) (resolved
  rate); the operational-space law the same through a damped J⁺ of its motion rows plus its
  posture's (kp₀/kd₀)(q₀ − q) in the null space; the failure reaction's safe posture its
  brake's (kp/kd)(q_hold − q_a). A law without an intent gives none: w = α v,
  α = min(1, |v|/v_s) — the friction that opposes the actual motion beyond v_s, and a zero
  slope at v = 0, so the dry friction that holds a resting joint is not turned into a negative
  damping (near v_s the slope is still f_c/v_s: on xarm7's light wrist that kicked the task
  law's self-motion 1.9 rad away before the task law gave its intent, and with the command one
  cycle late it drove the operational-space law's joint7 to 7 rad/s);
- with a law's intent the viscous part's velocity is β v + (1 − β) w (+ h a): fed back on the
  measured velocity alone, with the command a period late, a joint whose damping time
  constant M_jj/d is far below the period sees d v(t) against d v(t − h), a loop whose
  oscillating root is −r/(1 + r), r = h d / M_jj (−0.93 on xarm7's wrist, r = 14: held in
  `hold`, one step late, joint7 chattered at 0.8 rad/s; two steps, 1.2 rad/s). β =
  min(1, ρ (1 + ρ (1 + r))/r) keeps that root within ρ (``damping_feedback_root``, 0.5: β =
  0.30 on xarm7's wrist, 1 on its other joints); at v = w it is the full d v, and the rest of
  the joint's own damping pulls toward w, where the law's damping pulls (w clipped to the
  URDF velocity limit there: a reference jump's intent, kp/kd × the jump, is no speed to
  drive a joint to; unclipped, xarm7's wrist reached 1.9× its limit on the reversing step);
- (laws with an intent)
  a joint the command slows down where a safety bound bit, or beyond its speed bound
  (``SafetyLayer.braked``), gets no Coulomb part: its friction helps the braking. Compensated,
  a light joint moving against the law's intent (a reversing step reference) or braked by the
  velocity bound got its friction's push again on top (xarm7's wrist: 1 N·m is 7000 rad/s²;
  1.6-2.4x its velocity limit);
- a spring (stiffness overrides) is not part of the URDF and is not compensated here.

Scale factors s_d, s_f (1: the URDF values) let a user trust the URDF less (0: off per kind);
``friction_compensation`` false switches the stage off. Zero where the URDF has no
``<dynamics>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numba import njit

from ..buffers import float_array
from ..model import FLOATING, RobotModel
from ..parameters import ParameterSpec
from ..passive_forces import JointForceParameters, PassiveForceModel, passive_element_forces
from .law import LawOutput

__all__ = ["FrictionCompensation"]


class FrictionCompensation:
    """Feed-forward of the active joints' URDF damping and dry friction (module docstring)."""

    parameters: ClassVar[tuple[ParameterSpec, ...]] = (
        ParameterSpec("friction_compensation", True, "add the active joints' URDF <dynamics> "
                      "damping and dry friction to every mode's command as feed-forward "
                      "(viscous on the measured velocity, Coulomb with a smooth sign of the "
                      "motion the law intends)"),
        ParameterSpec("damping_compensation_scale", 1.0, "fraction of the URDF damping "
                      "compensated (0: none)", unit="1", low=0.0, high=2.0),
        ParameterSpec("friction_compensation_scale", 1.0, "fraction of the URDF dry friction "
                      "compensated (0: none)", unit="1", low=0.0, high=2.0),
        ParameterSpec("damping_compensation_period", 1e-3, "control period h over which the "
                      "viscous compensation acts: the damping is compensated at the velocity "
                      "the command drives the joint to one period later, v + h a (a: the "
                      "accelerations the command implies, from the safety layer's forward "
                      "dynamics); 0: at the measured velocity v", unit="s", low=0.0, high=0.1),
        ParameterSpec("damping_feedback_root", 0.5, "with a law's intended velocity w, the "
                      "viscous part is compensated at β v + (1 − β) w (+ h a), β = min(1, ρ (1 + "
                      "ρ (1 + r))/r), r = h d / M_jj: with the command one period late the "
                      "joint's velocity loop keeps its oscillating root within ρ (a joint damped "
                      "faster than a period, xarm7's wrist: β 0.30); 1: β = 1, all on the "
                      "measured velocity", unit="1", low=0.0, high=1.0),
        ParameterSpec("friction_smoothing_velocity", 0.01, "velocity v_s of the compensation's "
                      "smooth sign tanh(w / v_s) of the Coulomb friction", unit="rad/s or m/s",
                      low=1e-5, high=1.0),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any]) -> None:
        self.model = model
        self.enabled = bool(settings.get("friction_compensation", True))
        s_d = float(settings.get("damping_compensation_scale", 1.0))
        s_f = float(settings.get("friction_compensation_scale", 1.0))
        v_s = float(settings.get("friction_smoothing_velocity", 0.01))
        h = float(settings.get("damping_compensation_period", 1e-3))
        for name, value, low in (("damping_compensation_scale", s_d, 0.0),
                                 ("damping_compensation_period", h, 0.0),
                                 ("friction_compensation_scale", s_f, 0.0),
                                 ("friction_smoothing_velocity", v_s, 1e-12)):
            if not (np.isfinite(value) and value >= low):
                raise ValueError(f"{name} must be finite and >= {low:g}, got {value}")
        self._active = np.array(model.active_dofs, dtype=np.int64)  # writable: a kernel argument
        overrides = {}
        for k, name in enumerate(model.joint_names):
            if model.hinge_type[k] == FLOATING:
                continue
            dof = model.joint_dofs(name)[0]
            overrides[name] = JointForceParameters(
                damping=s_d * float(model.damping[dof]), coulomb=s_f * float(model.friction[dof]),
                coulomb_velocity_scale=v_s)
        self.forces = PassiveForceModel(model, overrides)
        self._force_arguments = self.forces.kernel_arguments
        rho = float(settings.get("damping_feedback_root", 0.5))
        if not (np.isfinite(rho) and 0.0 <= rho <= 1.0):
            raise ValueError(f"damping_feedback_root must be within [0, 1], got {rho}")
        self._share_inputs = (s_d * model.damping, h, rho)
        self._feedback_share: np.ndarray | None = None  # on first use (feedback_share)
        self._speed = np.array(model.speed_limit, dtype=float)  # writable, as the one call's
        # nothing to add where the URDF gives no <dynamics> on an active joint
        self.enabled &= bool(np.any(model.damping[self._active] * s_d > 0.0)
                             or np.any(model.friction[self._active] * s_f > 0.0))
        self.period = h
        self._v_s = v_s
        self._none, self._no_brake = np.zeros(0), np.zeros(0, dtype=bool)  # arguments not given
        self._tau = np.zeros(len(self._active))
        self.torque = np.zeros(len(self._active))  # the last compensation added [N·m or N]

    @property
    def feedback_share(self) -> np.ndarray:
        """β per DOF: the share of the viscous compensation on the measured velocity. One
        joint, implicit damping (as MuJoCo and a stiff gearbox), the compensation s d v a step
        late: (1 + r) z² − z − r β = 0, r = h d / M_jj; its negative root (−r/(1 + r) at β = 1:
        −0.93 on xarm7's wrist, the command chatters) is −ρ at β = ρ (1 + ρ (1 + r))/r, and
        nearer 0 below. M_jj at the neutral configuration, from the recursion the controller
        runs anyway (τ(e_j) − τ(0)), on the first use: no kernel of its own to compile at
        start-up (the mass matrix's cost a fresh first launch 10 s)."""
        if self._feedback_share is None:
            damping, h, rho = self._share_inputs
            beta = np.ones(self.model.nv)
            damped = np.flatnonzero(damping > 0.0)
            if rho < 1.0 and h > 0.0 and damped.size:
                from ..dynamics import inverse_dynamics

                m, q = self.model, self.model.neutral_configuration()
                zero = np.zeros(m.nv)
                bias = inverse_dynamics(m, q, zero, zero)
                for j in damped:
                    zero[j] = 1.0
                    inertia = inverse_dynamics(m, q, np.zeros(m.nv), zero)[j] - bias[j]
                    zero[j] = 0.0
                    r = h * damping[j] / max(inertia, 1e-12)
                    beta[j] = min(1.0, rho * (1.0 + rho * (1.0 + r)) / r)
            self._feedback_share = beta
        return self._feedback_share

    def compensation(self, q: np.ndarray, v: np.ndarray,
                     intended_velocity: np.ndarray | None = None,
                     acceleration: np.ndarray | None = None,
                     braked: np.ndarray | None = None) -> np.ndarray:
        """s_d d (v + h a) + s_f f_c tanh(w / v_s) of the active joints (active order), w the
        intended velocity of the active joints (None: α v, α = min(1, |v|/v_s)), a their
        commanded accelerations (None: 0), h ``damping_compensation_period`` (module
        docstring)."""
        return self._compensate(q, v, intended_velocity, acceleration, braked, self._none,
                                self._none)

    def apply(self, q: np.ndarray, v: np.ndarray, out: LawOutput,
              acceleration: np.ndarray | None = None, braked: np.ndarray | None = None
              ) -> None:
        """``out.tau_active`` plus the compensation (a buffer of this stage); ``acceleration``:
        the active joints' accelerations the command implies (``SafetyLayer.acceleration``)."""
        if not self.enabled or out.friction_compensated:
            return None
        self._compensate(q, v, out.intended_velocity, acceleration, braked,
                         float_array(out.tau_active), self._tau)
        out.tau_active = self._tau
        return None

    def _compensate(self, q, v, intended_velocity, acceleration, braked, base: np.ndarray,
                    total: np.ndarray) -> np.ndarray:
        """The compensation into ``self.torque`` (and ``base`` + it into ``total`` when
        ``base`` is not empty), in one compiled call."""
        intended = intended_velocity is not None
        compensation_torques(
            float_array(q), float_array(v),
            float_array(intended_velocity) if intended else self._none,
            float_array(acceleration) if acceleration is not None else self._none,
            np.ascontiguousarray(braked, dtype=bool) if braked is not None else self._no_brake,
            intended, acceleration is not None, braked is not None, self._active, self._v_s,
            self.feedback_share if intended else self._none, self._speed, self.period,
            *self._force_arguments, self.torque, base, total)
        return self.torque


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous float64 in)
def compensation_torques(q, v, intended_velocity, acceleration, braked, has_intent,
                         has_acceleration, has_braked, active, v_s, feedback_share, speed,
                         period, q_index, coefficients, torque, base, total):
    """``FrictionCompensation.compensation`` (module docstring) into ``torque`` (active
    order): w = α v (α = min(1, |v|/v_s)) or the law's intent, 0 where braked; the viscous
    velocity v, or β v + (1 − β) clip(w, ±v_max) with an intent, + h a; then minus the
    passive-force model at those velocities. With a non-empty ``base`` (a law's torques),
    ``total`` = ``base`` + ``torque`` (the stage's output)."""
    nv = v.shape[0]
    w, viscous, forces = np.empty(nv), np.empty(nv), np.empty(nv)
    for i in range(nv):
        w[i] = min(abs(v[i]) / v_s, 1.0) * v[i]
    if has_intent:
        for a in range(active.shape[0]):
            w[active[a]] = intended_velocity[a]
    if has_braked:
        for a in range(active.shape[0]):
            if braked[a]:
                w[active[a]] = 0.0
    for i in range(nv):
        if has_intent:  # the part a late command can carry (w within the velocity limits)
            viscous[i] = v[i] * feedback_share[i] + (1.0 - feedback_share[i]) * min(
                max(w[i], -speed[i]), speed[i])
        else:
            viscous[i] = v[i]
    if has_acceleration and period > 0.0:
        for a in range(active.shape[0]):
            viscous[active[a]] += period * acceleration[a]
    passive_element_forces(q, viscous, w, q_index, coefficients, forces)
    for a in range(active.shape[0]):
        torque[a] = -forces[active[a]]
    if base.shape[0] > 0:
        for a in range(active.shape[0]):
            total[a] = base[a] + torque[a]
