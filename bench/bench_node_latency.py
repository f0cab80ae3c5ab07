"""/joint_states -> effort command latency of hybrid_dynamics_controller, two processes.

    .venv/bin/python bench/bench_node_latency.py [--seconds 10] [--rates 500 1000]
    .venv/bin/python bench/bench_node_latency.py --soak-minutes 10        # 1 kHz soak
    .venv/bin/python bench/bench_node_latency.py --before bb89000 --rounds 3   # interleaved
    .venv/bin/python bench/bench_node_latency.py --first-launch [--before REV] [--rounds 1]
    .venv/bin/python bench/bench_node_latency.py --callback [--before REV] [--rounds 5]

The controller runs in its own process (arm7, joints 2 and 4 passive, joint mode, J_G/J_D
publication on). This process publishes sensor_msgs/JointState at each rate from a busy-wait
schedule and matches each effort command to the oldest unanswered state (FIFO: exact when every
state got one command; a run that lost or gained commands reports its answered fraction and no
latency). Prints p50/p99/p99.9 latency and the fraction answered; the soak prints them per
minute with the controller's RSS.
``--before REV`` runs the controller of git revision REV (a temporary worktree) and of this
checkout alternately, ``--rounds`` times each, after starting each once untimed (a new
worktree's kernel cache is empty); ``--param NAME:=VALUE`` and ``--observer-gain`` set this
checkout's controller only. ``--first-launch`` measures instead the seconds
from the controller's process start to its first effort command, states published at 100 Hz
from the start, on a fresh numba cache (an empty ``NUMBA_CACHE_DIR``) and then warm (that
cache again), for this checkout and, with ``--before``, REV's, alternately. Writes
bench/results/node_latency.json (or node_soak.json, node_latency_compare.json,
first_launch.json). ``--pin`` runs this process on CPU 0 and the controller on CPU 1
(``taskset``). ``--callback`` times instead the controller's ``/joint_states`` callback in
its own process without DDS in the loop (``--calls`` states handed to it directly; the
median from entry to the effort command's publish and to the callback's end), per side in a
fresh process, sides alternating, ``--rounds`` times: it resolves a few microseconds, which the
round trip over DDS, spread by 10-30 % between rounds on this machine, cannot. Writes
callback_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NAMES = [f"joint{i}" for i in range(1, 8)]
Q = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])


def start_controller(args, package_root: Path | None, limit_s: int,
                     cache_dir: str | None = None) -> subprocess.Popen:
    """The controller of this checkout, or of ``package_root`` (run by module path);
    ``cache_dir``: numba's kernel cache to use (``NUMBA_CACHE_DIR``)."""
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    if package_root is None:
        exe = [str(Path(sys.executable).parent / "hybrid_dynamics_controller")]
    else:
        env["PYTHONPATH"] = str(package_root)
        exe = [sys.executable, "-c", "import sys; from underactuated_control.nodes."
               "hybrid_dynamics_controller import main; sys.exit(main(sys.argv))"]
    pin = ["taskset", "-c", "1"] if args.pin else []
    cmd = [*pin, "timeout", "-k", "5", str(limit_s), *exe,
           *controller_arguments(args, package_root is None)]
    return subprocess.Popen(cmd, env=env, cwd=package_root or ROOT)


def controller_arguments(args, this_checkout: bool) -> list[str]:
    """The controller's ``--ros-args``; ``--param``/``--observer-gain`` for this checkout's
    only (a --before revision keeps its own)."""
    ros = ["--ros-args", "-p", f"urdf_path:={ROOT / 'urdf/arm7.urdf'}",
           "-p", f"passive_joints:={args.passive_joints}",
           "-p", "mode:=joint", "-p", "state_timeout:=1.0",
           "-p", f"publish_jacobians:={args.publish_jacobians}", "--log-level", "warn"]
    if this_checkout:
        if args.observer_gain is not None:
            ros[-2:-2] = ["-p", f"observer_gain:={args.observer_gain}"]
        for assignment in args.param:
            ros[-2:-2] = ["-p", assignment]
    return ros


def stop(controller: subprocess.Popen) -> None:
    controller.send_signal(signal.SIGINT)
    try:
        controller.wait(10)
    except subprocess.TimeoutExpired:
        controller.kill()


def rss_kb(controller: subprocess.Popen) -> int | None:
    """Resident memory of the controller itself (the child of ``timeout``)."""
    children = subprocess.run(["pgrep", "-P", str(controller.pid)], capture_output=True,
                              text=True).stdout.split()
    for pid in children:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
    return None


class Driver:
    """This process's node: publishes states on a schedule, records command arrivals."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.experimental import EventsExecutor
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        rclpy.init()
        self.rclpy, self.JointState = rclpy, JointState
        self.node = rclpy.create_node("latency_driver")
        self.executor = EventsExecutor()
        self.executor.add_node(self.node)
        self.received: list[int] = []
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                      lambda _m: self.received.append(time.perf_counter_ns()),
                                      100)
        self.pub = self.node.create_publisher(JointState, "/joint_states", 100)
        from diagnostic_msgs.msg import DiagnosticArray

        self.compute_us: list[float] = []  # the controller's compute_time_mean_us (per second)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            for kv in status.values:
                if kv.key == "compute_time_mean_us" and kv.value != "nan":
                    self.compute_us.append(float(kv.value))

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def wait_for_controller(self) -> None:
        deadline = time.monotonic() + 90
        while self.pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        if self.pub.get_subscription_count() == 0:
            raise SystemExit("controller did not come up")

    def state(self, k: int):
        msg = self.JointState(name=NAMES, position=(Q + 1e-4 * np.sin(k)).tolist(),
                              velocity=[0.0] * 7)
        msg.header.stamp = self.node.get_clock().now().to_msg()
        return msg

    def warm_up(self) -> None:
        for k in range(200):  # compile caches, discovery settles
            self.pub.publish(self.state(k))
            self.executor.spin_once(timeout_sec=0.002)
        self.spin(0.5)

    def run(self, rate: float, seconds: float) -> dict:
        self.received.clear()
        self.compute_us.clear()
        sent: list[int] = []
        period_ns = int(1e9 / rate)
        t0 = time.perf_counter_ns() + 10_000_000
        for k in range(int(seconds * rate)):
            target = t0 + k * period_ns
            while True:
                now = time.perf_counter_ns()
                if now >= target:
                    break
                self.executor.spin_once(timeout_sec=min(2e-4, (target - now) / 1e9))
            msg = self.state(k)
            sent.append(time.perf_counter_ns())
            self.pub.publish(msg)
        self.spin(0.3)  # shorter than the controller's state_timeout: no watchdog command
        answered = len(self.received)
        span = (sent[-1] - sent[0]) / 1e9
        result = {
            "states_sent": len(sent), "commands_received": answered,
            "answered_fraction": answered / len(sent),
            "achieved_publish_rate_hz": (len(sent) - 1) / span,
        }
        # FIFO matching (command j answers state j) is exact only when every state got exactly
        # one command; otherwise the latencies are not reported (the fraction still is)
        lat = (np.array(self.received[:len(sent)]) - np.array(sent[:answered])) / 1e6
        valid = answered == len(sent) and lat.min() > 0
        for key, pct in (("p50", 50), ("p99", 99), ("p999", 99.9)):
            result[f"latency_{key}_ms"] = float(np.percentile(lat, pct)) if valid else None
        result["latency_max_ms"] = float(lat.max()) if valid else None
        # the controller's own cycle time (state in to end of cycle, observer included)
        result["compute_time_mean_us"] = float(np.median(self.compute_us[1:])) \
            if len(self.compute_us) > 1 else None
        return result

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.shutdown()


def row(label: str, r: dict) -> str:
    def ms(x, width):
        return f"{x:>{width}.3f}" if x is not None else f"{'n/a':>{width}}"

    return (f"{label:>10}{r['states_sent']:>8}{100 * r['answered_fraction']:>9.2f}%"
            f"{ms(r['latency_p50_ms'], 9)}{ms(r['latency_p99_ms'], 9)}"
            f"{ms(r['latency_p999_ms'], 10)}{ms(r['latency_max_ms'], 9)}")


HEADER = (f"{'':>10}{'sent':>8}{'answered':>10}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}"
          f"{'max ms':>9}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration per rate [s]")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0], help="[Hz]")
    parser.add_argument("--soak-minutes", type=int, default=0,
                        help="soak at 1 kHz for this many minutes (per-minute table)")
    parser.add_argument("--first-launch", action="store_true",
                        help="seconds from process start to the first command, fresh and warm")
    parser.add_argument("--before", help="git revision whose controller runs interleaved")
    parser.add_argument("--rounds", type=int, default=3, help="rounds with --before")
    parser.add_argument("--publish-jacobians", choices=("true", "false"), default="true")
    parser.add_argument("--passive-joints", default="[joint2,joint4]",
                        help="the controller's passive_joints ('[\"\"]': none)")
    parser.add_argument("--observer-gain", type=float, default=None,
                        help="this checkout's controller's observer_gain (default: its default, "
                        "50; 0: off); a --before revision keeps its own")
    parser.add_argument("--param", action="append", default=[], metavar="NAME:=VALUE",
                        help="another parameter of this checkout's controller (repeatable), "
                        "e.g. safety_limits:=false to time it without a stage")
    parser.add_argument("--pin", action="store_true",
                        help="this process on CPU 0, the controller on CPU 1 (taskset)")
    parser.add_argument("--callback", action="store_true",
                        help="time the controller's state callback without DDS (see above)")
    parser.add_argument("--calls", type=int, default=5000, help="states per --callback round")
    parser.add_argument("--callback-child", choices=("before", "after"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(ROOT / "bench/results"))
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be >= 1")
    os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 50)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    if args.callback_child:
        return callback_child(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.callback:
        return callback_compare(args, out)
    if args.pin:
        os.sched_setaffinity(0, {0})
    driver = Driver()
    try:
        if args.first_launch:
            return first_launch(args, driver, out)
        if args.soak_minutes:
            return soak(args, driver, out)
        if args.before:
            return compare(args, driver, out)
        controller = start_controller(args, None, int(60 + 2 * args.seconds * len(args.rates)))
        try:
            driver.wait_for_controller()
            results = {}
            for rate in args.rates:
                driver.warm_up()
                results[f"{rate:g}Hz"] = driver.run(rate, args.seconds)
        finally:
            stop(controller)
    finally:
        driver.close()
    print(HEADER)
    for rate, r in results.items():
        print(row(rate, r) + f"   cycle {r['compute_time_mean_us'] or float('nan'):.1f} us")
    (out / "node_latency.json").write_text(json.dumps(
        {"robot": "arm7, joints 2 and 4 passive", "publish_jacobians": args.publish_jacobians,
         "results": results}, indent=2))
    print(f"wrote {out / 'node_latency.json'}")
    return 0


def soak(args, driver: Driver, out: Path) -> int:
    controller = start_controller(args, None, 120 + 70 * args.soak_minutes)
    minutes = []
    try:
        driver.wait_for_controller()
        driver.warm_up()
        rss_start = rss_kb(controller)
        print(f"soak: 1 kHz for {args.soak_minutes} min; controller RSS at start "
              f"{rss_start} kB\n{'minute':>10}{HEADER[10:]}{'RSS kB':>10}", flush=True)
        for minute in range(1, args.soak_minutes + 1):
            r = driver.run(1000.0, 59.0)
            r["rss_kb"] = rss_kb(controller)
            minutes.append(r)
            print(row(str(minute), r) + f"{r['rss_kb']:>10}", flush=True)
        rss_end = rss_kb(controller)
    finally:
        stop(controller)
    sent = sum(r["states_sent"] for r in minutes)
    answered = sum(r["commands_received"] for r in minutes)
    print(f"total: {answered} of {sent} states answered; RSS {rss_start} -> {rss_end} kB")
    (out / "node_soak.json").write_text(json.dumps(
        {"robot": "arm7, joints 2 and 4 passive", "rate_hz": 1000,
         "publish_jacobians": args.publish_jacobians, "minutes": minutes,
         "states_sent": sent, "commands_received": answered, "rss_start_kb": rss_start,
         "rss_end_kb": rss_end}, indent=2))
    print(f"wrote {out / 'node_soak.json'}")
    return 0


def first_command_after(driver: Driver, controller: subprocess.Popen, started: float,
                        limit_s: float) -> float:
    """Seconds from ``started`` to the first effort command, states published at 100 Hz."""
    driver.received.clear()
    k = 0
    while not driver.received:
        if time.monotonic() - started > limit_s or controller.poll() is not None:
            raise SystemExit(f"no command within {limit_s} s (controller exit code "
                             f"{controller.poll()})")
        driver.pub.publish(driver.state(k))
        k += 1
        driver.spin(0.01)
    return time.monotonic() - started - (time.perf_counter_ns() - driver.received[0]) / 1e9


def worktree_sides(args, prefix: str) -> tuple[dict[str, Path | None], Path | None]:
    """The controllers to run: {"before": a temporary worktree of --before's revision, "after":
    None (this checkout)}, or {"after": None} without --before; and the worktree to remove."""
    if not args.before:
        return {"after": None}, None
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    subprocess.run(["git", "worktree", "add", "--detach", str(tmp), args.before], cwd=ROOT,
                   check=True, capture_output=True)
    return {"before": tmp, "after": None}, tmp


def remove_worktree(tmp: Path | None) -> None:
    if tmp is not None:
        subprocess.run(["git", "worktree", "remove", "--force", str(tmp)], cwd=ROOT,
                       capture_output=True)


def first_launch(args, driver: Driver, out: Path) -> int:
    """Process start -> first command, fresh cache then warm, per side, sides alternating."""
    sides, tmp = worktree_sides(args, "first-launch-before-")
    runs: dict[str, dict[str, list[float]]] = {s: {"fresh": [], "warm": []} for s in sides}
    print(f"{'side':>8}{'cache':>8}{'first command s':>18}", flush=True)
    try:
        for k in range(args.rounds):
            order = list(sides) if k % 2 == 0 else list(sides)[::-1]
            for side in order:
                cache = tempfile.mkdtemp(prefix="numba-cache-")
                for state in ("fresh", "warm"):
                    started = time.monotonic()
                    controller = start_controller(args, sides[side], 400, cache)
                    try:
                        seconds = first_command_after(driver, controller, started, 300.0)
                    finally:
                        stop(controller)
                    runs[side][state].append(seconds)
                    print(f"{side:>8}{state:>8}{seconds:>18.2f}", flush=True)
                    driver.spin(2.0)  # the old controller leaves the graph
    finally:
        remove_worktree(tmp)
    median = {side: {state: float(np.median(v)) for state, v in r.items()}
              for side, r in runs.items()}
    print(f"\nmedian over {args.rounds} round(s): " + "; ".join(
        f"{side} fresh {m['fresh']:.1f} s, warm {m['warm']:.2f} s" for side, m in median.items()))
    (out / "first_launch.json").write_text(json.dumps(
        {"before": args.before, "rounds": args.rounds, "runs": runs, "median": median},
        indent=2))
    print(f"wrote {out / 'first_launch.json'}")
    return 0


def callback_child(args) -> int:
    """``--callback-child SIDE``: build the controller importable in this process (the side's
    tree first on PYTHONPATH), hand it ``--calls`` states directly, print one JSON line."""
    import rclpy
    from sensor_msgs.msg import JointState

    from underactuated_control.nodes.hybrid_dynamics_controller import (
        HybridDynamicsController,
    )

    rclpy.init(args=["callback_bench", *controller_arguments(args,
                                                             args.callback_child == "after")])
    node = HybridDynamicsController()
    published: list[float] = []
    publish = node.command_pub.publish

    def timed_publish(msg) -> None:
        published.append(time.perf_counter())
        publish(msg)

    node.command_pub.publish = timed_publish

    def state(k: int) -> JointState:
        msg = JointState(name=NAMES, position=(Q + 1e-4 * np.sin(k)).tolist(),
                         velocity=[0.0] * 7)
        msg.header.stamp = node.get_clock().now().to_msg()
        return msg

    for k in range(300):  # first calls: caches, allocations
        node._on_joint_states(state(k))
    to_command, whole = [], []
    for k in range(args.calls):
        msg = state(k)
        published.clear()
        start = time.perf_counter()
        node._on_joint_states(msg)
        end = time.perf_counter()
        if len(published) != 1:
            raise SystemExit(f"state {k}: {len(published)} effort commands, expected 1")
        to_command.append(published[0] - start)
        whole.append(end - start)
    node.destroy_node()
    rclpy.shutdown()
    print(json.dumps({"calls": args.calls,
                      "to_command_p50_us": 1e6 * float(np.median(to_command)),
                      "callback_p50_us": 1e6 * float(np.median(whole)),
                      "callback_p99_us": 1e6 * float(np.percentile(whole, 99))}))
    return 0


def callback_compare(args, out: Path) -> int:
    """The callback's own time (no DDS), each side in a fresh process, sides alternating."""
    sides, tmp = worktree_sides(args, "callback-before-")
    child = ["--calls", str(args.calls), "--passive-joints", args.passive_joints,
             "--publish-jacobians", args.publish_jacobians]
    if args.observer_gain is not None:
        child += ["--observer-gain", str(args.observer_gain)]
    for assignment in args.param:
        child += ["--param", assignment]
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    print(f"{'side':>8}{'to command us':>15}{'callback us':>13}{'p99 us':>9}", flush=True)
    try:
        for k in range(args.rounds + 1):  # round 0 untimed: a new worktree compiles
            order = list(sides) if k % 2 == 0 else list(sides)[::-1]
            for side in order:
                env = {key: v for key, v in os.environ.items()
                       if key != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
                if sides[side] is not None:
                    env["PYTHONPATH"] = str(sides[side])
                pin = ["taskset", "-c", "1"] if args.pin else []
                done = subprocess.run([*pin, sys.executable, str(Path(__file__).resolve()),
                                       "--callback-child", side, *child], env=env,
                                      cwd=sides[side] or ROOT, capture_output=True, text=True,
                                      timeout=900)
                if done.returncode != 0:
                    raise SystemExit(f"{side}: callback bench failed: "
                                     f"{(done.stderr or done.stdout).strip()[-400:]}")
                r = json.loads(done.stdout.strip().splitlines()[-1])
                label = side if k else f"{side} (untimed)"
                print(f"{label:>8}{r['to_command_p50_us']:>15.1f}{r['callback_p50_us']:>13.1f}"
                      f"{r['callback_p99_us']:>9.1f}", flush=True)
                if k:
                    runs[side].append(r)
    finally:
        remove_worktree(tmp)
    median = {side: {key: float(np.median([r[key] for r in rs])) for key in rs[0]}
              for side, rs in runs.items()}
    print(f"\nmedian over {args.rounds} rounds of {args.calls} calls"
          + (f" ({args.before} = before, this checkout = after)" if args.before else ""))
    for side, m in median.items():
        print(f"{side:>8}{m['to_command_p50_us']:>15.1f}{m['callback_p50_us']:>13.1f}"
              f"{m['callback_p99_us']:>9.1f}")
    if args.before:
        b, a = median["before"], median["after"]
        print(f"{'ratio':>8}{a['to_command_p50_us'] / b['to_command_p50_us']:>15.3f}"
              f"{a['callback_p50_us'] / b['callback_p50_us']:>13.3f}"
              f"{a['callback_p99_us'] / b['callback_p99_us']:>9.3f}")
    (out / "callback_time.json").write_text(json.dumps(
        {"before": args.before, "rounds": args.rounds, "calls": args.calls, "runs": runs,
         "median": median}, indent=2))
    print(f"wrote {out / 'callback_time.json'}")
    return 0


def compare(args, driver: Driver, out: Path) -> int:
    """This checkout's controller and REV's, alternately (the machine is noisy)."""
    _, tmp = worktree_sides(args, "latency-before-")
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    try:
        for side in ("before", "after"):  # untimed: a new worktree's kernel cache is empty
            controller = start_controller(args, tmp if side == "before" else None, 330)
            try:
                seconds = first_command_after(driver, controller, time.monotonic(), 300.0)
                print(f"{side}: first command after {seconds:.1f} s (kernels compiled or "
                      "loaded; not timed)", flush=True)
            finally:
                stop(controller)
            driver.spin(2.0)
        for k in range(args.rounds):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            for side in order:
                controller = start_controller(args, tmp if side == "before" else None,
                                              int(90 + 2 * args.seconds * len(args.rates)))
                try:
                    driver.wait_for_controller()
                    for rate in args.rates:
                        driver.warm_up()
                        r = driver.run(rate, args.seconds)
                        r["rate_hz"] = rate
                        runs[side].append(r)
                        print(row(f"{side[:3]} {rate:g}", r), flush=True)
                finally:
                    stop(controller)
                driver.spin(2.0)  # the old controller leaves the graph
    finally:
        remove_worktree(tmp)
    print(f"\nmedian over {args.rounds} rounds ({args.before} = before, this checkout = after)")
    print(HEADER)
    summary = {}
    for side, rs in runs.items():
        for rate in args.rates:
            sel = [r for r in rs if r["rate_hz"] == rate]
            med = {key: float(np.median([r[key] for r in sel if r[key] is not None]))
                   for key in sel[0]}
            med["states_sent"] = int(med["states_sent"])
            summary[f"{side} {rate:g}Hz"] = med
            print(row(f"{side[:3]} {rate:g}", med))
    (out / "node_latency_compare.json").write_text(json.dumps(
        {"before": args.before, "rounds": args.rounds, "runs": runs, "median": summary},
        indent=2))
    print(f"wrote {out / 'node_latency_compare.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
