"""Khatib's operational space: task inertia, dynamic consistency, effective mass, belted
ellipsoids, macro/mini and multi-arm systems (Khatib 1995, "Inertial properties in robotic
manipulation: an object-level framework", §2–7; equation numbers below are that paper's).

Conventions (doc/architecture.md §2): task vectors are **[linear(3); angular(3)]** of a frame's
origin (or of a point ``offset`` fixed in the frame, given in the frame's axes), in the root
link's axes — the rows of ``jacobians.frame_jacobian``, Khatib's basic Jacobian J₀ (eq. 5):
forces are [force; moment about that point]. ``rows`` picks task directions: ``None`` (all
six), ``"linear"``/``"angular"``, indices such as ``[0, 1, 2]``, or a k×6 matrix S whose rows
are directions (the task Jacobian is then S J).

The joint-space inertia A is the mechanism's **full** mass matrix (every DOF, passive or not),
as in the paper: Λ⁻¹ = J A⁻¹ Jᵀ (17). The under-actuated extension (``generalized_*``) is the
same algebra seen through the active joints only.

Speed: nothing here forms or factorises A. Λ⁻¹ is one O(N) recursion of the articulated-body
quantities (4.6) that ``dynamics.HybridDynamics`` already computes, run along the root→frame
path (``operational_space_kernels``: the six unit-wrench force passes collapsed into one 6×6
recursion); μ and p are two articulated-body passes; J̄ is six force passes at once (O(36 N));
a null-space torque N Γ₀ is one pass. For the control loop use ``OperationalSpace(model)``:
``set_task`` once, ``update(q, v)`` per cycle, then ``Lambda``, ``mu``, ``p``, ``J``,
``null_space_torque``. The free functions below use a shared workspace and return copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .buffers import numpy_views
from .dynamics import NONFINITE_V, OK, Workspace, _kernel_vector, model_workspace
from .model import FLOATING, RobotModel
from .operational_space_kernels import (
    SINGULAR_TASK,
    configure_task,
    masked_inverse_inertia,
    null_space_kernel,
    os_buffer_size,
    os_views,
    scaled_spd_inverse,
    task_bias_kernel,
    update_kernel,
    wrench_response_kernel,
)
from .so3 import skew

__all__ = [
    "OperationalSpace",
    "SingularTaskError",
    "TaskInertiaInverse",
    "GeneralizedTask",
    "BeltedEllipsoid",
    "MacroMiniInertia",
    "DextrousTorque",
    "GraspingArm",
    "Load",
    "AugmentedObject",
    "task_inertia",
    "task_inertia_inverse",
    "dynamically_consistent_inverse",
    "null_space_projector",
    "task_bias",
    "effective_mass",
    "effective_inertia",
    "motion_force_selection",
    "belted_ellipsoid",
    "surface_triangles",
    "generalized_task_inertia",
    "generalized_task_inertia_inverse",
    "generalized_dynamically_consistent_inverse",
    "generalized_task_bias",
    "generalized_effective_mass",
    "macro_mini_inertia",
    "dextrous_coordination_torque",
    "load_inertia",
    "load_bias",
    "augmented_object",
    "shared_workspace",
]


class SingularTaskError(ValueError):
    """Λ⁻¹ (or Λ_G⁻¹) of the task is singular: the frame cannot be accelerated along some task
    direction (a kinematic singularity, fewer joints than task directions, or — through the
    active joints — a direction the passive joints absorb). The message names the direction."""


def _selection(rows) -> np.ndarray:
    """The task selection S (k x 6) of ``rows`` (see the module docstring)."""
    if rows is None:
        return np.eye(6)
    if isinstance(rows, str):
        named = {"linear": [0, 1, 2], "position": [0, 1, 2], "angular": [3, 4, 5],
                 "orientation": [3, 4, 5], "pose": list(range(6))}
        if rows not in named:
            raise ValueError(f"rows must be one of {sorted(named)}, indices or a k x 6 matrix, "
                             f"got {rows!r}")
        rows = named[rows]
    arr = np.asarray(rows)
    if arr.ndim == 1:
        if arr.size == 0 or arr.size > 6 or not np.issubdtype(arr.dtype, np.integer) \
                or arr.min() < 0 or arr.max() > 5 or len(set(arr.tolist())) != arr.size:
            raise ValueError(f"rows as indices must be 1 to 6 distinct integers in 0..5 "
                             f"([linear; angular]), got {rows!r}")
        return np.eye(6)[arr]
    if arr.ndim == 2 and arr.shape[1] == 6 and 1 <= arr.shape[0] <= 6:
        S = np.array(arr, dtype=float)
        if not np.isfinite(S).all():
            raise ValueError("rows: the selection matrix has non-finite entries")
        return S
    raise ValueError(f"rows must be None, a name, indices or a k x 6 matrix (k <= 6), got "
                     f"shape {arr.shape}")


def _plain(x, n: int) -> bool:
    """x is what the compiled calls take as it is: a writeable C-contiguous float64 (n,)."""
    return _kernel_vector(x) and x.shape[0] == n


def _unit(x, name: str) -> np.ndarray:
    u = np.asarray(x, dtype=float)
    if u.shape[-1] != 3:
        raise ValueError(f"{name} must have 3 components (or shape (k, 3)), got {u.shape}")
    n = np.linalg.norm(u, axis=-1, keepdims=True)
    if not (np.isfinite(u).all() and (n > 0).all()):
        raise ValueError(f"{name} must be finite and non-zero")
    return u / n


def _singular_message(Linv: np.ndarray, S: np.ndarray, what: str) -> str:
    """Name the task direction along which ``Linv`` (k x k, rows S) is (near) singular."""
    k = Linv.shape[0]
    d = np.sqrt(np.maximum(np.abs(np.diag(Linv)), 1e-300))
    w, V = np.linalg.eigh(Linv / np.outer(d, d))
    u = S.T @ (V[:, 0] / d)  # the task direction (6-D, [linear; angular]) in task space
    u = u / (np.abs(u).max() or 1.0)
    return (f"{what} is singular ({k} task direction(s); smallest scaled eigenvalue "
            f"{w[0]:.3g}): the frame cannot be accelerated along [linear; angular] "
            f"{np.array2string(u, precision=3, suppress_small=True)}")


# ====================================================================== workspace
class OperationalSpace:
    """Allocation-light operational-space quantities of one frame of one robot (all O(N)).

    Per control cycle::

        os = OperationalSpace(model)
        os.set_task("tool", rows=None)         # once, or when the task changes
        os.update(q, v)                        # Λ⁻¹, Λ, J, μ, p in one compiled call
        F = os.Lambda @ f_star + os.mu + os.p  # (23)
        tau = os.J_task.T @ F + os.null_space_torque(tau0)   # (27)

    ``Lambda``, ``Lambda_inv`` (k x k), ``Lambda_inv_full`` (6 x 6, eq. 33), ``mu``, ``p``
    (k), ``J`` (6 x nv, the frame's full Jacobian) and ``J_task`` (S J, k x nv) are views into
    preallocated buffers, overwritten by the next ``update``: copy what you keep.
    ``singular`` is True when the last update found S Λ⁻¹ Sᵀ singular (``Lambda`` is then
    stale); ``update`` raises ``SingularTaskError`` then unless ``raise_on_singular=False``.

    ``shared``: the model's ``dynamics.Workspace`` to build on (default: a new one). Its
    all-passive ``HybridDynamics`` (every joint free: A itself) is ``dynamics``; the other
    passive sets (the model's, for the under-actuated quantities; macro/mini splits) come from
    it too, so a ``JacobianWorkspace`` or a law on the same ``shared`` reuses their (4.6).
    """

    def __init__(self, model: RobotModel, singular_tolerance: float = 1e-10,
                 raise_on_singular: bool = True, shared: Workspace | None = None) -> None:
        self.model = model
        nb, nv = model.nb, model.nv
        if shared is not None and shared.model is not model:
            raise ValueError("shared workspace was built for another model (or passive set)")
        self.shared = Workspace(model) if shared is None else shared
        self.dynamics = self.shared.hybrid("passive")
        self.buffer = np.zeros(os_buffer_size(nb, nv))
        self.work = numpy_views(os_views(self.buffer, nb, nv)[0], self.buffer)
        self.path = np.zeros(nb, np.int64)
        self.singular_tolerance = float(singular_tolerance)
        self.raise_on_singular = raise_on_singular
        self.singular = False
        self._zero_tau = np.zeros(nv)
        self._null_out = np.zeros(nv)
        self._q = np.zeros(model.nq)
        self.frame: str | None = None
        self.body = -1
        self.k = 0
        self.S = np.eye(6)
        self._task_key = None
        self._configured = False
        self._inverted = False

    # ------------------------------------------------------------------ task
    def set_task(self, frame: str, rows=None, offset=None) -> None:
        """The frame (link name), its task rows and the point ``offset`` (frame axes)."""
        if rows is None and offset is None:
            key = frame
        else:
            key = (frame, repr(rows) if not isinstance(rows, np.ndarray)
                   else rows.tobytes() + bytes(rows.shape),
                   None if offset is None else tuple(np.asarray(offset, float).ravel()))
        if key == self._task_key:
            return
        f = self.model.frame(frame)
        if f.body < 0:
            raise ValueError(f"frame '{frame}' is fixed to the root: it cannot move, its task "
                             "inertia is not defined")
        S = _selection(rows)
        off = f.translation.copy()
        if offset is not None:
            o = np.asarray(offset, dtype=float)
            if o.shape != (3,) or not np.isfinite(o).all():
                raise ValueError(f"offset must be 3 finite numbers (frame axes), got {offset!r}")
            off = off + f.rotation.T @ o  # frame axes -> body axes
        self.frame, self.body, self.k, self.S = frame, f.body, S.shape[0], S
        self.work.S[:] = 0.0
        self.work.S[:self.k] = S
        self.work.offset[:] = off
        self._task_key = key
        self._configured = False

    @property
    def Lambda(self) -> np.ndarray:
        """Λ (k x k) of the task, eq. (17)."""
        return self.work.Lam[:self.k, :self.k]

    @property
    def Lambda_inv(self) -> np.ndarray:
        """S Λ⁻¹ Sᵀ = J_S A⁻¹ J_Sᵀ (k x k)."""
        return self.work.Linv[:self.k, :self.k]

    @property
    def Lambda_inv_full(self) -> np.ndarray:
        """Λ₀⁻¹ (6 x 6) of the frame point, blocks as in eq. (33)."""
        return self.work.Linv6

    @property
    def J(self) -> np.ndarray:
        """The frame point's Jacobian (6 x nv), [linear; angular], root axes."""
        return self.work.J

    @property
    def J_task(self) -> np.ndarray:
        """S J (k x nv): a new array."""
        return self.S @ self.work.J

    @property
    def mu(self) -> np.ndarray:
        return self.work.mu[:self.k]

    @property
    def p(self) -> np.ndarray:
        return self.work.p[:self.k]

    @property
    def point(self) -> np.ndarray:
        """The frame point in root coordinates."""
        return self.work.point

    # ------------------------------------------------------------------ per cycle
    def set_configuration(self, q: np.ndarray, invert: bool = True,
                          raise_on_singular: bool | None = None) -> None:
        """Transforms, (4.6), J, Λ⁻¹ and (``invert``) Λ at q: one compiled call.
        ``raise_on_singular``: this call's choice (default: the workspace's)."""
        if self.body < 0:
            raise ValueError("call set_task(frame, ...) first")
        dyn = self.dynamics
        if not _plain(q, self.model.nq):
            q = dyn.as_vector(q, self.model.nq, "q")
        self._configured = self._inverted = False
        status = configure_task(*dyn.buffers, self.buffer, self.path, q, True, self.body,
                                self.k, invert, self.singular_tolerance)
        if status != OK and status != SINGULAR_TASK:
            self._status(status, q)  # raises (non-finite q, a singular D_p)
        self._q[:] = q
        self._configured = True
        self._status(status, q, raise_on_singular)  # SingularTaskError, unless not wanted
        self._inverted = invert and not self.singular

    def _status(self, status: int, q=None, raise_on_singular: bool | None = None) -> None:
        self.singular = status == SINGULAR_TASK
        if status == OK:
            return
        if status == SINGULAR_TASK:
            if self.raise_on_singular if raise_on_singular is None else raise_on_singular:
                raise SingularTaskError(_singular_message(self.Lambda_inv, self.S,
                                                          f"Λ⁻¹ of frame '{self.frame}'"))
            return
        self.dynamics.raise_for_status(status, q=q)

    def _require(self, need_lambda: bool = False) -> None:
        if not self._configured:
            raise ValueError("call set_configuration(q) (or update) after set_task first")
        if need_lambda and not self._inverted:
            if self.singular:
                raise SingularTaskError(_singular_message(self.Lambda_inv, self.S,
                                                          f"Λ⁻¹ of frame '{self.frame}'"))
            raise ValueError("Λ was not computed: set_configuration(q, invert=True) first")

    def bias(self, v: np.ndarray, tau: np.ndarray | None = None,
             f_ext: Mapping[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(μ, p) of eqs. (24), (25) at the configured q: two articulated-body passes.
        ``tau``: joint forces applied during the free-motion pass (default zero). ``f_ext``:
        external wrenches (link name -> [force; torque] in the link frame, as in
        ``dynamics.hybrid_dynamics``) acting meanwhile: their joint forces Σ Jᵀ f_ext (E.3)
        join ``tau``, so μ gains −J̄ᵀ Σ Jᵀ f_ext (E.4); p is gravity's alone."""
        self._require(need_lambda=True)
        self._free_accelerations(v, tau, self.k, f_ext)
        return self.mu, self.p

    def _free_accelerations(self, v, tau, k: int, f_ext=None) -> None:
        """The frame's free accelerations a_v (v, tau, f_ext, no gravity) and a_g (at rest,
        gravity) into ``work.a_vel``/``work.a_grav``; with k > 0 also μ, p."""
        dyn, nv = self.dynamics, self.model.nv
        if not _plain(v, nv):
            v = dyn.as_vector(v, nv, "v")
        tau = self._zero_tau if tau is None else dyn.as_vector(tau, nv, "tau")
        if f_ext is not None:  # (E.4): the wrenches' joint forces join tau
            tau = tau + dyn.external_joint_forces(f_ext)
        if task_bias_kernel(*dyn.buffers, self.buffer, v, tau, self.body, k) != OK:
            self.model.check_state(v=v, tau=tau)

    def update(self, q: np.ndarray, v: np.ndarray | None = None,
               f_ext: Mapping[str, np.ndarray] | None = None) -> None:
        """``set_configuration(q)`` then (with v) ``bias(v)``, in one compiled call
        (two with ``f_ext``: ``bias(v, f_ext=f_ext)``)."""
        if v is None or f_ext is not None:
            self.set_configuration(q)
            if v is not None and not self.singular:
                self.bias(v, f_ext=f_ext)
            return
        if self.body < 0:
            raise ValueError("call set_task(frame, ...) first")
        m, dyn = self.model, self.dynamics
        if not _plain(q, m.nq):
            q = dyn.as_vector(q, m.nq, "q")
        if not _plain(v, m.nv):
            v = dyn.as_vector(v, m.nv, "v")
        self._configured = self._inverted = False
        status = update_kernel(*dyn.buffers, self.buffer, self.path, q, v, self._zero_tau,
                               self.body, self.k, self.singular_tolerance)
        if status == NONFINITE_V:
            m.check_state(v=v)
        if status != OK and status != SINGULAR_TASK:
            self._status(status, q)  # raises (non-finite q, a singular D_p)
        self._q[:] = q
        self._configured = True
        self._status(status, q)
        self._inverted = not self.singular

    def wrench_response(self, with_lambda: bool = True) -> np.ndarray:
        """Y = A⁻¹ J_Sᵀ (nv x k) by k unit-wrench force passes at once; with ``with_lambda``
        also J̄ (``dynamically_consistent_inverse``). A view."""
        self._require(need_lambda=with_lambda)
        wrench_response_kernel(*self.dynamics.buffers, self.buffer, self.path, self.body,
                               self.k, with_lambda)
        return self.work.Y[:, :self.k]

    def dynamically_consistent_inverse(self) -> np.ndarray:
        """J̄ = A⁻¹ J_Sᵀ Λ (nv x k), eq. (22). A view."""
        self.wrench_response(True)
        return self.work.Jbar[:, :self.k]

    def null_space_torque(self, tau0: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """[I − J_Sᵀ J̄ᵀ] Γ₀ (eq. 27, 55) in O(N), without forming the projector. Written into
        ``out`` (default: an internal buffer, overwritten by the next call)."""
        self._require(need_lambda=True)
        dyn, nv = self.dynamics, self.model.nv
        if not _plain(tau0, nv):
            tau0 = dyn.as_vector(tau0, nv, "tau0")
        out = self._null_out if out is None else out
        if null_space_kernel(*dyn.buffers, self.buffer, tau0, out, self.body, self.k) != OK:
            if out.shape != (nv,) or out.dtype != np.float64:
                raise ValueError(f"out must be a float64 array of shape ({nv},)")
            self.model.check_state(tau=tau0)
        return out

    def null_space_projector(self) -> np.ndarray:
        """N = I − J_Sᵀ J̄ᵀ (nv x nv, eq. 27), for torques: Γ = J_Sᵀ F + N Γ₀. A new array."""
        Jbar = self.dynamically_consistent_inverse()
        return np.eye(self.model.nv) - self.J_task.T @ Jbar.T

    # ------------------------------------------------------------------ other passive sets
    def masked_inverse(self, passive_mask: np.ndarray) -> np.ndarray:
        """S W Ω Wᵀ Sᵀ (k x k) with only the joints of ``passive_mask`` (per body) free and
        the others locked, at the configured q: e.g. J_p M_pp⁻¹ J_pᵀ (the model's passive
        joints) or the mini-manipulator alone (Khatib Lemma 1). A new array."""
        self._require()
        mask = np.ascontiguousarray(passive_mask, dtype=bool)
        ws = self.shared.hybrid(mask)
        out = np.zeros((6, 6))
        if mask.any():
            status = masked_inverse_inertia(*ws.buffers, self.buffer, self.path, self._q,
                                            self.body, self.k, out)
            if status != OK:
                ws.raise_for_status(status, q=self._q)
        return out[:self.k, :self.k].copy()

    # ------------------------------------------------------------------ under-actuated
    def generalized_torque(self, F: np.ndarray) -> np.ndarray:
        """T_a = J_Gᵀ Sᵀ F (n_active): the active-joint forces of a task force F with the
        passive joints free, in O(N) without J_G: J_Gᵀ = J_aᵀ + J_Dᵀ J_pᵀ and
        J_Dᵀ J_pᵀ F = −M_ap M_pp⁻¹ J_pᵀ F is the T_a of one hybrid pass (q̈_a = 0, T_p = J_pᵀ F,
        at rest, no gravity). A new array."""
        self._require()
        m = self.model
        JtF = self.work.J.T @ (self.S.T @ np.asarray(F, dtype=float))
        out = JtF[m.active_dofs]
        if m.n_passive:
            ws = self.shared.hybrid("model")
            ws.set_configuration(self._q)  # (4.6) of the model's passive set, once per q
            ws.set_velocity(None)
            out = out - ws.solve(np.zeros(m.n_active), JtF[m.passive_dofs],
                                 gravity=False).tau_active
        return out

    def generalized_null_space_torque(self, tau_a0: np.ndarray, task: GeneralizedTask
                                      ) -> np.ndarray:
        """[I − J_Gᵀ J̄_Gᵀ] Γ_a0 (n_active) in O(N): J̄_Gᵀ Γ_a0 = Λ_G J_G S_aa⁻¹ Γ_a0 is Λ_G times
        the frame's acceleration under joint forces [Γ_a0; 0] from rest (one articulated-body
        pass), then J_Gᵀ of it by ``generalized_torque``. ``task``: ``generalized()`` at the
        same q. A new array."""
        return self.generalized_command(np.zeros(self.k), tau_a0, task)

    def generalized_command(self, F: np.ndarray, tau_a0: np.ndarray, task: GeneralizedTask
                            ) -> np.ndarray:
        """Γ_a = J_Gᵀ Sᵀ F + [I − J_Gᵀ J̄_Gᵀ] Γ_a0 (n_active): ``generalized_torque(F)`` plus
        ``generalized_null_space_torque(tau_a0, task)``, with one hybrid pass for both
        (J_Gᵀ is linear: Γ_a0 + J_Gᵀ Sᵀ (F − Λ_G S a(Γ_a0))). A new array."""
        self._require()
        m = self.model
        ta = self.dynamics.as_vector(tau_a0, m.n_active, "tau_a0")
        tau = np.zeros(m.nv)
        tau[m.active_dofs] = ta
        self._free_accelerations(self._zero_tau, tau, 0)
        return ta + self.generalized_torque(F - task.Lambda @ (self.S @ self.work.a_vel))

    def generalized(self, tau_passive: np.ndarray | None = None, v: np.ndarray | None = None,
                    with_jbar: bool = True, f_ext: Mapping[str, np.ndarray] | None = None
                    ) -> GeneralizedTask:
        """Λ_G⁻¹, Λ_G, J̄_G and (with v) μ_G, p_G of the task seen through the model's active
        joints (see ``generalized_task_inertia``), at the configured q. New arrays; with v,
        the workspace's own ``mu``/``p`` are stale afterwards. ``with_jbar=False`` skips
        J̄_G (the six wrench passes, O(36 N)); ``generalized_null_space_torque`` needs only
        Λ_G. ``f_ext``: external wrenches acting during the free motion (in μ_G, E.4)."""
        self._require()
        m = self.model
        Linv = self.Lambda_inv.copy()
        absorbed = self.masked_inverse(m.passive_joint_mask)  # J_p M_pp⁻¹ J_pᵀ (rows S)
        LG_inv = Linv - absorbed  # Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ = Λ⁻¹ − J_p M_pp⁻¹ J_pᵀ
        LG_inv = 0.5 * (LG_inv + LG_inv.T)
        k = self.k
        if k > m.n_active:
            raise SingularTaskError(
                f"the task has {k} directions but the model has only {m.n_active} active "
                f"joint DOF ({list(m.active_joints)}): Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ has rank <= "
                f"{m.n_active}, the motors cannot control it")
        LG = _scaled_inverse(LG_inv, self.singular_tolerance, reference=Linv)
        if LG is None:
            raise SingularTaskError(_singular_message(
                LG_inv, self.S, f"Λ_G⁻¹ of frame '{self.frame}' through the active joints "
                f"(passive: {list(m.passive_joints)}); the passive joints absorb a task "
                "direction, and"))
        Jbar_G = None
        if with_jbar:  # S_aa⁻¹ J_Gᵀ Λ_G: rows of A⁻¹ J_Sᵀ at the active DOF
            Jbar_G = self.wrench_response(False)[m.active_dofs] @ LG
        mu_G = p_G = None
        if v is not None:
            tau = np.zeros(m.nv)
            if tau_passive is not None:
                tau[m.passive_dofs] = self.dynamics.as_vector(tau_passive, m.n_passive,
                                                              "tau_passive")
            self._free_accelerations(v, tau, 0, f_ext)  # only the accelerations: Λ may not exist
            mu_G = -LG @ (self.S @ self.work.a_vel)
            p_G = -LG @ (self.S @ self.work.a_grav)
        return GeneralizedTask(Lambda=LG, Lambda_inv=LG_inv, Jbar=Jbar_G, mu=mu_G, p=p_G,
                               absorbed=absorbed)


def _scaled_inverse(A: np.ndarray, rcond: float, reference: np.ndarray | None = None
                    ) -> np.ndarray | None:
    """A⁻¹ by the scaled Cholesky of the kernels, None if singular. With ``reference`` (a
    matrix A was cut from, e.g. Λ_G⁻¹ = Λ⁻¹ − J_p M_pp⁻¹ J_pᵀ from Λ⁻¹) the pivots are judged
    relative to the reference's diagonal, so a direction the cut removed entirely counts as
    singular even when it is the only one."""
    k = A.shape[0]
    buf = np.zeros((7, 6, 6))  # A, the reference, the inverse, scratch; padded to 6 x 6
    buf[0, :k, :k] = A
    buf[1, :k, :k] = A if reference is None else reference
    if not scaled_spd_inverse(buf[0], k, rcond, buf[2], buf[3], buf[4], buf[5], buf[6, 0],
                              buf[1]):
        return None
    return buf[2, :k, :k].copy()


@dataclass
class GeneralizedTask:
    """The task seen through the active joints (``OperationalSpace.generalized``)."""

    Lambda: np.ndarray  # Λ_G (k x k)
    Lambda_inv: np.ndarray  # Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ (k x k)
    Jbar: np.ndarray | None  # J̄_G = S_aa⁻¹ J_Gᵀ Λ_G (n_active x k); None: not asked for
    mu: np.ndarray | None  # μ_G (k): velocity and passive-joint-force terms
    p: np.ndarray | None  # p_G (k): gravity
    absorbed: np.ndarray  # J_p M_pp⁻¹ J_pᵀ (k x k): what the passive joints take away


# ====================================================================== shared workspaces
def shared_workspace(model: RobotModel) -> OperationalSpace:
    """The OperationalSpace the free functions use for ``model`` (built on the model's cached
    ``dynamics.model_workspace``, with its Jacobians and dynamics)."""
    return model_workspace(model).part(OperationalSpace)


def _configured(model, q, frame, rows, offset, workspace, invert=True) -> OperationalSpace:
    ws = shared_workspace(model) if workspace is None else workspace
    if ws.model is not model and ws.model.inertia is not model.inertia:
        raise ValueError("workspace was built for another robot")
    ws.set_task(frame, rows, offset)
    ws.set_configuration(q, invert, True)
    return ws


# ====================================================================== §2–4: one arm
@dataclass
class TaskInertiaInverse:
    """Λ₀⁻¹ = J₀ A⁻¹ J₀ᵀ and its blocks (eq. 33)."""

    full: np.ndarray  # (6, 6) [[Λ_v⁻¹, Λ̄_vω], [Λ̄_vωᵀ, Λ_ω⁻¹]]
    linear: np.ndarray  # Λ_v⁻¹ = J_v A⁻¹ J_vᵀ (3, 3), eq. (28)
    angular: np.ndarray  # Λ_ω⁻¹ = J_ω A⁻¹ J_ωᵀ (3, 3), eq. (29)
    coupling: np.ndarray  # Λ̄_vω = J_v A⁻¹ J_ωᵀ (3, 3)
    selected: np.ndarray  # S Λ⁻¹ Sᵀ (k, k) of ``rows`` (= full when rows is None)


def _inverse_blocks(full: np.ndarray, selected: np.ndarray) -> TaskInertiaInverse:
    full = full.copy()
    return TaskInertiaInverse(full=full, linear=full[:3, :3].copy(), angular=full[3:, 3:].copy(),
                              coupling=full[:3, 3:].copy(), selected=selected.copy())


def task_inertia(model: RobotModel, q: np.ndarray, frame: str, rows=None, *, offset=None,
                 workspace: OperationalSpace | None = None) -> np.ndarray:
    """Λ = (J_S A⁻¹ J_Sᵀ)⁻¹ (k x k; eq. 6/17): the operational-space (pseudo) kinetic energy
    matrix of the frame point, [linear; angular] in root axes, or of the task rows ``rows``.
    O(N). Raises ``SingularTaskError`` naming the direction when it does not exist."""
    return _configured(model, q, frame, rows, offset, workspace).Lambda.copy()


def task_inertia_inverse(model: RobotModel, q: np.ndarray, frame: str, rows=None, *,
                         offset=None, workspace: OperationalSpace | None = None
                         ) -> TaskInertiaInverse:
    """Λ⁻¹ = J A⁻¹ Jᵀ with its blocks Λ_v⁻¹, Λ_ω⁻¹, Λ̄_vω (eq. 33); always defined. O(N)."""
    ws = _configured(model, q, frame, rows, offset, workspace, invert=False)
    return _inverse_blocks(ws.Lambda_inv_full, ws.Lambda_inv)


def dynamically_consistent_inverse(model: RobotModel, q: np.ndarray, frame: str, rows=None, *,
                                   offset=None, workspace: OperationalSpace | None = None
                                   ) -> np.ndarray:
    """J̄ = A⁻¹ J_Sᵀ Λ (nv x k), eq. (22): the generalized inverse of J_S consistent with the
    dynamics (Theorem 1; J_S J̄ = I). O(36 N): six unit-wrench force passes."""
    ws = _configured(model, q, frame, rows, offset, workspace)
    return ws.dynamically_consistent_inverse().copy()


def null_space_projector(model: RobotModel, q: np.ndarray, frame: str, rows=None, *,
                         offset=None, workspace: OperationalSpace | None = None) -> np.ndarray:
    """N = I − J_Sᵀ J̄ᵀ (nv x nv), eq. (27): for torques, Γ = J_Sᵀ F + N Γ₀; N Γ₀ causes no
    acceleration of the task (J_S A⁻¹ N = 0). Dense; per cycle use
    ``OperationalSpace.null_space_torque`` (O(N), no matrix)."""
    ws = _configured(model, q, frame, rows, offset, workspace)
    return ws.null_space_projector()


def task_bias(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str, rows=None, *,
              offset=None, workspace: OperationalSpace | None = None,
              f_ext: Mapping[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(μ, p) of eq. (23): μ = J̄ᵀ b − Λ J̇ q̇ (24) (Coriolis and centrifugal, J̇ q̇ the frame's
    classical acceleration at q̈ = 0) and p = J̄ᵀ g (25) (gravity), so that
    Λ ẍ + μ + p = F with Γ = Jᵀ F. Two articulated-body passes. ``f_ext`` (link name ->
    [force; torque] in the link frame): external wrenches, in μ as −J̄ᵀ Σ Jᵀ f_ext (E.4)."""
    ws = _configured(model, q, frame, rows, offset, workspace)
    mu, p = ws.bias(v, f_ext=f_ext)
    return mu.copy(), p.copy()


def effective_mass(model: RobotModel, q: np.ndarray, frame: str, direction, *, offset=None,
                   workspace: OperationalSpace | None = None):
    """m_u with 1/m_u = uᵀ Λ_v⁻¹ u (eq. 30), u = direction / |direction| (root axes): the mass
    felt at the frame point by a force along u. ``direction`` (3,) gives a float, (k, 3) an
    array; inf where the point cannot move along u."""
    ws = _configured(model, q, frame, None, offset, workspace, invert=False)
    return _effective(ws.Lambda_inv_full[:3, :3], _unit(direction, "direction"))


def effective_inertia(model: RobotModel, q: np.ndarray, frame: str, axis, *, offset=None,
                      workspace: OperationalSpace | None = None):
    """I_u with 1/I_u = uᵀ Λ_ω⁻¹ u (eq. 31): the rotational inertia felt about the axis u."""
    ws = _configured(model, q, frame, None, offset, workspace, invert=False)
    return _effective(ws.Lambda_inv_full[3:, 3:], _unit(axis, "axis"))


def _effective(block: np.ndarray, u: np.ndarray):
    x = np.einsum("...i,ij,...j->...", u, block, u)
    with np.errstate(divide="ignore"):
        out = np.where(x > 0.0, 1.0 / np.where(x > 0.0, x, 1.0), np.inf)
    return float(out) if out.ndim == 0 else out


def motion_force_selection(force_directions) -> tuple[np.ndarray, np.ndarray]:
    """(Ω, Ω̄) of §2.2, 6x6 projectors in task space [linear; angular]: Ω̄ onto the
    force-controlled directions (indices, e.g. [2] for z, or rows of a k x 6 matrix, made
    orthonormal), Ω = I − Ω̄ onto the motion-controlled ones. With
    F = Λ (Ω F*_motion + Ω̄ F*_force) + μ + p + F_sensor (eqs. 11–13) the end effector obeys
    Ω ϑ̇ = Ω F*_motion and Ω̄ ϑ̇ = Ω̄ F*_force (+ contact), eqs. (15), (16)."""
    if force_directions is None or (np.ndim(force_directions) == 1
                                    and len(force_directions) == 0):
        return np.eye(6), np.zeros((6, 6))
    D = _selection(force_directions)
    Q, R = np.linalg.qr(D.T)
    if np.abs(np.diag(R)).min() <= 1e-12 * np.abs(R).max():
        raise ValueError("force_directions are linearly dependent")
    Omega_bar = Q @ Q.T
    return np.eye(6) - Omega_bar, Omega_bar


# ---------------------------------------------------------------------- §4.4 belted ellipsoid
@dataclass
class BeltedEllipsoid:
    """Surface points of the belted ellipsoid and of the ordinary ellipsoid vᵀ Λ⁻¹ v = 1.

    ``directions`` (n+1, 2n+1, 3): unit vectors u on a latitude/longitude grid;
    ``ellipsoid``: v = u / sqrt(uᵀ Λ⁻¹ u) (radius √m_u: square roots of the effective mass,
    Fig. 4); ``belted``: w = |v| v = m_u u (radius m_u itself, §4.4, eq. 34). Grids of shape
    (rows, cols, 3) suit matplotlib's ``plot_surface(*grid.T)`` (or ``grid[..., 0]``, …);
    ``triangles(which)`` gives (T, 3, 3) vertex lists for an RViz TRIANGLE_LIST marker.
    For a 2x2 block the grids are closed curves of shape (2n+1, 2)."""

    directions: np.ndarray
    ellipsoid: np.ndarray
    belted: np.ndarray
    radii: np.ndarray  # m_u on the grid (the belted radius)

    def triangles(self, which: str = "belted") -> np.ndarray:
        grid = {"belted": self.belted, "ellipsoid": self.ellipsoid}[which]
        return surface_triangles(grid)


def belted_ellipsoid(Lambda_inv_block, n: int = 24) -> BeltedEllipsoid:
    """The belted ellipsoid of a 3x3 (or 2x2) block of Λ⁻¹ — ``task_inertia_inverse(...).linear``
    for the effective mass, ``.angular`` for the effective inertia — and, for comparison, the
    ordinary ellipsoid vᵀ Λ⁻¹ v = 1, sampled on an (n+1) x (2n+1) latitude/longitude grid."""
    A = np.asarray(Lambda_inv_block, dtype=float)
    if A.shape not in ((3, 3), (2, 2)) or not np.isfinite(A).all():
        raise ValueError(f"Lambda_inv_block must be a finite 3x3 or 2x2 matrix, got {A.shape}")
    if n < 2:
        raise ValueError("n must be >= 2")
    A = 0.5 * (A + A.T)
    if A.shape == (2, 2):
        phi = np.linspace(0.0, 2.0 * np.pi, 2 * n + 1)
        u = np.stack([np.cos(phi), np.sin(phi)], axis=-1)
    else:
        theta = np.linspace(0.0, np.pi, n + 1)[:, None]
        phi = np.linspace(0.0, 2.0 * np.pi, 2 * n + 1)[None, :]
        u = np.stack(np.broadcast_arrays(np.sin(theta) * np.cos(phi),
                                         np.sin(theta) * np.sin(phi),
                                         np.cos(theta) + 0.0 * phi), axis=-1)
    x = np.einsum("...i,ij,...j->...", u, A, u)  # uᵀ Λ⁻¹ u = 1 / m_u
    if not (x > 0.0).all():
        raise ValueError("the Λ⁻¹ block is singular: the effective mass (inertia) is infinite "
                         "along some direction and the ellipsoid is unbounded")
    m_u = 1.0 / x
    ellipsoid = u * np.sqrt(m_u)[..., None]
    belted = u * m_u[..., None]
    return BeltedEllipsoid(directions=u, ellipsoid=ellipsoid, belted=belted, radii=m_u)


def surface_triangles(grid: np.ndarray) -> np.ndarray:
    """(T, 3, 3) triangles of an (r, c, 3) surface grid: two per grid cell, degenerate ones
    (at the poles) dropped. ``triangles.reshape(-1, 3)`` is the point list of an RViz
    ``visualization_msgs/Marker.TRIANGLE_LIST``."""
    g = np.asarray(grid, dtype=float)
    if g.ndim != 3 or g.shape[2] != 3:
        raise ValueError(f"grid must have shape (rows, cols, 3), got {g.shape}")
    a, b = g[:-1, :-1], g[1:, :-1]
    c, d = g[1:, 1:], g[:-1, 1:]
    tri = np.concatenate([np.stack([a, b, c], axis=-2).reshape(-1, 3, 3),
                          np.stack([a, c, d], axis=-2).reshape(-1, 3, 3)])
    area = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    scale = np.abs(g).max() if g.size else 1.0
    return tri[area > 1e-12 * scale * scale]


# ====================================================================== under-actuated
def generalized_task_inertia(model: RobotModel, q: np.ndarray, frame: str, rows=None, *,
                             offset=None, workspace: OperationalSpace | None = None
                             ) -> np.ndarray:
    """Λ_G = (J_G S_aa⁻¹ J_Gᵀ)⁻¹ (k x k): the task inertia **seen by the motors** of an
    under-actuated arm whose passive joints move freely (``model.passive_joints``).

    Meaning: with active-joint forces T_a = J_Gᵀ F (J_G: ``generalized_jacobian``, S_aa:
    ``underactuated_mass_matrix``) and the passive joints free, the frame accelerates as
    a = Λ_G⁻¹ F + a_free (a_free: with T_a = 0), so F = Λ_G a* + μ_G + p_G
    (``generalized_task_bias``) gives a = a*. Computed in O(N) as
    Λ_G⁻¹ = Λ⁻¹ − J_p M_pp⁻¹ J_pᵀ (block inverse of A; the second term is the same Ω recursion
    with the active joints locked); with no passive joint Λ_G = Λ.

    Effective mass through the motors, 1/m_G,u = uᵀ (Λ_G⁻¹)_vv u: it is never below the
    mechanism's own m_u (eq. 30), and it can only grow or stay when one more joint goes
    passive. Proof: wᵀ Λ_G⁻¹ w = max_x [2 wᵀ J x − xᵀ A x] over the joint accelerations x
    that load no passive joint, (A x)_p = 0 (x = A⁻¹ [τ_a; 0]; the maximum is at
    τ_a = J_Gᵀ w, using (A⁻¹)_aa = S_aa⁻¹ and (A⁻¹ Jᵀ)_a = S_aa⁻¹ J_Gᵀ). One more passive
    joint adds a constraint, the maximum cannot grow, so Λ_G⁻¹ shrinks (Loewner order) and
    every m_G,u grows or stays (measured in test_operational_space.py). The mechanism's own
    Λ (a force from outside, every joint free) does not depend on which joints have motors.

    Limits: the task dimension k must be <= n_active, and Λ_G⁻¹ is singular when the passive
    joints can absorb a task direction (e.g. a passive joint whose axis the task needs, or a
    passive wrist that lets the hand spin freely): ``SingularTaskError`` names the direction.
    A holds only while the passive joints stay free (not at a limit, no large friction)."""
    ws = _configured(model, q, frame, rows, offset, workspace, invert=False)
    return ws.generalized().Lambda


def generalized_task_inertia_inverse(model: RobotModel, q: np.ndarray, frame: str, rows=None,
                                     *, offset=None, workspace: OperationalSpace | None = None
                                     ) -> TaskInertiaInverse:
    """Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ with the blocks of eq. (33) (always defined; singular when the
    motors cannot accelerate the frame along some direction)."""
    ws = _configured(model, q, frame, None, offset, workspace, invert=False)
    full = ws.Lambda_inv_full - ws.masked_inverse(model.passive_joint_mask)
    full = 0.5 * (full + full.T)
    S = _selection(rows)
    return _inverse_blocks(full, S @ full @ S.T)


def generalized_dynamically_consistent_inverse(model: RobotModel, q: np.ndarray, frame: str,
                                               rows=None, *, offset=None,
                                               workspace: OperationalSpace | None = None
                                               ) -> np.ndarray:
    """J̄_G = S_aa⁻¹ J_Gᵀ Λ_G (n_active x k): the dynamically consistent inverse of J_G over the
    active joints: J_G J̄_G = I, and active torques [I − J_Gᵀ J̄_Gᵀ] Γ_a0 cause no task
    acceleration while the passive joints move freely. S_aa⁻¹ J_Gᵀ is read off the six
    unit-wrench passes (rows of A⁻¹ Jᵀ at the active DOF); no S_aa or J_G is formed."""
    ws = _configured(model, q, frame, rows, offset, workspace, invert=False)
    return ws.generalized().Jbar


def generalized_task_bias(model: RobotModel, q: np.ndarray, v: np.ndarray, frame: str,
                          tau_passive: np.ndarray | None = None, rows=None, *, offset=None,
                          workspace: OperationalSpace | None = None,
                          f_ext: Mapping[str, np.ndarray] | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(μ_G, p_G): F = Λ_G a* + μ_G + p_G and T_a = J_Gᵀ F give the frame acceleration a*
    with the passive joints free under their forces ``tau_passive`` (μ_G holds the velocity and
    T_p terms, p_G gravity): μ_G + p_G = −Λ_G a_free, a_free the frame's acceleration with
    T_a = 0. Two articulated-body passes. ``f_ext``: external wrenches acting meanwhile (E.4)."""
    ws = _configured(model, q, frame, rows, offset, workspace, invert=False)
    res = ws.generalized(tau_passive=tau_passive, v=v, f_ext=f_ext)
    return res.mu, res.p


def generalized_effective_mass(model: RobotModel, q: np.ndarray, frame: str, direction, *,
                               offset=None, workspace: OperationalSpace | None = None):
    """1/m_G,u = uᵀ (Λ_G⁻¹)_vv u: the mass the motors feel when they push the frame point along
    u with the passive joints free (inf when the passive joints absorb u). >= effective_mass."""
    inv = generalized_task_inertia_inverse(model, q, frame, offset=offset, workspace=workspace)
    return _effective(inv.linear, _unit(direction, "direction"))


# ====================================================================== §5 macro/mini
@dataclass
class MacroMiniInertia:
    """Combined and mini-only task inertias (Khatib §5.2; rows S of the task)."""

    combined_inverse: np.ndarray  # Λ₀⁻¹ = J A⁻¹ Jᵀ (whole mechanism)
    mini_inverse: np.ndarray  # Λ_m⁻¹ = J_m A₂₂⁻¹ J_mᵀ (mini alone, macro locked: Lemma 1)
    coupling_inverse: np.ndarray  # Λ̄_C = Λ₀⁻¹ − Λ_m⁻¹ ⪰ 0, eqs. (41), (42)
    combined: np.ndarray | None  # Λ₀ (None if singular)
    mini: np.ndarray | None  # Λ_m (None if the mini cannot span the task: eq. 35 fails)
    mini_joints: tuple[str, ...]

    def effective(self, direction) -> tuple:
        """(combined, mini) σ_w = 1 / (wᵀ Λ⁻¹ w) along the task-space direction(s) w (k,) or
        (n, k): Theorem 2 says combined <= mini."""
        w = np.asarray(direction, dtype=float)
        w = w / np.linalg.norm(w, axis=-1, keepdims=True)
        out = []
        for inv in (self.combined_inverse, self.mini_inverse):
            x = np.einsum("...i,ij,...j->...", w, inv, w)
            with np.errstate(divide="ignore"):
                out.append(np.where(x > 0, 1.0 / np.where(x > 0, x, 1.0), np.inf))
        return tuple(o if o.ndim else float(o) for o in out)


def _joint_mask(model: RobotModel, names, what: str) -> np.ndarray:
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ValueError(f"{what}: give at least one joint")
    mask = np.zeros(model.nb, bool)
    for n in names:
        mask[model.joint_index(n)] = True
    return mask


def macro_mini_inertia(model: RobotModel, q: np.ndarray, frame: str, mini_joints, rows=None, *,
                       offset=None, workspace: OperationalSpace | None = None
                       ) -> MacroMiniInertia:
    """Macro/mini split (§5): ``mini_joints`` (names) form the mini-manipulator, every other
    joint the macro. Λ_m⁻¹ is the same O(N) recursion with the macro joints locked (the mini's
    own mass matrix is A₂₂, Lemma 1). Theorem 2: Λ̄_C = Λ₀⁻¹ − Λ_m⁻¹ ⪰ 0, so the combined
    effective mass/inertia along any direction is at most the mini's (Corollary 1, eq. 52)."""
    mask = _joint_mask(model, mini_joints, "mini_joints")
    ws = _configured(model, q, frame, rows, offset, workspace, invert=False)
    comb = ws.Lambda_inv.copy()
    mini = ws.masked_inverse(mask)
    tol = ws.singular_tolerance
    return MacroMiniInertia(combined_inverse=comb, mini_inverse=mini,
                            coupling_inverse=comb - mini, combined=_scaled_inverse(comb, tol),
                            mini=_scaled_inverse(mini, tol),
                            mini_joints=tuple(n for n, b in zip(model.joint_names, mask) if b))


@dataclass
class DextrousTorque:
    gradient: np.ndarray  # Γ_Dextrous = −∇V_Dextrous (nv), eq. (54)
    projected: np.ndarray  # Γ_nd = [I − Jᵀ J̄ᵀ] Γ_Dextrous (nv), eq. (55)
    potential: float  # V_Dextrous, eq. (53)


def dextrous_coordination_torque(model: RobotModel, q: np.ndarray, frame: str, mini_joints,
                                 gain: float, rows=None, *, midrange=None, offset=None,
                                 workspace: OperationalSpace | None = None) -> DextrousTorque:
    """Dextrous dynamic coordination (§5.3): V = k_d Σ_mini (q_i − (q̄_i + q_i)/2)² (53),
    Γ = −∇V (54), projected into the dynamically consistent null space (55) so that it pulls
    the mini joints toward mid-range without accelerating the task (one O(N) pass).
    ``midrange``: per mini joint (default: the middle of its URDF limits)."""
    mask = _joint_mask(model, mini_joints, "mini_joints")
    if not (np.isfinite(gain) and gain >= 0):
        raise ValueError("gain must be finite and >= 0")
    dofs = np.concatenate([model.joint_dofs(n) for n, b in zip(model.joint_names, mask) if b])
    if (model.hinge_type[mask] == FLOATING).any():
        raise ValueError("mini_joints: floating joints have no mid-range")
    if midrange is None:
        lo, hi = model.position_lower[dofs], model.position_upper[dofs]
        bad = [model.dof_names[d] for d, a, b in zip(dofs, lo, hi)
               if not (np.isfinite(a) and np.isfinite(b))]
        if bad:
            raise ValueError(f"mini joints without finite position limits: {bad}; "
                             "give midrange=")
        mid = 0.5 * (lo + hi)
    else:
        mid = np.asarray(midrange, dtype=float)
        if mid.shape != dofs.shape:
            raise ValueError(f"midrange must have {dofs.size} entries (the mini joints)")
    ws = _configured(model, q, frame, rows, offset, workspace)
    qv = np.asarray(q, dtype=float)
    qi = qv[model.q_start[mask]]
    grad = np.zeros(model.nv)
    grad[dofs] = -2.0 * gain * (qi - mid)  # −∇V, eq. (54)
    projected = ws.null_space_torque(grad).copy()  # eq. (55)
    return DextrousTorque(gradient=grad, projected=projected,
                          potential=float(gain * np.sum((qi - mid) ** 2)))


# ====================================================================== §6–7 multi-arm
def load_inertia(mass: float, inertia_com, com_offset) -> np.ndarray:
    """Λ_L(0) of a rigid load at the operational point, eq. (59): [[m I, −m r̂], [−m r̂ᵀ,
    I_C + m r̂ᵀ r̂]] with r the vector from the operational point to the centre of mass and
    I_C the inertia about the centre of mass (same axes as r)."""
    r = np.asarray(com_offset, dtype=float)
    Ic = np.asarray(inertia_com, dtype=float)
    if not (mass > 0) or r.shape != (3,) or Ic.shape != (3, 3):
        raise ValueError("load: mass > 0, inertia_com (3, 3) and com_offset (3,) needed")
    rx = skew(r)
    out = np.zeros((6, 6))
    out[:3, :3] = mass * np.eye(3)
    out[:3, 3:] = -mass * rx
    out[3:, :3] = -mass * rx.T
    out[3:, 3:] = Ic + mass * rx.T @ rx
    return out


def load_bias(mass: float, inertia_com, com_offset, omega, gravity) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """(μ_L, p_L) of the load at the operational point (Newton–Euler at the centre of mass moved
    to the point): μ_L = [m ω×(ω×r); ω×I_C ω + m r×(ω×(ω×r))], p_L = −[m g; r × m g]."""
    r = np.asarray(com_offset, dtype=float)
    Ic = np.asarray(inertia_com, dtype=float)
    w = np.asarray(omega, dtype=float)
    g = np.asarray(gravity, dtype=float)
    cen = mass * np.cross(w, np.cross(w, r))
    mu = np.concatenate([cen, np.cross(w, Ic @ w) + np.cross(r, cen)])
    p = -np.concatenate([mass * g, np.cross(r, mass * g)])
    return mu, p


@dataclass
class GraspingArm:
    """One arm rigidly holding the object: its model, state, the grasping frame and the
    operational point ``offset`` in that frame's axes; the arm's root placement in the world
    (``base_rotation`` maps root axes to world axes). The model's gravity must be the world's
    gravity in its root axes."""

    model: RobotModel
    q: np.ndarray
    frame: str
    offset: np.ndarray | None = None
    base_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    base_position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    v: np.ndarray | None = None


@dataclass
class Load:
    """The object: mass, inertia about its centre of mass and the centre of mass (world)."""

    mass: float
    inertia_com: np.ndarray
    com: np.ndarray


@dataclass
class AugmentedObject:
    """Λ⊕ = Λ_L + Σ Λ_i (eq. 63/71) and, with velocities, μ⊕ and p⊕ (eqs. 65, 66), at the
    operational point, world axes; per arm: Λ_i, J_i (world, at the point), μ_i, p_i."""

    point: np.ndarray
    Lambda: np.ndarray
    Lambda_load: np.ndarray
    Lambda_arms: list[np.ndarray]
    jacobians: list[np.ndarray]
    arms: list[GraspingArm]
    mu: np.ndarray | None = None
    p: np.ndarray | None = None
    mu_load: np.ndarray | None = None
    p_load: np.ndarray | None = None
    mu_arms: list[np.ndarray] | None = None
    p_arms: list[np.ndarray] | None = None

    def distribute(self, f_star: np.ndarray, load_shares=None) -> list[np.ndarray]:
        """Per-arm operational forces F_i with Σ F_i = F⊕ = Λ⊕ F* + μ⊕ + p⊕ (eqs. 64, 67, 68):
        each arm gives what its own effector needs, Λ_i F* + μ_i + p_i, plus its share s_i of
        the load's, s_i (Λ_L F* + μ_L + p_L) (default equal shares). Any split with the same
        sum moves the object alike; this one loads no arm with another arm's inertia."""
        n = len(self.arms)
        s = np.full(n, 1.0 / n) if load_shares is None else np.asarray(load_shares, float)
        if s.shape != (n,) or not np.isclose(s.sum(), 1.0):
            raise ValueError(f"load_shares: {n} numbers summing to 1")
        f_star = np.asarray(f_star, dtype=float)
        load = self.Lambda_load @ f_star
        if self.mu is not None:
            load = load + self.mu_load + self.p_load
        out = []
        for i in range(n):
            F = self.Lambda_arms[i] @ f_star + s[i] * load
            if self.mu is not None:
                F = F + self.mu_arms[i] + self.p_arms[i]
            out.append(F)
        return out

    def reflected_inertia(self, i: int) -> np.ndarray:
        """A₊ᵢ = A_i + J_iᵀ (Λ⊕ − Λ_i) J_i (eq. 74): arm i's joint-space inertia with the object
        and the other arms as a load at its effector (Lemma 4). Dense (n_i x n_i)."""
        from .dynamics import mass_matrix

        arm, J = self.arms[i], self.jacobians[i]
        A = mass_matrix(arm.model, arm.q)
        return A + J.T @ (self.Lambda - self.Lambda_arms[i]) @ J

    def consistent_inverse(self, i: int) -> np.ndarray:
        """J̄ᵢ = A₊ᵢ⁻¹ J_iᵀ [J_i A₊ᵢ⁻¹ J_iᵀ]⁻¹ (eq. 75, Theorem 4), dense. It equals arm i's own
        J̄ = A_i⁻¹ J_iᵀ Λ_i (push-through identity: J_i A₊ᵢ⁻¹ J_iᵀ = Λ⊕⁻¹ and
        A₊ᵢ⁻¹ J_iᵀ = A_i⁻¹ J_iᵀ Λ_i Λ⊕⁻¹): a load at the effector leaves the dynamically
        consistent null space unchanged (tested)."""
        J = self.jacobians[i]
        AJ = np.linalg.solve(self.reflected_inertia(i), J.T)
        return AJ @ np.linalg.inv(J @ AJ)

    def arm_torques(self, forces: Sequence[np.ndarray], torques0=None) -> list[np.ndarray]:
        """Γ_i = J_iᵀ F_i + [I − J_iᵀ J̄ᵢᵀ] Γ_i0 (eq. 76) for every arm (Γ_i0 default zero)."""
        out = []
        for i, F in enumerate(forces):
            J = self.jacobians[i]
            tau = J.T @ np.asarray(F, dtype=float)
            if torques0 is not None and torques0[i] is not None:
                t0 = np.asarray(torques0[i], dtype=float)
                tau = tau + t0 - J.T @ (self.consistent_inverse(i).T @ t0)
            out.append(tau)
        return out


def augmented_object(arms: Sequence[GraspingArm], load: Load | None = None, *,
                     tolerance: float = 1e-6) -> AugmentedObject:
    """The augmented object (Theorem 3, eqs. 63–66, 71): N arms rigidly holding one object at
    a common operational point (each arm's frame point, placed in the world by its base pose;
    they must coincide within ``tolerance`` [m]). Λ_i = Λ of arm i at that point (O(N) each;
    each must be invertible: 6 task directions), rotated into world axes; Λ_L from eq. (59).
    With every arm's ``v`` given, also μ⊕ and p⊕ (velocity of the object from the first arm)."""
    if not arms:
        raise ValueError("augmented_object: give at least one arm")
    points, Lams, Js, mus, ps = [], [], [], [], []
    omega = None
    for arm in arms:
        R = np.asarray(arm.base_rotation, dtype=float)
        if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9):
            raise ValueError("base_rotation must be a rotation matrix")
        ws = _configured(arm.model, arm.q, arm.frame, None, arm.offset, None)
        points.append(R @ ws.point + np.asarray(arm.base_position, dtype=float))
        T = np.zeros((6, 6))
        T[:3, :3] = T[3:, 3:] = R
        Lams.append(T @ ws.Lambda @ T.T)
        Js.append(T @ ws.J)
        if arm.v is not None:
            mu, p = ws.bias(arm.v)
            mus.append(T @ mu)
            ps.append(T @ p)
            if omega is None:
                omega = Js[-1][3:] @ np.asarray(arm.v, dtype=float)
    point = points[0]
    spread = max(np.linalg.norm(x - point) for x in points)
    if spread > tolerance:
        raise ValueError(f"the arms' operational points are {spread:.3g} m apart: a rigid grasp "
                         "needs one common point (set each arm's offset)")
    if load is None:
        Lam_L = np.zeros((6, 6))
        r = np.zeros(3)
    else:
        r = np.asarray(load.com, dtype=float) - point
        Lam_L = load_inertia(load.mass, load.inertia_com, r)
    res = AugmentedObject(point=point, Lambda=Lam_L + sum(Lams), Lambda_load=Lam_L,
                          Lambda_arms=Lams, jacobians=Js, arms=list(arms))
    if len(mus) == len(arms):
        R0 = np.asarray(arms[0].base_rotation, dtype=float)
        g = R0 @ arms[0].model.gravity
        if load is None:
            mu_L, p_L = np.zeros(6), np.zeros(6)
        else:
            mu_L, p_L = load_bias(load.mass, load.inertia_com, r, omega, g)
        res.mu_load, res.p_load, res.mu_arms, res.p_arms = mu_L, p_L, mus, ps
        res.mu = mu_L + sum(mus)  # (65)
        res.p = p_L + sum(ps)  # (66)
    return res
