"""The arm angle ψ of a 7-DOF arm (Seraji, eq. 14-15; doc/architecture.md §5).

With S, E, W the shoulder, elbow and wrist points, u = (W - S)/|W - S| and a reference
direction r (default vertical), ψ is the angle about u from the reference plane (through SW,
containing r) to the arm plane SEW:

    a = E - S,   y = u · (r × a),   x = r · a - (r · u)(u · a),   ψ = atan2(y, x)

(x and y are the components of the elbow's offset from SW along r⊥ and u × r⊥). Its row
Jacobian follows from the linear Jacobians of E, W and S:

    dψ = (x dy - y dx) / (x² + y²),   dy/da = u × r,   dx/da = r - (r·u) u,
    dy/du = r × a,   dx/du = -(r·u) a - (u·a) r,   du = (I - u uᵀ) db / |b|,  b = W - S.

It is singular when SW is parallel to r (the reference plane is undefined) or when E lies on
the SW line (a stretched arm: no arm plane); both are detected and reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..so3 import cross

__all__ = ["ArmAngle", "ArmAngleValue", "arm_angle_from_points"]


@dataclass
class ArmAngleValue:
    psi: float  # rad
    jacobian: np.ndarray  # (nv,)
    singular: bool
    reason: str  # "" or why it is singular
    shoulder: np.ndarray
    elbow: np.ndarray
    wrist: np.ndarray


def arm_angle_from_points(S: np.ndarray, E: np.ndarray, W: np.ndarray,
                          reference=(0.0, 0.0, 1.0)) -> float:
    """ψ from the three points (radians, in (-π, π])."""
    b = W - S
    u = b / np.linalg.norm(b)
    r = np.asarray(reference, dtype=float)
    a = E - S
    y = u @ cross(r, a)
    x = r @ a - (r @ u) * (u @ a)
    return float(np.arctan2(y, x))


class ArmAngle:
    """ψ(q) and its row Jacobian for a model; S, E, W are link origins (names)."""

    def __init__(self, model: RobotModel, shoulder: str, elbow: str, wrist: str,
                 reference=(0.0, 0.0, 1.0), singular_tolerance: float = 1e-3) -> None:
        for name in (shoulder, elbow, wrist):
            model.frame(name)  # ValueError naming an unknown link
        r = np.asarray(reference, dtype=float)
        if r.shape != (3,) or not np.all(np.isfinite(r)) or np.linalg.norm(r) < 1e-9:
            raise ValueError(f"reference must be a non-zero 3-vector, got {reference}")
        self.model = model
        self.shoulder, self.elbow, self.wrist = shoulder, elbow, wrist
        self.reference = r / np.linalg.norm(r)
        self.singular_tolerance = singular_tolerance
        self.workspace = JacobianWorkspace(model)

    def _point(self, ws: JacobianWorkspace, name: str) -> tuple[np.ndarray, np.ndarray]:
        p, _ = ws.frame_placement(name)
        return p, ws.point_jacobian(self.model.frame(name).body, p)[:3].copy()

    def evaluate(self, q: np.ndarray, configured: bool = False,
                 workspace: JacobianWorkspace | None = None) -> ArmAngleValue:
        """ψ, ∂ψ/∂q and the singularity flag. ``configured``: the workspace (own, or the one
        given) already holds q."""
        ws = workspace or self.workspace
        if not configured:
            ws.set_configuration(q)
        S, JS = self._point(ws, self.shoulder)
        E, JE = self._point(ws, self.elbow)
        W, JW = self._point(ws, self.wrist)
        r = self.reference
        b = W - S
        nb = np.linalg.norm(b)
        if nb < 1e-9:
            return ArmAngleValue(0.0, np.zeros(self.model.nv), True, "shoulder and wrist "
                                 "coincide", S, E, W)
        u = b / nb
        a = E - S
        y = u @ cross(r, a)
        x = r @ a - (r @ u) * (u @ a)
        r_perp = np.linalg.norm(r - (r @ u) * u)
        e_perp = np.linalg.norm(a - (u @ a) * u)
        tol = self.singular_tolerance
        reason = ""
        if r_perp < tol:
            reason = "the shoulder-wrist line is parallel to the reference direction"
        elif e_perp < tol * max(1.0, nb):
            reason = "the elbow is on the shoulder-wrist line (stretched arm)"
        n2 = x * x + y * y
        if n2 < 1e-24:
            return ArmAngleValue(0.0, np.zeros(self.model.nv), True, reason or "degenerate",
                                 S, E, W)
        g_a = (x * cross(u, r) - y * (r - (r @ u) * u)) / n2
        g_u = (x * cross(r, a) - y * (-(r @ u) * a - (u @ a) * r)) / n2
        g_b = (g_u - (u @ g_u) * u) / nb
        jac = g_a @ (JE - JS) + g_b @ (JW - JS)
        return ArmAngleValue(float(np.arctan2(y, x)), jac, bool(reason), reason, S, E, W)
