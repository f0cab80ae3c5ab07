"""One Seraji configuration-control step against Orocos KDL's ChainIkSolverVel_wdls, the same
7-DOF chains, interleaved in one run.

KDL is the real C++ library through Debian's Python binding:

    apt-get install -y python3-pykdl          # KDL 1.5.1 (liborocos-kdl1.5)
    .venv/bin/python bench/bench_redundancy.py [--rounds 20] [--calls 500]

The binding is built for Debian's Python 3.11 (/usr/bin/python3); its ABI tag is the venv's
(cpython-311-x86_64-linux-gnu), so it is loaded into this process from its file in
/usr/lib/python3/dist-packages (without putting that directory on sys.path, which would shadow
the venv's numpy). If it does not load here (another Python), or with ``--kdl-worker``, the KDL
side runs in a persistent /usr/bin/python3 worker that times its own loop, interleaved with
ours round by round (JSON lines over a pipe; the same pure-Python ``KdlSide`` code).

The KDL chain is built from the same URDF (one segment per joint, as kdl_parser does: the
joint's axis in its parent's frame through the joint origin, the joint origin as the segment's
tip frame), and checked before timing: forward kinematics and Jacobian against ours at random
configurations, and KDL's wdls step (λ = 0, unit weights: the minimum-norm solution) against
our hand-only step with W_v = 0.

Timed, each side in its own process's loop, in interleaved rounds (every round runs every case
``--calls`` times; median and p99 over all calls; BLAS pinned to one thread):
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
from underactuated_control.jacobians import frame_jacobian, frame_placement  # noqa: E402
from underactuated_control.redundancy import kernels  # noqa: E402
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
    """PyKDL from the venv if it is there, else Debian's binding loaded by file, else None."""
    try:
        import PyKDL  # noqa: N813

        return PyKDL
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    files = glob.glob(f"/usr/lib/python3/dist-packages/PyKDL.{tag}-*.so")
    if not files:
        return None
    spec = importlib.util.spec_from_file_location("PyKDL", files[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chain_spec(urdf_text: str, root: str, tip: str) -> list[dict]:
    """The root -> tip joints as plain numbers (kdl_parser's construction: each segment's
    joint axis in its parent's frame through the joint origin, the origin as its tip frame)."""
    robot = URDF.from_xml_string(urdf_text)
    by_child = {j.child: j for j in robot.joints}
    path, link = [], tip
    while link != root:
        j = by_child[link]
        path.append(j)
        link = j.parent
    spec = []
    for j in reversed(path):
        xyz = j.origin.xyz if j.origin is not None and j.origin.xyz else [0, 0, 0]
        rpy = j.origin.rpy if j.origin is not None and j.origin.rpy else [0, 0, 0]
        R = rpy_to_matrix(np.asarray(rpy, float))
        axis = R @ np.asarray(j.axis if j.axis is not None else [1, 0, 0], float)
        spec.append({"name": j.name, "child": j.child, "type": j.type,
                     "xyz": [float(x) for x in xyz], "R": R.ravel().tolist(),
                     "axis": axis.tolist()})
    return spec


# The KDL side in pure Python (no numpy): run in this process, or as a worker under
# /usr/bin/python3 when the binding does not load here (JSON lines on stdin/stdout).
KDL_SIDE = r"""
import json, sys, time


class KdlSide:
    def __init__(self, kdl, spec, q, twist):
        self.kdl = kdl
        self.chain = kdl.Chain()
        for s in spec:
            frame = kdl.Frame(kdl.Rotation(*s["R"]), kdl.Vector(*s["xyz"]))
            if s["type"] == "fixed":
                joint = kdl.Joint(s["name"], kdl.Joint.Fixed)
            else:
                kind = kdl.Joint.TransAxis if s["type"] == "prismatic" else kdl.Joint.RotAxis
                joint = kdl.Joint(s["name"], kdl.Vector(*s["xyz"]), kdl.Vector(*s["axis"]),
                                  kind)
            self.chain.addSegment(kdl.Segment(s["child"], joint, frame))
        self.n = self.chain.getNrOfJoints()
        self.fk = kdl.ChainFkSolverPos_recursive(self.chain)
        self.jac = kdl.ChainJntToJacSolver(self.chain)
        self.wdls = kdl.ChainIkSolverVel_wdls(self.chain)
        self.wdls.setLambda(0.0)
        self.q, self.qdot, self.F = self.jnt(q), kdl.JntArray(self.n), kdl.Frame()
        self.twist = kdl.Twist(kdl.Vector(*twist[:3]), kdl.Vector(*twist[3:]))
        if self.wdls.CartToJnt(self.q, self.twist, self.qdot) != 0:
            raise RuntimeError("KDL wdls failed: " + self.wdls.strError(self.wdls.getError()))

    def jnt(self, q):
        a = self.kdl.JntArray(len(q))
        for i, x in enumerate(q):
            a[i] = float(x)
        return a

    def check(self, q, dp):
        # FK, Jacobian and the wdls step (λ = 0, unit weights) for a pure translation dp
        kdl, qa = self.kdl, self.jnt(q)
        F, J, qdot = kdl.Frame(), kdl.Jacobian(self.n), kdl.JntArray(self.n)
        self.fk.JntToCart(qa, F)
        self.jac.JntToJac(qa, J)
        self.wdls.CartToJnt(qa, kdl.Twist(kdl.Vector(*dp), kdl.Vector(0, 0, 0)), qdot)
        return {"p": [F.p[i] for i in range(3)],
                "R": [[F.M[i, j] for j in range(3)] for i in range(3)],
                "J": [[J[i, j] for j in range(self.n)] for i in range(6)],
                "qdot": [qdot[i] for i in range(self.n)]}

    def time(self, case, calls):
        clock, out = time.perf_counter_ns, []
        wdls, fk, q, tw, qd, F = self.wdls, self.fk, self.q, self.twist, self.qdot, self.F
        for _ in range(calls):
            if case == "kdl_wdls":
                t0 = clock()
                wdls.CartToJnt(q, tw, qd)
                out.append(clock() - t0)
            else:
                t0 = clock()
                fk.JntToCart(q, F)
                out.append(clock() - t0)
        return out


def serve():
    import PyKDL
    side = None
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["cmd"] == "setup":
                side = KdlSide(PyKDL, msg["spec"], msg["q"], msg["twist"])
                reply = {"ok": True}
            elif msg["cmd"] == "check":
                reply = side.check(msg["q"], msg["dp"])
            else:
                reply = {"t": side.time(msg["case"], msg["calls"])}
        except Exception as exc:  # reported to the bench, which stops with it
            reply = {"error": repr(exc)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
"""
_side_namespace: dict = {"__name__": "kdl_side"}
exec(compile(KDL_SIDE, "kdl_side", "exec"), _side_namespace)  # noqa: S102
KdlSide = _side_namespace["KdlSide"]


class KdlWorker:
    """The KDL side in a persistent /usr/bin/python3 process (Debian's PyKDL), timing its own
    loop; same methods as KdlSide."""

    def __init__(self, spec, q, twist) -> None:
        import subprocess

        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
                            "LD_LIBRARY_PATH")}
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", KDL_SIDE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.call({"cmd": "setup", "spec": spec, "q": list(map(float, q)),
                   "twist": list(map(float, twist))})

    def call(self, msg: dict) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the KDL worker (/usr/bin/python3) died; install PyKDL with "
                             f"`{INSTALL}`")
        reply = json.loads(line)
        if "error" in reply:
            raise SystemExit(f"KDL worker: {reply['error']}")
        return reply

    def check(self, q, dp) -> dict:
        return self.call({"cmd": "check", "q": list(map(float, q)), "dp": list(map(float, dp))})

    def time(self, case: str, calls: int) -> list[int]:
        return self.call({"cmd": "time", "case": case, "calls": calls})["t"]


def kdl_side(kdl, spec, q, twist, force_worker: bool):
    """In this process if the binding loads, else a /usr/bin/python3 worker."""
    if kdl is not None and not force_worker:
        return KdlSide(kdl, spec, list(map(float, q)), list(map(float, twist))), "in process"
    if not Path("/usr/bin/python3").exists():
        raise SystemExit(f"PyKDL not found: install it with `{INSTALL}`")
    return KdlWorker(spec, q, twist), "in a /usr/bin/python3 worker, timing its own loop"


def check_kdl_against_ours(side, model, tip, rng) -> dict:
    """FK, Jacobian and the wdls step against ours; raises if they disagree."""
    plain = ConfigurationControl(model, tip, [], task_weights=1.0)
    worst = {"fk_position_m": 0.0, "fk_rotation": 0.0, "jacobian": 0.0, "wdls_step_rad": 0.0}
    for _ in range(20):
        q = model.random_configuration(rng)
        dp = 1e-4 * rng.normal(size=3)  # a small pure translation: ours = pinv(J) dX too
        k = side.check(list(map(float, q)), list(map(float, dp)))
        p, R = frame_placement(model, q, tip)
        worst["fk_position_m"] = max(worst["fk_position_m"], float(np.abs(k["p"] - p).max()))
        worst["fk_rotation"] = max(worst["fk_rotation"], float(np.abs(k["R"] - R).max()))
        worst["jacobian"] = max(worst["jacobian"], float(np.abs(
            np.array(k["J"]) - frame_jacobian(model, q, tip)).max()))
        ours = plain.step(q, (p + dp, R)).dq
        worst["wdls_step_rad"] = max(worst["wdls_step_rad"],
                                     float(np.abs(np.array(k["qdot"]) - ours).max()))
    ok = (worst["fk_position_m"] < 1e-9 and worst["fk_rotation"] < 1e-9
          and worst["jacobian"] < 1e-9 and worst["wdls_step_rad"] < 1e-12)
    if not ok:
        raise SystemExit(f"KDL and ours disagree: {worst}")
    return worst


def setup(kdl, urdf_text: str, tip: str, links: tuple[str, str, str], q: np.ndarray,
          force_worker: bool):
    model = RobotModel.from_urdf(urdf_text, tip_link=tip)
    aa = ArmAngle(model, *links)
    p, R = frame_placement(model, q, tip)
    target = (p + 1e-3, R)
    side, where = kdl_side(kdl, chain_spec(urdf_text, model.root_link, tip), q,
                           [1e-3, 1e-3, 1e-3, 0.0, 0.0, 0.0], force_worker)
    checks = check_kdl_against_ours(side, model, tip, np.random.default_rng(1))
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
    cases = {
        "kdl_wdls": lambda n: side.time("kdl_wdls", n),
        "kdl_fk": lambda n: side.time("kdl_fk", n),
        "ours_hand_psi_collision": timed(lambda: cc.step(q, target, targets)),
        "ours_kernel_hand_psi_collision": timed(
            lambda: kernels.configuration_step(*kernel_args)),
        "ours_hand_only": timed(lambda: hand.step(q, target)),
        "ours_psi_joint_limits": timed(lambda: old.step(q, target, targets)),
        "python_reference_hand_psi_collision": timed(lambda: ref.step(q, target, targets)),
    }
    return cases, checks, where


def timed(fn):
    """n calls of fn, each timed: the same loop as the KDL side's."""
    def run(n: int) -> list[int]:
        clock, out = time.perf_counter_ns, []
        for _ in range(n):
            t0 = clock()
            fn()
            out.append(clock() - t0)
        return out
    return run


def measure(cases: dict, rounds: int, calls: int) -> dict:
    for run in cases.values():  # warm up (compilation, caches)
        run(200)
    samples = {k: [] for k in cases}
    for _ in range(rounds):  # interleaved: every case once per round
        for name, run in cases.items():
            n = calls if not name.startswith("python") else max(calls // 10, 20)
            samples[name] += run(n)
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
    ap.add_argument("--kdl-worker", action="store_true",
                    help="run KDL in a /usr/bin/python3 worker even if it loads here")
    args = ap.parse_args()
    kdl = load_pykdl()
    robots = dict(ROBOTS)
    panda = example_panda()
    if panda is not None:
        robots["panda"] = (panda, "panda_link8", ("panda_link2", "panda_link4", "panda_link6"),
                           np.array([0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.8]))
    report = {"kdl": "Orocos KDL (python3-pykdl)", "install": INSTALL,
              "goal": f"ours_hand_psi_collision <= {GOAL} x kdl_wdls (stretch {STRETCH} x)",
              "robots": {}}
    for name, (path, tip, links, q) in robots.items():
        cases, checks, where = setup(kdl, Path(path).read_text(), tip, links, q,
                                     args.kdl_worker)
        rows = measure(cases, args.rounds, args.calls)
        base = rows["kdl_wdls"]["median_us"]
        ratio = rows["ours_hand_psi_collision"]["median_us"] / base
        print(f"\n{name}: KDL {where}; KDL vs ours agree (FK {checks['fk_position_m']:.1e} m, "
              f"Jacobian {checks['jacobian']:.1e}, wdls step {checks['wdls_step_rad']:.1e} rad)")
        print(f"{'case':<40}{'median µs':>11}{'p99 µs':>10}{'× kdl_wdls':>12}")
        for k, v in rows.items():
            v["ratio_to_kdl_wdls"] = v["median_us"] / base
            print(f"{k:<40}{v['median_us']:>11.2f}{v['p99_us']:>10.2f}"
                  f"{v['ratio_to_kdl_wdls']:>12.2f}")
        verdict = ("stretch met" if ratio <= STRETCH else "goal met" if ratio <= GOAL
                   else "goal missed")
        print(f"hand + ψ + collision step = {ratio:.2f} × KDL wdls: {verdict}")
        report["robots"][name] = {"checks": checks, "cases": rows, "ratio": ratio, "kdl": where,
                                  "verdict": verdict}
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "redundancy.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'redundancy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
