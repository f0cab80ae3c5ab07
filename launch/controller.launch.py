"""Start hybrid_dynamics_controller for a robot (default: the bundled arm7), optionally with the
simulated arm (mujoco_sim) and the elbow redundancy resolver.

    ros2 launch underactuated_control controller.launch.py urdf:=/path/robot.urdf \
        config:=/path/params.yaml sim:=true resolver:=true

The same nodes, parameter files and remappings as ``underactuated-control bringup [--node
mujoco_sim] [--node elbow_redundancy_resolver]`` (no launch_ros needed): both take them from
``underactuated_control.bringup.bringup_nodes``. An empty ``config``/``sim_config``/
``resolver_config`` means the bundled config/arm7_*.yaml for arm7, none for another robot.
With the resolver, its ~/joint_setpoints feed the controller's ~/joint_reference (mode: joint).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from underactuated_control.bringup import bringup_nodes


def _text(context, name):
    return LaunchConfiguration(name).perform(context).strip()


def _flag(context, name):
    return _text(context, name).lower() in ("true", "1", "yes", "on")


def _nodes(context):
    specs = bringup_nodes(
        _text(context, "urdf"), _text(context, "config") or None,
        sim=_flag(context, "sim"), resolver=_flag(context, "resolver"),
        sim_config=_text(context, "sim_config") or None,
        resolver_config=_text(context, "resolver_config") or None)
    return [Node(package="underactuated_control", executable=spec.executable,
                 name=spec.executable, output="screen",
                 parameters=[*spec.params_files, spec.parameters],
                 remappings=spec.remappings) for spec in specs]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"]), description="URDF file of the robot"),
        DeclareLaunchArgument("config", default_value="",
                              description="hybrid_dynamics_controller parameters (YAML)"),
        DeclareLaunchArgument("sim", default_value="false",
                              description="also start mujoco_sim (the simulated arm)"),
        DeclareLaunchArgument("sim_config", default_value="",
                              description="mujoco_sim parameters (YAML)"),
        DeclareLaunchArgument("resolver", default_value="false",
                              description="also start elbow_redundancy_resolver"),
        DeclareLaunchArgument("resolver_config", default_value="",
                              description="elbow_redundancy_resolver parameters (YAML)"),
        OpaqueFunction(function=_nodes),
    ])
