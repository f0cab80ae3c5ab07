"""External joint torques and wrenches without a sensor: De Luca's generalised-momentum observer.

With p = M(q) v the generalised momentum, the equations of motion M qdd + C v + g = tau + tau_ext
give (M_dot = C + C^T)

    p_dot = tau + tau_ext + C^T v - g                                         (1)

and the residual

    r(t) = K_O (p(t) - p(0) - ∫_0^t (tau + C^T v - g + r) ds)                 (2)

obeys r_dot = K_O (tau_ext - r): a first-order filter of the external torque, time constant
1/K_O per joint, with no acceleration and no inverse of M. ``tau`` is every joint's known force:
the measured efforts on the active joints, plus the passive-force model T_p(q, v)
(``passive_forces.py``) on every joint (on the passive joints it is their only force; on the
active ones it is their URDF damping/friction, which acts besides the motor).

The three model terms, each O(N) on one all-active hybrid workspace of the package:

* p = M v: one pass of (5.4) with qdd = v, zero velocity and no gravity;
* g: one pass with qdd = 0, zero velocity, gravity;
* C^T v = ∂T/∂q (T = ½ vᵀ M v, with the Christoffel C: M_dot v - C v = ∂T/∂q): from the body
  velocities V(k) of (3.1) and h(k) = M(k) V(k), tip to base in body axes,

      ∂T/∂q_k = -H*(k)ᵀ (V(k) ×* Σ_{j ⪰ k} φ(k, j) h(j))                      (3)

  (in root axes, moving q_k turns every outboard body j about the joint's screw H*(k):
  ∂V(j)/∂q_k = H*(k) × (V(j) - V(k)) and ∂M_j/∂q_k = H*(k) ×* M_j - M_j H*(k) ×; the terms in
  V(j) cancel), kernel ``kinetic_gradient`` below.

Discretised (stable for any K_O dt): the state's terms b = T_p + C^T v - g by the trapezoidal
rule, the efforts as held over the step (what a digital controller applies), r implicitly:
I_k = I_{k-1} + dt (b_k + b_{k-1}) / 2 + dt (tau_{k-1,k} + r_{k-1}),  P_k = p_k - p_0 - I_k,
r_k = K_O / (1 + K_O dt) P_k. The wrench at a frame is the damped least-squares solution of
r = Jᵀ w over the joints one trusts (doc/payloads_and_wrenches.md).

``CollisionDetector``: a per-joint threshold on r (as franka's collision reflex thresholds
each joint's estimated external torque), latched until cleared; the reaction is the caller's
(the controller node: stop or comply).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from .dynamics import HybridDynamics, Workspace
from .jacobians import JacobianWorkspace
from .model import FLOATING, RobotModel
from .passive_forces import PassiveForceModel
from .spatial import FAST, cross_force, mat_vec, xform_force_transpose

__all__ = ["Collision", "CollisionDetector", "MomentumObserver", "coriolis_transpose_product",
           "kinetic_gradient"]


@njit(cache=True, error_model="numpy", fastmath=FAST)
def kinetic_gradient(parent, v_start, S, inertia, E_up, r_up, vel, H, h, out):
    """(3): out[k] = ∂T/∂q_k = (C^T v)_k for 1-DOF joints. ``vel``: V(k) of (3.1) (body axes);
    ``H``: (nb, 6) scratch (subtree momenta); ``h``: (6,) scratch."""
    nb = parent.shape[0]
    for i in range(nb):
        mat_vec(inertia[i], vel[i], H[i])  # h(i) = M(i) V(i)
    for i in range(nb - 1, -1, -1):  # tip to base: children are summed in before their parent
        cross_force(vel[i], H[i], h)  # V(k) ×* Σ φ h
        s = 0.0
        for a in range(6):
            s -= S[i, a, 0] * h[a]
        out[v_start[i]] = s
        p = parent[i]
        if p >= 0:
            xform_force_transpose(E_up[i], r_up[i], H[i], H[p])


def _check_fixed_base(model: RobotModel) -> None:
    if (model.hinge_type == FLOATING).any():
        raise ValueError("the momentum observer needs a fixed-base model (C^T v = dT/dq holds "
                         f"for 1-DOF joints): '{model.name}' has a floating joint")


def _all_active(model: RobotModel) -> HybridDynamics:
    _check_fixed_base(model)
    return HybridDynamics(model, np.zeros(model.nb, bool))


def coriolis_transpose_product(model: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """C(q, v)^T v = ∂T/∂q (Christoffel C) of a fixed-base model, fresh array (for tests and
    analysis; the observer keeps its own workspace)."""
    ws = _all_active(model)
    ws.set_configuration(q)
    ws.set_velocity(v)
    nb = model.nb
    out = np.zeros(model.nv)
    kinetic_gradient(model.parent, model.v_start, model.motion_subspace, model.inertia, ws.E_up,
                     ws.r_up, ws.vel, np.zeros((nb, 6)), np.zeros(6), out)
    return out


class MomentumObserver:
    """De Luca's residual (2) on the package's model, one ``update`` per control cycle.

    ``gain``: K_O [1/s], one value or one per DOF (the estimate's bandwidth; within 5 % of a
    step after 3/K_O). ``passive_force``: the passive-force model of every joint (default the
    URDF damping and friction, ``PassiveForceModel(model)``). ``frame`` (optional): the frame
    whose wrench ``wrench()`` returns; ``trusted_joints``: the joints whose residual enters that
    least-squares fit (default all); ``damping``: its Tikhonov damping λ [N or N·m per N·m].
    ``shared``: the model's ``dynamics.Workspace`` to build on (e.g. a control law's): the
    observer's all-active ``HybridDynamics`` is its ``hybrid("active")`` — with no passive
    joint the law's own, whose transforms and (4.6) at the cycle's q are then computed once —
    and ``jacobians`` (a ``JacobianWorkspace`` on ``shared``) gives the frame Jacobian of
    ``wrench``. Whoever shares them must be done with their buffers when ``update`` runs.
    Not thread-safe; arrays returned are the observer's own (copy what you keep).
    """

    def __init__(self, model: RobotModel, gain: float | Sequence[float] = 100.0,
                 passive_force: PassiveForceModel | None = None, frame: str | None = None,
                 trusted_joints: Sequence[str] | None = None, damping: float = 1e-6,
                 shared: Workspace | None = None,
                 jacobians: JacobianWorkspace | None = None) -> None:
        self.model = model
        if shared is None:
            self._dyn = _all_active(model)
        else:
            if shared.model is not model:
                raise ValueError("shared workspace was built for another model")
            _check_fixed_base(model)
            self._dyn = shared.hybrid("active")
        if jacobians is not None and jacobians.shared is not shared:
            raise ValueError("jacobians must be built on the shared workspace")
        nb, nv = model.nb, model.nv
        gain = np.broadcast_to(np.asarray(gain, float), (nv,)) if np.ndim(gain) == 0 \
            else np.asarray(gain, float)
        if gain.shape != (nv,) or not np.isfinite(gain).all() or (gain <= 0).any():
            raise ValueError(f"gain must be > 0, one value or one per DOF ({nv}), got {gain}")
        if not (np.isfinite(damping) and damping >= 0.0):
            raise ValueError(f"damping must be finite and >= 0, got {damping}")
        self.gain = gain.copy()
        self.passive_force = (PassiveForceModel(model) if passive_force is None
                              else passive_force.with_model(model))
        if frame is not None:
            model.frame(frame)  # ValueError naming an unknown frame
        self.frame = frame
        names = model.joint_names if trusted_joints is None else list(trusted_joints)
        self.trusted = np.array(sorted({int(model.joint_dofs(n)[0]) for n in names}), int)
        self.damping = float(damping)
        self._jac = JacobianWorkspace(model.with_passive(())) if jacobians is None \
            else jacobians
        self.residual = np.zeros(nv)  # r: the external joint torques' estimate
        self.momentum = np.zeros(nv)
        self.coriolis_t = np.zeros(nv)  # C^T v
        self.gravity = np.zeros(nv)
        self._known = np.zeros(nv)  # b = tau + C^T v - g
        self._known_prev = np.zeros(nv)
        self._p0 = np.zeros(nv)
        self._integral = np.zeros(nv)
        self._zero = np.zeros(nv)
        self._H, self._h = np.zeros((nb, 6)), np.zeros(6)
        self._wrench = np.zeros(6)
        self.started = False

    def reset(self) -> None:
        """Start again at the next ``update`` (p(0) := that state's momentum, r := 0)."""
        self.started = False
        self.residual[:] = 0.0
        self._integral[:] = 0.0

    def model_terms(self, q: np.ndarray, v: np.ndarray) -> None:
        """The model's terms of (1) at (q, v) into ``momentum`` (p = M v), ``gravity`` (g) and
        ``coriolis_t`` (C^T v = ∂T/∂q, (3))."""
        m, dyn = self.model, self._dyn
        dyn.set_configuration(q)
        dyn.set_velocity(None)
        self.momentum[:] = dyn.solve(v, dyn._empty, gravity=False).tau  # p = M v
        self.gravity[:] = dyn.solve(self._zero, dyn._empty, gravity=True).tau  # g
        dyn.set_velocity(v)
        kinetic_gradient(m.parent, m.v_start, m.motion_subspace, m.inertia, dyn.E_up, dyn.r_up,
                         dyn.vel, self._H, self._h, self.coriolis_t)

    def update(self, q: np.ndarray, v: np.ndarray, tau_measured: np.ndarray, dt: float
               ) -> np.ndarray:
        """One cycle: (q, v) measured, ``tau_measured`` the active joints' efforts (model's
        active-DOF order) that acted over the last ``dt`` seconds (since the previous update;
        ignored at the first). Returns r (all DOF)."""
        m = self.model
        q = self._dyn.as_vector(q, m.nq, "q")
        v = self._dyn.as_vector(v, m.nv, "v")
        ta = self._dyn.as_vector(tau_measured, m.n_active, "tau_measured")
        if not (np.isfinite(ta).all() and np.isfinite(dt) and dt >= 0.0):
            raise ValueError(f"tau_measured must be finite and dt >= 0, got {ta}, dt {dt}")
        self.model_terms(q, v)
        # b = T_p(q, v) + C^T v - g: a function of the state (trapezoid); the efforts are the
        # ones that acted over the step (held: exact as a rectangle)
        self._known[:] = self.passive_force.all_joints(q, v)
        self._known += self.coriolis_t
        self._known -= self.gravity
        if not self.started:
            self._p0[:] = self.momentum
            self._integral[:] = 0.0
            self.residual[:] = 0.0
            self.started = True
        else:
            # I_k = I_{k-1} + dt (b_k + b_{k-1}) / 2 + dt (tau + r_{k-1});  r_k = K/(1+K dt) P_k
            self._integral += 0.5 * dt * (self._known + self._known_prev)
            self._integral[m.active_dofs] += dt * ta
            self._integral += dt * self.residual
            np.subtract(self.momentum, self._p0, out=self.residual)
            self.residual -= self._integral
            self.residual *= self.gain / (1.0 + self.gain * dt)
        self._known_prev[:] = self._known
        return self.residual

    @property
    def external_torque(self) -> np.ndarray:
        """The estimate of the external joint torques (= r), all DOF."""
        return self.residual

    def wrench(self, q: np.ndarray | None = None, frame: str | None = None,
               axes: str = "root") -> np.ndarray:
        """The external wrench [force; torque about the frame's origin] that explains r through
        the frame Jacobian: argmin |J_Tᵀ w - r_T|² + λ²|w|² over the trusted joints T; in
        root axes (``axes="root"``) or the frame's own (``"frame"``). ``q``: the configuration
        (default the last update's)."""
        frame = self.frame if frame is None else frame
        if frame is None:
            raise ValueError("wrench needs a frame: give frame= here or to the observer")
        if axes not in ("root", "frame"):
            raise ValueError(f"axes must be 'root' or 'frame', got '{axes}'")
        jw = self._jac
        jw.set_configuration(self._dyn.q_at if q is None else q)
        A = jw.frame_jacobian(frame)[:, self.trusted].T  # (n_T, 6)
        lhs = A.T @ A
        lhs[np.diag_indices(6)] += self.damping ** 2
        self._wrench[:] = np.linalg.solve(lhs, A.T @ self.residual[self.trusted])
        if axes == "frame":
            R = jw.frame_placement(frame)[1]
            self._wrench[:3] = R.T @ self._wrench[:3]
            self._wrench[3:] = R.T @ self._wrench[3:]
        return self._wrench


@dataclass(frozen=True)
class Collision:
    """A detected collision: ``time`` [s] of the state that crossed, the ``joints`` over their
    threshold then (names; ``dofs`` their DOF indices), their estimated external ``torques``
    [N·m or N] and ``thresholds``."""

    time: float
    joints: tuple[str, ...]
    dofs: tuple[int, ...]
    torques: tuple[float, ...]
    thresholds: tuple[float, ...]

    def describe(self) -> str:
        return ", ".join(f"{n} {t:+.3g} (threshold {h:g})"
                         for n, t, h in zip(self.joints, self.torques, self.thresholds))


class CollisionDetector:
    """Collision detection on the momentum observer's external joint torques r.

    ``threshold``: |r_k| above it on joint k [N·m or N] is a contact, one value or one per
    DOF (``model.dof_names`` order); 0 leaves a joint unmonitored (all 0: off).
    ``min_duration`` [s]: a joint must stay above its threshold this long (0: the first state
    above it; r is already the observer's first-order filter of the external torque).
    A detection latches (``collision``) until ``clear()``; after a clear the detector re-arms
    once every joint is back below its threshold (hysteresis: an arm still pressed against
    what it hit, moving away, is not stopped again).
    """

    def __init__(self, model: RobotModel, threshold: float | Sequence[float],
                 min_duration: float = 0.0) -> None:
        nv = model.nv
        arr = np.atleast_1d(np.asarray(threshold, float))
        if arr.size == 1:
            arr = np.full(nv, float(arr[0]))
        if arr.shape != (nv,):
            raise ValueError(f"collision threshold must be one value or one per joint "
                             f"{list(model.dof_names)}, got {arr.size}")
        bad = [n for n, x in zip(model.dof_names, arr) if not (np.isfinite(x) and x >= 0.0)]
        if bad:
            raise ValueError(f"collision threshold must be finite and >= 0 (0: unmonitored), "
                             f"not on {bad}")
        if not (np.isfinite(min_duration) and min_duration >= 0.0):
            raise ValueError(f"min_duration must be finite and >= 0, got {min_duration}")
        self.names = tuple(model.dof_names)
        self.threshold = arr
        self.monitored = arr > 0.0
        self.min_duration = float(min_duration)
        self.collision: Collision | None = None
        self.count = 0
        self.armed = True
        self._since = np.full(nv, np.nan)  # time each joint went above its threshold

    @property
    def enabled(self) -> bool:
        return bool(self.monitored.any())

    def clear(self) -> None:
        """Forget the latched collision; re-armed once every joint is below its threshold."""
        self.collision = None
        self.armed = False
        self._since[:] = np.nan

    def update(self, r: np.ndarray, t: float) -> Collision | None:
        """One state's r (all DOF) at time ``t`` [s]; the new ``Collision`` when one is
        detected at this state, else None (also while one is latched)."""
        over = self.monitored & (np.abs(r) > self.threshold)
        if not self.armed:
            self.armed = not over.any()
            return None
        if self.collision is not None:
            return None
        self._since[~over] = np.nan
        self._since[over & np.isnan(self._since)] = t
        hit = np.flatnonzero(over & (t - self._since >= self.min_duration - 1e-12))
        if hit.size == 0:
            return None
        self.count += 1
        self.collision = Collision(float(t), tuple(self.names[k] for k in hit),
                                   tuple(int(k) for k in hit),
                                   tuple(float(r[k]) for k in hit),
                                   tuple(float(self.threshold[k]) for k in hit))
        return self.collision
