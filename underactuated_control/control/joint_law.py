"""Modes ``joint`` and ``hold``: joint-space control through the hybrid recursion.

joint: qdd_a = qdd_ref + kd (v_ref - v) + kp (q_ref - q) on the active joints, then T_a and
qdd_p from the hybrid recursion (section 5) with T_p from the passive-force model; the
reference follows ``~/joint_reference`` or a ``~/follow_joint_trajectory`` goal (one sampler,
``trajectory_sampling.py``). hold: the same law, reference latched at the measured
configuration (incoming joint references are kept for a later ``mode:=joint``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec, per_joint
from .joint_space import JointReference, JointSpaceController
from .law import ControlLaw, LawOutput

__all__ = ["JointLaw", "HoldLaw"]


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
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        super().__init__(model, settings, frame, workspace)
        active = [model.joint_index(n) for n in model.active_joints]
        kp = per_joint("kp", settings["kp"], model.joint_names)[active]
        kd = per_joint("kd", settings["kd"], model.joint_names)[active]
        self.controller = JointSpaceController(model, kp, kd, dynamics=self.workspace.dynamics)

    def hold_reference(self, q: np.ndarray) -> JointReference:
        na = self.model.n_active
        return JointReference(self.controller.active_positions(q).copy(), np.zeros(na),
                              np.zeros(na))

    def carry_reference(self, reference: JointReference | None, old_model: RobotModel
                        ) -> JointReference | None:
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
        gaps = np.isnan(reference.position)
        if gaps.any():  # joints that became active hold their measured position
            reference.position[gaps] = self.controller.active_positions(q)[gaps]
        J_G = J_D = None
        if with_jacobians:  # one (4.6) pass for J_G, J_D and the command
            J_G, J_D = self.workspace.generalized(self.frame, q)
            res = self.controller.compute(q, v, reference, configured=True)
        else:
            res = self.controller.compute(q, v, reference)
        return LawOutput(res.tau_active, res.qdd_passive, J_G, J_D)


class HoldLaw(JointLaw):
    """Joint law whose reference stays where the mode started."""

    mode = "hold"
    reference_kind = "none"
