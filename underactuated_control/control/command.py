"""What every law's command goes through before the wire (ROS-free), in this order:

1. ``limits.SafetyLayer``: the accelerations the law's torques would give are kept within the
   active joints' position and velocity limits (braking profile); the torques are recomputed
   by the hybrid recursion when it overrides the law, and the law's status says so; those
   torques are scaled to leave room in the effort limits for stage 2's compensation (at the
   measured velocity), which the effort clamp would otherwise cut into other accelerations
   (xarm7's joint3: 17 of its 30 N·m of damping compensation at 3.4 rad/s).
2. ``friction.FrictionCompensation``: the URDF ``<dynamics>`` damping and dry friction of the
   active joints, compensated as feed-forward (the laws plan in a frictionless model).
3. Where the layer left the law's torques and the total of 1-2 passes the effort limits, the
   accelerations of the command the motors cut from it are checked against the same bounds
   (``SafetyLayer.cut_by_motors``); where they pass one, the layer's scaled torques replace
   the law's and stage 2 runs again on them.

The effort limits come last (the node's ``EffortMapper``). The node and the in-process loops
use the same shaper, so an offline run sees the command the wire carries. Where a law gives its
own accelerations and intent and the friction stage is on (the task, joint and hold laws, the
operational-space law), the cycle in which no bound bites — the common one — is one compiled
call (``own_command_kernel``: stage 1's clip, stage 2, stage 3's check), the same kernels the
separate stages call; any other case takes the stages one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from ..buffers import float_array, split_views, take
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec
from .friction import FrictionCompensation, compensation_torques
from .law import LawOutput
from .limits import SafetyLayer, bound_own_accelerations, past_limits

__all__ = ["CommandShaper", "own_command_kernel", "shaper_parameters"]


def shaper_parameters() -> list[ParameterSpec]:
    """The parameters of every stage, once each."""
    return [*SafetyLayer.parameters, *FrictionCompensation.parameters]


class CommandShaper:
    """The stages above for one model (a new passive set or new settings: a new shaper)."""

    def __init__(self, model: RobotModel, settings: Mapping[str, Any],
                 workspace: JacobianWorkspace | None = None) -> None:
        self.safety = SafetyLayer(model, settings, workspace)
        self.friction = FrictionCompensation(model, settings)
        self._kernel_fixed: tuple | None = None  # (_fixed_arguments)

    def apply(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> LawOutput:
        """``out`` with its torques (and passive accelerations, status) shaped in place."""
        safety, friction = self.safety, self.friction
        if out.planned:  # a plan within the limits: the layer's bounds would fight its
            # torques (Talos' failed wrist under gravity: left to the plan, the hand 1.8 mm
            # RMS and 1.04 of a speed limit; bounded by the layer, 236 mm); stage 2 only
            safety.overrode, safety.acceleration = False, None
            if friction.enabled and not out.friction_compensated:
                self._compensate(q, v, out)
            return out
        if (safety.enabled and friction.enabled and out.qdd_active is not None
                and out.tau_passive is not None and out.intended_velocity is not None
                and not out.friction_compensated):
            return self._apply_in_one_call(q, v, out)
        reserve = None  # what stage 2 will add (at v, a = 0): room kept in the effort limits
        if friction.enabled and not out.friction_compensated:
            reserve = partial(friction.compensation, q, v, out.intended_velocity)
        safety.apply(q, v, out, reserve)
        law_tau = out.tau_active
        self._compensate(q, v, out)
        if safety.cut_by_motors(q, v, out, law_tau, reserve):  # the layer's torques instead
            self._compensate(q, v, out)
        return out

    def _apply_in_one_call(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> LawOutput:
        """``apply`` for a law that gives its accelerations, T_p and intent, with the friction
        stage on: stages 1-3 in one compiled call where no bound bites (the common cycle);
        where one does, the layer's override and stage 2 after it, as ``apply``."""
        safety, friction = self.safety, self.friction
        safety.overrode = False
        safety.acceleration = None
        q, v, law_tau = float_array(q), float_array(v), float_array(out.tau_active)
        intended = float_array(out.intended_velocity)
        limited, past = own_command_kernel(law_tau, float_array(out.qdd_active), q, v, intended,
                                           *(self._kernel_fixed or self._fixed_arguments()))
        if limited < 0:  # a non-finite command: the stages as they refuse it
            reserve = partial(friction.compensation, q, v, intended)
            safety.apply(q, v, out, reserve)
            self._compensate(q, v, out)
            return out
        if safety.after_own_clamp(q, v, out, limited, partial(
                friction.compensation, q, v, intended) if limited else None):
            self._compensate(q, v, out)  # on the layer's torques (stage 3 is for the law's)
            return out
        out.tau_active = friction._tau  # the law's torques plus stage 2's
        if past and safety.cut_by_motors(q, v, out, law_tau, partial(
                friction.compensation, q, v, intended)):
            self._compensate(q, v, out)
        return out

    def _fixed_arguments(self) -> tuple:
        """``own_command_kernel``'s arguments after the intent: the stages' settings and fixed
        arrays copied into two flat buffers (``stage_inputs``; fixed for the shaper's life, as
        its settings), then the stages' own output arrays, gathered once."""
        safety, friction, guard = self.safety, self.friction, self.safety.guard
        force_q_index, coefficients = friction._force_arguments
        na, nv = len(guard.lower), self.safety.model.nv
        sizes = np.array([na, nv, coefficients.shape[0]], np.int64)  # the ints' header
        _, n_ints, n_floats = stage_inputs(np.empty(0), sizes)  # where the layout ends
        ints, floats = np.zeros(n_ints, np.int64), np.zeros(n_floats)
        ints[:3] = sizes
        inputs = split_views(stage_inputs(floats, ints)[0], ints, floats, 4)
        inputs.q_index[:], inputs.v_index[:] = guard.kernel_arguments[:2]
        inputs.active[:], inputs.force_q_index[:] = friction._active, force_q_index
        inputs.lower[:], inputs.upper[:], inputs.speed[:] = guard.kernel_arguments[2:5]
        inputs.effort[:] = safety._effort
        inputs.feedback_share[:], inputs.speed_limit[:] = friction.feedback_share, friction._speed
        inputs.coefficients[:] = coefficients
        inputs.settings[:] = (*guard.kernel_arguments[5:], friction._v_s, friction.period)
        self._kernel_fixed = (floats, ints, *guard.last_bounds, safety._qdd_a, guard.active,
                              safety.slowed_joints, friction.torque, friction._tau)
        return self._kernel_fixed

    def _compensate(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> None:
        safety, friction = self.safety, self.friction
        if safety.acceleration is None or out.intended_velocity is None:
            # no intent (a law that gives none): the viscous part on v, as measured
            friction.apply(q, v, out)
        else:
            friction.apply(q, v, out, safety.acceleration, safety.slowed_joints)


class StageInputs(NamedTuple):
    """The stages' fixed arrays and settings, blocks of two flat buffers (``stage_inputs``):
    ``own_command_kernel`` takes two arguments for the sixteen they are."""

    q_index: np.ndarray  # ints: the guard's configuration index per active joint
    v_index: np.ndarray  # ints: its DOF index
    active: np.ndarray  # ints: the friction stage's active DOF
    force_q_index: np.ndarray  # ints: its force model's configuration index per DOF
    lower: np.ndarray  # floats: the guard's position bounds [rad or m]
    upper: np.ndarray
    speed: np.ndarray  # its speed bounds [rad/s or m/s]
    effort: np.ndarray  # the motors' effort limits [N·m or N]
    feedback_share: np.ndarray  # β per DOF (friction.py)
    speed_limit: np.ndarray  # the URDF velocity limits per DOF
    coefficients: np.ndarray  # the friction stage's force model's table
    settings: np.ndarray  # braking, gain, velocity_gain, v_s, period


@njit(cache=True, inline="always")
def stage_inputs(floats, ints):
    """(StageInputs, end of ``ints``, end of ``floats``); ``ints`` starts with the sizes
    (n_a, nv, the coefficient table's rows)."""
    na, nv, rows = ints[0], ints[1], ints[2]
    q_index, o = take(ints, 3, (na,))
    v_index, o = take(ints, o, (na,))
    active, o = take(ints, o, (na,))
    force_q_index, o = take(ints, o, (nv,))
    lower, p = take(floats, 0, (na,))
    upper, p = take(floats, p, (na,))
    speed, p = take(floats, p, (na,))
    effort, p = take(floats, p, (na,))
    feedback_share, p = take(floats, p, (nv,))
    speed_limit, p = take(floats, p, (nv,))
    coefficients, p = take(floats, p, (rows, nv))
    settings, p = take(floats, p, (5,))
    return StageInputs(q_index=q_index, v_index=v_index, active=active,
                       force_q_index=force_q_index, lower=lower, upper=upper, speed=speed,
                       effort=effort, feedback_share=feedback_share, speed_limit=speed_limit,
                       coefficients=coefficients, settings=settings), o, p


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous arrays in)
def own_command_kernel(tau_active, qdd_active, q, v, intended_velocity, floats, ints, lo, hi,
                       qdd, limited, braked, torque, total):
    """Stages 1-3 of the module docstring in one call, for a law that gives its own
    ``qdd_active`` and intent, the stages' settings and fixed arrays in ``floats`` and
    ``ints`` (``stage_inputs``): stage 1's clip (``bound_own_accelerations``: −1 where
    ``tau_active`` is not finite, else how many joints a bound clipped, ``qdd``, ``lo``,
    ``hi``, ``limited``, ``braked`` written); where none was, stage 2 (``compensation_torques``
    with the intent, those accelerations and braked joints: ``torque``, and ``total`` =
    ``tau_active`` + it) and stage 3's check (``past_limits`` of ``total`` against the
    effort limits). Returns (the clip's count, whether the total passes the effort limits)."""
    s, _, _ = stage_inputs(floats, ints)
    braking, gain, velocity_gain, v_s, period = (s.settings[0], s.settings[1], s.settings[2],
                                                 s.settings[3], s.settings[4])
    n = bound_own_accelerations(tau_active, qdd_active, q, v, s.q_index, s.v_index, s.lower,
                                s.upper, s.speed, braking, gain, velocity_gain, lo, hi, qdd,
                                limited, braked)
    if n != 0:
        return n, False
    # typed bools, not literal True: the version the stage's Python call compiles (one
    # version, whether or not this loads from the cache)
    given = qdd.shape[0] >= 0
    compensation_torques(q, v, intended_velocity, qdd, braked, given, given, given, s.active,
                         v_s, s.feedback_share, s.speed_limit, period, s.force_q_index,
                         s.coefficients, torque, tau_active, total)
    return n, past_limits(total, s.effort)
