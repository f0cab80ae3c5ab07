"""The MuJoCo model of a robot, built from its URDF and ``RobotModel`` as ``mujoco_sim`` runs it.

Dynamics only (visuals, collisions, ``<ros2_control>``, ``<gazebo>``, ``<transmission>``
dropped); a MuJoCo free joint for a floating base the URDF does not declare (one it declares is
one already); a motor ``motor_<joint>`` on each actuated joint, its ``ctrlrange`` the URDF
effort limit where that is finite (unlimited otherwise). Passive joints feel only their URDF
damping, dry friction and limits.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..floating_base import floating_root
from ..model import RobotModel

INTEGRATORS = ("euler", "rk4", "implicit", "implicitfast")
_DROPPED = ("visual", "collision", "ros2_control", "gazebo", "transmission")


def dynamics_only(urdf: str) -> str:
    """The URDF without <visual>, <collision> (meshes are not needed for dynamics),
    <ros2_control>, <gazebo> and <transmission>, edited as XML."""
    root = ET.fromstring(urdf.lstrip("\ufeff"))
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in _DROPPED:
                parent.remove(child)
    return ET.tostring(root, encoding="unicode")


def mujoco_spec(urdf: str, model: RobotModel, motors: Iterable[str] | None = None, *,
                timestep: float = 1e-3, integrator: str = "implicitfast",
                gravity: Sequence[float] = (0.0, 0.0, -9.81), floating: bool | None = None):
    """The ``mujoco.MjSpec`` of ``urdf`` (XML text; ``model`` is its ``RobotModel``) before
    compiling (a caller may add sites or geoms): ``motors``: the joints with a motor (default
    the model's active joints); ``floating``: whether the model has a floating base (default:
    found from the model)."""
    import mujoco

    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator must be one of {list(INTEGRATORS)}, got '{integrator}'")
    spec = mujoco.MjSpec.from_string(dynamics_only(urdf))
    spec.option.timestep = timestep
    spec.option.gravity = list(gravity)
    spec.option.integrator = {
        "euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4,
        "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
        "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}[integrator]
    if floating is None:
        floating = floating_root(model) is not None
    if floating and model.joint_names[0] not in [j.name for j in spec.joints]:
        # the model's floating_base added it (a URDF-declared floating joint is a free joint)
        spec.body(model.body_names[0]).add_freejoint().name = model.joint_names[0]
    limits = dict(zip(model.dof_names, model.effort_limit))
    for name in model.active_joints if motors is None else motors:
        act = spec.add_actuator()
        act.name = f"motor_{name}"
        act.target = name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        if np.isfinite(limits[name]):
            act.ctrlrange = [-limits[name], limits[name]]
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    return spec


@dataclass
class Plant:
    """A compiled MuJoCo model and its data, with the addresses of the model's 1-DOF joints
    (``joints``, in model order) and of the motors (``motors``: joint names, ``ctrl``: their
    actuator indices)."""

    m: Any
    d: Any
    joints: list[str]
    qadr: np.ndarray
    vadr: np.ndarray
    motors: list[str]
    ctrl: np.ndarray

    @classmethod
    def compile(cls, spec, joints: Sequence[str], motors: Sequence[str]) -> Plant:
        import mujoco

        m = spec.compile()
        d = mujoco.MjData(m)
        return cls(m, d, list(joints),
                   np.array([m.jnt_qposadr[m.joint(n).id] for n in joints], int),
                   np.array([m.jnt_dofadr[m.joint(n).id] for n in joints], int),
                   list(motors), np.array([m.actuator(f"motor_{n}").id for n in motors], int))

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) of the joints, copies."""
        return self.d.qpos[self.qadr].copy(), self.d.qvel[self.vadr].copy()

    def set_state(self, q: np.ndarray, v: np.ndarray | None = None) -> None:
        import mujoco

        self.d.qpos[self.qadr] = q
        if v is not None:
            self.d.qvel[self.vadr] = v
        mujoco.mj_forward(self.m, self.d)

    def step(self) -> None:
        import mujoco

        mujoco.mj_step(self.m, self.d)

    def clip(self, tau: np.ndarray) -> np.ndarray:
        """Motor torques as the motors give them (within ``ctrlrange`` where limited)."""
        limit = np.where(self.m.actuator_ctrllimited[self.ctrl].astype(bool),
                         self.m.actuator_ctrlrange[self.ctrl, 1], np.inf)
        return np.clip(tau, -limit, limit)


def build_plant(urdf: str, model: RobotModel | None = None, motors: Sequence[str] | None = None,
                **spec_args: Any) -> Plant:
    """``mujoco_spec`` compiled, for the model's 1-DOF joints (``spec_args``: timestep,
    integrator, gravity)."""
    model = RobotModel.from_urdf(urdf) if model is None else model
    motors = list(model.active_joints) if motors is None else list(motors)
    joints = [model.joint_names[k] for k in range(model.nb) if model.nv_joint[k] == 1]
    return Plant.compile(mujoco_spec(urdf, model, motors, **spec_args), joints, motors)


class AppliedWrench:
    """An external wrench on one body of a compiled MuJoCo model ``m`` (built by ``mujoco_spec``
    from ``model``, whose body names it keeps), given at a frame of ``model``:
    force f and torque m about the frame's origin p_o, both in world axes, held until replaced.

    MuJoCo's ``xfrc_applied`` acts at the body's centre of mass p_c, so the torque is carried
    there: m_c = m + (p_o − p_c) × f (the moment of f, applied at p_o, about p_c), with p_o and
    p_c at the configuration of the step about to be taken (``mj_kinematics`` first: the
    positions MuJoCo keeps after a step are those of the state before it)."""

    def __init__(self, m, model: RobotModel) -> None:
        import mujoco

        self.mj, self.m, self.model = mujoco, m, model
        self.body = -1  # MuJoCo body receiving the wrench (-1: none)
        self.offset = np.zeros(3)  # frame origin in the body's coordinates
        self.wrench = np.zeros(6)  # [f; m] at the frame's origin, world axes
        self.frame = ""

    def set(self, frame: str, wrench: np.ndarray, d) -> None:
        """Apply ``wrench`` at ``frame`` from the next step on (replacing the one before); a
        zero wrench clears it. ``ValueError`` (one line) for a non-finite wrench or a frame
        that is not in the model or does not move; the wrench before is then kept."""
        wrench = np.asarray(wrench, dtype=float)
        if not np.all(np.isfinite(wrench)):
            raise ValueError(f"non-finite wrench at '{frame}'")
        if not np.any(wrench):
            self.clear(d)
            return
        if not frame:
            raise ValueError("header.frame_id is empty: name the link (or frame) to push")
        try:
            f = self.model.frame(frame)
        except ValueError:
            raise ValueError(f"header.frame_id '{frame}' is not a link or frame of "
                             f"'{self.model.name}'") from None
        if f.body < 0:
            raise ValueError(f"header.frame_id '{frame}' is fixed to the root link: nothing "
                             "moves it")
        self.clear(d)
        self.body = self.m.body(self.model.body_names[f.body]).id
        self.offset = np.array(f.translation, dtype=float)
        self.wrench, self.frame = wrench.copy(), frame

    def clear(self, d) -> None:
        if self.body >= 0:
            d.xfrc_applied[self.body] = 0.0
        self.body, self.frame = -1, ""
        self.wrench = np.zeros(6)

    def apply(self, d) -> None:
        """Write ``xfrc_applied`` for the step about to be taken."""
        if self.body < 0:
            return
        self.mj.mj_kinematics(self.m, d)
        b = self.body
        origin = d.xpos[b] + d.xmat[b].reshape(3, 3) @ self.offset
        f = self.wrench[:3]
        d.xfrc_applied[b, :3] = f
        d.xfrc_applied[b, 3:] = self.wrench[3:] + np.cross(origin - d.xipos[b], f)

