"""Launch files and config (launch_ros is not installable here): evaluated with stand-ins for
launch/launch_ros that accept exactly the real APIs' names and signatures (``SIGNATURES``,
extracted from the sources), they start real executables (setup.py's console scripts, or
known executables of other packages) with parameters their node declares and files that
exist, and the same nodes, parameter files, parameters and remappings as
``underactuated-control bringup``; each node accepts every key of its YAML."""

import inspect
import os
import re
import runpy
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from helpers import ROOT
from rclpy.parameter_client import AsyncParameterClient

from underactuated_control.bringup import _param_text

# executables of other ROS packages that the launch files start (ros2_control, rsp, Gazebo)
KNOWN = {("robot_state_publisher", "robot_state_publisher"),
         ("controller_manager", "ros2_control_node"), ("controller_manager", "spawner"),
         ("ros_gz_sim", "create"), ("ros_gz_bridge", "parameter_bridge")}
BIN = Path(sys.executable).parent
LAUNCH_FILES = {"bringup.launch.py", "controller.launch.py", "sim.launch.py",
                "resolver.launch.py", "gazebo.launch.py"}

# The constructors' signatures of the launch/launch_ros API the launch files may use, extracted
# (names, kinds, which have defaults, **kwargs) from the sources' __init__ by AST:
# ros2/launch 3.7.1 (02595baf) and ros2/launch_ros f9ab937 (rolling). Each entry: signature,
# the class its **kwargs go to (None: a substitution or plain object), the arguments that
# class receives from this one (not from the caller).
SIGNATURES = {
    "launch.LaunchDescription": ("(initial_entities=None, *, deprecated_reason=None)",
                                 None, ()),
    "launch.Action": ("(*, condition=None)", None, ()),
    "launch.actions.DeclareLaunchArgument": (
        "(name, *, default_value=None, description=None, choices=None, **kwargs)",
        "launch.Action", ()),
    "launch.actions.OpaqueFunction": (
        "(*, function, args=None, kwargs=None, **left_over_kwargs)", "launch.Action", ()),
    "launch.actions.IncludeLaunchDescription": (
        "(launch_description_source, *, launch_arguments=None, **kwargs)",
        "launch.Action", ()),
    "launch.actions.GroupAction": (
        "(actions, *, scoped=None, forwarding=None, launch_configurations=None, "
        "**left_over_kwargs)", "launch.Action", ()),
    "launch.actions.ExecuteProcess": (
        "(*, cmd, prefix=None, name=None, cwd=None, env=None, additional_env=None, "
        "**kwargs)", "launch.actions.ExecuteLocal", ("process_description",)),
    "launch.actions.ExecuteLocal": (
        "(*, process_description, shell=None, sigterm_timeout=None, sigkill_timeout=None, "
        "emulate_tty=None, output=None, output_format=None, cached_output=None, "
        "log_cmd=None, on_exit=None, respawn=None, respawn_delay=None, "
        "respawn_max_retries=None, **kwargs)", "launch.Action", ()),
    "launch.actions.RegisterEventHandler": ("(event_handler, **kwargs)", "launch.Action", ()),
    "launch.actions.TimerAction": ("(*, period, actions, cancel_on_shutdown=None, **kwargs)",
                                   "launch.Action", ()),
    "launch.actions.LogInfo": ("(*, msg, **kwargs)", "launch.Action", ()),
    "launch.actions.SetEnvironmentVariable": ("(name, value, **kwargs)", "launch.Action", ()),
    "launch.event_handlers.OnProcessExit": ("(*, target_action=None, on_exit, **kwargs)",
                                            "OnActionEventBase", ()),
    "launch.event_handlers.OnProcessStart": ("(*, target_action=None, on_start, **kwargs)",
                                             "OnActionEventBase", ()),
    "launch.substitutions.LaunchConfiguration": ("(variable_name, *, default=None)", None, ()),
    "launch.substitutions.PathJoinSubstitution": ("(substitutions)", None, ()),
    "launch.substitutions.Command": ("(command, *, on_stderr=None)", None, ()),
    "launch.substitutions.TextSubstitution": ("(*, text)", None, ()),
    "launch.substitutions.PythonExpression": ("(expression, python_modules=None)", None, ()),
    "launch.substitutions.EnvironmentVariable": ("(name, *, default_value=None)", None, ()),
    "launch.conditions.IfCondition": ("(predicate_expression)", None, ()),
    "launch.conditions.UnlessCondition": ("(predicate_expression)", None, ()),
    "launch.launch_description_sources.PythonLaunchDescriptionSource": (
        "(launch_file_path)", None, ()),
    "launch_ros.actions.Node": (
        "(*, executable, package=None, name=None, namespace=None, exec_name=None, "
        "parameters=None, remappings=None, ros_arguments=None, arguments=None, **kwargs)",
        "launch.actions.ExecuteProcess", ("cmd",)),
    "launch_ros.actions.SetParameter": ("(name, value, **kwargs)", "launch.Action", ()),
    "launch_ros.substitutions.FindPackageShare": ("(package)", None, ()),
    "launch_ros.parameter_descriptions.ParameterValue": ("(value, *, value_type=None)",
                                                         None, ()),
}
# OnActionEventBase(*, action_matcher, on_event, target_object, **kwargs) -> BaseEventHandler
# (*, matcher, entities=None, handle_once=False): the event handlers' own keywords cover them
_EVENT_BASE_KWARGS = {"handle_once"}


def console_scripts():
    """Names of the console_scripts entry points declared in setup.py."""
    return set(re.findall(r'"([a-z_\-]+) = ', (ROOT / "setup.py").read_text()))


def _signature(key: str) -> inspect.Signature:
    text = SIGNATURES[key][0]
    return inspect.signature(eval(f"lambda {text[1:-1]}: None"))  # noqa: S307 - our table


def _check_call(key: str, args: tuple, kwargs: dict) -> dict:
    """Bind a call to the real signature (TypeError like the real class) and pass its
    **kwargs down the real chain of base classes; the bound arguments."""
    bound = _signature(key).bind(*args, **kwargs).arguments
    extra = {}
    for name, p in _signature(key).parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = bound.pop(name, {})
    target, given = SIGNATURES[key][1], SIGNATURES[key][2]
    while extra:
        if target == "OnActionEventBase":
            unknown = set(extra) - _EVENT_BASE_KWARGS
            if unknown:
                raise TypeError(f"{key}: unexpected keyword arguments {sorted(unknown)}")
            break
        if target is None:
            raise TypeError(f"{key}: unexpected keyword arguments {sorted(extra)}")
        sig = _signature(target)
        b = sig.bind(**dict.fromkeys(given, None), **extra).arguments
        extra = {}
        for name, p in sig.parameters.items():
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                extra = b.pop(name, {})
        bound.update({k: v for k, v in b.items() if k not in given})
        target, given = SIGNATURES[target][1], SIGNATURES[target][2]
    return bound


def _perform(value, context):
    """A substitution, a text, or a list of them (concatenated), as launch performs them."""
    if isinstance(value, (list, tuple)):
        return "".join(_perform(v, context) for v in value)
    return value.perform(context) if hasattr(value, "perform") else str(value)


class _StandIn:
    key = ""

    def __init__(self, *args, **kwargs):
        self.bound = _check_call(self.key, args, kwargs)
        for k, v in self.bound.items():
            setattr(self, k, v)


def _stand_ins():
    """Modules launch, launch.*, launch_ros.* with the names of SIGNATURES only."""
    modules: dict[str, types.ModuleType] = {}

    def module(name):
        if name not in modules:
            modules[name] = types.ModuleType(name)
            if "." in name:
                parent, leaf = name.rsplit(".", 1)
                setattr(module(parent), leaf, modules[name])
        return modules[name]

    def perform_for(key):
        leaf = key.rsplit(".", 1)[1]
        if leaf == "LaunchConfiguration":
            return lambda self, c: c.launch_configurations[self.variable_name]
        if leaf == "PathJoinSubstitution":
            return lambda self, c: os.path.join(*(_perform(x, c) for x in self.substitutions))
        if leaf == "TextSubstitution":
            return lambda self, c: self.text
        if leaf == "FindPackageShare":
            def find(self, c):
                package = _perform(self.package, c)
                # the source tree has the share layout (urdf/, config/, launch/)
                return str(ROOT) if package == "underactuated_control" else \
                    f"/opt/ros/share/{package}"
            return find
        return None

    for key in SIGNATURES:
        mod, leaf = key.rsplit(".", 1)
        attrs = {"key": key}
        perform = perform_for(key)
        if perform is not None:
            attrs["perform"] = perform
        if leaf == "LaunchDescription":
            attrs["entities"] = property(lambda self: list(self.initial_entities or []))
        setattr(module(mod), leaf, type(leaf, (_StandIn,), attrs))
    return modules


def _evaluate(entities, context, nodes, includes):
    for entity in entities:
        if not isinstance(entity, _StandIn):
            raise TypeError(f"not a launch entity: {entity!r}")
        leaf = entity.key.rsplit(".", 1)[1]
        condition = entity.bound.get("condition")
        if condition is not None:
            value = _perform(condition.predicate_expression, context).lower() in ("true", "1")
            if value == condition.key.endswith("UnlessCondition"):
                continue
        if leaf == "DeclareLaunchArgument":
            assert entity.bound.get("description"), f"argument {entity.name} undocumented"
            context.launch_configurations[entity.name] = context.given.pop(
                entity.name, _perform(entity.bound.get("default_value", ""), context))
            context.declared.append(entity.name)
        elif leaf == "OpaqueFunction":
            _evaluate(entity.function(context, *(entity.bound.get("args") or ()),
                                      **(entity.bound.get("kwargs") or {})) or [],
                      context, nodes, includes)
        elif leaf == "Node":
            nodes.append(entity)
        elif leaf == "RegisterEventHandler":  # what the handler starts, started later
            handler = entity.event_handler
            assert handler.target_action in nodes, "the handler's target is not started"
            _evaluate(handler.bound.get("on_exit") or handler.bound.get("on_start"),
                      context, nodes, includes)
        elif leaf == "IncludeLaunchDescription":
            includes.append((_perform(entity.launch_description_source.launch_file_path,
                                      context),
                             {_perform(k, context): _perform(v, context)
                              for k, v in entity.bound.get("launch_arguments") or []}))
        elif leaf in ("GroupAction",):
            _evaluate(entity.actions, context, nodes, includes)
        else:
            raise AssertionError(f"{leaf}: not evaluated by this test")


def evaluate_launch(path, monkeypatch, **arguments):
    """(nodes, includes, declared arguments) a launch file starts with these arguments."""
    for name, module in _stand_ins().items():
        monkeypatch.setitem(sys.modules, name, module)
    description = runpy.run_path(str(path))["generate_launch_description"]()
    assert type(description).__name__ == "LaunchDescription"
    context = SimpleNamespace(launch_configurations={}, given=dict(arguments), declared=[])
    nodes, includes = [], []
    _evaluate(description.entities, context, nodes, includes)
    assert not context.given, f"{path.name} has no arguments {sorted(context.given)}"
    return nodes, includes, context.declared


def launch_nodes(path, monkeypatch, **arguments):
    """The Node(...) stand-ins a launch file starts with these arguments."""
    nodes = evaluate_launch(path, monkeypatch, **arguments)[0]
    for n in nodes:
        n.parameters = n.bound.get("parameters") or []
        n.remappings = n.bound.get("remappings") or []
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


def node_parameters(executable: str) -> set[str]:
    """The parameters a node of this package declares (its table; rclpy adds use_sim_time)."""
    import importlib

    module = importlib.import_module(f"underactuated_control.nodes.{executable}")
    return set(module.PARAMETERS) | {"use_sim_time"}


def yaml_sections(path) -> dict[str, dict]:
    data = yaml.safe_load(Path(path).read_text()) or {}
    return {k.lstrip("/"): v["ros__parameters"] for k, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("ros__parameters"), dict)}


VARIANTS = {  # the arguments each launch file is evaluated with
    "bringup.launch.py": [{}, {"resolver": "true"}],
    "controller.launch.py": [{}, {"sim": "true"}, {"resolver": "true"},
                             {"sim": "true", "resolver": "true"}],
    "sim.launch.py": [{}, {"resolver": "false"}],
    "resolver.launch.py": [{}],
    "gazebo.launch.py": [{}, {"resolver": "true", "headless": "true"}],
}


@pytest.mark.parametrize("name", sorted(LAUNCH_FILES))
def test_launch_file_uses_real_apis_executables_parameters_and_files(monkeypatch, name):
    """Only names of the real launch/launch_ros APIs, called with arguments their signatures
    accept; documented arguments; executables that exist; parameters the node declares;
    parameter files that exist, whose sections name parameters the node declares."""
    assert {f.name for f in (ROOT / "launch").glob("*.launch.py")} == LAUNCH_FILES
    scripts = console_scripts()
    path = ROOT / "launch" / name
    for arguments in VARIANTS[name]:
        nodes, includes, declared = evaluate_launch(path, monkeypatch, **arguments)
        assert nodes and declared, name
        for node in nodes:
            package = _perform(node.bound.get("package", ""), None)
            executable = _perform(node.executable, None)
            if package != "underactuated_control":
                assert (package, executable) in KNOWN, (name, package, executable)
                continue
            assert executable in scripts, (name, executable)
            declares = node_parameters(executable)
            for p in node.bound.get("parameters") or []:
                if isinstance(p, dict):
                    assert set(p) <= declares, (name, executable, set(p) - declares)
                else:
                    assert Path(p).is_file(), (name, p)
                    section = yaml_sections(p).get(executable, {})
                    assert section and set(section) <= declares, (name, p, executable)
        for source, _ in includes:  # another package's launch file
            assert source.endswith("/launch/gz_sim.launch.py"), source
    # every share/ file the launch file names exists in the package
    for sub, leaf in re.findall(r'\[share, "(\w+)", "([\w.]+)"\]', path.read_text()):
        assert (ROOT / sub / leaf).is_file(), (name, sub, leaf)
    assert "launch_ros" in (ROOT / "package.xml").read_text()


def test_the_stand_ins_refuse_what_the_real_apis_refuse(monkeypatch):
    """The check above can fail: a wrong keyword, a missing required argument or an unknown
    name raise as the real launch/launch_ros would."""
    mods = _stand_ins()
    Node = mods["launch_ros.actions"].Node
    Node(package="p", executable="e", output="screen", respawn=True, condition=None)
    with pytest.raises(TypeError):
        Node(package="p", executable="e", parameter=[{}])  # a typo of parameters
    with pytest.raises(TypeError):
        Node(package="p")  # executable is required
    with pytest.raises(TypeError):
        mods["launch.actions"].DeclareLaunchArgument("x", default="1")  # not default_value
    with pytest.raises(TypeError):
        mods["launch.actions"].OpaqueFunction(_evaluate)  # keyword-only
    monkeypatch.setitem(sys.modules, "launch", mods["launch"])
    monkeypatch.setitem(sys.modules, "launch.actions", mods["launch.actions"])
    with pytest.raises(ImportError):
        exec("from launch.actions import DeclareLaunchArguments")  # noqa: S102


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


def test_sim_launch_starts_what_bringup_starts(monkeypatch):
    """sim.launch.py = ``bringup --node mujoco_sim --node elbow_redundancy_resolver`` (the
    demo's three nodes); resolver:=false = ``bringup --node mujoco_sim``."""
    launched = [command_line(n) for n in launch_nodes(ROOT / "launch/sim.launch.py",
                                                      monkeypatch)]
    assert launched == bringup_print("--node", "mujoco_sim", "--node",
                                     "elbow_redundancy_resolver")
    assert [n[0].rsplit("/", 1)[1] for n in launched] == [
        "hybrid_dynamics_controller", "mujoco_sim", "elbow_redundancy_resolver"]
    launched = [command_line(n) for n in launch_nodes(ROOT / "launch/sim.launch.py",
                                                      monkeypatch, resolver="false")]
    assert launched == bringup_print("--node", "mujoco_sim")


def test_resolver_launch_starts_the_resolver_bringup_starts(monkeypatch):
    """resolver.launch.py: bringup's resolver command line, with its S, E, W links."""
    (launched,) = [command_line(n) for n in launch_nodes(ROOT / "launch/resolver.launch.py",
                                                         monkeypatch)]
    expected = bringup_print("--node", "elbow_redundancy_resolver")[-1]
    assert launched == expected
    links = yaml_sections(launched[launched.index("--params-file") + 1])[
        "elbow_redundancy_resolver"]
    assert all(links.get(k) for k in ("shoulder_link", "elbow_link", "wrist_link"))


def test_gazebo_launch_runs_our_nodes_as_bringup_does_on_gazebo_time(monkeypatch):
    """gazebo.launch.py: Gazebo, the robot spawned from robot_description, /clock bridged, the
    controllers spawned after the robot exists; our nodes are bringup's, with the Gazebo URDF
    as robot_description and use_sim_time (the resolver's setpoints stamped three samples
    ahead on that clock)."""
    nodes, includes, _ = evaluate_launch(ROOT / "launch/gazebo.launch.py", monkeypatch,
                                         resolver="true")
    for n in nodes:
        n.parameters = n.bound.get("parameters") or []
        n.remappings = n.bound.get("remappings") or []
    (source, args), = includes
    assert source.endswith("ros_gz_sim/launch/gz_sim.launch.py")
    assert args["gz_args"].startswith("-r") and args["gz_args"].endswith("empty.sdf")
    by = {(n.package, n.executable): n for n in nodes}
    assert by[("ros_gz_sim", "create")].bound["arguments"][:2] == ["-topic",
                                                                       "robot_description"]
    assert "/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock" in by[
        ("ros_gz_bridge", "parameter_bridge")].bound["arguments"]
    spawned = [n.bound["arguments"][0] for n in nodes if n.executable == "spawner"]
    assert spawned == ["joint_state_broadcaster", "effort_controller"]
    description = by[("robot_state_publisher", "robot_state_publisher")].parameters[0][
        "robot_description"]
    root = ET.fromstring(description)
    assert root.find("ros2_control/hardware/plugin").text == "gz_ros2_control/GazeboSimSystem"
    plugin = root.find("gazebo/plugin")
    assert plugin.get("filename") == "gz_ros2_control-system"
    assert plugin.get("name") == "gz_ros2_control::GazeboSimROS2ControlPlugin"
    assert Path(plugin.find("parameters").text).is_file()
    assert "$(find" not in description
    ours = [n for n in nodes if n.package == "underactuated_control"]
    for n in ours:
        params = n.parameters[-1]
        assert params.pop("robot_description") == description
        assert params.pop("use_sim_time") is True
        if n.executable == "elbow_redundancy_resolver":
            assert params.pop("setpoint_lead") == 0.03
        params["urdf_path"] = str(ROOT / "urdf/arm7.urdf")
    expected = bringup_print("--node", "elbow_redundancy_resolver")
    assert [sorted(command_line(n)) for n in ours] == [sorted(c) for c in expected]


def test_gazebo_urdf_is_the_bundled_arm7():
    """urdf/arm7_gazebo.urdf: the same robot as arm7.urdf (joints, limits, mass matrix),
    fixed to the world, effort command interfaces on the same joints, start pose of
    config/arm7_sim.yaml."""
    from underactuated_control import RobotModel
    from underactuated_control.dynamics import mass_matrix

    arm, gz = (RobotModel.from_urdf(ROOT / f"urdf/{n}.urdf") for n in ("arm7", "arm7_gazebo"))
    assert arm.joint_names == gz.joint_names and arm.passive_joints == gz.passive_joints
    np.testing.assert_array_equal(arm.effort_limit, gz.effort_limit)
    q = np.random.default_rng(3).uniform(arm.position_lower, arm.position_upper)
    np.testing.assert_allclose(mass_matrix(gz, q), mass_matrix(arm, q), rtol=0, atol=1e-12)

    def interfaces(name):
        root = ET.fromstring((ROOT / f"urdf/{name}.urdf").read_text())
        return {j.get("name"): [c.get("name") for c in j.findall("command_interface")]
                for j in root.find("ros2_control").findall("joint")}, root

    (a, _), (g, root) = interfaces("arm7"), interfaces("arm7_gazebo")
    assert a == g
    start = {j.get("name"): float(j.find("state_interface[@name='position']/param").text)
             for j in root.find("ros2_control").findall("joint")}
    sim = yaml_sections(ROOT / "config/arm7_sim.yaml")["mujoco_sim"]
    assert list(start.values()) == sim["initial_positions"]


@pytest.mark.parametrize("path", sorted((ROOT / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_names_parameters_its_node_declares(path):
    """Every YAML under config/: a section per node, with parameters that node declares
    (from the nodes' tables), or a ros2_control controller_manager configuration."""
    sections = yaml_sections(path)
    assert sections, f"{path.name}: no ros__parameters section"
    ours = {"hybrid_dynamics_controller", "mujoco_sim", "elbow_redundancy_resolver"}
    for node, params in sections.items():
        if node in ours:
            unknown = set(params) - node_parameters(node)
            assert not unknown, f"{path.name}: {node} declares no {sorted(unknown)}"
        else:
            assert "controller_manager" in sections, (path.name, node)


def test_ros2_control_config_matches_the_urdf():
    cfg = yaml.safe_load((ROOT / "config/arm7_ros2_control.yaml").read_text())
    joints = cfg["effort_controller"]["ros__parameters"]["joints"]
    cm = cfg["controller_manager"]["ros__parameters"]
    assert cm["effort_controller"]["type"] == "effort_controllers/JointGroupEffortController"

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


def test_colcon_builds_and_installs_the_package(tmp_path):
    """As a new user in a ROS 2 workspace: the package in src/, ``colcon build``; executables
    land in install/<pkg>/lib/<pkg>/, launch/config/urdf in install/<pkg>/share/<pkg>/, and the
    ament index knows the package. Needs colcon (Debian: colcon python3-colcon-ros
    python3-colcon-python-setup-py; a ROS 2 install has it)."""
    import shutil

    colcon = shutil.which("colcon")
    assert colcon, ("colcon not found: apt-get install colcon python3-colcon-ros "
                    "python3-colcon-python-setup-py (or use a ROS 2 install)")
    src = tmp_path / "ws/src/underactuated_control"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "install", "log", "demo_output", "__pycache__", "*.egg-info",
        "test", "bench", ".ruff_cache", ".pytest_cache"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # the system's Python, as colcon's
    out = subprocess.run([colcon, "build"], cwd=tmp_path / "ws", env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    install = tmp_path / "ws/install/underactuated_control"
    lib = {p.name for p in (install / "lib/underactuated_control").iterdir()}
    assert console_scripts() <= lib, console_scripts() - lib
    share = install / "share/underactuated_control"
    for sub, pattern in (("launch", "*.launch.py"), ("config", "*.yaml"), ("urdf", "*.urdf")):
        expected = {p.name for p in (ROOT / sub).glob(pattern)}
        assert expected and expected <= {p.name for p in (share / sub).iterdir()}, sub
    assert (share / "package.xml").is_file()
    assert (install / "share/ament_index/resource_index/packages/underactuated_control"
            ).is_file()
