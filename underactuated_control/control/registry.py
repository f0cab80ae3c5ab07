"""The controller's modes: ``mode`` parameter value -> control law class (``law.py``)."""

from __future__ import annotations

from ..parameters import ParameterSpec
from .joint_law import HoldLaw, JointLaw
from .law import ControlLaw
from .operational_space_law import OperationalSpaceLaw
from .swing_up_law import SwingUpLaw
from .task_law import TaskLaw

__all__ = ["CONTROL_LAWS", "law_parameters"]

CONTROL_LAWS: dict[str, type[ControlLaw]] = {
    "joint": JointLaw,
    "hold": HoldLaw,
    "task": TaskLaw,
    "operational_space": OperationalSpaceLaw,
    "swing_up": SwingUpLaw,
}


def law_parameters() -> list[ParameterSpec]:
    """Every law's parameters, once each (laws may share them, as joint and hold do)."""
    specs: dict[str, ParameterSpec] = {}
    for law in CONTROL_LAWS.values():
        for spec in law.parameters:
            if specs.setdefault(spec.name, spec) is not spec:
                raise AssertionError(f"two laws declare parameter {spec.name} differently")
    return list(specs.values())
