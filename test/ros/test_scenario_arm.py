"""The `arm` scenario's path phase over DDS (lock-stepped MuJoCo on simulated time): a hand
circle in task mode, joint1's motor fails half-way, tracking goes on through J_G. Judged from
the bag with Pinocchio's forward kinematics (not the runner's own figures), each state paired
with the last reference stamped at or before it (both stamped with simulated time)."""

import json

import numpy as np
import pinocchio as pin
from helpers import ROOT

from underactuated_control.nodes.bags import read_bag
from underactuated_control.scenarios import run_scenario
from underactuated_control.scenarios.harness import stamp_seconds

NODE = "/hybrid_dynamics_controller"


def test_arm_tracks_through_a_motor_failure(tmp_path, domain):
    summary = run_scenario("arm", tmp_path, duration=6.0, domain=domain, log=lambda s: None)
    assert json.loads((tmp_path / "arm" / "summary.json").read_text())["metrics"] == \
        summary["metrics"]
    pm = pin.buildModelFromUrdf(str(ROOT / "urdf/arm7.urdf"))
    pd = pm.createData()
    fid = pm.getFrameId("tool")
    bag = read_bag(tmp_path / "arm" / "bag", ["/joint_states", f"{NODE}/pose_reference",
                                              "/effort_controller/commands"])
    refs = bag[f"{NODE}/pose_reference"]
    ref_t = np.array([stamp_seconds(m) for _, m in refs])
    errors = []
    for _, js in bag["/joint_states"]:
        t = stamp_seconds(js)
        if t < ref_t[0]:
            continue
        idx = {n: i for i, n in enumerate(js.name)}
        q = np.array([js.position[idx[pm.names[j]]] for j in range(1, pm.njoints)])
        pin.framesForwardKinematics(pm, pd, q)
        target = refs[np.searchsorted(ref_t, t, side="right") - 1][1].pose.position
        errors.append(np.linalg.norm(pd.oMf[fid].translation - [target.x, target.y, target.z]))
    rms = 1e3 * np.sqrt(np.mean(np.square(errors)))
    commands = np.array([c.data for _, c in bag["/effort_controller/commands"]])
    m = summary["metrics"]
    print(f"\n[arm] hand RMS over the path {rms:.2f} mm (before the failure "
          f"{m['hand_rms_before_failure_mm']:.2f}, after {m['hand_rms_after_failure_mm']:.2f}); "
          f"joint1 moved {m['failed_joint_excursion_rad']:.4f} rad")
    assert np.all(np.isfinite(commands)) and m["nonfinite_commands"] == 0
    assert rms < 5.0 and m["hand_rms_after_failure_mm"] < 5.0
    assert commands[-20:, 0].tolist() == [0.0] * 20  # joint1's slot after the failure
    assert summary["success"]
