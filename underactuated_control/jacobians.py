"""Frame, generalized and disturbance Jacobians; projection operators (paper §6, patent FIG. 7-9).

* ``frame_jacobian``: J of a link frame, (6, nv), rows [linear; angular] of the frame origin in
  root axes (doc/architecture.md §2; Pinocchio LOCAL_WORLD_ALIGNED).
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from .buffers import block_view, borrow, numpy_views, take
from .dynamics import (
    GRAVITY,
    OK,
    SOLVE,
    VELOCITY,
    HybridDynamics,
    Workspace,
    const_views,
    dofs,
    int_views,
    model_workspace,
    outward_sweep,
    residual_force_sweep,
    run_steps,
    work_views,
)
from .dynamics import configure as configure_at
from .kinematics import (
    acceleration_without_gravity,
    body_placements,
    classical_acceleration,
    frame_jacobian_kernel,
    frame_point,
    frame_rotation,
)
from .model import RobotModel
from .spatial import (
    FAST,
    hinge_force,
    hinge_force_add,
    hinge_motion_sub,
    mat_vec,
    motion_transform_matrix,
    small_mat_vec,
    xform_force_transpose,
    xform_motion,
)

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


class FrameBlocks(NamedTuple):
    """A ``JacobianWorkspace``'s arrays, blocks of its one flat ``buffer`` (``frame_views``):
    the compiled cycles take the buffer, one argument instead of a dozen."""

    E_world: np.ndarray  # (nb, 3, 3) body axes' rotations, root to body
    p_world: np.ndarray  # (nb, 3) body origins in root axes
    J: np.ndarray  # (6, nv) the frame's Jacobian
    J_G: np.ndarray  # (6, na)
    J_D: np.ndarray  # (npas, na)
    drift_G: np.ndarray  # noqa: N815  (6,)
    drift_D: np.ndarray  # noqa: N815  (npas,)
    no_active: np.ndarray  # (na,) zeros: qdd_a = 0 of the drifts
    alpha: np.ndarray  # (6,) scratch: a body's acceleration
    column: np.ndarray  # (6,) scratch: a column of J_G
    position: np.ndarray  # (3,) the frame's origin in root axes
    rotation: np.ndarray  # (3, 3) the frame's axes in root axes
    empty: np.ndarray  # (0,) an absent argument


@njit(cache=True, inline="always")
def frame_views(frames, nb, nv, na, npas):
    """(FrameBlocks, end) of a ``JacobianWorkspace``'s buffer."""
    E_world, o = take(frames, 0, (nb, 3, 3))
    p_world, o = take(frames, o, (nb, 3))
    J, o = take(frames, o, (6, nv))
    J_G, o = take(frames, o, (6, na))
    J_D, o = take(frames, o, (npas, na))
    drift_G, o = take(frames, o, (6,))
    drift_D, o = take(frames, o, (npas,))
    no_active, o = take(frames, o, (na,))
    alpha, o = take(frames, o, (6,))
    column, o = take(frames, o, (6,))
    position, o = take(frames, o, (3,))
    rotation, o = take(frames, o, (3, 3))
    empty, o = take(frames, o, (0,))
    return FrameBlocks(E_world=E_world, p_world=p_world, J=J, J_G=J_G, J_D=J_D,
                       drift_G=drift_G, drift_D=drift_D, no_active=no_active, alpha=alpha,
                       column=column, position=position, rotation=rotation, empty=empty), o


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def at_rest_without_gravity(m, w):
    """The workspace's state for the unit passes of §6.1: V = a = b = 0, no gravity,
    T_p = 0, qdd_a = 0."""
    w.vel[:] = 0.0
    w.coriolis[:] = 0.0
    w.gyro[:] = 0.0
    w.alpha_base[:] = 0.0
    for k in range(m.npas):
        w.tau[m.passive_dofs[k]] = 0.0
    for k in range(m.na):
        w.qdd[m.active_dofs[k]] = 0.0


@njit(cache=True, error_model="numpy", fastmath=FAST)
def generalized_jacobian_sweeps(ints, consts, work, q, configure, E_world, p_world, body,
                                offset, with_frame, J_G, J_D, column):
    """§6.1 in one compiled call. With ``configure``: transforms, (4.6) and body placements
    for q first (else they must be in the workspace). Then, with V = a = b = 0, T_p = 0 and no
    gravity, one (5.4a)/(5.4b) pass per active DOF with a unit acceleration: column k of J_D
    is qdd_p (6.13), column k of J_G the frame's acceleration (6.11).
    Returns OK, NONFINITE_Q or the body whose D_p(k) is singular."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    E_world, p_world, J_G, J_D = borrow(E_world), borrow(p_world), borrow(J_G), borrow(J_D)
    if configure:
        status = configure_at(m, c, q, w, s)
        if status != OK:
            return status
        body_placements(m.parent, w.E_up, w.r_up, E_world, p_world)
    at_rest_without_gravity(m, w)  # V = a = b = 0, no gravity, T_p = 0, qdd_a = 0
    for k in range(m.na):
        w.qdd[m.active_dofs[k]] = 1.0  # unit acceleration of active DOF k
        residual_force_sweep(m, c, w, s, False)
        outward_sweep(m, c, w, s)
        w.qdd[m.active_dofs[k]] = 0.0
        for j in range(m.npas):
            J_D[j, k] = w.qdd[m.passive_dofs[j]]  # (6.13)
        if with_frame:
            classical_acceleration(E_world[body], w.alpha[body], w.vel[body], offset, column)
            for a in range(6):
                J_G[a, k] = column[a]  # (6.11)
    return OK


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def disturbance_rows(m, c, w, s, J_D):
    """J_D (6.13) by rows, one (5.4) pass per passive DOF: with qdd_a = 0, V = a = b = 0, no
    gravity and T_p = e_j, (5.4) solves M_pp qdd_p = e_j and gives T_a = M_ap M_pp⁻¹ e_j; as
    J_D = −M_pp⁻¹ M_pa and M is symmetric, that is −(row j of J_D)ᵀ. (4.6) must be at q."""
    at_rest_without_gravity(m, w)  # V = a = b = 0, no gravity, qdd_a = 0
    for j in range(m.npas):
        for k in range(m.npas):
            w.tau[m.passive_dofs[k]] = 1.0 if k == j else 0.0  # T_p = e_j
        residual_force_sweep(m, c, w, s, False)
        outward_sweep(m, c, w, s)
        for k in range(m.na):
            J_D[j, k] = -w.tau[m.active_dofs[k]]  # row j: −T_a


@njit(cache=True, inline="always", error_model="numpy", fastmath=FAST)
def generalized_from_rows(J, active_dofs, passive_dofs, J_D, J_G):
    """J_G = J_a + J_p J_D: the frame's a = J_a qdd_a + J_p qdd_p of (6.10) with
    qdd_p = J_D qdd_a (6.12); J the frame's Jacobian (6, nv)."""
    for a in range(6):
        for k in range(active_dofs.shape[0]):
            acc = J[a, active_dofs[k]]
            for j in range(passive_dofs.shape[0]):
                acc += J[a, passive_dofs[j]] * J_D[j, k]
            J_G[a, k] = acc


@njit(cache=True, error_model="numpy", fastmath=FAST)
def frame_task_kernel(ints, consts, work, frames, q, v, tau_passive, body, rotation, offset):
    """A task's quantities at (q, v) in one compiled call: §6.1 (J_G, J_D with transforms,
    (4.6) and placements), the frame's placement (``position``, ``rotation``: frame axes in
    root axes) and Jacobian J, then the drifts of (6.10), (6.12): the recursion with qdd_a = 0,
    the true velocities, gravity and T_p; all into the blocks of ``frames`` (a
    ``JacobianWorkspace``'s buffer, ``frame_views``). With fewer passive DOF than active ones
    J_D comes by its rows (``disturbance_rows``: one pass per passive DOF instead of one per
    active DOF) and J_G = J_a + J_p J_D, the frame's acceleration a = J_a qdd_a + J_p qdd_p
    of (6.10) with qdd_p = J_D qdd_a (6.12) (without passive joints J_G = J_a). ``body``,
    ``rotation``, ``offset``: the frame's (``frame_task_arguments``). Returns a status code
    as ``run_steps``."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    f, _ = frame_views(frames, m.nb, m.nv, m.na, m.npas)
    E_world, p_world, J_G, J_D, R = f.E_world, f.p_world, f.J_G, f.J_D, f.rotation
    by_rows = m.npas < m.na
    if by_rows:
        w, s, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
        status = configure_at(m, c, q, w, s)
        if status != OK:
            return status
        body_placements(m.parent, w.E_up, w.r_up, E_world, p_world)
        disturbance_rows(m, c, w, s, J_D)
    else:
        yes = body >= -1  # a typed bool: the version Python's calls compile
        status = generalized_jacobian_sweeps(ints, consts, work, q, yes, E_world, p_world,
                                             body, offset, yes, J_G, J_D, f.column)
        if status != OK:
            return status
    Eb = E_world[body]
    frame_point(Eb, p_world[body], offset, f.position)
    frame_rotation(Eb, rotation, R)
    frame_jacobian_kernel(m.parent, c.S, m.nv_joint, m.v_start, E_world, p_world, body,
                          f.position, f.J)
    if by_rows:
        generalized_from_rows(f.J, m.active_dofs, m.passive_dofs, J_D, J_G)
    status = run_steps(ints, consts, work, f.empty, v, f.no_active, tau_passive,
                       VELOCITY | SOLVE | GRAVITY)
    if status != OK:
        return status
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    for k in range(m.npas):
        f.drift_D[k] = w.qdd_passive[k]  # (6.12) with qdd_a = 0
    acceleration_without_gravity(Eb, w.alpha[body], w.alpha_base, f.alpha)
    classical_acceleration(Eb, f.alpha, w.vel[body], offset, f.drift_G)  # (6.10), qdd_a = 0
    return OK


@njit(cache=True, error_model="numpy", fastmath=FAST)
def generalized_jacobian_adjoint(ints, consts, work, body, W, J_G, seed, z_bar, alpha_bar, x_bar,
                                 nu_bar, tmp, tmp_b):
    """J_G by rows in O(6 N): the adjoint (reverse mode) of the two (5.4) sweeps that the §6.1
    procedure runs once per column. With V = a = b = 0, T_p = 0 and no gravity the map
    qdd_a -> alpha_b is linear, J_G = W L; row j of J_G is Lᵀ (Wᵀ e_j).
    The (4.6) quantities must be in the workspace (``configure`` of the forward kernel)."""
    m, _ = int_views(ints)
    c, _ = const_views(consts, m.nb)
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    E, r = w.E_up, w.r_up
    z_bar, alpha_bar, x_bar, nu_bar = (borrow(z_bar), borrow(alpha_bar), borrow(x_bar),
                                       borrow(nu_bar))
    tmp, tmp_b = borrow(tmp), borrow(tmp_b)
    for j in range(6):  # row j of J_G (x̄ of the active DOF: set by the first sweep)
        alpha_bar[:] = 0.0
        for a in range(6):
            alpha_bar[body, a] = W[j, a]  # ᾱ(body) = row j of W, every other ᾱ = 0
        for i in range(m.nb - 1, -1, -1):  # reverse of (5.4b), tip to base
            H, a_plus = c.S[i], alpha_bar[i]                # active: ᾱ⁺(k) = ᾱ(k)
            if m.passive[i]:
                nu = dofs(nu_bar, m, i)
                hinge_force(H, alpha_bar[i], nu)            # ν̄_p(k) = H(k) ᾱ(k)
                hinge_motion_sub(w.G[i], nu, alpha_bar[i], tmp)  # ᾱ⁺(k) = ᾱ(k) - G_p(k) ν̄_p(k)
                a_plus = tmp
            else:
                hinge_force(H, alpha_bar[i], dofs(x_bar, m, i))  # x̄_a(k) = H(k) ᾱ(k)
            if m.parent[i] >= 0:                            # ᾱ(k+1) += φ(k+1,k) ᾱ⁺(k)
                xform_force_transpose(E[i], r[i], a_plus, alpha_bar[m.parent[i]])
        for i in range(m.nb):  # reverse of (5.4a), base to tip
            p, H, z, e = m.parent[i], c.S[i], z_bar[i], block_view(tmp_b, 0, (m.nv_joint[i],))
            if p >= 0:
                xform_motion(E[i], r[i], z_bar[p], z)       # z̄⁺(k) = φ*(k+1,k) z̄(k+1)
            else:
                z[:] = 0.0
            if m.passive[i]:
                small_mat_vec(w.Dinv[i], dofs(nu_bar, m, i), e)
                hinge_force_add(e, w.G[i], z, e)            # ε̄(k) = D_p⁻¹(k) ν̄(k) + G_p*(k) z̄⁺(k)
                hinge_motion_sub(H, e, z, z)                # z̄(k) = z̄⁺(k) - H*(k) ε̄(k)
            else:
                mat_vec(w.P[i], z, tmp)
                x = dofs(x_bar, m, i)
                hinge_force_add(x, H, tmp, x)               # x̄_a(k) += H(k) P(k) z̄(k)
        for k in range(m.na):
            J_G[j, k] = x_bar[m.active_dofs[k]]


class JacobianWorkspace:
    """Preallocated J, J_G, J_D and drifts for one model (and its passive set).

    Call order per control cycle: ``set_configuration(q)``, then any of ``frame_jacobian``,
    ``generalized`` (J_G, J_D), then ``drifts(v, tau_passive)``; ``dynamics`` is the hybrid
    workspace they share (its (4.6) quantities are computed once per configuration).
    ``shared``: the model's ``dynamics.Workspace`` to build on (default: a new one), whose
    ``HybridDynamics`` of the model's passive set becomes ``dynamics``; whatever else is built
    on ``self.shared`` (an ``OperationalSpace``, the inverse dynamics of a law) reuses it.
    ``E_world``, ``p_world``, J, J_G, J_D and the drifts are blocks of one flat ``buffer``
    (``FrameBlocks``): the compiled cycles take ``kernel_buffers``, four arguments.
    """

    def __init__(self, model: RobotModel, shared: Workspace | None = None) -> None:
        self.model = model
        self.shared = Workspace(model) if shared is None else _same_robot(shared, model)
        self.dynamics = self.shared.hybrid("model")
        nb, nv = model.nb, model.nv
        na, npas = model.n_active, model.n_passive
        # E_world, p_world, J, J_G, J_D, the drifts and the task cycle's scratch: blocks of one
        # buffer (``FrameBlocks``), which the compiled cycles take as one argument
        self.buffer = np.zeros(frame_views(np.empty(0), nb, nv, na, npas)[1])  # the layout's end
        blocks = numpy_views(frame_views(self.buffer, nb, nv, na, npas)[0], self.buffer)
        self.E_world, self.p_world, self.J = blocks.E_world, blocks.p_world, blocks.J
        self.J_G, self.J_D = blocks.J_G, blocks.J_D
        self.drift_G, self.drift_D = blocks.drift_G, blocks.drift_D
        self._no_active = blocks.no_active  # qdd_a = 0 of the drifts
        self._zero_tau_p = np.zeros(npas)
        self._zero_vel = np.zeros(6)
        self._alpha = blocks.alpha
        self._point = np.zeros(3)
        self._W = np.zeros((6, 6))
        self._z_bar = np.zeros((nb, 6))
        self._alpha_bar = np.zeros((nb, 6))
        self._x_bar = np.zeros(nv)
        self._nu_bar = np.zeros(nv)
        self._tmp6a = np.zeros(6)
        self._tmp6b = np.zeros(6)
        self._column, self._empty = blocks.column, blocks.empty
        self._position, self._rotation = blocks.position, blocks.rotation
        # what the compiled task cycles take first: the hybrid workspace's buffers and this one
        self.kernel_buffers = (*self.dynamics.buffers, self.buffer)

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
            q = dyn.as_vector(q, self.model.nq, "q")
        status = generalized_jacobian_sweeps(
            *dyn.buffers, q if configure else self._empty, configure,
            self.E_world, self.p_world, max(body, 0), self._point if body < 0 else f.translation,
            body >= 0, self.J_G, self.J_D, self._column)
        if status != OK:
            dyn.raise_for_status(status, q=q)
        return self.J_G, self.J_D

    def task_quantities(self, frame: str, q: np.ndarray, v: np.ndarray,
                        tau_passive: np.ndarray) -> tuple[np.ndarray, ...]:
        """(J_G, J_D, position, R, J, drift_G, drift_D) of ``frame`` at (q, v) with the passive
        forces ``tau_passive``: ``generalized``, ``frame_placement``, ``frame_jacobian`` and
        ``drifts`` in one compiled call (a control law's cycle). The arrays are the
        workspace's own, overwritten by the next call."""
        f = self.model.frame(frame)
        if f.body < 0:
            J_G, J_D = self.generalized(frame, q)
            p, R = self.frame_placement(frame)
            drift_G, drift_D = self.drifts(v, tau_passive, frame)
            return J_G, J_D, p, R, self.frame_jacobian(frame), drift_G, drift_D
        dyn, m = self.dynamics, self.model
        q = dyn.as_vector(q, m.nq, "q")
        v = dyn.as_vector(v, m.nv, "v")
        tau_passive = dyn.as_vector(tau_passive, m.n_passive, "tau_passive")
        status = frame_task_kernel(*self.kernel_buffers, q, v, tau_passive,
                                   *self.frame_task_arguments(frame))
        if status != OK:
            dyn.raise_for_status(status, q=q, v=v, tp=tau_passive)
        return (self.J_G, self.J_D, self._position, self._rotation, self.J, self.drift_G,
                self.drift_D)

    def frame_task_arguments(self, frame: str) -> tuple:
        """What ``frame_task_kernel`` takes after (``kernel_buffers``, q, v, tau_passive) for
        ``frame`` (on a body: ``model.frame(frame).body`` ≥ 0): its body, rotation and offset;
        its outputs are the arrays ``task_quantities`` returns (blocks of ``buffer``), for a
        caller that runs the kernel inside its own."""
        f = self.model.frame(frame)
        return f.body, f.rotation, f.translation

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
        generalized_jacobian_adjoint(*dyn.buffers, f.body, W, self.J_G, self._column,
                                     self._z_bar, self._alpha_bar, self._x_bar, self._nu_bar,
                                     self._tmp6a, self._tmp6b)
        return self.J_G

    def product(self, frame: str, x: np.ndarray) -> np.ndarray:
        """J_G x in O(N) without forming J_G (one pass of (5.4) with qdd_a = x)."""
        self.dynamics.set_velocity(None)
        self.dynamics.solve(x, self._zero_tau_p, gravity=False)
        out = np.zeros(6)
        self._frame_acceleration(frame, self._zero_vel, out)
        return out

    def drifts(self, v: np.ndarray, tau_passive: np.ndarray, frame: str | None,
               f_ext: Mapping[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """drift_G, drift_D: the frame's and passive joints' accelerations when qdd_a = 0;
        ``f_ext``: external wrenches acting meanwhile (see ``dynamics.hybrid_dynamics``)."""
        dyn = self.dynamics
        dyn.set_velocity(v)
        res = dyn.solve(np.zeros(self.model.n_active), tau_passive, gravity=True, f_ext=f_ext)
        self.drift_D[:] = res.qdd_passive
        if frame is not None:
            f = self.model.frame(frame)
            vel = dyn.vel[f.body] if f.body >= 0 else self._zero_vel
            self._frame_acceleration(frame, vel, self.drift_G)
        return self.drift_G, self.drift_D

    def frame_velocity(self, frame: str, v: np.ndarray) -> np.ndarray:
        """[linear; angular] velocity of the frame origin in root axes (= J v)."""
        return self.frame_jacobian(frame) @ v


def _same_robot(shared: Workspace, model: RobotModel) -> Workspace:
    if shared.model is not model:
        raise ValueError("shared workspace was built for another model (or passive set)")
    return shared


def shared_workspace(model: RobotModel) -> JacobianWorkspace:
    """The JacobianWorkspace that the functions below use for ``model`` by default (built on
    the model's cached ``dynamics.model_workspace``)."""
    return model_workspace(model).part(JacobianWorkspace)


def _ws(model: RobotModel, workspace: JacobianWorkspace | None) -> JacobianWorkspace:
    if workspace is None:
        return shared_workspace(model)
    if workspace.model is not model:
        raise ValueError("workspace was built for another model (or passive set)")
    return workspace


# ------------------------------------------------------------------ public functions
# ``workspace``: a JacobianWorkspace(model) to use (default: one shared per model).
def frame_placement(model: RobotModel, q: np.ndarray, frame: str,
                    workspace: JacobianWorkspace | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3, 3)) of a link frame in root coordinates."""
    ws = _ws(model, workspace)
    ws.set_configuration(q)
    p, R = ws.frame_placement(frame)
    return p.copy(), R.copy()


def frame_jacobian(model: RobotModel, q: np.ndarray, frame: str,
                   workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """(6, nv) Jacobian of a link frame: [linear; angular], origin of the frame, root axes."""
    ws = _ws(model, workspace)
    ws.set_configuration(q)
    return ws.frame_jacobian(frame).copy()


def frame_velocity(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str,
                   workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """[linear; angular] velocity of a link frame's origin in root axes."""
    return frame_jacobian(model, q, frame, workspace) @ np.asarray(v, dtype=float)


def generalized_jacobian(model: RobotModel, q: np.ndarray, frame: str,
                         workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """J_G (6, n_active): a_frame = J_G qdd_active + drift (6.10, 6.11).

    Columns by §6.1 (one (5.4) pass per active DOF) for n_a <= 6, rows by the adjoint sweeps
    (six passes, O(6 N)) beyond: the same numbers, the cheaper route."""
    ws = _ws(model, workspace)
    if model.n_active > 6:
        return ws.generalized_by_rows(frame, q).copy()
    return ws.generalized(frame, q)[0].copy()


def disturbance_jacobian(model: RobotModel, q: np.ndarray,
                         workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """J_D (n_passive, n_active): qdd_passive = J_D qdd_active + drift (6.12, 6.13)."""
    return _ws(model, workspace).generalized(None, q)[1].copy()


def generalized_jacobian_product(model: RobotModel, q: np.ndarray, frame: str, x: np.ndarray,
                                 workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """J_G x in O(N) (§6.1, last paragraph)."""
    ws = _ws(model, workspace)
    ws.set_configuration(q)
    return ws.product(frame, np.asarray(x, dtype=float))


def jacobian_drifts(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str | None,
                    tau_passive: np.ndarray | None = None,
                    workspace: JacobianWorkspace | None = None,
                    f_ext: Mapping[str, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(drift_G (6,), drift_D (n_passive,)): velocity-, gravity-, T_p- and (with ``f_ext``, link
    name -> [force; torque] in the link frame) external-wrench-dependent terms."""
    ws = _ws(model, workspace)
    ws.set_configuration(q)
    tp = np.zeros(model.n_passive) if tau_passive is None else tau_passive
    g, d = ws.drifts(v, tp, frame, f_ext)
    return g.copy(), d.copy()


def underactuated_mass_matrix(model: RobotModel, q: np.ndarray,
                              workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """S_aa (n_active, n_active), the mass matrix seen by the actuators (4.5, 6.8): column k is
    T_a for a unit qdd_a(k) with zero velocity, gravity and T_p. Returned as computed
    (symmetric to rounding, which the tests check), not symmetrised."""
    dyn = _ws(model, workspace).dynamics
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
    return S


def spatial_momentum(model: RobotModel, q: np.ndarray, v: np.ndarray,
                     workspace: JacobianWorkspace | None = None) -> np.ndarray:
    """Total momentum [linear (3); angular about the root origin (3)] in root axes (§7)."""
    ws = _ws(model, workspace)
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
