"""F/T sensor handling (control/wrench_sensor.py), ROS-free.

Oracles: Pinocchio's ``SE3.act`` on a ``Force`` for carrying a wrench between frames; Pinocchio's
``rnea`` on the arm with the tool hung on a joint of its own (a revolute joint held at zero,
which Pinocchio does not merge as it merges fixed joints) for the tool's weight seen by a
sensor: at rest ``data.f`` of that joint is the wrench the arm applies to the tool through it,
in its axes about its origin, what a sensor there reads in the package's convention (the
robot's push on what is beyond it). Filter: the first-order step response 1 − exp(−2π f_c t)."""

import math

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM7_PATH

from underactuated_control import RobotModel
from underactuated_control.control.wrench_sensor import WrenchSensor, carry_wrench

ARM7 = ARM7_PATH.read_text()
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
MASS, COM = 1.2, np.array([0.02, -0.03, 0.07])


def random_rotation(rng):
    return pin.exp3(rng.normal(size=3))


def test_carry_wrench_is_pinocchio_se3_act_on_a_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        R, p_from, p_to = random_rotation(rng), rng.normal(size=3), rng.normal(size=3)
        w = rng.normal(size=6)
        oracle = pin.SE3(R, p_from - p_to).act(pin.Force(w[:3], w[3:]))
        np.testing.assert_allclose(carry_wrench(w, R, p_from, p_to),
                                   np.concatenate([oracle.linear, oracle.angular]),
                                   rtol=0, atol=1e-12)


def test_hand_computed_case():
    # 10 N along the sensor's x, sensor axes turned +90° about z, 0.1 m above the task point:
    # 10 N along root y, moment (0, 0, 0.1) x (0, 10, 0) = (-1, 0, 0) N m
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    out = carry_wrench(np.array([10.0, 0, 0, 0, 0, 0]), R, np.array([0, 0, 0.1]), np.zeros(3))
    np.testing.assert_allclose(out, [0, 10, 0, -1, 0, 0], atol=1e-15)


@pytest.mark.parametrize("sensor, task", [("link7", "tool"), ("tool", "link5"),
                                          ("tool", "tool")])
def test_a_reading_in_a_sensor_frame_reaches_the_task_frame_in_root_axes(sensor, task):
    model = RobotModel.from_urdf(ARM7)
    pm = pin.buildModelFromXML(ARM7)
    pd = pm.createData()
    rng = np.random.default_rng(1)
    ft = WrenchSensor(model, task)
    for _ in range(5):
        q = Q0 + rng.normal(0, 0.5, 7)
        pin.framesForwardKinematics(pm, pd, q)
        oS, oT = pd.oMf[pm.getFrameId(sensor)], pd.oMf[pm.getFrameId(task)]
        w = rng.normal(size=6)
        # in the world about its origin, then about T's origin (root axes)
        at_origin = oS.act(pin.Force(w[:3], w[3:]))
        oracle = pin.SE3(np.eye(3), -oT.translation).act(at_origin)
        np.testing.assert_allclose(ft.process(w, sensor, q, 0.0),
                                   np.concatenate([oracle.linear, oracle.angular]),
                                   rtol=0, atol=1e-10)
    # the root link's axes: already at the task frame, as before
    np.testing.assert_array_equal(ft.process(w, "", q, 0.0), w)
    np.testing.assert_array_equal(ft.process(w, "base_link", q, 0.0), w)
    with pytest.raises(ValueError, match="nope"):
        ft.process(w, "nope", q, 0.0)


def tool_on_a_joint(urdf: str, frame: str) -> str:
    """The tool as a link on a revolute joint at ``frame`` (held at zero in the oracle)."""
    i = np.diag([0.004, 0.005, 0.006])
    link = (f'<link name="ft_tool"><inertial><origin xyz="{COM[0]} {COM[1]} {COM[2]}"/>'
            f'<mass value="{MASS}"/><inertia ixx="{i[0, 0]}" ixy="0" ixz="0" iyy="{i[1, 1]}" '
            f'iyz="0" izz="{i[2, 2]}"/></inertial></link><joint name="ft_joint" '
            f'type="revolute"><parent link="{frame}"/><child link="ft_tool"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    return urdf.replace("</robot>", link)


def sensor_reading(pm, pd, q):
    """What a sensor at the tool's joint reads, holding the tool still: data.f of that joint."""
    qq = np.concatenate([q, [0.0]])
    zero = np.zeros(pm.nv)
    pin.rnea(pm, pd, qq, zero, zero)
    f = pd.f[pm.getJointId("ft_joint")]
    return np.concatenate([f.linear, f.angular])


def test_the_tool_weight_is_removed_over_orientations():
    model = RobotModel.from_urdf(ARM7)
    pm = pin.buildModelFromXML(tool_on_a_joint(ARM7, "tool"))
    pd = pm.createData()
    ft = WrenchSensor(model, "tool", payload=("tool", MASS, COM))
    rng = np.random.default_rng(2)
    worst = 0.0
    for _ in range(20):
        q = Q0 + rng.normal(0, 1.0, 7)
        raw = sensor_reading(pm, pd, q)
        assert np.linalg.norm(raw[:3]) == pytest.approx(MASS * 9.81, rel=1e-9)
        worst = max(worst, float(np.abs(ft.process(raw, "tool", q, 0.0)).max()))
    print(f"\n[F/T] 1.2 kg tool, 20 orientations: largest residual {worst:.2e} N (N m)")
    assert worst < 1e-9
    # a payload held before the sensor (link5) is not seen by it: nothing removed
    upstream = WrenchSensor(model, "tool", payload=("link5", MASS, COM))
    np.testing.assert_array_equal(upstream.compensated(raw, "tool", q), raw)


def test_bias_zeroing_keeps_the_tool_weight_model_over_orientations():
    model = RobotModel.from_urdf(ARM7)
    pm = pin.buildModelFromXML(tool_on_a_joint(ARM7, "tool"))
    pd = pm.createData()
    ft = WrenchSensor(model, "tool", payload=("tool", MASS, COM))
    offset = np.array([3.0, -2.0, 5.0, 0.1, 0.2, -0.3])  # the sensor's own bias
    ft.request_zero()
    assert np.abs(ft.process(sensor_reading(pm, pd, Q0) + offset, "tool", Q0, 0.0)).max() < 1e-9
    np.testing.assert_allclose(ft.bias, offset, atol=1e-9)
    rng = np.random.default_rng(3)
    push = np.array([0.0, 0.0, -10.0, 0.0, 0.0, 0.0])  # 10 N down at the tool, root axes
    for _ in range(10):
        q = Q0 + rng.normal(0, 1.0, 7)
        pin.framesForwardKinematics(pm, pd, np.concatenate([q, [0.0]]))
        R = pd.oMf[pm.getFrameId("tool")].rotation
        contact = np.concatenate([R.T @ push[:3], np.zeros(3)])  # in the sensor's axes
        out = ft.process(sensor_reading(pm, pd, q) + offset + contact, "tool", q, 0.0)
        np.testing.assert_allclose(out, push, atol=1e-9)


def test_first_order_filter_step_response():
    model = RobotModel.from_urdf(ARM7)
    cutoff, dt = 5.0, 1e-3
    ft = WrenchSensor(model, "tool", cutoff=cutoff)
    ft.process(np.zeros(6), "", Q0, 0.0)
    step = np.arange(1, 6, dtype=float)
    for k in range(1, 201):
        out = ft.process(np.concatenate([[1.0], step]), "", Q0, k * dt)
    t = 200 * dt
    np.testing.assert_allclose(out, (1 - math.exp(-2 * math.pi * cutoff * t))
                               * np.concatenate([[1.0], step]), rtol=1e-12)
    off = WrenchSensor(model, "tool", cutoff=0.0)
    off.process(np.zeros(6), "", Q0, 0.0)
    np.testing.assert_array_equal(off.process(np.ones(6), "", Q0, dt), np.ones(6))
    with pytest.raises(ValueError, match="cutoff"):
        WrenchSensor(model, "tool", cutoff=-1.0)
