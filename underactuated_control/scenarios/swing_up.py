"""Scenario ``swing_up``: the acrobot or the pendubot swung up and balanced over DDS.

``run_swing_up(robot, out_dir, ...)`` starts ``mujoco_sim`` (RK4, 2 ms, lock-stepped) and
``hybrid_dynamics_controller`` in mode ``swing_up`` as processes (the scenario harness: a ROS
domain of its own, discovery on this machine only, children that die with the parent), lets the
robot hang still until the controller's first command, records /joint_states and the effort
commands for ``duration`` seconds, scores the run like the public double-pendulum leaderboards
(``scoring.py``) and writes ``run.npz``, ``summary.json``, ``swing_up.png`` (angles, torque,
energy) and a rosbag2 MCAP bag (``bag/``, with ``rosbags``).

``two_link_urdf`` builds the two-link robots (acrobot: passive shoulder; pendubot: passive
elbow) that the bundled URDFs, the tests and ``bench/bench_swing_up.py`` use. Importing this
module needs no ROS; ``run_swing_up`` imports rclpy when it runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..bringup import bundled

ROBOTS = ("acrobot", "pendubot")


# ====================================================================== robots
@dataclass(frozen=True)
class TwoLink:
    """A planar two-link arm hanging along -z at q = 0, both axes along y (SI units).

    ``r1``/``r2``: centre of mass along each link from its joint; ``I1``/``I2``: inertia
    about the centre of mass (about the joint axis); ``effort``: the motor's limit."""

    l1: float = 0.2
    l2: float = 0.3
    m1: float = 0.5234602302310271
    m2: float = 0.6255677234174437
    r1: float = 0.2
    r2: float = 0.25569305436052964
    I1: float = 0.010949  # 0.031887 about the joint (leaderboard design C.1) - m1 r1²
    I2: float = 0.009971  # 0.050870 about the joint - m2 r2²
    effort: float = 6.0
    passive_damping: float = 0.0
    active_damping: float = 0.0
    velocity: float = 30.0


def two_link_urdf(robot: str, p: TwoLink = TwoLink(), name: str | None = None) -> str:
    """URDF of an acrobot (``robot="acrobot"``: passive shoulder) or a pendubot (passive
    elbow), with a ``<ros2_control>`` block whose passive joint has no command interface."""
    if robot not in ROBOTS:
        raise ValueError(f"robot must be one of {list(ROBOTS)}, got '{robot}'")
    passive = "shoulder" if robot == "acrobot" else "elbow"
    effort = {j: (0.0 if j == passive else p.effort) for j in ("shoulder", "elbow")}
    damping = {j: (p.passive_damping if j == passive else p.active_damping)
               for j in ("shoulder", "elbow")}

    def inertial(m, r, I):  # noqa: E741 - the inertia's usual letter
        return (f'<inertial><origin xyz="0 0 {-r:.10g}" rpy="0 0 0"/><mass value="{m:.10g}"/>'
                f'<inertia ixx="{I:.10g}" ixy="0" ixz="0" iyy="{I:.10g}" iyz="0" '
                f'izz="{1e-3 * I:.10g}"/></inertial>')

    def joint(j, parent, child, z):
        return (f'  <joint name="{j}" type="continuous">\n'
                f'    <parent link="{parent}"/><child link="{child}"/>\n'
                f'    <origin xyz="0 0 {z:.10g}" rpy="0 0 0"/><axis xyz="0 1 0"/>\n'
                f'    <limit effort="{effort[j]:.10g}" velocity="{p.velocity:.10g}"/>\n'
                f'    <dynamics damping="{damping[j]:.10g}" friction="0.0"/>\n'
                f'  </joint>\n')

    def interfaces(j):
        command = "" if j == passive else '<command_interface name="effort"/>'
        note = ("<!-- no command interface: passive -->" if j == passive else "")
        return (f'    <joint name="{j}">{note}{command}<state_interface name="position"/>'
                f'<state_interface name="velocity"/></joint>\n')

    name = name or robot
    return (
        f'<?xml version="1.0"?>\n'
        f'<!-- {robot}: {"passive shoulder, actuated elbow" if robot == "acrobot" else "actuated shoulder, passive elbow"}'  # noqa: E501
        f'. Links hang along -z at q = 0; upright is shoulder = pi, elbow = 0. -->\n'
        f'<robot name="{name}">\n'
        f'  <link name="world"/>\n'
        f'  <joint name="world_to_base" type="fixed"><parent link="world"/>'
        f'<child link="base_link"/><origin xyz="0 0 1.0" rpy="0 0 0"/></joint>\n'
        f'  <link name="base_link"><inertial><mass value="1.0"/><inertia ixx="0.01" ixy="0" '
        f'ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>\n'
        + joint("shoulder", "base_link", "upper_link", 0.0)
        + f'  <link name="upper_link">{inertial(p.m1, p.r1, p.I1)}</link>\n'
        + joint("elbow", "upper_link", "lower_link", -p.l1)
        + f'  <link name="lower_link">{inertial(p.m2, p.r2, p.I2)}</link>\n'
        f'  <joint name="tip_joint" type="fixed"><parent link="lower_link"/><child link="tip"/>'
        f'<origin xyz="0 0 {-p.l2:.10g}" rpy="0 0 0"/></joint>\n'
        f'  <link name="tip"/>\n'
        f'  <ros2_control name="{name}_system" type="system">\n'
        f'    <hardware><plugin>mock_components/GenericSystem</plugin></hardware>\n'
        + interfaces("shoulder") + interfaces("elbow")
        + '  </ros2_control>\n</robot>\n')


def robot_variants() -> dict[str, TwoLink]:
    """The mass/length sets of the swing-up matrix (bench, tests, docs): the leaderboards'
    design C.1 (0.2 + 0.3 m, 1.15 kg, 6 N·m), a light short arm (0.35 m, 0.55 kg, 2 N·m) and a
    heavy long one (0.7 m, 2.2 kg, 18 N·m). For the pendubot each limit is about 1.5 times the
    torque that holds the straight arm horizontal (the hard end of the leaderboards' range)."""
    return {
        "design_c1": TwoLink(),
        "light_short": TwoLink(l1=0.15, l2=0.2, m1=0.25, m2=0.3, r1=0.15, r2=0.17, I1=0.0012,
                               I2=0.0015, effort=2.0),
        "heavy_long": TwoLink(l1=0.3, l2=0.4, m1=1.0, m2=1.2, r1=0.3, r2=0.34, I1=0.02,
                              I2=0.03, effort=18.0),
    }


# ====================================================================== offline loop (no ROS)
def simulate_offline(urdf: str, duration: float = 10.0, settings: dict | None = None,
                     timestep: float = 0.002, latency_steps: int = 0,
                     q0: tuple[float, float] = (0.0, 0.0), stop_settled: bool = False,
                     give_up: float | None = None,
                     pushes: Sequence[tuple[float, Sequence[float]]] = (),
                     torque_noise: float = 0.0, seed: int = 0,
                     law_urdf: str | None = None) -> dict:
    """The swing-up law against MuJoCo physics stepped in this process (RK4; the model
    ``mujoco_sim`` builds, ``sim.closed_loop``): each step the law sees the state and its
    torque, through the node's command stages (``control/command``), is applied
    ``latency_steps`` steps later. Returns t, q, v, tau (joint torques as applied, N×2),
    phase and the law. ``stop_settled`` (for tuning): once balancing within 1e-4 rad and
    1e-3 rad/s of upright with a torque below 1e-3 τ_max, the rest of the run is that state
    held with zero torque; ``give_up``: stop (``gave_up``) when the law has not been
    balancing by then. ``pushes``: (time [s], joint velocity change [rad/s]) knocks applied
    to the simulated robot; ``torque_noise``: the applied torque gets Gaussian noise of this
    standard deviation [N·m] (seeded by ``seed``), the robustness boards' torque noise;
    ``law_urdf``: the controller's model when it is not the simulated robot's."""
    from ..control.command import CommandShaper, shaper_parameters
    from ..control.swing_up_law import SwingUpLaw
    from ..model import RobotModel
    from ..sim import build_plant, closed_loop

    model = RobotModel.from_urdf(law_urdf or urdf)
    names = {s.name: s.default for s in (*SwingUpLaw.parameters, *shaper_parameters())}
    names.update(settings or {})
    law = SwingUpLaw(model, names, model.body_names[-1])
    shaper = CommandShaper(model, names, law.workspace)  # the node's command stages
    plant = build_plant(urdf, RobotModel.from_urdf(urdf) if law_urdf else model,
                        timestep=timestep, integrator="rk4")
    plant.set_state(np.asarray(q0, float))
    steps = int(round(duration / timestep))
    a = model.joint_index(model.active_joints[0])
    t = np.empty(steps + 1)
    q = np.empty((steps + 1, 2))
    v = np.empty((steps + 1, 2))
    tau = np.zeros((steps + 1, 2))
    phase = np.zeros(steps + 1, dtype=np.int8)
    gave_up = [False]

    knocks = sorted(((int(round(when / timestep)), np.asarray(dv, float)) for when, dv in pushes),
                    key=lambda knock: knock[0])  # by step (two at one step: both act)
    rng = np.random.default_rng(seed)

    def control(k: int, qk: np.ndarray, vk: np.ndarray) -> list[float]:
        while knocks and knocks[0][0] <= k:
            plant.set_state(qk, vk + knocks.pop(0)[1])
            qk, vk = plant.state()
        t[k], q[k], v[k] = plant.d.time, qk, vk
        out = law.compute(q[k], v[k], None, float(plant.d.time), False)
        torque = float(shaper.apply(q[k], v[k], out).tau_active[0])
        return [torque + (torque_noise * rng.normal() if torque_noise > 0.0 else 0.0)]

    def applied(k: int, torque: np.ndarray) -> bool:
        tau[k, a] = plant.clip(torque)[0]
        phase[k] = law.phase == "balancing"
        if stop_settled and phase[k] and k < steps and np.abs(law.state_error(q[k], v[k])[:2]
                                                              ).max() < 1e-4 \
                and np.abs(v[k]).max() < 1e-3 and abs(tau[k, a]) < 1e-3 * law.effort_limit:
            t[k + 1:] = t[k] + timestep * np.arange(1, steps + 1 - k)
            q[k + 1:], v[k + 1:], tau[k + 1:], phase[k + 1:] = q[k], v[k], 0.0, 1
            return True
        gave_up[0] = give_up is not None and plant.d.time >= give_up and law.switches == 0
        return gave_up[0]

    k = closed_loop(plant, control, steps, latency_steps, applied)
    if gave_up[0]:
        return {"t": t[:k + 1], "q": q[:k + 1], "v": v[:k + 1], "tau": tau[:k + 1],
                "balancing": phase[:k + 1], "law": law, "gave_up": True}
    return {"t": t, "q": q, "v": v, "tau": tau, "balancing": phase, "law": law, "gave_up": False}


# ====================================================================== the scenario over DDS
def fill_missed_times(t: np.ndarray, step: float) -> np.ndarray:
    """The times ``t`` [s] of recorded states (strictly increasing where known) with the
    unknown ones (NaN: their clock was missed) filled: between two known states evenly (a
    clock taken for the wrong state under load, one step late, would otherwise put a filled
    state on its successor's time), before the first and after the last one ``step`` [s]
    apart. Strictly increasing."""
    index = np.arange(len(t))
    known = np.isfinite(t)
    k = index[known]
    filled = np.interp(index, k, t[known])
    first, last = index < k[0], index > k[-1]
    filled[first] = t[k[0]] - step * (k[0] - index[first])
    filled[last] = t[k[-1]] + step * (index[last] - k[-1])
    return filled


def run_swing_up(robot: str, out_dir: Path | str, duration: float = 10.0,
                 domain: int | None = None, urdf_path: Path | str | None = None,
                 config_path: Path | str | None = None, overrides: dict | None = None,
                 plot: bool = True, bag: bool = True, log=print) -> dict:
    """Swing ``robot`` ("acrobot" or "pendubot") up over DDS and score the run.

    Starts ``mujoco_sim`` and ``hybrid_dynamics_controller`` (mode ``swing_up``) with
    ``config/<robot>.yaml`` (or ``config_path``) on ``urdf/<robot>.urdf`` (or ``urdf_path``)
    through the scenario harness; ``overrides``: extra ``-p name:=value`` for the controller.
    The robot hangs still until the controller's first command; ``duration`` seconds from then
    are recorded and scored. Writes into ``out_dir``: ``summary.json``, ``run.npz`` (t, q, v,
    tau), ``swing_up.png``, ``bag/`` (rosbag2, MCAP: /joint_states, /clock and the effort
    commands) and the nodes' logs. Returns the summary. ``domain``: ROS domain (default:
    ROS_DOMAIN_ID or one from the pid).
    """
    if robot not in ROBOTS:
        raise ValueError(f"robot must be one of {list(ROBOTS)}, got '{robot}'")
    if not (np.isfinite(duration) and 0.5 <= duration <= 600.0):
        raise ValueError(f"duration must be within 0.5 .. 600 s, got {duration}")
    urdf_path = Path(urdf_path) if urdf_path else bundled("urdf", f"{robot}.urdf")
    config_path = Path(config_path) if config_path else bundled("config", f"{robot}.yaml")
    for what, path in (("urdf_path", urdf_path), ("config_path", config_path)):
        if not path.is_file():
            raise ValueError(f"{what}: file '{path}' not found")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    from ..bringup import CONTROLLER, SIMULATOR
    from ..model import RobotModel
    from .harness import COMMAND_TOPIC, ScenarioRun, demo_domain, write_summary

    model = RobotModel.from_urdf(urdf_path.read_text())
    domain = domain if domain is not None else demo_domain()[0]
    joint_names = set(model.joint_names)
    ignored = [0]

    def keep(topic: str, msg) -> bool:  # only the simulator's states of this robot (another
        if topic != "/joint_states" or (set(msg.name) == joint_names  # node on the domain?)
                                        and len(msg.effort) == len(msg.name)):
            return True
        ignored[0] += 1
        return False

    run = ScenarioRun(out_dir, domain, urdf_path, config_path, "", log,
                      topics=("/joint_states", "/clock", COMMAND_TOPIC), keep=keep)
    rec = run.recorder
    limit = 120 + 8 * duration  # s of wall time: lock-stepped on a loaded machine
    scanned = [0, None]  # states looked at for the release, the first released one

    def released() -> int | None:
        """Index of the first state in which the motor acts (the simulator holds the robot
        still, braked, until the controller's first command)."""
        if scanned[1] is None:
            states = rec.messages("/joint_states")
            for i in range(scanned[0], len(states)):
                if any(e != 0.0 for e in states[i][1].effort):
                    scanned[1] = i
                    break
            else:
                scanned[0] = len(states)
        return scanned[1]

    def sim_times() -> np.ndarray:
        """The simulated time of each state received: that of the /clock following it
        before the next state; NaN when that clock was missed. The simulator publishes /clock
        (its simulated time) right after each state: a state or a clock the recorder misses
        under load is then a gap in time, not a shifted time axis."""
        states, clocks = rec.messages("/joint_states"), rec.messages("/clock")
        arrivals = sorted([(r, "s", i) for i, (r, _) in enumerate(states)]
                          + [(r, "c", m.clock.sec + 1e-9 * m.clock.nanosec) for r, m in clocks])
        t = np.full(len(states), np.nan)
        for (_, kind, x), (_, after, clock) in zip(arrivals[:-1], arrivals[1:]):
            if kind == "s" and after == "c":
                t[x] = clock
        return t

    steps = int(round(duration / 0.002))
    try:
        log(f"[swing_up] {robot}: starting mujoco_sim (RK4, 2 ms) and hybrid_dynamics_controller "
            f"(mode swing_up) on ROS domain {domain} ...")
        run.start([SIMULATOR], limit_s=limit)  # the simulator first: it waits, braked
        deadline = time.monotonic() + 90
        while not rec.counts()["/joint_states"] and time.monotonic() < deadline:
            run.spin(0.05)  # record from the first state on: the release is in the record
            run.check_alive()
        run.start([CONTROLLER], {CONTROLLER: overrides or {}}, limit_s=limit)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and released() is None:
            run.spin(0.05)
            run.check_alive()
        first = released()
        if first is None:
            raise RuntimeError("the controller sent no effort within 90 s: the nodes did not "
                               f"connect (see the logs in {out_dir})")
        t_start = rec.messages("/joint_states")[first][0] * 1e-9
        release_time = sim_times()[max(first - 1, 0)]  # NaN if its clock was missed
        log(f"[swing_up] released at the first command; recording {duration:g} s")
        next_report = t_start + 1.0
        while (rec.counts()["/joint_states"] - first <= steps
               and time.monotonic() < t_start + 6 * duration + 30):
            if run.sim_time - release_time >= duration + 1e-3:  # states were missed
                break
            run.spin(0.02)
            if time.monotonic() >= next_report:
                next_report += 1.0
                msg = rec.messages("/joint_states")[-1][1]
                a = model.active_dofs[0]
                simulated = run.sim_time - release_time
                if not np.isfinite(simulated):
                    simulated = time.monotonic() - t_start
                log(f"[swing_up] t = {simulated:4.1f} s  q = "
                    f"{np.round(np.asarray(msg.position), 2).tolist()} rad  torque "
                    f"{msg.effort[a]:+.2f} N·m")
            run.check_alive()
    finally:
        run.close()

    # -- the recorded run ------------------------------------------------------------------
    states = [(r * 1e-9, m) for r, m in rec.messages("/joint_states")]
    names = list(model.joint_names)
    start = max(first - 1, 0)  # the last braked sample: the robot at rest, hanging
    sim = sim_times()[start:]
    known = np.isfinite(sim)
    if known.sum() >= 2 and np.all(np.diff(sim[known]) > 0):  # the simulated time, gaps kept
        sim = fill_missed_times(sim, 0.002)
        sim = sim - sim[0]
        keep = int(np.searchsorted(sim, duration + 1e-6))
        time_source = "/clock"
    else:  # no clock: one state per physics step
        sim = 0.002 * np.arange(len(sim))
        keep = steps + 1
        time_source = "one state per 2 ms step"
    recorded = [m for _, m in states[start:start + keep]]
    idx = [list(recorded[0].name).index(n) for n in names]
    received = np.array([r for r, _ in states[start:start + keep]])  # wall clock (monotonic)
    q = np.array([np.asarray(m.position)[idx] for m in recorded])
    v = np.array([np.asarray(m.velocity)[idx] for m in recorded])
    tau = np.array([np.asarray(m.effort)[idx] for m in recorded])
    t = sim[:len(recorded)]  # the simulated time of each state
    np.savez(out_dir / "run.npz", t=t, q=q, v=v, tau=tau, joint_names=np.array(names))
    summary = summarize(model, urdf_path, t, q, v, tau, duration)
    summary.update(robot=robot, ros_domain=domain, config=str(config_path),
                   overrides=overrides or {}, states_recorded=int(len(t)),
                   states_missed=int(round(t[-1] / 0.002)) + 1 - len(t), time_from=time_source,
                   commands_recorded=rec.counts()[COMMAND_TOPIC],
                   foreign_states_ignored=ignored[0],
                   real_time_factor=float(t[-1] / max(received[-1] - received[0], 1e-9)))
    dt = np.diff(received)  # wall-clock spacing of the states as they arrived
    summary["state_period_ms"] = {"median": 1e3 * float(np.median(dt)),
                                  "max": 1e3 * float(dt.max())}
    if bag:
        try:
            summary["bag"] = str(rec.write(out_dir / "bag"))
        except Exception as exc:  # noqa: BLE001 - the run's data are in run.npz anyway
            summary["bag"] = f"not written: {exc}"
    if plot:
        summary["plot"] = str(plot_run(out_dir / "swing_up.png", model, t, q, tau, summary))
    write_summary(out_dir / "summary.json", summary)
    s = summary["score"]
    log(f"[swing_up] {robot}: success {s['success']}, swing-up time {s['swingup_time']}, "
        f"score {s['score']:.3f} (energy {s['energy']:.2f} J, torque cost "
        f"{s['torque_cost']:.2f} N²m²s, smoothness {s['torque_smoothness']:.4f} N·m, velocity "
        f"cost {s['velocity_cost']:.1f} rad²/s); final error {summary['final_error_rad']:.4f} "
        f"rad; wrote {out_dir}")
    return summary


def summarize(model, urdf_path, t, q, v, tau, duration: float, tip_frame: str = "tip") -> dict:
    """Scores (``scoring.score_run``) and how well the upright is held."""
    from ..control.swing_up_law import SwingUpLaw
    from ..scoring import full_tip_height, score_run, tip_heights, upright_error

    law = SwingUpLaw(model, {s.name: s.default for s in SwingUpLaw.parameters}, tip_frame)
    h = tip_heights(model, q, tip_frame)
    full = full_tip_height(model, tip_frame)
    score = score_run(t, q, v, tau, h, full)
    err = upright_error(q, law.q_up, law.continuous)
    out = {"urdf": str(urdf_path), "duration_s": float(t[-1]), "requested_duration_s": duration,
           "score": score, "full_tip_height_m": full, "final_error_rad": float(err[-1]),
           "q_up": law.q_up.tolist()}
    if score["success"]:
        held = t >= score["swingup_time"] + 1.0
        out["max_error_from_1s_after_swing_up_rad"] = float(err[held].max()) if held.any() \
            else None
    return out


def plot_run(path: Path, model, t, q, tau, summary: dict, tip_frame: str = "tip") -> Path | str:
    """Angles, torque, energy and tip height against time (PNG)."""
    from .harness import pyplot

    plt = pyplot()
    if plt is None:
        return "not written: matplotlib is not installed"
    from ..control.swing_up_law import SwingUpLaw
    from ..scoring import tip_heights

    law = SwingUpLaw(model, {s.name: s.default for s in SwingUpLaw.parameters}, tip_frame)
    v = np.gradient(q, t, axis=0) if len(t) > 2 else np.zeros_like(q)
    energy = np.array([law.energy(x, y) for x, y in zip(q, v)])
    h = tip_heights(model, q, tip_frame)
    fig, ax = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    for k, name in enumerate(model.joint_names):
        kind = "passive" if name in model.passive_joints else "motor"
        ax[0].plot(t, q[:, k], label=f"{name} ({kind})")
        ax[0].axhline(law.q_up[k], color=f"C{k}", ls=":", lw=0.8)
    ax[0].set_ylabel("angle [rad]")
    ax[0].legend(fontsize=8)
    s = summary["score"]
    ax[0].set_title(f"{model.name}: " + (f"swing-up {s['swingup_time']:.2f} s"
                                          if s["success"] else "swing-up failed")
                    + f", score {s['score']:.3f}")
    a = model.active_dofs[0]
    ax[1].plot(t, tau[:, a])
    limit = model.effort_limit[a]
    for sgn in (1, -1):
        ax[1].axhline(sgn * limit, color="k", ls=":", lw=0.8)
    ax[1].set_ylabel(f"{model.joint_names[a]} torque [N·m]")
    ax[2].plot(t, energy - law.energy_up)
    ax[2].axhline(0.0, color="k", ls=":", lw=0.8)
    ax[2].set_ylabel("E − E_up [J]")
    ax[3].plot(t, h)
    ax[3].axhline(s["threshold_height"], color="r", ls=":", lw=0.8, label="90 % of full height")
    ax[3].set_ylabel("tip height [m]")
    ax[3].set_xlabel("t [s]")
    ax[3].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
