"""ament_python package; also installs with pip into a plain virtual environment."""

from glob import glob

from setuptools import find_packages, setup

package_name = "underactuated_control"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/urdf", glob("urdf/*.urdf")),
    ],
    package_data={package_name: ["robots/*.urdf"]},
    include_package_data=True,
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.24",
        "numba>=0.59",
        "urdf_parser_py>=0.0.4",
    ],
    extras_require={
        # ROS 2 Python wheels from the package index (a full ROS 2 install provides them too)
        "ros": [
            "ros-rclpy",
            "ros-rmw-fastrtps-cpp",
            "ros-sensor-msgs",
            "ros-std-msgs",
            "ros-trajectory-msgs",
            "ros-geometry-msgs",
            "ros-visualization-msgs",
            "ros-diagnostic-msgs",
            "ros-rosgraph-msgs",
            "ros-nav-msgs",
            # the follow_joint_trajectory action server (control_msgs is built by scripts/setup.sh)
            "ros-action-msgs",
            "ros-unique-identifier-msgs",
            "ros-builtin-interfaces",
            "pyyaml",
            "rosbags",
        ],
        # the simulated robot (mujoco_sim node)
        "sim": ["mujoco"],
        # the demos' figures
        "plots": ["matplotlib"],
        # independent oracles and test tools (~430 MB): never imported by the controller;
        # scripts/setup.sh installs them only in its `test` mode, the demo does not need them
        "test": [
            "pytest",
            "pin",
            "example-robot-data",
            "mujoco",
            "matplotlib",
            "ruff",
            "pyyaml",
            # test/test_docs.py builds doc/ (Sphinx, Markdown pages)
            "sphinx",
            "myst-parser",
        ],
    },
    zip_safe=True,
    maintainer="underactuated_control maintainers",
    maintainer_email="maintainers@underactuated-control.invalid",
    description="Hybrid dynamics and control of under-actuated robot arms (ROS 2)",
    license="BSD-3-Clause",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "underactuated-control = underactuated_control.cli:main",
            "hybrid_dynamics_controller = "
            "underactuated_control.nodes.entry:hybrid_dynamics_controller",
            "elbow_redundancy_resolver = "
            "underactuated_control.nodes.entry:elbow_redundancy_resolver",
            "mujoco_sim = underactuated_control.nodes.entry:mujoco_sim",
        ],
    },
)
