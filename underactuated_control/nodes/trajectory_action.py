"""``~/follow_joint_trajectory`` (control_msgs/action/FollowJointTrajectory),
``~/query_state`` (control_msgs/srv/QueryTrajectoryState) and ``~/controller_state``
(control_msgs/msg/JointTrajectoryControllerState) of hybrid_dynamics_controller: the interfaces
MoveIt and ros2_control tooling use with ros2_controllers' JointTrajectoryController (JTC), here
on the hybrid recursion's joint law.

A thin adapter: messages <-> arrays, goal handles, rates. The rules (trajectory checks, spline
sampling, velocity limits, tolerances) are ``control/trajectory_sampling.py``, the same checks
and sampler as the controller's ``~/joint_reference``. The controller calls ``after_cycle`` once
per control cycle; the goal's ``SplineTrajectory`` is the node's ``trajectory``, sampled into
the joint law's reference by the node's own cycle on the node's clock (the simulated time under
``use_sim_time``), which also times ``goal_time``.

- A goal that breaks a rule is accepted and at once aborted with the result's ``error_code``
  (INVALID_JOINTS, INVALID_GOAL, OLD_HEADER_TIMESTAMP) and an ``error_string`` naming the joint
  or field: a ROS 2 goal rejection carries no result, so the client could not tell why (ROS 1's
  JTC rejected with a result). The running goal, if any, is not disturbed by such a goal.
- A valid goal preempts the running one: CANCELED, with INVALID_GOAL and "preempted by a new
  goal" in its result (JTC up to Humble; JTC since Jazzy aborts it instead). A trajectory on
  ``~/joint_reference``, a mode change and a new passive set abort it.
- ``trajectory_velocity_limits``: a spline faster than a joint's URDF velocity limit is
  time-scaled when it starts (logged, and said in the result's ``error_string``), or refused
  (INVALID_GOAL naming the joint and the speed it needs), or run as given.
- Feedback at ``action_monitor_rate`` (wall time: a rate, not an outcome); SUCCESSFUL when the
  goal tolerances hold after the last point; PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED
  (after ``goal_time``) abort and hold the measured position; cancel holds the measured
  position (JTC without decelerate-on-cancel).
- ``~/query_state``: the running trajectory (action or topic) sampled at the requested time, as
  JTC: ``success`` false before its start, at or after its last point, or with none running.
- ``~/controller_state`` at ``state_publish_rate``: reference (the joint law's, in joint and
  hold modes), feedback (measured), error (reference - feedback) and output (the effort sent),
  over the active joints.

Without the control_msgs Python package (see ``scripts/build_control_msgs.sh``) the controller
runs without these interfaces and says so once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rclpy.action import ActionServer, CancelResponse
from rclpy.action.server import GoalEvent
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from ..control.joint_space import JointReference
from ..control.trajectory_sampling import (
    VELOCITY_LIMIT_POLICIES,
    SplineTrajectory,
    StateTolerance,
    Tolerances,
    TrajectoryError,
    TrajectoryExecution,
    goal_tolerances,
    trajectory_from_message,
    trajectory_rules,
)
from ..parameters import ParameterSpec, per_joint

__all__ = ["PARAMETERS", "TrajectoryActionServer"]


def _one_per_joint(name: str):
    def check(value: list[float], model) -> None:
        if model is not None:
            per_joint(name, value, model.joint_names)
    return check


PARAMETERS = (
    ParameterSpec("path_tolerance", [0.0], "default position tolerance along a "
                  "follow_joint_trajectory goal's path, one value or one per joint of the model "
                  "(0: not enforced; JTC constraints.<joint>.trajectory)", unit="rad or m",
                  low=0.0, high=100.0, per_joint=True,
                  validator=_one_per_joint("path_tolerance")),
    ParameterSpec("goal_tolerance", [0.0], "default position tolerance at a "
                  "follow_joint_trajectory goal's end, one value or one per joint of the model "
                  "(0: not enforced; JTC constraints.<joint>.goal)", unit="rad or m", low=0.0,
                  high=100.0, per_joint=True, validator=_one_per_joint("goal_tolerance")),
    ParameterSpec("stopped_velocity_tolerance", 0.01, "default velocity tolerance at a goal's "
                  "end: a joint slower than this has stopped (0: not checked)",
                  unit="rad/s or m/s", low=0.0, high=100.0),
    ParameterSpec("goal_time", 1.0, "default time after a trajectory's last point within "
                  "which its goal tolerances must hold, else the goal aborts "
                  "(0: wait for ever; JTC constraints.goal_time)", unit="s", low=0.0,
                  high=3600.0),
    ParameterSpec("allow_partial_joints_goal", False, "accept follow_joint_trajectory goals "
                  "naming only some active joints (the others hold their reference)"),
    ParameterSpec("allow_nonzero_velocity_at_trajectory_end", False, "accept trajectories "
                  "whose last point has a non-zero velocity"),
    ParameterSpec("trajectory_velocity_limits", "scale", "a trajectory (follow_joint_trajectory "
                  "goal or ~/joint_reference) whose spline needs more than a joint's URDF "
                  "velocity limit: scale (stretched in time when it starts, logged and said in "
                  "the goal's result), reject (refused, naming the joint) or ignore (run as given)",
                  choices=VELOCITY_LIMIT_POLICIES),
    ParameterSpec("action_monitor_rate", 20.0, "rate of follow_joint_trajectory feedback",
                  unit="Hz", low=0.1, high=1000.0, read_only=True),
    ParameterSpec("state_publish_rate", 50.0, "rate of ~/controller_state (at most one per "
                  "control cycle)", unit="Hz", low=0.1, high=1000.0, read_only=True),
)


@dataclass
class _Goal:
    handle: Any
    trajectory: SplineTrajectory
    execution: TrajectoryExecution
    joints: tuple[str, ...]
    future: Future = field(default_factory=Future)
    feedback_at: float = 0.0


def _point(msg: JointTrajectoryPoint, p=None, v=None, a=None, effort=None
           ) -> JointTrajectoryPoint:
    msg.positions = p.tolist() if p is not None else []
    msg.velocities = v.tolist() if v is not None else []
    msg.accelerations = a.tolist() if a is not None else []
    msg.effort = effort.tolist() if effort is not None else []
    return msg


class TrajectoryActionServer:
    """See the module docstring; ``attach`` builds it for a HybridDynamicsController."""

    def __init__(self, node, action_type, state_type, query_type=None) -> None:
        self.node = node
        self.Action = action_type
        self.Result = action_type.Result
        self._active: _Goal | None = None
        self._indices_for: Any = None
        self._q_idx = self._v_idx = self._cmd_idx = np.zeros(0, dtype=int)
        self._feedback_period = 1.0 / node.params["action_monitor_rate"]
        self._state_period = 1.0 / node.params["state_publish_rate"]
        self._state_at = 0.0
        self._state_msg = state_type()
        self.server = ActionServer(node, action_type, "~/follow_joint_trajectory",
                                   execute_callback=self._execute,
                                   cancel_callback=self._cancel)
        self.state_pub = node.create_publisher(state_type, "~/controller_state", 10)
        self.query_srv = None if query_type is None else node.create_service(
            query_type, "~/query_state", self._query_state)
        self._noted: SplineTrajectory | None = None  # the last trajectory whose scaling was logged

    @classmethod
    def attach(cls, node) -> TrajectoryActionServer | None:
        """The server for ``node``, or None (one warning) when control_msgs does not import."""
        try:
            from control_msgs.action import FollowJointTrajectory
            from control_msgs.msg import JointTrajectoryControllerState
        except ImportError as exc:
            node.get_logger().warning(
                f"control_msgs does not import ({exc}): no ~/follow_joint_trajectory action, "
                "~/query_state nor ~/controller_state (build the bindings: bash scripts/setup.sh)")
            return None
        try:
            from control_msgs.srv import QueryTrajectoryState
        except ImportError as exc:  # bindings built before the service was added
            node.get_logger().warning(f"control_msgs.srv does not import ({exc}): no "
                                      "~/query_state (rebuild the bindings: bash scripts/setup.sh)")
            QueryTrajectoryState = None
        return cls(node, FollowJointTrajectory, JointTrajectoryControllerState,
                   QueryTrajectoryState)

    # ------------------------------------------------------------------------- goals
    def _defaults(self, joints: list[str]) -> Tolerances:
        """The parameters' tolerances over the active ``joints`` (read when a goal starts)."""
        p, model = self.node.params, self.node.plan.model
        rows = [model.joint_index(n) for n in joints]
        path = per_joint("path_tolerance", p["path_tolerance"], model.joint_names)[rows]
        goal = per_joint("goal_tolerance", p["goal_tolerance"], model.joint_names)[rows]
        n = len(joints)
        return Tolerances(StateTolerance(path, np.zeros(n), np.zeros(n)),
                          StateTolerance(goal, np.full(n, p["stopped_velocity_tolerance"]),
                                         np.zeros(n)),
                          p["goal_time"])

    def _check(self, handle) -> _Goal:
        """The goal as a ``_Goal`` ready to run; ``TrajectoryError`` for a goal the rules
        refuse."""
        node, goal = self.node, handle.request
        plan = node.plan
        if plan.law.reference_kind != "joint":
            raise TrajectoryError("INVALID_GOAL", f"the controller is in mode '{plan.law.mode}': "
                                  "set mode:=joint to follow trajectories")
        joints = list(plan.model.active_joints)
        ref = node.reference  # where the trajectory will start from (for the reject policy)
        start = None if not isinstance(ref, JointReference) else {
            n: (ref.position[i], ref.velocity[i], ref.acceleration[i])
            for i, n in enumerate(joints)}
        trajectory = trajectory_from_message(
            goal.trajectory, node.get_clock().now().nanoseconds,
            **trajectory_rules(plan.model, node.params, topic=False),
            multi_dof_joints=goal.multi_dof_trajectory.joint_names,
            multi_dof_points=len(goal.multi_dof_trajectory.points), start_state=start)
        tolerances = goal_tolerances(
            self._defaults(joints), joints,
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.path_tolerance],
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.goal_tolerance],
            (goal.goal_time_tolerance.sec, goal.goal_time_tolerance.nanosec),
            len(goal.component_path_tolerance) + len(goal.component_goal_tolerance))
        return _Goal(handle, trajectory, TrajectoryExecution(joints, tolerances), tuple(joints))

    async def _execute(self, handle):
        log = self.node.get_logger()
        try:
            goal = self._check(handle)
        except TrajectoryError as exc:
            log.warning(f"follow_joint_trajectory goal refused ({exc.code}): {exc}")
            handle.abort()
            return self.Result(error_code=getattr(self.Result, exc.code), error_string=str(exc))
        if self._active is not None:
            self._finish(self._active, "INVALID_GOAL", "preempted by a new goal", hold=False,
                         preempted=True)
        self._active = goal
        self.node.trajectory = goal.trajectory  # sampled by the controller's cycle
        traj = goal.trajectory
        log.info(f"follow_joint_trajectory goal accepted: {len(traj.names)} joints, "
                 f"{len(traj.times)} points, {traj.times[-1]:.3g} s")
        kind, result = await goal.future
        if kind == "succeed":
            handle.succeed()
        elif kind == "canceled":
            handle.canceled()
        elif kind == "preempted":
            # rclcpp's ServerGoalHandle::canceled passes through CANCELING (what JTC's
            # setCanceled does); rclpy has no public call for a cancel the server decides
            try:
                if not handle.is_cancel_requested:
                    handle._update_state(GoalEvent.CANCEL_GOAL)
                handle.canceled()
            except Exception:  # noqa: BLE001 (already terminal: e.g. a cancel request won)
                if handle.is_active:
                    handle.abort()
        else:
            handle.abort()
        return result

    def _cancel(self, handle) -> CancelResponse:
        goal = self._active
        if goal is not None and goal.handle is handle:
            self.node.get_logger().info("follow_joint_trajectory goal canceled: holding position")
            self._stop(goal, hold=True)
            goal.future.set_result(("canceled", self.Result(
                error_code=self.Result.SUCCESSFUL, error_string="canceled")))
        return CancelResponse.ACCEPT

    def _stop(self, goal: _Goal, hold: bool) -> None:
        """No longer the active goal; its trajectory stops. ``hold``: the law's reference
        re-latches at the measured state (else it stays at the last sample)."""
        if self._active is goal:
            self._active = None
        if self.node.trajectory is goal.trajectory:
            self.node.trajectory = None
            if hold:
                self.node.reference = None

    def abort_active(self, code: str, message: str, hold: bool = True) -> None:
        """End the running goal, if any, with ``code`` (a Result error name) for a reason of
        the node's own (a collision reaction)."""
        if self._active is not None:
            self._finish(self._active, code, message, hold)

    def _finish(self, goal: _Goal, code: str, message: str, hold: bool = True,
                preempted: bool = False) -> None:
        self._stop(goal, hold)
        if not goal.future.done():
            kind = "succeed" if code == "SUCCESSFUL" else "preempted" if preempted else "abort"
            if goal.trajectory.scale_note:
                message = f"{message} ({goal.trajectory.scale_note})"
            log = self.node.get_logger()  # (rclpy: one severity per call site)
            if kind == "succeed":
                log.info(f"follow_joint_trajectory goal succeeded: {message}")
            elif kind == "preempted":
                log.info(f"follow_joint_trajectory goal canceled: {message}")
            else:
                log.warning(f"follow_joint_trajectory goal aborted ({code}): {message}")
            goal.future.set_result((kind, self.Result(error_code=getattr(self.Result, code),
                                                      error_string=message)))

    # ------------------------------------------------------------------------- cycle
    def _indices(self) -> None:
        """Where the active joints sit in q, v and the command (once per plan)."""
        plan = self.node.plan
        if self._indices_for is plan:
            return
        model = plan.model
        self._q_idx = np.array([model.q_start[model.joint_index(n)]
                                for n in model.active_joints], dtype=int)
        self._v_idx = np.asarray(model.active_dofs, dtype=int)
        cmd = {n: i for i, n in enumerate(self.node.command_joints)}
        self._cmd_idx = np.array([cmd.get(n, -1) for n in model.active_joints], dtype=int)
        self._indices_for = plan

    def after_cycle(self, q: np.ndarray, v: np.ndarray, command: np.ndarray) -> None:
        """Judge the running goal, send feedback and the controller state (rate-limited)."""
        self._indices()
        node, goal = self.node, self._active
        measured_p, measured_v = q[self._q_idx], v[self._v_idx]
        ref = node.reference  # a JointReference in joint and hold modes
        joint_ref = ref if isinstance(ref, JointReference) else None
        now = time.monotonic()  # feedback and state rates only: outcomes go by the node's clock
        self._note_scaling(goal)
        if goal is not None:
            plan = node.plan
            if node.trajectory is not goal.trajectory:
                self._finish(goal, "INVALID_GOAL", "replaced by a trajectory on "
                             "~/joint_reference", hold=False)
            elif plan.law.reference_kind != "joint":
                self._finish(goal, "INVALID_GOAL", f"mode changed to '{plan.law.mode}'")
            elif tuple(plan.model.active_joints) != goal.joints:
                self._finish(goal, "INVALID_JOINTS", "the active joints changed to "
                             f"{list(plan.model.active_joints)} (passive_joints update)")
            elif goal.trajectory.last is not None and joint_ref is not None:
                sample = goal.trajectory.last
                outcome = goal.execution.update(sample, joint_ref.position, joint_ref.velocity,
                                                measured_p, measured_v)
                if now - goal.feedback_at >= self._feedback_period or outcome is not None:
                    goal.feedback_at = now
                    self._feedback(goal, joint_ref, measured_p, measured_v, sample.index)
                if outcome is not None:
                    self._finish(goal, *outcome)
        if now - self._state_at >= self._state_period:
            self._state_at = now
            self._publish_state(joint_ref, measured_p, measured_v, command)

    def _note_scaling(self, goal: _Goal | None) -> None:
        """Log once per trajectory that it was time-scaled to its velocity limits."""
        traj = self.node.trajectory
        if traj is None or not traj.scale_note or traj is self._noted:
            return
        self._noted = traj
        log = self.node.get_logger()
        if goal is not None and goal.trajectory is traj:
            log.warning(f"follow_joint_trajectory goal {traj.scale_note}")
        else:  # ~/joint_reference, possibly streamed: throttled
            log.warning(f"~/joint_reference trajectory {traj.scale_note}",
                        throttle_duration_sec=2.0)

    def _query_state(self, request, response):
        """JTC's query_state: the running trajectory's state at ``request.time`` over the
        active joints (a joint it does not name: the law's reference now)."""
        node = self.node
        joints = list(node.plan.model.active_joints)
        response.name = joints
        ref, traj = node.reference, node.trajectory
        n = len(joints)
        if isinstance(ref, JointReference):
            p, v, a = ref.position.copy(), ref.velocity.copy(), ref.acceleration.copy()
        else:
            p, v, a = np.zeros(n), np.zeros(n), np.zeros(n)
        t_ns = request.time.sec * 1_000_000_000 + request.time.nanosec
        response.success = False
        if node.plan.law.reference_kind != "joint":
            response.message = f"mode '{node.plan.law.mode}' follows no trajectory"
        elif traj is None or not traj.started:
            response.message = "no trajectory is running"
        elif t_ns < traj.begun_ns:
            response.message = (f"the requested time {t_ns * 1e-9:.3f} s precedes the "
                                 f"trajectory's start {traj.begun_ns * 1e-9:.3f} s")
        else:
            sample = traj.state_at(t_ns)
            index = {name: i for i, name in enumerate(joints)}
            mine = [j for j, name in enumerate(traj.names) if name in index]
            slot = [index[traj.names[j]] for j in mine]
            p[slot], v[slot], a[slot] = (sample.position[mine], sample.velocity[mine],
                                         sample.acceleration[mine])
            response.success = bool(sample.before_last_point)
            response.message = "" if response.success else (
                "the requested time is at or after the trajectory's last point")
        if not response.success:
            node.get_logger().warning(f"~/query_state: {response.message}",
                                      throttle_duration_sec=1.0)
        response.position, response.velocity, response.acceleration = (
            p.tolist(), v.tolist(), a.tolist())
        return response

    def _feedback(self, goal: _Goal, ref, measured_p: np.ndarray, measured_v: np.ndarray,
                  index: int) -> None:
        fb = self.Action.Feedback()
        fb.header.stamp = self.node.get_clock().now().to_msg()
        fb.joint_names = list(goal.joints)
        _point(fb.desired, ref.position, ref.velocity, ref.acceleration)
        _point(fb.actual, measured_p, measured_v)
        _point(fb.error, ref.position - measured_p, ref.velocity - measured_v)
        fb.index = int(index)
        goal.handle.publish_feedback(fb)

    def _publish_state(self, ref, measured_p: np.ndarray, measured_v: np.ndarray,
                       command: np.ndarray) -> None:
        msg = self._state_msg
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.joint_names = list(self.node.plan.model.active_joints)
        effort = np.where(self._cmd_idx >= 0, command[np.maximum(self._cmd_idx, 0)], 0.0)
        if ref is not None:
            _point(msg.reference, ref.position, ref.velocity, ref.acceleration)
            _point(msg.error, ref.position - measured_p, ref.velocity - measured_v)
        else:  # a task-space mode: no joint reference
            _point(msg.reference)
            _point(msg.error)
        _point(msg.feedback, measured_p, measured_v)
        _point(msg.output, effort=effort)
        msg.speed_scaling_factor = 1.0
        self.state_pub.publish(msg)
