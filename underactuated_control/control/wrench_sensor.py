"""Force-torque sensor readings -> the measured wrench of operational-space force control.

The law's F_measured (``OperationalSpaceLaw.measured_wrench``) is [force; moment] at the task
frame's origin T, root axes: the wrench the robot applies through its end effector to what is
beyond it (mujoco_sim's ``~/contact_wrench`` convention). A sensor reports it in its own frame S
(about S's origin, S's axes), with a bias, and with the weight of the tool beyond it. Per reading:

    w_S = r − b + G_S(q)                                           tool weight, bias   (S.1)
    y  ← y + α (w_S − y),   α = 1 − exp(−2π f_c Δt)                first-order filter  (S.2)
    f_T = R_S f_y,   m_T = R_S m_y + (p_S − p_T) × f_T                carried to T     (S.3)

G_S: the tool's weight as a wrench at S in S's axes, [Rᵀ m g; Rᵀ ((c − p_S) × m g)] (c its
centre of mass, root coordinates): holding a tool still, the arm pushes it up with −G_S, which
(S.1) cancels. The bias b is taken at a zeroing, after the tool-weight term: b = r + G_S(q)
then. (S.3) is the rigid-body transport of a force (Featherstone's X*): Pinocchio's
``SE3(R_S, p_S − p_T).act(Force)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..jacobians import JacobianWorkspace
from ..model import RobotModel

__all__ = ["carry_wrench", "tool_weight", "WrenchSensor"]


def carry_wrench(wrench: np.ndarray, R: np.ndarray, p_from: np.ndarray,
                 p_to: np.ndarray) -> np.ndarray:
    """(S.3): ``wrench`` [force; moment] about ``p_from`` in the axes ``R`` (their columns in
    root coordinates) -> root axes, about ``p_to`` (points in root coordinates)."""
    f = R @ wrench[:3]
    return np.concatenate([f, R @ wrench[3:] + np.cross(p_from - p_to, f)])


def tool_weight(mass: float, com: np.ndarray, point: np.ndarray, R: np.ndarray,
                gravity: np.ndarray) -> np.ndarray:
    """G of (S.1): the weight m g acting at ``com`` as a wrench about ``point`` in the axes
    ``R`` (points in root coordinates, ``gravity`` in root axes)."""
    w = mass * np.asarray(gravity, dtype=float)
    return np.concatenate([R.T @ w, R.T @ np.cross(com - point, w)])


class WrenchSensor:
    """(S.1)–(S.3) for one model and task frame. ``cutoff`` [Hz] (0: no filter); ``payload``
    (frame, mass, com in the frame's axes) or None: the tool, removed from readings of a sensor
    it hangs beyond (its frame's body at or below the sensor's); a reading in the root link's
    axes (frame_id empty or the root link) is already at T: only the bias and the filter apply."""

    def __init__(self, model: RobotModel, task_frame: str, cutoff: float = 0.0,
                 payload: tuple[str, float, np.ndarray] | None = None) -> None:
        if not (math.isfinite(cutoff) and cutoff >= 0.0):
            raise ValueError(f"cutoff must be >= 0 Hz, got {cutoff}")
        model.frame(task_frame)
        self.model, self.task_frame, self.cutoff = model, task_frame, cutoff
        self.payload = payload
        self.ws = JacobianWorkspace(model)
        self.bias: np.ndarray | None = None
        self.bias_frame = ""
        self._zero_next = False
        self._y: np.ndarray | None = None
        self._t: float | None = None
        self._frame = ""

    def request_zero(self) -> None:
        """The next reading becomes the zero (b of (S.1))."""
        self._zero_next = True

    def zero(self, reading: np.ndarray, frame: str, q: np.ndarray) -> np.ndarray:
        """``reading`` (in ``frame``, at ``q``) becomes the zero now; returns the bias."""
        self.bias, self.bias_frame = self.compensated(reading, frame, q), frame
        self._zero_next, self._frame, self._y, self._t = False, frame, None, None
        return self.bias

    def keep_state_of(self, old: WrenchSensor) -> None:
        """The bias (and a pending zeroing) of the sensor this one replaces."""
        self.bias, self.bias_frame, self._zero_next = old.bias, old.bias_frame, old._zero_next

    def _root_frame(self, frame: str) -> bool:
        return frame in ("", self.model.root_link)

    def _sees_payload(self, frame: str) -> bool:
        if self.payload is None or self.payload[1] == 0.0:
            return False
        body = self.model.frame(self.payload[0]).body
        sensor = self.model.frame(frame).body
        while body >= 0 and body != sensor:
            body = self.model.parent[body]
        return body == sensor

    def compensated(self, reading: np.ndarray, frame: str, q: np.ndarray) -> np.ndarray:
        """(S.1) without the bias: ``reading`` plus the tool weight when the sensor carries
        it (``q``: the model's configuration). ``ValueError`` for an unknown frame."""
        w = np.array(reading, dtype=float)
        if self._root_frame(frame):
            return w
        self.model.frame(frame)
        if self._sees_payload(frame):
            pframe, mass, com = self.payload
            self.ws.set_configuration(q)
            p_s, R_s = self.ws.frame_placement(frame)
            p_p, R_p = self.ws.frame_placement(pframe)
            w += tool_weight(mass, p_p + R_p @ np.asarray(com, float), p_s, R_s,
                             self.model.gravity)
        return w

    def process(self, reading: np.ndarray, frame: str, q: np.ndarray, t: float) -> np.ndarray:
        """(S.1)–(S.3): [force; moment] at the task frame, root axes; ``t`` [s] the reading's
        time (the filter's Δt)."""
        w = self.compensated(reading, frame, q)
        if frame != self._frame:  # another sensor frame: bias and filter start over
            self._frame, self._y, self._t = frame, None, None
            if frame != self.bias_frame:
                self.bias = None
        if self._zero_next:
            self.bias, self.bias_frame, self._zero_next = w.copy(), frame, False
            self._y = None
        if self.bias is not None:
            w -= self.bias
        if self.cutoff > 0.0 and self._y is not None and self._t is not None and t > self._t:
            alpha = 1.0 - math.exp(-2.0 * math.pi * self.cutoff * (t - self._t))
            self._y += alpha * (w - self._y)
        else:
            self._y = w
        self._t = t
        y = self._y
        if self._root_frame(frame):
            return y.copy()
        self.ws.set_configuration(q)
        p_s, R_s = self.ws.frame_placement(frame)
        p_t = self.ws.frame_placement(self.task_frame)[0]
        return carry_wrench(y, R_s, p_s, p_t)
