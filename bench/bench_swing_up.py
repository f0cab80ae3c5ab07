"""The swing-up matrix: acrobot and pendubot, several mass/length sets and passive damping,
from hanging at rest, 10 s, scored like the public double-pendulum leaderboards. Columns:
ok = the leaderboard's success (tip above 90 % of its full height from the swing-up time on),
held = also within 0.1 rad of upright from 1 s after the swing-up to the end; the criteria and
the score (0 unless ok).

    .venv/bin/python bench/bench_swing_up.py                 # MuJoCo stepped in-process
    .venv/bin/python bench/bench_swing_up.py --dds           # over DDS: mujoco_sim + controller
    .venv/bin/python bench/bench_swing_up.py --damping 0 0.01 0.02 0.05   # passive damping sweep
    .venv/bin/python bench/bench_swing_up.py --tune pendubot --latency 0 --minutes 10  # re-tune
    .venv/bin/python bench/bench_swing_up.py --perturb 10 --spread 0.1  # robots near each set
    .venv/bin/python bench/bench_swing_up.py --strategy planned --perturb 10 --variants \
        design_c1 --latencies 0 5 10 --noises 0 0.1     # the robustness board's axes
    .venv/bin/python bench/bench_swing_up.py --strategy planned --knockdown 60  # uptime
    .venv/bin/python bench/bench_swing_up.py --tune-plan pendubot --trials 60  # (P1) weights
    .venv/bin/python bench/bench_swing_up.py --strategy planned --push-sweep  # one push each

Offline, the law runs in this process against MuJoCo (RK4, 2 ms), the torque it computes from
a state acting from that state on (``--latency`` steps later); with ``--dds`` each run is
``run_swing_up`` (two node processes, the simulator lock-stepped: the same loop as offline at
latency 0). Prints a table and writes swing_up.json (``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from underactuated_control import RobotModel  # noqa: E402
from underactuated_control.bringup import ROOT  # noqa: E402
from underactuated_control.scenarios.swing_up import (  # noqa: E402
    ROBOTS,
    robot_variants,
    run_swing_up,
    simulate_offline,
    summarize,
    two_link_urdf,
)


def run_one(robot: str, variant: str, damping: float, args, out_dir: Path) -> dict:
    params = dataclasses.replace(robot_variants()[variant], passive_damping=damping)
    name = f"{robot}_{variant}" + (f"_d{damping:g}" if damping else "")
    urdf = two_link_urdf(robot, params, name=name)
    path = out_dir / f"{name}.urdf"
    path.write_text(urdf)
    t0 = time.perf_counter()
    if args.dds:
        run_one.count = getattr(run_one, "count", 0) + 1  # a domain of its own per run
        domain = 150 + (os.getpid() + 7 * run_one.count) % 80
        summary = run_swing_up(robot, out_dir / f"{name}_{run_one.count}", duration=args.duration,
                               domain=domain, urdf_path=path, plot=True, bag=False,
                               overrides=args.settings,
                               log=lambda *_: None)
    else:
        r = simulate_offline(urdf, args.duration, settings=args.settings,
                             latency_steps=args.latency)
        model = RobotModel.from_urdf(urdf)
        summary = summarize(model, path, r["t"], r["q"], r["v"], r["tau"], args.duration)
        summary.update(switches=r["law"].switches, fallbacks=r["law"].fallbacks)
    summary.update(robot=robot, variant=variant, passive_damping=damping,
                   parameters=dataclasses.asdict(params), wall_s=time.perf_counter() - t0)
    return summary


def is_held(summary: dict) -> bool:
    """The leaderboard's success and the joints within 0.1 rad of upright from 1 s after the
    swing-up to the end (``summarize``'s fields)."""
    error = summary.get("max_error_from_1s_after_swing_up_rad")
    return bool(summary["score"]["success"] and error is not None and error < 0.1)


def perturbed(base, count: int, spread: float, rng) -> list:
    """``count`` copies of the TwoLink ``base`` with every length, centre-of-mass distance, mass
    and inertia scaled by an independent factor in [1 − spread, 1 + spread]."""
    fields = ("l1", "l2", "m1", "m2", "r1", "r2", "I1", "I2")
    return [dataclasses.replace(base, **{f: getattr(base, f) * (1 + spread * x)
                                         for f, x in zip(fields, rng.uniform(-1, 1, len(fields)))})
            for _ in range(count)]


def robustness(robots, variants, count: int, spread: float, latencies, settings: dict,
               out: Path, seed: int = 0, noises=(0.0,)) -> dict:
    """How often the defaults hold robots near each set (offline): ``count`` copies of each set
    with every mass, length, centre-of-mass distance and inertia scaled by an independent
    factor in [1 − spread, 1 + spread] (seeded), each at every latency (steps of 2 ms) and
    torque noise (standard deviation, N·m). Prints a row per robot/set/latency/noise (held
    count, median score) and writes the runs. The law is built for the nominal set (its
    model is the controller's), the simulated robot is the copy."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, runs = [], []
    print(f"robustness: {count} copies per set, each size within ±{100 * spread:g} %, "
          f"offline MuJoCo RK4 2 ms, 10 s; {settings or 'default settings'}")
    print(f"{'robot':<9}{'variant':<13}{'latency':>8}{'noise':>7} {'held':>8} "
          f"{'median score':>13}")
    for robot in robots:
        for variant in variants:
            nominal = two_link_urdf(robot, robot_variants()[variant])
            copies = perturbed(robot_variants()[variant], count, spread, rng)
            for latency in latencies:
                for noise in noises:
                    held, scores = 0, []
                    for k, params in enumerate(copies):
                        urdf = two_link_urdf(robot, params)
                        r = simulate_offline(urdf, 10.0, settings=settings,
                                             latency_steps=latency, stop_settled=True,
                                             torque_noise=noise, seed=k, law_urdf=nominal)
                        s = summarize(RobotModel.from_urdf(urdf), "", r["t"], r["q"], r["v"],
                                      r["tau"], 10.0)
                        ok = is_held(s)
                        held += ok
                        scores.append(s["score"]["score"] if ok else 0.0)
                        runs.append({"robot": robot, "variant": variant, "latency": latency,
                                     "noise": noise, "copy": k,
                                     "parameters": dataclasses.asdict(params),
                                     "held": ok, "score": s["score"]})
                    row = {"robot": robot, "variant": variant, "latency": latency,
                           "noise": noise, "held": held, "of": count,
                           "median_score": float(np.median(scores))}
                    rows.append(row)
                    print(f"{robot:<9}{variant:<13}{latency:>8}{noise:>7.2g} {held:>4}/{count:<3} "
                          f"{row['median_score']:13.3f}", flush=True)
    result = {"spread": spread, "count": count, "seed": seed, "settings": settings,
              "rows": rows, "runs": runs}
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return result


def knockdown(robots, duration: float, period: float, settings: dict, out: Path,
              seed: int = 0) -> dict:
    """Uptime under knocks (offline, design C.1): from hanging, a push every ``period`` s (a
    joint-velocity change of random direction, |Δv| uniform in [1, 3] rad/s, seeded);
    uptime = the share of the run with the tip above 90 % of its full height."""
    import numpy as np

    from underactuated_control.scoring import full_tip_height, tip_heights

    rows = []
    print(f"knockdown: {duration:g} s, a push every {period:g} s (|Δv| 1–3 rad/s, random "
          f"direction), offline MuJoCo RK4 2 ms; {settings or 'default settings'}")
    print(f"{'robot':<9}{'pushes':>7}{'uptime':>8}{'re-plans':>9}{'balanced at end':>16}")
    for robot in robots:
        rng = np.random.default_rng(seed)
        pushes = []
        for when in np.arange(period, duration, period):
            direction = rng.normal(size=2)
            pushes.append((float(when), rng.uniform(1.0, 3.0) * direction
                           / np.linalg.norm(direction)))
        urdf = two_link_urdf(robot)
        # re-plans solved at the request (repeatable; their solve time is not simulated: the
        # plan starts plan_replan_time after the request, as if solved within it)
        r = simulate_offline(urdf, duration, settings={**settings, "plan_replan_inline": True},
                             pushes=pushes)
        model = RobotModel.from_urdf(urdf)
        heights = tip_heights(model, r["q"], "tip")
        up = heights > 0.9 * full_tip_height(model, "tip")
        law = r["law"]
        row = {"robot": robot, "pushes": len(pushes), "uptime": float(up.mean()),
               "replans": int(getattr(law, "replans", 0)),
               "balanced_at_end": bool(r["balancing"][-1]),
               "pushes_dv": [[float(t), *map(float, dv)] for t, dv in pushes]}
        rows.append(row)
        print(f"{robot:<9}{row['pushes']:>7}{row['uptime']:8.3f}{row['replans']:>9}"
              f"{'yes' if row['balanced_at_end'] else 'no':>16}", flush=True)
    result = {"duration": duration, "period": period, "seed": seed, "settings": settings,
              "rows": rows}
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return result


def push_sweep(robots, settings: dict, out: Path) -> dict:
    """From balanced upright (design C.1, 4 s after the swing-up began), one push of 0.5, 1, 2
    or 3 rad/s in each of four directions of joint-velocity space; recovered = balancing at
    the end of 10 s (re-plans solved at the request)."""
    import numpy as np

    rows = []
    print(f"{'robot':<9}{'Δv rad/s':>16}{'re-plans':>9}{'balancing again at s':>21}")
    for robot in robots:
        urdf = two_link_urdf(robot)
        for magnitude in (0.5, 1.0, 2.0, 3.0):
            for angle in (0.3, 1.9, 3.5, 5.1):
                dv = magnitude * np.array([np.cos(angle), np.sin(angle)])
                r = simulate_offline(urdf, 10.0, {**settings, "plan_replan_inline": True},
                                     pushes=[(4.0, dv)])
                t, balancing = r["t"], r["balancing"].astype(bool)
                after = t > 4.01
                back = float(t[after][np.argmax(balancing[after])]) \
                    if balancing[-1] and balancing[after].any() else None
                rows.append({"robot": robot, "dv": dv.tolist(), "back_at": back,
                             "replans": int(r["law"].replans)})
                print(f"{robot:<9}{np.array2string(dv, precision=2):>16}{rows[-1]['replans']:>9}"
                      f"{'—' if back is None else f'{back:.2f}':>21}", flush=True)
        done = [x for x in rows if x["robot"] == robot]
        print(f"{robot}: recovered {sum(x['back_at'] is not None for x in done)} of {len(done)}")
    out.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return {"rows": rows}


PLAN_TUNED = ("plan_horizon", "plan_state_weight", "plan_velocity_weight", "plan_torque_weight",
              "plan_rate_weight", "plan_terminal_weight")


def tune_plan(robot: str, iterations: int, out: Path, seed: int = 0) -> dict:
    """(1+1)-ES on the logarithms of the planned strategy's (P1) parameters (``PLAN_TUNED``,
    from the kind's defaults), maximising the leaderboard score of design C.1 offline (MuJoCo
    RK4 2 ms, 10 s; a fresh plan per trial, cached in ``<out>.plans``)."""
    import numpy as np

    from underactuated_control.control.swing_up_law import PLAN_DEFAULTS
    from underactuated_control.scoring import full_tip_height, score_run, tip_heights

    urdf = two_link_urdf(robot)
    model = RobotModel.from_urdf(urdf)
    full = full_tip_height(model, "tip")
    fixed = {"swing_up_strategy": "planned", "plan_cache_dir": str(out.with_suffix(".plans")),
             "plan_dt": PLAN_DEFAULTS[robot]["plan_dt"]}

    def settings(x) -> dict:
        return {**fixed, **{n: float(10 ** v) for n, v in zip(PLAN_TUNED, x)}}

    def evaluate(x) -> float:
        try:
            r = simulate_offline(urdf, 10.0, settings(x))
        except (ValueError, RuntimeError, np.linalg.LinAlgError):
            return 0.0
        return score_run(r["t"], r["q"], r["v"], r["tau"], tip_heights(model, r["q"], "tip"),
                         full)["score"]

    rng = np.random.default_rng(seed)
    best_x = np.log10([PLAN_DEFAULTS[robot][n] for n in PLAN_TUNED])
    best = evaluate(best_x)
    print(f"tune-plan {robot}: start {best:.4f}", flush=True)
    sigma = np.full(best_x.size, 0.15)
    for k in range(iterations):
        x = best_x + sigma * rng.normal(size=best_x.size)
        f = evaluate(x)
        if f > best:
            best, best_x, sigma = f, x, sigma * 1.5
            print(f"  trial {k + 1}: {best:.4f} {settings(best_x)}", flush=True)
        else:
            sigma = np.maximum(sigma * 0.9, 0.02)
    result = {"robot": robot, "score": best, "settings": settings(best_x), "seed": seed}
    out.write_text(json.dumps(result, indent=2))
    print(f"best {best:.4f}; wrote {out}")
    return result


TUNED = ("swing_power_gain", "swing_ke", "swing_kp", "swing_damping", "swing_torque_fraction",
         "swing_kick", "lock_energy_tolerance", "lqr_roa_scale", "swing_torque_rate",
         "lqr_torque_rate", "lqr_r_torque")


def tune(robot: str, minutes: float, out: Path, seed: int = 0, start_from: dict | None = None,
         sigma: float = 0.15, latency: int = 0, copies: int = 0, damped: float = 0.0) -> dict:
    """(1+1)-ES with the 1/5 success rule, in log space, on the kind's gains: the mean score
    over the three mass/length sets, each with its torque ``latency`` steps late (0: what the
    lock-stepped simulation gives) and one step later, and ``copies`` robots near each set
    (sizes within ±5 %, seed 1, at ``latency``) — so that the gains do not hang on one exact
    trajectory; with ``damped`` > 0 also each set with that passive damping [N·m·s/rad];
    −0.5 for a case not held within 0.1 rad. Starts from the kind's current defaults (or
    ``start_from``)."""
    import numpy as np

    from underactuated_control.control.swing_up_law import KIND_DEFAULTS, SwingUpLaw

    defaults = {sp.name: sp.default for sp in SwingUpLaw.parameters}
    x = np.array([KIND_DEFAULTS[robot].get(k, defaults[k]) for k in TUNED], float)
    start = {"swing_torque_rate": 5.0, "lqr_torque_rate": 10.0,  # where 0 (none) is the default
             "swing_power_gain": 1.0}
    x = np.array([start.get(k, v) if v <= 0.0 else v for k, v in zip(TUNED, x)])
    if start_from:
        x = np.array([start_from.get(k, v) for k, v in zip(TUNED, x)])
    cases = [(v, k) for v in robot_variants() for k in (latency, latency + 1)]
    urdfs = {v: two_link_urdf(robot, robot_variants()[v]) for v in robot_variants()}
    rng = np.random.default_rng(1)
    for v in robot_variants():
        for k, params in enumerate(perturbed(robot_variants()[v], copies, 0.05, rng)):
            urdfs[f"{v}~{k}"] = two_link_urdf(robot, params)
            cases.append((f"{v}~{k}", latency))
        if damped > 0.0:
            urdfs[f"{v}+d"] = two_link_urdf(robot, dataclasses.replace(
                robot_variants()[v], passive_damping=damped))
            cases.append((f"{v}+d", latency))
    models = {v: RobotModel.from_urdf(u) for v, u in urdfs.items()}

    def evaluate(x) -> tuple[float, list]:
        settings = dict(zip(TUNED, map(float, x)))
        total, rows = 0.0, []
        for variant, latency in cases:
            try:
                r = simulate_offline(urdfs[variant], 10.0, settings=settings,
                                     latency_steps=latency, stop_settled=True, give_up=8.5)
            except ValueError:
                return -1.0, []
            if r["gave_up"]:
                total -= 0.5
                rows.append((variant, latency, -0.5))
                continue
            s = summarize(models[variant], "", r["t"], r["q"], r["v"], r["tau"], 10.0)
            held = is_held(s)
            value = s["score"]["score"] if held else -0.5
            total += value
            rows.append((variant, latency, round(value, 4)))
        return total / len(cases), rows

    rng = np.random.default_rng(seed)
    best, rows = evaluate(x)
    print(f"start {best:.4f} {rows}", flush=True)
    end, n = time.monotonic() + 60.0 * minutes, 0
    while time.monotonic() < end:
        n += 1
        y = x * np.exp(sigma * rng.normal(size=x.size))
        value, yrows = evaluate(y)
        if value > best:
            x, best, rows = y, value, yrows
            sigma *= 1.5
            print(f"{n:4d} {best:.4f} σ {sigma:.3f} {dict(zip(TUNED, np.round(x, 4)))} {rows}",
                  flush=True)
        else:
            sigma = max(0.02, sigma * 1.5 ** -0.25)
    result = {"robot": robot, "objective": best, "cases": rows, "evaluations": n,
              "settings": dict(zip(TUNED, map(float, x)))}
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=ROBOTS)
    parser.add_argument("--variants", nargs="+", default=list(robot_variants()),
                        choices=list(robot_variants()))
    parser.add_argument("--damping", nargs="+", type=float, default=[0.0],
                        help="passive joint damping values [N·m·s/rad]")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--latency", type=int, default=0, help="offline: steps of delay")
    parser.add_argument("--dds", action="store_true", help="closed loop over DDS")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case")
    parser.add_argument("--out", type=Path, default=Path("swing_up.json"))
    parser.add_argument("--tune", choices=ROBOTS, help="tune this kind's defaults "
                        "((1+1)-ES, offline) instead of running the matrix")
    parser.add_argument("--minutes", type=float, default=10.0, help="--tune: time budget")
    parser.add_argument("--start", type=Path, help="--tune: start from this tune's JSON")
    parser.add_argument("--sigma", type=float, default=0.15, help="--tune: first step (log)")
    parser.add_argument("--seed", type=int, default=0, help="--tune: random seed")
    parser.add_argument("--copies", type=int, default=0, help="--tune: also this many robots "
                        "near each set (sizes within ±5 %%)")
    parser.add_argument("--damped", type=float, default=0.0, help="--tune: also each set with "
                        "this passive damping [N·m·s/rad]")
    parser.add_argument("--perturb", type=int, metavar="N", help="robustness instead of the "
                        "matrix: N copies of each set with its sizes scaled by up to ±--spread, "
                        "offline, at each --latencies")
    parser.add_argument("--spread", type=float, default=0.1, help="--perturb: largest relative "
                        "change of each size")
    parser.add_argument("--latencies", type=int, nargs="+", default=[0, 1],
                        help="--perturb: steps of delay")
    parser.add_argument("--tune-plan", choices=ROBOTS, help="search the planned strategy's "
                        "(P1) parameters for the score of design C.1 instead of the matrix")
    parser.add_argument("--trials", type=int, default=60, help="--tune-plan: trials")
    parser.add_argument("--noises", type=float, nargs="+", default=[0.0],
                        help="--perturb: torque noise standard deviations [N·m]")
    parser.add_argument("--knockdown", type=float, metavar="SECONDS", help="uptime under "
                        "knocks instead of the matrix: a run this long from hanging, design C.1")
    parser.add_argument("--period", type=float, default=4.0, help="--knockdown: seconds "
                        "between pushes")
    parser.add_argument("--push-sweep", action="store_true", help="one push from balanced "
                        "upright, 16 magnitudes and directions, instead of the matrix")
    parser.add_argument("--strategy", choices=("energy", "planned"),
                        help="the swing-up strategy (swing_up_strategy)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="law parameters for the runs of the matrix")
    args = parser.parse_args(argv)
    if args.tune:
        start = json.loads(args.start.read_text())["settings"] if args.start else None
        tune(args.tune, args.minutes, args.out, seed=args.seed, start_from=start,
             sigma=args.sigma, latency=args.latency, copies=args.copies, damped=args.damped)
        return 0
    if args.tune_plan:
        tune_plan(args.tune_plan, args.trials, args.out, seed=args.seed)
        return 0
    args.settings = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if not name or not value:
            parser.error(f"--set: {item!r} is not NAME=VALUE")
        try:
            args.settings[name] = float(value)
        except ValueError:
            args.settings[name] = value
    if args.strategy:
        args.settings["swing_up_strategy"] = args.strategy
    if args.perturb:
        robustness(args.robots, args.variants, args.perturb, args.spread, args.latencies,
                   args.settings, args.out, noises=args.noises)
        return 0
    if args.push_sweep:
        push_sweep(args.robots, args.settings, args.out)
        return 0
    if args.knockdown:
        knockdown(args.robots, args.knockdown, args.period, args.settings, args.out)
        return 0
    out_dir = args.out.with_suffix("")
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    head = (f"{'robot':<9}{'variant':<13}{'damp':>6} {'ok':>3} {'held':>4} {'t_up s':>7} "
            f"{'E J':>7} {'∫τ² ':>7} {'std Δτ':>8} {'∫v² ':>7} {'score':>6} {'final':>7}")
    print(f"swing-up matrix ({'DDS' if args.dds else 'offline MuJoCo'}, RK4 2 ms, "
          f"{args.duration:g} s)\n{head}")
    for robot in args.robots:
        for variant in args.variants:
            for damping, _ in [(d, k) for d in args.damping for k in range(args.repeat)]:
                s = run_one(robot, variant, damping, args, out_dir)
                results.append(s)
                c = s["score"]
                s["held"] = is_held(s)
                t_up = f"{c['swingup_time']:7.2f}" if c["success"] else "      —"
                print(f"{robot:<9}{variant:<13}{damping:6.3g} {'yes' if c['success'] else 'no':>3}"
                      f" {'yes' if s['held'] else 'no':>4} {t_up} {c['energy']:7.2f} "
                      f"{c['torque_cost']:7.2f} "
                      f"{c['torque_smoothness']:8.4f} {c['velocity_cost']:7.1f} "
                      f"{c['score']:6.3f} {s['final_error_rad']:7.4f}", flush=True)
    args.out.write_text(json.dumps({"mode": "dds" if args.dds else "offline",
                                    "duration": args.duration, "latency_steps": args.latency,
                                    "repository": str(ROOT), "runs": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
