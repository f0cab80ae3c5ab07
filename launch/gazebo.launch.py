"""arm7 in Gazebo (gz sim) through gz_ros2_control, driven by hybrid_dynamics_controller.

    ros2 launch underactuated_control gazebo.launch.py [world:=empty.sdf] [headless:=false] \
        [resolver:=true] [config:=...] [resolver_config:=...] [urdf:=...] [controllers:=...]

Starts Gazebo (ros_gz_sim's gz_sim.launch.py), robot_state_publisher with the Gazebo variant of
the URDF (urdf/arm7_gazebo.urdf: the GazeboSimSystem hardware plugin in its <ros2_control> and
the gz_ros2_control system plugin in its <gazebo>), spawns it (ros_gz_sim create), bridges
/clock (ros_gz_bridge), then spawns joint_state_broadcaster and effort_controller
(controller_manager spawner) once the robot exists, and starts our nodes as
``underactuated-control bringup [--node elbow_redundancy_resolver]`` does (``bringup_nodes``),
with the URDF text as robot_description and ``use_sim_time: true`` (the joint states carry
Gazebo's time; the resolver's setpoints are stamped three samples ahead on it, ``setpoint_lead``).
Needs ROS 2 with ros_gz_sim, ros_gz_bridge, gz_ros2_control, controller_manager,
effort_controllers, joint_state_broadcaster, robot_state_publisher.

"$(find underactuated_control)" in the URDF is replaced with this package's share directory,
and its <parameters> file with ``controllers``.
"""

from launch.actions import (
    DeclareLaunchArgument,
    IncludeLaunchDescription,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from underactuated_control.bringup import bringup_nodes

PARAMETERS_FILE = "$(find underactuated_control)/config/arm7_ros2_control.yaml"


def _text(context, name):
    return LaunchConfiguration(name).perform(context).strip()


def _flag(context, name):
    return _text(context, name).lower() in ("true", "1", "yes", "on")


def _description(context):
    """The robot's URDF with this package's paths filled in."""
    share = FindPackageShare("underactuated_control").perform(context)
    with open(_text(context, "urdf"), encoding="utf-8-sig") as fh:
        text = fh.read()
    text = text.replace(PARAMETERS_FILE, _text(context, "controllers"))
    return text.replace("$(find underactuated_control)", share)


def _nodes(context):
    description = _description(context)
    gz_args = ("-r -v 3 " + ("-s " if _flag(context, "headless") else "")
               + _text(context, "world"))
    spawn = Node(package="ros_gz_sim", executable="create", output="screen",
                 arguments=["-topic", "robot_description", "-name", _text(context, "name"),
                            "-allow_renaming", "true"])
    broadcaster = Node(package="controller_manager", executable="spawner",
                       arguments=["joint_state_broadcaster"])
    effort = Node(package="controller_manager", executable="spawner",
                  arguments=["effort_controller"])
    specs = bringup_nodes(
        _text(context, "urdf"), _text(context, "config"), resolver=_flag(context, "resolver"),
        resolver_config=_text(context, "resolver_config"), robot_description=description,
        sim_clock=True)
    return [
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution(
                [FindPackageShare("ros_gz_sim"), "launch", "gz_sim.launch.py"])),
            launch_arguments=[("gz_args", gz_args)]),
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             output="screen",
             parameters=[{"robot_description": description, "use_sim_time": True}]),
        Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen",
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"]),
        spawn,
        RegisterEventHandler(OnProcessExit(target_action=spawn, on_exit=[broadcaster])),
        RegisterEventHandler(OnProcessExit(target_action=broadcaster, on_exit=[effort])),
    ] + [Node(package="underactuated_control", executable=spec.executable,
              name=spec.executable, output="screen",
              parameters=[*spec.params_files, {**spec.parameters, "use_sim_time": True}],
              remappings=spec.remappings) for spec in specs]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7_gazebo.urdf"]),
            description="URDF with a gz_ros2_control <ros2_control> and <gazebo> plugin"),
        DeclareLaunchArgument("controllers", default_value=PathJoinSubstitution(
            [share, "config", "arm7_ros2_control.yaml"]),
            description="ros2_control controllers (YAML) loaded by gz_ros2_control"),
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution(
            [share, "config", "arm7_controller.yaml"]),
            description="hybrid_dynamics_controller parameters (YAML)"),
        DeclareLaunchArgument("resolver", default_value="false",
                              description="also start elbow_redundancy_resolver (true|false)"),
        DeclareLaunchArgument("resolver_config", default_value=PathJoinSubstitution(
            [share, "config", "arm7_resolver.yaml"]),
            description="elbow_redundancy_resolver parameters (YAML)"),
        DeclareLaunchArgument("world", default_value="empty.sdf",
                              description="Gazebo world (SDF file or a world Gazebo knows)"),
        DeclareLaunchArgument("headless", default_value="false",
                              description="run the Gazebo server without its GUI (true|false)"),
        DeclareLaunchArgument("name", default_value="arm7",
                              description="name of the spawned model in Gazebo"),
        OpaqueFunction(function=_nodes),
    ])
