"""Shared rclpy helpers: parameter declaration with descriptors, labelled matrices, spinning."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

__all__ = ["declare", "matrix_message", "spin_node", "run_node"]

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


def run_node(factory: Callable[[], Node], args: list[str] | None = None) -> int:
    """rclpy.init, build the node, spin, clean up. A ValueError while building (bad URDF,
    bad parameters) is printed and gives exit code 2."""
    rclpy.init(args=args)
    node = None
    try:
        node = factory()
    except ValueError as exc:
        print(f"[ERROR] cannot start: {exc}", file=sys.stderr)
        if rclpy.ok():
            rclpy.shutdown()
        return 2
    try:
        spin_node(node)
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
