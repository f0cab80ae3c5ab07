"""URDF -> RobotModel (urdf_parser_py), plus the ``<ros2_control>`` tag reader.

``load_model`` is the loader (as Pinocchio's ``buildModel``); ``RobotModel.from_urdf`` calls it.
This module imports ``model``, never the other way round at import time.

* revolute, continuous, prismatic and floating joints become bodies; fixed joints are merged into
  their parent body (frames kept, inertias combined); planar and mimic joints are rejected.
* Body frame = the URDF child link frame; H*(k) is the joint axis in that frame.
* A joint is passive if named in ``passive_joints``, if it is floating (a free-flying base), or if
  the URDF's ``<ros2_control>`` block lists it with state interfaces and no command interface.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .model import FLOATING, PRISMATIC, REVOLUTE, Frame, RobotModel
from .spatial import rpy_to_matrix, spatial_inertia

__all__ = ["load_model", "read_ros2_control", "load_urdf_text"]

_FLOATING_DOF_SUFFIXES = ("x", "y", "z", "rx", "ry", "rz")


def load_urdf_text(urdf: str | Path) -> str:
    """Return URDF XML text from a path or from the XML string itself."""
    if isinstance(urdf, Path) or not str(urdf).lstrip().startswith("<"):
        path = Path(urdf)
        if not path.is_file():
            raise ValueError(f"URDF file not found: '{path}' (pass a path or the XML text)")
        return path.read_text()
    return str(urdf)


def read_ros2_control(root: ET.Element) -> dict[str, dict[str, tuple[str, ...]]]:
    """Joints of all ``<ros2_control>`` blocks: name -> {'command': (...), 'state': (...)}."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for block in root.iter("ros2_control"):
        for joint in block.findall("joint"):
            name = joint.get("name")
            if not name:
                raise ValueError("malformed URDF: a <ros2_control> <joint> has no name attribute")
            command = tuple(e.get("name", "") for e in joint.findall("command_interface"))
            state = tuple(e.get("name", "") for e in joint.findall("state_interface"))
            out[name] = {"command": command, "state": state}
    return out


@contextlib.contextmanager
def _quiet_urdf_parser(messages: list[str]):
    """urdf_parser_py prints unknown tags (ros2_control, gazebo, ...) to stderr: collect instead."""
    from urdf_parser_py.xml_reflection import core

    previous = core.on_error
    core.on_error = messages.append
    try:
        yield
    finally:
        core.on_error = previous


def _origin(element) -> tuple[np.ndarray, np.ndarray]:
    """(xyz, R) of a URDF <origin>; identity when absent."""
    if element is None:
        return np.zeros(3), np.eye(3)
    xyz = np.zeros(3) if element.xyz is None else np.asarray(element.xyz, dtype=float)
    rpy = np.zeros(3) if element.rpy is None else np.asarray(element.rpy, dtype=float)
    return xyz, rpy_to_matrix(rpy)


def _link_inertia(link) -> np.ndarray | None:
    """Spatial inertia of a URDF link about its own frame, or None for a weightless link.

    No ``<inertial>``, or mass 0 with zero inertia (a pure frame such as a flange), weighs
    nothing; any other inconsistency is a ``ValueError`` naming the link.
    """
    inertial = link.inertial
    if inertial is None:
        return None
    mass = float(inertial.mass) if inertial.mass is not None else float("nan")
    if inertial.inertia is None:
        raise ValueError(f"link '{link.name}': <inertial> has no <inertia> element")
    inertia = np.asarray(inertial.inertia.to_matrix(), dtype=float)
    if not np.isfinite(mass) or mass < 0.0:
        raise ValueError(f"link '{link.name}': mass must be positive and finite, got {mass}")
    if not np.all(np.isfinite(inertia)):
        raise ValueError(f"link '{link.name}': inertia has non-finite entries")
    if mass == 0.0:
        if np.any(inertia != 0.0):
            raise ValueError(f"link '{link.name}': zero mass with non-zero rotational inertia")
        return None
    eig = np.linalg.eigvalsh(inertia)
    tol = 1e-12 * max(1.0, float(np.abs(eig).max()))
    if eig[0] < -tol:
        raise ValueError(
            f"link '{link.name}': rotational inertia is not positive (semi)definite, "
            f"eigenvalues {eig.tolist()}"
        )
    if eig[0] + eig[1] < eig[2] - tol:
        raise ValueError(
            f"link '{link.name}': rotational inertia violates the triangle inequality "
            f"(principal moments {eig.tolist()}), no rigid body has it"
        )
    xyz, R = _origin(inertial.origin)
    return spatial_inertia(mass, xyz, R @ inertia @ R.T)


def _compose(E1: np.ndarray, r1: np.ndarray, E2: np.ndarray, r2: np.ndarray):
    """(A->B) then (B->C) gives (A->C): E = E2 E1, r = r1 + E1^T r2."""
    return E2 @ E1, r1 + E1.T @ r2


def _transform_inertia_to_parent(E: np.ndarray, r: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """X^T I X with X the motion transform body -> link (moves a link inertia to the body)."""
    from .spatial import motion_transform_matrix

    X = motion_transform_matrix(E, r)
    return X.T @ inertia @ X


def declares_floating_base(links: dict, children: dict, root_link: str) -> bool:
    """True when the URDF itself declares a free-flying base: a massless root link (``world``)
    whose only joint is floating. ``floating_base`` then adds nothing."""
    joints = children[root_link]
    return (len(joints) == 1 and joints[0].type == "floating"
            and _link_inertia(links[root_link]) is None)


def load_model(
    urdf: str | Path,
    passive_joints: Iterable[str] = (),
    root_link: str | None = None,
    tip_link: str | None = None,
    gravity: Sequence[float] = (0.0, 0.0, -9.81),
    floating_base: bool = False,
    allow_massless_links: bool = False,
    mimic: str = "error",
) -> RobotModel:
    """Build a :class:`RobotModel` from a URDF path or XML string.

    ``root_link`` / ``tip_link`` select a sub-tree or a sub-chain (KDL-style: with ``tip_link``
    only the joints on the root->tip path are kept; links fixed to a kept link off that path,
    such as a gripper past the hand frame or a sensor, ride on it with their mass and frames,
    and moving joints off it are dropped with what they carry). ``floating_base`` adds a
    passive 6-DOF joint ``root_joint`` between the world and the root link (nothing when the
    URDF declares its own: a massless root link whose only joint is floating). Moving links
    without ``<inertial>`` are an error unless ``allow_massless_links`` (then they weigh
    nothing). ``<transmission>`` elements are ignored (they carry no dynamics; the commanded
    joints come from ``<ros2_control>``).
    """
    from urdf_parser_py.urdf import URDF

    text = load_urdf_text(urdf)
    try:
        xml_root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"malformed URDF: XML syntax error: {exc}") from None
    if xml_root.tag != "robot":
        raise ValueError(f"malformed URDF: root element is <{xml_root.tag}>, expected <robot>")
    if mimic not in ("error", "independent"):
        raise ValueError(f"mimic must be 'error' or 'independent', got {mimic!r}")
    ros2_control = read_ros2_control(xml_root)
    transmissions = xml_root.findall("transmission")
    for element in transmissions:  # no dynamics in them; ROS 1's (the PR2's differential
        xml_root.remove(element)  # wrist) are refused by urdf_parser_py
    if transmissions:
        text = ET.tostring(xml_root, encoding="unicode")

    messages: list[str] = []
    try:
        with _quiet_urdf_parser(messages):
            robot = URDF.from_xml_string(text)
    except Exception as exc:  # noqa: BLE001 - urdf_parser_py raises bare Assertion/KeyError
        raise ValueError(f"malformed URDF: {type(exc).__name__}: {exc}") from None

    links = {link.name: link for link in robot.links}
    if len(links) != len(robot.links):
        raise ValueError("malformed URDF: duplicate link names")
    joint_names_seen: set[str] = set()
    parent_joint: dict[str, object] = {}
    children: dict[str, list] = {name: [] for name in links}
    for joint in robot.joints:
        if joint.name in joint_names_seen:
            raise ValueError(f"malformed URDF: duplicate joint name '{joint.name}'")
        joint_names_seen.add(joint.name)
        for role, link_name in (("parent", joint.parent), ("child", joint.child)):
            if link_name not in links:
                raise ValueError(
                    f"malformed URDF: joint '{joint.name}' names unknown {role} link '{link_name}'"
                )
        if joint.child in parent_joint:
            raise ValueError(
                f"closed kinematic loop: link '{joint.child}' is the child of both joint "
                f"'{parent_joint[joint.child].name}' and joint '{joint.name}'; only trees are "
                "supported"
            )
        parent_joint[joint.child] = joint
        children[joint.parent].append(joint)

    roots = [name for name in links if name not in parent_joint]
    if root_link is None:
        if len(roots) != 1:
            raise ValueError(
                "malformed URDF: expected exactly one root link, found "
                f"{roots if roots else 'none (the joints form a closed loop)'}"
            )
        root_link = roots[0]
    elif root_link not in links:
        raise ValueError(f"unknown root_link '{root_link}': links are {sorted(links)}")
    # a cycle among links never reaches a root: detect it by walking up from every link
    for name in links:
        seen, cur = set(), name
        while cur in parent_joint:
            if cur in seen:
                raise ValueError(f"closed kinematic loop through link '{cur}'")
            seen.add(cur)
            cur = parent_joint[cur].parent

    path_links: set[str] | None = None
    if tip_link is not None:
        if tip_link not in links:
            raise ValueError(f"unknown tip_link '{tip_link}': links are {sorted(links)}")
        path_links, cur = {tip_link}, tip_link
        while cur != root_link:
            if cur not in parent_joint:
                raise ValueError(f"tip_link '{tip_link}' is not a descendant of root '{root_link}'")
            cur = parent_joint[cur].parent
            path_links.add(cur)

    # ---- depth-first walk, fixed joints merged into their parent body -----------------------
    body_names: list[str] = []
    joint_names: list[str] = []
    joint_types: list[str] = []
    parents: list[int] = []
    tree_E: list[np.ndarray] = []
    tree_r: list[np.ndarray] = []
    axes: list[np.ndarray] = []
    inertias: list[np.ndarray] = []
    has_inertial: list[bool] = []
    limits: list[tuple] = []
    dynamics: list[tuple[float, float]] = []
    frames: dict[str, Frame] = {}

    def add_body(name, jname, jtype, parent, E, r, axis, limit, damping, friction) -> int:
        body_names.append(name)
        joint_names.append(jname)
        joint_types.append(jtype)
        parents.append(parent)
        tree_E.append(E)
        tree_r.append(r)
        axes.append(axis)
        inertias.append(np.zeros((6, 6)))
        has_inertial.append(False)
        limits.append(limit)
        dynamics.append((damping, friction))
        return len(body_names) - 1

    def attach_link(link_name: str, body: int, E: np.ndarray, r: np.ndarray) -> None:
        frames[link_name] = Frame(body, E, r)
        inertia = _link_inertia(links[link_name])
        if body >= 0 and inertia is not None:
            inertias[body] += _transform_inertia_to_parent(E, r, inertia)
            has_inertial[body] = True

    inf = float("inf")
    root_body = -1  # the fixed world, unless the root link floats
    if floating_base and declares_floating_base(links, children, root_link):
        floating_base = False  # the URDF's own floating joint is the free-flying base
    if floating_base:
        root_body = add_body(
            root_link,
            "root_joint",
            "floating",
            -1,
            np.eye(3),
            np.zeros(3),
            np.zeros(3),
            (-inf, inf, inf, inf),
            0.0,
            0.0,
        )
    attach_link(root_link, root_body, np.eye(3), np.zeros(3))

    def visit(link_name: str, body: int, E_link: np.ndarray, r_link: np.ndarray) -> None:
        for joint in children[link_name]:
            off_path = path_links is not None and joint.child not in path_links
            if off_path and joint.type != "fixed":
                continue  # a moving joint off the selected chain: dropped with its subtree
            xyz, R = _origin(joint.origin)
            E, r = _compose(E_link, r_link, R.T, xyz)  # body -> joint frame (= child link frame)
            jtype = joint.type
            if jtype == "fixed":
                attach_link(joint.child, body, E, r)
                visit(joint.child, body, E, r)
                continue
            if joint.mimic is not None and mimic == "error":
                raise ValueError(
                    f"joint '{joint.name}' is a mimic joint (of '{joint.mimic.joint}'): mimic "
                    "joints are not supported; select a sub-chain without it (tip_link) or pass "
                    "mimic='independent' to model it as an ordinary joint"
                )
            if jtype == "planar":
                raise ValueError(f"joint '{joint.name}' is planar: planar joints are not supported")
            if jtype not in ("revolute", "continuous", "prismatic", "floating"):
                raise ValueError(f"joint '{joint.name}' has unsupported type '{jtype}'")
            axis = np.zeros(3)
            if jtype != "floating":
                axis = np.array(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), float)
                norm = np.linalg.norm(axis)
                if not np.isfinite(norm) or norm < 1e-12:
                    raise ValueError(
                        f"joint '{joint.name}': axis {axis.tolist()} is not a direction"
                    )
                axis = axis / norm
            lim = joint.limit
            lower, upper = -inf, inf
            if jtype in ("revolute", "prismatic") and lim is not None:
                lower = float(lim.lower) if lim.lower is not None else -inf
                upper = float(lim.upper) if lim.upper is not None else inf
                if lower > upper:
                    raise ValueError(f"joint '{joint.name}': limit lower {lower} > upper {upper}")
            velocity = float(lim.velocity) if lim is not None and lim.velocity else inf
            effort = float(lim.effort) if lim is not None and lim.effort else inf
            damping = friction = 0.0
            if joint.dynamics is not None:
                damping = float(joint.dynamics.damping or 0.0)
                friction = float(joint.dynamics.friction or 0.0)
                if damping < 0 or friction < 0:
                    raise ValueError(f"joint '{joint.name}': negative <dynamics> damping/friction")
            b = add_body(
                joint.child,
                joint.name,
                jtype,
                body,
                E,
                r,
                axis,
                (lower, upper, velocity, effort),
                damping,
                friction,
            )
            attach_link(joint.child, b, np.eye(3), np.zeros(3))
            visit(joint.child, b, np.eye(3), np.zeros(3))

    visit(root_link, root_body, np.eye(3), np.zeros(3))

    nb = len(body_names)
    if nb == 0:
        raise ValueError(f"robot '{robot.name}' has no moving joint below root '{root_link}'")
    for k in range(nb):
        if not has_inertial[k] and not allow_massless_links:
            raise ValueError(
                f"link '{body_names[k]}' (moved by joint '{joint_names[k]}') has no mass: its "
                "<inertial> is missing or zero; a moving body needs mass and inertia "
                "(allow_massless_links=True accepts it as weightless)"
            )

    # ---- DOF layout and hinge maps H*(k) --------------------------------------------------
    hinge_type = np.array(
        [
            FLOATING if t == "floating" else PRISMATIC if t == "prismatic" else REVOLUTE
            for t in joint_types
        ],
        dtype=np.int64,
    )
    nv_joint = np.where(hinge_type == FLOATING, 6, 1).astype(np.int64)
    nq_joint = np.where(hinge_type == FLOATING, 7, 1).astype(np.int64)
    v_start = np.concatenate([[0], np.cumsum(nv_joint)[:-1]]).astype(np.int64)
    q_start = np.concatenate([[0], np.cumsum(nq_joint)[:-1]]).astype(np.int64)
    S = np.zeros((nb, 6, 6))
    dof_names: list[str] = []
    lower_l, upper_l, vel_l, eff_l, damp_l, fric_l = [], [], [], [], [], []
    for k in range(nb):
        if hinge_type[k] == REVOLUTE:
            S[k, :3, 0] = axes[k]
        elif hinge_type[k] == PRISMATIC:
            S[k, 3:, 0] = axes[k]
        else:  # floating: velocity [linear; angular] in body axes -> spatial [angular; linear]
            S[k, 3:, :3] = np.eye(3)
            S[k, :3, 3:] = np.eye(3)
        if hinge_type[k] == FLOATING:
            dof_names += [f"{joint_names[k]}/{c}" for c in _FLOATING_DOF_SUFFIXES]
        else:
            dof_names.append(joint_names[k])
        lo, hi, vel, eff = limits[k]
        damping, friction = dynamics[k]
        n = int(nv_joint[k])
        lower_l += [lo] * n
        upper_l += [hi] * n
        vel_l += [vel] * n
        eff_l += [eff] * n
        damp_l += [damping] * n
        fric_l += [friction] * n

    # ---- passive set: argument, floating joints, ros2_control (state but no command) -------
    passive = np.array([t == "floating" for t in joint_types], dtype=bool)
    for name in ros2_control:
        spec = ros2_control[name]
        if name in joint_names and spec["state"] and not spec["command"]:
            passive[joint_names.index(name)] = True
    requested = [passive_joints] if isinstance(passive_joints, str) else list(passive_joints)
    for name in requested:
        if name not in joint_names:
            fixed = [j.name for j in robot.joints if j.type == "fixed"]
            why = " (it is a fixed joint: no DOF)" if name in fixed else ""
            raise ValueError(
                f"unknown joint '{name}' in passive_joints{why}; moving joints are {joint_names}"
            )
        passive[joint_names.index(name)] = True

    gravity = np.asarray(gravity, dtype=float)
    if gravity.shape != (3,) or not np.all(np.isfinite(gravity)):
        raise ValueError(f"gravity must be 3 finite numbers, got {gravity.tolist()}")
    inertia = np.array(inertias)
    scale = float(max(np.abs(inertia).max(), 1e-300))
    return RobotModel(
        name=robot.name or "robot",
        root_link=root_link,
        gravity=gravity,
        body_names=tuple(body_names),
        joint_names=tuple(joint_names),
        joint_types=tuple(joint_types),
        parent=np.array(parents, dtype=np.int64),
        hinge_type=hinge_type,
        axis=np.array(axes),
        tree_rotation=np.array(tree_E),
        tree_translation=np.array(tree_r),
        motion_subspace=S,
        q_start=q_start,
        v_start=v_start,
        nq_joint=nq_joint,
        nv_joint=nv_joint,
        inertia=inertia,
        dof_names=tuple(dof_names),
        position_lower=np.array(lower_l),
        position_upper=np.array(upper_l),
        velocity_limit=np.array(vel_l),
        effort_limit=np.array(eff_l),
        damping=np.array(damp_l),
        friction=np.array(fric_l),
        frames=frames,
        ros2_control=ros2_control,
        inertia_scale=scale,
        passive_joint_mask=passive,
    )


parse_urdf = load_model  # former name, kept for existing callers
