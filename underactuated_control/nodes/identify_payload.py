"""``underactuated-control identify-payload``: the holding-pose procedure of
``payload_identification`` run on a live robot through a running hybrid_dynamics_controller.

Over the controller's own interfaces only: its parameters (the robot model, the frame, the
effort command topic) by the parameter services, the moves as a ``~/joint_reference``
trajectory (the controller switched to ``mode: joint`` for the run and back after), the
measured efforts from ``/joint_states`` (``effort``, as a hardware interface or the simulator
reports it) or, when the robot reports none, the efforts the controller commands (at rest the
two are the same force). The estimate is printed, optionally written as a parameters YAML and
set on the controller in one ``~/set_parameters_atomically`` call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..payload_identification import (
    HoldingRecorder,
    PayloadEstimate,
    identify_payload,
    move_duration,
    payload_parameters,
    propose_holding_poses,
)

__all__ = ["IdentificationError", "IdentifyOptions", "run_identify_payload", "format_estimate",
           "parameters_yaml"]

_ROBOT_PARAMETERS = ("robot_description", "urdf_path", "root_link", "tip_link",
                     "floating_base", "gravity", "passive_joints", "mode", "task_frame",
                     "command_topic", "command_joints", "payload_frame")


class IdentificationError(RuntimeError):
    """The procedure could not run or finish (one line: what and where)."""


@dataclass
class IdentifyOptions:
    controller: str = "hybrid_dynamics_controller"
    frame: str = ""  # empty: the controller's task_frame (or its tip)
    poses: int = 6
    span: float = 1.0  # rad about the start pose
    seed: int = 0
    effort: str = "auto"  # auto | measured | commanded
    speed: float = 0.3  # rad/s mean joint speed of the moves
    settle_velocity: float = 0.005  # rad/s
    settle_time: float = 0.5  # s (states' clock)
    record_time: float = 0.5  # s
    timeout: float = 60.0  # s of wall time per step (discovery, each pose)
    out: str = ""  # YAML path ("" none)
    set_parameters: bool = False
    report: Callable[[str], None] = field(default=print)


def format_estimate(est: PayloadEstimate, source: str) -> str:
    c, cs = 1e3 * est.com, 1e3 * est.com_std
    lines = [f"payload at '{est.frame}' from {est.samples} holding poses (efforts: {source}):",
             f"  mass     {est.mass:.4f} ± {est.mass_std:.4f} kg",
             "  com      [" + ", ".join(f"{x:.2f}" for x in c) + "] ± ["
             + ", ".join(f"{x:.2f}" for x in cs) + "] mm (frame axes)"]
    if est.inertia is None:
        lines.append("  inertia  not identified (holding still excites only mass and com; "
                     "payload_inertia set to zero: a point mass)")
    else:
        lines.append(f"  inertia  {np.round(est.inertia, 5).tolist()} kg m²")
    lines.append(f"  residual {est.residual_rms:.3g} N·m rms, condition number "
                 f"{est.condition_number:.3g}")
    return "\n".join(lines)


def parameters_yaml(est: PayloadEstimate, node: str) -> str:
    import yaml

    values = payload_parameters(est)
    doc = {node.lstrip("/").split("/")[-1]: {"ros__parameters": values}}
    head = (f"# identified payload: mass {est.mass:.4f} ± {est.mass_std:.4f} kg, com ± "
            f"{np.round(1e3 * est.com_std, 2).tolist()} mm\n")
    return head + yaml.safe_dump(doc, default_flow_style=None, sort_keys=False)


class _Driver:
    """The rclpy side: states and commands in, trajectories and parameters out."""

    def __init__(self, opts: IdentifyOptions) -> None:
        import rclpy
        import rclpy.executors
        from rclpy.parameter_client import AsyncParameterClient

        self.rclpy = rclpy
        self.opts = opts
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"identify_payload_{id(self) % 100000}",
                                      context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.name = opts.controller.lstrip("/")
        self.params = AsyncParameterClient(self.node, self.name)
        self.state: tuple[float, dict, dict, dict] | None = None  # t, pos, vel, effort by name
        self.command: np.ndarray | None = None
        self.on_state: Callable[[], None] | None = None

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.shutdown(context=self.context)

    def spin_until(self, done: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not done():
            if time.monotonic() > end:
                return False
            self.executor.spin_once(timeout_sec=0.02)
        return True

    def call(self, future, what: str):
        if not self.spin_until(future.done, self.opts.timeout):
            raise IdentificationError(f"{what}: no answer from '/{self.name}' within "
                                      f"{self.opts.timeout:g} s")
        return future.result()

    def get(self, names) -> dict:
        from rclpy.parameter import parameter_value_to_python

        result = self.call(self.params.get_parameters(list(names)), "reading its parameters")
        return {n: parameter_value_to_python(v) for n, v in zip(names, result.values)}

    def set(self, values: dict) -> None:
        from rclpy.parameter import Parameter

        result = self.call(self.params.set_parameters_atomically(
            [Parameter(k, value=v) for k, v in values.items()]), "setting its parameters")
        if not result.result.successful:
            raise IdentificationError(f"'/{self.name}' refused {sorted(values)}: "
                                      f"{result.result.reason}")

    def subscribe(self, command_topic: str, command_index: np.ndarray) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        def on_state(msg: JointState) -> None:
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            t = stamp if stamp else time.monotonic()
            eff = dict(zip(msg.name, msg.effort)) if len(msg.effort) == len(msg.name) else {}
            self.state = (t, dict(zip(msg.name, msg.position)),
                          dict(zip(msg.name, msg.velocity)), eff)
            if self.on_state is not None:
                self.on_state()

        def on_command(msg: Float64MultiArray) -> None:
            data = np.asarray(msg.data, dtype=float)
            if len(data) > command_index.max(initial=-1):
                self.command = data[command_index]

        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.node.create_subscription(JointState, "/joint_states", on_state, qos)
        self.node.create_subscription(Float64MultiArray, command_topic, on_command, qos)
        self.reference_pub = self.node.create_publisher(
            JointTrajectory, f"/{self.name}/joint_reference", 10)

    def send(self, joints: list[str], target: np.ndarray, duration: float) -> None:
        from rclpy.duration import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        point = JointTrajectoryPoint(
            positions=[float(x) for x in target], velocities=[0.0] * len(joints),
            time_from_start=Duration(nanoseconds=round(duration * 1e9)).to_msg())
        self.reference_pub.publish(JointTrajectory(joint_names=list(joints), points=[point]))


def run_identify_payload(opts: IdentifyOptions) -> PayloadEstimate:
    """The whole procedure; ``IdentificationError``/``ValueError`` (one line) on failure."""
    from .robot import load_robot, with_passive

    if opts.effort not in ("auto", "measured", "commanded"):
        raise ValueError(f"--effort must be auto, measured or commanded, got '{opts.effort}'")
    if opts.poses < 3:
        raise ValueError(f"--poses must be >= 3, got {opts.poses}")
    for name in ("span", "speed", "settle_velocity", "record_time", "timeout"):
        value = getattr(opts, name)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {value}")
    say = opts.report
    d = _Driver(opts)
    try:
        if not d.params.wait_for_services(opts.timeout):
            raise IdentificationError(f"no controller '/{d.name}' answering within "
                                      f"{opts.timeout:g} s (is it running, same ROS_DOMAIN_ID?)")
        p = d.get(_ROBOT_PARAMETERS)
        try:
            model = with_passive(load_robot(p), [j for j in p["passive_joints"] or [] if j])
        except ValueError as exc:
            raise IdentificationError(f"the controller's robot: {exc}") from None
        frame = opts.frame or p["task_frame"] or p["tip_link"] or model.body_names[-1]
        try:
            model.frame(frame)
        except ValueError:
            raise ValueError(f"--frame: unknown frame '{frame}' on '{model.name}'") from None
        joints = list(model.active_joints)
        command_joints = [j for j in (p["command_joints"] or []) if j] or joints
        missing = [j for j in joints if j not in command_joints]
        if missing and opts.effort == "commanded":
            raise IdentificationError(f"the controller commands no effort for {missing}")
        d.subscribe(p["command_topic"], np.array([command_joints.index(j) if j in
                                                   command_joints else 0 for j in joints]))
        if not d.spin_until(lambda: d.state is not None, opts.timeout):
            raise IdentificationError(f"no /joint_states within {opts.timeout:g} s")
        names = list(model.joint_names)

        def measured() -> tuple[float, np.ndarray, np.ndarray, dict]:
            t, pos, vel, eff = d.state
            try:
                q = np.array([pos[n] for n in names])
                v = np.array([vel[n] for n in names])
            except KeyError as exc:
                raise IdentificationError(f"/joint_states lacks joint {exc}") from None
            return t, q, v, eff

        _, q_start, _, eff = measured()
        has_effort = all(j in eff for j in joints)
        source = opts.effort if opts.effort != "auto" else (
            "measured" if has_effort else "commanded")
        if source == "measured" and not has_effort:
            raise IdentificationError("/joint_states reports no effort for every active joint "
                                      "(use --effort commanded)")
        if source == "commanded" and missing:
            raise IdentificationError(f"the controller commands no effort for {missing}")
        src_text = ("/joint_states effort" if source == "measured" else
                    f"commanded on {p['command_topic']}")
        poses = propose_holding_poses(model, frame, q_start, opts.poses, span=opts.span,
                                      seed=opts.seed)
        say(f"[identify-payload] '{model.name}', frame '{frame}', {opts.poses} poses "
            f"(condition number {poses.condition_number:.3g}), efforts: {src_text}")
        mode = p["mode"]
        if mode != "joint":
            say(f"[identify-payload] controller mode '{mode}' -> 'joint' for the run")
            d.set({"mode": "joint"})
        active = model.active_dofs
        Q, T = [], []
        try:
            for k, pose in enumerate(poses.poses):
                t_now, q_now, _, _ = measured()
                duration = move_duration(q_now[active], pose[active], opts.speed)
                sample = _hold(d, opts, joints, pose[active], duration, measured, active,
                               source, f"pose {k + 1}/{opts.poses}")
                Q.append(sample[0])
                T.append(sample[1])
                say(f"[identify-payload] pose {k + 1}/{opts.poses}: q "
                    f"{np.round(sample[0], 3).tolist()} effort "
                    f"{np.round(sample[1], 3).tolist()}")
        finally:  # back to the start pose, the mode as it was
            try:
                _, q_now, _, _ = measured()
                duration = move_duration(q_now[active], q_start[active], opts.speed)
                _hold(d, opts, joints, q_start[active], duration, measured, active, source,
                      "back to the start pose")
                if mode != "joint":
                    d.set({"mode": mode})
            except IdentificationError as exc:
                say(f"[identify-payload] warning: {exc}")
        est = identify_payload(model, frame, np.array(Q), np.array(T))
        say(format_estimate(est, src_text))
        if opts.out:
            Path(opts.out).write_text(parameters_yaml(est, d.name))
            say(f"[identify-payload] wrote {opts.out}")
        if opts.set_parameters:
            d.set(payload_parameters(est))
            say(f"[identify-payload] set payload_* on '/{d.name}' (one atomic call)")
        return est
    finally:
        d.close()


def _hold(d: _Driver, opts: IdentifyOptions, joints, target, duration, measured, active,
          source, what) -> tuple[np.ndarray, np.ndarray]:
    """Move to ``target`` in ``duration`` (states' clock), then settle and record."""
    t0 = measured()[0]
    d.send(joints, target, duration)
    rec = HoldingRecorder(opts.settle_velocity, opts.settle_time, opts.record_time)
    result: list = []

    def on_state() -> None:
        t, q, v, eff = measured()
        if result or t < t0 + duration:
            return
        if source == "measured":
            effort = np.array([eff.get(j, np.nan) for j in joints])
        elif d.command is None:
            return
        else:
            effort = d.command
        out = rec.feed(t, q, v, effort)
        if out is not None:
            result.append(out)

    d.on_state = on_state
    wall = opts.timeout + 3.0 * duration
    try:
        if not d.spin_until(lambda: bool(result), wall):
            raise IdentificationError(
                f"{what}: not settled within {wall:.0f} s (last max joint speed "
                f"{rec.max_speed:.3g} > --settle-velocity {opts.settle_velocity:g})")
    finally:
        d.on_state = None
    return result[0]
