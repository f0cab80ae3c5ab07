"""Hybrid dynamics of under-actuated manipulators (Jain & Rodriguez, sections 3-5).

Given the active joints' accelerations and the passive joints' forces, the O(N) recursion returns
the active joints' forces T_a, the passive joints' accelerations qdd_p and every link's spatial
acceleration alpha. Its three steps, each one compiled kernel below:

1. ``velocity_sweep``      (3.1)  base-to-tip: V(k), Coriolis a(k), gyroscopic b(k)
2. ``articulated_sweep``   (4.6)  tip-to-base: P(k), D_p(k), G_p(k), P+(k) (depends on q only)
3. ``residual_force_sweep`` (5.4a) tip-to-base: z(k), eps_p(k), nu_p(k)
   ``outward_sweep``        (5.4b) base-to-tip: alpha(k), T_a(k), qdd_p(k)

With every joint passive it is the articulated-body forward dynamics (ABA); with every joint
active it is composite-body inverse dynamics; ``forward_dynamics``, ``inverse_dynamics`` and
``mass_matrix`` below are exactly those special cases of the same kernels.

Indexing: bodies base-to-tip (``parent[i] < i``), so the paper's tip-to-base "for k = 1..n" is
``for i in reversed(range(nb))``. Spatial vectors are [angular; linear] (see ``spatial.py``);
gravity enters as the base acceleration alpha(n+1) = [0; -g].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from .model import FLOATING, PRISMATIC, RobotModel
from .spatial import (
    axis_angle_matrix,
    cross_force,
    cross_motion,
    quaternion_to_matrix,
    xform_force_transpose,
    xform_inertia_transpose,
    xform_motion,
)

__all__ = [
    "HybridDynamics",
    "HybridResult",
    "SingularPassiveInertiaError",
    "hybrid_dynamics",
    "inverse_dynamics",
    "forward_dynamics",
    "mass_matrix",
]


class SingularPassiveInertiaError(ValueError):
    """D_p(k) = H_p P H_p* is singular: the passive joint moves a subtree without inertia."""


# ================================================================ compiled kernels
@njit(cache=True)
def joint_transforms(hinge_type, axis, tree_E, tree_r, q_start, q, E_up, r_up, R_tmp):
    """Parent-to-body transforms (E_up[i], r_up[i]) = X_J(q_i) X_tree[i] for every body."""
    nb = hinge_type.shape[0]
    for i in range(nb):
        qi = q_start[i]
        Et = tree_E[i]
        rt = tree_r[i]
        if hinge_type[i] == PRISMATIC:
            for a in range(3):
                for b in range(3):
                    E_up[i, a, b] = Et[a, b]
                d = q[qi]
                r_up[i, a] = (
                    rt[a]
                    + (Et[0, a] * axis[i, 0] + Et[1, a] * axis[i, 1] + Et[2, a] * axis[i, 2]) * d
                )
            continue
        if hinge_type[i] == FLOATING:
            quaternion_to_matrix(q[qi + 3 : qi + 7], R_tmp)
            for a in range(3):
                r_up[i, a] = rt[a] + (
                    Et[0, a] * q[qi] + Et[1, a] * q[qi + 1] + Et[2, a] * q[qi + 2]
                )
        else:  # revolute: child axes rotated by R(axis, q) in the joint frame
            axis_angle_matrix(axis[i], q[qi], R_tmp)
            for a in range(3):
                r_up[i, a] = rt[a]
        # E_up = R^T Et
        for a in range(3):
            for b in range(3):
                E_up[i, a, b] = (
                    R_tmp[0, a] * Et[0, b] + R_tmp[1, a] * Et[1, b] + R_tmp[2, a] * Et[2, b]
                )


@njit(cache=True)
def velocity_sweep(parent, S, nv_joint, v_start, inertia, E_up, r_up, v, vel, coriolis, gyro, tmp):
    """(3.1) base-to-tip: V(k) = phi*(k+1,k) V(k+1) + H*(k) beta(k); a(k) = V(k) x H*(k) beta(k);
    b(k) = V(k) x* M(k) V(k)."""
    nb = parent.shape[0]
    for i in range(nb):
        p = parent[i]
        if p >= 0:
            xform_motion(E_up[i], r_up[i], vel[p], vel[i])
        else:
            for a in range(6):
                vel[i, a] = 0.0
        # relative hinge velocity H*(k) beta(k) -> tmp
        for a in range(6):
            tmp[a] = 0.0
        j0 = v_start[i]
        for c in range(nv_joint[i]):
            vc = v[j0 + c]
            for a in range(6):
                tmp[a] += S[i, a, c] * vc
        for a in range(6):
            vel[i, a] += tmp[a]
        cross_motion(vel[i], tmp, coriolis[i])
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += inertia[i, a, b] * vel[i, b]
            tmp[a] = s
        cross_force(vel[i], tmp, gyro[i])


@njit(cache=True)
def _spd_inverse(D, n, tol, out):
    """Inverse of the n x n symmetric positive definite D (Cholesky); False if a pivot <= tol."""
    L = np.zeros((6, 6))
    for j in range(n):
        s = D[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not (s > tol):
            return False
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, n):
            s = D[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    # inverse of L (lower triangular), then out = L^-T L^-1
    Li = np.zeros((6, 6))
    for j in range(n):
        Li[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * Li[k, j]
            Li[i, j] = s / L[i, i]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for k in range(max(i, j), n):
                s += Li[k, i] * Li[k, j]
            out[i, j] = s
    return True


@njit(cache=True)
def articulated_sweep(
    parent, S, nv_joint, passive, inertia, E_up, r_up, tol, P, U, Dinv, G, P_plus, tmp66
):
    """(4.6) tip-to-base articulated quantities of the passive arm.

    P(k) = phi(k,k-1) P+(k-1) phi*(k,k-1) + M(k); for a passive hinge D_p = H P H*,
    G_p = P H* D_p^-1, P+ = (I - G_p H) P; for an active hinge P+ = P (tau_bar = I).
    (The OCR of (4.6) swaps the two branches; this is the published algorithm.)
    Returns -1, or the index of the first body whose D_p(k) is singular.
    """
    nb = parent.shape[0]
    for i in range(nb):
        for a in range(6):
            for b in range(6):
                P[i, a, b] = inertia[i, a, b]
    for i in range(nb - 1, -1, -1):
        r = nv_joint[i]
        if passive[i]:
            # U = P H*, D = H P H*
            for a in range(6):
                for c in range(r):
                    s = 0.0
                    for b in range(6):
                        s += P[i, a, b] * S[i, b, c]
                    U[i, a, c] = s
            D = np.zeros((6, 6))
            for c in range(r):
                for d in range(r):
                    s = 0.0
                    for a in range(6):
                        s += S[i, a, c] * U[i, a, d]
                    D[c, d] = s
            if not _spd_inverse(D, r, tol, Dinv[i]):
                return i
            # G = U D^-1 ; P+ = P - G U^T
            for a in range(6):
                for c in range(r):
                    s = 0.0
                    for d in range(r):
                        s += U[i, a, d] * Dinv[i, d, c]
                    G[i, a, c] = s
            for a in range(6):
                for b in range(6):
                    s = P[i, a, b]
                    for c in range(r):
                        s -= G[i, a, c] * U[i, b, c]
                    P_plus[a, b] = s
        else:
            for a in range(6):
                for b in range(6):
                    P_plus[a, b] = P[i, a, b]
        p = parent[i]
        if p >= 0:
            xform_inertia_transpose(E_up[i], r_up[i], P_plus, tmp66, P[p])
    return -1


@njit(cache=True)
def residual_force_sweep(
    parent,
    S,
    nv_joint,
    v_start,
    passive,
    E_up,
    r_up,
    P,
    G,
    Dinv,
    coriolis,
    gyro,
    qdd,
    tau,
    z,
    nu,
    tmp,
    eps,
):
    """(5.4a) tip-to-base residual forces.

    active:  z(k) = phi z+(k-1) + b(k) + P(k)[H* qdd(k) + a(k)],   z+(k) = z(k)
    passive: z(k) = phi z+(k-1) + b(k) + P(k) a(k),  eps_p = T_p(k) - H z(k),
             z+(k) = z(k) + G_p eps_p,  nu_p(k) = D_p^-1 eps_p
    """
    nb = parent.shape[0]
    for i in range(nb):
        for a in range(6):
            z[i, a] = gyro[i, a]
    for i in range(nb - 1, -1, -1):
        r = nv_joint[i]
        j0 = v_start[i]
        for a in range(6):
            tmp[a] = coriolis[i, a]
        if not passive[i]:
            for c in range(r):
                for a in range(6):
                    tmp[a] += S[i, a, c] * qdd[j0 + c]
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += P[i, a, b] * tmp[b]
            z[i, a] += s
        for a in range(6):
            tmp[a] = z[i, a]  # tmp holds z+(k) from here on
        if passive[i]:
            for c in range(r):
                s = tau[j0 + c]
                for a in range(6):
                    s -= S[i, a, c] * z[i, a]
                eps[c] = s
            for c in range(r):
                s = 0.0
                for d in range(r):
                    s += Dinv[i, c, d] * eps[d]
                nu[j0 + c] = s
                for a in range(6):
                    tmp[a] += G[i, a, c] * eps[c]
        p = parent[i]
        if p >= 0:
            xform_force_transpose(E_up[i], r_up[i], tmp, z[p])


@njit(cache=True)
def outward_sweep(
    parent,
    S,
    nv_joint,
    v_start,
    passive,
    E_up,
    r_up,
    P,
    G,
    coriolis,
    z,
    nu,
    alpha_base,
    qdd,
    tau,
    alpha,
    force,
    alpha_plus,
):
    """(5.4b) base-to-tip: alpha+(k) = phi*(k+1,k) alpha(k+1);
    active:  f(k) = P(k) alpha+(k) + z(k),  T_a(k) = H(k) f(k)
    passive: qdd_p(k) = nu_p(k) - G_p*(k) alpha+(k)
    alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)."""
    nb = parent.shape[0]
    for i in range(nb):
        p = parent[i]
        if p >= 0:
            xform_motion(E_up[i], r_up[i], alpha[p], alpha_plus)
        else:
            xform_motion(E_up[i], r_up[i], alpha_base, alpha_plus)
        r = nv_joint[i]
        j0 = v_start[i]
        if passive[i]:
            for c in range(r):
                s = nu[j0 + c]
                for a in range(6):
                    s -= G[i, a, c] * alpha_plus[a]
                qdd[j0 + c] = s
            for a in range(6):
                force[i, a] = 0.0
        else:
            for a in range(6):
                s = z[i, a]
                for b in range(6):
                    s += P[i, a, b] * alpha_plus[b]
                force[i, a] = s
            for c in range(r):
                s = 0.0
                for a in range(6):
                    s += S[i, a, c] * force[i, a]
                tau[j0 + c] = s
        for a in range(6):
            s = alpha_plus[a] + coriolis[i, a]
            for c in range(r):
                s += S[i, a, c] * qdd[j0 + c]
            alpha[i, a] = s


# ================================================================ workspace
@dataclass
class HybridResult:
    """Output of the hybrid recursion (arrays in DOF order of the active/passive subsets)."""

    tau_active: np.ndarray
    qdd_passive: np.ndarray
    qdd: np.ndarray  # all DOF
    tau: np.ndarray  # all DOF (passive entries = the given tau_passive)
    alpha: np.ndarray  # (nb, 6) body spatial accelerations, body axes, [angular; linear]


class HybridDynamics:
    """Allocation-free workspace for one model and one passive set (the control-loop path).

    ``compute(q, v, qdd_active, tau_passive)`` runs the three steps of section 5 and writes into
    the preallocated ``self.result`` (overwritten on the next call: copy what you keep).
    The steps are also callable one by one (``set_configuration``, ``set_velocity``, ``solve``)
    so that Jacobians and the mass matrix reuse the configuration-dependent sweep (4.6).
    """

    def __init__(self, model: RobotModel, passive_mask: np.ndarray | None = None) -> None:
        self.model = model
        nb, nv = model.nb, model.nv
        mask = model.passive_joint_mask if passive_mask is None else np.asarray(passive_mask, bool)
        if mask.shape != (nb,):
            raise ValueError(f"passive_mask must have shape ({nb},)")
        self.passive = np.ascontiguousarray(mask)
        dof_passive = np.repeat(mask, model.nv_joint)
        self.active_dofs = np.flatnonzero(~dof_passive)
        self.passive_dofs = np.flatnonzero(dof_passive)
        self.singular_tolerance = 1e-12 * model.inertia_scale
        self.E_up = np.zeros((nb, 3, 3))
        self.r_up = np.zeros((nb, 3))
        self.vel = np.zeros((nb, 6))
        self.coriolis = np.zeros((nb, 6))
        self.gyro = np.zeros((nb, 6))
        self.P = np.zeros((nb, 6, 6))
        self.U = np.zeros((nb, 6, 6))
        self.Dinv = np.zeros((nb, 6, 6))
        self.G = np.zeros((nb, 6, 6))
        self.z = np.zeros((nb, 6))
        self.nu = np.zeros(nv)
        self.alpha = np.zeros((nb, 6))
        self.force = np.zeros((nb, 6))
        self.alpha_base = np.zeros(6)
        self.alpha_base[3:] = -model.gravity
        self.qdd = np.zeros(nv)
        self.tau = np.zeros(nv)
        self._R = np.zeros((3, 3))
        self._P_plus = np.zeros((6, 6))
        self._tmp66 = np.zeros((6, 6))
        self._tmp6 = np.zeros(6)
        self._tmp6b = np.zeros(6)
        self.result = HybridResult(
            tau_active=np.zeros(len(self.active_dofs)),
            qdd_passive=np.zeros(len(self.passive_dofs)),
            qdd=self.qdd,
            tau=self.tau,
            alpha=self.alpha,
        )

    # -- step 0 + 2: configuration-dependent quantities (transforms, (4.6)) -----------------
    def set_configuration(self, q: np.ndarray) -> None:
        m = self.model
        q = np.asarray(q, dtype=float)
        if q.shape != (m.nq,) or not math.isfinite(float(np.sum(q))):
            m.check_state(q=q)
        joint_transforms(
            m.hinge_type,
            m.axis,
            m.tree_rotation,
            m.tree_translation,
            m.q_start,
            q,
            self.E_up,
            self.r_up,
            self._R,
        )
        bad = articulated_sweep(
            m.parent,
            m.motion_subspace,
            m.nv_joint,
            self.passive,
            m.inertia,
            self.E_up,
            self.r_up,
            self.singular_tolerance,
            self.P,
            self.U,
            self.Dinv,
            self.G,
            self._P_plus,
            self._tmp66,
        )
        if bad >= 0:
            raise SingularPassiveInertiaError(
                f"passive joint '{m.joint_names[bad]}' moves a subtree with (near) zero inertia "
                f"about its axis: D_p(k) is singular, its acceleration is undetermined"
            )

    # -- step 1: velocity-dependent quantities (3.1) ----------------------------------------
    def set_velocity(self, v: np.ndarray | None) -> None:
        m = self.model
        if v is None:
            self.vel[:] = 0.0
            self.coriolis[:] = 0.0
            self.gyro[:] = 0.0
            return
        v = np.asarray(v, dtype=float)
        if v.shape != (m.nv,) or not math.isfinite(float(np.sum(v))):
            m.check_state(v=v)
        velocity_sweep(
            m.parent,
            m.motion_subspace,
            m.nv_joint,
            m.v_start,
            m.inertia,
            self.E_up,
            self.r_up,
            v,
            self.vel,
            self.coriolis,
            self.gyro,
            self._tmp6,
        )

    # -- step 3: (5.4a) + (5.4b) --------------------------------------------------------------
    def solve(
        self, qdd_active: np.ndarray, tau_passive: np.ndarray, gravity: bool = True
    ) -> HybridResult:
        m = self.model
        qdd_active = np.asarray(qdd_active, dtype=float)
        tau_passive = np.asarray(tau_passive, dtype=float)
        if (
            qdd_active.shape != self.active_dofs.shape
            or tau_passive.shape != self.passive_dofs.shape
            or not math.isfinite(float(np.sum(qdd_active)) + float(np.sum(tau_passive)))
        ):
            self._check_inputs(qdd_active, tau_passive)
        self.qdd[self.active_dofs] = qdd_active
        self.tau[self.passive_dofs] = tau_passive
        if gravity:
            self.alpha_base[3:] = -m.gravity
        else:
            self.alpha_base[:] = 0.0
        residual_force_sweep(
            m.parent,
            m.motion_subspace,
            m.nv_joint,
            m.v_start,
            self.passive,
            self.E_up,
            self.r_up,
            self.P,
            self.G,
            self.Dinv,
            self.coriolis,
            self.gyro,
            self.qdd,
            self.tau,
            self.z,
            self.nu,
            self._tmp6,
            self._tmp6b,
        )
        outward_sweep(
            m.parent,
            m.motion_subspace,
            m.nv_joint,
            m.v_start,
            self.passive,
            self.E_up,
            self.r_up,
            self.P,
            self.G,
            self.coriolis,
            self.z,
            self.nu,
            self.alpha_base,
            self.qdd,
            self.tau,
            self.alpha,
            self.force,
            self._tmp6,
        )
        np.take(self.tau, self.active_dofs, out=self.result.tau_active)
        np.take(self.qdd, self.passive_dofs, out=self.result.qdd_passive)
        return self.result

    def compute(
        self, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray, tau_passive: np.ndarray
    ) -> HybridResult:
        """The whole hybrid recursion; results in ``self.result`` (preallocated, reused)."""
        self.set_configuration(q)
        self.set_velocity(v)
        return self.solve(qdd_active, tau_passive)

    def _check_inputs(self, qdd_active: np.ndarray, tau_passive: np.ndarray) -> None:
        m = self.model
        for name, arr, idx in (
            ("qdd_active", qdd_active, self.active_dofs),
            ("tau_passive", tau_passive, self.passive_dofs),
        ):
            if arr.shape != idx.shape:
                raise ValueError(
                    f"{name} must have shape {idx.shape} (joints {[m.dof_names[i] for i in idx]}), "
                    f"got {arr.shape}"
                )
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                raise ValueError(
                    f"{name} has non-finite entries: "
                    + ", ".join(f"{m.dof_names[idx[b]]}={arr[b]}" for b in bad[:6])
                )


def _workspace(model: RobotModel, kind: str = "model") -> HybridDynamics:
    """Cached workspace of ``model`` for its own passive set, all-active or all-passive."""
    cache = model._workspace_cache
    ws = cache.get(kind)
    if ws is None:
        mask = {
            "model": None,
            "active": np.zeros(model.nb, bool),
            "passive": np.ones(model.nb, bool),
        }[kind]
        ws = cache[kind] = HybridDynamics(model, mask)
    return ws


# ================================================================ public functions
def hybrid_dynamics(
    model: RobotModel, q: np.ndarray, v: np.ndarray, qdd_active: np.ndarray, tau_passive: np.ndarray
) -> HybridResult:
    """T_a and qdd_p from qdd_a and T_p (section 5); results are fresh copies."""
    res = _workspace(model).compute(q, v, qdd_active, tau_passive)
    return HybridResult(
        res.tau_active.copy(),
        res.qdd_passive.copy(),
        res.qdd.copy(),
        res.tau.copy(),
        res.alpha.copy(),
    )


def inverse_dynamics(
    model: RobotModel, q: np.ndarray, v: np.ndarray, qdd: np.ndarray
) -> np.ndarray:
    """tau = M(q) qdd + C(q, v) + gravity: the hybrid recursion with every joint active."""
    return _workspace(model, "active").compute(q, v, qdd, np.zeros(0)).tau.copy()


def forward_dynamics(
    model: RobotModel, q: np.ndarray, v: np.ndarray, tau: np.ndarray
) -> np.ndarray:
    """qdd = M^-1 (tau - C - gravity): the hybrid recursion with every joint passive (ABA)."""
    return _workspace(model, "passive").compute(q, v, np.zeros(0), tau).qdd.copy()


def mass_matrix(model: RobotModel, q: np.ndarray) -> np.ndarray:
    """M(q) column by column: all joints active, zero velocity and gravity, unit accelerations.

    (4.6) is run once (all active: P(k) are the composite-body inertias); each column is one
    pass of (5.4a)/(5.4b) with qdd = e_j.
    """
    ws = _workspace(model, "active")
    ws.set_configuration(q)
    ws.set_velocity(None)
    nv = model.nv
    M = np.empty((nv, nv))
    unit = np.zeros(nv)
    for j in range(nv):
        unit[j] = 1.0
        M[:, j] = ws.solve(unit, np.zeros(0), gravity=False).tau
        unit[j] = 0.0
    return 0.5 * (M + M.T)
