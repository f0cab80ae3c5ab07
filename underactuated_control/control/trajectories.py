"""Cartesian reference trajectories for a frame: cycloidal straight lines and circles.

Cycloidal profile (doc/architecture.md §5): s(τ) = τ − sin(2πτ)/(2π), τ = t/T, so velocity and
acceleration start and end at zero. Orientation moves along the geodesic R0 Exp(s θ k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import so3
from ..so3 import rotation_error
from .task_space import TaskReference

__all__ = ["cycloidal", "LineTrajectory", "CircleTrajectory"]


def cycloidal(t: float, duration: float) -> tuple[float, float, float]:
    """(s, ds/dt, d²s/dt²) of the cycloidal profile, clamped outside [0, duration]."""
    if duration <= 0:
        raise ValueError(f"duration must be > 0 s, got {duration}")
    tau = min(max(t / duration, 0.0), 1.0)
    s = tau - np.sin(2 * np.pi * tau) / (2 * np.pi)
    if tau <= 0.0 or tau >= 1.0:
        return s, 0.0, 0.0
    ds = (1 - np.cos(2 * np.pi * tau)) / duration
    dds = 2 * np.pi * np.sin(2 * np.pi * tau) / duration**2
    return s, ds, dds


@dataclass
class LineTrajectory:
    """Straight line from (p0, R0) to (p1, R1) in ``duration`` seconds, cycloidal timing."""

    p0: np.ndarray
    R0: np.ndarray
    p1: np.ndarray
    R1: np.ndarray
    duration: float

    def __post_init__(self) -> None:
        self._rotvec = rotation_error(self.R1, self.R0)  # world axes: R1 = Exp(w) R0

    def __call__(self, t: float) -> TaskReference:
        s, ds, dds = cycloidal(t, self.duration)
        dp = np.asarray(self.p1) - np.asarray(self.p0)
        w = self._rotvec
        return TaskReference(position=self.p0 + s * dp, rotation=so3.exp(s * w) @ self.R0,
                             linear_velocity=ds * dp, angular_velocity=ds * w,
                             linear_acceleration=dds * dp, angular_acceleration=dds * w)


@dataclass
class CircleTrajectory:
    """Circle of ``radius`` about ``center`` in the plane normal to ``normal``, constant
    orientation R, starting at center + radius * u. ``profile="cycloidal"``: one turn in
    ``period`` seconds starting and ending at rest (phase 2π s(t/T)); ``"constant"``: uniform
    angular rate 2π/T forever."""

    center: np.ndarray
    radius: float
    normal: np.ndarray
    period: float
    rotation: np.ndarray
    start_direction: np.ndarray | None = None
    profile: str = "cycloidal"

    def __post_init__(self) -> None:
        if self.profile not in ("cycloidal", "constant"):
            raise ValueError(f"profile must be 'cycloidal' or 'constant', got {self.profile!r}")
        n = np.asarray(self.normal, float)
        if n.shape != (3,) or not np.all(np.isfinite(n)) or np.linalg.norm(n) < 1e-12:
            raise ValueError(f"normal must be a non-zero vector of 3 finite numbers, got "
                             f"{n.tolist()}")
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"radius must be > 0 m, got {self.radius}")
        if not (np.isfinite(self.period) and self.period > 0):
            raise ValueError(f"period must be > 0 s, got {self.period}")
        self._n = n / np.linalg.norm(n)
        u = np.cross(self._n, [1.0, 0.0, 0.0]) if self.start_direction is None else \
            np.asarray(self.start_direction, float)
        if np.linalg.norm(u) < 1e-6:
            u = np.cross(self._n, [0.0, 1.0, 0.0])
        u = u - (u @ self._n) * self._n
        self._u = u / np.linalg.norm(u)
        self._w = np.cross(self._n, self._u)

    @classmethod
    def starting_at(cls, point, radius: float, normal, period: float, rotation,
                    start_direction=None, profile: str = "cycloidal") -> CircleTrajectory:
        """The circle that starts at ``point`` (its centre is radius · u behind it)."""
        circle = cls(np.zeros(3), radius, normal, period, rotation, start_direction, profile)
        circle.center = np.asarray(point, dtype=float) - radius * circle._u
        return circle

    def __call__(self, t: float) -> TaskReference:
        if self.profile == "constant":
            th, dth, ddth = 2 * np.pi * t / self.period, 2 * np.pi / self.period, 0.0
        else:
            s, ds, dds = cycloidal(t, self.period)
            th, dth, ddth = 2 * np.pi * s, 2 * np.pi * ds, 2 * np.pi * dds
        c, s = np.cos(th), np.sin(th)
        r = self.radius
        radial = c * self._u + s * self._w
        tangent = -s * self._u + c * self._w
        return TaskReference(
            position=self.center + r * radial, rotation=self.rotation,
            linear_velocity=r * dth * tangent,
            linear_acceleration=r * ddth * tangent - r * dth**2 * radial)
