"""Independent references for the tests: Pinocchio models of the same URDF, random robots.

Nothing here imports the library's dynamics; it only maps names and configuration layouts so
that our vectors and Pinocchio's can be compared.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from helpers import EXAMPLE_ROBOTS

ROBOTS = EXAMPLE_ROBOTS  # example-robot-data's robots/ (test/helpers.py)

EXAMPLE_URDFS = {
    "panda": ROBOTS / "panda_description/urdf/panda.urdf",
    "ur5": ROBOTS / "ur_description/urdf/ur5_robot.urdf",
    "ur10": ROBOTS / "ur_description/urdf/ur10_robot.urdf",
    "double_pendulum": ROBOTS / "double_pendulum_description/urdf/double_pendulum.urdf",
    "double_pendulum_continuous": ROBOTS
    / "double_pendulum_description/urdf/double_pendulum_continuous.urdf",
    "double_pendulum_simple": ROBOTS
    / "double_pendulum_description/urdf/double_pendulum_simple.urdf",
    "solo12": ROBOTS / "solo_description/robots/solo12.urdf",
    "kinova": ROBOTS / "kinova_description/robots/kinova.urdf",
    "z1": ROBOTS / "z1_description/urdf/z1.urdf",
}


def full_crba(pm, pd, q_pin: np.ndarray) -> np.ndarray:
    """The whole mass matrix from ``pin.crba`` (which fills the upper triangle only)."""
    M = pin.crba(pm, pd, q_pin)
    return np.triu(M) + np.triu(M, 1).T


class PinRef:
    """A Pinocchio model of a URDF plus the maps between its vectors and ours."""

    def __init__(self, model, urdf_text: str, floating: bool = False) -> None:
        if floating:
            self.pm = pin.buildModelFromXML(urdf_text, pin.JointModelFreeFlyer())
        else:
            self.pm = pin.buildModelFromXML(urdf_text)
        self.pm.gravity.linear = np.asarray(model.gravity, dtype=float)
        self.pd = self.pm.createData()
        self.model = model
        names = list(self.pm.names)
        self.v_perm = np.zeros(model.nv, dtype=int)  # ours[i] <-> pin[v_perm[i]]
        self.q_map: list[tuple[int, int, str]] = []
        for k, jn in enumerate(model.joint_names):
            pin_name = "root_joint" if (floating and jn == "root_joint") else jn
            jid = names.index(pin_name)
            jm = self.pm.joints[jid]
            nv = int(model.nv_joint[k])
            self.v_perm[model.v_start[k] : model.v_start[k] + nv] = np.arange(
                jm.idx_v, jm.idx_v + nv
            )
            kind = "cont" if jm.nq == 2 and jm.nv == 1 else "plain"
            self.q_map.append((int(model.q_start[k]), jm.idx_q, kind if nv == 1 else "free"))
        assert self.pm.nv == model.nv, (self.pm.nv, model.nv)

    def q(self, q_ours: np.ndarray) -> np.ndarray:
        out = np.zeros(self.pm.nq)
        for i, j, kind in self.q_map:
            if kind == "cont":
                out[j], out[j + 1] = np.cos(q_ours[i]), np.sin(q_ours[i])
            elif kind == "free":
                out[j : j + 7] = q_ours[i : i + 7]
            else:
                out[j] = q_ours[i]
        return out

    def v(self, v_ours: np.ndarray) -> np.ndarray:
        out = np.zeros(self.pm.nv)
        out[self.v_perm] = v_ours
        return out

    def back(self, v_pin: np.ndarray) -> np.ndarray:
        return np.asarray(v_pin)[self.v_perm]

    def mass_matrix(self, q):
        return full_crba(self.pm, self.pd, self.q(q))[np.ix_(self.v_perm, self.v_perm)]

    def frame_jacobian(self, q, frame: str) -> np.ndarray:
        """Pinocchio's LOCAL_WORLD_ALIGNED Jacobian of ``frame`` ([linear; angular], our DOF
        order); also leaves the frame placements of q in ``self.pd.oMf``."""
        pin.computeJointJacobians(self.pm, self.pd, self.q(q))
        pin.framesForwardKinematics(self.pm, self.pd, self.q(q))
        fid = self.pm.getFrameId(frame)
        return pin.getFrameJacobian(self.pm, self.pd, fid, pin.LOCAL_WORLD_ALIGNED)[:, self.v_perm]

    def generalized_jacobians(self, q, frame: str, active, passive):
        """Dense J_G = J_a + J_p J_D and J_D = -M_pp⁻¹ M_pa (fixed base, §6.1)."""
        M = self.mass_matrix(q)
        J_D = -np.linalg.solve(M[np.ix_(passive, passive)], M[np.ix_(passive, active)])
        J = self.frame_jacobian(q, frame)
        return J[:, active] + J[:, passive] @ J_D, J_D

    def rnea(self, q, v, a):
        return self.back(pin.rnea(self.pm, self.pd, self.q(q), self.v(v), self.v(a)))

    def aba(self, q, v, tau):
        return self.back(pin.aba(self.pm, self.pd, self.q(q), self.v(v), self.v(tau)))

    def nle(self, q, v):
        return self.back(pin.nonLinearEffects(self.pm, self.pd, self.q(q), self.v(v)))

    def dense_hybrid(self, q, v, qdd_active, tau_passive, active, passive):
        """(4.2)/(4.4): partition M and C + g, solve M_pp qdd_p = T_p - C_p - M_pa qdd_a."""
        M = self.mass_matrix(q)
        h = self.nle(q, v)
        rhs = tau_passive - h[passive] - M[np.ix_(passive, active)] @ qdd_active
        qdd_p = np.linalg.solve(M[np.ix_(passive, passive)], rhs) if len(passive) else np.zeros(0)
        tau_a = (
            M[np.ix_(active, active)] @ qdd_active + M[np.ix_(active, passive)] @ qdd_p + h[active]
        )
        return tau_a, qdd_p


def random_tree_urdf(
    rng: np.random.Generator,
    n_bodies: int,
    chain: bool = False,
    prismatic: bool = True,
    fixed_links: bool = True,
    name: str = "random",
) -> str:
    """A random URDF tree: random axes, offsets with rotations, inertial frames with rpy,
    some prismatic joints and some fixed (merged) links."""
    lines = [f'<robot name="{name}">']

    def inertial(rng):
        m = rng.uniform(0.2, 3.0)
        # principal moments satisfying the triangle inequality
        a, b = rng.uniform(0.01, 0.2, 2)
        c = rng.uniform(abs(a - b) + 1e-3, a + b)
        xyz = rng.uniform(-0.2, 0.2, 3)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        return (
            f'<inertial><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" rpy="{rpy[0]} {rpy[1]} '
            f'{rpy[2]}"/><mass value="{m}"/><inertia ixx="{a}" ixy="0" ixz="0" iyy="{b}" '
            f'iyz="0" izz="{c}"/></inertial>'
        )

    lines.append(f'<link name="base">{inertial(rng)}</link>')
    link_names = ["base"]
    for i in range(n_bodies):
        parent = link_names[-1] if chain or i == 0 else link_names[rng.integers(0, len(link_names))]
        child = f"link{i + 1}"
        xyz = rng.uniform(-0.4, 0.4, 3)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        jtype = (
            "prismatic"
            if (prismatic and rng.uniform() < 0.2)
            else ("continuous" if rng.uniform() < 0.2 else "revolute")
        )
        limit = '<limit lower="-2.5" upper="2.5" effort="100" velocity="3"/>'
        lines.append(
            f'<joint name="joint{i + 1}" type="{jtype}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" '
            f'rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/><axis xyz="{axis[0]} {axis[1]} {axis[2]}"/>'
            f'{limit if jtype != "continuous" else ""}<dynamics damping="{rng.uniform(0, 0.5)}" '
            f'friction="{rng.uniform(0, 0.3)}"/></joint>'
        )
        lines.append(f'<link name="{child}">{inertial(rng)}</link>')
        link_names.append(child)
        if fixed_links and rng.uniform() < 0.25:
            fx = f"{child}_fixed"
            xyz = rng.uniform(-0.3, 0.3, 3)
            rpy = rng.uniform(-np.pi, np.pi, 3)
            lines.append(
                f'<joint name="{fx}_joint" type="fixed"><parent link="{child}"/>'
                f'<child link="{fx}"/><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" '
                f'rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/></joint>'
            )
            lines.append(f'<link name="{fx}">{inertial(rng)}</link>')
            link_names.append(fx)
    lines.append("</robot>")
    return "\n".join(lines)
