"""One interface for every control law the controller node runs (ROS-free).

A law is built from a ``RobotModel`` (with its passive set), the node's parameter values
(``settings``: the names of its own ``parameters`` table and the node's) and the cycle's shared
``JacobianWorkspace``; each cycle ``compute(q, v, reference, t, with_jacobians)`` (``t``: the
state's time [s], for laws that shape their reference in time) returns a
``LawOutput``: ``tau_active`` in the model's active order, ``qdd_passive``, and J_G/J_D of the
task frame when asked (from the same (4.6) pass as the command). A new passive set (actuator
failure) or new gains is a new law object; the node never looks inside one.

References: ``reference_kind`` says what the law follows — ``"joint"`` (``JointReference`` of
the active joints, from ``~/joint_reference``), ``"pose"`` (``TaskReference`` of the task
frame, from ``~/pose_reference``) or ``"none"``. ``hold_reference(q)`` is the reference that
holds the measured state: the node latches it when the law starts and after a safety stop.

Adding a mode: a subclass in its own file of ``control/`` and one line in ``CONTROL_LAWS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..parameters import ParameterSpec

__all__ = ["ControlLaw", "LawOutput"]


@dataclass
class LawOutput:
    """One cycle's result. Arrays may be the law's preallocated buffers (valid until the next
    ``compute``). The task and operational-space laws build it positionally every cycle: a
    new field goes at the end."""

    tau_active: np.ndarray  # (n_active,) N·m or N, model active order
    qdd_passive: np.ndarray  # (n_passive,) rad/s² or m/s², model passive order
    J_G: np.ndarray | None = None  # (6, n_active) of the task frame, when asked
    J_D: np.ndarray | None = None  # (n_passive, n_active), when asked
    status: str = ""  # e.g. "singular" when the task lost rank (shown in diagnostics)
    task_inertia_inverse: np.ndarray | None = None  # (6, 6) Λ⁻¹ of the task frame, if known
    task_point: np.ndarray | None = None  # (3,) where the task frame is (root axes)
    # (n_active,) the velocity the law drives the active joints toward (its smooth sign is the
    # direction of the friction compensation, control/friction.py); None: the measured one
    intended_velocity: np.ndarray | None = None
    # the law already includes the active joints' URDF friction and damping (swing_up):
    # the friction stage adds nothing
    friction_compensated: bool = False
    # the active joints' accelerations that ``tau_active`` gives at (q, v) with the model's
    # passive forces ``tau_passive`` (n_passive,), as the law solved them ((5.4) of the task
    # and joint laws) or found them (the operational-space law's forward dynamics on the
    # workspace it configured already); None: the safety layer finds them by the forward
    # dynamics
    qdd_active: np.ndarray | None = None
    tau_passive: np.ndarray | None = None
    # (S, J_G): the rows S (k, 6) of the task frame's acceleration [linear; angular] the law
    # sets, S J_G qdd_a of (6.10), and the J_G (6, n_active) it solved with: where the safety
    # layer bounds some joints, the others keep these rows (``limits.keep_task_rows``); None:
    # the bounded joints are only clipped
    task_rows: tuple[np.ndarray, np.ndarray] | None = None
    # the torques follow a plan that keeps the speed and position limits itself (a failure
    # reaction's planned swing): the safety layer's instantaneous bounds leave them
    planned: bool = False


class ControlLaw(ABC):
    """Base of the controller's laws; see the module docstring."""

    mode: ClassVar[str]
    reference_kind: ClassVar[str] = "none"
    parameters: ClassVar[tuple[ParameterSpec, ...]] = ()

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        self.model = model
        self.frame = frame
        self.workspace = workspace if workspace is not None else JacobianWorkspace(model)

    @abstractmethod
    def hold_reference(self, q: np.ndarray) -> Any:
        """The reference that holds the measured configuration ``q``."""

    def check_reference(self, reference: Any) -> None:
        """``ValueError`` with the reason for a reference this law cannot follow."""
        return None

    def carry_reference(self, reference: Any, old_model: RobotModel,
                        previous: ControlLaw | None = None) -> Any:
        """The reference of a law built for ``old_model`` (``previous``: that law, when known),
        for this law's model (a new passive set); None to re-latch at the next state."""
        return reference

    @abstractmethod
    def compute(self, q: np.ndarray, v: np.ndarray, reference: Any, t: float,
                with_jacobians: bool) -> LawOutput:
        """T_a (and qdd_p, J_G, J_D) for the measured state and the reference; ``ValueError``
        when no finite command exists (e.g. a singular passive inertia)."""
