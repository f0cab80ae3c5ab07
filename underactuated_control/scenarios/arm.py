"""Scenario ``arm``, its path phase (``underactuated-control demo --scenario arm`` runs the
resolver demo first, ``resolver_demo.py``): arm7 (``urdf/arm7.urdf``, ``config/arm.yaml``)
moves its hand around a circle in task mode; half-way the motor of a joint fails
(``passive_joints`` set at run time) and tracking goes on through J_G (paper §6).

Metrics from MuJoCo's recorded /joint_states against the streamed ~/pose_reference, paired by
their stamps (simulated time). Importing this module needs no ROS.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..bringup import CONTROLLER, bundled
from ..jacobians import JacobianWorkspace
from ..model import RobotModel
from ..so3 import matrix_to_quaternion
from .harness import (
    COMMAND_TOPIC,
    REFERENCE_TOPIC,
    ScenarioRun,
    circle_path,
    command_rate,
    frame_positions,
    joint_positions,
    pyplot,
    reference_at,
    stamp_seconds,
)


def run_arm(out_dir: Path, duration: float | None, domain: int,
            log: Callable[[str], None] = print, failing: str = "joint1",
            radius: float = 0.05, urdf: Path | None = None, frame: str = "tool",
            overrides: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
    """The ``arm`` scenario's path phase: a hand circle in task mode, ``failing``'s motor
    fails half-way (``passive_joints`` set at run time), tracking goes on through J_G. Another
    robot: ``urdf`` and its hand ``frame`` (pass its ``tip_link`` and start pose in
    ``overrides``, node -> parameters over config/arm.yaml, e.g. a zero ``gravity``); its
    joints are commanded (``command_joints``, unless ``overrides`` names them)."""
    period = duration or 8.0
    another_robot = urdf is not None
    urdf, config = urdf or bundled("urdf", "arm7.urdf"), bundled("config", "arm.yaml")
    model = RobotModel.from_urdf(urdf)
    if another_robot:  # config/arm.yaml names arm7's joints
        law = {"command_joints": list(model.joint_names), **(overrides or {}).get(CONTROLLER, {})}
        overrides = {**(overrides or {}), CONTROLLER: law}
    failure_time = 0.5 * period
    run = ScenarioRun(out_dir, domain, urdf, config, "path", log)
    try:
        log("[arm] starting mujoco_sim and hybrid_dynamics_controller (config/arm.yaml) ...")
        run.start(["mujoco_sim", CONTROLLER], overrides)
        rec = run.recorder
        run.wait_for(lambda: rec.counts()[COMMAND_TOPIC] > 5 and rec.counts()["/joint_states"],
                     120.0, "the controller sent no effort")
        ws = JacobianWorkspace(model)
        last = rec.messages("/joint_states")[-1][1]
        ws.set_configuration(joint_positions(model.joint_names, last))
        start, rotation = (x.copy() for x in ws.frame_placement(frame))
        run.reference_orientation = matrix_to_quaternion(rotation)  # the hand's, kept (pose)
        path = circle_path(start, radius, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], period)
        failed_at: list[tuple[float, float]] = []  # (simulated, wall) times of the update

        def fail() -> None:
            t_sim = run.sim_time
            log(f"[arm] t = {failure_time:g} s: {failing}'s motor fails (passive_joints := "
                f"[{failing}])")
            run.set_parameters(CONTROLLER, {"passive_joints": [failing]})
            # wall time of the answer: the controller commits the new law before it answers
            failed_at.append((t_sim, time.monotonic()))

        log(f"[arm] hand around a {100 * radius:g} cm circle in {period:g} s, {failing} fails "
            "half-way")
        t0 = run.stream_path(path, period + 1.0, "arm", {failure_time: fail})
    finally:
        run.close()
    states = rec.messages("/joint_states")
    t = np.array([stamp_seconds(m) for _, m in states])  # simulated time (use_sim_time)
    q = np.array([joint_positions(model.joint_names, m) for _, m in states])
    v = np.array([joint_positions(model.joint_names, m, "velocity") for _, m in states])
    hand = frame_positions(ws, frame, q)
    error = np.linalg.norm(hand - reference_at(t, rec.messages(REFERENCE_TOPIC)), axis=1)
    commands = rec.messages(COMMAND_TOPIC)
    data = np.array([c.data for _, c in commands])
    t_fail, wall_fail = failed_at[0] if failed_at else (np.inf, np.inf)
    before, after = (t >= t0) & (t < t_fail), t >= t_fail
    k = model.joint_names.index(failing)
    vmax = np.asarray(model.velocity_limit, float)
    lower, upper = np.asarray(model.position_lower), np.asarray(model.position_upper)
    fail_q = q[after, k] if after.any() else np.zeros(1)
    metrics = {
        "hand_rms_before_failure_mm": float(1e3 * np.sqrt(np.mean(error[before] ** 2))),
        "hand_max_before_failure_mm": float(1e3 * error[before].max()),
        "hand_rms_after_failure_mm": float(1e3 * np.sqrt(np.mean(error[after] ** 2))),
        "hand_max_after_failure_mm": float(1e3 * error[after].max()),
        "failed_joint_excursion_rad": float(np.abs(fail_q - fail_q[0]).max()),
        # issue 23's gravity bounds after the failure: |v|/v_max (URDF), position limits
        "peak_speed_ratio_after_failure": float(np.max(np.abs(v[after]) / np.where(
            vmax > 0, vmax, np.inf))) if after.any() else None,
        "limit_overrun_after_failure_rad": float(max(0.0, np.max(np.maximum(
            lower - q[after], q[after] - upper)))) if after.any() else None,
        # received from 0.1 s (wall: commands carry no stamp) after the controller answered
        # the update: commands in flight were computed before it
        "failed_joint_command_after_Nm": float(np.abs(data[np.array(
            [c >= (wall_fail + 0.1) * 1e9 for c, _ in commands])][:, k]).max())
        if after.any() else None,
        "nonfinite_commands": int((~np.isfinite(data)).any(axis=1).sum()),
        "effort_peak_Nm": float(np.abs(data).max()),
        "loop_rate_hz": command_rate(commands),
    }
    rec.write(out_dir / "bag")
    log(f"[arm] hand RMS before the failure {metrics['hand_rms_before_failure_mm']:.2f} mm, "
        f"after {metrics['hand_rms_after_failure_mm']:.2f} mm; {failing} moved "
        f"{metrics['failed_joint_excursion_rad']:.3f} rad; non-finite commands "
        f"{metrics['nonfinite_commands']}")
    summary = {"scenario": "arm", "urdf": str(urdf), "config": str(config),
               "path": {"shape": "circle", "radius_m": radius, "period_s": period,
                        "failure_at_s": failure_time, "failing_joint": failing},
               "metrics": metrics,
               "success": bool(metrics["nonfinite_commands"] == 0 and
                               metrics["hand_rms_after_failure_mm"] < 5.0 and
                               metrics["hand_rms_before_failure_mm"] < 5.0)}
    summary["plot"] = str(_plot_arm(out_dir / "arm.png", t - t0, (t_fail - t0), error, q,
                                    model, failing))
    return summary


def _joint_positions(model: RobotModel, msg) -> np.ndarray:
    index = {n: i for i, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in model.joint_names])


def _plot_arm(path: Path, t, t_fail, error, q, model, failing) -> Path | str:
    plt = pyplot()
    if plt is None:
        return "not written: matplotlib is not installed"
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, 1e3 * error)
    ax[0].set_ylabel("hand error [mm]")
    for a in ax:
        a.axvline(t_fail, color="r", ls=":", lw=1)
    for k, name in enumerate(model.joint_names):
        ax[1].plot(t, q[:, k], lw=2 if name == failing else 0.8,
                   label=f"{name} (fails)" if name == failing else name)
    ax[1].set_ylabel("joint angle [rad]")
    ax[1].set_xlabel("t [s] (simulated time, path starts at 0; red: the motor fails)")
    ax[1].legend(fontsize=7, ncol=4)
    ax[0].set_title("arm: hand circle through J_G, a motor fails half-way")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


