"""Mode ``task``: end-effector tracking through J_G (paper §6.2, §7) with ``EndEffectorTracker``;
the reference is a pose of the task frame (``~/pose_reference``), the measured pose until one
arrives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec
from .law import ControlLaw, LawOutput
from .task_space import TASKS, EndEffectorTracker, TaskReference

__all__ = ["TaskLaw"]

_GAINS = {  # parameter -> EndEffectorTracker argument
    "task_kp_position": "kp_position", "task_kd_position": "kd_position",
    "task_kp_orientation": "kp_orientation", "task_kd_orientation": "kd_orientation",
    "passive_weight": "passive_weight", "passive_kp": "passive_kp", "passive_kd": "passive_kd",
}


class TaskLaw(ControlLaw):
    mode = "task"
    reference_kind = "pose"
    parameters = (
        ParameterSpec("task", "pose", "task-mode task", choices=TASKS),
        ParameterSpec("task_kp_position", 100.0, "task stiffness, position", unit="1/s^2",
                      low=0.0, high=1e6),
        ParameterSpec("task_kd_position", 20.0, "task damping, position", unit="1/s", low=0.0,
                      high=1e4),
        ParameterSpec("task_kp_orientation", 100.0, "task stiffness, orientation",
                      unit="1/s^2", low=0.0, high=1e6),
        ParameterSpec("task_kd_orientation", 20.0, "task damping, orientation", unit="1/s",
                      low=0.0, high=1e4),
        ParameterSpec("passive_weight", 0.0, "weight of the rows keeping passive joints still "
                      "(task mode, paper 7.1)", low=0.0, high=1e6),
        ParameterSpec("passive_kp", 0.0, "passive-joint stiffness in those rows",
                      unit="1/s^2", low=0.0, high=1e6),
        ParameterSpec("passive_kd", 0.0, "passive-joint damping in those rows", unit="1/s",
                      low=0.0, high=1e4),
    )

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        super().__init__(model, settings, frame, workspace)
        gains = {arg: float(settings[name]) for name, arg in _GAINS.items()}
        self.tracker = EndEffectorTracker(model, frame, task=settings["task"],
                                          workspace=self.workspace, **gains)

    def hold_reference(self, q: np.ndarray) -> TaskReference:
        ws = self.workspace
        ws.set_configuration(q)
        position, rotation = ws.frame_placement(self.frame)
        return TaskReference(position=position.copy(), rotation=rotation.copy())

    def compute(self, q: np.ndarray, v: np.ndarray, reference: TaskReference,
                with_jacobians: bool) -> LawOutput:
        res = self.tracker.step(q, v, reference)  # J_G, J_D of this cycle's (4.6)
        ws = self.workspace
        return LawOutput(res.tau_active, res.qdd_passive, ws.J_G, ws.J_D,
                         "singular" if res.singular else "")
