"""Scenario ``space`` (``underactuated-control demo --scenario space``): the 7-DOF arm on a
200 kg free-flying bus in orbit (``urdf/space_arm.urdf``, ``config/space.yaml``) moves its hand
around a circle three times: holding the bus attitude through the rotation rows of J_D (paper
§7, the reaction null space), with the naive controller (``passive_weight: 0``), and holding it
again without a base sensor (``base_state: momentum``), whose estimate is compared with
MuJoCo's truth.

The metrics are recomputed here from the recorded messages (MuJoCo's /joint_states and /odom),
not taken from the controller's own bookkeeping; the tests recompute them again from the bag
with Pinocchio. Importing this module needs no ROS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..bringup import CONTROLLER, bundled
from ..floating_base import system_momentum
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..so3 import quaternion_to_matrix, rotation_angle
from .harness import (
    COMMAND_TOPIC,
    ESTIMATE_TOPIC,
    REFERENCE_TOPIC,
    ScenarioRun,
    circle_path,
    command_rate,
    fixed_fingers,
    frame_positions,
    pyplot,
    reference_at,
    stamp_seconds,
)


def arm_on_a_bus(arm: str, mass: float = 60.0, inertia: float = 6.4,
                 mount: tuple[float, float, float] = (0.0, 0.0, 0.4)) -> str:
    """The URDF text of a fixed-base arm on a free-flying bus, declared as
    ``urdf/space_arm.urdf`` declares its own: a floating ``root_joint`` from ``world`` to a
    ``bus`` link of ``mass`` [kg] and isotropic ``inertia`` [kg m²] about its centre, the arm's
    root link fixed at ``mount`` [m] on it. A fixed joint from a ``world`` link in the arm's
    URDF (as the xarm7's) is removed; prismatic finger joints become fixed."""
    arm = re.sub(r'<link name="world"\s*/>', "", arm)
    arm = re.sub(r'<joint name="[^"]*" type="fixed">\s*<parent link="world"\s*/>.*?</joint>',
                 "", arm, flags=re.S)
    arm = fixed_fingers(arm)
    links = re.findall(r'<link name="([^"]+)"', arm)
    children = set(re.findall(r'<child link="([^"]+)"', arm))
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise ValueError(f"the arm's URDF has {len(roots)} root links, not one: {roots}")
    x, y, z = mount
    bus = ('<link name="world"/><joint name="root_joint" type="floating"><parent link="world"/>'
           '<child link="bus"/></joint><link name="bus"><inertial><origin xyz="0 0 0"/>'
           f'<mass value="{mass}"/><inertia ixx="{inertia}" ixy="0" ixz="0" iyy="{inertia}" '
           f'iyz="0" izz="{inertia}"/></inertial></link><joint name="arm_mount" type="fixed">'
           f'<parent link="bus"/><child link="{roots[0]}"/><origin xyz="{x} {y} {z}" '
           'rpy="0 0 0"/></joint>')
    at = arm.index("<link ")
    return arm[:at] + bus + arm[at:]


def floating_states(model: RobotModel, joint_states: list, odometry: list
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stamps s, q, v) of the recorded MuJoCo states of a floating-base model (simulated
    time): each /joint_states paired with the /odom of the same stamp (published together)."""
    by_stamp = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in odometry}
    names = [model.joint_names[k] for k in range(1, model.nb)]
    times, qs, vs = [], [], []
    for _, msg in joint_states:
        odom = by_stamp.get((msg.header.stamp.sec, msg.header.stamp.nanosec))
        if odom is None or list(msg.name) != names:
            continue
        p, o = odom.pose.pose.position, odom.pose.pose.orientation
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        times.append(stamp_seconds(msg))
        qs.append([p.x, p.y, p.z, o.x, o.y, o.z, o.w, *msg.position])
        vs.append([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z, *msg.velocity])
    return np.array(times), np.array(qs), np.array(vs)


def space_metrics(model: RobotModel, frame: str, t: np.ndarray, q: np.ndarray, v: np.ndarray,
                  references: list, t_path: float, commands: list) -> dict:
    """Hand error against the streamed reference (m), the bus's rotation from its first
    attitude (deg), the system's momentum drift, the effort peak and the command rate, from
    recorded states (their stamps ``t``, s of simulated time; the path starts at ``t_path``,
    simulated)."""
    ws = JacobianWorkspace(model)
    hand = frame_positions(ws, frame, q)
    error = np.linalg.norm(hand - reference_at(t, references), axis=1)
    R0 = quaternion_to_matrix(q[0, 3:7])
    attitude = np.degrees([rotation_angle(R0.T @ quaternion_to_matrix(x[3:7])) for x in q])
    h = np.array([system_momentum(model, a, b, ws) for a, b in zip(q[::25], v[::25])])
    efforts = np.array([c.data for _, c in commands]) if commands else np.zeros((1, 1))
    moving = t >= t_path
    return {
        "hand_rms_mm": float(1e3 * np.sqrt(np.mean(error[moving] ** 2))),
        "hand_max_mm": float(1e3 * error[moving].max()),
        "base_attitude_drift_max_deg": float(attitude.max()),
        "base_attitude_drift_final_deg": float(attitude[-1]),
        "base_translation_final_mm": float(1e3 * np.linalg.norm(q[-1, :3] - q[0, :3])),
        "momentum_drift_linear_Ns": float(np.abs(h[:, :3] - h[0, :3]).max()),
        "momentum_drift_angular_Nms": float(np.abs(h[:, 3:] - h[0, 3:]).max()),
        "effort_peak_Nm": float(np.abs(efforts).max()),
        "loop_rate_hz": command_rate(commands),
        "_series": {"t": t - t_path, "error": error, "attitude": attitude, "hand": hand},
    }


def estimate_drift(estimates: list, odometry: list) -> dict:
    """How far the controller's momentum estimate (~/base_estimate) is from MuJoCo's base
    (/odom) at the same stamps: attitude (deg) and position (mm), largest and last."""
    truth = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in odometry}
    att, pos = [], []
    for _, e in estimates:
        m = truth.get((e.header.stamp.sec, e.header.stamp.nanosec))
        if m is None:
            continue
        a, b = e.pose.pose, m.pose.pose
        Ra = quaternion_to_matrix([a.orientation.x, a.orientation.y, a.orientation.z,
                                   a.orientation.w])
        Rb = quaternion_to_matrix([b.orientation.x, b.orientation.y, b.orientation.z,
                                   b.orientation.w])
        att.append(np.degrees(rotation_angle(Ra.T @ Rb)))
        pos.append(1e3 * np.linalg.norm([a.position.x - b.position.x,
                                         a.position.y - b.position.y,
                                         a.position.z - b.position.z]))
    if not att:
        return {"estimate_samples": 0}
    return {"estimate_samples": len(att), "estimate_attitude_error_max_deg": float(max(att)),
            "estimate_attitude_error_final_deg": float(att[-1]),
            "estimate_position_error_max_mm": float(max(pos)),
            "estimate_position_error_final_mm": float(pos[-1])}


SPACE_RUNS = {  # run -> controller overrides
    "held": {},
    "naive": {"passive_weight": 0.0},
    "momentum": {"base_state": "momentum"},
}


def run_space(out_dir: Path, duration: float | None, domain: int,
              log: Callable[[str], None] = print, runs: tuple[str, ...] = tuple(SPACE_RUNS),
              radius: float = 0.05, overrides: Mapping[str, Any] | None = None,
              robot: tuple[Path, str, list[float]] | None = None) -> dict:
    """The ``space`` scenario: one run per entry of ``runs`` (see ``SPACE_RUNS``), the hand
    around a circle of ``radius`` [m] in ``duration`` s (default 8). ``overrides``: controller
    parameters for every run on top of ``config/space.yaml`` (e.g. ``passive_weight``), each
    run's own (``SPACE_RUNS``: the naive run's ``passive_weight: 0``) applied after them.
    ``robot``: (URDF file, hand frame, the arm's start positions) of another free-flyer than
    ``urdf/space_arm.urdf`` (e.g. ``arm_on_a_bus``'s), with the same law."""
    if not (np.isfinite(radius) and radius > 0.0):
        raise ValueError(f"radius must be > 0 m, got {radius}")
    period = duration or 8.0
    urdf, config = bundled("urdf", "space_arm.urdf"), bundled("config", "space.yaml")
    frame, sim_params = "tool", {}
    if robot is not None:
        urdf, frame = Path(robot[0]), robot[1]
        sim_params = {"initial_positions": [float(x) for x in robot[2]]}
    model = RobotModel.from_urdf(urdf, floating_base=True, gravity=(0.0, 0.0, 0.0))
    model.frame(frame)  # ValueError naming an unknown frame
    if robot is not None:
        overrides = {"tip_link": frame, **(overrides or {})}
    results: dict[str, dict] = {}
    for name in runs:
        if name not in SPACE_RUNS:
            raise ValueError(f"space run must be one of {sorted(SPACE_RUNS)}, got '{name}'")
    for k, name in enumerate(runs):
        params = {**(overrides or {}), **SPACE_RUNS[name]}
        run = ScenarioRun(out_dir, domain, urdf, config, name, log)
        try:
            log(f"[space] run '{name}' ({k + 1}/{len(runs)}): starting mujoco_sim and "
                f"{CONTROLLER} {params or '(config/space.yaml)'} ...")
            run.start(["mujoco_sim", CONTROLLER], {CONTROLLER: params, "mujoco_sim": sim_params})
            rec = run.recorder
            run.wait_for(lambda rec=rec: rec.counts()["/odom"] > 0 and
                         rec.counts()[COMMAND_TOPIC] > 5, 120.0, "the controller sent no effort")

            def latest(rec=rec) -> np.ndarray:  # the latest state whose /odom has arrived (two
                # topics: a /joint_states may come before its /odom, or its /odom be missed)
                return floating_states(model, rec.messages("/joint_states")[-50:],
                                       rec.messages("/odom"))[1]

            run.wait_for(lambda: len(latest()) > 0, 30.0,
                         "no /joint_states paired with an /odom of the same stamp")
            q = latest()
            ws = JacobianWorkspace(model)
            ws.set_configuration(q[-1])
            start = ws.frame_placement(frame)[0].copy()
            path = circle_path(start, radius, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], period)
            log(f"[space] hand around a {100 * radius:g} cm circle in {period:g} s")
            t0 = run.stream_path(path, period + 1.0, "space")
        finally:
            run.close()
        t, q, v = floating_states(model, rec.messages("/joint_states"), rec.messages("/odom"))
        keep = t >= t0 - 0.5
        metrics = space_metrics(model, frame, t[keep], q[keep], v[keep],
                                rec.messages(REFERENCE_TOPIC), t0,
                                [c for c in rec.messages(COMMAND_TOPIC)  # no stamp: wall
                                 if c[0] * 1e-9 >= run.path_wall_start])
        if name == "momentum":
            metrics.update(estimate_drift(rec.messages(ESTIMATE_TOPIC), rec.messages("/odom")))
        rec.write(out_dir / f"bag_{name}")
        results[name] = metrics
        log(f"[space] {name}: hand RMS {metrics['hand_rms_mm']:.2f} mm (max "
            f"{metrics['hand_max_mm']:.2f}), bus rotation max "
            f"{metrics['base_attitude_drift_max_deg']:.4f} deg, momentum drift "
            f"{metrics['momentum_drift_angular_Nms']:.2e} N·m·s")
    summary_runs = {n: {k: v for k, v in m.items() if not k.startswith("_")}
                    for n, m in results.items()}
    summary = {"scenario": "space", "urdf": str(urdf), "config": str(config),
               "path": {"shape": "circle", "radius_m": radius, "period_s": period},
               "overrides": dict(overrides or {}), "runs": summary_runs}
    if "held" in results and "naive" in results:
        ratio = results["naive"]["base_attitude_drift_max_deg"] / max(
            results["held"]["base_attitude_drift_max_deg"], 1e-9)
        summary["attitude_drift_ratio_naive_over_held"] = float(ratio)
        summary["success"] = bool(ratio >= 5.0 and results["held"]["hand_rms_mm"] < 5.0)
        log(f"[space] bus attitude drift: naive / held = {ratio:.1f}x")
    else:
        summary["success"] = all(m["hand_rms_mm"] < 5.0 for m in results.values())
    summary["plot"] = str(plot_space(out_dir / "space.png", results))
    return summary


def plot_space(path: Path, results: dict) -> Path | str:
    plt = pyplot()
    if plt is None:
        return "not written: matplotlib is not installed"
    fig, ax = plt.subplots(3, 1, figsize=(8, 9))
    for name, m in results.items():
        s = m["_series"]
        ax[0].plot(s["t"], s["attitude"], label=name)
        ax[1].plot(s["t"], 1e3 * s["error"], label=name)
        ax[2].plot(s["hand"][:, 1], s["hand"][:, 2], label=name)
    ax[0].set_ylabel("bus rotation [deg]")
    ax[0].set_yscale("symlog", linthresh=1e-3)
    ax[0].legend(fontsize=8)
    ax[1].set_ylabel("hand error [mm]")
    ax[1].set_xlabel("t [s] (simulated time, path starts at 0)")
    ax[2].set_xlabel("hand y [m]")
    ax[2].set_ylabel("hand z [m]")
    ax[2].set_aspect("equal")
    ax[0].set_title("space: 7-DOF arm on a free-flying bus, bus attitude held vs naive")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


