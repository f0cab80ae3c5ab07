"""Mode ``operational_space``: Khatib's operational-space control (Khatib 1995, §2.1–2.3).

Each cycle, with Λ, μ, p of the task frame from the O(N) recursions of
``operational_space.OperationalSpace`` (J the frame's Jacobian, S the task rows of ``task``):

    F* = a_sp + kd (v_sp − J q̇) + kp e(sp)                     PD on the bounded setpoint
    F  = Λ Ω F* + Ω̄ F_force + μ + p                            (10), (23): motion and force
    Γ  = Jᵀ F + [I − Jᵀ J̄ᵀ] Γ₀,   Γ₀ = A (kp₀ (q₀ − q) − kd₀ q̇) + b + g   (19)–(22), (27)

Ω selects the motion-controlled directions and Ω̄ = I − Ω the force-controlled ones
(``force_axes``, root axes); F_force = F_d + k_f (F_d − F_measured) − Λ k_v v (eq. 11–16),
F_measured from ``measured_wrench`` (set by the node from a geometry_msgs/WrenchStamped).
Γ₀ pulls the joints toward the posture (``posture``: the configuration where the mode started,
or mid-range of each joint's limits) without disturbing the task.

With passive joints the same algebra runs through the active joints only (Λ_G of
``OperationalSpace.generalized``: Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ, Γ_a = J_Gᵀ F + [I − J_Gᵀ J̄_Gᵀ] Γ_a0);
a task with more directions than active joints, or one the passive joints absorb, is refused.

The law also gives the accelerations q̈ its command implies (forward dynamics on the
workspace its Λ configured), so the safety layer bounds them without a pass of its own, and the
friction stage's intent (``_intended_velocity``): both one compiled call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..buffers import float_array
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..operational_space import OperationalSpace, SingularTaskError
from ..parameters import ParameterSpec
from ..passive_forces import PassiveForceModel
from ..so3 import rotation_error
from .law import ControlLaw, LawOutput
from .limits import PoseSetpointFollower, ReachCheck
from .task_law import TaskLaw
from .task_space import TaskReference, _ratio, intent_kernel

__all__ = ["OperationalSpaceLaw"]

_ROWS = {"pose": None, "position": [0, 1, 2], "orientation": [3, 4, 5]}
_SHARED = ("task_kp_position", "task_kd_position", "task_kp_orientation", "task_kd_orientation",
           "task_max_speed", "task_max_acceleration", "task_max_angular_speed",
           "task_max_angular_acceleration")
_MAX_STEP = 0.1  # s
_INTENT_EPS, _INTENT_DAMPING = 1e-2, 5e-2  # the task law's singular_threshold, max_damping


def _unit_flags(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 3 or any(x not in (0.0, 1.0) for x in value):
        raise ValueError("give three flags (0 or 1) for x, y, z in root axes")


def _three(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 3:
        raise ValueError("give three values (x, y, z in root axes)")


class OperationalSpaceLaw(ControlLaw):
    mode = "operational_space"
    reference_kind = "pose"
    parameters = (
        ParameterSpec("os_task", "pose", "operational-space task rows", choices=tuple(_ROWS)),
        ParameterSpec("posture", "start", "posture the null-space torques pull toward",
                      choices=("start", "mid_range")),
        ParameterSpec("posture_kp", 25.0, "posture stiffness (Γ₀ = A (kp (q₀ − q) − kd q̇) + b "
                      "+ g)",
                      unit="1/s^2", low=0.0, high=1e4),
        ParameterSpec("posture_kd", 10.0, "posture damping", unit="1/s", low=0.0, high=1e3),
        ParameterSpec("force_axes", [0.0, 0.0, 0.0], "force-controlled directions x, y, z "
                      "(root axes, 1: force, 0: motion)", unit="1", low=0.0, high=1.0,
                      validator=_unit_flags),
        ParameterSpec("force_target", [0.0, 0.0, 0.0], "force the hand applies along the "
                      "force-controlled directions (root axes)", unit="N", low=-1e4, high=1e4,
                      validator=_three),
        ParameterSpec("force_kp", 0.5, "force error gain", unit="1", low=0.0, high=100.0),
        ParameterSpec("force_kd", 20.0, "velocity damping along force-controlled directions",
                      unit="1/s", low=0.0, high=1e4),
    ) + tuple(s for s in TaskLaw.parameters if s.name in _SHARED)

    def __init__(self, model: RobotModel, settings: Mapping[str, Any], frame: str,
                 workspace: JacobianWorkspace | None = None) -> None:
        super().__init__(model, settings, frame, workspace)
        rows = _ROWS[settings["os_task"]]
        k = 6 if rows is None else len(rows)
        if k > model.n_active:
            raise ValueError(f"os_task '{settings['os_task']}' has {k} directions but only "
                             f"{model.n_active} joints are active ({list(model.active_joints)})"
                             ": use os_task position or orientation")
        self.rows = np.arange(6) if rows is None else np.asarray(rows, dtype=np.int64)
        # one workspace for the cycle: the Jacobians' (self.workspace), the operational space's
        # and the inverse and forward dynamics' buffers all come from it, so the transforms and
        # (4.6) of each passive set are computed once per q
        shared = self.workspace.shared
        self.osp = OperationalSpace(model, shared=shared)
        self.osp.set_task(frame, rows)
        self._frame = model.frame(frame)
        self.gains = np.array([settings["task_kp_position"]] * 3
                              + [settings["task_kp_orientation"]] * 3)[self.rows]
        self.damping = np.array([settings["task_kd_position"]] * 3
                                + [settings["task_kd_orientation"]] * 3)[self.rows]
        self.posture_gains = (settings["posture_kp"], settings["posture_kd"])
        self.posture_kind = settings["posture"]
        self.posture: np.ndarray | None = None
        force = np.zeros(6)
        force[:3] = settings["force_axes"]
        self.force_select = force[self.rows]  # Ω̄ on the task rows
        self.force_target = np.r_[settings["force_target"], np.zeros(3)][self.rows]
        self.force_kp, self.force_kd = settings["force_kp"], settings["force_kd"]
        # per-cycle constants: kp, kd on all six rows (0 off the task's), the intent's
        # (1 − Ω̄) and (1 − Ω̄) kp/kd on the task rows (``_intended_velocity``)
        self._gains6, self._damping6 = np.zeros(6), np.zeros(6)
        self._gains6[self.rows], self._damping6[self.rows] = self.gains, self.damping
        kd = np.where(self.damping > 0.0, self.damping, 1.0)
        self._intent_motion = 1.0 - self.force_select
        self._intent_gain = self._intent_motion * np.where(self.damping > 0.0,
                                                           self.gains / kd, 0.0)
        self._all_rows = rows is None  # pose: the rows need no gather
        self._posture_ratio = _ratio(settings["posture_kp"], settings["posture_kd"])
        self.measured_wrench: np.ndarray | None = None  # [force; moment], root axes
        self.follower = PoseSetpointFollower(
            settings["task_max_speed"], settings["task_max_acceleration"],
            settings["task_max_angular_speed"], settings["task_max_angular_acceleration"])
        self._last_t: float | None = None
        self.passive_forces = PassiveForceModel(model)
        self.inertia = shared.hybrid("active")  # inverse dynamics
        self._tau0 = np.zeros(model.nv)
        self._q_joints = np.array([model.q_start[model.joint_index(n)]
                                   for n in model.joint_names], dtype=np.int64)
        # the posture intent's DOF: none with a floating base (its self-motion has none)
        self._posture_dofs = np.array(model.active_dofs if len(self._q_joints) == model.nv
                                      else [], dtype=np.int64)
        self._zero = np.zeros(0)
        self._tau_all, self._qdd_active = np.zeros(model.nv), np.zeros(model.n_active)
        self.reach = ReachCheck(model, frame)

    def check_reference(self, reference: TaskReference) -> None:
        """``ValueError`` for a goal position no configuration reaches (``ReachCheck``; the
        orientation task has none)."""
        if 0 in self.rows:
            self.reach.check(reference.position)

    def hold_reference(self, q: np.ndarray) -> TaskReference:
        ws = self.workspace
        ws.set_configuration(q)
        position, rotation = ws.frame_placement(self.frame)
        self.follower.reset(position, rotation)
        self._last_t = None
        m = self.model
        if self.posture_kind == "mid_range":
            lo, hi = m.position_lower, m.position_upper
            mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
            self.posture = mid
        else:
            self.posture = q[self._q_joints].copy()
        return TaskReference(position=position.copy(), rotation=rotation.copy())

    def compute(self, q: np.ndarray, v: np.ndarray, reference: TaskReference, t: float,
                with_jacobians: bool) -> LawOutput:
        if self.follower.setpoint is None or self.posture is None:
            self.hold_reference(q)
        dt = 0.0 if self._last_t is None else min(max(t - self._last_t, 0.0), _MAX_STEP)
        self._last_t = t
        sp = self.follower.step(reference, dt, now=t)
        m, osp = self.model, self.osp
        osp.set_configuration(q)  # transforms, (4.6), J, Λ⁻¹, Λ: one compiled call
        J = osp.J
        twist = J @ v
        position = osp.point
        rotation = (self._frame.rotation @ osp.work.E_world[self._frame.body]).T
        error, a_sp, v_sp = np.empty(6), np.empty(6), np.empty(6)
        error[:3], error[3:] = sp.position - position, rotation_error(sp.rotation, rotation)
        a_sp[:3], a_sp[3:] = sp.linear_acceleration, sp.angular_acceleration
        v_sp[:3], v_sp[3:] = sp.linear_velocity, sp.angular_velocity
        f_star = a_sp + self._damping6 * (v_sp - twist) + self._gains6 * error
        if not self._all_rows:
            f_star = f_star[self.rows]
        tau_p = self.passive_forces(q, v)
        tau0 = self._posture_torque(q, v)
        if m.n_passive == 0:
            mu, p = osp.bias(v)
            Lam = osp.Lambda
            F = self._task_force(Lam, f_star, twist, mu, p)
            tau = osp.J_task.T @ F + osp.null_space_torque(tau0)  # (19), (27)
            tau_active = tau[m.active_dofs]
        else:
            try:
                task = osp.generalized(tau_p, v, with_jbar=False)  # Λ_G, μ_G, p_G
            except SingularTaskError as exc:
                raise ValueError(str(exc)) from None
            F = self._task_force(task.Lambda, f_star, twist, task.mu, task.p)
            tau_active = osp.generalized_command(F, tau0[m.active_dofs], task)
        J_G = J_D = None
        if with_jacobians or m.n_passive:  # J_G: the frame's map from the active joints
            J_G, J_D = self.workspace.generalized(self.frame, q)
        # the frame's map from the active joints (no passive joint: J's columns are theirs)
        intended = self._intended_velocity(q, J if J_G is None else J_G, error, v_sp)
        qdd_active, qdd_passive = self._accelerations(q, v, tau_active, tau_p)
        if not with_jacobians:
            J_G = J_D = None
        return LawOutput(np.asarray(tau_active, float), qdd_passive, J_G, J_D,
                         task_inertia_inverse=osp.Lambda_inv_full, task_point=position,
                         intended_velocity=intended, qdd_active=qdd_active,
                         tau_passive=None if qdd_active is None else tau_p)

    # -- pieces ---------------------------------------------------------------------------
    def _task_force(self, Lam, f_star, twist, mu, p) -> np.ndarray:
        """F = Λ Ω F* + Ω̄ F_force + μ + p (10), F_force = F_d + k_f (F_d − F_m) − Λ k_v v."""
        omega_bar = self.force_select
        if not omega_bar.any():
            return Lam @ f_star + mu + p
        measured = np.zeros(6) if self.measured_wrench is None else self.measured_wrench
        f_force = (self.force_target + self.force_kp
                   * (self.force_target - measured[self.rows]))
        f_force = f_force - Lam @ (self.force_kd * twist[self.rows] * omega_bar)
        return Lam @ ((1.0 - omega_bar) * f_star) + omega_bar * f_force + mu + p

    def _intended_velocity(self, q: np.ndarray, J_a: np.ndarray, error: np.ndarray,
                           v_sp: np.ndarray) -> np.ndarray:
        """w: the active joints' velocity this law drives toward, the sign of the friction
        stage's Coulomb part (friction.py): the motion rows' PD target twist v_sp + (kp/kd) e
        (none on force rows) through a damped J_a⁺ (J_a: the frame's map from the active
        joints, J_G with passive joints; its task rows), plus the posture's
        (kp₀/kd₀)(q₀ − q) in J_a's null space (resolved rate, as the task law's intent): one
        compiled call (``intent_kernel``). Without it the stage follows the measured
        velocity: a command one cycle late made that a push along the motion on xarm7's light
        wrist (joint7 to 7 rad/s)."""
        w = np.empty(J_a.shape[1])
        intent_kernel(float_array(J_a), self.rows, self._intent_motion, self._intent_gain,
                      error, v_sp, _INTENT_EPS, _INTENT_DAMPING, self._posture_ratio,
                      self.posture, float_array(q), self._q_joints, self._posture_dofs, w)
        return w

    def _posture_torque(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Γ₀ = A (kp₀ (q₀ − q) − kd₀ q̇) + b + g: the posture's joint-space law with the full
        dynamics, one inverse-dynamics pass. Projected by N it compensates what Jᵀ(μ + p)
        leaves out (the null-space part of gravity and Coriolis forces)."""
        kp, kd = self.posture_gains
        qj = q[self._q_joints]
        qdd0 = kp * (self.posture - qj) - kd * v
        self._tau0[:] = self.inertia.compute(q, v, qdd0, self._zero).tau
        return self._tau0

    def _accelerations(self, q: np.ndarray, v: np.ndarray, tau_active: np.ndarray,
                       tau_passive: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(q̈_a, q̈_p) the command gives with the passive joints' forces ``tau_passive``: the
        forward dynamics on the operational space's all-passive workspace, whose (4.6) is at
        q already. The safety layer bounds q̈_a without a pass of its own (``LawOutput``);
        (None, zeros) for a non-finite command, which the layer's own pass refuses."""
        m, tau = self.model, self._tau_all
        tau[m.active_dofs] = tau_active
        tau[m.passive_dofs] = tau_passive
        try:
            qdd = self.osp.dynamics.compute(float_array(q), float_array(v), self._zero,
                                            tau).qdd
        except ValueError:
            return None, np.zeros(m.n_passive)
        np.take(qdd, m.active_dofs, out=self._qdd_active)
        return self._qdd_active, qdd[m.passive_dofs]
