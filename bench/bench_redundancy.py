"""One configuration-control step for a 7-DOF arm with two extra kinematic functions (arm angle,
joint-limit avoidance), against a KDL-style weighted damped least squares (ChainIkSolverVel_wdls:
forward kinematics with 4x4 matrices, geometric Jacobian by cross products, SVD of the weighted
Jacobian) written in plain numpy as the reference.

    .venv/bin/python bench/bench_redundancy.py

Prints median / p99 µs per step and writes redundancy.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from urdf_parser_py.urdf import URDF  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.jacobians import frame_placement  # noqa: E402
from underactuated_control.redundancy.arm_angle import ArmAngle  # noqa: E402
from underactuated_control.redundancy.configuration_control import (  # noqa: E402
    ConfigurationControl,
)
from underactuated_control.redundancy.functions import (  # noqa: E402
    ArmAngleFunction,
    JointLimitAvoidance,
)
from underactuated_control.so3 import rpy_to_matrix, skew  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class KdlStyleWdls:
    """Plain numpy reference: FK and Jacobian of a chain of revolute joints from the URDF,
    then dq = Wq V S (S² + λ²)⁻¹ Uᵀ Wx dx from the SVD of Wx J Wq (KDL's wdls)."""

    def __init__(self, urdf_text: str, tip_offset: np.ndarray, lam: float = 1e-3) -> None:
        robot = URDF.from_xml_string(urdf_text)
        self.joints = [j for j in robot.joints if j.type == "revolute"]
        self.origins = []
        for j in self.joints:
            T = np.eye(4)
            T[:3, :3] = rpy_to_matrix(j.origin.rpy or [0, 0, 0])
            T[:3, 3] = j.origin.xyz or [0, 0, 0]
            self.origins.append(T)
        self.axes = [np.array(j.axis) for j in self.joints]
        self.tip = np.eye(4)
        self.tip[:3, 3] = tip_offset
        self.lam = lam

    def jacobian(self, q):
        T = np.eye(4)
        points, axes = [], []
        for Tj, ax, qi in zip(self.origins, self.axes, q):
            T = T @ Tj
            c, s = np.cos(qi), np.sin(qi)
            K = skew(ax)
            R = np.eye(4)
            # Rodrigues for a unit axis and the joint's own sin/cos, as KDL's per-joint frame
            # (so3.exp would also normalise the axis: ~3 µs per joint more in the reference)
            R[:3, :3] = np.eye(3) + s * K + (1 - c) * K @ K
            T = T @ R
            points.append(T[:3, 3].copy())
            axes.append(T[:3, :3] @ ax)
        T = T @ self.tip
        J = np.zeros((6, len(q)))
        for i, (p, a) in enumerate(zip(points, axes)):
            J[:3, i] = np.cross(a, T[:3, 3] - p)
            J[3:, i] = a
        return T, J

    def step(self, q, dx, wx, wq):
        _, J = self.jacobian(q)
        Jw = np.diag(wx) @ J @ np.diag(wq)
        U, S, Vt = np.linalg.svd(Jw, full_matrices=False)
        gain = S / (S**2 + self.lam**2)
        return q + np.diag(wq) @ Vt.T @ (gain * (U.T @ (np.diag(wx) @ dx)))


def measure(fn, n):
    for _ in range(50):
        fn()
    t = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    t = np.array(t) / 1e3
    return {"median_us": float(np.median(t)), "p99_us": float(np.percentile(t, 99))}


def main() -> int:
    text = (ROOT / "urdf/arm7.urdf").read_text()
    model = RobotModel.from_urdf(text, tip_link="tool")
    aa = ArmAngle(model, "link2", "link4", "link6")
    cc = ConfigurationControl(model, "tool", [ArmAngleFunction(aa), JointLimitAvoidance(model)],
                              task_weights=16.0)
    plain = ConfigurationControl(model, "tool", [], task_weights=16.0)
    q = np.array([0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8])
    p, R = frame_placement(model, q, "tool")
    target = (p + 1e-3, R)
    kdl = KdlStyleWdls(text, tip_offset=np.array([0.0, 0.0, 0.107 + 0.1034]))
    T, _ = kdl.jacobian(q)
    assert np.allclose(T[:3, 3], p, atol=1e-9), "reference FK disagrees"
    dx = np.r_[np.full(3, 1e-3), np.zeros(3)]
    rows = {
        "configuration_control_arm_angle_joint_limits": measure(
            lambda: cc.step(q, target, {"arm_angle": 0.1}), 5000),
        "configuration_control_hand_only": measure(lambda: plain.step(q, target), 5000),
        "kdl_style_wdls_numpy_reference": measure(
            lambda: kdl.step(q, dx, np.ones(6), np.ones(7)), 5000),
    }
    print(f"{'method':<48}{'median µs':>11}{'p99 µs':>10}")
    for k, v in rows.items():
        print(f"{k:<48}{v['median_us']:>11.1f}{v['p99_us']:>10.1f}")
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "redundancy.json").write_text(json.dumps(rows, indent=2))
    print(f"wrote {out / 'redundancy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
