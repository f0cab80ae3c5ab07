"""Full ros2_control bring-up: robot_state_publisher, controller_manager with the
joint_state_broadcaster and the effort group controller, and hybrid_dynamics_controller.

    ros2 launch underactuated_control bringup.launch.py

The URDF's <ros2_control> tag chooses the hardware (mock_components/GenericSystem in the
bundled arm7; replace with your robot's). Needs a full ROS 2 install (launch_ros,
controller_manager, effort_controllers, robot_state_publisher).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def _nodes(context):
    urdf_path = LaunchConfiguration("urdf").perform(context)
    with open(urdf_path) as fh:
        description = fh.read()
    controllers = LaunchConfiguration("controllers").perform(context)
    config = LaunchConfiguration("config").perform(context)
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": description}]),
        Node(package="controller_manager", executable="ros2_control_node",
             parameters=[controllers], output="screen",
             remappings=[("~/robot_description", "/robot_description")]),
        Node(package="controller_manager", executable="spawner",
             arguments=["joint_state_broadcaster"]),
        Node(package="controller_manager", executable="spawner",
             arguments=["effort_controller"]),
        Node(package="underactuated_control", executable="hybrid_dynamics_controller",
             name="hybrid_dynamics_controller", output="screen",
             parameters=[config, {"robot_description": description}]),
    ]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"])),
        DeclareLaunchArgument("controllers", default_value=PathJoinSubstitution(
            [share, "config", "arm7_ros2_control.yaml"])),
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution(
            [share, "config", "arm7_controller.yaml"])),
        OpaqueFunction(function=_nodes),
    ])
