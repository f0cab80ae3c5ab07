"""``underactuated-control identify-payload`` over DDS (issue 24): mujoco_sim simulates the
bundled 7-DOF arm with a 1.5 kg box fixed at its tool frame (one more URDF link, as in
test_payload_node.py), lock-stepped on simulated time, without dry friction (MuJoCo's
frictionloss would hold up to 0.1 N·m of any load, a band no model states);
hybrid_dynamics_controller holds it with the arm's own URDF, told nothing of the box. The
command, run as a user would (its own process), moves the arm through the proposed holding
poses and estimates the box from /joint_states' efforts. Oracle: the box the simulator carries
(mass within 2 %, centre of mass within 5 mm); then the controller holds it as the told one
(test_payload_node: < 1 mrad)."""

import subprocess
import sys

import numpy as np
import yaml
from harness import child_env
from helpers import ROOT
from rclpy.parameter_client import AsyncParameterClient
from test_payload_identification import COM, MASS
from test_payload_node import NODE, States, launch_arm_carrying_box

from underactuated_control.payload_identification import HoldingRecorder


def cli(domain, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "underactuated_control.cli",
                           "identify-payload", *args], env=child_env(domain), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_identify_payload_finds_the_box_the_simulator_carries(ros, launch, domain, tmp_path):
    sim, node, _ = launch_arm_carrying_box(launch, tmp_path)
    client = AsyncParameterClient(ros.node, NODE)
    assert client.wait_for_services(120.0), node.log()
    states = States(ros)
    assert ros.wait_for(lambda: len(states.q) > 10, 60), sim.log()

    # bad input: one line each, nothing moves
    bad = cli(domain, "--frame", "no_such_frame", "--timeout", "30")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0, bad.stderr
    assert "no_such_frame" in bad.stderr and "--frame" in bad.stderr
    absent = cli(domain, "--controller", "nobody", "--timeout", "3")
    assert absent.returncode == 1 and "no controller '/nobody'" in absent.stderr, absent.stderr

    out = tmp_path / "payload.yaml"
    run = cli(domain, "--out", str(out), "--set", "--speed", "0.8", "--settle-time", "0.3",
              "--record-time", "0.3", "--timeout", "120")
    print("\n" + run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr + node.log()[-3000:]
    assert run.stdout.count("[identify-payload] pose ") == 6  # progress per pose
    assert "efforts: /joint_states effort" in run.stdout
    values = yaml.safe_load(out.read_text())[NODE]["ros__parameters"]
    mass_error = abs(values["payload_mass"] - MASS) / MASS
    com_error = float(np.linalg.norm(np.array(values["payload_com"]) - COM))
    print(f"[identify-payload] 1.5 kg box at 'tool': mass error {100 * mass_error:.3f} %, com "
          f"error {1e3 * com_error:.3f} mm")
    assert values["payload_frame"] == "tool"
    assert mass_error < 0.02
    assert com_error < 5e-3
    # set on the controller (one atomic call), back in hold mode at the start pose
    future = client.get_parameters(["payload_frame", "payload_mass", "mode"])
    assert ros.wait_for(future.done, 30)
    got = [v for v in future.result().values]
    assert got[0].string_value == "tool" and got[1].double_value == values["payload_mass"]
    assert got[2].string_value == "hold"
    # the controller's model now matches the plant: its momentum observer sees no load left
    start = len(states.wrench)
    assert ros.wait_for(lambda: len(states.wrench) > start + 500, 120)
    left = float(np.linalg.norm(states.wrench[-1][1][:3]))
    print(f"[identify-payload] ~/estimated_wrench force with the identified payload: "
          f"{left:.3f} N (the box weighs {MASS * 9.81:.2f} N)")
    assert left < 0.05 * MASS * 9.81

def test_identify_payload_service_on_the_controller(ros, launch, tmp_path):
    from diagnostic_msgs.srv import SelfTest

    sim, node, _ = launch_arm_carrying_box(launch, tmp_path, mode="joint")
    client = ros.node.create_client(SelfTest, f"/{NODE}/identify_payload")
    assert client.wait_for_service(120.0), node.log()
    states = States(ros)
    # the controller's own states (its ~/estimated_wrench answers each one), not only this
    # node's: the service refuses to start before the controller has a fresh state
    assert ros.wait_for(lambda: len(states.q) > 10 and len(states.wrench) > 10, 60), \
        sim.log() + node.log()
    future = client.call_async(SelfTest.Request())
    assert ros.wait_for(future.done, 240), node.log()[-3000:]
    status = future.result().status[0]
    log = node.log()
    print(f"\n[identify-payload service] {status.message}")
    assert future.result().passed == b"\x01", status.message + log[-3000:]
    assert log.count("~/identify_payload: pose ") == 6  # progress per pose
    values = {kv.key: float(kv.value) for kv in status.values}
    com = np.array([values["com_x"], values["com_y"], values["com_z"]])
    assert abs(values["mass"] - MASS) / MASS < 0.02
    assert np.linalg.norm(com - COM) < 5e-3
    params = AsyncParameterClient(ros.node, NODE).get_parameters(["payload_frame",
                                                                  "payload_mass"])
    assert ros.wait_for(params.done, 30)
    got = params.result().values
    assert got[0].string_value == "tool" and abs(got[1].double_value - values["mass"]) < 1e-5


def test_holding_recorder_waits_for_stillness_then_averages():
    rec = HoldingRecorder(settle_velocity=0.01, settle_time=0.2, record_time=0.1)
    q, e = np.zeros(2), np.array([1.0, 2.0])
    t = 0.0
    assert rec.feed(t, q, np.array([0.1, 0.0]), e) is None  # moving
    out = None
    while out is None:
        t += 0.01
        out = rec.feed(t, q + t, np.zeros(2), e + t)
        assert t < 1.0
    assert 0.29 < t < 0.32  # 0.2 s still (from 0.01), then 0.1 s recorded
    start = 0.21
    np.testing.assert_allclose(out[0], (start + t) / 2 * np.ones(2), atol=1e-9)
    np.testing.assert_allclose(out[1], e + (start + t) / 2, atol=1e-9)
