"""Full ros2_control bring-up: robot_state_publisher, controller_manager with the
joint_state_broadcaster and the effort group controller, hybrid_dynamics_controller and
optionally the elbow redundancy resolver.

    ros2 launch underactuated_control bringup.launch.py [resolver:=true]

The URDF's <ros2_control> tag chooses the hardware (mock_components/GenericSystem in the
bundled arm7; replace with your robot's). Needs a full ROS 2 install (launch_ros,
controller_manager, effort_controllers, robot_state_publisher). Our nodes are those of
``underactuated-control bringup [--node elbow_redundancy_resolver]`` (the same
``underactuated_control.bringup.bringup_nodes``), with the URDF as robot_description; the hardware
takes the simulator's place.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from underactuated_control.bringup import bringup_nodes


def _text(context, name):
    return LaunchConfiguration(name).perform(context).strip()


def _nodes(context):
    urdf_path = _text(context, "urdf")
    with open(urdf_path, encoding="utf-8-sig") as fh:
        description = fh.read()
    specs = bringup_nodes(
        urdf_path, _text(context, "config") or None,
        resolver=_text(context, "resolver").lower() in ("true", "1", "yes", "on"),
        resolver_config=_text(context, "resolver_config") or None,
        robot_description=description)
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": description}]),
        Node(package="controller_manager", executable="ros2_control_node",
             parameters=[_text(context, "controllers")], output="screen",
             remappings=[("~/robot_description", "/robot_description")]),
        Node(package="controller_manager", executable="spawner",
             arguments=["joint_state_broadcaster"]),
        Node(package="controller_manager", executable="spawner",
             arguments=["effort_controller"]),
    ] + [Node(package="underactuated_control", executable=spec.executable,
              name=spec.executable, output="screen",
              parameters=[*spec.params_files, spec.parameters],
              remappings=spec.remappings) for spec in specs]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"]),
            description="URDF of the robot; its <ros2_control> tag names the hardware"),
        DeclareLaunchArgument("controllers", default_value=PathJoinSubstitution(
            [share, "config", "arm7_ros2_control.yaml"]),
            description="ros2_control controllers (YAML) for ros2_control_node"),
        DeclareLaunchArgument("config", default_value="",
                              description="hybrid_dynamics_controller parameters (YAML)"),
        DeclareLaunchArgument("resolver", default_value="false",
                              description="also start elbow_redundancy_resolver"),
        DeclareLaunchArgument("resolver_config", default_value="",
                              description="elbow_redundancy_resolver parameters (YAML)"),
        OpaqueFunction(function=_nodes),
    ])
