"""Frame, generalized and disturbance Jacobians; projection operators (paper §6, patent FIG. 7-9).

* ``frame_jacobian``: J of a link frame, (6, nv), rows [linear; angular] of the frame origin in
  root axes (ARCHITECTURE.md §2; Pinocchio LOCAL_WORLD_ALIGNED).
* ``generalized_jacobian`` J_G (6, n_active) and ``disturbance_jacobian`` J_D (n_passive,
  n_active) by the procedure of §6.1: velocities, T_p and gravity set to zero, (4.6) once, then
  one pass of (5.4) per active DOF with a unit acceleration; column k of J_G is the frame's
  acceleration, column k of J_D the passive accelerations of that pass (6.13).
* Drift terms: the same recursion with qdd_a = 0 and the true velocities, gravity and T_p gives
  ``drift_G`` and ``drift_D``, so that exactly
      a_frame = J_G qdd_a + drift_G      (6.10)      qdd_p = J_D qdd_a + drift_D      (6.12)
  where a_frame = [classical linear acceleration of the frame origin; angular acceleration] in
  root axes (= d/dt of J v).
* ``projection_operators``: dense T = Omega M and T_bar = I - T (6.5-6.7), for tests and analysis;
  ``underactuated_mass_matrix``: S_aa of (4.5)/(6.8) by the recursion (columns of T_a).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .dynamics import (
    HybridDynamics,
    articulated_sweep,
    const_views,
    int_views,
    joint_transforms,
    outward_sweep,
    residual_force_sweep,
    work_views,
)
from .kinematics import body_placements, classical_acceleration, frame_jacobian_kernel
from .model import RobotModel
from .spatial import FAST, motion_transform_matrix, xform_force_transpose, xform_motion

__all__ = [
    "JacobianWorkspace",
    "ProjectionOperators",
    "frame_placement",
    "frame_jacobian",
    "frame_velocity",
    "generalized_jacobian",
    "generalized_jacobian_product",
    "disturbance_jacobian",
    "jacobian_drifts",
    "underactuated_mass_matrix",
    "projection_operators",
    "spatial_momentum",
]


@njit(cache=True, error_model="numpy", fastmath=FAST)
def generalized_jacobian_sweeps(ints, consts, work, q, configure, E_world, p_world, body,
                                offset, with_frame, J_G, J_D, column):
    """§6.1 in one compiled call. With ``configure``: transforms, (4.6) and body placements
    for q first (else they must be in the workspace). Then, with V = a = b = 0, T_p = 0 and no
    gravity, one (5.4a)/(5.4b) pass per active DOF with a unit acceleration: column k of J_D
    is qdd_p (6.13), column k of J_G the frame's acceleration (6.11).
    Returns -1, -2 (non-finite q) or the body whose D_p(k) is singular."""
    (nb, nv, na, npas, parent, hinge_type, q_start, v_start, nv_joint, passive, active_dofs,
     passive_dofs, _) = int_views(ints)
    tree_E, tree_r, axis, S, inertia, gravity_base, tol, _ = const_views(consts, nb)
    (E_up, r_up, vel, coriolis, gyro, P, U, Dinv, G, z, alpha, force, nu, qdd, tau, tau_active,
     qdd_passive, alpha_base, R, P_plus, tmp66, D, L, Li, tmp6, tmp6b, _) = work_views(
        work, nb, nv, na, npas)
    if configure:
        for i in range(q.shape[0]):
            if not np.isfinite(q[i]):
                return -2
        joint_transforms(hinge_type, axis, tree_E, tree_r, q_start, q, E_up, r_up, R)
        bad = articulated_sweep(parent, S, nv_joint, passive, inertia, E_up, r_up, tol[0], P,
                                U, Dinv, G, P_plus, tmp66, D, L, Li)
        if bad >= 0:
            return bad
        body_placements(parent, E_up, r_up, E_world, p_world)
    vel[:] = 0.0
    coriolis[:] = 0.0
    gyro[:] = 0.0
    alpha_base[:] = 0.0
    for k in range(npas):
        tau[passive_dofs[k]] = 0.0
    for k in range(na):
        qdd[active_dofs[k]] = 0.0
    for k in range(na):
        qdd[active_dofs[k]] = 1.0
        residual_force_sweep(parent, S, nv_joint, v_start, passive, E_up, r_up, P, G, Dinv,
                             coriolis, gyro, qdd, tau, z, nu, tmp6, tmp6b)
        outward_sweep(parent, S, nv_joint, v_start, passive, E_up, r_up, P, G, coriolis, z, nu,
                      alpha_base, qdd, tau, alpha, force, tmp6)
        qdd[active_dofs[k]] = 0.0
        for j in range(npas):
            J_D[j, k] = qdd[passive_dofs[j]]
        if with_frame:
            classical_acceleration(E_world[body], alpha[body], vel[body], offset, column)
            for a in range(6):
                J_G[a, k] = column[a]
    return -1


@njit(cache=True, error_model="numpy", fastmath=FAST)
def generalized_jacobian_adjoint(ints, consts, work, body, W, J_G, seed, z_bar, alpha_bar, x_bar,
                                 nu_bar, tmp, tmp_b):
    """J_G by rows in O(6 N): the adjoint (reverse mode) of the two (5.4) sweeps that the §6.1
    procedure runs once per column. With V = a = b = 0, T_p = 0 and no gravity the map
    qdd_a -> alpha_b is linear, J_G = W L; row j of J_G is Lᵀ (Wᵀ e_j):

      reverse (5.4b), tip to base:  ᾱ⁺(k) = ᾱ(k) - [passive] G ȳ(k),  ȳ(k) = Hᵀ ᾱ(k),
                                    x̄(k) += [active] Hᵀ ᾱ(k),  ᾱ(parent) += φ ᾱ⁺(k)
      reverse (5.4a), base to tip:  z̄⁺(k) = φ* z̄(parent),  ε̄ = Gᵀ z̄⁺ + D⁻¹ ν̄,
                                    z̄(k) = z̄⁺ - [passive] H ε̄,  x̄(k) += [active] Hᵀ P z̄(k)

    The (4.6) quantities must be in the workspace (``configure`` of the forward kernel)."""
    (nb, nv, na, npas, parent, hinge_type, q_start, v_start, nv_joint, passive, active_dofs,
     passive_dofs, _) = int_views(ints)
    tree_E, tree_r, axis, S, inertia, gravity_base, tol, _ = const_views(consts, nb)
    (E_up, r_up, vel, coriolis, gyro, P, U, Dinv, G, z, alpha, force, nu, qdd, tau, tau_active,
     qdd_passive, alpha_base, R, P_plus, tmp66, D, L, Li, tmp6, tmp6b, _) = work_views(
        work, nb, nv, na, npas)
    for j in range(6):
        alpha_bar[:] = 0.0
        x_bar[:] = 0.0
        for a in range(6):
            alpha_bar[body, a] = W[j, a]
        # reverse of (5.4b): tip to base
        for i in range(nb - 1, -1, -1):
            r = nv_joint[i]
            j0 = v_start[i]
            for a in range(6):
                tmp[a] = alpha_bar[i, a]  # ᾱ⁺(i)
            for c in range(r):
                s = 0.0
                for a in range(6):
                    s += S[i, a, c] * alpha_bar[i, a]
                if passive[i]:
                    nu_bar[j0 + c] = s
                    for a in range(6):
                        tmp[a] -= G[i, a, c] * s
                else:
                    x_bar[j0 + c] += s
            p = parent[i]
            if p >= 0:
                xform_force_transpose(E_up[i], r_up[i], tmp, alpha_bar[p])
        # reverse of (5.4a): base to tip
        for i in range(nb):
            r = nv_joint[i]
            j0 = v_start[i]
            p = parent[i]
            if p >= 0:
                xform_motion(E_up[i], r_up[i], z_bar[p], tmp)
            else:
                for a in range(6):
                    tmp[a] = 0.0
            if passive[i]:
                for c in range(r):
                    e = 0.0
                    for a in range(6):
                        e += G[i, a, c] * tmp[a]
                    for d in range(r):
                        e += Dinv[i, c, d] * nu_bar[j0 + d]
                    tmp_b[c] = e
                for c in range(r):
                    for a in range(6):
                        tmp[a] -= S[i, a, c] * tmp_b[c]
            for a in range(6):
                z_bar[i, a] = tmp[a]
            if not passive[i]:
                for c in range(r):
                    s = 0.0
                    for a in range(6):
                        h = 0.0
                        for b in range(6):
                            h += P[i, a, b] * S[i, b, c]
                        s += h * tmp[a]
                    x_bar[j0 + c] += s
        for k in range(na):
            J_G[j, k] = x_bar[active_dofs[k]]


class JacobianWorkspace:
    """Preallocated J, J_G, J_D and drifts for one model (and its passive set).

    Call order per control cycle: ``set_configuration(q)``, then any of ``frame_jacobian``,
    ``generalized`` (J_G, J_D), then ``drifts(v, tau_passive)``; ``dynamics`` is the hybrid
    workspace they share (its (4.6) quantities are computed once per configuration).
    """

    def __init__(self, model: RobotModel) -> None:
        self.model = model
        self.dynamics = HybridDynamics(model)
        nb, nv = model.nb, model.nv
        na, npas = model.n_active, model.n_passive
        self.E_world = np.zeros((nb, 3, 3))
        self.p_world = np.zeros((nb, 3))
        self.J = np.zeros((6, nv))
        self.J_G = np.zeros((6, na))
        self.J_D = np.zeros((npas, na))
        self.drift_G = np.zeros(6)
        self.drift_D = np.zeros(npas)
        self._unit = np.zeros(na)
        self._zero_tau_p = np.zeros(npas)
        self._zero_vel = np.zeros(6)
        self._alpha = np.zeros(6)
        self._point = np.zeros(3)
        self._W = np.zeros((6, 6))
        self._z_bar = np.zeros((nb, 6))
        self._alpha_bar = np.zeros((nb, 6))
        self._x_bar = np.zeros(nv)
        self._nu_bar = np.zeros(nv)
        self._tmp6a = np.zeros(6)
        self._tmp6b = np.zeros(6)
        self._column = np.zeros(6)

    # -------------------------------------------------------------- configuration
    def set_configuration(self, q: np.ndarray) -> None:
        self.dynamics.set_configuration(q)
        body_placements(self.model.parent, self.dynamics.E_up, self.dynamics.r_up, self.E_world,
                        self.p_world)

    def frame_placement(self, frame: str) -> tuple[np.ndarray, np.ndarray]:
        """(position, rotation matrix) of a link frame in root coordinates."""
        f = self.model.frame(frame)
        if f.body < 0:
            return f.translation.copy(), f.rotation.T.copy()
        Eb = self.E_world[f.body]
        return self.p_world[f.body] + Eb.T @ f.translation, (f.rotation @ Eb).T

    def frame_jacobian(self, frame: str) -> np.ndarray:
        f = self.model.frame(frame)
        m = self.model
        if f.body < 0:
            self.J[:] = 0.0
            return self.J
        self._point[:] = self.p_world[f.body] + self.E_world[f.body].T @ f.translation
        frame_jacobian_kernel(m.parent, m.motion_subspace, m.nv_joint, m.v_start, self.E_world,
                              self.p_world, f.body, self._point, self.J)
        return self.J

    def point_jacobian(self, body: int, point: np.ndarray, out: np.ndarray | None = None
                       ) -> np.ndarray:
        """(6, nv) Jacobian of a material point of ``body`` given in root coordinates."""
        m = self.model
        J = np.zeros((6, m.nv)) if out is None else out
        if body < 0:
            J[:] = 0.0
            return J
        frame_jacobian_kernel(m.parent, m.motion_subspace, m.nv_joint, m.v_start, self.E_world,
                              self.p_world, body, np.ascontiguousarray(point, dtype=float), J)
        return J

    # -------------------------------------------------------------- section 6.1 / 6.3
    def _frame_acceleration(self, frame, vel_body: np.ndarray, out: np.ndarray) -> None:
        """Classical acceleration of a frame from the workspace's body accelerations."""
        f = self.model.frame(frame)
        if f.body < 0:
            out[:] = 0.0
            return
        b = f.body
        self._alpha[:] = self.dynamics.alpha[b]
        if self.dynamics.alpha_base[3:].any():
            # remove the fictitious base acceleration [0; -g] that carried gravity
            self._alpha[3:] -= self.E_world[b] @ self.dynamics.alpha_base[3:]
        classical_acceleration(self.E_world[b], self._alpha, vel_body, f.translation, out)

    def generalized(self, frame: str | None, q: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """J_G of ``frame`` (zeros if None or on the fixed root) and J_D (§6.1, 6.13).

        With ``q``, the configuration is set in the same compiled call (the fast path: one
        call for transforms, (4.6), placements and all columns); without it, the workspace's
        current configuration is used.
        """
        dyn = self.dynamics
        f = None if frame is None else self.model.frame(frame)
        body = -1 if f is None else f.body
        if body < 0:
            self.J_G[:] = 0.0
        configure = q is not None
        if configure and (q.__class__ is not np.ndarray or q.dtype != np.float64
                          or q.shape != (self.model.nq,)):
            q = dyn._vector(q, self.model.nq, "q")
        status = generalized_jacobian_sweeps(
            dyn._ints, dyn._consts, dyn._work, q if configure else dyn._zero, configure,
            self.E_world, self.p_world, max(body, 0), self._point if body < 0 else f.translation,
            body >= 0, self.J_G, self.J_D, self._column)
        if status != -1:
            dyn._raise(status, q=q)
        return self.J_G, self.J_D

    def generalized_by_rows(self, frame: str, q: np.ndarray | None = None) -> np.ndarray:
        """J_G alone in O(6 N) by the adjoint sweeps (cheaper than columns when n_a > 6)."""
        dyn = self.dynamics
        f = self.model.frame(frame)
        if q is not None:
            self.set_configuration(q)
        if f.body < 0:
            self.J_G[:] = 0.0
            return self.J_G
        # W: body spatial acceleration [ang; lin] -> frame [linear; angular] in root axes
        Rb = self.E_world[f.body].T
        r = f.translation
        rx = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
        W = self._W
        W[:3, :3] = -Rb @ rx
        W[:3, 3:] = Rb
        W[3:, :3] = Rb
        W[3:, 3:] = 0.0
        generalized_jacobian_adjoint(dyn._ints, dyn._consts, dyn._work, f.body, W, self.J_G,
                                     self._column, self._z_bar, self._alpha_bar, self._x_bar,
                                     self._nu_bar, self._tmp6a, self._tmp6b)
        return self.J_G

    def product(self, frame: str, x: np.ndarray) -> np.ndarray:
        """J_G x in O(N) without forming J_G (one pass of (5.4) with qdd_a = x)."""
        self.dynamics.set_velocity(None)
        self.dynamics.solve(x, self._zero_tau_p, gravity=False)
        out = np.zeros(6)
        self._frame_acceleration(frame, self._zero_vel, out)
        return out

    def drifts(self, v: np.ndarray, tau_passive: np.ndarray, frame: str | None
               ) -> tuple[np.ndarray, np.ndarray]:
        """drift_G, drift_D: the frame's and passive joints' accelerations when qdd_a = 0."""
        dyn = self.dynamics
        dyn.set_velocity(v)
        res = dyn.solve(np.zeros(self.model.n_active), tau_passive, gravity=True)
        self.drift_D[:] = res.qdd_passive
        if frame is not None:
            f = self.model.frame(frame)
            vel = dyn.vel[f.body] if f.body >= 0 else self._zero_vel
            self._frame_acceleration(frame, vel, self.drift_G)
        return self.drift_G, self.drift_D

    def frame_velocity(self, frame: str, v: np.ndarray) -> np.ndarray:
        """[linear; angular] velocity of the frame origin in root axes (= J v)."""
        return self.frame_jacobian(frame) @ v


def _ws(model: RobotModel) -> JacobianWorkspace:
    cache = model._workspace_cache
    if "jacobians" not in cache:
        cache["jacobians"] = JacobianWorkspace(model)
    return cache["jacobians"]


# ------------------------------------------------------------------ public functions
def frame_placement(model: RobotModel, q: np.ndarray, frame: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3, 3)) of a link frame in root coordinates."""
    ws = _ws(model)
    ws.set_configuration(q)
    p, R = ws.frame_placement(frame)
    return p.copy(), R.copy()


def frame_jacobian(model: RobotModel, q: np.ndarray, frame: str) -> np.ndarray:
    """(6, nv) Jacobian of a link frame: [linear; angular], origin of the frame, root axes."""
    ws = _ws(model)
    ws.set_configuration(q)
    return ws.frame_jacobian(frame).copy()


def frame_velocity(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str) -> np.ndarray:
    """[linear; angular] velocity of a link frame's origin in root axes."""
    return frame_jacobian(model, q, frame) @ np.asarray(v, dtype=float)


def generalized_jacobian(model: RobotModel, q: np.ndarray, frame: str) -> np.ndarray:
    """J_G (6, n_active): a_frame = J_G qdd_active + drift (6.10, 6.11).

    Columns by §6.1 (one (5.4) pass per active DOF) for n_a <= 6, rows by the adjoint sweeps
    (six passes, O(6 N)) beyond: the same numbers, the cheaper route."""
    ws = _ws(model)
    if model.n_active > 6:
        return ws.generalized_by_rows(frame, q).copy()
    return ws.generalized(frame, q)[0].copy()


def disturbance_jacobian(model: RobotModel, q: np.ndarray) -> np.ndarray:
    """J_D (n_passive, n_active): qdd_passive = J_D qdd_active + drift (6.12, 6.13)."""
    return _ws(model).generalized(None, q)[1].copy()


def generalized_jacobian_product(model: RobotModel, q: np.ndarray, frame: str, x: np.ndarray
                                 ) -> np.ndarray:
    """J_G x in O(N) (§6.1, last paragraph)."""
    ws = _ws(model)
    ws.set_configuration(q)
    return ws.product(frame, np.asarray(x, dtype=float))


def jacobian_drifts(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str | None,
                    tau_passive: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(drift_G (6,), drift_D (n_passive,)): velocity-, gravity- and T_p-dependent terms."""
    ws = _ws(model)
    ws.set_configuration(q)
    tp = np.zeros(model.n_passive) if tau_passive is None else tau_passive
    g, d = ws.drifts(v, tp, frame)
    return g.copy(), d.copy()


def underactuated_mass_matrix(model: RobotModel, q: np.ndarray) -> np.ndarray:
    """S_aa (n_active, n_active), the mass matrix seen by the actuators (4.5, 6.8): column k is
    T_a for a unit qdd_a(k) with zero velocity, gravity and T_p."""
    dyn = _ws(model).dynamics
    dyn.set_configuration(q)
    dyn.set_velocity(None)
    na = model.n_active
    S = np.empty((na, na))
    unit = np.zeros(na)
    zero = np.zeros(model.n_passive)
    for k in range(na):
        unit[k] = 1.0
        S[:, k] = dyn.solve(unit, zero, gravity=False).tau_active
        unit[k] = 0.0
    return 0.5 * (S + S.T)


def spatial_momentum(model: RobotModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Total momentum [linear (3); angular about the root origin (3)] in root axes (§7)."""
    ws = _ws(model)
    ws.set_configuration(q)
    dyn = ws.dynamics
    dyn.set_velocity(v)
    h = np.zeros(6)
    for i in range(model.nb):
        hb = model.inertia[i] @ dyn.vel[i]  # [angular about body origin; linear], body axes
        R = ws.E_world[i].T
        lin = R @ hb[3:]
        h[:3] += lin
        h[3:] += R @ hb[:3] + np.cross(ws.p_world[i], lin)
    return h


# ------------------------------------------------------------------ dense operators
@dataclass
class ProjectionOperators:
    """Dense spatial operators of §3-6 in this library's body order (base-to-tip).

    phi, psi (6nb x 6nb): force propagation operators, phi[i, j] = X_{j->i}^T for j in the
    subtree of i (the paper's lower-triangular phi, re-indexed); H (nv x 6nb); M, P block
    diagonal; Omega = psi* H_p* D_p^-1 H_p psi (5.2); T = Omega M and T_bar = I - T (6.5).
    """

    phi: np.ndarray
    psi: np.ndarray
    H: np.ndarray
    M: np.ndarray
    P: np.ndarray
    Omega: np.ndarray
    T: np.ndarray
    T_bar: np.ndarray
    H_active: np.ndarray
    H_passive: np.ndarray

    def generalized_jacobian(self, B: np.ndarray) -> np.ndarray:
        """J_G = B* T_bar phi* H_a* (6.11) for a (6nb x 6) pick-off operator B."""
        return B.T @ self.T_bar @ self.phi.T @ self.H_active.T

    def underactuated_mass_matrix(self) -> np.ndarray:
        """S_aa = H_a phi (T_bar* M T_bar) phi* H_a* (6.8)."""
        Ha = self.H_active
        return Ha @ self.phi @ self.T_bar.T @ self.M @ self.T_bar @ self.phi.T @ Ha.T


def projection_operators(model: RobotModel, q: np.ndarray) -> ProjectionOperators:
    """Build the operators of §4-6 densely (O(N^3): for tests and analysis only)."""
    dyn = HybridDynamics(model)
    dyn.set_configuration(q)
    nb, nv = model.nb, model.nv
    n6 = 6 * nb
    E_phi = np.zeros((n6, n6))
    E_psi = np.zeros((n6, n6))
    H = np.zeros((nv, n6))
    M = np.zeros((n6, n6))
    P = np.zeros((n6, n6))
    Hp_rows = model.passive_dofs
    Dinv = np.zeros((len(Hp_rows), len(Hp_rows)))
    for i in range(nb):
        blk = slice(6 * i, 6 * i + 6)
        r = model.nv_joint[i]
        dofs = slice(model.v_start[i], model.v_start[i] + r)
        S = model.motion_subspace[i, :, :r]
        H[dofs, blk] = S.T
        M[blk, blk] = model.inertia[i]
        P[blk, blk] = dyn.P[i]
        tau_bar = np.eye(6)
        if dyn.passive[i]:
            G = dyn.G[i, :, :r]
            tau_bar = np.eye(6) - G @ S.T
            idx = np.searchsorted(Hp_rows, np.arange(model.v_start[i], model.v_start[i] + r))
            Dinv[np.ix_(idx, idx)] = dyn.Dinv[i, :r, :r]
        p = model.parent[i]
        if p >= 0:
            X = motion_transform_matrix(dyn.E_up[i], dyn.r_up[i])
            E_phi[6 * p:6 * p + 6, blk] = X.T
            E_psi[6 * p:6 * p + 6, blk] = X.T @ tau_bar
    eye = np.eye(n6)
    phi = np.linalg.inv(eye - E_phi)
    psi = np.linalg.inv(eye - E_psi)
    Hp = H[model.passive_dofs]
    Omega = psi.T @ Hp.T @ Dinv @ Hp @ psi
    T = Omega @ M
    return ProjectionOperators(phi=phi, psi=psi, H=H, M=M, P=P, Omega=Omega, T=T,
                               T_bar=eye - T, H_active=H[model.active_dofs], H_passive=Hp)
