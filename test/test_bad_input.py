"""Malformed robots and states give a clear ValueError naming what is at fault, never a NaN."""

import numpy as np
import pytest

from underactuated_control import RobotModel
from underactuated_control.dynamics import (
    HybridDynamics,
    SingularPassiveInertiaError,
    forward_dynamics,
    hybrid_dynamics,
    inverse_dynamics,
)

INERTIAL = (
    '<inertial><mass value="{m}"/><inertia ixx="{i}" ixy="0" ixz="0" iyy="{j}" iyz="0" '
    'izz="{k}"/></inertial>'
)
DEFAULT_INERTIAL = INERTIAL.format(m=1, i=0.1, j=0.1, k=0.1)


def two_link(
    link2_inertial=DEFAULT_INERTIAL,
    joint2_extra="",
    joint2_type="revolute",
    extra="",
):
    return f"""<robot name="two">
  <link name="base"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <link name="l1">{INERTIAL.format(m=2, i=0.2, j=0.2, k=0.2)}</link>
  <joint name="j2" type="{joint2_type}"><parent link="l1"/><child link="l2"/><origin xyz="1 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="10" velocity="1"/>{joint2_extra}</joint>
  <link name="l2">{link2_inertial}</link>{extra}
</robot>"""


def test_valid_two_link_builds():
    m = RobotModel.from_urdf(two_link())
    assert m.joint_names == ("j1", "j2") and m.nv == 2


@pytest.mark.parametrize(
    "text, match",
    [
        ("<robot name='x'><link name='a'>", "malformed URDF: XML syntax"),
        ("<notarobot/>", "expected <robot>"),
        (two_link(link2_inertial=""), "link 'l2'.*no mass"),
        (
            two_link(link2_inertial=INERTIAL.format(m=0, i=0.1, j=0.1, k=0.1)),
            "link 'l2'.*zero mass",
        ),
        (two_link(link2_inertial=INERTIAL.format(m=-1, i=0.1, j=0.1, k=0.1)), "link 'l2'.*mass"),
        (
            two_link(link2_inertial=INERTIAL.format(m=1, i=-0.1, j=0.1, k=0.1)),
            "link 'l2'.*not positive",
        ),
        (
            two_link(link2_inertial=INERTIAL.format(m=1, i=0.01, j=0.01, k=0.5)),
            "link 'l2'.*triangle",
        ),
        (two_link(joint2_extra='<mimic joint="j1"/>'), "joint 'j2'.*mimic"),
        (two_link(joint2_type="planar"), "joint 'j2'.*planar"),
        (
            two_link(
                extra='<joint name="loop" type="revolute"><parent link="base"/><child link="l2"/>'
                '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
                "</joint>"
            ),
            "closed kinematic loop.*l2",
        ),
        (
            two_link(
                extra='<joint name="bad" type="fixed"><parent link="l2"/><child link="ghost"/>'
                "</joint>"
            ),
            "joint 'bad'.*unknown child link 'ghost'",
        ),
        (
            two_link(joint2_extra="").replace('<axis xyz="0 1 0"/>', '<axis xyz="0 0 0"/>'),
            "joint 'j2': axis",
        ),
    ],
)
def test_malformed_robots(text, match):
    with pytest.raises(ValueError, match=match):
        RobotModel.from_urdf(text)


def test_missing_file_and_unknown_names():
    with pytest.raises(ValueError, match="not found"):
        RobotModel.from_urdf("/no/such/robot.urdf")
    with pytest.raises(ValueError, match="unknown joint 'j9' in passive_joints"):
        RobotModel.from_urdf(two_link(), passive_joints=["j9"])
    with pytest.raises(ValueError, match="unknown tip_link 'nowhere'"):
        RobotModel.from_urdf(two_link(), tip_link="nowhere")
    with pytest.raises(ValueError, match="unknown root_link"):
        RobotModel.from_urdf(two_link(), root_link="nowhere")
    m = RobotModel.from_urdf(two_link())
    with pytest.raises(ValueError, match="unknown joint 'elbow'"):
        m.with_passive(["elbow"])


def test_massless_links_opt_in():
    m = RobotModel.from_urdf(two_link(link2_inertial=""), allow_massless_links=True)
    assert m.inertia[1].max() == 0.0


@pytest.mark.parametrize("field", ["q", "v", "qdd_active", "tau_passive"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_states_are_named(field, bad):
    m = RobotModel.from_urdf(two_link(), passive_joints=["j1"])
    args = {
        "q": np.zeros(2),
        "v": np.zeros(2),
        "qdd_active": np.zeros(1),
        "tau_passive": np.zeros(1),
    }
    args[field][-1] = bad
    with pytest.raises(ValueError, match=f"{field} has non-finite entries: j"):
        hybrid_dynamics(m, **args)


def test_wrong_sizes():
    m = RobotModel.from_urdf(two_link(), passive_joints=["j1"])
    with pytest.raises(ValueError, match=r"q must have shape \(2,\)"):
        hybrid_dynamics(m, np.zeros(3), np.zeros(2), np.zeros(1), np.zeros(1))
    with pytest.raises(ValueError, match=r"qdd_active must have shape \(1,\).*j2"):
        hybrid_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(1))
    with pytest.raises(ValueError, match=r"tau must have shape|tau_passive must have shape"):
        forward_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(5))
    with pytest.raises(ValueError, match="qdd_active must have shape"):
        inverse_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(1))


def test_the_configured_solve_names_bad_inputs_and_takes_any_vector_like():
    """``HybridDynamics.solve`` (a control cycle's step 3) hands kernel-ready vectors straight
    to the compiled call; anything else is converted or refused by name, never a numba error:
    the same torques from a list, a strided view and a read-only array as from a vector."""
    m = RobotModel.from_urdf(two_link(), passive_joints=["j1"])
    ws = HybridDynamics(m)
    ws.set_configuration(np.array([0.3, -0.4]))
    ws.set_velocity(np.array([0.2, 0.1]))
    tau = ws.solve(np.array([0.5]), np.array([0.1])).tau_active.copy()
    strided = np.array([[0.5, 9.0]])[:, 0]
    readonly = np.array([0.5])
    readonly.flags.writeable = False
    for qdd in ([0.5], strided, readonly):
        assert np.array_equal(ws.solve(qdd, [0.1]).tau_active, tau)
    for qdd in (np.zeros(2), np.zeros((1, 1)), [[0.5]]):
        with pytest.raises(ValueError, match=r"qdd_active must have shape \(1,\).*j2"):
            ws.solve(qdd, np.array([0.1]))
    with pytest.raises(ValueError, match="tau_passive must have shape"):
        ws.solve(np.array([0.5]), np.zeros((1, 1)))
    with pytest.raises(ValueError, match="qdd_active has non-finite entries: j2=nan"):
        ws.solve(np.array([np.nan]), np.array([0.1]))


def test_passive_joint_moving_no_inertia_is_singular_not_nan():
    """A passive joint whose outboard subtree is weightless: D_p = 0, a clear error."""
    m = RobotModel.from_urdf(
        two_link(link2_inertial=""), allow_massless_links=True, passive_joints=["j2"]
    )
    with pytest.raises(SingularPassiveInertiaError, match="passive joint 'j2'"):
        hybrid_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(1), np.zeros(1))
    assert issubclass(SingularPassiveInertiaError, ValueError)
    # the same robot fully actuated is fine: inverse dynamics needs no inverse
    tau = inverse_dynamics(m, np.zeros(2), np.zeros(2), np.ones(2))
    assert np.all(np.isfinite(tau))


def test_passive_prismatic_moving_a_point_inertia_along_axis_is_fine_but_rotation_is_not():
    """A point-like mass (zero rotational inertia) on a passive revolute joint through its own
    centre of mass has D_p = 0 about that axis: a clear error, not a NaN."""
    text = two_link(link2_inertial=INERTIAL.format(m=1, i=0.0, j=0.0, k=0.0))
    m = RobotModel.from_urdf(text, passive_joints=["j2"])
    with pytest.raises(SingularPassiveInertiaError, match="'j2'"):
        hybrid_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(1), np.zeros(1))
    mp = RobotModel.from_urdf(
        text.replace('type="revolute"><parent link="l1"', 'type="prismatic"><parent link="l1"'),
        passive_joints=["j2"],
    )
    res = hybrid_dynamics(mp, np.zeros(2), np.zeros(2), np.zeros(1), np.zeros(1))
    assert np.all(np.isfinite(res.qdd))


def test_ros2_control_tag_marks_passive_joints():
    tag = """<ros2_control name="s" type="system"><hardware><plugin>x</plugin></hardware>
      <joint name="j1"><state_interface name="position"/></joint>
      <joint name="j2"><command_interface name="effort"/><state_interface name="position"/>
      </joint></ros2_control>"""
    m = RobotModel.from_urdf(two_link(extra=tag))
    assert m.passive_joints == ("j1",) and m.active_joints == ("j2",)
    assert m.ros2_control["j2"]["command"] == ("effort",)
    # the argument adds to what the tag says
    m2 = RobotModel.from_urdf(two_link(extra=tag), passive_joints=["j2"])
    assert m2.passive_joints == ("j1", "j2")
