"""Fixtures for node tests over real DDS (see harness.py)."""

import os

import pytest
from harness import ROOT, NodeProcess, Ros, new_domain


@pytest.fixture
def domain():
    return new_domain()


@pytest.fixture
def ros(domain):
    r = Ros(domain)
    yield r
    r.close()


@pytest.fixture
def launch(domain, tmp_path):
    os.environ["PYTEST_TMP"] = str(tmp_path)
    procs = []

    def start(executable, params=None, args=None):
        p = NodeProcess(executable, domain, params, args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile (or load) every control law's kernels once, in this process, before any node
    process starts: the nodes then load numba's on-disk cache (~1 s) instead of each compiling
    for 10-30 s on a fresh clone, which the tests' discovery timeouts would not absorb."""
    import numpy as np

    from underactuated_control import RobotModel
    from underactuated_control.control.registry import CONTROL_LAWS, law_parameters
    from underactuated_control.dynamics import forward_dynamics
    from underactuated_control.parameters import coerce

    settings = {s.name: coerce(s, s.default) for s in law_parameters()}
    arm = RobotModel.from_urdf(ROOT / "urdf/arm7.urdf")
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    for model in (arm, arm.with_passive(["joint2"])):
        forward_dynamics(model, q, np.zeros(7), np.zeros(7))
        for mode, law_class in CONTROL_LAWS.items():
            if mode in ("swing_up",):
                continue  # two-link robots only
            settings["os_task"] = "position"
            law = law_class(model, settings, "tool")
            law.compute(q, np.zeros(7), law.hold_reference(q), 0.0, True)
    # the resolver's compiled configuration-control step (redundancy_kernels.py)
    from underactuated_control.jacobians import frame_placement
    from underactuated_control.redundancy.arm_angle import ArmAngle
    from underactuated_control.redundancy.configuration_control import ConfigurationControl
    from underactuated_control.redundancy.functions import ArmAngleFunction

    chain = RobotModel.from_urdf(ROOT / "urdf/arm7.urdf", tip_link="tool")
    control = ConfigurationControl(chain, "tool", [ArmAngleFunction(ArmAngle(
        chain, "link2", "link4", "link6"))])
    control.step(q, frame_placement(chain, q, "tool"))
