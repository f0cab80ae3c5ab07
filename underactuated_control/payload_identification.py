"""Payload identification from joint efforts: mass, centre of mass and inertia at a frame.

A payload rigidly held at a frame f enters the joint forces linearly in its inertial parameters
pi = [m, m c, I_o] (c: centre of mass, I_o: inertia about f's origin, six entries
[xx, xy, xz, yy, yz, zz]; all in f's axes; Atkeson, An & Hollerbach 1986):

    tau - tau_0(q, v, qdd) = J_f(q)ᵀ diag(R, R) Y(ω, ω_dot, a - g) pi            (1)

with tau_0 the model without the payload (inverse dynamics), J_f the frame Jacobian
([linear; angular], root axes), R the frame's rotation, and, in frame axes, ω and ω_dot the
frame's angular velocity and acceleration, a its origin's classical acceleration and g gravity:

    Y = [[a - g, ω_dot× + ω×ω×, 0                  ],
         [0,     -(a - g)×,     L(ω_dot) + ω× L(ω) ]]                             (2)

(L(w) the 3x6 matrix with I w = L(w) [xx, xy, xz, yy, yz, zz]). Holding still (ω = ω_dot = a
= 0) only m and m c enter: four columns [[-g, 0], [0, g×]]. Least squares over every sample's
rows gives pi, its covariance σ² (Aᵀ A)⁻¹ with σ² = |residual|² / (rows - parameters), and
c = (m c) / m, I_c = I_o - (|m c|² 1 - (m c)(m c)ᵀ) / m, their standard deviations by
first-order propagation.

Rows: the active joints' measured efforts (plus their passive-force model, e.g. URDF damping,
which acts besides the motor); a passive joint's force is its passive-force model T_p(q, v)
(at rest: its spring), so its rows enter with that as the "measurement" (``passive_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .dynamics import HybridDynamics
from .jacobians import JacobianWorkspace
from .model import FLOATING, RobotModel
from .passive_forces import PassiveForceModel
from .spatial import skew

__all__ = ["PayloadEstimate", "HoldingPoses", "HoldingRecorder", "identify_payload",
           "move_duration", "payload_parameters", "payload_regressor", "propose_holding_poses",
           "static_regressor"]


@dataclass(frozen=True)
class PayloadEstimate:
    """A payload's identified inertial parameters at ``frame`` (SI units, frame axes)."""

    frame: str
    mass: float  # kg
    com: np.ndarray  # (3,) m, frame axes
    inertia: np.ndarray | None  # (3, 3) kg·m² about the com, frame axes; None: not identified
    mass_std: float
    com_std: np.ndarray  # (3,)
    inertia_std: np.ndarray | None  # (3, 3)
    residual_rms: float  # N·m (or N) over the rows used
    samples: int
    condition_number: float  # of the stacked regressor (columns scaled to unit norm)


@dataclass(frozen=True)
class HoldingPoses:
    """Holding poses (``poses``: (n, nq)) and the condition number of their stacked static
    regressor (columns scaled to unit norm)."""

    poses: np.ndarray
    condition_number: float


def _inertia_columns(w: np.ndarray) -> np.ndarray:
    """L(w): I w = L(w) [xx, xy, xz, yy, yz, zz]."""
    return np.array([[w[0], w[1], w[2], 0.0, 0.0, 0.0],
                     [0.0, w[0], 0.0, w[1], w[2], 0.0],
                     [0.0, 0.0, w[0], 0.0, w[1], w[2]]])


def payload_regressor(omega: np.ndarray, omega_dot: np.ndarray, accel: np.ndarray,
                      gravity: np.ndarray) -> np.ndarray:
    """Y of (2) (6 x 10): the wrench [force; torque about the origin] the frame must apply to
    the payload, all vectors in frame axes."""
    Y = np.zeros((6, 10))
    ag = accel - gravity
    W = skew(omega)
    Y[:3, 0] = ag
    Y[:3, 1:4] = skew(omega_dot) + W @ W
    Y[3:, 1:4] = -skew(ag)
    Y[3:, 4:] = _inertia_columns(omega_dot) + W @ _inertia_columns(omega)
    return Y


class _Rows:
    """Per sample: A (rows x parameters) of (1) and the model's torques, on one workspace."""

    def __init__(self, model: RobotModel, frame: str) -> None:
        if (model.hinge_type == FLOATING).any():
            raise ValueError(f"payload identification needs a fixed-base model: '{model.name}' "
                             "has a floating joint")
        model.frame(frame)  # ValueError naming an unknown frame
        self.model, self.frame = model, frame
        active = model.with_passive(())
        self.dyn = HybridDynamics(active, np.zeros(model.nb, bool))
        self.jac = JacobianWorkspace(active)
        self.gravity = np.asarray(model.gravity, float)

    def regressor(self, q: np.ndarray, v: np.ndarray | None, qdd: np.ndarray | None
                  ) -> np.ndarray:
        """J_fᵀ diag(R, R) Y: (nv, 10)."""
        jw = self.jac
        jw.set_configuration(q)
        R = jw.frame_placement(self.frame)[1]
        J = jw.frame_jacobian(self.frame).copy()
        zero = np.zeros(3)
        if v is None:
            Y = payload_regressor(zero, zero, zero, R.T @ self.gravity)
        else:
            drift = jw.drifts(v, np.zeros(0), self.frame)[0]
            acc = J @ qdd + drift  # [classical linear; angular] acceleration, root axes
            Y = payload_regressor(R.T @ (J[3:] @ v), R.T @ acc[3:], R.T @ acc[:3],
                                  R.T @ self.gravity)
        RY = np.vstack([R @ Y[:3], R @ Y[3:]])
        return J.T @ RY

    def model_torque(self, q: np.ndarray, v: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        return self.dyn.compute(q, v, qdd, np.zeros(0)).tau.copy()


def _as_samples(x, n: int, count: int | None, name: str) -> np.ndarray:
    a = np.atleast_2d(np.asarray(x, dtype=float))
    if a.ndim != 2 or a.shape[1] != n or (count is not None and a.shape[0] != count):
        want = f"({count if count is not None else 'N'}, {n})"
        raise ValueError(f"{name} must have shape {want}, got {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has non-finite entries")
    return a


def _scaled_condition(A: np.ndarray) -> float:
    norms = np.linalg.norm(A, axis=0)
    if (norms == 0).any():
        return float("inf")
    s = np.linalg.svd(A / norms, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def identify_payload(model: RobotModel, frame: str, q: np.ndarray, tau: np.ndarray,
                     v: np.ndarray | None = None, qdd: np.ndarray | None = None, *,
                     passive_force: PassiveForceModel | None = None,
                     passive_rows: bool = True) -> PayloadEstimate:
    """Least squares on (1). ``q``: (N, nq) sample configurations; ``tau``: (N, n_active) the
    active joints' measured efforts (model's active-DOF order). Without ``v``/``qdd`` the
    samples are holding poses (at rest): mass and centre of mass; with them ((N, nv) each, an
    excitation trajectory) the inertia too. ``passive_force``: the joints' passive-force model
    (default ``PassiveForceModel(model)``: URDF damping and friction) added to the efforts;
    ``passive_rows``: use the passive joints' rows (their force: that model)."""
    rows = _Rows(model, frame)
    nv = model.nv
    Q = _as_samples(q, model.nq, None, "q")
    count = Q.shape[0]
    T = _as_samples(tau, model.n_active, count, "tau")
    dynamic = v is not None or qdd is not None
    if dynamic and (v is None or qdd is None):
        raise ValueError("give both v and qdd (an excitation trajectory) or neither (at rest)")
    V = _as_samples(v, nv, count, "v") if dynamic else np.zeros((count, nv))
    A_dd = _as_samples(qdd, nv, count, "qdd") if dynamic else np.zeros((count, nv))
    pf = PassiveForceModel(model) if passive_force is None else passive_force.with_model(model)
    use = np.arange(nv) if passive_rows else np.asarray(model.active_dofs)
    n_par = 10 if dynamic else 4
    A = np.zeros((count * len(use), n_par))
    b = np.zeros(count * len(use))
    for k in range(count):
        Yk = rows.regressor(Q[k], V[k] if dynamic else None, A_dd[k])[:, :n_par]
        joint_force = pf.all_joints(Q[k], V[k])
        joint_force[model.active_dofs] += T[k]
        delta = joint_force - rows.model_torque(Q[k], V[k], A_dd[k])
        A[k * len(use):(k + 1) * len(use)] = Yk[use]
        b[k * len(use):(k + 1) * len(use)] = delta[use]
    if A.shape[0] <= n_par:
        raise ValueError(f"{A.shape[0]} equations for {n_par} parameters: give more samples")
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = b - A @ pi
    dof = A.shape[0] - n_par
    sigma2 = float(res @ res) / dof
    cov = sigma2 * np.linalg.pinv(A.T @ A)
    return _estimate(frame, pi, cov, float(np.sqrt(np.mean(res ** 2))), count,
                     _scaled_condition(A))


def _physical(pi: np.ndarray) -> np.ndarray:
    """[m, c (3), I_c (6: xx xy xz yy yz zz)] of pi = [m, m c, I_o]."""
    m, mc = pi[0], pi[1:4]
    out = np.zeros(len(pi))
    out[0] = m
    out[1:4] = mc / m
    if len(pi) == 10:
        shift = (mc @ mc * np.eye(3) - np.outer(mc, mc)) / m
        out[4:] = pi[4:] - shift[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    return out


def _symmetric(x6: np.ndarray) -> np.ndarray:
    xx, xy, xz, yy, yz, zz = x6
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def _estimate(frame: str, pi: np.ndarray, cov: np.ndarray, rms: float, count: int,
              cond: float) -> PayloadEstimate:
    if not pi[0] > 0.0:
        raise ValueError(f"identified mass {pi[0]:.4g} kg is not positive: no payload at "
                         f"'{frame}', or the samples do not excite it")
    phys = _physical(pi)
    # first-order propagation: J = d phys / d pi by central differences (smooth, m > 0)
    n = len(pi)
    G = np.zeros((n, n))
    for j in range(n):
        h = 1e-7 * max(1.0, abs(pi[j]))
        d = np.zeros(n)
        d[j] = h
        G[:, j] = (_physical(pi + d) - _physical(pi - d)) / (2 * h)
    std = np.sqrt(np.maximum(np.diag(G @ cov @ G.T), 0.0))
    inertia = _symmetric(phys[4:]) if n == 10 else None
    inertia_std = _symmetric(std[4:]) if n == 10 else None
    return PayloadEstimate(frame=frame, mass=float(phys[0]), com=phys[1:4].copy(),
                           inertia=inertia, mass_std=float(std[0]), com_std=std[1:4].copy(),
                           inertia_std=inertia_std, residual_rms=rms, samples=count,
                           condition_number=cond)


def static_regressor(model: RobotModel, frame: str, poses: np.ndarray,
                     rows: Sequence[int] | None = None) -> np.ndarray:
    """The stacked static regressor of (1) (4 columns: m, m c) over ``poses`` ((n, nq)), the
    DOF rows ``rows`` (default the active joints)."""
    r = _Rows(model, frame)
    use = np.asarray(model.active_dofs if rows is None else rows, int)
    P = _as_samples(poses, model.nq, None, "poses")
    return np.vstack([r.regressor(p, None, None)[use, :4] for p in P])


def propose_holding_poses(model: RobotModel, frame: str, q_start: np.ndarray, count: int = 6,
                          joints: Sequence[str] | None = None, candidates: int = 300,
                          span: float = 1.5, seed: int = 0) -> HoldingPoses:
    """``count`` holding poses for identifying a payload at ``frame``: ``q_start`` with the
    ``joints`` (default: the last three active joints before the frame, which turn it so
    gravity acts along different frame axes) drawn within their limits and ±``span`` rad of
    ``q_start``, chosen greedily among ``candidates`` draws to minimise the condition number of
    the stacked static regressor (columns scaled to unit norm); the first pose is ``q_start``.
    Deterministic for a ``seed``."""
    if count < 2:
        raise ValueError(f"count must be >= 2 (one pose does not separate mass and com), "
                         f"got {count}")
    q0 = _as_samples(q_start, model.nq, 1, "q_start")[0]
    body = model.frame(frame).body
    if joints is None:
        chain = []
        while body >= 0:
            if not model.passive_joint_mask[body]:
                chain.append(model.joint_names[body])
            body = model.parent[body]
        joints = chain[:3]
    idx = [int(model.joint_dofs(n)[0]) for n in joints]
    if not idx:
        raise ValueError(f"no joint moves frame '{frame}'")
    rng = np.random.default_rng(seed)
    lo = np.maximum(model.position_lower[idx], q0[idx] - span)
    hi = np.minimum(model.position_upper[idx], q0[idx] + span)
    pool = np.repeat(q0[None], candidates, axis=0)
    pool[:, idx] = rng.uniform(lo, hi, (candidates, len(idx)))
    r = _Rows(model, frame)
    use = model.active_dofs
    blocks = [r.regressor(p, None, None)[use, :4] for p in pool]
    chosen = [q0]
    A = r.regressor(q0, None, None)[use, :4]
    for _ in range(count - 1):
        scores = [_scaled_condition(np.vstack([A, B])) for B in blocks]
        best = int(np.argmin(scores))
        chosen.append(pool[best])
        A = np.vstack([A, blocks[best]])
    return HoldingPoses(poses=np.array(chosen), condition_number=_scaled_condition(A))


def move_duration(q_from: np.ndarray, q_to: np.ndarray, speed: float = 0.3,
                  minimum: float = 2.0) -> float:
    """Duration (s) of a rest-to-rest move between two holding poses: the largest joint
    distance at ``speed`` (rad/s or m/s, the quintic's mean speed), at least ``minimum``."""
    return max(minimum, float(np.abs(np.asarray(q_to) - np.asarray(q_from)).max()) / speed)


class HoldingRecorder:
    """Holding still in one pose, from a stream of states: settled once every joint speed has
    stayed below ``settle_velocity`` for ``settle_time``, then the configuration and the efforts
    averaged over the next ``record_time`` (restarted if the arm moves again). Times in s of
    the states' clock (the simulator's under ``use_sim_time``)."""

    def __init__(self, settle_velocity: float = 0.005, settle_time: float = 0.5,
                 record_time: float = 0.5) -> None:
        if not (settle_velocity > 0 and settle_time >= 0 and record_time > 0):
            raise ValueError("settle_velocity and record_time must be > 0, settle_time >= 0")
        self.settle_velocity, self.settle_time = settle_velocity, settle_time
        self.record_time = record_time
        self._still_since: float | None = None
        self._q: list[np.ndarray] = []
        self._effort: list[np.ndarray] = []
        self._record_start = 0.0
        self.max_speed = np.inf  # of the last state

    @property
    def phase(self) -> str:
        """'settling' or 'recording'."""
        return "recording" if self._q else "settling"

    def feed(self, t: float, q: np.ndarray, v: np.ndarray, effort: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
        """One state; (mean q, mean effort) once recorded, else None."""
        self.max_speed = float(np.abs(v).max()) if len(v) else 0.0
        if self.max_speed > self.settle_velocity or not np.isfinite(effort).all():
            self._still_since = None
            self._q, self._effort = [], []
            return None
        if self._still_since is None:
            self._still_since = t
        if t - self._still_since < self.settle_time:
            return None
        if not self._q:
            self._record_start = t
        self._q.append(np.array(q, dtype=float))
        self._effort.append(np.array(effort, dtype=float))
        if t - self._record_start < self.record_time:
            return None
        return np.mean(self._q, axis=0), np.mean(self._effort, axis=0)


def payload_parameters(estimate: PayloadEstimate) -> dict[str, object]:
    """The controller's ``payload_*`` parameters of an estimate (inertia: zero when not
    identified, a point mass at the centre of mass)."""
    inertia = np.zeros((3, 3)) if estimate.inertia is None else estimate.inertia
    return {"payload_frame": estimate.frame, "payload_mass": float(estimate.mass),
            "payload_com": [float(x) for x in estimate.com],
            "payload_inertia": [float(inertia[i, j]) for i, j in
                                ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]}
