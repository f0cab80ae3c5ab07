"""Configuration control (Seraji, eq. 9-13): weighted damped least squares on the augmented
Jacobian J = [J_e; J_c]:

    dθ = (Jᵀ W J + W_v)⁻¹ (Jᵀ W dX + W_v dθ_d),     W = diag(W_e, W_c),
    dX = X_d(N+1) - X(N)   (hand: position difference and rotation vector log(R_d Rᵀ);
                            functions: their own desired change, see ``functions.py``)

dθ_d: optional desired joint changes over the sample, penalised by W_v (claims 11, 18, 20;
dθ_d = 0 is eq. 11). Solved by Cholesky, or as the least-squares problem
[√W J; √W_v] dθ = [√W dX; √W_v dθ_d] when (JᵀWJ + W_v) is rank-deficient, over the **active**
joints only. With W_v = 0 and a square regular J this is the exact inverse (8). Weights may
change between steps.

Passive joints (``passive_motion``):

- ``"locked"`` (default): a passive joint is locked out of direct command (its column is
  dropped, dθ_p = 0; a braked joint, or one whose motion is left to the controller).
- ``"disturbance"``: a passive joint moves with the active ones as the dynamics make it
  (Jain & Rodriguez, patent US 5,377,310 claims 11, 22): q̈_p = J_D q̈_a + drift (paper
  6.12), J_D = -M_pp⁻¹ M_pa. The step takes the first-order part, dθ_p = J_D dθ_a: every row
  r of J becomes its generalized row r_a + r_p J_D (the hand's: J_G = J_a + J_p J_D, 6.11),
  the weighted least squares is solved for dθ_a, and dθ_p = J_D dθ_a. That is the motion of
  a passive joint whose generalized momentum M_pa v_a + M_pp v_p stays zero (from rest, no
  passive joint force, no gravity moment about it, its angle cyclic in the kinetic energy;
  doc/theory/jain_rodriguez_patent.md says what each departure costs). ``StepResult.J_D``
  is the J_D used.

The step of the built-in functions runs as one compiled call (``redundancy.kernels``); the
Python method (``compiled=False``, or any function object of another class with a
``rows(ctx)`` method) is the readable reference and gives the same result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..control.trajectories import LineTrajectory, cycloidal
from ..dynamics import HybridDynamics
from ..jacobians import JacobianWorkspace
from ..model import FLOATING, RobotModel
from ..so3 import rotation_error
from . import kernels as K  # noqa: N812
from .functions import (
    STAMP,
    ArmAngleFunction,
    CollisionAvoidance,
    Context,
    ElbowCoordinate,
    GravityTorqueMinimization,
    JointLimitAvoidance,
    JointLocking,
    LinkOrientation,
    Manipulability,
    OptimalJointMovement,
)

__all__ = ["ConfigurationControl", "StepResult", "ConfigurationTrajectory", "PASSIVE_MOTIONS"]

PASSIVE_MOTIONS = ("locked", "disturbance")


class StepResult:
    """One step's outcome. ``values``/``weights``/``notes``: function name -> current φ, the
    weights used, singularity notes (built on first access)."""

    __slots__ = ("q_next", "dq", "position_error", "orientation_error", "J_D", "_values",
                 "_weights", "_notes", "_report")

    def __init__(self, q_next: np.ndarray, dq: np.ndarray, position_error: float,
                 orientation_error: float, values: dict | None = None,
                 weights: dict | None = None, notes: dict | None = None, report=None,
                 J_D: np.ndarray | None = None) -> None:
        self.q_next, self.dq = q_next, dq
        self.J_D = J_D  # (n_passive, n_active) with passive_motion "disturbance", else None
        self.position_error = position_error  # m, |p_d(N+1) - p(N)| before the step
        self.orientation_error = orientation_error  # rad
        self._values = {} if values is None and report is None else values
        self._weights = {} if weights is None and report is None else weights
        self._notes = {} if notes is None and report is None else notes
        self._report = report

    def _unpack(self) -> None:
        names, rep, nv, nf, max_rows = self._report
        self._values, self._weights, self._notes = {}, {}, {}
        o = 2 * nv + 14
        w0 = o + 3 * nf
        for k, name in enumerate(names):
            a, n, note = (int(x) for x in rep[o + 3 * k:o + 3 * k + 3])
            self._weights[name] = rep[w0 + a:w0 + a + n]
            self._values[name] = rep[w0 + max_rows + a:w0 + max_rows + a + n]
            if note:
                self._notes[name] = K.NOTES[note]

    @property
    def values(self) -> dict:
        if self._values is None:
            self._unpack()
        return self._values

    @property
    def weights(self) -> dict:
        if self._weights is None:
            self._unpack()
        return self._weights

    @property
    def notes(self) -> dict:
        if self._notes is None:
            self._unpack()
        return self._notes


_new_result = object.__new__

_KINDS = {ArmAngleFunction: K.ARM_ANGLE, ElbowCoordinate: K.ELBOW,
          CollisionAvoidance: K.COLLISION, JointLimitAvoidance: K.JOINT_LIMITS,
          JointLocking: K.LOCKING, OptimalJointMovement: K.OPTIMAL,
          Manipulability: K.MANIPULABILITY, GravityTorqueMinimization: K.GRAVITY,
          LinkOrientation: K.LINK_ORIENTATION}


def _frame(model: RobotModel, link: str) -> tuple[int, np.ndarray, np.ndarray]:
    f = model.frame(link)
    return int(f.body), np.asarray(f.translation, float), np.asarray(f.rotation, float)


class _Program:
    """The compiled step's buffers for one set of functions and their current parameters."""

    def __init__(self, cc: ConfigurationControl, We: np.ndarray, Wv: np.ndarray) -> None:
        m, nv, nb = cc.model, cc.model.nv, cc.model.nb
        cols = np.asarray(cc.columns, dtype=np.int64)
        na = cols.size
        ints: list[int] = []
        floats: list[float] = []
        program, self.targeted, names = [], [], []
        slot = 12 + nv
        n_spheres, max_rows = 0, 6
        for f in cc.functions:
            kind = _KINDS[type(f)]
            fi, ff = len(ints), len(floats)
            target = 0
            names.append(f.name)
            if kind == K.ARM_ANGLE:
                aa = f.arm_angle
                frames = [_frame(m, x) for x in (aa.shoulder, aa.elbow, aa.wrist)]
                ints += [b for b, _, _ in frames]
                floats += [float(f.weight), *aa.reference, aa.singular_tolerance]
                for _, t, _ in frames:
                    floats += list(t)
                target, max_rows = slot, max_rows + 1
                self.targeted.append((f.name, slot, 1))
                slot += 1
            elif kind == K.ELBOW:
                b, t, _ = _frame(m, f.elbow)
                ints += [b, "xyz".index(f.axis)]
                floats += [float(f.weight), *t]
                target, max_rows = slot, max_rows + 1
                self.targeted.append((f.name, slot, 1))
                slot += 1
            elif kind == K.COLLISION:
                b, t, _ = _frame(m, f.tip)
                ints += [len(f.spheres), b]
                floats += [float(f.gain), float(f.weight), 0.0, 0.0, 0.0, *t]
                for sp in f.spheres:
                    floats += [*sp.center, float(sp.inner_radius), float(sp.outer_radius)]
                n_spheres += len(f.spheres)
                max_rows += len(f.spheres)
            elif kind == K.JOINT_LIMITS:
                floats += [float(f.margin), float(f.gain)]
                max_rows += 2 * nv
            elif kind == K.LOCKING:
                ints += [len(f.dofs), *f.dofs]
                floats += [float(f.weight), *np.asarray(f.locked, float)]
                max_rows += len(f.dofs)
            elif kind == K.LINK_ORIENTATION:
                b, t, R = _frame(m, f.link)
                ints += [b]
                floats += [float(f.weight), *R.ravel(), *t]
                target, max_rows = slot, max_rows + 3
                self.targeted.append((f.name, slot, 9))
                slot += 9
            elif kind == K.OPTIMAL:
                floats += [float(f.weight), *f.k, *np.asarray(f.rest, float)]
                max_rows += na
            elif kind == K.MANIPULABILITY:
                b, t, _ = _frame(m, f.tip)
                ints += [b]
                floats += [float(f.gain), float(f.weight), *t]
                max_rows += na
            else:  # GRAVITY
                floats += [float(f.gain), float(f.weight)]
                max_rows += na
            program.append((kind, fi, ff, target))
        nf = len(program)
        head = np.zeros(K.HEADER, np.int64)
        head[:5] = nv, na, nf, max_rows, _frame(m, cc.tip)[0]
        head[9] = n_spheres
        self.coupled = cc.coupled
        head[10] = int(self.coupled)
        int_base = K.HEADER + na + nf * (K.PROGRAM_STRIDE + K.OUTPUT_STRIDE)
        b, t, R = _frame(m, cc.tip)
        root = np.asarray(m.frame(m.root_link).translation, float)
        mass = m.inertia[:, 3, 3].copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            com = np.where(mass[:, None] > 0, np.stack([m.inertia[:, 2, 4], m.inertia[:, 0, 5],
                                                        m.inertia[:, 1, 3]], axis=1)
                           / mass[:, None], 0.0)
        fhead = np.concatenate([t, R.ravel(), root, np.asarray(m.gravity, float), We, Wv,
                                np.asarray(m.position_lower, float),
                                np.asarray(m.position_upper, float), mass, com.ravel()])
        float_base = fhead.size
        prog = np.array([(k, fb + float_base, ib + int_base, tg) for k, ib, fb, tg in program],
                        dtype=np.int64).reshape(nf, K.PROGRAM_STRIDE)
        self.rint = np.concatenate([head, cols, prog.ravel(),
                                    np.zeros(nf * K.OUTPUT_STRIDE, np.int64),
                                    np.asarray(ints, np.int64)])
        self.rflt = np.concatenate([fhead, np.asarray(floats, float)])
        npas = m.n_passive
        self.report, size = K.step_buffer_size(nb, nv, na, npas, nf, max_rows, n_spheres)
        self.rwork = np.zeros(size)
        self.tgt = np.full(slot, np.nan)
        self.tgt[12:12 + nv] = 0.0
        self.views = K.step_views(self.rwork, nb, nv, na, npas, nf, max_rows, n_spheres)[0]
        # J_D: the report's last part
        self.jd = slice(self.report - npas * na, self.report) if self.coupled else None
        self.jd_shape = (npas, na)
        self.p_d, self.R_d = self.tgt[:3], self.tgt[3:12].reshape(3, 3)
        self.dq_d = self.tgt[12:12 + nv]
        self.dq_set = False
        self.max_rows, self.nf = max_rows, nf
        self.errors = 2 * nv + 12  # |dp|, |dθ| in the report
        self.names = tuple(names)
        self.nv = nv


class ConfigurationControl:
    """One configuration-control step per call: ``step(q, target_pose, targets) -> result``.

    ``task_weights`` W_e (6: x, y, z, rx, ry, rz), ``joint_velocity_weights`` W_v (scalar or
    nv), both attributes that can change between steps (checked at the next step).
    ``passive_motion``: ``"locked"`` or ``"disturbance"`` (see the module's docstring).
    ``compiled=False`` runs the readable Python version of the same step.
    """

    def __init__(self, model: RobotModel, tip: str, functions: Sequence = (),
                 task_weights: Sequence[float] | float = 1.0,
                 joint_velocity_weights: Sequence[float] | float = 0.0,
                 compiled: bool = True, passive_motion: str = "locked") -> None:
        if passive_motion not in PASSIVE_MOTIONS:
            raise ValueError(f"passive_motion must be one of {list(PASSIVE_MOTIONS)}, got "
                             f"'{passive_motion}'")
        model.frame(tip)
        floating = [model.joint_names[k] for k in range(model.nb)
                    if model.hinge_type[k] == FLOATING]
        if floating:
            raise ValueError(f"configuration control handles 1-DOF joints only, not {floating}")
        self.model, self.tip = model, tip
        self.functions = list(functions)
        self.task_weights = task_weights
        self.joint_velocity_weights = joint_velocity_weights
        self.workspace = JacobianWorkspace(model)
        self.columns = model.active_dofs
        # passive joints moved by the active ones (dθ_p = J_D dθ_a), not locked
        self.coupled = passive_motion == "disturbance" and model.n_passive > 0
        self._want_compiled = compiled
        self._kinematics: HybridDynamics | None = None
        self.functions = self.functions  # decides ``compiled``
        self._program: _Program | None = None
        self._key: tuple = ()
        self._seen = -1
        self._shape = (model.nv,)

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name in ("task_weights", "joint_velocity_weights", "functions"):
            object.__setattr__(self, "_program", None)  # repacked at the next step
        if name == "functions" and hasattr(self, "_want_compiled"):
            # the compiled step knows the built-in functions; any other: the Python step
            compiled = self._want_compiled and all(type(f) in _KINDS for f in value)
            object.__setattr__(self, "compiled", compiled)
            if compiled and self._kinematics is None:
                object.__setattr__(self, "_kinematics", HybridDynamics(self.model))

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        We = np.broadcast_to(np.asarray(self.task_weights, dtype=float), (6,)).copy()
        Wv = np.broadcast_to(np.asarray(self.joint_velocity_weights, dtype=float),
                             (self.model.nv,)).copy()
        for name, w in (("task_weights", We), ("joint_velocity_weights", Wv)):
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"{name} must be finite and >= 0, got {w.tolist()}")
        return We, Wv

    def step(self, q: np.ndarray, target_pose: tuple[np.ndarray, np.ndarray],
             targets: dict | None = None, desired_dq: np.ndarray | None = None
             ) -> StepResult:
        """Move from q toward the next desired sample (target position, rotation matrix) and
        the functions' targets (e.g. ``{"arm_angle": psi_next}``). ``desired_dq``: desired
        joint change over this sample (θ̇_d Δt), penalised by W_v (claims 11, 18, 20)."""
        if not self.compiled:
            return self.step_python(q, target_pose, targets, desired_dq)
        if q.__class__ is not np.ndarray or q.dtype != np.float64 or q.shape != self._shape:
            q = np.ascontiguousarray(q, dtype=float)
            self.model.check_state(q=q)
        pr = self._program
        if pr is None or (STAMP[0] != self._seen
                          and self._key != tuple(f._stamp for f in self.functions)):
            pr = self._pack(q)
        self._seen = STAMP[0]
        pr.p_d[:] = target_pose[0]
        pr.R_d[:] = target_pose[1]
        if desired_dq is not None:
            pr.dq_d[:] = desired_dq
            pr.dq_set = True
        elif pr.dq_set:
            pr.dq_d[:] = 0.0
            pr.dq_set = False
        tgt = pr.tgt
        for name, slot, size in pr.targeted:
            value = None if targets is None else targets.get(name)
            if size == 1:
                tgt[slot] = np.nan if value is None else value
            else:
                held = value if value is not None else self._held(name)
                tgt[slot:slot + 9] = np.asarray(held, float).ravel()
        ints, consts, work = pr.buffers
        status = K.configuration_step(ints, consts, work, pr.rint, pr.rflt, pr.rwork, q, tgt)
        if status == K.NONFINITE_Q:
            self.model.check_state(q=q)
        elif status == K.SINGULAR_PASSIVE:
            raise ValueError("the passive joints' articulated inertia is singular at this "
                             "configuration (no J_D)")
        rep = pr.rwork[:pr.report].copy()  # dq, q_next, hand, outputs, W, value, J_D
        res = _new_result(StepResult)
        nv = pr.nv
        res.dq, res.q_next = rep[:nv], rep[nv:2 * nv]
        res.position_error, res.orientation_error = rep[pr.errors:pr.errors + 2].tolist()
        res.J_D = None if pr.jd is None else rep[pr.jd].reshape(pr.jd_shape)
        res._values = res._weights = res._notes = None
        res._report = (pr.names, rep, nv, pr.nf, pr.max_rows)
        return res

    def _held(self, name: str) -> np.ndarray:
        f = next(f for f in self.functions if f.name == name)
        return f.held

    def _pack(self, q: np.ndarray) -> _Program:
        """(Re)build the compiled step's buffers: first-step state of the functions (locked
        joints, spring rest angles, held orientations), then their parameters."""
        for f in self.functions:
            if isinstance(f, JointLocking) and f.locked is None:
                f.locked = q[f.q_index].copy()
            elif isinstance(f, OptimalJointMovement) and f.rest is None:
                f.rest = q.copy()
            elif isinstance(f, OptimalJointMovement) and f.k.shape != (self.model.nv,):
                raise ValueError(f"stiffness needs {self.model.nv} values >= 0")
            elif isinstance(f, LinkOrientation) and f.held is None:
                self.workspace.set_configuration(q)
                f.held = self.workspace.frame_placement(f.link)[1].copy()
        We, Wv = self._weights()
        pr = _Program(self, We, Wv)
        pr.buffers = self._kinematics.buffers
        object.__setattr__(self, "_program", pr)
        object.__setattr__(self, "_key", tuple(f._stamp for f in self.functions))
        return pr

    def step_python(self, q: np.ndarray, target_pose: tuple[np.ndarray, np.ndarray],
                    targets: dict | None = None, desired_dq: np.ndarray | None = None
                    ) -> StepResult:
        """The same step in Python, function by function (``rows(ctx)``): the reference."""
        m, ws = self.model, self.workspace
        q = np.asarray(q, dtype=float)
        m.check_state(q=q)
        We, Wv = self._weights()
        ws.set_configuration(q)
        p, R = ws.frame_placement(self.tip)
        J_e = ws.frame_jacobian(self.tip).copy()
        p_d, R_d = np.asarray(target_pose[0], float), np.asarray(target_pose[1], float)
        dX_e = np.concatenate([p_d - p, rotation_error(R_d, R)])
        c, pas = self.columns, m.passive_dofs
        J_D, hand = None, J_e
        if self.coupled:  # J_D at q (6.13); the functions see the hand's J_G (6.11)
            J_D = ws.generalized(None, q)[1].copy()
            hand = J_e.copy()
            hand[:, c] += J_e[:, pas] @ J_D
            hand[:, pas] = 0.0
        ctx = Context(q=q, workspace=ws, hand_jacobian=hand, targets=targets or {})
        for f in self.functions:
            if isinstance(f, CollisionAvoidance):
                ctx.elbow_fade = min(ctx.elbow_fade, f.fade(ws))
        rows_J, rows_dX, rows_W = [J_e], [dX_e], [We]
        result = StepResult(q_next=q, dq=np.zeros(m.nv),
                            position_error=float(np.linalg.norm(dX_e[:3])),
                            orientation_error=float(np.linalg.norm(dX_e[3:])))
        for f in self.functions:
            r = f.rows(ctx)
            rows_J.append(r.jacobian)
            rows_dX.append(r.delta)
            rows_W.append(r.weight)
            result.values[f.name] = r.value
            result.weights[f.name] = r.weight
            if r.note:
                result.notes[f.name] = r.note
        J = np.vstack(rows_J)
        J = J[:, c] + J[:, pas] @ J_D if self.coupled else J[:, c]  # r_a + r_p J_D
        dX = np.concatenate(rows_dX)
        W = np.concatenate(rows_W)
        dq_d = np.zeros(m.nv) if desired_dq is None else np.asarray(desired_dq, float)
        JtW = J.T * W
        H = JtW @ J + np.diag(Wv[c])  # (10): (Jᵀ W J + W_v) dθ = Jᵀ W dX + W_v dθ_d
        rhs = JtW @ dX + Wv[c] * dq_d[c]
        try:
            L = np.linalg.cholesky(H)
            if np.diag(L).min() < K.PIVOT_TOLERANCE * np.sqrt(max(np.diag(H).max(), 1e-300)):
                raise np.linalg.LinAlgError("ill-conditioned")
            dq_active = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
        except np.linalg.LinAlgError:  # rank-deficient with W_v = 0: least squares
            sw, sv = np.sqrt(W), np.sqrt(Wv[c])
            A = np.vstack([sw[:, None] * J, np.diag(sv)])
            b = np.concatenate([sw * dX, sv * dq_d[c]])
            # directions weaker than 1e-7 of the strongest are not moved (a capped collision
            # weight of 1e8 next to a near-singular row gave 1e8 rad steps with 1e-12)
            dq_active = np.linalg.lstsq(A, b, rcond=1e-7)[0]
        dq = np.zeros(m.nv)
        dq[c] = dq_active
        if self.coupled:
            dq[pas] = J_D @ dq_active  # dθ_p = J_D dθ_a (6.12, first order)
            result.J_D = J_D
        result.dq = dq
        result.q_next = q + dq
        return result


class ConfigurationTrajectory:
    """Cycloidal hand pose (straight line, geodesic orientation) and arm angle from a start to
    a goal in ``duration`` s (doc/architecture.md §5). The arm angle takes the shorter way round
    (from 170° to -170° through 180°, not through 0°)."""

    def __init__(self, p0, R0, psi0: float, p1, R1, psi1: float, duration: float) -> None:
        self.hand = LineTrajectory(np.asarray(p0, float), np.asarray(R0, float),
                                   np.asarray(p1, float), np.asarray(R1, float), duration)
        if not (np.isfinite(psi0) and np.isfinite(psi1)):
            raise ValueError(f"arm angles must be finite, got {psi0} and {psi1}")
        self.psi0, self.duration = psi0, duration
        self.psi1 = psi0 + (psi1 - psi0 + np.pi) % (2 * np.pi) - np.pi

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray, float]:
        ref = self.hand(t)
        s, _, _ = cycloidal(t, self.duration)
        return ref.position, ref.rotation, self.psi0 + s * (self.psi1 - self.psi0)
