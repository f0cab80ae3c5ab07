"""End-effector tracking through the generalized Jacobian (paper §6.2) and space-robot mode (§7).

Each cycle:
1. J_G, J_D and their drifts from the hybrid recursion (``JacobianWorkspace``);
2. a desired frame acceleration from the reference and PD feedback on pose and twist;
3. qdd_a solving  S J_G qdd_a = S (a_des - drift_G)  (6.10) by damped least squares (damping
   only near a singularity, flagged) and, with w_p > 0, the passive rows
   sqrt(w_p) J_D qdd_a = sqrt(w_p) (qdd_p,des - drift_D)  (6.12) either stacked with the task in
   one weighted solve as in (7.1) (``redundancy="stacked"``) or in the task's null space with
   their own damping (``"prioritized"``, the default: the frame task is never traded for
   passive stillness); w_p is relative (``passive_weight_scale``): prioritized, the damping
   of the rows J_D N_task is λ_s/sqrt(w_p) times their largest singular value, so w_p = 1
   gives them their full effect (a direction at σ_max 99 %, at 0.3 σ_max 90 %) whatever the
   scale of J_D (a heavy bus's is small); stacked, sqrt(w_p) J_D is scaled to the task rows'
   largest singular value; then null-space damping of the active joints' self-motion and, with
   k_0 > 0, a posture term: qdd_a += N (k_0 (q_a,0 - q_a) - d_0 v_a), N the projector left by
   the rows above (the self-motion is pulled back to the posture q_a,0 without touching them);
4. T_a and qdd_p from the hybrid recursion (section 5) with that qdd_a.
``passive_trust`` γ (per passive DOF, 1 by default) is how much the solve of step 3 counts on
the passive joints' reaction to the active ones: J_G = J_a + J_p J_D (6.10); with γ < 1 the
task rows use J_a + J_p Γ J_D (Γ = diag γ; 0: as if the passive joints did not react), while
drift_G keeps their own accelerations (gravity, their damping: the arm still follows a failed
joint's fall). The exact inversion (γ = 1) puts the task's error dynamics where the gains say
and leaves the rest to the zero dynamics, which behind a light damped passive joint are
unstable (the failure reaction's ``settle_failed`` measures that and lowers γ).
S selects the task rows (pose 6, position 3, orientation 3, pointing 2, planar 2:
x, y in root axes, for robots whose joint axes are all vertical); w_p > 0 asks the
passive joints (a free-flying base) to keep still (qdd_p,des = -kd_p v_p - kp_p (q_p - q_p,ref));
by default on every passive DOF whose column of S J moves the frame (holding a roll about the
tool's own axis would only ask the arm for the hand's roll inertia).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from ..buffers import float_array
from ..dynamics import GRAVITY, OK, SOLVE, _kernel_vector, int_views, run_steps
from ..jacobians import JacobianWorkspace, frame_task_kernel, frame_views
from ..model import FLOATING, RobotModel
from ..passive_forces import PassiveForceModel, dof_force
from ..so3 import (
    quaternion_to_matrix,
    rotation_error,  # re-exported: control.task_space.rotation_error
)
from ..spatial import jacobi_svd, rotation_error_log

if TYPE_CHECKING:
    from .limits import JointLimitGuard

__all__ = ["TaskReference", "TrackingResult", "EndEffectorTracker", "rotation_error",
           "TASKS", "POSITION_TASKS", "ORIENTATION_TASKS", "WEIGHT_SCALES"]

TASKS = ("pose", "position", "orientation", "pointing", "planar")
POSITION_TASKS = ("pose", "position", "planar")  # the tasks with rows of the frame's position
ORIENTATION_TASKS = ("pose", "orientation", "pointing")  # ... and of its orientation
WEIGHT_SCALES = ("relative", "absolute")  # passive_weight_scale
# S of the tasks whose rows do not depend on the pose (planar: x, y of the frame origin in root
# axes, for robots whose joint axes are all vertical)
_FIXED_ROWS = {"pose": np.eye(6), "position": np.eye(6)[:3].copy(),
               "planar": np.eye(6)[:2].copy(), "orientation": np.eye(6)[3:].copy()}
_UNSEEN = 1e-9  # a passive DOF's task column below this (relative): it does not move the frame
_SATURABLE = 1e-3  # σ_min of the saturated joints' rows of N_task: below, they are not held


@dataclass
class TaskReference:
    """Desired frame motion in root axes (SI units); unset derivatives are zero."""

    position: np.ndarray
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    linear_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    linear_acceleration: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_acceleration: np.ndarray = field(default_factory=lambda: np.zeros(3))
    pointing_direction: np.ndarray | None = None  # for task="pointing" (unit vector)
    # s: the time this goal is for (its header.stamp, on the law's clock); 0: unstamped.
    # Stamped goals streamed at most STREAM_INTERVAL apart are followed as a path (limits.py)
    stamp: float = 0.0


# a TaskReference's motion packed in one buffer, as the compiled cycles take it (the setpoint
# follower's own, limits.py): position (3), rotation row by row (9), linear and angular
# velocity (3 + 3), linear and angular acceleration (3 + 3)
_P, _ROT, _V, _W, _A, _ALPHA = 0, 3, 12, 15, 18, 21
SETPOINT_SIZE = 24
_FIELDS = ("position", "rotation", "linear_velocity", "angular_velocity",
           "linear_acceleration", "angular_acceleration")


def packed_fields(state: np.ndarray) -> tuple[np.ndarray, ...]:
    """The views of a packed reference ``state`` (``SETPOINT_SIZE``) in ``_FIELDS``' order."""
    return (state[_P:_ROT], state[_ROT:_V].reshape(3, 3), state[_V:_W], state[_W:_A],
            state[_A:_ALPHA], state[_ALPHA:])


@njit(cache=True, inline="always", error_model="numpy")
def packed_rotation(state, rotation):
    """A packed reference's rotation (``packed_fields``) into the 3x3 ``rotation``, in
    compiled code."""
    for i in range(9):
        rotation[i // 3, i % 3] = state[_ROT + i]


def pack_reference(ref: TaskReference, fields: tuple[np.ndarray, ...]) -> None:
    """``ref``'s motion into the views ``packed_fields`` gave; a field of another shape is
    named (ValueError)."""
    for name, view in zip(_FIELDS, fields):
        value = float_array(getattr(ref, name))
        if value.shape != view.shape:
            kind = "a 3-vector" if view.ndim == 1 else "a 3x3 matrix"
            raise ValueError(f"the reference's {name} must be {kind}, got shape {value.shape}")
        view[:] = value


@dataclass
class TrackingResult:
    qdd_active: np.ndarray
    tau_active: np.ndarray
    qdd_passive: np.ndarray
    qdd: np.ndarray
    frame_acceleration_desired: np.ndarray  # (6,) [linear; angular]
    position_error: np.ndarray  # (3,) m
    orientation_error: np.ndarray  # (3,) rad, rotation vector
    singular: bool  # the task cannot be met exactly: S J_G lost row rank (σ_m < threshold)
    sigma_min: float  # σ_m of S J_G (m task rows; 0 when there are fewer actuators than rows)
    damping: float  # lambda used by the damped least squares
    # (n_active,) the joint velocity the task's PD pulls toward, v_a = (S J_G)^+ S (v_ref +
    # (kp/kd) e) through the same damped inverse: the sign of the friction compensation
    intended_velocity: np.ndarray | None = None
    tau_passive: np.ndarray | None = None  # (n_passive,) the passive forces it was solved with
    position_error_norm: float = 0.0  # |position_error| m
    orientation_error_norm: float = 0.0  # |orientation_error| rad
    # max over the active joints of |intended_velocity| / URDF velocity limit (0 without one)
    intended_speed_ratio: float = 0.0
    # (S, J_G): the task's rows (k, 6) and the J_G (6, n_active) it was solved with (6.10)
    task_rows: tuple[np.ndarray, np.ndarray] | None = None


class EndEffectorTracker:
    """Tracks a frame's pose/position/orientation/pointing through J_G (section 6.2).

    Gains are per unit: ``kp_position`` [1/s²], ``kd_position`` [1/s], likewise for orientation.
    ``singular_threshold`` ε on the smallest singular value of the task matrix S J_G and
    ``max_damping`` λ_max: λ² = λ_max² (1 - (σ_min/ε)²) below ε, 0 above (exact solution away
    from singularities). ``passive_weight`` w_p ≥ 0 weights the rows (7.1) that ask the passive
    joints to keep still, ``redundancy`` says how they combine with the task and
    ``secondary_damping`` λ_s is their damping in the prioritized scheme, in units of their
    largest singular value over sqrt(w_p) (``passive_weight_scale="relative"``, 1 = full
    effect) or absolute (``"absolute"``: the rows sqrt(w_p) J_D against λ_s as they are);
    ``passive_rows_guard``: with it, the prioritized passive rows keep the command within
    its bounds where the task's alone does (the task keeps its priority at the joints' speed
    and position limits): a joint they would take past a bound is held at it and the rows
    solved again with the others, their step scaled down only where that is not enough;
    ``null_space_damping`` [1/s] damps self-motion of redundant arms, ``posture_kp`` [1/s²]
    pulls it toward ``posture`` (the active joints' positions; ``set_posture``).
    """

    def __init__(self, model: RobotModel, frame: str, task: str = "pose",
                 kp_position: float = 100.0, kd_position: float = 20.0,
                 kp_orientation: float = 100.0, kd_orientation: float = 20.0,
                 singular_threshold: float = 1e-2, max_damping: float = 5e-2,
                 passive_weight: float = 0.0, passive_kp: float = 0.0, passive_kd: float = 0.0,
                 null_space_damping: float = 5.0, pointing_axis=(0.0, 0.0, 1.0),
                 passive_forces: PassiveForceModel | None = None,
                 passive_reference: np.ndarray | None = None,
                 redundancy: str = "prioritized", secondary_damping: float = 0.1,
                 workspace: JacobianWorkspace | None = None,
                 joint_limit_guard: JointLimitGuard | None = None,
                 held_passive_dofs: Sequence[str] | None = None,
                 posture_kp: float = 0.0, passive_weight_scale: str = "relative",
                 passive_rows_guard: JointLimitGuard | None = None) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        if passive_weight_scale not in WEIGHT_SCALES:
            raise ValueError(f"passive_weight_scale must be one of {WEIGHT_SCALES}, got "
                             f"{passive_weight_scale!r}")
        if redundancy not in ("prioritized", "stacked"):
            raise ValueError(f"redundancy must be 'prioritized' or 'stacked', got {redundancy!r}")
        model.frame(frame)  # ValueError naming an unknown frame
        if model.n_active == 0:
            raise ValueError("every joint is passive: no actuator to track a frame with")
        for name, value in (("kp_position", kp_position), ("kd_position", kd_position),
                            ("kp_orientation", kp_orientation),
                            ("kd_orientation", kd_orientation),
                            ("singular_threshold", singular_threshold),
                            ("max_damping", max_damping), ("passive_weight", passive_weight),
                            ("passive_kp", passive_kp), ("passive_kd", passive_kd),
                            ("null_space_damping", null_space_damping),
                            ("secondary_damping", secondary_damping),
                            ("posture_kp", posture_kp)):
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        self.model = model
        self.frame = frame
        self.task = task
        self.kp_position, self.kd_position = kp_position, kd_position
        self.kp_orientation, self.kd_orientation = kp_orientation, kd_orientation
        self.singular_threshold = singular_threshold
        self.max_damping = max_damping
        self.passive_weight = passive_weight
        self.passive_weight_scale = passive_weight_scale
        self.passive_kp, self.passive_kd = passive_kp, passive_kd
        self.null_space_damping = null_space_damping
        self.posture_kp = posture_kp
        self.posture: np.ndarray | None = None  # active 1-DOF joints' positions (set_posture)
        cols, q_index, col = [], [], 0  # their columns in qdd_a, their entries of q
        for k in range(model.nb):
            if not model.passive_joint_mask[k]:
                if model.hinge_type[k] != FLOATING:
                    cols.append(col)
                    q_index.append(model.q_start[k])
                col += int(model.nv_joint[k])
        self._posture_cols = np.array(cols, dtype=np.int64)
        self._posture_q = np.array(q_index, dtype=np.int64)
        self._no_posture = np.zeros(len(q_index))  # the kernel's posture argument when unset
        self._speed_limits = model.speed_limit[model.active_dofs]
        # writable, as the compiled cycle's (its topology's): one compiled version of the solve
        self._active_dofs = np.array(model.active_dofs, dtype=np.int64)
        self._gains = np.empty(4)  # kp, kd of position, then orientation (each cycle's)
        self._reference = np.empty(SETPOINT_SIZE)  # a reference packed (pack_reference)
        self._reference_fields = packed_fields(self._reference)
        self._N_task = np.empty((model.n_active, model.n_active))
        self._sizes = (model.n_active, model.n_passive)  # (the model's properties cost)
        self._cycle_key: tuple | None = None  # task_cycle_kernel's fixed arguments, by
        self._cycle_fixed: tuple | None = None  # (frame, workspace, force model)
        self.redundancy = redundancy
        self.secondary_damping = secondary_damping
        axis = np.asarray(pointing_axis, dtype=float)
        self.pointing_axis = axis / np.linalg.norm(axis)
        passive_names = [model.dof_names[i] for i in model.passive_dofs]
        held = passive_names if not held_passive_dofs else list(held_passive_dofs)
        unknown = [n for n in held if n not in passive_names]
        if unknown:
            raise ValueError(f"held passive DOF {unknown} are not passive DOF of the model "
                             f"({passive_names})")
        self.held_rows = np.array([passive_names.index(n) for n in held], dtype=np.int64)
        # every passive DOF by default: then those whose motion does not move the task frame
        # (their task rows of J are zero, e.g. a roll about the tool's own axis) are left free
        self.skip_unseen_passive = not held_passive_dofs
        self.base_reference: np.ndarray | None = None  # floating root pose for passive_kp
        self.passive_forces = passive_forces if passive_forces is not None else \
            PassiveForceModel(model)
        self.passive_reference = passive_reference
        self.workspace = workspace if workspace is not None else JacobianWorkspace(model)
        self.joint_limit_guard = joint_limit_guard
        self.passive_rows_guard = passive_rows_guard
        # 1-DOF passive joints can have a position reference; floating joints only damping
        self._passive_q_index = np.array(
            [model.q_start[k] for k in range(model.nb) if model.passive_joint_mask[k]
             and model.hinge_type[k] != FLOATING], dtype=np.int64)
        self.passive_trust: np.ndarray | None = None  # γ per passive DOF; None: all 1
        self._passive_1dof = np.concatenate(
            [np.zeros(model.nv_joint[k], bool) if model.hinge_type[k] == FLOATING else [True]
             for k in range(model.nb) if model.passive_joint_mask[k]] or [np.zeros(0, bool)])

    # ---------------------------------------------------------------------------------------
    def set_passive_reference(self, q: np.ndarray) -> None:
        """Latch the passive joints' reference (1-DOF positions and a floating root's pose)
        at the configuration ``q``, for ``passive_kp``."""
        q = np.asarray(q, dtype=float)
        self.passive_reference = q[self._passive_q_index].copy()
        root = 0 if self.model.hinge_type[0] == FLOATING and self.model.passive_joint_mask[0] \
            else None
        self.base_reference = None if root is None else q[:7].copy()

    def set_posture(self, q: np.ndarray) -> None:
        """Latch the posture the null space pulls toward at the configuration ``q``."""
        self.posture = np.asarray(q, dtype=float)[self._posture_q].copy()

    def _passive_target(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """qdd_p,des = -kd_p v_p - kp_p e_p (passive DOF order); for a floating root e_p is
        its pose error from ``base_reference`` in its own axes (its v is in those axes)."""
        m = self.model
        target = -self.passive_kd * v[m.passive_dofs]
        if self.passive_kp <= 0.0:
            return target
        if self._passive_q_index.size:
            q_ref = (q[self._passive_q_index] if self.passive_reference is None
                     else np.asarray(self.passive_reference, float))
            target[self._passive_1dof] -= self.passive_kp * (q[self._passive_q_index] - q_ref)
        if self.base_reference is not None:  # the floating root: passive DOF 0..5
            R = quaternion_to_matrix(q[3:7])
            R_ref = quaternion_to_matrix(self.base_reference[3:7])
            target[:3] += self.passive_kp * (R.T @ (self.base_reference[:3] - q[:3]))
            target[3:6] += self.passive_kp * (R.T @ rotation_error(R_ref, R))
        return target

    def _task_rows(self, R: np.ndarray) -> np.ndarray:
        """S: the task's rows of [linear; angular] (C-contiguous, k × 6)."""
        if self.task in _FIXED_ROWS:
            return _FIXED_ROWS[self.task]
        u = R @ self.pointing_axis  # pointing: angular accelerations perpendicular to the axis
        e1 = np.cross(u, [1.0, 0.0, 0.0])
        if np.linalg.norm(e1) < 0.1:
            e1 = np.cross(u, [0.0, 1.0, 0.0])
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(u, e1)
        rows = np.zeros((2, 6))
        rows[0, 3:], rows[1, 3:] = e1, e2
        return rows

    def step(self, q: np.ndarray, v: np.ndarray, ref: TaskReference,
             packed: np.ndarray | None = None) -> TrackingResult:
        """One control cycle: qdd_a, T_a and qdd_p for the state (q, v) and a reference.
        ``packed``: ``ref``'s motion packed (``SETPOINT_SIZE``, C-contiguous float64: a
        ``PoseSetpointFollower``'s ``state`` after its step), taken as it is; else packed
        here (a field of another shape named)."""
        m, ws = self.model, self.workspace
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        if packed is None:
            pack_reference(ref, self._reference_fields)
            packed = self._reference
        if self._in_one_call(q, v):
            res = self._step_in_one_call(q, v, packed)
            if res is not None:
                return res
        tau_p = self.passive_forces(q, v)
        # transforms, (4.6), placements, §6.1; the frame's pose and J; the drifts: one call
        J_G, J_D, p, R, J, drift_G, drift_D = ws.task_quantities(self.frame, q, v, tau_p)
        if self.passive_trust is not None:  # J_a + J_p Γ J_D = J_G - J_p (I - Γ) J_D (6.10)
            J_G = J_G - (J[:, m.passive_dofs] * (1.0 - self.passive_trust)) @ J_D

        if self.task == "pointing":  # e_rot: the axis's error; other tasks: in the kernel
            u = R @ self.pointing_axis
            d = self.pointing_axis if ref.pointing_direction is None else ref.pointing_direction
            d = np.asarray(d, float) / np.linalg.norm(d)
            e_rot = np.cross(u, d)
        else:
            e_rot = np.empty(3)
        S = self._task_rows(R)
        eps = self.singular_threshold
        rows = self.held_rows  # the held passive DOF: rows of J_D (6.12)
        if self.passive_weight > 0.0 and rows.size and self.skip_unseen_passive:
            SJ = S @ J
            seen = np.linalg.norm(SJ[:, m.passive_dofs[rows]], axis=0)
            rows = rows[seen > _UNSEEN * max(1.0, float(np.abs(SJ).max()))]
        held = self.passive_weight > 0.0 and m.n_passive and rows.size
        # the self-motion's damping and posture: in the kernel unless the passive rows come
        # first (their projector then replaces the task's)
        null_space = self.null_space_damping > 0.0 or self.posture_kp > 0.0
        posture, gains = self._posture_and_gains(q)
        # the errors, a_des, then S J_G qdd_a = S (a_des - drift_G) (6.10) by damped least
        # squares; with it, the velocity the PD drives the frame toward, v_ref + (kp/kd) e, as
        # the joint velocity that gives it (the joint law's v_ref + kp e / kd,
        # control/friction.py), through the same SVD of S J_G; the self-motion's term: one
        # compiled call
        e_pos, a_des, qdd_a = np.empty(3), np.empty(6), np.empty(m.n_active)
        X, N_task = np.empty((m.n_active, 2)), self._N_task
        task_sigma_min, lam, e_pos_norm, e_rot_norm, speed_ratio = task_solve_kernel(
            S, float_array(J), float_array(v), float_array(J_G), float_array(drift_G), p, R,
            packed, self.task == "pointing", gains,
            float(eps), float(self.max_damping), self._active_dofs,
            bool(null_space and not held),
            float(self.null_space_damping), float(self.posture_kp), self._posture_cols,
            float_array(posture), self._posture_q, float_array(q), self._speed_limits, e_pos,
            e_rot, a_des, X, N_task, qdd_a)
        x_task, intended = X[:, 0], X[:, 1]
        if S.shape[0] > m.n_active:  # more task rows than actuators: the rank falls short
            task_sigma_min = 0.0
        N = N_task
        if held:
            qdd_p_des = self._passive_target(q, v)[rows]
            J_Dh, drift_Dh = J_D[rows], drift_D[rows]
            w = np.sqrt(self.passive_weight)
            if self.redundancy == "stacked":  # (7.1): one weighted least-squares solve
                A, b = S @ J_G, S @ (a_des - drift_G)
                if self.passive_weight_scale == "relative":  # w 1: as strong as the task
                    w *= _ratio(_largest_singular_value(A), _largest_singular_value(J_Dh))
                qdd_a, N, _, lam = _damped_solve(np.vstack([A, w * J_Dh]),
                                                 np.concatenate([b, w * (qdd_p_des - drift_Dh)]),
                                                 eps, self.max_damping)
            else:  # passive rows in the null space of the task, always damped
                b2 = qdd_p_des - drift_Dh - J_Dh @ x_task
                x2, N2 = self._passive_rows_solve(J_Dh @ N_task, b2, w)
                secondary = N_task @ x2
                N = N_task @ N2
                if self.passive_rows_guard is not None:  # the task first at the joints' bounds
                    lo, hi = self.passive_rows_guard.bounds(q, v)
                    if _share_within(x_task, secondary, lo, hi) < 1.0:
                        if self.passive_weight_scale == "relative":
                            secondary, N = self._rows_with_bound_joints_saturated(
                                J_Dh, b2, x_task, secondary, N, lo, hi, w)
                        secondary *= _share_within(x_task, secondary, lo, hi)
                qdd_a = x_task + secondary
            if null_space:  # the self-motion's term through the rows' projector
                qdd_a = np.array(qdd_a, dtype=float)
                self_motion_kernel(float_array(N), float_array(v), self._active_dofs,
                                   float(self.null_space_damping), float(self.posture_kp),
                                   self._posture_cols, float_array(posture), self._posture_q,
                                   float_array(q), qdd_a)
        if self.joint_limit_guard is not None:  # brake before the URDF position limits
            qdd_a = self.joint_limit_guard.clamp(q, v, qdd_a)
        res = ws.dynamics.solve(qdd_a, tau_p)
        return TrackingResult(
            qdd_active=qdd_a, tau_active=res.tau_active.copy(),
            qdd_passive=res.qdd_passive.copy(), qdd=res.qdd.copy(),
            frame_acceleration_desired=a_des, position_error=e_pos, orientation_error=e_rot,
            singular=bool(task_sigma_min < eps), sigma_min=task_sigma_min, damping=lam,
            intended_velocity=intended, tau_passive=tau_p, position_error_norm=e_pos_norm,
            orientation_error_norm=e_rot_norm, intended_speed_ratio=speed_ratio,
            task_rows=(S, J_G))

    def _passive_rows_solve(self, rows: np.ndarray, b: np.ndarray, w: float
                            ) -> tuple[np.ndarray, np.ndarray]:
        """The prioritized passive rows' damped solve (7.1) of ``rows`` (J_D's held rows
        times a null-space projector) for ``b`` at sqrt(w_p) = ``w``: (x, its projector)."""
        if self.passive_weight_scale == "relative":  # damping relative to σ_max
            x, N, _, _ = _damped_solve(rows, b, self.singular_threshold, self.max_damping / w,
                                       self.secondary_damping / w, relative=True)
        else:  # the rows' own scale against the absolute damping (before item 3)
            x, N, _, _ = _damped_solve(w * rows, w * b, self.singular_threshold,
                                       self.max_damping, self.secondary_damping)
        return x, N

    def _rows_with_bound_joints_saturated(
            self, J_Dh: np.ndarray, b2: np.ndarray, x_task: np.ndarray, secondary: np.ndarray,
            N: np.ndarray, lo: np.ndarray, hi: np.ndarray, w: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """The prioritized passive rows solved again with the joints their step pushes past the
        command's bounds held at those bounds (a joint the task's own accelerations already
        take past one: at the task's), the other joints making up the rest within the task's
        null space (the saturation in the null space of Flacco, De Luca & Khatib 2015, for
        the second priority; ``limits.keep_task_rows`` is its twin for the task's own rows,
        one level, which keeps no passive rows). Each joint saturated once, while the task's
        null space can hold the saturated joints apart (their rows of it of rank their
        number); returns (the rows' step, the projector the self-motion then takes). Scaling
        the whole step instead (``_share_within``) let one wrist at its position limit
        switch a free-flyer's attitude rows off for seconds. Relative weights only: the
        absolute scale (the old one) keeps its step scaled whole, as before."""
        N_task = self._N_task
        n = x_task.shape[0]
        saturated = np.zeros(n, dtype=bool)
        held = np.zeros(n)  # the saturated joints' share of the step: to their bound
        for _ in range(n - 1):
            target = x_task + secondary
            past = ~saturated & (((target > hi) & (secondary > 0.0))
                                 | ((target < lo) & (secondary < 0.0)))
            if not past.any():
                break
            C = N_task[saturated | past]  # the saturated joints' rows of the task's null space
            if np.linalg.svd(C, compute_uv=False)[-1] < _SATURABLE:
                break  # the null space cannot hold these joints apart: the step scaled instead
            up = past & (target > hi)
            held[up] = np.maximum(hi[up] - x_task[up], 0.0)
            down = past & (target < lo)
            held[down] = np.minimum(lo[down] - x_task[down], 0.0)
            saturated |= past
            C_pinv = np.linalg.pinv(C)
            fixed = N_task @ (C_pinv @ held[saturated])  # their share, in the null space
            N_free = N_task @ (np.eye(n) - C_pinv @ C)  # the rest: the saturated joints still
            x2, N2 = self._passive_rows_solve(J_Dh @ N_free, b2 - J_Dh @ fixed, w)
            secondary, N = fixed + N_free @ x2, N_free @ N2
            secondary[saturated] = held[saturated]  # exactly: round-off would stop the share
        return secondary, N

    def _posture_and_gains(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The posture the self-motion is pulled toward (latched at ``q`` the first time
        ``posture_kp`` > 0 needs one) and this cycle's gains (kp, kd of position, then
        orientation), as the solve's kernel takes them."""
        if self.posture_kp > 0.0 and self.posture is None:
            self.set_posture(q)
        gains = self._gains
        gains[0], gains[1] = self.kp_position, self.kd_position
        gains[2], gains[3] = self.kp_orientation, self.kd_orientation
        return (self.posture if self.posture is not None else self._no_posture), gains

    def _in_one_call(self, q: np.ndarray, v: np.ndarray) -> bool:
        """Whether this cycle is ``task_cycle_kernel``'s: the task solved alone (no held
        passive rows, no pointing axis, every γ 1, no guard in the law), the URDF's passive
        force model, a frame on a body, and a state the kernel takes as it is (else the
        steps below, which convert it or name what is wrong with it)."""
        m = self.model
        return (self.task != "pointing" and self.passive_trust is None
                and self.joint_limit_guard is None
                and not (self.passive_weight > 0.0 and self._sizes[1] and self.held_rows.size)
                and self.passive_forces.__class__ is PassiveForceModel
                and _kernel_vector(q) and q.shape[0] == m.nq
                and _kernel_vector(v) and v.shape[0] == m.nv)

    def _cycle_arguments(self) -> tuple | None:
        """``task_cycle_kernel``'s fixed arguments, those before q (the workspaces' buffers,
        the force model's and the frame's arrays, the posture's columns, the speed limits;
        kept while frame, workspace and force model are)."""
        key = self._cycle_key
        if key is not None and key[0] is self.frame and key[1] is self.workspace \
                and key[2] is self.passive_forces:
            return self._cycle_fixed
        key = (self.frame, self.workspace, self.passive_forces)
        ws = self.workspace
        if ws.model.frame(self.frame).body < 0:  # a frame on the fixed root: no kernel path
            self._cycle_key, self._cycle_fixed = key, None
            return None
        self._cycle_key = key
        self._cycle_fixed = (*ws.kernel_buffers, *self.passive_forces.kernel_arguments,
                             *ws.frame_task_arguments(self.frame), self._posture_cols,
                             self._posture_q, self._speed_limits)
        return self._cycle_fixed

    def _step_in_one_call(self, q: np.ndarray, v: np.ndarray, packed: np.ndarray
                          ) -> TrackingResult | None:
        """``step`` as one compiled call (``task_cycle_kernel``); None where it does not
        apply (a frame on the fixed root) or the call reports a problem, which the steps of
        ``step`` then name."""
        fixed = self._cycle_arguments()
        if fixed is None:
            return None
        ws = self.workspace
        S = _FIXED_ROWS[self.task]
        posture, gains = self._posture_and_gains(q)
        na, n_passive = self._sizes
        tau_p, e_pos, e_rot = np.empty(n_passive), np.empty(3), np.empty(3)
        a_des, qdd_a, X = np.empty(6), np.empty(na), np.empty((na, 2))
        status, sigma_min, lam, e_pos_norm, e_rot_norm, speed_ratio = task_cycle_kernel(
            *fixed, q, v, tau_p, S, packed, gains, float(self.singular_threshold),
            float(self.max_damping), self.null_space_damping > 0.0 or self.posture_kp > 0.0,
            float(self.null_space_damping), float(self.posture_kp), float_array(posture),
            e_pos, e_rot, a_des, X, self._N_task, qdd_a)
        if status != OK:
            return None
        if S.shape[0] > na:  # more task rows than actuators: the rank falls short
            sigma_min = 0.0
        res = ws.dynamics.result
        # the fields in their order (a third of what 16 keywords cost, every cycle)
        return TrackingResult(
            qdd_a, res.tau_active.copy(), res.qdd_passive.copy(), res.qdd.copy(), a_des, e_pos,
            e_rot, sigma_min < self.singular_threshold, sigma_min, lam, X[:, 1], tau_p,
            e_pos_norm, e_rot_norm, speed_ratio, (S, ws.J_G))


def _ratio(kp: float, kd: float) -> float:
    return kp / kd if kd > 0.0 else 0.0


def _share_within(base: np.ndarray, step: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> float:
    """The largest c in [0, 1] with lo ≤ base + c step ≤ hi on every entry that base keeps
    within them (an entry base already breaks forbids a step further out, and past its
    other bound)."""
    share = 1.0
    for b, d, low, high in zip(base, step, lo, hi):
        if d > 0.0:
            share = min(share, max(high - b, 0.0) / d)
        elif d < 0.0:
            share = min(share, max(b - low, 0.0) / -d)
    return share


def _largest_singular_value(A: np.ndarray) -> float:
    return float(np.linalg.norm(A, 2)) if A.size else 0.0


def _damped_solve(A: np.ndarray, b: np.ndarray | tuple[np.ndarray, ...], eps: float,
                  max_damping: float, min_damping: float = 0.0, relative: bool = False
                  ) -> tuple[Any, np.ndarray, float, float]:
    """Damped least squares x = A^T (A A^T + λ² I)^-1 b through the SVD, with
    λ² = λ_min² + λ_max² (1 - (σ_min/ε)²) below ε (Nakamura; exact above ε when λ_min = 0).
    ``relative``: ε, λ_min and λ_max in units of A's largest singular value σ_max (the
    solve of A/σ_max, b/σ_max: the same whatever the scale of A).
    ``b``: one right-hand side, or a tuple of them solved with the same SVD and damping (x
    then a tuple, each as the single solve would give it).
    Returns x, the matching smooth null-space projector I - A^+ A, σ_min and λ
    (compiled: ``damped_solve_kernel``)."""
    rows, n = A.shape
    several = isinstance(b, tuple)
    rhs = b if several else (b,)
    if rows == 0:  # no row: x = 0, N = I; σ_min 0 (below any ε > 0)
        lam = math.sqrt(min_damping**2 + (max_damping**2 if eps > 0.0 else 0.0))
        x = tuple(np.zeros(n) for _ in rhs)
        return (x if several else x[0]), np.eye(n), 0.0, lam
    B = np.empty((rows, len(rhs)))
    for i, column in enumerate(rhs):
        B[:, i] = column
    X, N = np.empty((n, len(rhs))), np.empty((n, n))
    sigma_min, lam = damped_solve_kernel(np.ascontiguousarray(A, dtype=np.float64), B,
                                         float(eps), float(max_damping), float(min_damping),
                                         bool(relative), X, N)
    x = tuple(X[:, i] for i in range(len(rhs)))
    return (x if several else x[0]), N, sigma_min, lam


@njit(cache=True, error_model="numpy")
def small_svd(A):
    """The thin SVD A = U diag(σ) Vᵀ of a small matrix (k × n), σ descending, as
    ``np.linalg.svd(A, full_matrices=False)`` (numba's needs SciPy's LAPACK): the one-sided
    Jacobi SVD (``spatial.jacobi_svd``, Hestenes) of the tall one of A, Aᵀ; the rotated
    columns' norms are σ. Columns of U (k ≤ n) or rows of Vᵀ (k > n) of a zero σ are zero."""
    k, n = A.shape
    tall = k > n
    m, p = (k, n) if tall else (n, k)
    W = np.empty((m, p))  # the tall matrix, rotated: M V = W
    for i in range(m):
        for j in range(p):
            W[i, j] = A[i, j] if tall else A[j, i]
    V = np.empty((p, p))
    jacobi_svd(W, V)  # M V = W, W's columns orthogonal
    sigma = np.empty(p)
    for j in range(p):
        sigma[j] = math.sqrt(np.sum(W[:, j] ** 2))
    order = np.argsort(-sigma)
    U, Vt = (np.zeros((k, p)), np.empty((p, n))) if tall else (np.empty((k, p)), np.zeros((p, n)))
    out = np.empty(p)
    for a in range(p):  # M = W Σ Vᵀ: A = W Σ Vᵀ (tall) or A = V Σ Wᵀ
        j = order[a]
        out[a] = sigma[j]
        scale = 1.0 / sigma[j] if sigma[j] > 0.0 else 0.0
        for r in range(m):
            if tall:
                U[r, a] = W[r, j] * scale
            else:
                Vt[a, r] = W[r, j] * scale
        for r in range(p):
            if tall:
                Vt[a, r] = V[r, j]
            else:
                U[r, a] = V[r, j]
    return U, out, Vt


# The kernels below compile on first use (~8 s on a fresh cache, the node's warm-up of a
# task-space mode), not at import: a joint-mode launch does not wait for them. Their callers
# pass C-contiguous float64 arrays and Python floats and bools (one compiled version each).
@njit(cache=True, inline="always", error_model="numpy")
def _damped_into(A, B, eps, max_damping, min_damping, relative, X, N):
    """The body of ``damped_solve_kernel`` (inlined in ``task_solve_kernel``)."""
    U, sigma, Vt = small_svd(A)
    r, n, k = sigma.shape[0], A.shape[1], A.shape[0]
    sigma_min = sigma[r - 1]
    if relative and sigma[0] > 0.0:  # in units of σ_max (the SVD's first)
        eps, max_damping, min_damping = sigma[0] * eps, sigma[0] * max_damping, \
            sigma[0] * min_damping
    lam2 = min_damping**2
    if sigma_min < eps:
        lam2 += max_damping**2 * (1.0 - (sigma_min / eps) ** 2)
    floor = 1e-12 * max(1.0, sigma[0])
    gain = np.zeros(r)  # σ / (σ² + λ²), 0 for a vanishing σ
    for i in range(r):
        if sigma[i] > floor:
            gain[i] = sigma[i] / (sigma[i] ** 2 + lam2)
    projected = np.empty(r)
    for c in range(B.shape[1]):  # x = V diag(gain) Uᵀ b
        for i in range(r):
            acc = 0.0
            for j in range(k):
                acc += U[j, i] * B[j, c]
            projected[i] = gain[i] * acc
        for a in range(n):
            acc = 0.0
            for i in range(r):
                acc += Vt[i, a] * projected[i]
            X[a, c] = acc
    for a in range(n):  # N = I - V diag(gain σ) Vᵀ
        for b in range(n):
            acc = 0.0
            for i in range(r):
                acc += Vt[i, a] * (gain[i] * sigma[i]) * Vt[i, b]
            N[a, b] = (1.0 if a == b else 0.0) - acc
    return sigma_min, math.sqrt(lam2)


@njit(cache=True, error_model="numpy")
def damped_solve_kernel(A, B, eps, max_damping, min_damping, relative, X, N):
    """``_damped_solve`` of A (k × n, k ≥ 1) for the columns of B (k × m): X (n × m) and
    N (n × n) written; returns (σ_min, λ)."""
    return _damped_into(A, B, eps, max_damping, min_damping, relative, X, N)


@njit(cache=True, error_model="numpy")
def intent_kernel(J, rows, motion, gain, error, v_sp, eps, max_damping, posture_ratio,
                  posture, q, q_joints, dofs, w):
    """An operational-space law's intended joint velocity in one call
    (``OperationalSpaceLaw._intended_velocity``): with A = J[rows] (J: the frame's map from
    the active joints, 6 × n) and x_w = motion v_sp[rows] + gain e[rows],
    w = A⁺ x_w (``_damped_solve``: damped below ``eps``) plus, when ``dofs`` is not empty,
    N (kp₀/kd₀)(q₀ − q) of the active DOF ``dofs`` (N = I − A⁺ A; ``q_joints``: each DOF's
    configuration index). ``w`` written."""
    k, n = rows.shape[0], J.shape[1]
    A = np.empty((k, n))
    B = np.empty((k, 1))
    for r in range(k):
        row = rows[r]
        for c in range(n):
            A[r, c] = J[row, c]
        B[r, 0] = motion[r] * v_sp[row] + gain[r] * error[row]
    X, N = np.empty((n, 1)), np.empty((n, n))
    _damped_into(A, B, eps, max_damping, 0.0, False, X, N)
    pull = np.zeros(n)
    for a in range(dofs.shape[0]):
        d = dofs[a]
        pull[a] = posture_ratio * (posture[d] - q[q_joints[d]])
    for a in range(n):
        acc = X[a, 0]
        for b in range(dofs.shape[0]):
            acc += N[a, b] * pull[b]
        w[a] = acc


@njit(cache=True, error_model="numpy")
def self_motion_kernel(N, v, active_dofs, null_damping, posture_kp, posture_cols, posture,
                       posture_q, q, qdd_a):
    """Step 3's last term into ``qdd_a``: qdd_a += N qdd_0, qdd_0 = −d₀ v_a + k₀ (q_a,0 − q_a)
    (k₀ on the posture's columns ``posture_cols``, their configuration entries
    ``posture_q``): the self-motion damped and pulled toward the posture through the
    projector N left by the rows above."""
    na = qdd_a.shape[0]
    qdd_0 = np.empty(na)
    for a in range(na):
        qdd_0[a] = -null_damping * v[active_dofs[a]]
    if posture_kp > 0.0:
        for c in range(posture_cols.shape[0]):
            qdd_0[posture_cols[c]] += posture_kp * (posture[c] - q[posture_q[c]])
    for a in range(na):
        acc = 0.0
        for b in range(na):
            acc += N[a, b] * qdd_0[b]
        qdd_a[a] += acc


@njit(cache=True, error_model="numpy")
def task_solve_kernel(S, J, v, J_G, drift_G, position, rotation, reference, rotation_given,
                      gains, eps, max_damping, active_dofs, null_space, null_damping,
                      posture_kp, posture_cols, posture, posture_q, q, speed_limits, e_pos,
                      e_rot, a_des, X, N, qdd_a):
    """Steps 2-3 of the module docstring for the task rows S (k × 6) and the packed
    ``reference`` (``packed_fields``) in one call: the errors e_pos = p_ref − p and (unless
    ``rotation_given``: e_rot as the caller wrote it) e_rot = Log(R_ref Rᵀ); the frame's
    twist J v; a_des = a_ref + kd (v_ref − twist) + kp e ([linear; angular], ``gains`` kp, kd
    of position then orientation); the damped solve (``_damped_solve``) of
    S J_G x = [S (a_des − drift_G), S v_des] (6.10) with v_des = v_ref + (kp/kd) e (the
    intended velocity's target): X[:, 0] = the task's qdd_a, X[:, 1] = the intended joint
    velocity, N its null-space projector; ``qdd_a`` = X[:, 0], plus, with ``null_space``, the
    self-motion's term N (−d₀ v_a + k₀ (q_a,0 − q_a)) (k₀ on the posture's columns). e_pos,
    e_rot, a_des, X, N, qdd_a written; returns (σ_min, λ, |e_pos|, |e_rot|, the largest
    |intended_a| / ``speed_limits``_a)."""
    k, na = S.shape[0], J_G.shape[1]
    for i in range(3):
        e_pos[i] = reference[_P + i] - position[i]
    if not rotation_given:
        reference_rotation = np.empty((3, 3))
        packed_rotation(reference, reference_rotation)
        rotation_error_log(reference_rotation, rotation, e_rot)
    kp_p, kd_p, kp_o, kd_o = gains[0], gains[1], gains[2], gains[3]
    ratio_p = kp_p / kd_p if kd_p > 0.0 else 0.0
    ratio_o = kp_o / kd_o if kd_o > 0.0 else 0.0
    v_des = np.empty(6)
    for i in range(6):
        twist = 0.0
        for j in range(v.shape[0]):
            twist += J[i, j] * v[j]
        if i < 3:
            a_des[i] = reference[_A + i] + kd_p * (reference[_V + i] - twist) + \
                kp_p * e_pos[i]
            v_des[i] = reference[_V + i] + ratio_p * e_pos[i]
        else:  # _W, _ALPHA: the angular velocity and acceleration
            a_des[i] = reference[_ALPHA + i - 3] + kd_o * (reference[_W + i - 3] - twist) \
                + kp_o * e_rot[i - 3]
            v_des[i] = reference[_W + i - 3] + ratio_o * e_rot[i - 3]
    A = np.zeros((k, na))
    B = np.zeros((k, 2))
    for r in range(k):
        for c in range(6):
            if S[r, c] != 0.0:
                for j in range(na):
                    A[r, j] += S[r, c] * J_G[c, j]
                B[r, 0] += S[r, c] * (a_des[c] - drift_G[c])
                B[r, 1] += S[r, c] * v_des[c]
    sigma_min, lam = _damped_into(A, B, eps, max_damping, 0.0, False, X, N)
    for a in range(na):
        qdd_a[a] = X[a, 0]
    if null_space:
        self_motion_kernel(N, v, active_dofs, null_damping, posture_kp, posture_cols, posture,
                           posture_q, q, qdd_a)
    speed_ratio = 0.0
    for a in range(na):
        speed_ratio = max(speed_ratio, abs(X[a, 1]) / speed_limits[a])
    position_norm = math.sqrt(e_pos[0] ** 2 + e_pos[1] ** 2 + e_pos[2] ** 2)
    rotation_norm = math.sqrt(e_rot[0] ** 2 + e_rot[1] ** 2 + e_rot[2] ** 2)
    return sigma_min, lam, position_norm, rotation_norm, speed_ratio


@njit(cache=True, error_model="numpy")
def task_cycle_kernel(ints, consts, work, frames, force_q_index, force_coefficients, body,
                      frame_rotation, offset, posture_cols, posture_q, speed_limits, q, v, tau_p,
                      S, reference, gains, eps, max_damping, null_space, null_damping,
                      posture_kp, posture, e_pos, e_rot, a_des, X, N, qdd_a):
    """``EndEffectorTracker.step``'s cycle in one call where it solves the task alone (steps
    1-4 of the module docstring without passive rows): the passive forces T_p (the URDF's
    model, ``dof_force``) into ``tau_p``, ``frame_task_kernel`` (J_G, J_D, the frame, the
    drifts, into the blocks of the Jacobian workspace's ``frames``), ``task_solve_kernel``
    (the errors, the damped solve of (6.10), the self-motion's term) and (5.4a), (5.4b) with
    that qdd_a (T_a, qdd_p in the workspace's result). The arguments before q are fixed for a
    tracker's frame, workspace and force model (``EndEffectorTracker._cycle_arguments``).
    Returns (status as ``run_steps``, then
    ``task_solve_kernel``'s five numbers)."""
    m, _ = int_views(ints)
    for k in range(m.npas):  # T_p (passive_forces.py), Coulomb sign of v
        tau_p[k] = dof_force(q, v, v, force_q_index, force_coefficients, m.passive_dofs[k])
    status = frame_task_kernel(ints, consts, work, frames, q, v, tau_p, body, frame_rotation,
                               offset)
    if status != OK:
        return status, 0.0, 0.0, 0.0, 0.0, 0.0
    f, _ = frame_views(frames, m.nb, m.nv, m.na, m.npas)
    # the rotation error is the kernel's own; typed bool, not a literal False: the version
    # the step's Python call compiles (one version, whether or not this loads from the cache)
    rotation_given = e_rot.shape[0] < 0
    sigma_min, lam, position_norm, rotation_norm, speed_ratio = task_solve_kernel(
        S, f.J, v, f.J_G, f.drift_G, f.position, f.rotation, reference, rotation_given, gains,
        eps, max_damping, m.active_dofs, null_space, null_damping, posture_kp, posture_cols,
        posture, posture_q, q, speed_limits, e_pos, e_rot, a_des, X, N, qdd_a)
    status = run_steps(ints, consts, work, f.empty, f.empty, qdd_a, tau_p, SOLVE | GRAVITY)
    return status, sigma_min, lam, position_norm, rotation_norm, speed_ratio
