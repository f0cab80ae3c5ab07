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
use the same shaper, so an offline run sees the command the wire carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec
from .friction import FrictionCompensation
from .law import LawOutput
from .limits import SafetyLayer

__all__ = ["CommandShaper", "shaper_parameters"]


def shaper_parameters() -> list[ParameterSpec]:
    """The parameters of every stage, once each."""
    return [*SafetyLayer.parameters, *FrictionCompensation.parameters]


class CommandShaper:
    """The stages above for one model (a new passive set or new settings: a new shaper)."""

    def __init__(self, model: RobotModel, settings: Mapping[str, Any],
                 workspace: JacobianWorkspace | None = None) -> None:
        self.safety = SafetyLayer(model, settings, workspace)
        self.friction = FrictionCompensation(model, settings)

    def apply(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> LawOutput:
        """``out`` with its torques (and passive accelerations, status) shaped in place."""
        safety, friction = self.safety, self.friction
        reserve = None  # what stage 2 will add (at v, a = 0): room kept in the effort limits
        if friction.enabled and not out.friction_compensated:
            reserve = partial(friction.compensation, q, v, out.intended_velocity)
        safety.apply(q, v, out, reserve)
        law_tau = out.tau_active
        self._compensate(q, v, out)
        if safety.cut_by_motors(q, v, out, law_tau, reserve):  # the layer's torques instead
            self._compensate(q, v, out)
        return out

    def _compensate(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> None:
        safety, friction = self.safety, self.friction
        if safety.acceleration is None or out.intended_velocity is None:
            # no intent (a law that gives none): the viscous part on v, as measured
            friction.apply(q, v, out)
        else:
            friction.apply(q, v, out, safety.acceleration, safety.slowed_joints)
