"""Configuration control (Seraji, eq. 9-13): weighted damped least squares on the augmented
Jacobian J = [J_e; J_c]:

    dθ = (Jᵀ W J + W_v)⁻¹ Jᵀ W dX,     W = diag(W_e, W_c),
    dX = X_d(N+1) - X(N)   (hand: position difference and rotation vector log(R_d Rᵀ);
                            functions: their own desired change, see ``functions.py``)

solved by Cholesky, or as the least-squares problem [√W J; √W_v] dθ = [√W dX; 0] when
(JᵀWJ + W_v) is rank-deficient, over the **active** joints only: a passive joint is locked out
of direct command (its column is dropped; its motion is left to the dynamics and the
controller). With W_v = 0 and a square regular J this is the exact
inverse (8). Weights may change between steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..control.trajectories import LineTrajectory, cycloidal
from ..jacobians import JacobianWorkspace
from ..model import FLOATING, RobotModel
from ..so3 import rotation_error
from .functions import CollisionAvoidance, Context

__all__ = ["ConfigurationControl", "StepResult", "ConfigurationTrajectory"]


@dataclass
class StepResult:
    q_next: np.ndarray
    dq: np.ndarray
    position_error: float  # m, |p_d(N+1) - p(N)| before the step
    orientation_error: float  # rad
    values: dict = field(default_factory=dict)  # function name -> current φ
    weights: dict = field(default_factory=dict)  # function name -> weights used
    notes: dict = field(default_factory=dict)  # function name -> singularity notes


class ConfigurationControl:
    """One configuration-control step per call: ``step(q, target_pose, targets) -> result``.

    ``task_weights`` W_e (6: x, y, z, rx, ry, rz), ``joint_velocity_weights`` W_v (scalar or
    nv), both attributes that can change between steps.
    """

    def __init__(self, model: RobotModel, tip: str, functions: Sequence = (),
                 task_weights: Sequence[float] | float = 1.0,
                 joint_velocity_weights: Sequence[float] | float = 0.0) -> None:
        model.frame(tip)
        floating = [model.joint_names[k] for k in range(model.nb)
                    if model.hinge_type[k] == FLOATING]
        if floating:
            raise ValueError(f"configuration control handles 1-DOF joints only, not {floating}")
        self.model, self.tip = model, tip
        self.functions = list(functions)
        self.task_weights = task_weights
        self.joint_velocity_weights = joint_velocity_weights
        self.workspace = JacobianWorkspace(model)
        self.columns = model.active_dofs

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        We = np.broadcast_to(np.asarray(self.task_weights, dtype=float), (6,)).copy()
        Wv = np.broadcast_to(np.asarray(self.joint_velocity_weights, dtype=float),
                             (self.model.nv,)).copy()
        for name, w in (("task_weights", We), ("joint_velocity_weights", Wv)):
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"{name} must be finite and >= 0, got {w.tolist()}")
        return We, Wv

    def step(self, q: np.ndarray, target_pose: tuple[np.ndarray, np.ndarray],
             targets: dict | None = None) -> StepResult:
        """Move from q toward the next desired sample (target position, rotation matrix) and
        the functions' targets (e.g. ``{"arm_angle": psi_next}``)."""
        m, ws = self.model, self.workspace
        q = np.asarray(q, dtype=float)
        m.check_state(q=q)
        We, Wv = self._weights()
        ws.set_configuration(q)
        p, R = ws.frame_placement(self.tip)
        J_e = ws.frame_jacobian(self.tip).copy()
        p_d, R_d = np.asarray(target_pose[0], float), np.asarray(target_pose[1], float)
        dX_e = np.concatenate([p_d - p, rotation_error(R_d, R)])
        ctx = Context(q=q, workspace=ws, hand_jacobian=J_e, targets=targets or {})
        for f in self.functions:
            if isinstance(f, CollisionAvoidance):
                ctx.elbow_fade = min(ctx.elbow_fade, f.fade(ws))
        rows_J, rows_dX, rows_W = [J_e], [dX_e], [We]
        result = StepResult(q_next=q, dq=np.zeros(m.nv),
                            position_error=float(np.linalg.norm(dX_e[:3])),
                            orientation_error=float(np.linalg.norm(dX_e[3:])))
        for f in self.functions:
            r = f.rows(ctx)
            rows_J.append(r.jacobian)
            rows_dX.append(r.delta)
            rows_W.append(r.weight)
            result.values[f.name] = r.value
            result.weights[f.name] = r.weight
            if r.note:
                result.notes[f.name] = r.note
        J = np.vstack(rows_J)[:, self.columns]
        dX = np.concatenate(rows_dX)
        W = np.concatenate(rows_W)
        JtW = J.T * W
        H = JtW @ J + np.diag(Wv[self.columns])  # (10): (Jᵀ W J + W_v) dθ = Jᵀ W dX
        try:
            L = np.linalg.cholesky(H)
            if np.diag(L).min() < 1e-7 * np.sqrt(max(np.diag(H).max(), 1e-300)):
                raise np.linalg.LinAlgError("ill-conditioned")
            dq_active = np.linalg.solve(L.T, np.linalg.solve(L, JtW @ dX))
        except np.linalg.LinAlgError:  # rank-deficient with W_v = 0: least squares
            sw = np.sqrt(W)
            A = np.vstack([sw[:, None] * J, np.diag(np.sqrt(Wv[self.columns]))])
            b = np.concatenate([sw * dX, np.zeros(len(self.columns))])
            # directions weaker than 1e-7 of the strongest are not moved (a capped collision
            # weight of 1e8 next to a near-singular row gave 1e8 rad steps with 1e-12)
            dq_active = np.linalg.lstsq(A, b, rcond=1e-7)[0]
        dq = np.zeros(m.nv)
        dq[self.columns] = dq_active
        result.dq = dq
        result.q_next = q + dq
        return result


class ConfigurationTrajectory:
    """Cycloidal hand pose (straight line, geodesic orientation) and arm angle from a start to
    a goal in ``duration`` s (ARCHITECTURE.md §5). The arm angle takes the shorter way round
    (from 170° to -170° through 180°, not through 0°)."""

    def __init__(self, p0, R0, psi0: float, p1, R1, psi1: float, duration: float) -> None:
        self.hand = LineTrajectory(np.asarray(p0, float), np.asarray(R0, float),
                                   np.asarray(p1, float), np.asarray(R1, float), duration)
        if not (np.isfinite(psi0) and np.isfinite(psi1)):
            raise ValueError(f"arm angles must be finite, got {psi0} and {psi1}")
        self.psi0, self.duration = psi0, duration
        self.psi1 = psi0 + (psi1 - psi0 + np.pi) % (2 * np.pi) - np.pi

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray, float]:
        ref = self.hand(t)
        s, _, _ = cycloidal(t, self.duration)
        return ref.position, ref.rotation, self.psi0 + s * (self.psi1 - self.psi0)
