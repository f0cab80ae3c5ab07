"""What rqt_reconfigure shows: each node's parameter descriptors, read through the real
``~/describe_parameters`` service of a running node, against the node's own table
(``PARAMETERS``): read-only parameters are read-only, tunable ones are not; every parameter
has a description, with its unit when it has one (every tunable number has one: "1" for
dimensionless gains and weights); every tunable numeric scalar has a range
(floating_point_range / integer_range: rqt's slider) equal to the table's. rclpy itself then
enforces them: a read-only parameter and a value outside the range are refused by the node."""

import importlib

import numpy as np
import pytest
from helpers import ROOT
from rcl_interfaces.msg import ParameterType
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient

ARM7 = str(ROOT / "urdf/arm7.urdf")
NODES = {
    "hybrid_dynamics_controller": ["--params-file", str(ROOT / "config/arm7_controller.yaml")],
    "elbow_redundancy_resolver": ["--params-file", str(ROOT / "config/arm7_resolver.yaml")],
    "mujoco_sim": ["--params-file", str(ROOT / "config/arm7_sim.yaml")],
}


def call(ros, future, what):
    assert ros.wait_for(future.done, 20), f"{what}: no answer"
    return future.result()


@pytest.mark.parametrize("executable", sorted(NODES))
def test_descriptors_of_a_running_node(ros, launch, executable):
    table = importlib.import_module(f"underactuated_control.nodes.{executable}").PARAMETERS
    node = launch(executable, args=["--ros-args", *NODES[executable], "-p",
                                    f"urdf_path:={ARM7}"])
    client = AsyncParameterClient(ros.node, executable)
    assert client.wait_for_services(60.0), node.log()
    declared = set(call(ros, client.list_parameters(), "list_parameters").result.names)
    names = [n for n in table if n in declared]
    assert set(table) <= declared, set(table) - declared
    descriptors = call(ros, client.describe_parameters(names), "describe").descriptors
    tunable = []
    for name, d in zip(names, descriptors):
        spec = table[name]
        assert d.name == name
        assert d.read_only == spec.read_only, name
        assert d.description.startswith(spec.description) and spec.description, name
        if spec.unit:
            assert f"[{spec.unit}]" in d.description, (name, d.description)
        if d.read_only:
            continue
        tunable.append(name)
        if d.type in (ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_INTEGER,
                      ParameterType.PARAMETER_DOUBLE_ARRAY,
                      ParameterType.PARAMETER_INTEGER_ARRAY):  # "1": dimensionless
            assert spec.unit and f"[{spec.unit}]" in d.description, f"{name}: no unit"
        if d.type == ParameterType.PARAMETER_DOUBLE:
            assert spec.low is not None and spec.high is not None, f"{name}: no slider range"
            (r,) = d.floating_point_range
            assert (r.from_value, r.to_value) == (spec.low, spec.high), name
            assert not d.integer_range
        elif d.type == ParameterType.PARAMETER_INTEGER:
            assert spec.low is not None and spec.high is not None, f"{name}: no slider range"
            (r,) = d.integer_range
            assert (r.from_value, r.to_value) == (spec.low, spec.high), name
    print(f"\n[rqt] {executable}: {len(names)} parameters, tunable at run time: {tunable}")

    # rclpy enforces the descriptors: a read-only parameter and an out-of-range value refused
    read_only = next(n for n in names if table[n].read_only)
    value = table[read_only].default
    kind = Parameter.Type.from_parameter_value(value if value != [""] else [""])
    results = call(ros, client.set_parameters([Parameter(read_only, kind, value)]),
                   "set read-only").results
    assert not results[0].successful, read_only
    ranged = [n for n in tunable if isinstance(table[n].default, float)
              and table[n].high is not None and np.isfinite(table[n].high)]
    if ranged:
        name = ranged[0]
        beyond = float(table[name].high) + abs(float(table[name].high)) + 1.0
        results = call(ros, client.set_parameters([Parameter(
            name, Parameter.Type.DOUBLE, beyond)]), "set out of range").results
        assert not results[0].successful, name
