"""The controller's modes: ``mode`` parameter value -> control law class (``law.py``)."""

from __future__ import annotations

from typing import Any

from ..parameters import ParameterSpec, coerce
from .command import shaper_parameters
from .joint_law import HoldLaw, JointLaw
from .law import ControlLaw
from .operational_space_law import OperationalSpaceLaw
from .swing_up_law import SwingUpLaw
from .task_law import TaskLaw

__all__ = ["CONTROL_LAWS", "law_parameters", "default_settings"]

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


def default_settings(**overrides: Any) -> dict[str, Any]:
    """Every law's and the command stages' parameter values at their defaults (as the node
    declares them), then ``overrides``: the settings of an in-process controller."""
    values = {s.name: coerce(s, s.default) for s in (*law_parameters(), *shaper_parameters())}
    values.update(overrides)
    return values
