"""Launch files and config (launch_ros is not installable here): they parse, name real
executables and existing files, and the node accepts every key of its YAML."""

import ast
import re

import yaml
from helpers import ROOT
from rclpy.parameter_client import AsyncParameterClient

# executables of other ROS packages that the launch files start (ros2_control, rsp)
KNOWN = {("robot_state_publisher", "robot_state_publisher"),
         ("controller_manager", "ros2_control_node"), ("controller_manager", "spawner")}


def console_scripts():
    """Names of the console_scripts entry points declared in setup.py."""
    return set(re.findall(r'"([a-z_\-]+) = ', (ROOT / "setup.py").read_text()))


def launch_nodes(path):
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Node":
            kw = {k.arg: k.value for k in node.keywords}
            out.append((kw["package"].value, kw["executable"].value))
    return out


def test_launch_files_parse_and_name_real_executables():
    scripts = console_scripts()
    assert "hybrid_dynamics_controller" in scripts
    files = sorted((ROOT / "launch").glob("*.launch.py"))
    assert files
    for f in files:
        nodes = launch_nodes(f)
        assert nodes, f
        for package, executable in nodes:
            if package == "underactuated_control":
                assert executable in scripts, (f.name, executable)
            else:
                assert (package, executable) in KNOWN, (f.name, package, executable)
        # every share/ file the launch file names exists in the package
        for sub, name in re.findall(r'\[share, "(\w+)", "([\w.]+)"\]', f.read_text()):
            assert (ROOT / sub / name).is_file(), (f.name, sub, name)
    assert "launch_ros" in (ROOT / "package.xml").read_text()


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


def test_node_accepts_every_key_of_its_yaml(ros, launch):
    path = ROOT / "config/arm7_controller.yaml"
    node = launch("hybrid_dynamics_controller",
                  args=["--ros-args", "--params-file", str(path), "-p",
                        f"urdf_path:={ROOT / 'urdf/arm7.urdf'}"])
    client = AsyncParameterClient(ros.node, "hybrid_dynamics_controller")
    assert client.wait_for_services(30.0), node.log()
    expected = yaml.safe_load(path.read_text())["hybrid_dynamics_controller"]["ros__parameters"]
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
    assert "passive ['joint2']" in node.log() or ros.wait_for(
        lambda: "passive ['joint2']" in node.log(), 5), node.log()

