"""The simulated setup of the demo: mujoco_sim (MuJoCo physics of the URDF, motors on the
active joints), hybrid_dynamics_controller and elbow_redundancy_resolver, whose
~/joint_setpoints feed the controller's ~/joint_reference (mode: joint).

    ros2 launch underactuated_control sim.launch.py [urdf:=...] [config:=...] \
        [sim_config:=...] [resolver_config:=...] [resolver:=false]

The same nodes, parameter files, parameters and remappings as ``underactuated-control bringup
--node mujoco_sim --node elbow_redundancy_resolver`` (no launch_ros needed); both take them
from ``underactuated_control.bringup.bringup_nodes``. An empty ``*config`` argument means the
bundled config/arm7_*.yaml for the bundled arm7 and the node's defaults for another robot.
Send goals to /elbow_redundancy_resolver/target_pose and ~/target_arm_angle.
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
        _text(context, "urdf"), _text(context, "config") or None, sim=True,
        resolver=_flag(context, "resolver"), sim_config=_text(context, "sim_config") or None,
        resolver_config=_text(context, "resolver_config") or None)
    return [Node(package="underactuated_control", executable=spec.executable,
                 name=spec.executable, output="screen",
                 parameters=[*spec.params_files, spec.parameters],
                 remappings=spec.remappings) for spec in specs]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"]), description="URDF file of the robot (simulated "
                                                       "and controlled)"),
        DeclareLaunchArgument("config", default_value="",
                              description="hybrid_dynamics_controller parameters (YAML; empty: "
                                          "config/arm7_controller.yaml for arm7)"),
        DeclareLaunchArgument("sim_config", default_value="",
                              description="mujoco_sim parameters (YAML; empty: "
                                          "config/arm7_sim.yaml for arm7)"),
        DeclareLaunchArgument("resolver", default_value="true",
                              description="also start elbow_redundancy_resolver (true|false)"),
        DeclareLaunchArgument("resolver_config", default_value="",
                              description="elbow_redundancy_resolver parameters (YAML; empty: "
                                          "config/arm7_resolver.yaml for arm7)"),
        OpaqueFunction(function=_nodes),
    ])
