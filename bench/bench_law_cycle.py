"""The controller's cycle per mode against Pinocchio's ABA on the same robot, in one run.

    .venv/bin/python bench/bench_law_cycle.py [--quick] [--robots arm7 xarm7 kinova ur10]
        [--modes MODE ...] [--no-swing-up] [--before REV] [--out bench/results]

Robots (N = 7): the bundled arm (``urdf/arm7.urdf``, task frame ``tool``) and example-robot-data's
xarm7 (frame ``link_eef``; URDF damping and friction on every joint, so the friction stage
works), each with no passive joint and with ``joint3`` passive (the upper arm's roll: the arm
keeps six actuated DOF for the pose, and no mode's command meets a joint limit's bound there);
and, for ``swing_up``, the bundled acrobot (N = 2, the only kind of robot that mode applies
to). One more row: arm7 with ``joint2`` (the shoulder) passive in operational_space, where the
law commands more than the joints' bounds allow and the safety layer overrides every cycle
(its other path: two more hybrid passes and the effort scaling). Every mode of
``control/registry.py`` (task with ``task`` pose and position; operational_space with
``os_task`` pose), built as the controller node builds it: one ``JacobianWorkspace`` shared by
the law and the ``CommandShaper``, every law and stage parameter at its default. The reference:
joint mode follows a moving reference (0.05 rad off, 0.2 rad/s), the pose modes hold the pose
where the mode started (a goal away from it: the state, which does not follow, falls behind
the setpoint and the commanded accelerations grow into the safety layer's bounds within a
second); the state time advances 1 ms per call; each call gets the other of two configurations
0.02 rad apart (a workspace at q already would skip its transforms and (4.6)).

Methods, interleaved in 20 short rounds per case (a slow spell of the machine hits all alike;
ratios are medians of the per-round paired ratios), BLAS on one thread:

* ``law``      ``law.compute(q, v, reference, t, with_jacobians=False)``: the law's cycle
* ``cycle``    the law, then ``CommandShaper.apply`` (safety layer, friction compensation)
               and ``EffortMapper.map``: the node's whole computation between a state and its
               command
* ``pin_aba``  ``pin.aba(model, data, q, v, tau)`` of the same robot (the reference)

``--before REV``: git revision REV's package too (``git archive`` into a temporary folder,
imported under another name in this process), each case built twice; its cycle
(``cycle_before``) joins the interleaved rounds, and the two packages' commands are compared
over 300 cycles first (the largest difference printed: a change meant to keep the output
shows 0). ``--robots`` adds example-robot-data's kinova (6 DOF, frame
``j2s6s200_end_effector``) and ur10 (``tool0``), with their third joint passive.

Prints a table (median µs, ratios law/aba and cycle/aba) and writes ``law_cycle.json``.
Pinocchio is the reference only; the library never imports it.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import atexit  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from bench_dynamics import ROBOTS, bench_parser, run_settings, samples_of, stats  # noqa: E402
from oracle import PinRef  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.bringup import builtin_robots  # noqa: E402

ROUNDS = 20
METHODS = ["law", "cycle", "pin_aba"]
# (label, mode, settings overrides)
ARM_MODES = [("joint", "joint", {}), ("hold", "hold", {}),
             ("task pose", "task", {"task": "pose"}),
             ("task position", "task", {"task": "position"}),
             ("operational_space", "operational_space", {"os_task": "pose"})]
# bent poses away from singularities and joint limits (arm7's: warmup._ARM_POSE)
POSES = {"arm7": np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]),
         "xarm7": np.array([0.0, -0.3, 0.0, 1.2, 0.0, 1.5, 0.0]),
         "kinova": np.array([0.3, 2.9, 1.3, -2.0, 1.4, 0.5]),
         "ur10": np.array([0.2, -1.2, 1.5, -1.9, -1.5, 0.3])}
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "underactuated_control"


def package_api(name: str = PACKAGE) -> SimpleNamespace:
    """What a case builds from, out of the package imported as ``name``."""
    def mod(sub: str):
        return importlib.import_module(f"{name}.{sub}")

    registry = mod("control.registry")
    return SimpleNamespace(RobotModel=importlib.import_module(name).RobotModel,
                           CommandShaper=mod("control.command").CommandShaper,
                           EffortMapper=mod("control.joint_space").EffortMapper,
                           CONTROL_LAWS=registry.CONTROL_LAWS,
                           default_settings=registry.default_settings,
                           JacobianWorkspace=mod("jacobians").JacobianWorkspace)


def import_revision(rev: str) -> SimpleNamespace:
    """Revision ``rev``'s package, from ``git archive`` into a temporary folder, imported as
    ``uc_before`` (its modules import one another relatively; its kernels compile into its
    own cache there on first use). The folder is removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"uc_before_{rev[:12]}_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, PACKAGE], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / PACKAGE).rename(folder / "uc_before")
    sys.path.insert(0, str(folder))
    print(f"before: {rev} from {folder / 'uc_before'}")
    return package_api("uc_before")


class Case:
    """One robot, passive set and mode: the node's law, shaper and mapper, and Pinocchio."""

    def __init__(self, robot: str, text: str, frame: str, passive: list[str], label: str,
                 mode: str, overrides: dict, q0: np.ndarray,
                 api: SimpleNamespace | None = None) -> None:
        self.robot, self.label, self.mode = robot, label, mode
        self.passive = passive
        self.build = (text, frame, passive, label, mode, overrides, q0)
        api = api if api is not None else package_api()
        model = api.RobotModel.from_urdf(text, passive_joints=passive)
        self.model = model
        self.N = model.nv
        settings = api.default_settings(**{"effort_limit_scale": 1.0, **overrides})
        workspace = api.JacobianWorkspace(model)  # as the node: one for the law and shaper
        self.law = api.CONTROL_LAWS[mode](model, settings, frame, workspace)
        self.shaper = api.CommandShaper(model, settings, workspace)
        self.mapper = api.EffortMapper(model, None, settings["effort_limit_scale"])
        ref = PinRef(model, text)  # Pinocchio's model; q map (continuous: cos, sin)
        assert (ref.v_perm == np.arange(self.N)).all(), "robots keep Pinocchio's DOF order"
        self.pm, self.pd = ref.pm, ref.pd
        rng = np.random.default_rng(7)
        other = q0 + rng.uniform(-0.02, 0.02, q0.shape)
        # (ours, Pinocchio's) of each of two nearby configurations
        self.configurations = tuple((np.array(x, float), ref.q(x)) for x in (q0, other))
        self._at = 0
        self.q, self.q_pin = self.configurations[0]
        self.v = rng.uniform(-0.3, 0.3, model.nv)
        self.t = 0.0
        self.reference = self._reference(self.q)
        self.tau = rng.normal(size=self.N)

    def _reference(self, q: np.ndarray):
        law = self.law
        ref = law.hold_reference(q)
        if law.reference_kind == "joint":
            ref.position += 0.05
            ref.velocity[:] = 0.2
        return ref

    def next_configuration(self) -> None:
        self._at ^= 1
        self.q, self.q_pin = self.configurations[self._at]
        self.t += 1e-3

    def law_cycle(self):
        return self.law.compute(self.q, self.v, self.reference, self.t, False)

    def cycle(self):
        out = self.law.compute(self.q, self.v, self.reference, self.t, False)
        self.shaper.apply(self.q, self.v, out)
        return self.mapper.map(out.tau_active)

    def pin_aba(self):
        return pin.aba(self.pm, self.pd, self.q_pin, self.v, self.tau)

    def twin(self, api: SimpleNamespace) -> Case:
        """The same case built from another package (``import_revision``)."""
        return Case(self.robot, *self.build, api=api)

    def check(self) -> None:
        """One cycle gives a finite command (a law that fails here would time an error)."""
        command = self.cycle()
        if not np.all(np.isfinite(command)):
            raise AssertionError(f"{self.robot} {self.label}: non-finite command {command}")


def arm_cases(robots: list[str]) -> list[Case]:
    bundled = builtin_robots()
    texts = {"arm7": (bundled["arm7"].read_text(), "tool", "joint3"),
             "xarm7": ((ROBOTS / "xarm_description/urdf/xarm7.urdf").read_text(), "link_eef",
                       "joint3"),
             "kinova": ((ROBOTS / "kinova_description/robots/kinova.urdf").read_text(),
                        "j2s6s200_end_effector", "j2s6s200_joint_3"),
             "ur10": ((ROBOTS / "ur_description/urdf/ur10_robot.urdf").read_text(), "tool0",
                      "elbow_joint")}
    cases = []
    for robot in robots:
        text, frame, third = texts[robot]
        for passive in ([], [third]):
            for label, mode, overrides in ARM_MODES:
                if passive and len(POSES[robot]) < 7 and "pose" in overrides.values():
                    if mode == "task":  # five active joints: the pose has six directions
                        continue
                    label, overrides = f"{mode} position", {"os_task": "position"}
                cases.append(Case(robot, text, frame, passive, label, mode, overrides,
                                  POSES[robot]))
    if "arm7" in robots:  # the safety layer's override path, every cycle
        text, frame, _ = texts["arm7"]
        cases.append(Case("arm7", text, frame, ["joint2"], "operational_space",
                          "operational_space", {"os_task": "pose"}, POSES["arm7"]))
    return cases


def commands_apart(case: Case, twin: Case, cycles: int = 300) -> float:
    """The largest |command difference| [N·m] of two builds of a case over ``cycles`` cycles
    from the same states (then both back at their first configuration)."""
    apart = 0.0
    for _ in range(cycles):
        apart = max(apart, float(np.max(np.abs(case.cycle() - twin.cycle()))))
        case.next_configuration()
        twin.next_configuration()
    return apart


def swing_up_case() -> Case:
    text = builtin_robots()["acrobot"].read_text()
    model = RobotModel.from_urdf(text)
    # hanging, a little off: the pumping phase (the mode's usual cycle)
    q0 = np.array([np.pi - 0.3, 0.2]) if model.nq == 2 else model.neutral_configuration()
    return Case("acrobot", text, model.body_names[-1], list(model.passive_joints), "swing_up",
                "swing_up", {}, q0)


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--robots", nargs="+", default=["arm7", "xarm7"],
                        choices=["arm7", "xarm7", "kinova", "ur10"])
    parser.add_argument("--modes", nargs="+", default=None,
                        help="only the rows of these modes (default: every mode)")
    parser.add_argument("--no-swing-up", action="store_true", help="skip the acrobot row")
    parser.add_argument("--before", help="git revision whose cycle runs interleaved")
    args = parser.parse_args()
    budget, max_calls, out_dir, package = run_settings(args, (0.1, 1.0), (2000, 20000))
    before = import_revision(args.before) if args.before else None
    methods = METHODS + ["cycle_before"] if before else METHODS

    cases = arm_cases(args.robots)
    if not args.no_swing_up:
        cases.append(swing_up_case())
    if args.modes:
        cases = [c for c in cases if c.mode in args.modes]
    print(f"{'robot':<8}{'N':>3} {'passive':<17}{'mode':<27}{'law µs':>9}{'cycle µs':>10}"
          f"{'aba µs':>8}{'law/aba':>9}{'cycle/aba':>11}"
          + (f"{'before µs':>11}{'after/before':>14}{'apart':>10}" if before else ""))
    results = []
    for case in cases:
        case.check()
        pooled = {m: [] for m in methods}
        rounds = {m: [] for m in methods}
        fns = {"law": case.law_cycle, "cycle": case.cycle, "pin_aba": case.pin_aba}
        between = dict.fromkeys(METHODS, case.next_configuration)
        apart = None
        if before:
            twin = case.twin(before)
            apart = commands_apart(case, twin)
            fns["cycle_before"], between["cycle_before"] = twin.cycle, twin.next_configuration
        for _ in range(ROUNDS):
            for method in methods:
                gc.collect()
                got = samples_of(fns[method], budget / ROUNDS, max_calls // ROUNDS,
                                 min_calls=50, between=between[method])
                pooled[method] += got
                rounds[method].append(float(np.median(got)) / 1e3)
        row = {"robot": case.robot, "N": case.N, "passive": case.passive, "mode": case.mode,
               "label": case.label, "round_medians_us": rounds,
               # cycles in which the safety layer overrode the law (near a joint limit)
               "safety_overrides": case.shaper.safety.overrides}
        for method in methods:
            row[method] = stats(pooled[method])
        row["law_over_aba"] = float(np.median(np.divide(rounds["law"], rounds["pin_aba"])))
        row["cycle_over_aba"] = float(np.median(np.divide(rounds["cycle"], rounds["pin_aba"])))
        compared = ""
        if before:
            row["cycle_over_before"] = float(np.median(np.divide(rounds["cycle"],
                                                                 rounds["cycle_before"])))
            row["commands_apart"] = apart
            compared = (f"{row['cycle_before']['median_us']:>11.1f}"
                        f"{row['cycle_over_before']:>14.3f}{apart:>10.1e}")
        print(f"{case.robot:<8}{case.N:>3} {','.join(case.passive) or '-':<17}{case.label:<27}"
              f"{row['law']['median_us']:>9.1f}{row['cycle']['median_us']:>10.1f}"
              f"{row['pin_aba']['median_us']:>8.2f}{row['law_over_aba']:>9.1f}"
              f"{row['cycle_over_aba']:>11.1f}" + compared
              + (f"   (safety layer overrode {row['safety_overrides']} cycles)"
                 if row["safety_overrides"] else ""), flush=True)
        results.append(row)

    arms = [r for r in results if r["N"] == 7 and not r["safety_overrides"]]
    if arms:
        worst_law = max(arms, key=lambda r: r["law_over_aba"])
        worst_cycle = max(arms, key=lambda r: r["cycle_over_aba"])
        print(f"\nN = 7, largest law/aba {worst_law['law_over_aba']:.1f} ({worst_law['robot']} "
              f"{worst_law['label']}, passive {worst_law['passive']}); largest cycle/aba "
              f"{worst_cycle['cycle_over_aba']:.1f} ({worst_cycle['robot']} "
              f"{worst_cycle['label']}, passive {worst_cycle['passive']}); target <= 10 "
              "(stretch 5); rows without safety overrides")
    payload = {"results": results, "package": package, "before": args.before,
               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                           "pinocchio": pin.__version__, "numpy": np.__version__}}
    (out_dir / "law_cycle.json").write_text(json.dumps(payload, indent=2))
    print(f"wrote {out_dir / 'law_cycle.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
