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

Without force rows, on a state the kernels take as it is (and, with passive joints, the
URDF's passive forces and a posture on every DOF), the cycle after the setpoint's step is one
compiled call (``operational_space_cycle_kernel``, ``generalized_cycle_kernel`` with passive
joints: the same kernels in the same order, the NumPy products between them as loops; J_G by
J_D's rows, ``jacobians.disturbance_rows``, where the passive DOF are fewer); any other case
takes the steps one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from ..buffers import float_array, split_views, take
from ..dynamics import (
    ALL_STEPS,
    CONFIGURATION,
    OK,
    SOLVE,
    ZERO_VELOCITY,
    _kernel_vector,
    const_views,
    int_views,
    run_steps,
    work_views,
)
from ..jacobians import (
    JacobianWorkspace,
    disturbance_rows,
    frame_views,
    generalized_from_rows,
    generalized_jacobian_sweeps,
)
from ..kinematics import body_placements
from ..kinematics import frame_rotation as frame_axes
from ..model import RobotModel
from ..operational_space import OperationalSpace, SingularTaskError
from ..operational_space_kernels import (
    SINGULAR_TASK,
    configure_task,
    free_acceleration_kernel,
    masked_inverse_inertia,
    null_space_kernel,
    os_views,
    scaled_spd_inverse,
    task_bias_kernel,
)
from ..parameters import ParameterSpec
from ..passive_forces import PassiveForceModel, dof_force
from ..so3 import rotation_error
from ..spatial import rotation_error_log
from .law import ControlLaw, LawOutput
from .limits import PoseSetpointFollower, ReachCheck
from .task_law import TaskLaw
from .task_space import (
    _A,
    _ALPHA,
    _P,
    _V,
    _W,
    TaskReference,
    _ratio,
    intent_kernel,
    packed_rotation,
)

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
        # the one call's arrays, blocks of two flat buffers (``law_views``): the settings' and
        # the outputs' (e, v_sp, F*, N Γ₀; Γ_a, q̈_a, w, q̈_p, T_p, which the law's output
        # holds: valid until the next compute)
        sizes = np.array([len(self.rows), len(self._q_joints), len(self._posture_dofs),
                          model.nv, model.n_active, model.n_passive], np.int64)
        _, n_ints, n_floats = law_views(np.empty(0), sizes)  # where the layout ends
        self._law_ints, self._law_floats = np.zeros(n_ints, np.int64), np.zeros(n_floats)
        self._law_ints[:6] = sizes
        blocks = split_views(law_views(self._law_floats, self._law_ints)[0], self._law_ints,
                             self._law_floats, 3)
        blocks.rows[:], blocks.q_joints[:] = self.rows, self._q_joints
        blocks.posture_dofs[:], blocks.gains6[:] = self._posture_dofs, self._gains6
        blocks.damping6[:], blocks.intent_motion[:] = self._damping6, self._intent_motion
        blocks.intent_gain[:] = self._intent_gain
        settings = blocks.settings
        settings[_POSTURE_KP], settings[_POSTURE_KD] = self.posture_gains
        settings[_INTENT_EPS_AT], settings[_INTENT_DAMPING_AT] = _INTENT_EPS, _INTENT_DAMPING
        settings[_POSTURE_RATIO] = self._posture_ratio
        self.rows, self._q_joints, self._posture_dofs = (blocks.rows, blocks.q_joints,
                                                         blocks.posture_dofs)
        self._gains6, self._damping6 = blocks.gains6, blocks.damping6
        self._intent_motion, self._intent_gain = blocks.intent_motion, blocks.intent_gain
        self._one_call = (blocks.tau, blocks.qdd, blocks.intended, blocks.qdd_passive,
                          blocks.tau_passive)
        self._f_star, self._null = blocks.f_star, blocks.null
        # the kind of law the one call is (``_in_one_call``): no force row, a posture on
        # every DOF (settings and model are fixed for a law's life)
        self._one_call_kind = bool(not self.force_select.any()
                                   and len(self._q_joints) == model.nv)
        self._fixed: tuple = ()  # the one call's fixed arguments (``_fixed_arguments``)
        self._fixed_forces: PassiveForceModel | None = None  # the force model they hold

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
            self.posture = float_array(mid)
        else:
            self.posture = np.array(q[self._q_joints], dtype=float)
        return TaskReference(position=position.copy(), rotation=rotation.copy())

    def compute(self, q: np.ndarray, v: np.ndarray, reference: TaskReference, t: float,
                with_jacobians: bool) -> LawOutput:
        if self.follower.setpoint is None or self.posture is None:
            self.hold_reference(q)
        dt = 0.0 if self._last_t is None else min(max(t - self._last_t, 0.0), _MAX_STEP)
        self._last_t = t
        sp = self.follower.step(reference, dt, now=t)
        m, osp = self.model, self.osp
        if self._in_one_call(q, v):
            out = self._cycle_in_one_call(q, v, sp, with_jacobians)
            if out is not None:
                return out
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

    def _in_one_call(self, q: np.ndarray, v: np.ndarray) -> bool:
        """Whether this cycle is one compiled call's: no force row, a posture on every DOF,
        the URDF's passive forces, and a state the kernels take as it is."""
        m = self.model
        return (self._one_call_kind
                and (m.n_passive == 0 or self.passive_forces.__class__ is PassiveForceModel)
                and _kernel_vector(q) and q.shape[0] == m.nq
                and _kernel_vector(v) and v.shape[0] == m.nv)

    def _cycle_in_one_call(self, q: np.ndarray, v: np.ndarray, sp: TaskReference,
                           with_jacobians: bool) -> LawOutput | None:
        """``compute`` after the setpoint's step as one compiled call; None where the call
        reports a problem (a singular task, a non-finite state), which the steps then name.
        ``sp``: the follower's setpoint, its fields views of the follower's ``state`` (the
        kernels take that)."""
        m, osp, ws = self.model, self.osp, self.workspace
        tau, qdd, intended, qdd_p, tau_p = self._one_call
        fixed = self._fixed if self._fixed_forces is self.passive_forces \
            else self._fixed_arguments()
        if m.n_passive == 0:
            status = operational_space_cycle_kernel(q, v, self.posture, *fixed)
        else:
            status = generalized_cycle_kernel(q, v, self.posture, *fixed)
        if status != OK:
            return None
        osp._q[:] = q  # the operational space's state as set_configuration and bias leave it
        osp._configured = osp._inverted = True
        osp.singular = False
        J_G = J_D = None
        if with_jacobians:  # J_G = J without passive joints
            J_G, J_D = ws.generalized(self.frame, q) if m.n_passive == 0 else (ws.J_G, ws.J_D)
        # LawOutput's fields in their order (a third of what keywords cost, every cycle):
        # status, Λ⁻¹, the point, the intent, not friction-compensated, q̈_a, T_p, no task rows
        work = osp.work
        return LawOutput(tau, qdd_p, J_G, J_D, "", work.Linv6, work.point, intended, False, qdd,
                         tau_p, None)

    def _fixed_arguments(self) -> tuple:
        """The one call's arguments after (q, v, posture): the workspaces' buffers, the task's,
        the law's (``law_views``: settings and outputs), fixed for the law's life (its settings
        are; the passive force model's arrays while it is the same), gathered once."""
        m, osp, ws = self.model, self.osp, self.workspace
        self._fixed = (*osp.dynamics.buffers, osp.buffer, osp.path, osp.body, osp.k,
                       osp.singular_tolerance, *self.inertia.buffers, osp._zero_tau, self._zero,
                       self._frame.rotation, self.follower.state, self._law_floats,
                       self._law_ints)
        if m.n_passive:
            self._fixed += (*ws.kernel_buffers, *self.passive_forces.kernel_arguments,
                            self._frame.translation)
        self._fixed_forces = self.passive_forces
        return self._fixed

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


_POSTURE_KP, _POSTURE_KD, _INTENT_EPS_AT, _INTENT_DAMPING_AT, _POSTURE_RATIO = range(5)


class LawBlocks(NamedTuple):
    """The law's arrays and settings its one call takes, blocks of two flat buffers
    (``law_views``): two arguments, not one per array and setting (23 with passive joints).
    The outputs are valid until the next compute."""

    rows: np.ndarray  # ints (k,): the task's rows of [linear; angular]
    q_joints: np.ndarray  # ints: each joint's configuration index (the posture's)
    posture_dofs: np.ndarray  # ints: the posture intent's DOF
    gains6: np.ndarray  # (6,) kp on the task's rows, 0 off them
    damping6: np.ndarray  # (6,) kd
    intent_motion: np.ndarray  # (k,) 1 − Ω̄
    intent_gain: np.ndarray  # (k,) (1 − Ω̄) kp/kd
    settings: np.ndarray  # (5,) at _POSTURE_KP, _POSTURE_KD, _INTENT_EPS_AT, _INTENT_DAMPING_AT,
    # _POSTURE_RATIO: the posture's kp, kd, the intent's ε and λ_max, the posture's kp/kd
    error: np.ndarray  # (6,) e, the setpoint's pose error
    v_sp: np.ndarray  # (6,) the setpoint's twist
    f_star: np.ndarray  # (k,) F*
    null: np.ndarray  # (nv,) N Γ₀
    tau: np.ndarray  # (na,) Γ (Γ_a with passive joints)
    qdd: np.ndarray  # (na,) q̈_a
    intended: np.ndarray  # (na,) the intent w
    qdd_passive: np.ndarray  # (npas,)
    tau_passive: np.ndarray  # (npas,) T_p


@njit(cache=True, inline="always")
def law_views(floats, ints):
    """(LawBlocks, end of ``ints``, end of ``floats``); ``ints`` starts with the sizes
    (k, the joints, the posture intent's DOF, nv, n_a, n_p)."""
    k, joints, n_posture, nv, na, npas = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    rows, o = take(ints, 6, (k,))
    q_joints, o = take(ints, o, (joints,))
    posture_dofs, o = take(ints, o, (n_posture,))
    gains6, p = take(floats, 0, (6,))
    damping6, p = take(floats, p, (6,))
    intent_motion, p = take(floats, p, (k,))
    intent_gain, p = take(floats, p, (k,))
    settings, p = take(floats, p, (5,))
    error, p = take(floats, p, (6,))
    v_sp, p = take(floats, p, (6,))
    f_star, p = take(floats, p, (k,))
    null, p = take(floats, p, (nv,))
    tau, p = take(floats, p, (na,))
    qdd, p = take(floats, p, (na,))
    intended, p = take(floats, p, (na,))
    qdd_passive, p = take(floats, p, (npas,))
    tau_passive, p = take(floats, p, (npas,))
    return LawBlocks(rows=rows, q_joints=q_joints, posture_dofs=posture_dofs, gains6=gains6,
                     damping6=damping6, intent_motion=intent_motion, intent_gain=intent_gain,
                     settings=settings, error=error, v_sp=v_sp, f_star=f_star, null=null,
                     tau=tau, qdd=qdd, intended=intended, qdd_passive=qdd_passive,
                     tau_passive=tau_passive), o, p


@njit(cache=True, inline="always", error_model="numpy")
def _setpoint_force(o, body, k, v, frame_rotation, setpoint, L):
    """e(sp) = [p_sp − p; Log(R_sp Rᵀ)], v_sp and F* = a_sp + kd (v_sp − J q̇) + kp e(sp) on
    the task rows, from the operational space's frame point, J and placements, into the
    law's blocks ``L`` (``law_views``); ``setpoint`` packed (``task_space.packed_fields``)."""
    error, v_sp = L.error, L.v_sp
    Eb = o.E_world[body]
    R = np.empty((3, 3))
    frame_axes(Eb, frame_rotation, R)  # the frame's axes in root axes
    sp_rotation, e_rot = np.empty((3, 3)), np.empty(3)
    packed_rotation(setpoint, sp_rotation)
    rotation_error_log(sp_rotation, R, e_rot)
    f6 = np.empty(6)
    for i in range(6):
        twist = 0.0
        for j in range(v.shape[0]):
            twist += o.J[i, j] * v[j]
        if i < 3:
            error[i] = setpoint[_P + i] - o.point[i]
            v_sp[i], a_sp = setpoint[_V + i], setpoint[_A + i]
        else:
            error[i] = e_rot[i - 3]
            v_sp[i], a_sp = setpoint[_W + i - 3], setpoint[_ALPHA + i - 3]
        f6[i] = a_sp + L.damping6[i] * (v_sp[i] - twist) + L.gains6[i] * error[i]
    for r in range(k):  # the task rows
        L.f_star[r] = f6[L.rows[r]]


@njit(cache=True, inline="always", error_model="numpy")
def _posture_torque(ints_id, consts_id, work_id, q, v, posture, L, empty):
    """(status, Γ₀): Γ₀ = A (kp₀ (q₀ − q) − kd₀ q̇) + b + g by the inverse dynamics (the
    all-active workspace's τ, a view); kp₀, kd₀ and the joints' q entries the law's blocks'."""
    m, _ = int_views(ints_id)
    kp, kd, q_joints = L.settings[_POSTURE_KP], L.settings[_POSTURE_KD], L.q_joints
    qdd0 = np.empty(m.nv)
    for i in range(m.nv):
        qdd0[i] = kp * (posture[i] - q[q_joints[i]]) - kd * v[i]
    status = run_steps(ints_id, consts_id, work_id, q, v, qdd0, empty, ALL_STEPS)
    w, _, _ = work_views(work_id, m.nb, m.nq, m.nv, m.na, m.npas)
    return status, w.tau


@njit(cache=True, inline="always", error_model="numpy")
def _law_intent(J_a, L, posture, q):
    """The intent w into ``L.intended``: ``intent_kernel`` with the law's blocks (J_a the
    frame's map from the active joints)."""
    settings = L.settings
    intent_kernel(J_a, L.rows, L.intent_motion, L.intent_gain, L.error, L.v_sp,
                  settings[_INTENT_EPS_AT], settings[_INTENT_DAMPING_AT],
                  settings[_POSTURE_RATIO], posture, q, L.q_joints, L.posture_dofs, L.intended)


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous arrays in)
def operational_space_cycle_kernel(q, v, posture, ints, consts, work, buf, path, body, k,
                                   rcond, ints_id, consts_id, work_id, zero_tau, empty,
                                   frame_rotation, setpoint, law_floats, law_ints):
    """``OperationalSpaceLaw.compute`` after the setpoint's step, without passive joints or
    force rows (module docstring), on the operational space's workspace (every joint free:
    ``ints``, ``consts``, ``work``, ``buf``) and the inverse dynamics' (``*_id``): Λ⁻¹, Λ at
    q; e, F* on the task rows; μ, p; Γ₀; F; Γ; the intent w; q̈ of Γ. The law's arrays in
    ``law_floats``, ``law_ints`` (``law_views``: ``error``, ``v_sp``, ``f_star``, ``null``
    (N Γ₀), ``tau`` (Γ), ``intended``, ``qdd`` written); the arguments after (q, v, posture)
    are fixed for the law's life (``OperationalSpaceLaw._fixed``).
    Returns OK or the first status of the kernels that is not."""
    L, _, _ = law_views(law_floats, law_ints)
    f_star, null, tau, qdd = L.f_star, L.null, L.tau, L.qdd
    yes = k >= 0  # a typed bool: the version Python's calls compile (no literal's own)
    status = configure_task(ints, consts, work, buf, path, q, yes, body, k, yes, rcond)
    if status != OK:  # transforms, (4.6), J, Λ⁻¹ = W Ω Wᵀ, Λ  (17), (33)
        return status
    m, _ = int_views(ints)
    o, _ = os_views(buf, m.nb, m.nv)
    _setpoint_force(o, body, k, v, frame_rotation, setpoint, L)
    status = task_bias_kernel(ints, consts, work, buf, v, zero_tau, body, k)
    if status != OK:  # μ, p  (24), (25)
        return status
    status, tau0 = _posture_torque(ints_id, consts_id, work_id, q, v, posture, L, empty)
    if status != OK:
        return status
    status = null_space_kernel(ints, consts, work, buf, tau0, null, body, k)
    if status != OK:  # N Γ₀ = [I − J_Sᵀ J̄ᵀ] Γ₀  (27)
        return status
    F = np.empty(6)
    for a in range(k):  # F = Λ F* + μ + p  (10)
        acc = 0.0
        for b in range(k):
            acc += o.Lam[a, b] * f_star[b]
        F[a] = acc + o.mu[a] + o.p[a]
    for i in range(m.nv):  # Γ = J_Sᵀ F + N Γ₀  (19), (27)
        acc = 0.0
        for a in range(k):
            row = 0.0
            for b in range(6):
                row += o.S[a, b] * o.J[b, i]
            acc += row * F[a]
        tau[i] = acc + null[i]
    _law_intent(o.J, L, posture, q)
    status = run_steps(ints, consts, work, q, v, empty, tau, ALL_STEPS)
    if status != OK:  # q̈ of Γ: the forward dynamics, (4.6) at q already
        return status
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    for i in range(m.nv):
        qdd[i] = w.qdd[i]
    return OK


@njit(cache=True, error_model="numpy")  # compiled on first use (C-contiguous arrays in)
def generalized_cycle_kernel(q, v, posture, ints, consts, work, buf, path, body, k, rcond,
                             ints_id, consts_id, work_id, zero_tau, empty, frame_rotation,
                             setpoint, law_floats, law_ints, ints_m, consts_m, work_m, frames,
                             force_q_index, force_coefficients, offset):
    """``OperationalSpaceLaw.compute`` after the setpoint's step with passive joints and no
    force row, through the active joints (module docstring; ``OperationalSpace.generalized``
    and ``generalized_command``), on the operational space's workspace (every joint free),
    the inverse dynamics' (``*_id``) and the model's passive set's (``*_m`` and ``frames``:
    the Jacobian workspace's ``kernel_buffers``, J_G and J_D into its blocks): Λ⁻¹ at q;
    e, F*; T_p; Γ₀; Λ_G⁻¹ = Λ⁻¹ − J_p M_pp⁻¹ J_pᵀ, Λ_G; the frame's free acceleration a with
    v, gravity, T_p and Γ_a0 (one pass); Γ_a = Γ_a0 + J_Gᵀ Sᵀ F' with F' = F − Λ_G S a(Γ_a0)
    = Λ_G (F* − S a) (F = Λ_G F* + μ_G + p_G); J_G, J_D; the intent w; q̈ of Γ_a and T_p.
    Returns OK, the first status of the kernels that is not, or SINGULAR_TASK where the
    passive joints absorb a task direction (the steps then name it). ``zero_tau`` is unused
    here: the arguments up to ``law_ints`` are those ``operational_space_cycle_kernel`` takes
    (``tau`` is Γ_a, ``qdd`` q̈_a here); those after (q, v, posture) are fixed for the law's
    life (``OperationalSpaceLaw._fixed``)."""
    L, _, _ = law_views(law_floats, law_ints)
    tau_active, qdd_active, qdd_passive, tau_p = L.tau, L.qdd, L.qdd_passive, L.tau_passive
    yes = k >= 0  # a typed bool: the version Python's calls compile (no literal's own)
    status = configure_task(ints, consts, work, buf, path, q, yes, body, k, yes, rcond)
    if status != OK:  # transforms, (4.6), J, Λ⁻¹ = W Ω Wᵀ  (17), (33)
        return status
    m, _ = int_views(ints)
    o, _ = os_views(buf, m.nb, m.nv)
    mm, _ = int_views(ints_m)  # the model's passive set
    active_dofs, passive_dofs = mm.active_dofs, mm.passive_dofs
    nv, na, npas = m.nv, mm.na, mm.npas
    _setpoint_force(o, body, k, v, frame_rotation, setpoint, L)
    for j in range(npas):  # T_p (passive_forces.py), Coulomb sign of v
        tau_p[j] = dof_force(q, v, v, force_q_index, force_coefficients, passive_dofs[j])
    status, tau0 = _posture_torque(ints_id, consts_id, work_id, q, v, posture, L, empty)
    if status != OK:
        return status
    absorbed = np.zeros((6, 6))  # J_p M_pp⁻¹ J_pᵀ on the task rows: the passive joints free
    status = masked_inverse_inertia(ints_m, consts_m, work_m, buf, path, q, body, k, absorbed)
    if status != OK:
        return status
    if k > na:  # Λ_G⁻¹ = J_G S_aa⁻¹ J_Gᵀ has rank <= n_a
        return SINGULAR_TASK
    inv = np.zeros((7, 6, 6))  # Λ_G⁻¹, Λ⁻¹ (the reference), Λ_G, scratch
    for a in range(k):
        for b in range(k):
            inv[0, a, b] = 0.5 * ((o.Linv[a, b] - absorbed[a, b])
                                  + (o.Linv[b, a] - absorbed[b, a]))
            inv[1, a, b] = o.Linv[a, b]
    if not scaled_spd_inverse(inv[0], k, rcond, inv[2], inv[3], inv[4], inv[5], inv[6, 0],
                              inv[1]):
        return SINGULAR_TASK
    LG = inv[2]
    tau = np.zeros(nv)  # Γ_a0 on the active joints, T_p on the passive ones
    for a in range(na):
        tau[active_dofs[a]] = tau0[active_dofs[a]]
    for j in range(npas):
        tau[passive_dofs[j]] = tau_p[j]
    # the frame's free acceleration a = a_v + a_g + a(Γ_a0) with v, gravity and these forces
    # in one pass: F − Λ_G S a(Γ_a0) with F = Λ_G F* + μ_G + p_G (10), μ_G = −Λ_G S a_v,
    # p_G = −Λ_G S a_g is Λ_G (F* − S a)
    status = free_acceleration_kernel(ints, consts, work, buf, v, tau, body)
    if status != OK:
        return status
    residual = np.empty(6)
    for a in range(k):  # F* − S a
        acc = 0.0
        for b in range(6):
            acc += o.S[a, b] * o.a_vel[b]
        residual[a] = L.f_star[a] - acc
    Sf = np.zeros(6)
    for a in range(k):  # Sᵀ Λ_G (F* − S a)
        acc = 0.0
        for b in range(k):
            acc += LG[a, b] * residual[b]
        for b in range(6):
            Sf[b] += o.S[a, b] * acc
    JtF = np.empty(nv)
    for i in range(nv):
        acc = 0.0
        for b in range(6):
            acc += o.J[b, i] * Sf[b]
        JtF[i] = acc
    JtF_p, no_acceleration = np.empty(npas), np.zeros(na)
    for j in range(npas):
        JtF_p[j] = JtF[passive_dofs[j]]
    # J_Gᵀ Sᵀ F' = J_aᵀ Sᵀ F' − T_a of one hybrid pass (q̈_a = 0, T_p = J_pᵀ Sᵀ F', at rest,
    # no gravity)
    status = run_steps(ints_m, consts_m, work_m, q, empty, no_acceleration, JtF_p,
                       CONFIGURATION | ZERO_VELOCITY | SOLVE)
    if status != OK:
        return status
    cm, _ = const_views(consts_m, mm.nb)
    wm, sm, _ = work_views(work_m, mm.nb, mm.nq, mm.nv, mm.na, mm.npas)
    f, _ = frame_views(frames, mm.nb, mm.nv, mm.na, mm.npas)
    for a in range(na):
        tau_active[a] = tau0[active_dofs[a]] + (JtF[active_dofs[a]] - wm.tau_active[a])
    if npas < na:  # J_D by its rows, J_G = J_a + J_p J_D ((4.6) of the set at q already)
        body_placements(mm.parent, wm.E_up, wm.r_up, f.E_world, f.p_world)
        disturbance_rows(mm, cm, wm, sm, f.J_D)
        generalized_from_rows(o.J, active_dofs, passive_dofs, f.J_D, f.J_G)
    else:  # by the columns (§6.1)
        status = generalized_jacobian_sweeps(ints_m, consts_m, work_m, q, yes, f.E_world,
                                             f.p_world, body, offset, yes, f.J_G, f.J_D,
                                             f.column)
        if status != OK:
            return status
    _law_intent(f.J_G, L, posture, q)
    for a in range(na):  # q̈ of Γ_a with T_p: the forward dynamics, (4.6) at q already
        tau[active_dofs[a]] = tau_active[a]
    for j in range(npas):
        tau[passive_dofs[j]] = tau_p[j]
    status = run_steps(ints, consts, work, q, v, empty, tau, ALL_STEPS)
    if status != OK:
        return status
    w, _, _ = work_views(work, m.nb, m.nq, m.nv, m.na, m.npas)
    for a in range(na):
        qdd_active[a] = w.qdd[active_dofs[a]]
    for j in range(npas):
        qdd_passive[j] = w.qdd[passive_dofs[j]]
    return OK
