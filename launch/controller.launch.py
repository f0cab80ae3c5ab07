"""Start hybrid_dynamics_controller for a robot (default: the bundled arm7).

    ros2 launch underactuated_control controller.launch.py urdf:=/path/robot.urdf \
        config:=/path/params.yaml

Without launch_ros (plain virtual environment): ``underactuated-control bringup``.
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    urdf = LaunchConfiguration("urdf")
    config = LaunchConfiguration("config")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"]), description="URDF file of the robot"),
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution(
            [share, "config", "arm7_controller.yaml"]),
            description="hybrid_dynamics_controller parameters (YAML)"),
        Node(package="underactuated_control", executable="hybrid_dynamics_controller",
             name="hybrid_dynamics_controller", output="screen",
             parameters=[config, {"urdf_path": urdf}]),
    ])
