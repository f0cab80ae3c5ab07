"""Offline planning (paper §6.2, patent claim 10): integrate a whole end-effector trajectory into
a time profile of the active joint forces T_a(t) and of the passive joints' motion.

At each step t: J_G(t), qdd_a from the desired frame acceleration, T_a and qdd_p from the hybrid
recursion (``EndEffectorTracker.step``), then integrate (semi-implicit Euler on the manifold):
v(t+dt) = v + qdd dt, q(t+dt) = q (+) v(t+dt) dt.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..jacobians import frame_placement
from ..so3 import rotation_error
from .task_space import EndEffectorTracker, TaskReference

__all__ = ["PlanResult", "plan_trajectory"]


@dataclass
class PlanResult:
    """Time profiles; rows are time samples."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau_active: np.ndarray
    qdd_passive: np.ndarray
    position_error: np.ndarray  # m, norm
    orientation_error: np.ndarray  # rad, norm
    singular: np.ndarray  # bool
    q_names: list[str]
    v_names: list[str]
    active_names: list[str]
    passive_names: list[str]
    diverged: str = ""  # why the integration stopped before the end (empty: it did not)

    def summary(self) -> dict[str, float]:
        return {
            "samples": int(len(self.t)),
            "duration_s": float(self.t[-1]) if len(self.t) else 0.0,
            "max_position_error_m": float(self.position_error.max(initial=0.0)),
            "max_orientation_error_rad": float(self.orientation_error.max(initial=0.0)),
            "max_abs_tau_active": float(np.abs(self.tau_active).max(initial=0.0)),
            "max_abs_qdd_passive": float(np.abs(self.qdd_passive).max(initial=0.0)),
            "singular_samples": int(self.singular.sum()),
        }

    def save(self, path: str | Path) -> Path:
        """``.npz`` (arrays and names) or ``.csv`` (one column per quantity, SI units)."""
        path = Path(path)
        if path.suffix == ".npz":
            np.savez(path, t=self.t, q=self.q, v=self.v, tau_active=self.tau_active,
                     qdd_passive=self.qdd_passive, position_error=self.position_error,
                     orientation_error=self.orientation_error, singular=self.singular,
                     q_names=np.array(self.q_names), v_names=np.array(self.v_names),
                     active_names=np.array(self.active_names),
                     passive_names=np.array(self.passive_names))
            return path
        if path.suffix != ".csv":
            raise ValueError(f"output file must end in .csv or .npz, got '{path.name}'")
        header = (["t"] + [f"q[{n}]" for n in self.q_names] + [f"v[{n}]" for n in self.v_names]
                  + [f"tau_active[{n}]" for n in self.active_names]
                  + [f"qdd_passive[{n}]" for n in self.passive_names]
                  + ["position_error", "orientation_error", "singular"])
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            for k in range(len(self.t)):
                w.writerow([f"{self.t[k]:.6f}", *self.q[k], *self.v[k], *self.tau_active[k],
                            *self.qdd_passive[k], self.position_error[k],
                            self.orientation_error[k], int(self.singular[k])])
        return path

    def plot(self, path: str | Path) -> Path:
        """PNG: frame error, active forces and passive joint motion against time."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
        ax[0].plot(self.t, 1e3 * self.position_error, label="position error [mm]")
        ax[0].plot(self.t, np.degrees(self.orientation_error), label="orientation error [deg]")
        ax[0].legend()
        ax[0].set_title("frame tracking error")
        for k, n in enumerate(self.active_names):
            ax[1].plot(self.t, self.tau_active[:, k], label=n)
        ax[1].set_ylabel("T_a [N·m | N]")
        ax[1].legend(fontsize=7, ncol=4)
        idx = [self.v_names.index(n) for n in self.passive_names]
        for k, n in zip(idx, self.passive_names):
            ax[2].plot(self.t, self.v[:, k], label=f"v[{n}]")
        ax[2].set_ylabel("passive joint velocity [rad/s | m/s]")
        ax[2].set_xlabel("t [s]")
        if idx:
            ax[2].legend(fontsize=7, ncol=3)
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def plan_trajectory(tracker: EndEffectorTracker, trajectory: Callable[[float], TaskReference],
                    q0: np.ndarray, v0: np.ndarray, duration: float, dt: float = 1e-3,
                    progress: bool = False) -> PlanResult:
    """Integrate the tracked trajectory from (q0, v0) for ``duration`` s with step ``dt`` s."""
    if not (np.isfinite(duration) and duration > 0):
        raise ValueError(f"duration must be > 0 s, got {duration}")
    if not (np.isfinite(dt) and 0 < dt <= duration):
        raise ValueError(f"dt must be in (0, duration] s, got {dt}")
    m = tracker.model
    q = np.array(q0, dtype=float)
    v = np.array(v0, dtype=float)
    m.check_state(q=q, v=v)
    n = int(round(duration / dt)) + 1
    out = {k: [] for k in ("t", "q", "v", "tau", "qddp", "ep", "eo", "sing")}
    diverged = ""
    for k in range(n):
        t = k * dt
        ref = trajectory(t)
        try:
            res = tracker.step(q, v, ref)
            finite = bool(np.all(np.isfinite(res.qdd)) and np.all(np.isfinite(res.tau_active)))
            reason = "non-finite accelerations"
        except ValueError as exc:
            if k == 0:
                raise  # bad input, not a diverging motion
            finite, reason = False, str(exc)
        if not finite:  # the motion ran away: keep what was integrated, say where it ended
            diverged = f"the integration diverged at t = {t:.4f} s ({reason})"
            break
        p, R = frame_placement(m, q, tracker.frame)
        out["t"].append(t)
        out["q"].append(q.copy())
        out["v"].append(v.copy())
        out["tau"].append(res.tau_active)
        out["qddp"].append(res.qdd_passive)
        out["ep"].append(np.linalg.norm(np.asarray(ref.position) - p))
        out["eo"].append(np.linalg.norm(rotation_error(np.asarray(ref.rotation), R)))
        out["sing"].append(res.singular)
        v = v + res.qdd * dt
        q = m.integrate(q, v, dt)
        if progress and n >= 10 and k % (n // 10) == 0:
            print(f"[plan] t = {t:7.3f} s / {duration:.3f} s, position error "
                  f"{1e3 * out['ep'][-1]:.3f} mm", file=sys.stderr)
    q_names = []
    for j, name in enumerate(m.joint_names):
        if m.nq_joint[j] == 7:
            q_names += [f"{name}/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")]
        else:
            q_names.append(name)
    n = len(out["t"])
    return PlanResult(
        t=np.array(out["t"]), q=np.array(out["q"]).reshape(n, m.nq),
        v=np.array(out["v"]).reshape(n, m.nv),
        tau_active=np.array(out["tau"]).reshape(n, m.n_active),
        qdd_passive=np.array(out["qddp"]).reshape(n, m.n_passive),
        position_error=np.array(out["ep"]), orientation_error=np.array(out["eo"]),
        singular=np.array(out["sing"], dtype=bool), q_names=q_names,
        v_names=list(m.dof_names), active_names=[m.dof_names[i] for i in m.active_dofs],
        passive_names=[m.dof_names[i] for i in m.passive_dofs], diverged=diverged)
