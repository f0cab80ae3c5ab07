"""Friction and damping compensation of the active joints (ROS-free; see ``command.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..model import RobotModel
from ..parameters import ParameterSpec
from .law import LawOutput

__all__ = ["FrictionCompensation"]


class FrictionCompensation:
    """Placeholder: no compensation yet."""

    parameters: ClassVar[tuple[ParameterSpec, ...]] = ()

    def __init__(self, model: RobotModel, settings: Mapping[str, Any]) -> None:
        self.model = model

    def apply(self, q: np.ndarray, v: np.ndarray, out: LawOutput) -> None:
        return None
