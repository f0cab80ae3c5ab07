"""Launch files and config (launch_ros is not installable here): evaluated with minimal
stand-ins for launch/launch_ros, they start real executables with existing files, and the same
nodes, parameter files, parameters and remappings as ``underactuated-control bringup``; each
node accepts every key of its YAML."""

import os
import re
import runpy
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers import ROOT
from rclpy.parameter_client import AsyncParameterClient

from underactuated_control.cli import _param_text

# executables of other ROS packages that the launch files start (ros2_control, rsp)
KNOWN = {("robot_state_publisher", "robot_state_publisher"),
         ("controller_manager", "ros2_control_node"), ("controller_manager", "spawner")}
BIN = Path(sys.executable).parent


def console_scripts():
    """Names of the console_scripts entry points declared in setup.py."""
    return set(re.findall(r'"([a-z_\-]+) = ', (ROOT / "setup.py").read_text()))


class _Substitution:
    def __init__(self, *parts):
        self.parts = parts


def _perform(value, context):
    return value.perform(context) if hasattr(value, "perform") else str(value)


def _stand_ins():
    """Just enough of launch and launch_ros to evaluate our launch files."""
    launch = types.ModuleType("launch")
    actions = types.ModuleType("launch.actions")
    subs = types.ModuleType("launch.substitutions")
    ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_subs = types.ModuleType("launch_ros.substitutions")
    launch.LaunchDescription = list
    actions.DeclareLaunchArgument = lambda name, default_value="", description="": (
        SimpleNamespace(kind="argument", name=name, default=default_value))
    actions.OpaqueFunction = lambda function: SimpleNamespace(kind="opaque", function=function)

    class LaunchConfiguration(_Substitution):
        def perform(self, context):
            return context.launch_configurations[self.parts[0]]

    class PathJoinSubstitution(_Substitution):
        def perform(self, context):
            return os.path.join(*(_perform(x, context) for x in self.parts[0]))

    class FindPackageShare(_Substitution):
        def perform(self, context):
            assert self.parts[0] == "underactuated_control"
            return str(ROOT)  # the source tree has the share layout (urdf/, config/)

    subs.LaunchConfiguration, subs.PathJoinSubstitution = LaunchConfiguration, \
        PathJoinSubstitution
    ros_actions.Node = lambda **kw: SimpleNamespace(kind="node", **kw)
    ros_subs.FindPackageShare = FindPackageShare
    launch.actions, launch.substitutions = actions, subs
    ros.actions, ros.substitutions = ros_actions, ros_subs
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": subs,
            "launch_ros": ros, "launch_ros.actions": ros_actions,
            "launch_ros.substitutions": ros_subs}


def launch_nodes(path, monkeypatch, **arguments):
    """The Node(...) keyword arguments a launch file starts with these arguments."""
    for name, module in _stand_ins().items():
        monkeypatch.setitem(sys.modules, name, module)
    description = runpy.run_path(str(path))["generate_launch_description"]()
    context = SimpleNamespace(launch_configurations={})
    nodes = []
    for entity in description:
        if entity.kind == "argument":
            context.launch_configurations[entity.name] = arguments.pop(
                entity.name, _perform(entity.default, context))
        elif entity.kind == "opaque":
            nodes += entity.function(context)
        else:
            nodes.append(entity)
    assert not arguments, f"{path.name} has no arguments {sorted(arguments)}"
    return nodes


def command_line(node):
    """The command line ``bringup`` would run for one of our launch file's nodes."""
    cmd = [str(BIN / node.executable), "--ros-args"]
    for p in node.parameters:
        if isinstance(p, dict):
            cmd += [x for k, v in p.items() for x in ("-p", f"{k}:={_param_text(v)}")]
        else:
            cmd += ["--params-file", p]
    cmd += [x for a, b in getattr(node, "remappings", []) or [] for x in ("-r", f"{a}:={b}")]
    return cmd


def bringup_print(*args):
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    out = subprocess.run([sys.executable, "-m", "underactuated_control.cli", "bringup",
                          "--print", *args], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    return [line.split() for line in out.stdout.splitlines()]


def test_launch_files_start_real_executables_with_existing_files(monkeypatch):
    scripts = console_scripts()
    assert "hybrid_dynamics_controller" in scripts
    files = sorted((ROOT / "launch").glob("*.launch.py"))
    assert {f.name for f in files} == {"bringup.launch.py", "controller.launch.py"}
    for f in files:
        for extra in ({}, {"resolver": "true"}):
            nodes = launch_nodes(f, monkeypatch, **extra)
            assert nodes, f
            for node in nodes:
                if node.package == "underactuated_control":
                    assert node.executable in scripts, (f.name, node.executable)
                    for p in node.parameters:
                        assert isinstance(p, dict) or Path(p).is_file(), (f.name, p)
                else:
                    assert (node.package, node.executable) in KNOWN, (f.name, node.package)
        # every share/ file the launch file names exists in the package
        for sub, name in re.findall(r'\[share, "(\w+)", "([\w.]+)"\]', f.read_text()):
            assert (ROOT / sub / name).is_file(), (f.name, sub, name)
    assert "launch_ros" in (ROOT / "package.xml").read_text()


@pytest.mark.parametrize("arguments,flags", [
    ({}, []),
    ({"sim": "true"}, ["--node", "mujoco_sim"]),
    ({"resolver": "true"}, ["--node", "elbow_redundancy_resolver"]),
    ({"sim": "true", "resolver": "true"}, ["--node", "mujoco_sim", "--node",
                                           "elbow_redundancy_resolver"]),
])
def test_controller_launch_starts_what_bringup_starts(monkeypatch, arguments, flags):
    """controller.launch.py and ``underactuated-control bringup`` run the same command lines:
    executables, parameter files, parameters and remappings."""
    launched = [command_line(n) for n in launch_nodes(ROOT / "launch/controller.launch.py",
                                                      monkeypatch, **arguments)]
    assert launched == bringup_print(*flags)
    if "resolver" in arguments:  # the resolver feeds the controller, which follows it
        controller = launched[0]
        assert "mode:=joint" in controller
        assert ("/hybrid_dynamics_controller/joint_reference:=/elbow_redundancy_resolver/"
                "joint_setpoints") in controller
        assert str(ROOT / "config/arm7_resolver.yaml") in launched[-1]


def test_bringup_launch_runs_our_nodes_as_bringup_does(monkeypatch):
    """bringup.launch.py: ros2_control takes the simulator's place; our nodes are bringup's,
    with the URDF text as robot_description instead of urdf_path."""
    nodes = launch_nodes(ROOT / "launch/bringup.launch.py", monkeypatch, resolver="true")
    ours = [n for n in nodes if n.package == "underactuated_control"]
    text = (ROOT / "urdf/arm7.urdf").read_text()
    for n in ours:
        assert n.parameters[-1].pop("robot_description") == text
        n.parameters[-1]["urdf_path"] = str(ROOT / "urdf/arm7.urdf")
    expected = bringup_print("--node", "elbow_redundancy_resolver")
    assert [sorted(command_line(n)) for n in ours] == [sorted(c) for c in expected]


def test_ros2_control_config_matches_the_urdf():
    cfg = yaml.safe_load((ROOT / "config/arm7_ros2_control.yaml").read_text())
    joints = cfg["effort_controller"]["ros__parameters"]["joints"]
    cm = cfg["controller_manager"]["ros__parameters"]
    assert cm["effort_controller"]["type"] == "effort_controllers/JointGroupEffortController"
    import xml.etree.ElementTree as ET

    root = ET.fromstring((ROOT / "urdf/arm7.urdf").read_text())
    with_effort = [j.get("name") for j in root.iter("joint")
                   if j.find("command_interface[@name='effort']") is not None]
    assert joints == with_effort
    params = yaml.safe_load((ROOT / "config/arm7_controller.yaml").read_text())
    p = params["hybrid_dynamics_controller"]["ros__parameters"]
    assert p["command_topic"] == "/effort_controller/commands"  # effort_controller's ~/commands
    assert p["command_joints"] == joints


@pytest.mark.parametrize("executable,config", [
    ("hybrid_dynamics_controller", "arm7_controller.yaml"),
    ("elbow_redundancy_resolver", "arm7_resolver.yaml"),
    ("mujoco_sim", "arm7_sim.yaml"),
])
def test_node_accepts_every_key_of_its_yaml(ros, launch, executable, config):
    path = ROOT / "config" / config
    node = launch(executable, args=["--ros-args", "--params-file", str(path), "-p",
                                    f"urdf_path:={ROOT / 'urdf/arm7.urdf'}"])
    client = AsyncParameterClient(ros.node, executable)
    assert client.wait_for_services(30.0), node.log()
    expected = yaml.safe_load(path.read_text())[executable]["ros__parameters"]
    future = client.list_parameters()
    assert ros.wait_for(future.done, 10)
    declared = set(future.result().result.names)
    assert set(expected) <= declared, set(expected) - declared
    future = client.get_parameters(list(expected))
    assert ros.wait_for(future.done, 10)
    from rclpy.parameter import parameter_value_to_python

    for name, value in zip(expected, future.result().values):
        got = parameter_value_to_python(value)
        assert (list(got) if isinstance(got, (list, tuple)) else got) == expected[name], name
    if executable == "hybrid_dynamics_controller":  # every motor works in the default config
        assert ros.wait_for(lambda: "passive []" in node.log(), 5), node.log()
