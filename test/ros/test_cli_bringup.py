"""``underactuated-control bringup`` run as a user would, over DDS: the default configuration
holds the simulated arm, the resolver can be brought up and drives the arm through the
controller, and the nodes end with bringup however it ends (SIGTERM, kill -9). The arm is
judged on the simulator's /joint_states against the URDF's and the YAML's own numbers and
Pinocchio's kinematics."""

import math
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
import yaml
from harness import child_env
from helpers import ROOT
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray

from underactuated_control.redundancy.arm_angle import arm_angle_from_points

ARM7 = ROOT / "urdf/arm7.urdf"
NAMES = [f"joint{i}" for i in range(1, 8)]
Q_START = np.array(yaml.safe_load((ROOT / "config/arm7_sim.yaml").read_text())[
    "mujoco_sim"]["ros__parameters"]["initial_positions"])


def urdf_limits():
    root = ET.parse(ARM7).getroot()
    lim = {j.get("name"): j.find("limit") for j in root.findall("joint")}
    return (np.array([float(lim[n].get(k)) for n in NAMES]) for k in ("lower", "upper"))


class Bringup:
    """``underactuated-control bringup ...`` in its own process, output in a file."""

    def __init__(self, domain, tmp_path, *args):
        self.log_path = tmp_path / f"bringup-{time.time_ns()}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in finish()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "underactuated_control.cli", "bringup", *args],
            env=child_env(domain), stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)

    def log(self):
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def nodes(self):
        """pids of the node processes it started (its children)."""
        return children(self.proc.pid)

    def finish(self, timeout=30.0):
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log.close()
        return code


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def alive(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def wait_until(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def record(ros):
    states, efforts = [], []
    names = {}

    def on_state(msg):
        if not names:
            names["idx"] = [list(msg.name).index(n) for n in NAMES]
        states.append((time.monotonic(), np.array(msg.position)[names["idx"]]))

    ros.node.create_subscription(JointState, "/joint_states", on_state, 50)
    ros.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                 lambda m: efforts.append(time.monotonic()), 50)
    return states, efforts


def test_default_bringup_holds_the_simulated_arm(ros, domain, tmp_path):
    """Item: with the default YAML and --node mujoco_sim the arm used to collapse onto joint2's
    limit (joint2 passive under gravity). Now the first run holds it where it starts."""
    lower, upper = urdf_limits()
    states, efforts = record(ros)
    run = Bringup(domain, tmp_path, "--node", "mujoco_sim", "--duration", "60")
    try:
        assert ros.wait_for(lambda: len(efforts) > 100 and len(states) > 100, 60), run.log()
        t0 = time.monotonic()
        ros.spin_for(4.0)
        held = np.array([q for t, q in states if t >= t0])
        drift = np.abs(held - Q_START).max()
        margin = min((held - lower).min(), (upper - held).min())
        print(f"\n[bringup] default config, mujoco_sim: {len(held)} states over 4 s, largest "
              f"deviation from the start {drift:.2e} rad, closest approach to a limit "
              f"{margin:.3f} rad")
        assert drift < 0.01
        assert margin > 0.1
        assert "warning" not in run.log()
    finally:
        run.proc.send_signal(signal.SIGTERM)
        code = run.finish()
    assert code == 0, run.log()
    assert "Traceback" not in run.log()


PM = pin.buildModelFromUrdf(str(ARM7))


def fk_psi(q):
    pm = PM
    pd = pm.createData()
    pin.framesForwardKinematics(pm, pd, q)
    pos = [pd.oMf[pm.getFrameId(n)].translation.copy() for n in ("link2", "link4", "link6")]
    tool = pd.oMf[pm.getFrameId("tool")].translation.copy()
    return arm_angle_from_points(*pos), tool


def test_bringup_starts_the_resolver_and_its_setpoints_drive_the_arm(ros, domain, tmp_path):
    """Item: bringup could not start the resolver. Now --node elbow_redundancy_resolver
    starts it with config/arm7_resolver.yaml, wired to the controller: an arm-angle goal
    sent to the resolver moves the simulated arm's elbow by that angle, the hand stays (to
    the controller's tracking)."""
    states, efforts = record(ros)
    psi_pub = ros.node.create_publisher(Float64, "/elbow_redundancy_resolver/target_arm_angle",
                                        10)
    run = Bringup(domain, tmp_path, "--node", "mujoco_sim", "--node",
                  "elbow_redundancy_resolver", "--duration", "90")
    try:
        assert ros.wait_for(lambda: len(efforts) > 100 and len(states) > 100
                            and psi_pub.get_subscription_count(), 60), run.log()
        ros.spin_for(0.5)
        psi0, hand0 = fk_psi(states[-1][1])
        goal = psi0 + math.radians(20)
        psi_pub.publish(Float64(data=float(goal)))
        # motion_duration 3 s in the YAML: wait for the resolver's report, then settle
        assert ros.wait_for(lambda: "goal reached" in run.log(), 30), run.log()
        ros.spin_for(2.0)
        psi1, hand1 = fk_psi(states[-1][1])
        print(f"\n[bringup] resolver via bringup: arm angle {math.degrees(psi0):.2f}° -> "
              f"{math.degrees(psi1):.2f}° (goal {math.degrees(goal):.2f}°), hand moved "
              f"{1e3 * np.linalg.norm(hand1 - hand0):.2f} mm")
        # the controller (config/arm7_controller.yaml gains, kp 100/s²) tracks the resolver's
        # exact plan with a few mm that creep out under MuJoCo's joint friction
        assert abs(math.degrees(psi1 - goal)) < 1.0
        assert np.linalg.norm(hand1 - hand0) < 0.01
        assert "joint_setpoints feed" in run.log()
    finally:
        run.proc.send_signal(signal.SIGTERM)
        code = run.finish()
    assert code == 0, run.log()
    assert "Traceback" not in run.log()


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_the_nodes_end_with_bringup(domain, tmp_path, how):
    """Item: child processes always die with the parent: kill -9 of bringup ends its nodes
    (PR_SET_PDEATHSIG), SIGTERM stops them cleanly (exit 0)."""
    run = Bringup(domain, tmp_path, "--node", "mujoco_sim")
    nodes = []
    try:
        assert wait_until(lambda: len(run.nodes()) == 2 and "controlling 'arm7'" in run.log()
                          and "simulating 'arm7'" in run.log(), 60), run.log()
        nodes = run.nodes()
        run.proc.send_signal(getattr(signal, how))
        code = run.finish()
        gone = wait_until(lambda: not any(alive(p) for p in nodes), 15)
        print(f"\n[bringup] {how} to bringup: exit {code}, nodes {nodes} ended: {gone}")
        assert gone, run.log()
        if how == "SIGTERM":
            assert code == 0 and "Traceback" not in run.log(), run.log()
    finally:
        for p in nodes or children(run.proc.pid):
            if alive(p):
                os.kill(p, signal.SIGKILL)
        if run.proc.poll() is None:
            run.proc.kill()


STUCK_NODE = """
import sys, time
from rclpy.node import Node
from underactuated_control.nodes.common import run_node

class Stuck(Node):
    def __init__(self):
        super().__init__("stuck")
        print("spinning", flush=True)

    def on_shutdown(self):  # a teardown that never returns (as a DDS deadlock would)
        time.sleep(600)

sys.exit(run_node(Stuck, shutdown_limit_s=1.0))
"""


def test_a_node_whose_shutdown_hangs_still_ends(domain):
    """Item: child processes always die: a node stuck in its teardown after SIGTERM (with no
    bringup left to escalate to SIGKILL) ends after ``shutdown_limit_s`` with exit code 1
    and every thread's stack on stderr, naming where it was stuck."""
    proc = subprocess.Popen([sys.executable, "-c", STUCK_NODE], env=child_env(domain),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "spinning"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"\n[bringup] stuck teardown ended after {took:.2f} s with exit {proc.returncode}")
    assert proc.returncode == 1, err
    assert 1.0 <= took < 15.0, err
    assert "Timeout (0:00:01)" in err and "in on_shutdown" in err, err
