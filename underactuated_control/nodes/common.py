"""Shared rclpy helpers: parameter declaration with descriptors, labelled matrices, spinning."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ..so3 import quaternion_matrix  # re-exported: nodes.common.quaternion_matrix

__all__ = ["declare", "declare_robot", "matrix_message", "pose_from_message",
           "quaternion_matrix", "spin_node", "run_node"]

_TYPES = {
    float: ParameterType.PARAMETER_DOUBLE,
    bool: ParameterType.PARAMETER_BOOL,
    str: ParameterType.PARAMETER_STRING,
    int: ParameterType.PARAMETER_INTEGER,
}


def declare(node: Node, name: str, default, description: str, *, unit: str = "",
            low: float | None = None, high: float | None = None, read_only: bool = False,
            kind: int | None = None, choices: Sequence[str] | None = None):
    """Declare a parameter with a description naming its unit, range or choices."""
    text = description
    if unit:
        text += f" [{unit}]"
    if choices:
        text += f" (one of: {', '.join(choices)})"
    desc = ParameterDescriptor(description=text, read_only=read_only)
    desc.type = kind if kind is not None else _TYPES[type(default)]
    if low is not None and high is not None and desc.type == ParameterType.PARAMETER_DOUBLE:
        desc.floating_point_range = [FloatingPointRange(from_value=float(low),
                                                        to_value=float(high), step=0.0)]
    elif low is not None or high is not None:
        desc.additional_constraints = f"range [{low}, {high}]"
    return node.declare_parameter(name, default, desc).value


def declare_robot(node: Node) -> str:
    """Declare ``robot_description`` and ``urdf_path`` (read-only) and return the URDF text;
    ``ValueError`` naming the parameter when neither gives a robot."""
    from pathlib import Path

    description = declare(node, "robot_description", "", "URDF XML of the robot (or use "
                          "urdf_path)", read_only=True)
    urdf_path = declare(node, "urdf_path", "", "URDF file (when robot_description is empty)",
                        read_only=True)
    if description.strip():
        return description
    if urdf_path.strip():
        if not Path(urdf_path).is_file():
            raise ValueError(f"parameter urdf_path: file '{urdf_path}' not found")
        return Path(urdf_path).read_text()
    raise ValueError("set parameter robot_description (URDF XML) or urdf_path")


def pose_from_message(msg, root_link: str) -> tuple[np.ndarray, np.ndarray]:
    """(position, rotation matrix) of a geometry_msgs/PoseStamped given in the root frame
    (``frame_id`` empty or ``root_link``); ``ValueError`` with the reason otherwise."""
    frame = msg.header.frame_id
    if frame not in ("", root_link):
        raise ValueError(f"frame '{frame}' is not the root link '{root_link}'")
    p, o = msg.pose.position, msg.pose.orientation
    position = np.array([p.x, p.y, p.z])
    if not np.all(np.isfinite(position)):
        raise ValueError("non-finite position")
    return position, quaternion_matrix(o.x, o.y, o.z, o.w)


def matrix_message(matrix: np.ndarray, row_label: str, col_label: str,
                   msg: Float64MultiArray | None = None) -> Float64MultiArray:
    """std_msgs/Float64MultiArray with a 2-D row-major layout whose labels name the axes,
    e.g. ``rows:lin_x,lin_y,...`` and ``cols:joint1,joint3``."""
    msg = msg or Float64MultiArray()
    rows, cols = matrix.shape
    msg.layout.dim = [MultiArrayDimension(label=row_label, size=rows, stride=rows * cols),
                      MultiArrayDimension(label=col_label, size=cols, stride=cols)]
    msg.layout.data_offset = 0
    msg.data = matrix.ravel().tolist()
    return msg


def spin_node(node: Node, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Spin with the EventsExecutor (measured fastest with these rclpy wheels) in spin_once
    steps, so that shutdown (SIGINT/SIGTERM) is noticed within 0.1 s."""
    from rclpy.executors import ExternalShutdownException
    from rclpy.experimental import EventsExecutor

    executor = EventsExecutor(context=node.context)
    executor.add_node(node)
    try:
        while rclpy.ok(context=node.context) and not should_stop():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.remove_node(node)
        executor.shutdown()


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             spin: Callable[[Node], None] = spin_node) -> int:
    """rclpy.init, build the node, spin, clean up. A ValueError while building (bad URDF,
    bad parameters) or a missing optional dependency is printed and gives exit code 2."""
    rclpy.init(args=args)
    node = None
    try:
        node = factory()
    except (ValueError, ImportError) as exc:
        print(f"[ERROR] cannot start: {exc}", file=sys.stderr)
        if rclpy.ok():
            rclpy.shutdown()
        return 2
    try:
        spin(node)
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
