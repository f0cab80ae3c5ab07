"""mujoco_sim: the simulated robot standing in for Gazebo or hardware (doc/architecture.md §4).

Loads the same URDF into MuJoCo (``sim.mujoco_spec``: visuals and collisions dropped, dynamics
only), adds a motor to each **active** joint (passive joints feel only their own damping, dry
friction and limits from the URDF), applies the effort commands of ``command_topic``
(std_msgs/Float64MultiArray in ``command_joints`` order, held between commands, clamped to the
effort limits, non-finite values ignored) and publishes ``/joint_states`` (stamped with this
node's clock; under ``use_sim_time`` with the simulated time) and ``/clock`` (simulated time)
every ``publish_every`` physics steps. A floating-base robot (a floating joint in the URDF, or
``floating_base``) gets a MuJoCo free joint and its base state is published as
nav_msgs/Odometry on ``base_odometry_topic`` (pose of the floating joint's child link in
``odom_frame``, twist in the child frame); ``gravity`` is the world's (zero for orbit). With
``hold_until_first_command`` the robot stays still (brakes on) until a controller sends its
first command; when commands stop (the controller died) the last one is held for a grace that
follows the controller's rhythm, ramped to zero and the brakes put on (``CommandWatchdog``).
``~/applied_wrench`` (geometry_msgs/WrenchStamped) pushes the robot: a wrench at the origin of
the link or frame ``header.frame_id`` names, force and torque in world axes, held until the
next message (a zero wrench clears it), applied through MuJoCo's ``xfrc_applied``
(``AppliedWrench``). Paced to ``real_time_factor`` × wall time (0: as fast as possible).
MuJoCo is a simulation dependency: the controller never imports it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..floating_base import floating_root
from ..model import RobotModel
from ..parameters import ParameterError, ParameterSpec, per_joint, table
from ..sim import AppliedWrench, mujoco_spec
from .common import process_age, run_node
from .parameters import NodeParameters
from .robot import check_joint_names, load_robot, robot_parameters, with_passive


def _seconds_nanoseconds(t: float) -> tuple[int, int]:
    """(sec, nanosec) of a time in seconds, rounded to the nanosecond (0.002 s → (0, 2000000),
    not 1999999)."""
    sec, nanosec = divmod(round(t * 1e9), 1_000_000_000)
    return int(sec), int(nanosec)


def _joint_dofs(model: RobotModel) -> tuple[list[str], np.ndarray]:
    """The 1-DOF joints (those /joint_states carries) and their DOF indices."""
    k1 = [k for k in range(model.nb) if model.nv_joint[k] == 1]
    return [model.joint_names[k] for k in k1], np.array([model.v_start[k] for k in k1], int)


def initial_configuration(value: list[float], model: RobotModel) -> np.ndarray:
    """One value per 1-DOF joint, within the URDF limits; one value for all joints is clipped
    into each joint's limits (so the default 0 suits any arm)."""
    names, dofs = _joint_dofs(model)
    q = per_joint("initial_positions", value, names)
    lower, upper = model.position_lower[dofs], model.position_upper[dofs]
    if len(value) == 1:
        return np.clip(q, lower, upper)
    for name, x, lo, hi in zip(names, q, lower, upper):
        if not lo - 1e-9 <= x <= hi + 1e-9:
            raise ValueError(f"{name} = {x:g} is outside its URDF limits [{lo:g}, {hi:g}]")
    return q


def _check_initial_positions(value: list[float], model: RobotModel | None) -> None:
    if model is not None:
        initial_configuration(value, model)


def _check_initial_velocities(value: list[float], model: RobotModel | None) -> None:
    if model is not None:
        per_joint("initial_velocities", value, _joint_dofs(model)[0])


def _check_box(value: list[float], model: RobotModel | None) -> None:
    if value not in ([], [0.0]) and (len(value) != 6 or min(value[3:]) <= 0):
        raise ValueError("give x, y, z, half_x, half_y, half_z (half sizes > 0), or [0.0]")


def _check_link(value: str, model: RobotModel | None) -> None:
    if value and model is not None:
        model.frame(value)


class CommandWatchdog:
    """What the simulator does with the last effort command while no new one comes, from the
    silence (wall time since it arrived, s): held for a grace, ramped linearly to zero, brakes
    on at ``timeout`` — as a real arm stops when its controller misses its cycles (franka:
    after 20 missed 1 ms commands) rather than acting on a stale command for 0.5 s.

    ``grace`` < 0: adaptive, ``FACTOR`` × the longest recent gap between commands (a peak that
    decays with time constant ``FORGET``; it starts at the longest grace, so a controller's
    start-up is not disturbed), within [``MIN_PERIODS`` state periods, ``MAX_GRACE``]: the
    grace follows the controller's own rhythm, short for one that answers every state.
    ``ramp`` < 0: ``RAMP_PERIODS`` state periods. ``timeout`` < 0: brakes on when the ramp
    reaches zero; 0: no watchdog; > 0 without a grace: held until then as before the ramp
    existed (or until ``ramp`` before it, when given).
    ``lockstep``: as before the ramp existed (held until ``timeout``, 0.5 s by default)."""

    FACTOR, FORGET, MIN_PERIODS, MAX_GRACE, RAMP_PERIODS = 2.0, 1.0, 10, 0.25, 5

    def __init__(self, grace: float, ramp: float, timeout: float, state_period: float,
                 lockstep: bool = False) -> None:
        self.ramp = ramp if ramp >= 0 else self.RAMP_PERIODS * state_period
        self.min_grace = self.MIN_PERIODS * state_period
        self.fixed_grace: float | None = grace if grace >= 0 else None
        self.peak = self.MAX_GRACE / self.FACTOR
        if lockstep:
            timeout = 0.5 if timeout < 0 else timeout
            self.ramp, self.fixed_grace = 0.0, timeout
        elif timeout > 0 and self.fixed_grace is None:  # its meaning before the ramp existed
            self.ramp = max(ramp, 0.0)
            self.fixed_grace = max(timeout - self.ramp, 0.0)
        self.timeout = timeout

    def gap(self, dt: float) -> None:
        """A new command ``dt`` s after the one before."""
        self.peak = max(dt, self.peak * math.exp(-dt / self.FORGET))

    def grace(self) -> float:
        if self.fixed_grace is not None:
            return self.fixed_grace
        return min(max(self.FACTOR * self.peak, self.min_grace), self.MAX_GRACE)

    def brake_after(self) -> float:
        return self.timeout if self.timeout > 0 else self.grace() + self.ramp

    def check(self, silence: float) -> tuple[float, bool]:
        """(share of the last command that acts, brakes on?) after ``silence`` s."""
        if self.timeout == 0:
            return 1.0, False
        if silence > self.brake_after():
            return 0.0, True
        grace = self.grace()
        if silence <= grace:
            return 1.0, False
        return (max(0.0, 1.0 - (silence - grace) / self.ramp) if self.ramp > 0 else 0.0), False


PARAMETERS = table(
    *robot_parameters(chain=False, floating=True, passive_description="joints without motor "
                      "(added to those <ros2_control> leaves without a command interface)"),
    ParameterSpec("command_joints", [""], "joint order of the effort commands (empty: the "
                  "active joints)", read_only=True,
                  validator=check_joint_names("command_joints")),
    ParameterSpec("command_topic", "/effort_controller/commands", "effort command topic",
                  read_only=True),
    ParameterSpec("timestep", 0.001, "physics step", unit="s", low=1e-5, high=0.01,
                  read_only=True),
    ParameterSpec("integrator", "euler", "MuJoCo integrator", read_only=True,
                  choices=("euler", "rk4", "implicit", "implicitfast")),
    ParameterSpec("publish_every", 1, "physics steps per /joint_states", low=1, high=1000,
                  read_only=True),
    ParameterSpec("real_time_factor", 1.0, "simulated / wall time (0: as fast as possible)",
                  low=0.0, high=100.0, read_only=True),
    ParameterSpec("lockstep", False, "after each published state (from the first on), wait "
                  "(up to lockstep_timeout of wall time) for one effort command before stepping "
                  "on: the simulation then follows an event-driven controller exactly, however "
                  "loaded the machine (simulated time may fall behind wall time)",
                  read_only=True),
    ParameterSpec("lockstep_timeout", 0.05, "lockstep: longest wait for a command, then the "
                  "held command acts (the next wait is also for the late answer, so the "
                  "pairing of states and commands recovers)", unit="s", low=1e-3, high=10.0,
                  read_only=True),
    ParameterSpec("hold_until_first_command", True, "keep the robot still (brakes on) until "
                  "the first non-zero effort command arrives", read_only=True),
    ParameterSpec("command_grace", -1.0, "watchdog (not in lockstep): the last effort command "
                  "acts unchanged this long (wall time) after it arrived, then ramps to zero "
                  "over command_ramp; negative: twice the longest recent gap between commands "
                  "(forgotten with a 1 s time constant), at least 10 state periods (timestep x "
                  "publish_every / real_time_factor) and at most 0.25 s: it follows the "
                  "controller's own rhythm, so that its normal jitter is left alone",
                  unit="s", low=-1.0, high=60.0, read_only=True),
    ParameterSpec("command_ramp", -1.0, "watchdog (not in lockstep): the held command ramps "
                  "linearly to zero over this long after command_grace; negative: 5 state "
                  "periods", unit="s", low=-1.0, high=10.0, read_only=True),
    ParameterSpec("command_timeout", -1.0, "no effort command for this long (wall time): zero "
                  "effort and brakes on (as a hardware interface that lost its controller), "
                  "released when commands return; 0: no watchdog at all; negative: as soon as "
                  "the ramp has reached zero (command_grace + command_ramp; in lockstep 0.5 s, "
                  "no ramp); a positive value without command_grace holds the command until "
                  "then (until command_ramp before it when command_ramp is given)", unit="s",
                  low=-1.0, high=60.0, read_only=True),
    ParameterSpec("contact_box", [0.0], "a fixed box x, y, z, half_x, half_y, half_z (root "
                  "frame) that contact_link touches; [0.0]: none", unit="m",
                  validator=_check_box, read_only=True),
    ParameterSpec("contact_link", "", "link carrying a collision sphere of contact_radius "
                  "that touches contact_box; its contact force is published on "
                  "~/contact_wrench", validator=_check_link, read_only=True),
    ParameterSpec("contact_radius", 0.02, "radius of contact_link's sphere", unit="m",
                  low=1e-3, high=1.0, read_only=True),
    ParameterSpec("initial_positions", [0.0], "start configuration per joint (model order), "
                  "within the URDF limits; one value: all joints, clipped into their limits",
                  unit="rad|m", read_only=True, validator=_check_initial_positions),
    ParameterSpec("initial_velocities", [0.0], "start velocity per joint (model order); one "
                  "value: all joints", unit="rad/s|m/s", read_only=True,
                  validator=_check_initial_velocities),
    ParameterSpec("base_odometry_topic", "/odom", "floating base: nav_msgs/Odometry of the "
                  "floating joint's child link", read_only=True),
    ParameterSpec("odom_frame", "world", "floating base: frame_id of the odometry (the fixed "
                  "world frame)", read_only=True),
)


class MujocoSim(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("mujoco_sim", **kwargs)
        import mujoco

        self.mj = mujoco
        self.params = NodeParameters(self, PARAMETERS)
        base = load_robot(self.params.declare(["robot_description", "urdf_path",
                                               "floating_base", "gravity"]))
        try:
            self.floating = floating_root(base) is not None
        except ValueError as exc:
            raise ParameterError(f"parameter robot_description/urdf_path: {exc}") from None
        p = self.params.declare(context=base)
        self.command_topic = p["command_topic"]
        self.timestep = p["timestep"]
        self.publish_every = p["publish_every"]
        self.real_time_factor = p["real_time_factor"]
        self.hold_until_first_command = p["hold_until_first_command"]
        self.lockstep, self.lockstep_timeout = p["lockstep"], p["lockstep_timeout"]
        self.watchdog = CommandWatchdog(
            p["command_grace"], p["command_ramp"], p["command_timeout"],
            state_period=self.timestep * self.publish_every / (self.real_time_factor or 1.0),
            lockstep=self.lockstep)
        self.command_timeout = self.watchdog.timeout
        model = with_passive(base, p["passive_joints"])
        self.joint_names, _ = _joint_dofs(model)
        self.command_joints = p["command_joints"] or list(model.active_joints)
        text = p["robot_description"] or Path(p["urdf_path"]).read_text(encoding="utf-8-sig")

        self.base_link = model.body_names[0] if self.floating else ""
        self.actuated = [n for n in self.command_joints if n in model.active_joints]
        spec = mujoco_spec(text, model, self.actuated, timestep=self.timestep,
                           integrator=p["integrator"], gravity=p["gravity"],
                           floating=self.floating)
        self.contact = self._add_contact(spec, model, p) if p["contact_box"] not in (
            [], [0.0]) else None
        self.m = spec.compile()
        self.d = mujoco.MjData(self.m)
        self.qadr = np.array([self.m.jnt_qposadr[self.m.joint(n).id] for n in self.joint_names])
        self.vadr = np.array([self.m.jnt_dofadr[self.m.joint(n).id] for n in self.joint_names])
        self.ctrl_index = {n: self.m.actuator(f"motor_{n}").id for n in self.actuated}
        self.command = np.zeros(self.m.nu)  # the last effort command (d.ctrl: as it acts)
        self.d.qpos[self.qadr] = initial_configuration(p["initial_positions"], model)
        self.d.qvel[self.vadr] = per_joint("initial_velocities", p["initial_velocities"],
                                           self.joint_names)
        if self.floating:
            free = self.m.joint(model.joint_names[0])
            self.base_qadr, self.base_vadr = int(free.qposadr[0]), int(free.dofadr[0])
            self.odom_pub = self.create_publisher(Odometry, p["base_odometry_topic"], 10)
            self.odom_frame = p["odom_frame"]
        mujoco.mj_forward(self.m, self.d)
        self._slot = [self.ctrl_index.get(n, -1) for n in self.command_joints]
        self.applied = AppliedWrench(self.m, model)
        self.create_subscription(WrenchStamped, "~/applied_wrench", self._on_applied_wrench, 10)

        if self.contact is not None:
            self.contact = (self.m.geom(self.contact[0]).id, self.m.geom(self.contact[1]).id)
            self.wrench_pub = self.create_publisher(WrenchStamped, "~/contact_wrench", 10)
            self.root_link = model.root_link
        self.state_pub = self.create_publisher(JointState, "/joint_states", 100)  # a slow
        # recorder (reliable) is sent what it missed, not dropped after 10 states
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        # use_sim_time (rclpy's own parameter): stamp with d.time itself, not with this node's
        # clock, which would follow the /clock it publishes one state late
        self.stamp_simulated = bool(self.get_parameter("use_sim_time").value)
        self.create_subscription(Float64MultiArray, self.command_topic, self._on_command, 10)
        self.commands_received = 0
        self.lockstep_timeouts = 0  # lockstep waits that ended without a command (after the first)
        self.last_command = time.monotonic()
        self.last_command_simulated = 0.0  # s: MuJoCo's time when it arrived
        self.braked = self.hold_until_first_command
        self.poll: Callable[[], None] | None = None  # serve waiting callbacks (the spin loop)
        self.ramping = False  # the watchdog is ramping the held command down
        self.watchdog_ramps = 0  # silences that started a ramp (a late or dead controller)
        self.watchdog_stops = 0  # ... that ended with the brakes on
        base_text = (f"floating base '{self.base_link}' (odometry on "
                     f"{p['base_odometry_topic']})" if self.floating else "fixed base")
        self.get_logger().info(f"simulating '{model.name}' in MuJoCo at {1 / self.timestep:.0f} "
                               f"Hz, {base_text}, gravity {list(p['gravity'])} m/s^2: motors "
                               f"on {self.actuated}, passive {list(model.passive_joints)}; "
                               f"ready {process_age():.1f} s after the process started")

    def _on_command(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        if data.shape != (len(self.command_joints),):
            self.get_logger().warning(f"command of length {data.size} ignored (expected "
                                      f"{len(self.command_joints)})", throttle_duration_sec=2)
            return
        if not np.all(np.isfinite(data)):
            self.get_logger().warning("non-finite command ignored", throttle_duration_sec=2)
            return
        for slot, value in zip(self._slot, data):
            if slot >= 0:
                self.command[slot] = value
        self.d.ctrl[:] = self.command
        if self.ramping:
            self.ramping = False
            self.get_logger().warning(
                f"effort command {(time.monotonic() - self.last_command) * 1e3:.1f} ms after "
                f"the one before (grace {self.watchdog.grace() * 1e3:.1f} ms): the held command "
                f"had been ramped down ({self.watchdog_ramps} so far)", throttle_duration_sec=2.0)
        self.commands_received += 1
        now = time.monotonic()
        if self.commands_received > 1 and not self.braked:
            self.watchdog.gap(now - self.last_command)
        self.last_command = now
        self.last_command_simulated = float(self.d.time)
        if self.braked and np.any(data != 0.0):  # a zero command (a controller refusing its
            self.braked = False                   # states) does not release the brakes
            if self.commands_received > 1:
                self.get_logger().info("effort commands are back: brakes released")

    def _on_applied_wrench(self, msg: WrenchStamped) -> None:
        f, m = msg.wrench.force, msg.wrench.torque
        before = self.applied.frame
        try:
            self.applied.set(msg.header.frame_id, np.array([f.x, f.y, f.z, m.x, m.y, m.z]),
                             self.d)
        except ValueError as exc:
            self.get_logger().warning(f"~/applied_wrench ignored: {exc}",
                                      throttle_duration_sec=2.0)
            return
        w = self.applied.wrench
        if self.applied.frame:  # a stream of pushes: one line in a while
            self.get_logger().info(
                f"applied wrench at '{self.applied.frame}': force {np.round(w[:3], 3).tolist()} "
                f"N, torque {np.round(w[3:], 3).tolist()} N·m (world axes)",
                throttle_duration_sec=0.5)
        elif before:
            self.get_logger().info(f"applied wrench at '{before}' cleared")

    def _add_contact(self, spec, model: RobotModel, p: dict) -> tuple[str, str]:
        """A sphere on ``contact_link`` and a fixed box: the only collision pair."""
        mj = self.mj
        if not p["contact_link"]:
            raise ParameterError("parameter contact_link: name the link that touches "
                                 "contact_box")
        frame = model.frame(p["contact_link"])
        if frame.body < 0:
            raise ParameterError(f"parameter contact_link: '{p['contact_link']}' does not move")
        sphere = spec.body(model.body_names[frame.body]).add_geom()
        sphere.name, sphere.type = "contact_sphere", mj.mjtGeom.mjGEOM_SPHERE
        sphere.size = [p["contact_radius"], 0.0, 0.0]
        sphere.pos = frame.translation
        box = spec.worldbody.add_geom()
        box.name, box.type = "contact_box", mj.mjtGeom.mjGEOM_BOX
        box.pos, box.size = p["contact_box"][:3], p["contact_box"][3:]
        return "contact_sphere", "contact_box"

    def contact_force(self) -> np.ndarray:
        """Force the sphere applies to the box (root axes), summed over their contacts."""
        total, f6 = np.zeros(3), np.zeros(6)
        sphere, box = self.contact
        for i in range(self.d.ncon):
            c = self.d.contact[i]
            if {int(c.geom1), int(c.geom2)} != {sphere, box}:
                continue
            self.mj.mj_contactForce(self.m, self.d, i, f6)
            on_geom2 = c.frame.reshape(3, 3).T @ f6[:3]  # what geom1 exerts on geom2, world
            total += on_geom2 if int(c.geom1) == sphere else -on_geom2
        return total

    def publish_state(self) -> None:
        msg = JointState()
        if self.stamp_simulated:  # under use_sim_time the states carry the simulated time
            msg.header.stamp.sec, msg.header.stamp.nanosec = _seconds_nanoseconds(self.d.time)
        else:
            msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self.joint_names
        msg.position = self.d.qpos[self.qadr].tolist()
        msg.velocity = self.d.qvel[self.vadr].tolist()
        msg.effort = self.d.qfrc_actuator[self.vadr].tolist()
        if self.floating:  # first: a controller answering the state has the base's too
            self.publish_odometry(msg.header.stamp)
        self.state_pub.publish(msg)
        clock = Clock()
        clock.clock.sec, clock.clock.nanosec = _seconds_nanoseconds(self.d.time)
        self.clock_pub.publish(clock)
        if self.contact is not None:
            wrench = WrenchStamped()
            wrench.header.stamp, wrench.header.frame_id = msg.header.stamp, self.root_link
            f = wrench.wrench.force
            f.x, f.y, f.z = map(float, self.contact_force())
            self.wrench_pub.publish(wrench)

    def publish_odometry(self, stamp) -> None:
        """The free joint's state as nav_msgs/Odometry: MuJoCo's qpos is position and
        quaternion w, x, y, z in the world; its qvel is the linear velocity in world axes and
        the angular velocity in body axes — the twist goes out in body (child) axes."""
        qpos = self.d.qpos[self.base_qadr:self.base_qadr + 7]
        qvel = self.d.qvel[self.base_vadr:self.base_vadr + 6]
        R = np.empty(9)
        self.mj.mju_quat2Mat(R, qpos[3:7])
        linear = R.reshape(3, 3).T @ qvel[:3]
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id = stamp, self.odom_frame
        odom.child_frame_id = self.base_link
        pose, twist = odom.pose.pose, odom.twist.twist
        pose.position.x, pose.position.y, pose.position.z = map(float, qpos[:3])
        o = pose.orientation
        o.w, o.x, o.y, o.z = map(float, qpos[3:7])
        twist.linear.x, twist.linear.y, twist.linear.z = map(float, linear)
        twist.angular.x, twist.angular.y, twist.angular.z = map(float, qvel[3:6])
        self.odom_pub.publish(odom)

    def momentum(self) -> np.ndarray:
        """Total momentum [linear (N·s); angular about the world origin (N·m·s)] of the robot,
        from MuJoCo's own subtree quantities (an independent check of conservation)."""
        self.mj.mj_subtreeVel(self.m, self.d)
        root = 1  # the first body under the world: the whole robot
        mass = self.m.body_subtreemass[root]
        com = self.d.subtree_com[root]
        linear = mass * self.d.subtree_linvel[root]
        return np.concatenate([linear, self.d.subtree_angmom[root] + np.cross(com, linear)])

    def _check_command_watchdog(self) -> None:
        """Hold, ramp down, then zero effort and brakes on when the controller has gone quiet
        (wall time): ``CommandWatchdog``."""
        if self.braked or self.commands_received == 0:
            return
        silence = time.monotonic() - self.last_command
        scale, brake = self.watchdog.check(silence)
        if (brake or scale < 1.0) and self.poll is not None:
            for _ in range(3):  # a command may wait in the queue while the loop caught up
                self.poll()
            silence = time.monotonic() - self.last_command
            scale, brake = self.watchdog.check(silence)
        if brake:
            self.braked, self.ramping = True, False
            self.d.ctrl[:] = 0.0
            self.d.qvel[:] = 0.0
            self.watchdog_stops += 1
            self.get_logger().warning(
                f"no effort command for {silence * 1e3:.1f} ms ("
                f"{(self.d.time - self.last_command_simulated) * 1e3:.1f} ms simulated: the "
                "held command acted that long) > command_timeout "
                f"{self.watchdog.brake_after() * 1e3:.1f} ms (grace "
                f"{self.watchdog.grace() * 1e3:.1f} ms, ramp {self.watchdog.ramp * 1e3:.1f} ms): "
                "zero effort, brakes on until commands return")
        elif scale < 1.0:
            self.d.ctrl[:] = scale * self.command
            if not self.ramping:
                self.ramping = True
                self.watchdog_ramps += 1

    def step(self) -> None:
        self._check_command_watchdog()
        if self.braked:
            self.d.time += self.timestep  # brakes on: time passes, the robot does not move
            return
        self.applied.apply(self.d)
        self.mj.mj_step(self.m, self.d)


PACE_WINDOW = 5.0  # s of wall time over which the simulation's pace is judged


def _report_pace(node, window: tuple[float, float], rtf: float) -> tuple[float, float]:
    """Say when the simulation ran below 80 % of ``real_time_factor`` over the last window
    (the machine cannot keep up): a warning when this node is on wall time (nodes on wall time
    see the arm lag their plans), else information; returns the next window's start."""
    now, simulated = time.perf_counter(), float(node.d.time)
    pace = (simulated - window[1]) / (now - window[0])
    if pace < 0.8 * rtf and not node.lockstep:
        text = (f"the simulation runs at {pace:.2f}x wall time, below real_time_factor {rtf:g} "
                "(this machine cannot keep up)")
        if node.stamp_simulated:  # on /clock (bringup's nodes are): everything slows alike
            node.get_logger().info(text, throttle_duration_sec=30.0)
        else:
            node.get_logger().warning(f"{text}: run the nodes with use_sim_time so that they "
                                      "follow /clock", throttle_duration_sec=30.0)
    return now, simulated


def spin_simulation(node: MujocoSim, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Step physics paced to wall time and serve callbacks in between."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.experimental import EventsExecutor

    executor = EventsExecutor(context=node.context)
    executor.add_node(node)
    if not node.lockstep:
        node.poll = lambda: executor.spin_once(timeout_sec=0.0)
    period = node.timestep * node.publish_every
    rtf = node.real_time_factor
    next_wall = time.perf_counter()
    answered = owed = 0
    window = (time.perf_counter(), float(node.d.time))  # wall and simulated time, for the pace
    try:
        node.publish_state()
        while rclpy.ok(context=node.context) and not should_stop():
            if rtf > 0 and time.perf_counter() - window[0] >= PACE_WINDOW:
                window = _report_pace(node, window, rtf)
            if rtf > 0:
                next_wall += period / rtf
                while True:
                    remaining = next_wall - time.perf_counter()
                    if remaining <= 0:
                        break
                    executor.spin_once(timeout_sec=min(remaining, 0.05))
                if time.perf_counter() - next_wall > 0.5:  # fell far behind: do not catch up
                    next_wall = time.perf_counter()
            else:
                executor.spin_once(timeout_sec=0.0)
            if node.lockstep:  # the answer to the last state, from the first state on (a
                # command answering an earlier state would pair every later one a state late:
                # after a timeout the late answer is still owed, and the wait is for it and the
                # answer to this state, so one slow cycle does not leave a lasting delay)
                deadline = time.perf_counter() + node.lockstep_timeout
                wanted = answered + 1 + owed
                while node.commands_received < wanted and time.perf_counter() < deadline:
                    executor.spin_once(timeout_sec=0.002)
                # owed again only when nothing came (a state the controller refused is never
                # answered: one more short wait, not a slow simulation from then on)
                owed = int(node.commands_received == answered and answered > 0)
                if owed:
                    node.lockstep_timeouts += 1
                    node.get_logger().warning(
                        f"lockstep: no command within lockstep_timeout {node.lockstep_timeout} s "
                        f"({node.lockstep_timeouts} so far); stepping on with the held one",
                        throttle_duration_sec=2.0)
                if rtf > 0 and time.perf_counter() > next_wall:
                    next_wall = time.perf_counter()  # waited for the controller: no catch-up
            answered = node.commands_received
            for _ in range(node.publish_every):
                node.step()
            node.publish_state()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.remove_node(node)
        executor.shutdown()


def main(args: list[str] | None = None) -> int:
    """Console entry point: ``mujoco_sim --ros-args -p urdf_path:=...``."""
    return run_node(MujocoSim, args, spin=spin_simulation)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

