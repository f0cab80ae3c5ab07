"""elbow_redundancy_resolver alone (Seraji configuration control: hand pose + arm angle ->
joint setpoints on ~/joint_setpoints), for a controller started elsewhere.

    ros2 launch underactuated_control resolver.launch.py [urdf:=...] [resolver_config:=...] \
        [config:=...]

The node, parameter file and parameters that ``underactuated-control bringup --node
elbow_redundancy_resolver`` starts next to the controller (``bringup_nodes``): the resolver
plans the controller config's ``passive_joints`` as locked (``config``). Feed its setpoints to
hybrid_dynamics_controller in mode joint by remapping the controller's ~/joint_reference to
/elbow_redundancy_resolver/joint_setpoints (controller.launch.py resolver:=true does).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from underactuated_control.bringup import RESOLVER, bringup_nodes


def _text(context, name):
    return LaunchConfiguration(name).perform(context).strip()


def _nodes(context):
    specs = bringup_nodes(
        _text(context, "urdf"), _text(context, "config") or None, resolver=True,
        resolver_config=_text(context, "resolver_config") or None)
    return [Node(package="underactuated_control", executable=spec.executable,
                 name=spec.executable, output="screen",
                 parameters=[*spec.params_files, spec.parameters],
                 remappings=spec.remappings) for spec in specs if spec.executable == RESOLVER]


def generate_launch_description():
    share = FindPackageShare("underactuated_control")
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution(
            [share, "urdf", "arm7.urdf"]), description="URDF file of the robot"),
        DeclareLaunchArgument("resolver_config", default_value="",
                              description="elbow_redundancy_resolver parameters (YAML with "
                                          "shoulder_link, elbow_link, wrist_link; empty: "
                                          "config/arm7_resolver.yaml for arm7)"),
        DeclareLaunchArgument("config", default_value="",
                              description="the controller's parameters (YAML), read for its "
                                          "passive_joints only (empty: "
                                          "config/arm7_controller.yaml for arm7)"),
        OpaqueFunction(function=_nodes),
    ])
