"""Scaffolding shared by the test files: repository paths, the scaled-tolerance assertion, random
passive sets. Importable from every test file (``pythonpath`` in setup.cfg's [tool:pytest]);
Pinocchio-free, so the DDS tests can use it too (the Pinocchio references are in oracle.py)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np

from underactuated_control.scenarios.harness import fixed_fingers, only_joints, with_joint_dynamics

ROOT = Path(__file__).resolve().parents[1]  # the repository
ARM7_PATH = ROOT / "urdf/arm7.urdf"
SPACE_ARM_PATH = ROOT / "urdf/space_arm.urdf"
EXAMPLE_ROBOTS = Path(sysconfig.get_paths()["purelib"]) / \
    "cmeel.prefix/share/example-robot-data/robots"  # installed with the test extra
PANDA_Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]  # the panda's hand held bent (arm7's start)
G1_LEFT_ARM = [f"left_{j}_joint" for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw",
                                           "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")]
G1_Q0 = np.array([-0.45, 0.36, 0.33, -0.39, -0.98, -0.32, -0.83])  # bench/failure_cases.py's


def issue_arm(path: str | Path, damping: float = 0.3, friction: float = 0.05,
              joints: list[str] | None = None) -> str:
    """An example-robot-data arm's URDF text (``path`` under its robots/, or absolute) with
    issue 23's <dynamics> on every joint (damping 0.3 N m s/rad, dry friction 0.05 N m by
    default); a gripper's prismatic finger joints fixed (the package refuses their mimic
    joint); with ``joints``, those alone movable, the rest of the robot rigid
    (``harness.only_joints``: one arm of a humanoid or a mobile manipulator)."""
    text = fixed_fingers(with_joint_dynamics((EXAMPLE_ROBOTS / path).read_text(), damping,
                                             friction))
    return text if joints is None else only_joints(text, joints)


def g1_left_arm() -> tuple[str, str, np.ndarray]:
    """The Unitree G1's left arm (example-robot-data, issue 23's <dynamics>), the rest of the
    humanoid rigid: (URDF text, hand frame, start configuration)."""
    text = issue_arm("g1_description/urdf/g1_29dof_rev_1_0.urdf", joints=G1_LEFT_ARM)
    return text, "left_rubber_hand", G1_Q0.copy()


def scaled_tolerance(reference, tol: float, floor: float = 1.0) -> float:
    """``tol * max(floor, max|reference|)``: relative to the reference's size, absolute (times
    ``floor``) when the reference is small."""
    return tol * max(floor, np.abs(reference).max(initial=0.0))


def within(actual, reference, tol: float, scale: float = 1.0) -> tuple[bool, float]:
    """(ok, err): err = max|actual − reference| ≤ scale · scaled_tolerance(reference, tol)."""
    err = float(np.abs(np.asarray(actual) - np.asarray(reference)).max(initial=0.0))
    return err <= scaled_tolerance(reference, tol, 1.0) * scale, err


def assert_close(actual, desired, tol: float, floor: float = 1.0, **kwargs) -> None:
    """``np.testing.assert_allclose`` with ``atol = scaled_tolerance(desired, tol, floor)``;
    other arguments (``rtol``, ``err_msg``) pass through, numpy's default rtol included."""
    np.testing.assert_allclose(actual, desired, atol=scaled_tolerance(desired, tol, floor),
                               **kwargs)


def random_passive_set(model, rng: np.random.Generator, fraction: float | None = None, *,
                       first: bool | None = None, last: bool | None = None) -> list[str]:
    """Names of a random passive set: one uniform draw per joint (``rng.uniform(size=nb)``),
    passive below ``fraction`` (itself drawn in [0.1, 0.9) after those draws when None);
    ``last`` then ``first`` force the last / first joint's status when given."""
    draws = rng.uniform(size=model.nb)
    mask = draws < (rng.uniform(0.1, 0.9) if fraction is None else fraction)
    if last is not None:
        mask[-1] = last
    if first is not None:
        mask[0] = first
    return [n for n, b in zip(model.joint_names, mask) if b]
