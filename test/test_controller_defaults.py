"""Issue 24: "defaults leave behaviour unchanged when no payload, sensor or threshold is set".

The controller's parameters at their defaults (``hybrid_dynamics_controller.PARAMETERS``:
``payload_frame`` empty, ``observer_gain`` 50 /s — the observer runs — ``collision_threshold``
[0.0], the F/T sensor's ``wrench_*`` at theirs) wired as the node builds its plan
(``_build``: ``with_payload_parameters``, the law and the command stages on one
``JacobianWorkspace``, the momentum observer sharing that workspace and running after the
command, no collision detector at threshold 0), against the same law built as before those
features (the bare model, no observer): over a run of states the effort commands are equal bit
for bit in every joint-space and task-space mode; and the F/T sensor's defaults pass a wrench
in root axes on as given, also bit for bit, however often it comes."""

import numpy as np
import pytest
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.control.command import CommandShaper
from underactuated_control.control.joint_space import EffortMapper
from underactuated_control.control.registry import CONTROL_LAWS
from underactuated_control.control.wrench_sensor import WrenchSensor
from underactuated_control.jacobians import JacobianWorkspace
from underactuated_control.nodes.hybrid_dynamics_controller import (
    PARAMETERS,
    with_payload_parameters,
)
from underactuated_control.observers import MomentumObserver
from underactuated_control.parameters import coerce

Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
FRAME = "tool"


def node_defaults(**overrides) -> dict:
    values = {name: coerce(spec, spec.default) for name, spec in PARAMETERS.items()}
    values.update(overrides)
    return values


def pipeline(model: RobotModel, p: dict, observe: bool):
    """(law, shaper, mapper, observer) as the node's ``_build`` wires them."""
    ws = JacobianWorkspace(model)
    law = CONTROL_LAWS[p["mode"]](model, p, FRAME, ws)
    observer = MomentumObserver(model, p["observer_gain"], frame=FRAME, shared=ws.shared,
                                jacobians=ws) if observe else None
    return law, CommandShaper(model, p, ws), EffortMapper(model, None,
                                                           p["effort_limit_scale"]), observer


@pytest.mark.parametrize("mode", ["hold", "joint", "task", "operational_space"])
def test_default_payload_observer_and_collision_parameters_leave_the_command_unchanged(mode):
    model = RobotModel.from_urdf(ARM7_PATH.read_text())
    p = node_defaults(mode=mode)
    # the defaults: no payload, the observer on, collision detection off
    assert p["payload_frame"] == "" and p["observer_gain"] == 50.0
    assert not any(p["collision_threshold"])
    assert with_payload_parameters(model, p) is model  # the very model, not a copy
    law, shaper, mapper, observer = pipeline(with_payload_parameters(model, p), p, True)
    law0, shaper0, mapper0, _ = pipeline(model, node_defaults(mode=mode, observer_gain=0.0),
                                         False)
    rng = np.random.default_rng(24)
    reference, reference0 = law.hold_reference(Q0), law0.hold_reference(Q0)
    applied, dt = np.zeros(model.n_active), 1e-3
    for k in range(200):  # a wandering state (not a physical motion: every branch is hit alike)
        q = Q0 + 0.3 * np.sin(0.02 * k + np.arange(7)) + rng.normal(0.0, 1e-3, 7)
        v = 0.5 * np.cos(0.02 * k + np.arange(7)) + rng.normal(0.0, 1e-2, 7)
        out = law.compute(q, v, reference, k * dt, False)
        command = mapper.map(shaper.apply(q, v, out).tau_active).copy()
        observer.update(q, v, applied, dt)  # after the command, on the law's workspace
        observer.wrench(q, axes="frame")
        applied = command
        out0 = law0.compute(q, v, reference0, k * dt, False)
        command0 = mapper0.map(shaper0.apply(q, v, out0).tau_active).copy()
        assert np.array_equal(command, command0), (mode, k, command - command0)
    assert np.abs(command).max() > 1.0  # the commands compared are not trivially zero


def test_default_wrench_sensor_parameters_pass_a_root_axes_wrench_as_given():
    model = RobotModel.from_urdf(ARM7_PATH.read_text())
    p = node_defaults()
    assert p["wrench_filter_cutoff"] == 0.0 and not p["wrench_zero_on_start"]
    # as the node builds it (_wrench_sensor): the payload's weight only with a payload_frame
    sensor = WrenchSensor(model, FRAME, p["wrench_filter_cutoff"], None)
    rng = np.random.default_rng(7)
    for k in range(20):
        w = rng.normal(0.0, 10.0, 6)
        q = Q0 + rng.normal(0.0, 0.3, 7)
        for frame in ("", model.root_link):
            np.testing.assert_array_equal(sensor.process(w, frame, q, 0.01 * k), w)
