"""Issue 23's failure table, in-process (no DDS): a 7-DOF arm the package was not tuned on moves
its hand around a 5 cm circle in task mode; half-way one motor fails (the node's run-time
``passive_joints`` change: a new ``TaskLaw``/``CommandShaper``/``EffortMapper`` for
``model.with_passive``, the reference carried, the law re-latched at the measured state); MuJoCo
RK4 at 1 kHz (``sim.build_plant``, lock-stepped), the reference streamed at 100 Hz as
``scenarios/harness.stream_path`` does. The loop is ``scenarios.failure_circle`` (the failure
tests' too); ``run_case`` adds this table's diagnostics.

For every set-up (task pose / position + J_D hold; gravity / zero gravity) and failed joint it
records what decides "physics or law" (doc/failure_analysis.md):

- hand RMS/max after the failure, peak joint speed over its URDF limit, limit overrun;
- gravity: the static moment about the failed axis at the failure and the smallest one the task
  leaves reachable (a local search on the task's self-motion manifold at the failure pose);
- sigma_min of S J_G along the run, the cycles where the safety layer bit (and its joints),
  the setpoint leash, effort saturation;
- the J_D hold's scale: |J_D| rows against the task rows, sigma of sqrt(w) J_D N_task and the
  fraction sigma^2/(sigma^2 + lambda^2) of the passive rows' full effect that the constant
  secondary damping lambda leaves;
- the passive joint's excursion while the hand is still fine (zero dynamics left unmanaged).

    PYTHONPATH=. .venv/bin/python bench/failure_cases.py
        [--arm xarm7|panda|baxter|talos|tiago|tiago_pro|g1|pr2|romeo]
        [--setups pose-g position-g ...]
        [--joints 1 2 ...] [--period 8] [--free-flyer] [--json bench/results/failure_cases.json]
    PYTHONPATH=. .venv/bin/python bench/failure_cases.py --goals RUN.json ...   # goals met
    ... [--set task_max_acceleration=0.5 ...]   # law settings over the set-up's

Each case simulates period + 1.5 s (a few seconds of wall time each on a quiet machine).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sysconfig
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from underactuated_control import RobotModel
from underactuated_control.control import failure_reaction
from underactuated_control.control.command import CommandShaper
from underactuated_control.control.joint_space import EffortMapper
from underactuated_control.control.registry import default_settings
from underactuated_control.control.task_law import TaskLaw
from underactuated_control.control.task_space import TaskReference
from underactuated_control.dynamics import inverse_dynamics
from underactuated_control.jacobians import JacobianWorkspace
from underactuated_control.scenarios.failure_circle import DT, failure_cycle, run_failure_circle
from underactuated_control.scenarios.harness import (
    circle_path,
    fixed_fingers,
    only_joints,
    with_joint_dynamics,
)
from underactuated_control.scenarios.space import arm_on_a_bus
from underactuated_control.sim import build_plant
from underactuated_control.so3 import rotation_angle

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
XARM7 = ROBOTS / "xarm_description/urdf/xarm7.urdf"
FRAME = "link_eef"
Q0 = np.array([0.0, -0.4, 0.0, 0.9, 0.0, 1.3, 0.0])  # hand down, 0.36 m out, 0.44 m up
DAMPING, FRICTION = 0.3, 0.05  # N m s/rad, N m: the issue's <dynamics> on every joint
SETTLE = 0.5  # s at rest (the law holding the start) before the path
TAIL = 1.0  # s after the path's end
HOLD = {"passive_weight": 1.0, "passive_kp": 25.0, "passive_kd": 10.0}
SETUPS = {  # name: (gravity, task law overrides)
    "pose-g": (True, {"task": "pose"}),
    "position-g": (True, {"task": "position", **HOLD}),
    "pose-0g": (False, {"task": "pose"}),
    "position-0g": (False, {"task": "position", **HOLD}),
}
GOOD_MM = 10.0  # the "kept the hand"


def settings(**overrides) -> dict:
    values = default_settings()
    values["effort_limit_scale"] = 1.0
    values["failure_reaction"] = "keep_task"  # the failure table before the reaction
    values.update(overrides)
    return values


# ------------------------------------------------------------------------- statics
def task_rows(task: str) -> slice:
    return slice(0, 6) if task == "pose" else slice(0, 3)


def least_gravity_moment(model: RobotModel, q: np.ndarray, joint: int, task: str,
                         iterations: int = 300, frame: str = FRAME) -> tuple[float, np.ndarray]:
    """``control.failure_reaction.least_gravity_moment`` for the hand frame (the same local
    search the failure reaction runs)."""
    return failure_reaction.least_gravity_moment(model, q, joint, frame, task, iterations)


# ------------------------------------------------------------------------- one case
@dataclass
class Case:
    setup: str
    joint: int  # 0-based, -1: no failure
    gravity: bool
    overrides: dict


def run_case(urdf: str, case: Case, period: float, log=print, extra: dict | None = None,
             tune=None, frame: str = FRAME, q0: np.ndarray = Q0, stamped: bool = True,
             real_time: bool = False, control_every: int = 1) -> dict:
    """One row: ``extra`` settings over the set-up's; ``tune(law)`` (optional) may change each
    law object built (the start's and the failure's) before it runs, for experiments. The
    failure reaction (``failure_reaction`` in ``extra``; ``settings`` makes it ``keep_task``,
    the law before the reaction, unless asked) is armed as the node arms it: the new law's
    ``carry_reference`` with the old model and law. ``stamped``: each sample of the stream stamped
    with its time, as scenarios.harness.stream_path sends them to the node (followed as a
    path, control/limits.py); else unstamped (each chased to a stop). ``real_time``: the loop
    paced to the wall clock (a cycle waits until its time; a late one does not), as a robot
    that does not wait for the controller, except for the cycle that decides the reaction (its
    first solve: the clock waits for it, as a lock-stepped simulator does), and the reaction's
    re-plans solved in a background thread (``failure_replan_inline`` False) unless ``extra``
    says otherwise. ``control_every``: the law runs every that many physics steps and its
    command is held between (the node's rate under ``mujoco_sim``'s ``publish_every``)."""
    s = settings(**{**case.overrides, **({"failure_replan_inline": False} if real_time else {}),
                    **(extra or {})})
    g = (0.0, 0.0, -9.81) if case.gravity else (0.0, 0.0, 0.0)
    model = RobotModel.from_urdf(urdf, gravity=g)
    names = list(model.joint_names)
    failing = names[case.joint] if case.joint >= 0 else None
    vmax = np.asarray(model.velocity_limit, float)
    lo, hi = np.asarray(model.position_lower), np.asarray(model.position_upper)
    rows = task_rows(case.overrides["task"])
    k_fail = failure_cycle(SETTLE, period)
    sig_min, safety, safety_joints, leash, saturated = [], [], {}, [], []
    jd_norm, task_norm, sec_sigma, sec_fraction = [], [], [], []

    def observe(k: int, q: np.ndarray, hand: np.ndarray, law: TaskLaw, shaper: CommandShaper,
                sat: bool) -> None:
        """The cycle's diagnostics (the law's workspace holds this cycle's J_G, J_D)."""
        if k < k_fail - 1000:
            return
        A = law.workspace.J_G[rows]
        U, sig, Vt = np.linalg.svd(A, full_matrices=False)
        sig_min.append(float(sig[-1]) if A.shape[0] <= A.shape[1] else 0.0)
        safety.append(bool(shaper.safety.overrode))
        if shaper.safety.overrode:
            for j in shaper.safety.limited_joints:
                safety_joints[j] = safety_joints.get(j, 0) + 1
        sp = law.follower.setpoint
        leash.append(bool(sp is not None and np.linalg.norm(sp.position - hand)
                          >= 0.999 * law.max_error[0]))
        saturated.append(sat)
        tr = law.tracker
        if law.model.n_passive and tr.passive_weight > 0 and k >= k_fail and tr.held_rows.size:
            J_D = law.workspace.J_D[tr.held_rows]
            keep = sig > 1e-9
            N = np.eye(A.shape[1]) - Vt[keep].T @ Vt[keep]
            w = np.sqrt(tr.passive_weight)
            s2 = np.linalg.svd(w * J_D @ N, compute_uv=False)
            jd_norm.append(float(np.linalg.norm(J_D, 2)))
            task_norm.append(float(sig[0]))
            sec_sigma.append(float(s2[-1]))
            sec_fraction.append(effect_fraction(tr, s2))

    run = run_failure_circle(urdf, s, frame, q0, period, failing, case.gravity, SETTLE,
                             TAIL, stamped, real_time=real_time,
                             control_every=control_every, tune=tune, observe=observe,
                             progress=log, model=model)
    law, diverged, k = run.law, run.diverged, len(run.hand_error) - 1
    law_errors = len(run.law_errors)
    err, turn, qs, vs = run.hand_error, run.hand_turn, run.q, run.v
    n_settle, cycle_s = run.settle_steps, run.cycle_seconds
    q_fail = qs[k_fail].copy() if len(qs) > k_fail else None
    cycles = np.arange(len(err))
    after = cycles >= (k_fail if failing else n_settle)
    if not after.any():  # diverged before the failure: the row judges what ran
        after = np.ones(len(err), dtype=bool)
    before = (cycles >= n_settle) & (cycles < k_fail)
    speed_ratio = np.abs(vs) / vmax
    overrun = np.maximum(qs - hi, lo - qs).max(axis=0)
    later = cycle_s[k_fail + 1:]  # after the cycle that decided the reaction
    res = {
        "real_time": real_time,
        "real_time_factor": float(k * DT / run.wall_seconds),
        "failure_cycle_s": float(cycle_s[k_fail]) if len(cycle_s) > k_fail else 0.0,
        "law_cycle_max_after_ms": float(1e3 * later.max()) if later.size else 0.0,
        "law_cycles_over_10ms_after": int(np.count_nonzero(later > 0.01)),
        "setup": case.setup, "gravity": case.gravity, "task": case.overrides["task"],
        "failed_joint": failing, "diverged": diverged, "law_errors": law_errors,
        "reaction": law.reaction.mode if law.reaction is not None else "",
        "reaction_status": law.reaction.status if law.reaction is not None else "",
        "hand_rms_before_mm": float(1e3 * np.sqrt(np.mean(err[before] ** 2))),
        "hand_rms_after_mm": float(1e3 * np.sqrt(np.mean(err[after] ** 2))),
        "hand_max_after_mm": float(1e3 * err[after].max()),
        # the hand's turn from the circle's constant rotation (a pose task's to keep)
        "hand_turn_rms_after_deg": float(np.degrees(np.sqrt(np.mean(turn[after] ** 2)))),
        "peak_speed_ratio": float(speed_ratio[after].max()),
        "peak_speed_joint": names[int(np.argmax(speed_ratio[after].max(axis=0)))],
        "peak_speed_rad_s": float(np.abs(vs[after]).max()),
        "limit_overrun_rad": float(max(overrun.max(), 0.0)),
        "q_at_failure": q_fail.tolist() if q_fail is not None else None,
        # self-motion before the failure (the hand on its path, the joints wandering)
        "joint_drift_before_failure_rad": float(np.abs(q_fail - q0).max())
        if q_fail is not None else None,
        "dry_friction_Nm": float(model.friction.min()),
        "sigma_min_JG_min": float(np.min(sig_min)) if sig_min else None,
        "sigma_min_JG_median": float(np.median(sig_min)) if sig_min else None,
        "safety_fraction_after": float(np.mean(safety[1000:])) if safety else 0.0,
        "safety_joints": safety_joints,
        "leash_fraction_after": float(np.mean(leash[1000:])) if leash else 0.0,
        "saturated_fraction_after": float(np.mean(saturated[1000:])) if saturated else 0.0,
    }
    if jd_norm:
        res.update({
            "JD_norm_median": float(np.median(jd_norm)),
            "task_sigma_max_median": float(np.median(task_norm)),
            "secondary_sigma_median": float(np.median(sec_sigma)),
            "secondary_effect_fraction_median": float(np.median(sec_fraction)),
        })
    if failing is not None:
        kf = case.joint
        i_fail = k_fail
        excursion = np.abs(qs[i_fail:, kf] - qs[i_fail, kf])
        bad = np.flatnonzero(err[i_fail:] > GOOD_MM * 1e-3)
        i_bad = int(bad[0]) if bad.size else None
        sing = np.flatnonzero(np.array(sig_min[1000:]) < law.tracker.singular_threshold)
        res.update({
            "time_to_singular_JG_s": float(sing[0] * DT) if sing.size else None,
            "failed_joint_excursion_rad": float(excursion.max()),
            "time_hand_fine_after_failure_s": float((i_bad if i_bad is not None
                                                     else len(excursion)) * DT),
            "failed_joint_excursion_while_fine_rad": float(
                excursion[:i_bad].max() if i_bad else excursion.max()) if i_bad != 0 else 0.0,
        })
        if case.gravity:
            zero = np.zeros(model.nv)
            g_fail = float(inverse_dynamics(model, q_fail, zero, zero)[kf])
            g_min, q_best = least_gravity_moment(model, q_fail, kf, case.overrides["task"],
                                                 frame=frame)
            res.update({"gravity_moment_at_failure_Nm": g_fail,
                        "least_gravity_moment_on_task_manifold_Nm": g_min,
                        "least_moment_configuration": q_best.tolist()})
    res["verdict"] = verdict(res)
    return res


def verdict(r: dict) -> str:
    """A first reading of the evidence (doc/failure_analysis.md says which cause per row)."""
    if r["failed_joint"] is None:
        return "no failure"
    ok = r["hand_rms_after_mm"] <= GOOD_MM and r["peak_speed_ratio"] <= 1.2
    notes = []
    if r.get("gravity") and r.get("least_gravity_moment_on_task_manifold_Nm", 0.0) > \
            max(r.get("dry_friction_Nm", 0.0), 1e-2):
        notes.append("physics: no static hold at the task pose")
    if r.get("secondary_effect_fraction_median", 1.0) < 0.5:
        notes.append("law: passive rows damped out")
    if r["safety_fraction_after"] > 0.01:
        notes.append("safety layer bites")
    if r["leash_fraction_after"] > 0.01:
        notes.append("leash")
    if r["saturated_fraction_after"] > 0.01:
        notes.append("effort saturation")
    if (r.get("sigma_min_JG_min") or 1.0) < 1e-2:
        notes.append("J_G rank loss")
    if r.get("time_hand_fine_after_failure_s", 0.0) > 0.3 and \
            r.get("failed_joint_excursion_while_fine_rad", 0.0) > 0.2:
        notes.append("zero dynamics drift")
    return ("ok" if ok else "FAIL") + (": " + "; ".join(notes) if notes else "")


def effect_fraction(tracker, sigma: np.ndarray) -> float:
    """σ²/(σ² + λ²) of the weakest direction of the passive rows √w J_D N_task (singular
    values ``sigma``, largest first): the share of its full effect that the prioritized
    solve's secondary damping λ leaves it (λ relative to σ_max, or absolute, as the law's
    ``passive_weight_scale`` says)."""
    lam = tracker.secondary_damping
    if tracker.passive_weight_scale == "relative":  # λ_s σ_max(J_D N) / √w
        lam *= float(sigma[0]) / tracker.passive_weight
    return float(sigma[-1] ** 2 / (sigma[-1] ** 2 + lam ** 2))


# ------------------------------------------------------------------------- free-flyer
BUS_MASS, BUS_INERTIA = 60.0, 6.4  # kg, kg m^2 (a 0.8 m cube)
FREE_HOLD = ["root_joint/rx", "root_joint/ry", "root_joint/rz"]
FREE_FLYER_RUNS = (  # label, passive_weight, passive_weight_scale
    ("naive", 0.0, "relative"), ("w=1", 1.0, "relative"),
    ("w=1 absolute (before)", 1.0, "absolute"), ("w=1e6 absolute (old config)", 1e6, "absolute"))


PANDA = ROBOTS / "panda_description/urdf/panda.urdf"
ARMS = {  # --arm: (URDF, the arm's joints (None: all), task frame, start configuration)
    "xarm7": (XARM7, None, FRAME, Q0),
    "panda": (PANDA, None, "panda_hand_tcp", np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])),
    # never used to develop the control (2026-12-02): one arm of a two-armed robot and of a
    # humanoid, the rest of the body rigid (harness.only_joints); elbows bent, hands in front
    "baxter": (ROBOTS / "baxter_description/urdf/baxter.urdf",
               ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"],
               "left_gripper", np.array([0.0, -0.55, 0.0, 1.3, 0.0, 0.8, 0.0])),
    "talos": (ROBOTS / "talos_data/robots/talos_reduced.urdf",
              [f"arm_left_{i}_joint" for i in range(1, 8)], "arm_left_7_link",
              np.array([0.0, 0.4, 0.0, -1.2, 0.0, 0.4, 0.0])),
    # never used either (2026-12-03): a mobile manipulator's arm, on its torso
    "tiago": (ROBOTS / "tiago_description/robots/tiago.urdf",
              [f"arm_{i}_joint" for i in range(1, 8)], "hand_grasping_frame",
              np.array([0.2, 0.3, -1.0, 1.5, 0.0, 0.5, 0.0])),
    # never used before the kept task's plan was measured (2026-12-05): Tiago Pro's left arm
    "tiago_pro": (ROBOTS / "tiago_pro_description/robots/tiago_pro.urdf",
                  [f"arm_left_{i}_joint" for i in range(1, 8)], "arm_left_tool_link",
                  np.array([0.5, -0.6, 0.0, -1.2, 0.0, 0.5, 0.0])),
    # never used before the kept task's plan was final (2026-12-05): the Unitree G1's left arm,
    # its start the best-conditioned of 4000 random ones (σ_min of J: position 0.146, pose 0.115)
    "g1": (ROBOTS / "g1_description/urdf/g1_29dof_rev_1_0.urdf",
           [f"left_{j}_joint" for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw",
                                        "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")],
           "left_rubber_hand", np.array([-0.45, 0.36, 0.33, -0.39, -0.98, -0.32, -0.83])),
    # the PR2's left arm (its gravity is not fair: the real shoulder is spring-balanced, the
    # URDF's is not, 43.6 N m to hold of its 30)
    "pr2": (ROBOTS / "pr2_description/urdf/pr2.urdf",
            ["l_shoulder_pan_joint", "l_shoulder_lift_joint", "l_upper_arm_roll_joint",
             "l_elbow_flex_joint", "l_forearm_roll_joint", "l_wrist_flex_joint",
             "l_wrist_roll_joint"], "l_gripper_tool_frame",
            np.array([0.3, 0.2, 0.3, -1.3, 0.0, -0.8, 0.0])),
    # never used before the rules of 2026-12-07 were final: Romeo's left arm (its URDF has no
    # <dynamics>: the set-up's are added). Its limits are tight (wrist yaw ±0.44 rad): the
    # best-conditioned of 4000 random starts takes the pose circle 0.40 rad past a limit; this
    # one, of the 300 best-conditioned, keeps it furthest inside (0.11 rad; σ_min of J 0.084 at
    # the start, 0.043 along the circle)
    "romeo": (ROBOTS / "romeo_description/urdf/romeo.urdf",
              ["LShoulderPitch", "LShoulderYaw", "LElbowRoll", "LElbowYaw", "LWristRoll",
               "LWristYaw", "LWristPitch"], "l_wrist",
              np.array([0.29, -0.1, -0.62, -1.13, -0.29, 0.15, 0.64])),
}


def arm_text(arm: str, damping: float, friction: float) -> str:
    """``ARMS[arm]``'s URDF text with the set-up's <dynamics> on every joint, the gripper's
    fingers fixed and, for one arm of a larger robot, the rest of the body rigid."""
    path, joints, _, _ = ARMS[arm]
    text = fixed_fingers(with_joint_dynamics(path.read_text(), damping, friction))
    return text if joints is None else only_joints(text, joints)


FREE_FLYER_ARMS = tuple(ARMS)  # the ARMS that can be put on the bus


def free_flyer_urdf(arm: str) -> str:
    """The arm on the 60 kg bus (``scenarios.space.arm_on_a_bus``), its top 0.4 m above the
    bus's centre."""
    return arm_on_a_bus(arm, BUS_MASS, BUS_INERTIA, (0.0, 0.0, 0.4))


def run_free_flyer(urdf: str, weight: float, radius: float, period: float,
                   extra: dict | None = None, tune=None, frame: str = FRAME,
                   q0: np.ndarray = Q0, stamped: bool = True) -> dict:
    """config/space.yaml's law (position task, kp 400, kd 40, bus rx ry rz held through J_D
    with passive_kp 25, passive_kd 10) at ``passive_weight`` = ``weight`` (0: naive), the
    true base state from MuJoCo as the odometry gives it (pose; twist in the bus's axes).
    The circle's samples stamped as ``stream_path`` sends them to the node (``stamped``
    False: unstamped, each chased to a stop, as this loop did before 2026-12-08)."""
    import mujoco

    from underactuated_control.so3 import quaternion_to_matrix

    g = (0.0, 0.0, 0.0)
    model = RobotModel.from_urdf(urdf, gravity=g)
    plant = build_plant(urdf, model, timestep=1e-3, integrator="rk4", gravity=g)
    root = plant.m.joint(model.joint_names[0])
    qa, va = int(plant.m.jnt_qposadr[root.id]), int(plant.m.jnt_dofadr[root.id])
    s = settings(task="position", task_kp_position=400.0, task_kd_position=40.0,
                 passive_weight=weight, passive_kp=25.0, passive_kd=10.0,
                 hold_passive_dofs=FREE_HOLD, **(extra or {}))
    ws = JacobianWorkspace(model)
    law = TaskLaw(model, s, frame, ws)
    if tune is not None:
        tune(law)
    shaper = CommandShaper(model, s, ws)
    mapper = EffortMapper(model, list(model.active_joints), 1.0)
    plant.set_state(q0, np.zeros(len(q0)))

    def state() -> tuple[np.ndarray, np.ndarray]:
        qj, vj = plant.state()
        qb, vb = plant.d.qpos[qa:qa + 7], plant.d.qvel[va:va + 6]
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, qb[3:7])
        q = np.concatenate([qb[:3], qb[4:7], qb[3:4], qj])  # xyzw
        v = np.concatenate([R.reshape(3, 3).T @ vb[:3], vb[3:6], vj])
        return q, v

    q, _ = state()
    ref = law.hold_reference(q)
    R_bus0 = quaternion_to_matrix(q[3:7])
    path = circle_path(ref.position.copy(), radius, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], period)
    dt = 1e-3
    n_settle = round(SETTLE / dt)
    n_total = n_settle + round((period + 1.0) / dt)
    err, rot, sec, speed, bit, exact = [], [], [], [], [], []
    vmax = np.asarray(model.velocity_limit, float)[6:]
    ws_check = JacobianWorkspace(model)
    diverged = ""
    for k in range(n_total + 1):
        q, v = state()
        if not np.all(np.isfinite(v)) or np.abs(v).max() > 1e3:
            diverged = f"diverged at t = {k * dt:.3f} s"
            break
        t_path = (k - n_settle) * dt
        if k >= n_settle and (k - n_settle) % 10 == 0:
            ref = TaskReference(position=path(t_path), rotation=ref.rotation,
                                stamp=k * dt if stamped else 0.0)
        try:
            out = shaper.apply(q, v, law.compute(q, v, ref, k * dt, False))
            tau = plant.clip(mapper.map(out.tau_active).copy())
        except ValueError:
            tau = np.zeros(len(plant.ctrl))
        plant.d.ctrl[plant.ctrl] = tau
        ws_check.set_configuration(q)
        speed.append(float(np.max(np.abs(v[6:]) / vmax)))
        bit.append(bool(shaper.safety.overrode))
        if k >= n_settle:
            err.append(np.linalg.norm(ws_check.frame_placement(frame)[0] - path(t_path)))
        rot.append(np.degrees(rotation_angle(R_bus0.T @ quaternion_to_matrix(q[3:7]))))
        if k >= n_settle and k % 20 == 0:  # the least joint speeds holding the bus exactly
            J_G, J_D = ws_check.generalized(frame, q)  # while the hand moves as it does
            stack = np.vstack([J_G[:3], J_D[law.tracker.held_rows]])
            rhs = np.concatenate([J_G[:3] @ v[6:], np.zeros(len(law.tracker.held_rows))])
            least = np.linalg.lstsq(stack, rhs, rcond=None)[0]
            exact.append(float(np.max(np.abs(least) / vmax)))
        if weight > 0 and k % 50 == 0:
            tr = law.tracker
            A = law.workspace.J_G[:3]
            _, sig, Vt = np.linalg.svd(A, full_matrices=False)
            N = np.eye(A.shape[1]) - Vt.T @ Vt
            J_D = law.workspace.J_D[tr.held_rows]
            s2 = np.linalg.svd(np.sqrt(weight) * J_D @ N, compute_uv=False)
            sec.append((float(np.linalg.norm(J_D, 2)), float(s2[-1]), float(s2[0]),
                        effect_fraction(tr, s2)))
        if k < n_total:
            plant.step()
    e = np.array(err) if err else np.array([np.nan])
    r = {"free_flyer": True, "bus_mass_kg": BUS_MASS, "radius_m": radius,
         "passive_weight": weight, "diverged": diverged,
         "hand_rms_mm": float(1e3 * np.sqrt(np.mean(e ** 2))),
         "hand_max_mm": float(1e3 * np.max(e)), "bus_rotation_max_deg": float(np.max(rot)),
         "peak_speed_ratio": float(np.max(speed)), "safety_fraction": float(np.mean(bit)),
         "exact_hold_speed_max": float(np.max(exact)) if exact else float("nan"),
         "exact_hold_share_over": float(np.mean(np.array(exact) > 1.0)) if exact
         else float("nan")}
    if sec:
        a = np.array(sec)
        r.update({"JD_norm_median": float(np.median(a[:, 0])),
                  "secondary_sigma_min_median": float(np.median(a[:, 1])),
                  "secondary_sigma_max_median": float(np.median(a[:, 2])),
                  "secondary_effect_fraction_median": float(np.median(a[:, 3]))})
    return r


def print_free_flyer(r: dict) -> None:
    frac = r.get("secondary_effect_fraction_median")
    print(f"  {r.get('arm', 'xarm7')} free-flyer {100 * r['radius_m']:3.0f} cm  passive_weight "
          f"{r['passive_weight']:8g} {r.get('passive_weight_scale', 'absolute')}: "
          f"hand RMS {r['hand_rms_mm']:7.1f} mm, max {r['hand_max_mm']:7.1f} mm, bus rotation "
          f"max {r['bus_rotation_max_deg']:6.2f} deg, v/v_max {r['peak_speed_ratio']:.2f}, "
          f"safety layer {100 * r['safety_fraction']:.0f} %, exact hold "
          f"{r.get('exact_hold_speed_max', np.nan):.3g} v/v_max "
          f"(> 1 on {100 * r.get('exact_hold_share_over', np.nan):.0f} %)"
          + ("" if frac is None else f", |J_D| {r['JD_norm_median']:.3g}, σ(√w J_D N) "
             f"{r['secondary_sigma_min_median']:.3g}..{r['secondary_sigma_max_median']:.3g}, "
             f"effect {frac:.3f}") + (f"  {r['diverged']}" if r["diverged"] else ""),
          flush=True)


# ------------------------------------------------------------------------- table
def print_row(r: dict) -> None:
    g = r.get("gravity_moment_at_failure_Nm")
    gm = r.get("least_gravity_moment_on_task_manifold_Nm")
    frac = r.get("secondary_effect_fraction_median")
    drift = r.get("failed_joint_excursion_while_fine_rad", 0.0)
    print(f"{r['setup']:>12} {str(r['failed_joint']):>7} {r['hand_rms_after_mm']:9.1f} "
          f"{r['joint_drift_before_failure_rad'] or 0:5.2f} "
          f"{r['peak_speed_ratio']:6.2f} {r['limit_overrun_rad']:6.3f} "
          f"{(r['sigma_min_JG_min'] or 0):8.4f} {r['safety_fraction_after']:6.2f} "
          f"{r['leash_fraction_after']:6.2f} {drift:6.2f} "
          f"{'' if g is None else f'{g:7.2f}':>7} {'' if gm is None else f'{gm:7.3f}':>7} "
          f"{'' if frac is None else f'{frac:6.3f}':>6}  {r['verdict']}"
          + (f"  [hand turned {r['hand_turn_rms_after_deg']:.2f}° RMS]"
             if "hand_turn_rms_after_deg" in r else "")
          + (f"  [law cycle: {r['failure_cycle_s']:.2f} s at the failure, then at most "
             f"{r['law_cycle_max_after_ms']:.0f} ms]" if "failure_cycle_s" in r else "")
          + (f"  [{r['reaction_status']}]" if r.get("reaction_status") else ""), flush=True)


HEADER = (f"{'setup':>12} {'failed':>7} {'RMS mm':>9} {'pre':>5} {'v/vmax':>6} {'over':>6} "
          f"{'σmin J_G':>8} {'safety':>6} {'leash':>6} {'drift':>6} {'g_k Nm':>7} "
          f"{'min g_k':>7} {'J_D eff':>6}  verdict")


SPEED_GOAL, OVERRUN_GOAL = 1.2, 0.05  # the bounds: v/v_max, rad past a limit
HAND_GOAL_MM = {"pose-0g": 10.0, "position-0g": 5.0, "pose-g": 10.0, "position-g": 10.0}


def goals(rows: list[dict]) -> str:
    """Issue 23's goals counted per arm and set-up over the failure rows of one or more runs'
    JSON (a row that diverged meets none): the hand's RMS after the failure (zero g: pose
    ≤ 10 mm, position ≤ 5 mm; gravity: ≤ 10 mm both) and the speed bound (no joint past
    1.2× its URDF speed limit, no position limit overrun past 0.05 rad), as a Markdown table
    with the rows that miss each, by failed joint."""
    table: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("failed_joint") and r.get("setup") in HAND_GOAL_MM:
            table.setdefault((r.get("arm", "xarm7"), r["setup"]), []).append(r)
    lines = ["| arm | set-up | hand goal met | missed (hand RMS mm) | speed bound met "
             "| missed (peak v/v_max, overrun rad) |", "|" + " --- |" * 6]
    for (arm, setup), runs in sorted(table.items()):
        def hand_ok(r: dict, setup: str = setup) -> bool:
            return not r.get("diverged") and r["hand_rms_after_mm"] <= HAND_GOAL_MM[setup]

        def speed_ok(r: dict) -> bool:
            return not r.get("diverged") and r["peak_speed_ratio"] <= SPEED_GOAL \
                and r["limit_overrun_rad"] <= OVERRUN_GOAL
        hand_missed = ", ".join(f"{r['failed_joint']} ({r['hand_rms_after_mm']:.1f})"
                                for r in runs if not hand_ok(r))
        speed_missed = ", ".join(f"{r['failed_joint']} ({r['peak_speed_ratio']:.2f}, "
                                 f"{r['limit_overrun_rad']:.3f})" for r in runs if not speed_ok(r))
        lines.append(f"| {arm} | {setup} | {sum(map(hand_ok, runs))} of {len(runs)} | "
                     f"{hand_missed or '—'} | {sum(map(speed_ok, runs))} of {len(runs)} | "
                     f"{speed_missed or '—'} |")
    seen = sorted({", ".join(f"{k} {v}" for k, v in r["environment"].items())
                   for r in rows if "environment" in r})
    if seen:  # the marginal rows turn on rounding: say what measured them
        lines.append("\nMeasured with: " + "; ".join(seen))
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    """The rows as the Markdown tables of doc/failure_analysis.md."""
    lines = ["| set-up | failed | hand RMS after mm | joints wandered before rad | peak v/v_max "
             "| min σ S J_G | safety layer % | leash % | passive drift while fine rad "
             "| g_k at failure N m | least g_k on task manifold N m | passive rows' effect |",
             "|" + " --- |" * 12]
    for r in rows:
        if "failed_joint" not in r:
            continue
        g = r.get("gravity_moment_at_failure_Nm")
        gm = r.get("least_gravity_moment_on_task_manifold_Nm")
        frac = r.get("secondary_effect_fraction_median")
        lines.append(
            f"| {r['setup']} | {r['failed_joint'] or 'none'} | {r['hand_rms_after_mm']:.1f} | "
            f"{r['joint_drift_before_failure_rad']:.2f} | {r['peak_speed_ratio']:.2f} | "
            f"{r['sigma_min_JG_min']:.4f} | {100 * r['safety_fraction_after']:.0f} | "
            f"{100 * r['leash_fraction_after']:.0f} | "
            f"{r.get('failed_joint_excursion_while_fine_rad', 0.0):.2f} | "
            f"{'' if g is None else f'{g:.2f}'} | {'' if gm is None else f'{gm:.3f}'} | "
            f"{'' if frac is None else f'{frac:.3f}'} |")
    free = [r for r in rows if "bus_rotation_max_deg" in r]
    if free:
        lines += ["", "| arm | circle | passive_weight | hand RMS mm | hand max mm "
                  "| bus rotation max deg | peak v/v_max | safety layer % | ‖J_D‖ rows "
                  "| σ(√w J_D N) min..max | passive rows' effect |",
                  "|" + " --- |" * 11]
        for r in free:
            frac = r.get("secondary_effect_fraction_median")
            lines.append(
                f"| {r.get('arm', 'xarm7')} | {100 * r['radius_m']:.0f} cm | "
                f"{r['passive_weight']:g} {r.get('passive_weight_scale', 'absolute')} | "
                f"{r['hand_rms_mm']:.1f} | {r['hand_max_mm']:.1f} | "
                f"{r['bus_rotation_max_deg']:.2f} | "
                f"{r.get('peak_speed_ratio', float('nan')):.2f} | "
                f"{100 * r.get('safety_fraction', float('nan')):.0f} | "
                + (" | | |" if frac is None else
                   f"{r['JD_norm_median']:.3g} | {r['secondary_sigma_min_median']:.3g}.."
                   f"{r['secondary_sigma_max_median']:.3g} | {frac:.3f} |"))
    return "\n".join(lines)


def environment() -> dict[str, str]:
    """The versions a row was measured with: the marginal rows (a loaded joint's swing) turn
    on rounding, and the same code kept or lost them with other MuJoCo/numpy/numba builds
    (doc/failure_analysis.md, "Where the goals stand")."""
    import mujoco
    import numba
    return {"python": sysconfig.get_python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "mujoco": mujoco.__version__}


@contextmanager
def locked(path: str):
    """``flock`` on ``path`` for one case (nothing when empty)."""
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def warm_arrest_planner(urdf: str, q0: np.ndarray, frame: str) -> None:
    """One arrest plan, one swing plan and one pose plan of this arm, moving, untimed, before
    the rows: the reaction's planners (box DDP through the derivatives) have a wall-time
    budget, and after any edit of the package numba compiles their kernels for a minute or
    two on the first plan (the set-up's ``underactuated-control warm-up`` compiles them),
    which would judge the first falling or swinging row by a plan stopped at its budget (a
    swing plan at rest left kernels uncompiled: a kept task's first plan then took 70-76 s)."""
    model = RobotModel.from_urdf(urdf)
    failed = model.with_passive([model.joint_names[1]])
    v = np.zeros(model.nv)
    v[1] = 1.0
    t0 = time.perf_counter()
    failure_reaction.arrest_plan(failed, q0, v, budget=600.0)
    swing = failure_reaction.PlannedSwing(failed, frame, budget=600.0)  # its path cost too
    ws = JacobianWorkspace(failed)
    ws.set_configuration(q0)
    hand, rotation = ws.frame_placement(frame)
    swing.plan(q0, v, hand, np.zeros(3))  # moving: every kernel runs
    pose = failure_reaction.PlannedTask(failed, frame, budget=600.0, pose=True)  # rotations
    pose.plan(q0, v, hand, np.zeros(3), rotation, np.zeros(3))
    print(f"(the failure planners' kernels compiled or loaded: {time.perf_counter() - t0:.1f} s)",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    ap.add_argument("--joints", nargs="+", type=int, default=list(range(1, 8)),
                    help="1-based joints to fail (0: no failure)")
    ap.add_argument("--arm", default="xarm7", choices=list(ARMS),
                    help="the fixed-base arm of the failure rows")
    ap.add_argument("--period", type=float, default=8.0, help="[s] once round the circle")
    ap.add_argument("--free-flyer", action="store_true", help="also the free-flyer rows")
    ap.add_argument("--free-flyer-arms", nargs="+", default=["xarm7", "panda"],
                    choices=FREE_FLYER_ARMS, help="the arms put on the bus")
    ap.add_argument("--damping", type=float, default=DAMPING,
                    help="[N m s/rad] <dynamics damping> set on every joint")
    ap.add_argument("--friction", type=float, default=FRICTION,
                    help="[N m] <dynamics friction> set on every joint")
    ap.add_argument("--no-friction-compensation", action="store_true",
                    help="friction_compensation:=false (the command stage of control/friction)")
    ap.add_argument("--reaction", default="keep_task", choices=failure_reaction.REACTIONS,
                    help="failure_reaction (keep_task: the law before the reaction existed)")
    ap.add_argument("--control-every", type=int, default=1, metavar="N",
                    help="the law every N physics steps of 1 ms, its command held between (the "
                         "node's rate under mujoco_sim's publish_every: config/arm.yaml's 2)")
    ap.add_argument("--real-time", action="store_true",
                    help="pace the loop to the wall clock and solve the reaction's re-plans "
                         "in a background thread (failure_replan_inline false), as on a robot "
                         "that does not wait; rows then depend on the machine")
    ap.add_argument("--unstamped", action="store_true",
                    help="the circle's samples unstamped (each chased to a stop), not stamped "
                         "as stream_path sends them to the node (followed as a path)")
    ap.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                    help="law settings over the set-up's (e.g. task_max_acceleration=0.5)")
    ap.add_argument("--lock", default="/tmp/uc-heavy.lock",
                    help="file lock taken around each case (shared machine); '' for none")
    ap.add_argument("--json", type=Path, default=Path("bench/results/failure_cases.json"))
    ap.add_argument("--markdown", type=Path, default=None,
                    help="only print the Markdown tables of this JSON (no run)")
    ap.add_argument("--goals", type=Path, nargs="+", default=None,
                    help="only count issue 23's goals over these runs' JSON (no run)")
    args = ap.parse_args()
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    if args.goals is not None:
        print(goals([r for path in args.goals for r in json.loads(path.read_text())]))
        return
    urdf = arm_text(args.arm, args.damping, args.friction)
    _, _, frame, q0 = ARMS[args.arm]
    extra = {"friction_compensation": False} if args.no_friction_compensation else {}
    extra["failure_reaction"] = args.reaction
    known = settings()
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in known:
            ap.error(f"--set {item}: unknown setting {name!r}")
        kind = type(known[name])
        extra[name] = value.lower() in ("1", "true") if kind is bool else kind(value)
    rows, measured_with = [], environment()
    if any(SETUPS[s][0] for s in args.setups):
        warm_arrest_planner(urdf, q0, frame)
    print(f"{args.arm} (example-robot-data), <dynamics damping={args.damping} "
          f"friction={args.friction}>, {extra or 'friction compensation on'}, "
          f"5 cm circle in {args.period:g} s, failure at half-way, RK4 1 kHz", flush=True)
    for setup in args.setups:
        gravity, overrides = SETUPS[setup]
        for j in args.joints:
            t0 = time.perf_counter()
            print(f"[{setup}] joint {j} fails ...", flush=True)
            with locked(args.lock):
                r = run_case(urdf, Case(setup, j - 1, gravity, overrides), args.period,
                             log=lambda s: print(s, flush=True), extra=extra, frame=frame,
                             q0=q0, stamped=not args.unstamped, real_time=args.real_time,
                             control_every=args.control_every)
            r["wall_s"], r["arm"], r["environment"] = time.perf_counter() - t0, args.arm, \
                measured_with
            rows.append(r)
            print(HEADER)
            print_row(r)
    for arm in args.free_flyer_arms if args.free_flyer else ():
        _, _, frame, q0 = ARMS[arm]
        free = free_flyer_urdf(arm_text(arm, args.damping, args.friction))
        print(f"\nfree-flyer: {BUS_MASS:g} kg bus + the {arm}, zero gravity, position task, "
              "bus attitude held through J_D rows rx ry rz", flush=True)
        for radius in (0.05, 0.08):
            for label, weight, scale in FREE_FLYER_RUNS:
                with locked(args.lock):
                    r = run_free_flyer(free, weight, radius, args.period,
                                       {**extra, "passive_weight_scale": scale}, frame=frame,
                                       q0=q0, stamped=not args.unstamped)
                r.update(label=label, arm=arm, passive_weight_scale=scale,
                         environment=measured_with)
                rows.append(r)
                print_free_flyer(r)
    print("\n" + HEADER)
    for r in rows:
        if "failed_joint" in r:
            print_row(r)
    for r in rows:
        if "bus_rotation_max_deg" in r:
            print_free_flyer(r)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1))
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
