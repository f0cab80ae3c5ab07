"""Kinematic functions φ(θ) for configuration control (Seraji §3.1-3.4; doc/architecture.md §5).

Each function returns, for the current configuration, its rows of the augmented Jacobian
J_c (r × nv), the desired change dX_c for the next sample and the task weights W_c. The
configuration-control step stacks them under the hand rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..dynamics import inverse_dynamics
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from .arm_angle import ArmAngle

__all__ = ["Rows", "Context", "ArmAngleFunction", "ElbowCoordinate", "CollisionAvoidance",
           "Sphere", "JointLimitAvoidance", "JointLocking", "OptimalJointMovement",
           "Manipulability", "GravityTorqueMinimization", "LinkOrientation", "Tracked"]

WEIGHT_CAP = 1e8  # a weight that has gone "to infinity" (inside an inner sphere)
_stamps = itertools.count(1)
STAMP = [0]  # the latest stamp of any Tracked object: one compare when nothing changed


class Tracked:
    """Assigning an attribute (a weight, a gain, the spheres…) stamps the object, so that the
    compiled step (``configuration_control``) repacks its parameters before the next step.
    Change parameters by assignment (``f.spheres = [...]``), not by mutating in place.
    Attributes named ``last_*`` are reports and do not stamp."""

    _stamp = 0

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if not name.startswith("last_"):
            STAMP[0] = next(_stamps)
            object.__setattr__(self, "_stamp", STAMP[0])


@dataclass
class Rows:
    """What a kinematic function adds to the augmented system."""

    jacobian: np.ndarray  # (r, nv)
    delta: np.ndarray  # (r,) desired change of φ over the next sample
    weight: np.ndarray  # (r,)
    value: np.ndarray  # (r,) current φ
    note: str = ""


@dataclass
class Context:
    """The state of one configuration-control step (workspace configured at q)."""

    q: np.ndarray
    workspace: JacobianWorkspace
    hand_jacobian: np.ndarray  # (6, nv) [linear; angular]
    targets: dict
    elbow_fade: float = 1.0  # 1 far from obstacles -> 0 at an inner sphere

    def hand_null_space(self, columns: np.ndarray) -> np.ndarray:
        """Basis (nv, k) of the null space of J_e restricted to ``columns`` (others zero)."""
        J = self.hand_jacobian[:, columns]
        _, s, Vt = np.linalg.svd(J)
        rank = int(np.sum(s > 1e-9 * max(1.0, s.max(initial=0.0))))
        N = np.zeros((self.q.size, J.shape[1] - rank))
        N[columns] = Vt[rank:].T
        return N


def _empty(nv: int) -> Rows:
    return Rows(np.zeros((0, nv)), np.zeros(0), np.zeros(0), np.zeros(0))


class ArmAngleFunction(Tracked):
    """φ = ψ, the arm angle; target key ``"arm_angle"`` (rad, desired at the next sample).
    Its weight fades out near obstacles (hand-over to collision avoidance) and drops to zero,
    with a note, at an arm-angle singularity."""

    name = "arm_angle"

    def __init__(self, arm_angle: ArmAngle, weight: float = 1.0) -> None:
        self.arm_angle = arm_angle
        self.weight = weight

    def rows(self, ctx: Context) -> Rows:
        val = self.arm_angle.evaluate(ctx.q, configured=True, workspace=ctx.workspace)
        target = ctx.targets.get(self.name, val.psi)
        delta = (target - val.psi + np.pi) % (2 * np.pi) - np.pi
        w = 0.0 if val.singular else self.weight * ctx.elbow_fade
        return Rows(val.jacobian[None, :], np.array([delta]), np.array([w]),
                    np.array([val.psi]), val.reason)


class ElbowCoordinate(Tracked):
    """φ = E_x, E_y or E_z of the elbow in root coordinates; target key ``"elbow_x"``…"""

    def __init__(self, model: RobotModel, elbow: str, axis: str = "z", weight: float = 1.0
                 ) -> None:
        model.frame(elbow)
        if axis not in ("x", "y", "z"):
            raise ValueError(f"axis must be 'x', 'y' or 'z', got {axis!r}")
        self.model, self.elbow, self.axis, self.weight = model, elbow, axis, weight
        self.name = f"elbow_{axis}"

    def rows(self, ctx: Context) -> Rows:
        ws = ctx.workspace
        p, _ = ws.frame_placement(self.elbow)
        k = "xyz".index(self.axis)
        J = ws.point_jacobian(self.model.frame(self.elbow).body, p)[k][None, :].copy()
        target = ctx.targets.get(self.name, p[k])
        return Rows(J, np.array([target - p[k]]), np.array([self.weight * ctx.elbow_fade]),
                    np.array([p[k]]))


@dataclass
class Sphere:
    """An obstacle inside concentric spheres of influence (m): inner touches the obstacle."""

    center: np.ndarray
    inner_radius: float
    outer_radius: float

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=float)
        if not (0 <= self.inner_radius < self.outer_radius) or self.center.shape != (3,):
            raise ValueError(f"sphere needs a 3-D centre and 0 <= inner < outer radius, got "
                             f"{self.center}, {self.inner_radius}, {self.outer_radius}")


def _closest_on_segment(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, float]:
    ab = b - a
    den = ab @ ab
    t = 0.0 if den < 1e-18 else float(np.clip((c - a) @ ab / den, 0.0, 1.0))
    return a + t * ab, t


class CollisionAvoidance(Tracked):
    """Spheres of influence (Seraji §3.2). For each sphere, the critical point X_c is the point
    of the arm (links as segments between consecutive body origins, and to the tip) closest to
    the centre, at distance d_c. Inside the outer sphere the row "move X_c away to the outer
    sphere" joins with weight w_co = 1/(d_c - r_i)² - 1/(r_o - r_i)² (0 at r_o, → ∞ at r_i),
    and the elbow task fades as (d_c - r_i)/(r_o - r_i), so no weight ever jumps.
    ``weight`` multiplies w_co (the coefficient of (18), 1 in the patent's example)."""

    name = "collision"

    def __init__(self, model: RobotModel, spheres: Sequence[Sphere], tip: str,
                 gain: float = 0.5, weight: float = 1.0) -> None:
        model.frame(tip)
        self.model, self.spheres, self.tip, self.gain = model, list(spheres), tip, gain
        self.weight = weight
        self.last_distances: list[float] = []

    def _segments(self, ws: JacobianWorkspace):
        m = self.model
        for i in range(m.nb):
            p = m.parent[i]
            start = ws.p_world[p] if p >= 0 else m.frame(m.root_link).translation
            yield i, start, ws.p_world[i]
        tip_p, _ = ws.frame_placement(self.tip)
        yield m.frame(self.tip).body, ws.p_world[m.frame(self.tip).body], tip_p

    def critical_point(self, ws: JacobianWorkspace, sphere: Sphere):
        best = (np.inf, None, None)
        for body, a, b in self._segments(ws):
            x, _ = _closest_on_segment(a, b, sphere.center)
            d = float(np.linalg.norm(x - sphere.center))
            if d < best[0]:
                best = (d, x, body)
        return best

    def fade(self, ws: JacobianWorkspace) -> float:
        f = 1.0
        for s in self.spheres:
            d, _, _ = self.critical_point(ws, s)
            f = min(f, float(np.clip((d - s.inner_radius) / (s.outer_radius - s.inner_radius),
                                     0.0, 1.0)))
        return f

    def rows(self, ctx: Context) -> Rows:
        ws = ctx.workspace
        nv = self.model.nv
        J, dX, W, V = [], [], [], []
        self.last_distances = []
        for s in self.spheres:
            d, x, body = self.critical_point(ws, s)
            self.last_distances.append(d)
            if d >= s.outer_radius or x is None:
                continue
            n = (x - s.center) / max(d, 1e-12)
            J.append(n @ ws.point_jacobian(body, x)[:3])
            dX.append(self.gain * (s.outer_radius - d))
            gap = d - s.inner_radius
            w = WEIGHT_CAP if gap <= 0 else min(
                WEIGHT_CAP, 1.0 / gap**2 - 1.0 / (s.outer_radius - s.inner_radius) ** 2)
            W.append(min(WEIGHT_CAP, self.weight * w))
            V.append(d)
        if not J:
            return _empty(nv)
        return Rows(np.array(J), np.array(dX), np.array(W), np.array(V))


class JointLimitAvoidance(Tracked):
    """Like the obstacles (Seraji §3.4(ii)): within ``margin`` (rad) of a limit, the row e_jᵀ
    pushes the joint back to the margin with weight 1/δ² - 1/margin² (δ: distance to limit)."""

    name = "joint_limits"

    def __init__(self, model: RobotModel, margin: float = 0.1, gain: float = 0.5) -> None:
        if margin <= 0:
            raise ValueError(f"margin must be > 0 rad, got {margin}")
        self.model, self.margin, self.gain = model, margin, gain

    def rows(self, ctx: Context) -> Rows:
        m, nv = self.model, self.model.nv
        J, dX, W, V = [], [], [], []
        for j in range(nv):
            lo, hi = m.position_lower[j], m.position_upper[j]
            if not (np.isfinite(lo) and np.isfinite(hi)):
                continue
            qj = ctx.q[m.q_start[np.searchsorted(m.v_start, j, side="right") - 1]]
            for limit, direction in ((lo, 1.0), (hi, -1.0)):
                delta = direction * (qj - limit)  # distance inside the range
                if delta < self.margin:
                    row = np.zeros(nv)
                    row[j] = 1.0
                    J.append(row)
                    dX.append(direction * self.gain * (self.margin - delta))
                    W.append(WEIGHT_CAP if delta <= 0 else
                             min(WEIGHT_CAP, 1.0 / delta**2 - 1.0 / self.margin**2))
                    V.append(qj)
        if not J:
            return _empty(nv)
        return Rows(np.array(J), np.array(dX), np.array(W), np.array(V))


class JointLocking(Tracked):
    """Seraji §3.4(i): θ_j(t) = θ_j(0) for the chosen joints (rows e_jᵀ)."""

    name = "joint_locking"

    def __init__(self, model: RobotModel, joints: Sequence[str], weight: float = 1e4) -> None:
        self.model = model
        self.dofs = [int(model.joint_dofs(n)[0]) for n in joints]
        self.q_index = [int(model.q_start[model.joint_index(n)]) for n in joints]
        self.weight = weight
        self.locked: np.ndarray | None = None

    def rows(self, ctx: Context) -> Rows:
        if self.locked is None:
            self.locked = ctx.q[self.q_index].copy()
        nv = self.model.nv
        J = np.zeros((len(self.dofs), nv))
        J[np.arange(len(self.dofs)), self.dofs] = 1.0
        value = ctx.q[self.q_index]
        return Rows(J, self.locked - value, np.full(len(self.dofs), self.weight), value)


class _NullSpaceGradient(Tracked):
    """Rows N_eᵀ with a desired step along a gradient projected on the hand's null space."""

    columns: np.ndarray

    def _rows(self, ctx: Context, step: np.ndarray, weight: float) -> Rows:
        N = ctx.hand_null_space(self.columns)
        if N.shape[1] == 0:
            return _empty(ctx.q.size)
        return Rows(N.T.copy(), N.T @ step, np.full(N.shape[1], weight), N.T @ step)


class OptimalJointMovement(_NullSpaceGradient):
    """Seraji §3.3: joint springs G = ½ Σ k_i (θ_i - θ_i0)², optimal when N_eᵀ ∇G = 0;
    φ = N_eᵀ K (θ - θ0) driven to zero (J_c ≈ N_eᵀ K)."""

    name = "optimal_joint_movement"

    def __init__(self, model: RobotModel, stiffness: Sequence[float],
                 rest: np.ndarray | None = None, weight: float = 1.0) -> None:
        k = np.asarray(stiffness, dtype=float)
        if k.shape != (model.nv,) or np.any(k < 0):
            raise ValueError(f"stiffness needs {model.nv} values >= 0")
        self.model, self.k, self.rest, self.weight = model, k, rest, weight
        self.columns = model.active_dofs

    def rows(self, ctx: Context) -> Rows:
        if self.rest is None:
            self.rest = ctx.q.copy()
        N = ctx.hand_null_space(self.columns)
        if N.shape[1] == 0:
            return _empty(ctx.q.size)
        grad = self.k * (ctx.q - self.rest)
        phi = N.T @ grad
        return Rows(N.T * self.k, -phi, np.full(N.shape[1], self.weight), phi)


class Manipulability(_NullSpaceGradient):
    """Increase w = sqrt(det(J_e J_eᵀ)) along the hand's null space (gradient by central
    differences of w); ``gain`` scales the step [rad per unit gradient]."""

    name = "manipulability"

    def __init__(self, model: RobotModel, tip: str, gain: float = 0.05, weight: float = 1.0
                 ) -> None:
        self.model, self.tip, self.gain, self.weight = model, tip, gain, weight
        self.columns = model.active_dofs
        self._ws = JacobianWorkspace(model)

    def value(self, q: np.ndarray) -> float:
        self._ws.set_configuration(q)
        J = self._ws.frame_jacobian(self.tip)
        return float(np.sqrt(max(np.linalg.det(J @ J.T), 0.0)))

    def rows(self, ctx: Context) -> Rows:
        h = 1e-6
        grad = np.array([(self.value(ctx.q + h * e) - self.value(ctx.q - h * e)) / (2 * h)
                         for e in np.eye(ctx.q.size)])
        return self._rows(ctx, self.gain * grad, self.weight)


class GravityTorqueMinimization(_NullSpaceGradient):
    """Decrease G = ½ |τ_g(θ)|², τ_g from this library's inverse dynamics, along the hand's
    null space (gradient by central differences)."""

    name = "gravity_torque"

    def __init__(self, model: RobotModel, gain: float = 1e-4, weight: float = 1.0) -> None:
        self.model, self.gain, self.weight = model, gain, weight
        self.columns = model.active_dofs
        self._zero = np.zeros(model.nv)

    def value(self, q: np.ndarray) -> float:
        tau = inverse_dynamics(self.model, q, self._zero, self._zero)
        return 0.5 * float(tau @ tau)

    def rows(self, ctx: Context) -> Rows:
        h = 1e-6
        grad = np.array([(self.value(ctx.q + h * e) - self.value(ctx.q - h * e)) / (2 * h)
                         for e in np.eye(ctx.q.size)])
        return self._rows(ctx, -self.gain * grad, self.weight)


class LinkOrientation(Tracked):
    """Claim 2: the orientation of a part of the arm. φ = orientation of ``link`` (3 rows: its
    angular Jacobian), driven to the target rotation matrix under the key
    ``"orientation_<link>"`` (or held where it was at the first step without one); the error
    is the rotation vector log(R_d Rᵀ), as for the hand."""

    def __init__(self, model: RobotModel, link: str, weight: float = 1.0) -> None:
        model.frame(link)
        self.model, self.link, self.weight = model, link, weight
        self.name = f"orientation_{link}"
        self.held: np.ndarray | None = None

    def rows(self, ctx: Context) -> Rows:
        from ..so3 import rotation_error

        ws = ctx.workspace
        _, R = ws.frame_placement(self.link)
        if self.held is None:
            self.held = R.copy()
        R_d = np.asarray(ctx.targets.get(self.name, self.held), dtype=float)
        J = ws.frame_jacobian(self.link)[3:].copy()
        e = rotation_error(R_d, R)
        return Rows(J, e, np.full(3, self.weight), e)
