"""One Seraji configuration-control step against Orocos KDL's ChainIkSolverVel_wdls, the same
7-DOF chains, interleaved in one run.

KDL is the real C++ library through Debian's Python binding:

    apt-get install -y python3-pykdl          # KDL 1.5.1 (liborocos-kdl1.5)
    .venv/bin/python bench/bench_redundancy.py [--rounds 20] [--calls 500]

The binding is built for Debian's Python 3.11 (/usr/bin/python3); its ABI tag is the venv's
(cpython-311-x86_64-linux-gnu), so it is loaded into this process from its file in
/usr/lib/python3/dist-packages (without putting that directory on sys.path, which would shadow
the venv's numpy). If it cannot be loaded, the bench stops with the install command.

The KDL chain is built from the same URDF (one segment per joint, as kdl_parser does: the
joint's axis in its parent's frame through the joint origin, the joint origin as the segment's
tip frame), and checked before timing: forward kinematics and Jacobian against ours at random
configurations, and KDL's wdls step (λ = 0, unit weights: the minimum-norm solution) against
our hand-only step with W_v = 0.

Timed, each in this process, in interleaved rounds (every round runs every case ``--calls``
times; median and p99 over all calls; BLAS pinned to one thread):
  kdl_wdls                     ChainIkSolverVel_wdls.CartToJnt (Jacobian + SVD), hand only
  kdl_fk                       ChainFkSolverPos_recursive.JntToCart (a step also needs the
                               pose error: FK + wdls is KDL's cost of the same step)
  ours_hand_psi_collision      ConfigurationControl.step: hand + arm angle + one active
                               collision row (FK, Jacobians, ψ, rows, Cholesky, result object)
  ours_kernel_hand_psi_collision  the compiled call alone (buffers preset)
  ours_hand_only               ConfigurationControl.step, no functions
  ours_psi_joint_limits        hand + arm angle + joint-limit avoidance (the old bench row)
  python_reference_hand_psi_collision  the same step in Python (compiled=False): the "before"

Prints a table (µs, ratio to kdl_wdls) and writes bench/results/redundancy.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from urdf_parser_py.urdf import URDF  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control import redundancy_kernels as kernels  # noqa: E402
from underactuated_control.jacobians import frame_jacobian, frame_placement  # noqa: E402
from underactuated_control.redundancy.arm_angle import ArmAngle  # noqa: E402
from underactuated_control.redundancy.configuration_control import (  # noqa: E402
    ConfigurationControl,
)
from underactuated_control.redundancy.functions import (  # noqa: E402
    ArmAngleFunction,
    CollisionAvoidance,
    JointLimitAvoidance,
    Sphere,
)
from underactuated_control.so3 import rpy_to_matrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "apt-get install -y python3-pykdl"
GOAL, STRETCH = 2.0, 1.0  # step with hand + ψ + one collision row vs KDL's wdls


def load_pykdl():
    """PyKDL from the venv if it is there, else Debian's binding loaded by file."""
    try:
        import PyKDL  # noqa: N813

        return PyKDL
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    files = glob.glob(f"/usr/lib/python3/dist-packages/PyKDL.{tag}-*.so")
    if not files:
        raise SystemExit(f"PyKDL for Python {sys.version_info.major}.{sys.version_info.minor} "
                         f"not found: install it with `{INSTALL}`")
    spec = importlib.util.spec_from_file_location("PyKDL", files[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kdl_chain(kdl, urdf_text: str, root: str, tip: str):
    """KDL chain root -> tip from the URDF (kdl_parser's construction)."""
    robot = URDF.from_xml_string(urdf_text)
    by_child = {j.child: j for j in robot.joints}
    path, link = [], tip
    while link != root:
        j = by_child[link]
        path.append(j)
        link = j.parent
    chain = kdl.Chain()
    for j in reversed(path):
        xyz = j.origin.xyz if j.origin is not None and j.origin.xyz else [0, 0, 0]
        rpy = j.origin.rpy if j.origin is not None and j.origin.rpy else [0, 0, 0]
        R = rpy_to_matrix(np.asarray(rpy, float))
        frame = kdl.Frame(kdl.Rotation(*R.ravel()), kdl.Vector(*xyz))
        if j.type == "fixed":
            joint = kdl.Joint(j.name, kdl.Joint.Fixed)
        else:
            axis = R @ np.asarray(j.axis if j.axis is not None else [1, 0, 0], float)
            kind = kdl.Joint.TransAxis if j.type == "prismatic" else kdl.Joint.RotAxis
            joint = kdl.Joint(j.name, kdl.Vector(*xyz), kdl.Vector(*axis), kind)
        chain.addSegment(kdl.Segment(j.child, joint, frame))
    return chain


def jnt(kdl, q):
    a = kdl.JntArray(len(q))
    for i, x in enumerate(q):
        a[i] = float(x)
    return a


def frame_arrays(F):
    p = np.array([F.p[i] for i in range(3)])
    R = np.array([[F.M[i, j] for j in range(3)] for i in range(3)])
    return p, R


def check_kdl_against_ours(kdl, chain, model, tip, rng) -> dict:
    """FK, Jacobian and the wdls step against ours; raises if they disagree."""
    fk = kdl.ChainFkSolverPos_recursive(chain)
    jac = kdl.ChainJntToJacSolver(chain)
    wdls = kdl.ChainIkSolverVel_wdls(chain)
    plain = ConfigurationControl(model, tip, [], task_weights=1.0)
    worst = {"fk_position_m": 0.0, "fk_rotation": 0.0, "jacobian": 0.0, "wdls_step_rad": 0.0}
    for _ in range(20):
        q = model.random_configuration(rng)
        F = kdl.Frame()
        fk.JntToCart(jnt(kdl, q), F)
        p_k, R_k = frame_arrays(F)
        p, R = frame_placement(model, q, tip)
        worst["fk_position_m"] = max(worst["fk_position_m"], float(np.abs(p_k - p).max()))
        worst["fk_rotation"] = max(worst["fk_rotation"], float(np.abs(R_k - R).max()))
        J_k = kdl.Jacobian(model.nv)
        jac.JntToJac(jnt(kdl, q), J_k)
        J_k = np.array([[J_k[i, j] for j in range(model.nv)] for i in range(6)])
        worst["jacobian"] = max(worst["jacobian"],
                                float(np.abs(J_k - frame_jacobian(model, q, tip)).max()))
        dp = 1e-4 * rng.normal(size=3)  # a small pure translation: ours = pinv(J) dX too
        qdot = kdl.JntArray(model.nv)
        wdls.CartToJnt(jnt(kdl, q), kdl.Twist(kdl.Vector(*dp), kdl.Vector(0, 0, 0)), qdot)
        ours = plain.step(q, (p + dp, R)).dq
        worst["wdls_step_rad"] = max(worst["wdls_step_rad"], float(np.abs(
            np.array([qdot[i] for i in range(model.nv)]) - ours).max()))
    scale = 1e-4
    ok = (worst["fk_position_m"] < 1e-9 and worst["fk_rotation"] < 1e-9
          and worst["jacobian"] < 1e-9 and worst["wdls_step_rad"] < 1e-9 * scale)
    if not ok:
        raise SystemExit(f"KDL and ours disagree: {worst}")
    return worst


def setup(kdl, urdf_text: str, tip: str, links: tuple[str, str, str], q: np.ndarray):
    model = RobotModel.from_urdf(urdf_text, tip_link=tip)
    chain = kdl_chain(kdl, urdf_text, model.root_link, tip)
    checks = check_kdl_against_ours(kdl, chain, model, tip, np.random.default_rng(1))
    aa = ArmAngle(model, *links)
    p, R = frame_placement(model, q, tip)
    target = (p + 1e-3, R)
    elbow = aa.evaluate(q).elbow
    # a sphere 8 cm beside the elbow: inside its outer sphere (one active collision row)
    spheres = [Sphere(elbow + np.array([0.08, 0.0, 0.0]), 0.02, 0.15)]

    def functions():
        return [ArmAngleFunction(aa), CollisionAvoidance(model, spheres, tip=tip)]

    cc = ConfigurationControl(model, tip, functions(), task_weights=16.0)
    ref = ConfigurationControl(model, tip, functions(), task_weights=16.0, compiled=False)
    hand = ConfigurationControl(model, tip, [], task_weights=16.0)
    old = ConfigurationControl(model, tip, [ArmAngleFunction(aa), JointLimitAvoidance(model)],
                               task_weights=16.0)
    targets = {"arm_angle": 0.1}
    res = cc.step(q, target, targets)
    if res.weights["collision"].size != 1 or not res.weights["collision"][0] > 0:
        raise SystemExit("the collision row is not active in the benchmark configuration")
    np.testing.assert_allclose(res.dq, ref.step(q, target, targets).dq, atol=1e-9)
    pr = cc._program
    kernel_args = (*cc._kinematics.buffers, pr.rint, pr.rflt, pr.rwork, q, pr.tgt)

    fk = kdl.ChainFkSolverPos_recursive(chain)
    wdls = kdl.ChainIkSolverVel_wdls(chain)
    wdls.setLambda(0.0)
    q_k, qdot, F = jnt(kdl, q), kdl.JntArray(model.nv), kdl.Frame()
    F_d = kdl.Frame(kdl.Rotation(*R.ravel()), kdl.Vector(*(p + 1e-3)))
    fk.JntToCart(q_k, F)
    twist = kdl.diff(F, F_d)
    if wdls.CartToJnt(q_k, twist, qdot) != 0:
        raise SystemExit(f"KDL wdls failed: {wdls.strError(wdls.getError())}")
    keep = (chain, fk, wdls, q_k, qdot, F, twist)  # the solvers hold the chain by reference

    cases = {
        "kdl_wdls": lambda: wdls.CartToJnt(keep[3], keep[6], keep[4]),
        "kdl_fk": lambda: fk.JntToCart(q_k, F),
        "ours_hand_psi_collision": lambda: cc.step(q, target, targets),
        "ours_kernel_hand_psi_collision": lambda: kernels.configuration_step(*kernel_args),
        "ours_hand_only": lambda: hand.step(q, target),
        "ours_psi_joint_limits": lambda: old.step(q, target, targets),
        "python_reference_hand_psi_collision": lambda: ref.step(q, target, targets),
    }
    return cases, checks


def measure(cases: dict, rounds: int, calls: int) -> dict:
    for fn in cases.values():  # warm up (compilation, caches)
        for _ in range(200):
            fn()
    samples = {k: [] for k in cases}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, fn in cases.items():
            n = calls if not name.startswith("python") else max(calls // 10, 20)
            out = samples[name]
            for _ in range(n):
                t0 = clock()
                fn()
                out.append(clock() - t0)
    rows = {}
    for name, t in samples.items():
        t = np.array(t) / 1e3
        rows[name] = {"median_us": float(np.median(t)), "p99_us": float(np.percentile(t, 99)),
                      "calls": int(t.size)}
    return rows


ROBOTS = {
    "arm7": (ROOT / "urdf/arm7.urdf", "tool", ("link2", "link4", "link6"),
             np.array([0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8])),
}


def example_panda():
    try:
        import cmeel  # noqa: F401
    except ImportError:
        pass
    for base in sys.path:
        path = Path(base) / "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/"
        if (path / "panda.urdf").exists():
            return path / "panda.urdf"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    kdl = load_pykdl()
    robots = dict(ROBOTS)
    panda = example_panda()
    if panda is not None:
        robots["panda"] = (panda, "panda_link8", ("panda_link2", "panda_link4", "panda_link6"),
                           np.array([0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8]))
    report = {"kdl": "Orocos KDL 1.5.1 (python3-pykdl, in process)", "install": INSTALL,
              "goal": f"ours_hand_psi_collision <= {GOAL} x kdl_wdls (stretch {STRETCH} x)",
              "robots": {}}
    for name, (path, tip, links, q) in robots.items():
        cases, checks = setup(kdl, Path(path).read_text(), tip, links, q)
        rows = measure(cases, args.rounds, args.calls)
        base = rows["kdl_wdls"]["median_us"]
        ratio = rows["ours_hand_psi_collision"]["median_us"] / base
        print(f"\n{name}: KDL vs ours agree (FK {checks['fk_position_m']:.1e} m, Jacobian "
              f"{checks['jacobian']:.1e}, wdls step {checks['wdls_step_rad']:.1e} rad)")
        print(f"{'case':<40}{'median µs':>11}{'p99 µs':>10}{'× kdl_wdls':>12}")
        for k, v in rows.items():
            v["ratio_to_kdl_wdls"] = v["median_us"] / base
            print(f"{k:<40}{v['median_us']:>11.2f}{v['p99_us']:>10.2f}"
                  f"{v['ratio_to_kdl_wdls']:>12.2f}")
        verdict = ("stretch met" if ratio <= STRETCH else "goal met" if ratio <= GOAL
                   else "goal missed")
        print(f"hand + ψ + collision step = {ratio:.2f} × KDL wdls: {verdict}")
        report["robots"][name] = {"checks": checks, "cases": rows, "ratio": ratio,
                                  "verdict": verdict}
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "redundancy.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'redundancy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
