"""Shared rclpy helpers: labelled matrices, poses from messages, spinning and running nodes."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ..so3 import quaternion_matrix  # re-exported: nodes.common.quaternion_matrix

_IMPORTED = time.monotonic()
# the controller's ~/pose_reference queue (and its senders'): a path streamed ahead and stamped
# (reference_max_lead, up to 1 s of a 100 Hz grid) arrives in a burst when it starts or its
# sender catches up after a stall; a queue of 10 kept the burst's last 10 points and the hand
# stood still until their stamps
POSE_REFERENCE_DEPTH = 100
# a stream whose latest message is what counts (/joint_states at the controller's rate, 100 Hz
# setpoints): best effort hears reliable and best-effort publishers alike, and a message lost on
# the wire is skipped, where a reliable reader delivers in order and holds every later message
# until the writer's next heartbeat re-sends the lost one (Fast DDS: every 3 s by default)
STREAM_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
RELIABILITY = {"reliable": ReliabilityPolicy.RELIABLE,
               "best_effort": ReliabilityPolicy.BEST_EFFORT}  # a parameter's value -> policy

__all__ = ["matrix_message", "pose_from_message", "process_age", "quaternion_matrix", "spin_node",
           "run_node"]


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


def process_age() -> float:
    """Seconds since this process started (Linux ``/proc``; elsewhere since this module was
    imported): what a node's readiness log reports."""
    try:
        ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


def spin_node(node: Node, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Spin with the EventsExecutor (measured fastest with these rclpy wheels) in spin_once
    steps, so that a stop request (SIGINT/SIGTERM) is noticed within 0.1 s."""
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


SHUTDOWN_LIMIT_S = 5.0  # launch's default sigterm_timeout: then it would escalate to SIGKILL


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             spin: Callable[[Node, Callable[[], bool]], None] = spin_node,
             shutdown_limit_s: float = SHUTDOWN_LIMIT_S) -> int:
    """rclpy.init, build the node, spin until SIGINT/SIGTERM, clean up; exit code 0.

    The signals only set a flag (rclpy's own handlers are off), so a callback that is running
    finishes, the spin loop ends, and the node's ``on_shutdown()`` (if any: the controller's
    zero-effort command) runs while the context is still valid. A ``ValueError`` while
    building (bad URDF, bad parameter) or a missing optional dependency prints one line and
    gives exit code 2.

    A process still alive ``shutdown_limit_s`` after the stop request (a DDS teardown that
    hangs) prints every thread's stack and exits with code 1: ``faulthandler``'s watchdog
    thread needs no GIL, so this holds when nothing is left to escalate to SIGKILL (bringup
    killed: the nodes get SIGTERM from PR_SET_PDEATHSIG). It stays armed until the process
    ends: ``run_node`` is a process's main."""
    from rclpy.impl.implementation_singleton import rclpy_implementation
    from rclpy.signals import SignalHandlerOptions

    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except rclpy_implementation.RCLError as exc:  # a malformed --ros-args rule: user error
        print(f"[ERROR] cannot start: bad ROS arguments: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return 2
    stop = threading.Event()

    def request_stop(*_: object) -> None:
        if not stop.is_set():
            faulthandler.dump_traceback_later(shutdown_limit_s, exit=True)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            node = factory()
        except (ValueError, ImportError) as exc:
            print(f"[ERROR] cannot start: {exc}", file=sys.stderr)
            return 2
        try:
            spin(node, stop.is_set)
        finally:
            on_shutdown = getattr(node, "on_shutdown", None)
            if on_shutdown is not None:
                on_shutdown()
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
