"""The console entry point, run as a user would, checked against Pinocchio."""

import os
import re
import subprocess
import sys

import numpy as np
from helpers import ARM7_PATH, ROOT
from oracle import PinRef

from underactuated_control import RobotModel


def run(*args):
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    return subprocess.run(
        [sys.executable, "-m", "underactuated_control.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def test_inspect_prints_hybrid_dynamics_matching_pinocchio():
    q = [0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8]
    out = run("inspect", "arm7", "--passive", "joint2", "joint4", "--q", *map(str, q))
    assert out.returncode == 0, out.stderr
    assert "PASSIVE" in out.stdout and "tau_active" in out.stdout
    tau_block = out.stdout.split("tau_active")[1].split("qdd_passive")[0]
    values = dict(re.findall(r"^\s+(joint\d)\s+(-?\d+\.\d+) ", tau_block, re.M))
    text = ARM7_PATH.read_text()
    model = RobotModel.from_urdf(text, passive_joints=["joint2", "joint4"])
    ref = PinRef(model, text)
    tau_a, qdd_p = ref.dense_hybrid(
        np.array(q), np.zeros(7), np.zeros(5), np.zeros(2), model.active_dofs, model.passive_dofs
    )
    for name, t in zip(model.active_joints, tau_a):
        assert abs(float(values[name]) - t) < 1e-5, name
    block = out.stdout.split("qdd_passive")[1].split("mass matrix")[0]
    got = dict(re.findall(r"^\s+(joint\d)\s+(-?\d+\.\d+) ", block, re.M))
    for name, a in zip(model.passive_joints, qdd_p):
        assert abs(float(got[name]) - a) < 1e-5, name


def test_inspect_bad_input_exit_code():
    out = run("inspect", "arm7", "--passive", "joint9")
    assert out.returncode == 2
    assert "unknown joint 'joint9'" in out.stderr
    out = run("inspect", "arm7", "--q", "0", "1")
    assert out.returncode == 2 and "q must have shape (7,)" in out.stderr


# ---------------------------------------------------------------- bringup: checked first
def one_error_line(out):
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "started" not in out.stderr, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def test_bringup_checks_node_names_before_starting_anything():
    line = one_error_line(run("bringup", "--node", "mujoco_simm"))
    assert "--node 'mujoco_simm'" in line and "did you mean 'mujoco_sim'" in line
    line = one_error_line(run("bringup", "--node", "mujoco_sim", "--node", "nope"))
    assert "--node 'nope'" in line
    line = one_error_line(run("bringup", "--node", "hybrid_dynamics_controller"))
    assert "always starts the controller" in line


def test_bringup_needs_the_resolver_links_of_another_robot():
    line = one_error_line(run("bringup", "--urdf", "acrobot", "--node",
                              "elbow_redundancy_resolver"))
    assert "--resolver-links" in line
    line = one_error_line(run("bringup", "--urdf", "acrobot", "--node",
                              "elbow_redundancy_resolver", "--resolver-links", "a", "b", "c"))
    assert "shoulder_link 'a'" in line and "not a link of 'acrobot'" in line


def test_bringup_puts_every_node_on_the_simulators_clock(tmp_path):
    """With mujoco_sim every node gets use_sim_time (a loaded machine slows the simulation:
    on wall time the resolver's plan ran ahead of the arm); without it none does; a node file
    that sets use_sim_time itself is left to it. On that one clock the resolver stamps its
    setpoints three samples ahead (setpoint_lead 0.03 s at its 100 Hz), unless its file says."""
    from underactuated_control.bringup import bringup_nodes

    urdf = str(ARM7_PATH)
    with_sim = bringup_nodes(urdf, sim=True, resolver=True)
    assert [n.parameters.get("use_sim_time") for n in with_sim] == [True, True, True]
    assert [n.parameters.get("setpoint_lead") for n in with_sim] == [None, None, 0.03]
    assert all("use_sim_time" not in n.parameters and "setpoint_lead" not in n.parameters
               for n in bringup_nodes(urdf, resolver=True))
    resolver_file = tmp_path / "resolver.yaml"
    resolver_file.write_text("elbow_redundancy_resolver:\n  ros__parameters:\n"
                             "    setpoint_lead: 0.0\n")
    *_, resolver = bringup_nodes(urdf, sim=True, resolver=True,
                                 resolver_config=str(resolver_file))
    assert "setpoint_lead" not in resolver.parameters and resolver.parameters["use_sim_time"]
    own = tmp_path / "controller.yaml"
    own.write_text("hybrid_dynamics_controller:\n  ros__parameters:\n    use_sim_time: false\n")
    controller, sim = bringup_nodes(urdf, str(own), sim=True)
    assert "use_sim_time" not in controller.parameters and sim.parameters["use_sim_time"]


def test_bringup_hears_the_resolvers_setpoints_best_effort(tmp_path):
    """Fed by the resolver's 100 Hz setpoints the controller takes ~/joint_reference best
    effort (a reliable reader holds every point behind a lost one until the writer's next
    heartbeat); alone it keeps the default, reliable (JointTrajectoryController's); a
    controller file that sets reference_reliability is left to it."""
    from underactuated_control.bringup import bringup_nodes

    urdf = str(ARM7_PATH)
    controller, *_ = bringup_nodes(urdf, sim=True, resolver=True)
    assert controller.parameters["reference_reliability"] == "best_effort"
    controller, _ = bringup_nodes(urdf, sim=True)
    assert "reference_reliability" not in controller.parameters
    own = tmp_path / "controller.yaml"
    own.write_text("hybrid_dynamics_controller:\n  ros__parameters:\n"
                   "    reference_reliability: reliable\n")
    controller, _ = bringup_nodes(urdf, str(own), resolver=True)
    assert "reference_reliability" not in controller.parameters


def _config_with_passive(tmp_path, joints):
    text = (ROOT / "config/arm7_controller.yaml").read_text()
    path = tmp_path / "controller.yaml"
    path.write_text(text.replace('passive_joints: [""]', f"passive_joints: {joints}"))
    return path


def test_bringup_says_when_a_passive_joint_will_fall(tmp_path):
    """A passive joint2 under gravity (the old default) is announced with the acceleration
    Pinocchio's dense hybrid dynamics gives at the simulator's start configuration; a passive
    vertical axis (joint1) is not."""
    import yaml

    q0 = np.array(yaml.safe_load((ROOT / "config/arm7_sim.yaml").read_text())[
        "mujoco_sim"]["ros__parameters"]["initial_positions"])
    out = run("bringup", "--config", str(_config_with_passive(tmp_path, '["joint2"]')),
              "--node", "mujoco_sim", "--print")
    assert out.returncode == 0, out.stderr
    text = ARM7_PATH.read_text()
    model = RobotModel.from_urdf(text, passive_joints=["joint2"])
    _, qdd_p = PinRef(model, text).dense_hybrid(q0, np.zeros(7), np.zeros(6), np.zeros(1),
                                                model.active_dofs, model.passive_dofs)
    warning = re.search(r"warning: joint2 is passive .* accelerates it at ([-+]\d+\.\d+) "
                        r"rad/s².*toward its limit \(([-\d.]+) rad\)", out.stderr)
    assert warning, out.stderr
    assert abs(float(warning.group(1)) - qdd_p[0]) < 0.006
    assert warning.group(2) == "1.7628"  # the URDF's upper limit of joint2, where it falls
    assert "passive_joints:=[joint2]" in out.stdout  # the simulated motor is broken too
    out = run("bringup", "--config", str(_config_with_passive(tmp_path, '["joint1"]')),
              "--node", "mujoco_sim", "--print")
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr


# ---------------------------------------------------------------- plan
PLAN = ("plan", "arm7", "--frame", "tool", "--q", "0", "-0.3", "0", "-2.2", "0", "2", "0.8")


def test_plan_checks_its_arguments_before_integrating(tmp_path):
    for args, text in [
        (("--line", "0.01", "0", "0", "--out", str(tmp_path / "no/such/dir/p.csv")),
         "--out: directory"),
        (("--line", "0.01", "0", "0", "--out", str(tmp_path / "p.txt")),
         "--out must end in .csv or .npz"),
        (("--line", "0.01", "0", "0", "--out", str(tmp_path)), "is a directory"),
        (("--circle", "0.05", "--normal", "0", "0", "0"), "--normal must be a non-zero vector"),
        (("--line", "0.01", "0", "0", "--duration", "0"), "--duration must be > 0 s"),
    ]:
        out = run(*PLAN, *args)
        line = one_error_line(out)
        assert text in line, (args, line)
        assert "[plan] t =" not in out.stderr  # nothing was integrated


def test_plan_of_an_unreachable_path_fails_naming_the_effort_limits(tmp_path):
    """A 3 m line: forces far beyond the URDF's effort limits and a tracking error that
    grows: exit 1 with the reasons; the profile is still written for inspection."""
    import xml.etree.ElementTree as ET

    limits = {j.get("name"): float(j.find("limit").get("effort"))
              for j in ET.parse(ARM7_PATH).getroot().findall("joint") if j.find("limit")
              is not None}
    out = run(*PLAN, "--line", "3", "0", "0", "--duration", "0.5", "--dt", "0.005",
              "--out", str(tmp_path / "p.csv"))
    assert out.returncode == 1, out.stderr
    assert (tmp_path / "p.csv").is_file()
    effort = re.search(r"error: the plan is not feasible: active forces beyond the URDF effort "
                       r"limits: (.*)", out.stderr)
    assert effort, out.stderr
    named = re.findall(r"(joint\d) ([\d.e+]+) N·m \(limit ([\d.]+)\)", effort.group(1))
    assert named
    for joint, peak, limit in named:
        assert float(limit) == limits[joint] and float(peak) > limits[joint]
    assert "the tracking error grows to" in out.stderr
    # a short, slow line is feasible: exit 0, no complaint
    out = run(*PLAN, "--line", "0.02", "0", "0", "--duration", "1", "--dt", "0.005")
    assert out.returncode == 0 and "not feasible" not in out.stderr, out.stderr


# ---------------------------------------------------------------- demo
def test_demo_honours_ros_domain_id():
    from underactuated_control.scenarios.harness import demo_domain

    assert demo_domain({"ROS_DOMAIN_ID": "42"}) == (42, "from the environment")
    domain, source = demo_domain({})
    assert 100 <= domain < 200 and "process id" in source
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env["ROS_DOMAIN_ID"] = "abc"
    out = subprocess.run([sys.executable, "-m", "underactuated_control.cli", "demo"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 2
    assert "ROS_DOMAIN_ID must be an integer in 0..232, got 'abc'" in out.stderr


# ---------------------------------------------------------------- replay of a corrupt bag
SHIPPED_BAG = ROOT / "test/data/bags/arm7_joint_step"


def _corrupt_copies(tmp_path):
    """The shipped bag copied and broken: {name: bag directory}."""
    import shutil

    from rosbags.rosbag2 import Reader, Writer
    from rosbags.rosbag2.enums import StoragePlugin

    rng = np.random.default_rng(21)
    mcap = "arm7_joint_step.mcap"
    data = (SHIPPED_BAG / mcap).read_bytes()
    mid = len(data) // 2
    broken = {
        "random 4 kB mid-file": data[:mid] + rng.bytes(4096) + data[mid + 4096:],
        "zeros 4 kB mid-file": data[:mid] + bytes(4096) + data[mid + 4096:],
        "random 4 kB early": data[:5000] + rng.bytes(4096) + data[9096:],
        "random 16 bytes mid-file": data[:mid] + rng.bytes(16) + data[mid + 16:],
        "truncated at half": data[:mid],
        "summary zeroed": data[:-3000] + bytes(3000),
    }
    out = {}
    for k, (name, content) in enumerate(broken.items()):
        bag = shutil.copytree(SHIPPED_BAG, tmp_path / f"bag{k}")
        (bag / mcap).write_bytes(content)
        out[name] = bag
    # whole chunks, one /joint_states payload bad: zeroed (it deserialises, into an empty
    # message of fewer bytes) or random (it does not deserialise)
    for k, name in enumerate(("payload zeroed", "payload random")):
        bag = tmp_path / f"payload{k}"
        with Reader(SHIPPED_BAG) as reader, Writer(bag, version=9,
                                                    storage_plugin=StoragePlugin.MCAP) as writer:
            conns = {c.id: writer.add_connection(c.topic, c.msgtype, typestore=None,
                                                 msgdef=c.msgdef.data, rihs01=c.digest)
                     for c in reader.connections}
            seen = 0
            for conn, stamp, raw in reader.messages():
                if conn.topic == "/joint_states":
                    seen += 1
                    if seen == 100:
                        raw = bytes(len(raw)) if k == 0 else rng.bytes(len(raw))
                writer.write(conns[conn.id], stamp, raw)
        out[name] = bag
    return out


def test_a_corrupt_bag_is_one_line_naming_file_topic_and_offset(tmp_path):
    """Issue 21: replay (and read_bag) of a damaged bag: exit 2, one line naming the file, the
    topic and where (byte offset, or message index and time), no traceback."""
    from underactuated_control.nodes.bags import read_bag

    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env.update(ROS_DOMAIN_ID=str(150 + os.getpid() % 50), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    for name, bag in _corrupt_copies(tmp_path).items():
        try:
            read_bag(bag)
            raise AssertionError(f"{name}: read without error")
        except ValueError as exc:
            line = str(exc)
        print(f"\n[bag] {name}: {line}")
        assert "\n" not in line and str(bag) in line, name
        assert re.search(r"byte \d+", line), (name, line)  # where: the byte offset
        assert re.search(r"/joint_states|/effort_controller/commands", line), (name, line)
        out = subprocess.run([sys.executable, "-m", "underactuated_control.cli", "replay",
                              str(bag)], capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=120)
        assert out.returncode == 2, (name, out.stderr)
        assert out.stderr.strip() == f"error: {line}", (name, out.stderr)
        assert "Traceback" not in out.stdout + out.stderr
