"""/joint_states -> effort command latency of hybrid_dynamics_controller, two processes.

    .venv/bin/python bench/bench_node_latency.py [--seconds 10] [--rates 500 1000]

The controller runs in its own process (arm7, joints 2 and 4 passive, joint mode, J_G/J_D
publication on). This process publishes sensor_msgs/JointState at each rate from a busy-wait
schedule and matches each effort command to the oldest unanswered state (reliable QoS, FIFO).
Prints p50/p99 latency and the fraction of states answered; writes node_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration per rate [s]")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0], help="[Hz]")
    parser.add_argument("--publish-jacobians", choices=("true", "false"), default="true")
    parser.add_argument("--out", default=str(ROOT / "bench/results"))
    args = parser.parse_args()
    domain = 150 + os.getpid() % 50
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    cmd = ["timeout", "-k", "5", str(int(60 + 2 * args.seconds * len(args.rates))),
           str(Path(sys.executable).parent / "hybrid_dynamics_controller"), "--ros-args",
           "-p", f"urdf_path:={ROOT / 'urdf/arm7.urdf'}", "-p", "passive_joints:=[joint2,joint4]",
           "-p", "mode:=joint", "-p", "state_timeout:=1.0",
           "-p", f"publish_jacobians:={args.publish_jacobians}", "--log-level", "warn"]
    controller = subprocess.Popen(cmd, env=env)

    import rclpy
    from rclpy.experimental import EventsExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("latency_driver")
    executor = EventsExecutor()
    executor.add_node(node)
    received: list[int] = []
    node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                             lambda _m: received.append(time.perf_counter_ns()), 100)
    pub = node.create_publisher(JointState, "/joint_states", 100)
    names = [f"joint{i}" for i in range(1, 8)]
    q = np.array([0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5])
    results = {}
    try:
        deadline = time.monotonic() + 60
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        if pub.get_subscription_count() == 0:
            raise SystemExit("controller did not come up")
        for rate in args.rates:
            # warm-up: compile caches, discovery settles
            for _ in range(200):
                msg = JointState(name=names, position=q.tolist(), velocity=[0.0] * 7)
                msg.header.stamp = node.get_clock().now().to_msg()
                pub.publish(msg)
                executor.spin_once(timeout_sec=0.002)
            end_warm = time.monotonic() + 0.5
            while time.monotonic() < end_warm:
                executor.spin_once(timeout_sec=0.01)
            received.clear()
            sent: list[int] = []
            period_ns = int(1e9 / rate)
            n = int(args.seconds * rate)
            t0 = time.perf_counter_ns() + 10_000_000
            for k in range(n):
                target = t0 + k * period_ns
                while True:
                    now = time.perf_counter_ns()
                    if now >= target:
                        break
                    executor.spin_once(timeout_sec=min(2e-4, (target - now) / 1e9))
                msg = JointState(name=names, position=(q + 1e-4 * np.sin(k)).tolist(),
                                 velocity=[0.0] * 7)
                msg.header.stamp = node.get_clock().now().to_msg()
                sent.append(time.perf_counter_ns())
                pub.publish(msg)
            drain = time.monotonic() + 1.0
            while time.monotonic() < drain:
                executor.spin_once(timeout_sec=0.01)
            m = min(len(sent), len(received))
            lat = (np.array(received[:m]) - np.array(sent[:m])) / 1e6
            span = (sent[-1] - sent[0]) / 1e9
            results[f"{rate:g}Hz"] = {
                "states_sent": len(sent), "commands_received": len(received),
                "answered_fraction": len(received) / len(sent),
                "achieved_publish_rate_hz": (len(sent) - 1) / span,
                "latency_p50_ms": float(np.percentile(lat, 50)),
                "latency_p99_ms": float(np.percentile(lat, 99)),
                "latency_max_ms": float(lat.max()),
            }
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown()
        controller.send_signal(signal.SIGINT)
        try:
            controller.wait(10)
        except subprocess.TimeoutExpired:
            controller.kill()

    print(f"{'rate':>8}{'sent':>8}{'answered':>10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for rate, r in results.items():
        print(f"{rate:>8}{r['states_sent']:>8}{100 * r['answered_fraction']:>9.2f}%"
              f"{r['latency_p50_ms']:>9.3f}{r['latency_p99_ms']:>9.3f}{r['latency_max_ms']:>9.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "node_latency.json").write_text(json.dumps(
        {"robot": "arm7, joints 2 and 4 passive", "publish_jacobians": args.publish_jacobians,
         "results": results}, indent=2))
    print(f"wrote {out / 'node_latency.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
