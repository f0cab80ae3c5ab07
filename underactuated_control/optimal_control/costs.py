"""Cost terms of a trajectory optimisation: l(x, u) per knot and l_N(x) at the end.

Each term adds its value, gradient (l_x, l_u) and a positive semi-definite Hessian
approximation (l_xx, l_uu, l_ux: exact for quadratic terms, Gauss-Newton for frame terms) to a
``Derivatives`` record. Your own term: subclass ``Cost`` and implement both methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from .kernels import frame_path_kernel

__all__ = ["Derivatives", "Cost", "CostSum", "StateCost", "ControlCost", "FrameCost",
           "FramePathCost", "BoxCost"]


@dataclass
class Derivatives:
    """Accumulated derivatives of a knot's cost (zeroed by ``clear``)."""

    lx: np.ndarray
    lu: np.ndarray
    lxx: np.ndarray
    luu: np.ndarray
    lux: np.ndarray

    @classmethod
    def zeros(cls, nx: int, nu: int) -> Derivatives:
        return cls(np.zeros(nx), np.zeros(nu), np.zeros((nx, nx)), np.zeros((nu, nu)),
                   np.zeros((nu, nx)))

    def clear(self) -> None:
        for a in (self.lx, self.lu, self.lxx, self.luu, self.lux):
            a[...] = 0.0


class Cost(ABC):
    """One term; ``u`` is None at the final knot."""

    @abstractmethod
    def value(self, x: np.ndarray, u: np.ndarray | None) -> float:
        """l(x, u)."""

    @abstractmethod
    def add_derivatives(self, x: np.ndarray, u: np.ndarray | None, d: Derivatives) -> float:
        """Add this term's derivatives to ``d``; return its value."""

    def total(self, xs: np.ndarray, us: np.ndarray) -> float:
        """Σ_k l(x_k, u_k) over the knots (rows of ``xs``, ``us``); terms may vectorise."""
        return float(sum(self.value(x, u) for x, u in zip(xs, us)))

    def add_all_derivatives(self, xs: np.ndarray, us: np.ndarray, d: Derivatives) -> None:
        """Add every knot's derivatives to ``d``, whose arrays carry a leading knot axis."""
        for k in range(len(us)):
            self.add_derivatives(xs[k], us[k], Derivatives(d.lx[k], d.lu[k], d.lxx[k],
                                                           d.luu[k], d.lux[k]))


class CostSum(Cost):
    def __init__(self, terms: Sequence[Cost]) -> None:
        self.terms = list(terms)

    def value(self, x, u):
        return float(sum(t.value(x, u) for t in self.terms))

    def add_derivatives(self, x, u, d):
        return float(sum(t.add_derivatives(x, u, d) for t in self.terms))

    def total(self, xs, us):
        return float(sum(t.total(xs, us) for t in self.terms))

    def add_all_derivatives(self, xs, us, d):
        for t in self.terms:
            t.add_all_derivatives(xs, us, d)


def _vector(value, n: int, name: str) -> np.ndarray:
    a = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy() if np.ndim(value) == 0 \
        else np.asarray(value, dtype=float).copy()
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be one finite value or {n} of them")
    return a


class StateCost(Cost):
    """½ Σ w_i (x_i − x*_i)²: joint targets, velocity damping, passive-joint terms (weights
    on the passive joints' entries), in x = (q, v) order."""

    def __init__(self, target: Sequence[float], weights: float | Sequence[float]) -> None:
        self.target = np.asarray(target, dtype=float).copy()
        self.weights = _vector(weights, self.target.size, "weights")
        if np.any(self.weights < 0):
            raise ValueError("state weights must be >= 0")

    def value(self, x, u):
        e = x - self.target
        return 0.5 * float(self.weights @ (e * e))

    def add_derivatives(self, x, u, d):
        e = x - self.target
        d.lx += self.weights * e
        d.lxx[np.diag_indices_from(d.lxx)] += self.weights
        return 0.5 * float(self.weights @ (e * e))

    def total(self, xs, us):
        e = xs - self.target
        return 0.5 * float(np.sum(e * e * self.weights))

    def add_all_derivatives(self, xs, us, d):
        d.lx += self.weights * (xs - self.target)
        n = self.target.size
        d.lxx[:, np.arange(n), np.arange(n)] += self.weights


class BoxCost(Cost):
    """½ w Σ_i (max(x_i − upper_i, 0)² + max(lower_i − x_i, 0)²): a quadratic penalty outside
    a box on the state x = (q, v) (joint limits, speed limits); zero inside, so a trajectory
    that keeps within the box does not feel it. ±inf bounds leave an entry free. Hessian: w on
    the entries outside (exact)."""

    def __init__(self, lower: Sequence[float], upper: Sequence[float], weight: float) -> None:
        self.lower = np.asarray(lower, dtype=float).copy()
        self.upper = np.asarray(upper, dtype=float).copy()
        if self.lower.shape != self.upper.shape or np.any(self.lower > self.upper):
            raise ValueError("box bounds: lower and upper must have one shape, lower <= upper")
        if not (np.isfinite(weight) and weight >= 0):
            raise ValueError(f"box weight must be finite and >= 0, got {weight}")
        self.weight = float(weight)

    def _excess(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x - self.upper, 0.0) - np.maximum(self.lower - x, 0.0)

    def value(self, x, u):
        e = self._excess(x)
        return 0.5 * self.weight * float(e @ e)

    def add_derivatives(self, x, u, d):
        e = self._excess(x)
        d.lx += self.weight * e
        d.lxx[np.diag_indices_from(d.lxx)] += self.weight * (e != 0.0)
        return 0.5 * self.weight * float(e @ e)

    def total(self, xs, us):
        e = self._excess(xs)
        return 0.5 * self.weight * float(np.sum(e * e))

    def add_all_derivatives(self, xs, us, d):
        e = self._excess(xs)
        d.lx += self.weight * e
        n = self.lower.size
        d.lxx[:, np.arange(n), np.arange(n)] += self.weight * (e != 0.0)


class ControlCost(Cost):
    """½ Σ w_i (u_i − u*_i)² on the active torques (no cost at the final knot)."""

    def __init__(self, weights: float | Sequence[float], n_controls: int,
                 reference: float | Sequence[float] = 0.0) -> None:
        self.weights = _vector(weights, n_controls, "weights")
        self.reference = _vector(reference, n_controls, "reference")

    def value(self, x, u):
        if u is None:
            return 0.0
        e = u - self.reference
        return 0.5 * float(self.weights @ (e * e))

    def add_derivatives(self, x, u, d):
        if u is None:
            return 0.0
        e = u - self.reference
        d.lu += self.weights * e
        d.luu[np.diag_indices_from(d.luu)] += self.weights
        return 0.5 * float(self.weights @ (e * e))

    def total(self, xs, us):
        e = us - self.reference
        return 0.5 * float(np.sum(e * e * self.weights))

    def add_all_derivatives(self, xs, us, d):
        d.lu += self.weights * (us - self.reference)
        n = self.reference.size
        d.luu[:, np.arange(n), np.arange(n)] += self.weights


class FrameCost(Cost):
    """½ w_p |p − p*|² + ½ w_R ‖R − R*‖²_F of a frame's placement (root coordinates).

    Gradient exact: with J = [J_p; J_ω] the frame Jacobian (world axes) and M = R R*ᵀ,
    ∂/∂q = w_p J_pᵀ (p − p*) − w_R J_ωᵀ (M₂₃ − M₃₂, M₃₁ − M₁₃, M₁₂ − M₂₁); Hessian Gauss-Newton
    (w_p J_pᵀ J_p + 2 w_R J_ωᵀ J_ω, the latter exact at R = R*)."""

    def __init__(self, model: RobotModel, frame: str, position: Sequence[float] | None = None,
                 rotation: np.ndarray | None = None, position_weight: float = 1.0,
                 rotation_weight: float = 1.0, workspace: JacobianWorkspace | None = None
                 ) -> None:
        model.frame(frame)  # ValueError naming an unknown frame
        if position is None and rotation is None:
            raise ValueError("give a position, a rotation or both")
        self.model, self.frame = model, frame
        self.position = None if position is None else np.asarray(position, float).copy()
        self.rotation = None if rotation is None else np.asarray(rotation, float).copy()
        self.wp, self.wr = float(position_weight), float(rotation_weight)
        self.workspace = workspace if workspace is not None else JacobianWorkspace(model)
        self.nq = model.nq

    def _terms(self, x):
        ws = self.workspace
        ws.set_configuration(x[:self.nq])
        p, R = ws.frame_placement(self.frame)
        value = 0.0
        ep = vr = None
        if self.position is not None:
            ep = p - self.position
            value += 0.5 * self.wp * float(ep @ ep)
        if self.rotation is not None:
            M = R @ self.rotation.T
            value += self.wr * (3.0 - float(np.trace(M)))  # = ½ w ‖R − R*‖²_F
            vr = np.array([M[1, 2] - M[2, 1], M[2, 0] - M[0, 2], M[0, 1] - M[1, 0]])
        return value, ep, vr

    def value(self, x, u):
        return self._terms(x)[0]

    def add_derivatives(self, x, u, d):
        value, ep, vr = self._terms(x)
        J = self.workspace.frame_jacobian(self.frame)
        n = self.nq
        if ep is not None:
            Jp = J[:3]
            d.lx[:n] += self.wp * (Jp.T @ ep)
            d.lxx[:n, :n] += self.wp * (Jp.T @ Jp)
        if vr is not None:
            Jw = J[3:]
            d.lx[:n] -= self.wr * (Jw.T @ vr)
            d.lxx[:n, :n] += 2.0 * self.wr * (Jw.T @ Jw)
        return value


class FramePathCost(Cost):
    """Σ_k ½ w |p_k − p*_k|² + w_R (3 − tr R_k R*_kᵀ): a frame's position along a path, one
    target per knot (``targets`` (N, 3), root coordinates), and its rotation where
    ``rotations`` (N, 3, 3) are given (w_R (3 − tr) = ½ w_R ‖R − R*‖²_F, ``FrameCost``'s);
    both settable between solves, e.g. a receding horizon's. A running cost only: it has no
    meaning at one knot alone. Gradient and Hessian as ``FrameCost``'s (exact, Gauss–Newton),
    over every knot in one compiled call (``kernels.frame_path_kernel``)."""

    def __init__(self, model: RobotModel, frame: str, targets: np.ndarray, weight: float = 1.0,
                 workspace: JacobianWorkspace | None = None,
                 rotations: np.ndarray | None = None, rotation_weight: float = 1.0) -> None:
        f = model.frame(frame)  # ValueError naming an unknown frame
        if f.body < 0:
            raise ValueError(f"frame {frame!r} is fixed to the root: its path cannot be moved")
        for name, value in (("path weight", weight), ("rotation weight", rotation_weight)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        self.model, self.frame, self.weight = model, frame, float(weight)
        self.rotation_weight = float(rotation_weight)
        self.workspace = workspace if workspace is not None else JacobianWorkspace(model)
        self._body = int(f.body)
        self._offset = np.ascontiguousarray(f.translation, dtype=float)
        self._frame_rotation = np.ascontiguousarray(f.rotation, dtype=float)
        self.targets = targets
        self.rotations = rotations
        self._no_lx, self._no_lxx = np.zeros((1, 1)), np.zeros((1, 1, 1))  # value only

    @property
    def targets(self) -> np.ndarray:
        return self._targets

    @targets.setter
    def targets(self, value: np.ndarray) -> None:
        a = np.ascontiguousarray(value, dtype=float)
        if a.ndim != 2 or a.shape[1] != 3 or not np.all(np.isfinite(a)):
            raise ValueError(f"path targets: give (N, 3) finite positions [m], got shape "
                             f"{a.shape}")
        self._targets = a

    @property
    def rotations(self) -> np.ndarray | None:
        return self._rotations if len(self._rotations) else None

    @rotations.setter
    def rotations(self, value: np.ndarray | None) -> None:
        a = np.zeros((0, 3, 3)) if value is None else np.ascontiguousarray(value, dtype=float)
        if a.ndim != 3 or a.shape[1:] != (3, 3) or not np.all(np.isfinite(a)):
            raise ValueError(f"path rotations: give (N, 3, 3) finite rotation matrices, got "
                             f"shape {a.shape}")
        self._rotations = a

    def _run(self, xs: np.ndarray, d: Derivatives | None) -> float:
        ws = self.workspace
        if len(xs) != len(self._targets):
            raise ValueError(f"path cost: {len(self._targets)} targets for {len(xs)} knots")
        if len(self._rotations) and len(self._rotations) != len(xs):
            raise ValueError(f"path cost: {len(self._rotations)} rotations for {len(xs)} "
                             "knots")
        lx, lxx = (d.lx, d.lxx) if d is not None else (self._no_lx, self._no_lxx)
        return float(frame_path_kernel(*ws.dynamics.buffers, ws.E_world, ws.p_world, self._body,
                                       self._offset, np.ascontiguousarray(xs), self._targets,
                                       self.weight, self._frame_rotation, self._rotations,
                                       self.rotation_weight, d is not None, lx, lxx))

    def value(self, x, u):
        raise TypeError("FramePathCost has one target per knot: a running cost (total, "
                        "add_all_derivatives), not a knot's")

    def add_derivatives(self, x, u, d):
        raise TypeError("FramePathCost has one target per knot: a running cost (total, "
                        "add_all_derivatives), not a knot's")

    def total(self, xs, us):
        return self._run(xs, None)

    def add_all_derivatives(self, xs, us, d):
        self._run(xs, d)
