"""The robot parameters every node shares, and the one place that loads the model from them:
URDF from ``robot_description`` or ``urdf_path``, optional ``root_link``/``tip_link``, and the
passive set = ``passive_joints`` ∪ the joints ``<ros2_control>`` leaves without a command
interface (and floating joints)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..model import RobotModel
from ..parameters import ParameterError, ParameterSpec

__all__ = ["robot_parameters", "load_robot", "with_passive", "check_joint_names"]


def check_joint_names(name: str):
    """Validator: every entry is a joint of the model (the validators' context)."""
    def check(names: list[str], model: RobotModel | None) -> None:
        if model is None:
            return
        unknown = [n for n in names if n not in model.joint_names]
        if unknown:
            raise ValueError(f"unknown joints {unknown}; the model's joints are "
                             f"{list(model.joint_names)}")
    check.__name__ = f"check_{name}"
    return check


def _check_gravity(value: list[float], model: RobotModel | None) -> None:
    if len(value) != 3:
        raise ValueError(f"give 3 numbers gx, gy, gz, got {len(value)}")


def robot_parameters(*, chain: bool = True, floating: bool = False,
                     passive_tunable: bool = False,
                     passive_description: str = "joints without actuator, added to those the "
                     "URDF <ros2_control> tag leaves without a command interface"
                     ) -> list[ParameterSpec]:
    """``robot_description``, ``urdf_path``, (``root_link``, ``tip_link`` with ``chain``),
    (``floating_base``, ``gravity`` with ``floating``) and ``passive_joints`` (tunable at run
    time with ``passive_tunable``)."""
    specs = [
        ParameterSpec("robot_description", "", "URDF XML of the robot (or use urdf_path)",
                      read_only=True),
        ParameterSpec("urdf_path", "", "URDF file (when robot_description is empty)",
                      read_only=True),
    ]
    if chain:
        specs += [
            ParameterSpec("root_link", "", "root of the controlled sub-tree (empty: the URDF "
                          "root)", read_only=True),
            ParameterSpec("tip_link", "", "tip of the controlled chain (empty: the whole "
                          "tree); links fixed to the chain past or beside it (a gripper, a "
                          "sensor) ride on it with their mass, moving joints off it are "
                          "dropped", read_only=True),
        ]
    if floating:
        specs += [
            ParameterSpec("floating_base", False, "add a passive free joint 'root_joint' between "
                          "the world and the URDF's root link (a free-flying base; nothing when "
                          "the URDF declares its own floating joint from a massless root)",
                          read_only=True),
            ParameterSpec("gravity", [0.0, 0.0, -9.81], "gravity in the world (root) frame; "
                          "[0, 0, 0] for a robot in orbit", unit="m/s^2", read_only=True,
                          validator=_check_gravity),
        ]
    specs.append(ParameterSpec("passive_joints", [""], passive_description,
                               read_only=not passive_tunable,
                               validator=check_joint_names("passive_joints")))
    return specs


def load_robot(values: Mapping[str, Any]) -> RobotModel:
    """The model of the robot parameters (all joints as the URDF declares them);
    ``ParameterError`` naming the parameter at fault."""
    description = values["robot_description"].lstrip("\ufeff")
    path = values["urdf_path"]
    if description.strip():
        text, source = description, "robot_description"
    elif path.strip():
        if not Path(path).is_file():
            raise ParameterError(f"parameter urdf_path: file '{path}' not found")
        try:
            text = Path(path).read_text(encoding="utf-8-sig")  # a BOM is not XML
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(f"parameter urdf_path: cannot read '{path}': {exc}") from None
        source = "urdf_path"
    else:
        raise ParameterError("set parameter robot_description (URDF XML) or urdf_path")
    root, tip = values.get("root_link") or None, values.get("tip_link") or None
    gravity = values.get("gravity", (0.0, 0.0, -9.81))
    try:
        return RobotModel.from_urdf(text, root_link=root, tip_link=tip, gravity=gravity,
                                    floating_base=bool(values.get("floating_base", False)))
    except ValueError as exc:
        raise ParameterError(f"parameter {source}: {exc}") from None


def with_passive(base: RobotModel, passive_joints: Iterable[str]) -> RobotModel:
    """``base`` with ``passive_joints`` passive in addition to those the URDF makes passive."""
    names = list(passive_joints)
    check_joint_names("passive_joints")(names, base)
    return base.with_passive(sorted(set(base.passive_joints) | set(names)))
