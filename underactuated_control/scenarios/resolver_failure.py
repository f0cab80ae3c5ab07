"""The elbow resolver moving arm7 with a failed joint along the patent's triangle, in-process
(issue 23 item 5; doc/nodes/elbow_redundancy_resolver.md, "A failed joint"), or any other
7-joint arm.

``run_triangle`` closes the loop as the nodes do it, without ROS: ``ElbowPlanner`` (the
resolver's planner) steps at ``rate`` Hz from the simulated joints and streams its setpoints;
the controller's joint law (``JointLaw`` + ``CommandShaper`` + ``EffortMapper``, the failed joint
passive in its model) follows them at 1 kHz, each setpoint sampled as ``~/joint_reference``
samples a streamed JointTrajectory (``trajectory_sampling``: a quintic from the reference in
force to the point one sample ahead, a passive joint's entries left out); MuJoCo
(``sim.build_plant``, RK4 at 1 kHz, no motor on the failed joint) is the arm, one command per
state (``sim.closed_loop``, latency 0: the lock-stepped simulator). Zero gravity, model and
plant. The path: Seraji's triangle (``triangle``), hand p0 -> p0 + (0.1, 0.1, 0.1) ->
p0 + (-0.1, 0.1, 0.1) -> p0 while ψ goes ψ0 -> ψ0 - 90° -> ψ0 + 45° -> ψ0, as one sequence
of waypoints; the hand's position and ψ are the task (orientation weights 0: six active joints
for four coordinates, redundant and under-actuated — the patent's claims 11, 22).

It returns the simulated joint angles at every state, the times the plan passed each corner
and the planner's ``Arrival``; ``triangle_errors`` turns those into hand errors with a
forward-kinematics function the caller chooses (the tests: Pinocchio's). ``arm``: arm7 by
default, or any 7-joint arm (``TriangleArm``: its URDF, hand frame, S/E/W links, start).
Importing this module needs no ROS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ..bringup import bundled
from ..control.command import CommandShaper
from ..control.joint_law import JointLaw
from ..control.joint_space import EffortMapper
from ..control.registry import default_settings
from ..control.trajectory_sampling import trajectory_from_message, trajectory_rules
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..redundancy.resolver import Arrival, ElbowPlanner, Settings, Waypoint
from .harness import without_joint_dynamics

__all__ = ["Q0", "LINKS", "POSITION_TASK", "TriangleArm", "TriangleRun", "arm7", "arm7_urdf",
           "triangle", "run_triangle", "triangle_errors"]

Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
LINKS = ("link2", "link4", "link6")  # S, E, W
POSITION_TASK = (16.0, 16.0, 16.0, 0.0, 0.0, 0.0)  # W_e: the hand's position, not its turn
ZERO_G = (0.0, 0.0, 0.0)


def arm7_urdf(free: str | None = None) -> str:
    """The bundled arm7's URDF; ``free``: that joint's <dynamics> (damping 0.05 N m s/rad, dry
    friction 0.1 N m) removed — a failed joint that turns freely."""
    text = bundled("urdf", "arm7.urdf").read_text()
    return text if free is None else without_joint_dynamics(text, free)


@dataclass(frozen=True)
class TriangleArm:
    """A 7-joint arm the triangle is run on: its URDF text (every joint movable in it is the
    arm's), hand frame, shoulder, elbow and wrist links (the arm angle's S, E, W) and start
    configuration."""

    urdf: str
    tip: str
    links: tuple[str, str, str]
    q0: np.ndarray


def arm7() -> TriangleArm:
    """The bundled arm7 from Q0: the arm the resolver was developed on."""
    return TriangleArm(arm7_urdf(), "tool", LINKS, Q0)


def triangle(p0: np.ndarray, psi0: float, scale: float = 1.0
             ) -> list[tuple[np.ndarray, float]]:
    """Seraji's FIG. 6 triangle: (hand position, ψ) of the three corners after p0, ψ0; its
    legs and arm-angle swings times ``scale``."""
    p0 = np.asarray(p0, dtype=float)
    return [(p0 + scale * np.array([0.1, 0.1, 0.1]), psi0 - scale * np.pi / 2),
            (p0 + scale * np.array([-0.1, 0.1, 0.1]), psi0 + scale * np.pi / 4),
            (p0.copy(), psi0)]


def _wrap(x: float) -> float:
    return float((x + np.pi) % (2 * np.pi) - np.pi)


@dataclass
class TriangleRun:
    """What ``run_triangle`` recorded."""

    refused: str  # the planner's reason when it refused the triangle ("" when it ran)
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # s, every state
    q: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))  # joint angles
    corner_times: list[float] = field(default_factory=list)  # s: the plan at each corner
    setpoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))  # every setpoint
    durations: list[float] = field(default_factory=list)  # s: the planned legs
    start: tuple = ()  # (hand position, rotation, ψ) at the start
    arrival: Arrival | None = None  # how the planner said the motion ended (None: not yet)
    scale: float = 1.0  # the triangle's size (``triangle``)


def run_triangle(failed: str | None, passive_joint_motion: str = "disturbance",
                 free: bool = True, leg: float = 3.0, settle: float = 1.0,
                 rate: float = 100.0, gains: tuple[float, float] = (400.0, 40.0),
                 dt: float = 1e-3, arm: TriangleArm | None = None, scale: float = 1.0
                 ) -> TriangleRun:
    """The triangle from the arm's start at rest with ``failed`` (a joint name, or None)
    passive, planned as ``passive_joint_motion`` says; ``free``: the failed joint without its
    URDF friction and damping. Legs of ``leg`` s asked (the plan may stretch them), then
    ``settle`` s; the joint law's kp, kd = ``gains``, its other settings the node's defaults.
    ``arm``: the robot (default ``arm7()``); ``scale``: the triangle's size (``triangle``)."""
    from ..sim import build_plant, closed_loop

    arm = arm or arm7()
    tip, q0 = arm.tip, np.asarray(arm.q0, dtype=float)
    text = without_joint_dynamics(arm.urdf, failed) if free and failed else arm.urdf
    base = RobotModel.from_urdf(text, tip_link=tip, gravity=ZERO_G)
    model = base.with_passive([failed] if failed else [])
    plant = build_plant(text, model, timestep=dt, integrator="rk4", gravity=ZERO_G)
    plant.set_state(q0, np.zeros(model.nv))
    values = default_settings()
    values.update(kp=[gains[0]], kd=[gains[1]], effort_limit_scale=1.0,
                  allow_partial_joints_goal=False, allow_nonzero_velocity_at_trajectory_end=False)
    ws = JacobianWorkspace(model)
    law, shaper = JointLaw(model, values, tip, ws), CommandShaper(model, values, ws)
    mapper = EffortMapper(model, None, 1.0)
    rules = trajectory_rules(model, values, topic=True)
    planner = ElbowPlanner(model, tip, arm.links, Settings(
        hand_weights=POSITION_TASK, passive_joint_motion=passive_joint_motion))
    ws.set_configuration(q0)
    p0, R0 = (x.copy() for x in ws.frame_placement(tip))
    psi0 = planner.arm_angle(q0)
    result = planner.start([Waypoint((p, R0), _wrap(psi), leg) for p, psi in
                            triangle(p0, psi0, scale)], q0)
    run = TriangleRun(refused=result.reason, start=(p0, R0, psi0), scale=scale)
    if not result.accepted:
        return run
    run.durations = [s.duration for s in result.plan.segments]
    every = round(1.0 / (rate * dt))
    steps = round((sum(run.durations) + settle) / dt)
    state = {"reference": law.hold_reference(q0), "trajectory": None,
             "segments": len(result.plan.segments)}
    t_out, q_out, setpoints = [], [], []
    names = list(model.joint_names)

    def control(k: int, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        now_ns = round(k * dt * 1e9)
        t_out.append(k * dt)
        q_out.append(q.copy())
        if k % every == 0 and planner.motion is not None:
            sp = planner.step(q, 1.0 / rate)
            setpoints.append(sp.q.copy())
            run.arrival = sp.arrival or run.arrival
            motion = planner.motion
            left = len(motion.segments)
            if left < state["segments"] or (left == 1 and state["segments"] == 1
                                            and motion.clock >= motion.segments[0].duration):
                run.corner_times.append(k * dt)  # the plan has passed a corner
                state["segments"] = left - (left == 1 and state["segments"] == 1)
            msg = SimpleNamespace(joint_names=names, header=SimpleNamespace(
                stamp=SimpleNamespace(sec=0, nanosec=0)), points=[SimpleNamespace(
                    time_from_start=SimpleNamespace(sec=0, nanosec=round(1e9 / rate)),
                    positions=sp.q.tolist(), velocities=sp.v.tolist(),
                    accelerations=sp.a.tolist(), effort=[])])
            state["trajectory"] = trajectory_from_message(msg, now_ns, **rules)
        if state["trajectory"] is not None:
            state["trajectory"].sample_into(state["reference"], model.active_joints, now_ns)
        out = law.compute(q, v, state["reference"], k * dt, False)
        shaper.apply(q, v, out)
        return plant.clip(mapper.map(out.tau_active).copy())

    closed_loop(plant, control, steps)
    run.t, run.q, run.setpoints = np.array(t_out), np.array(q_out), np.array(setpoints)
    return run


def triangle_errors(run: TriangleRun, fk: Callable[[np.ndarray], np.ndarray]) -> dict:
    """Hand errors of a run, with ``fk(q) -> hand position``: at each corner when the plan
    passed it (``corner_mm``), at the end (``end_mm``), and the largest distance from the
    triangle's straight legs over the whole run (``path_mm``; a leg's time: from the plan's
    previous corner to its own)."""
    p0 = run.start[0]
    corners = [c for c, _ in triangle(p0, run.start[2], run.scale)]
    hand = np.array([fk(q) for q in run.q])
    index = [int(np.searchsorted(run.t, tc)) for tc in run.corner_times]
    corner_mm = [1e3 * float(np.linalg.norm(hand[min(i, len(hand) - 1)] - c))
                 for i, c in zip(index, corners)]
    starts = [p0, *corners[:-1]]
    bounds = [0, *index[:len(corners) - 1], len(hand)]
    worst = 0.0
    for a, b, i0, i1 in zip(starts, corners, bounds[:-1], bounds[1:]):
        u = (b - a) / np.linalg.norm(b - a)
        d = hand[i0:i1] - a
        along = np.clip(d @ u, 0.0, np.linalg.norm(b - a))
        dist = np.linalg.norm(d - along[:, None] * u, axis=1)
        worst = max(worst, float(dist.max(initial=0.0)))
    return {"corner_mm": corner_mm, "end_mm": 1e3 * float(np.linalg.norm(hand[-1] - p0)),
            "path_mm": 1e3 * worst}
