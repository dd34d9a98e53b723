"""``syncplan testbed up|run|down|status|check|plot``: the emulated cluster on the CLI."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncplan.testbed.loop_options import add_cost_model_args

RESULTS_DIR_NAME = "bench/results"


def register(subparsers: Any) -> None:
    tb = subparsers.add_parser(
        "testbed",
        help="emulated cluster: namespaces + shaped links",
        description="Emulate a cluster with network namespaces and tc.",
    )
    sub = tb.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", help="scenario name (bench/testbed/scenarios) or file")
        p.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="where state files live (default /run/syncplan-testbed, or "
            "$SYNCPLAN_TESTBED_STATE)",
        )

    def timing(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--sizes",
            default="1MiB,4MiB,16MiB,64MiB,256MiB",
            help="comma-separated buffer sizes (default %(default)s)",
        )
        p.add_argument("--reps", type=int, default=3, help="timed repetitions per size")
        p.add_argument("--warmup", type=int, default=0, help="untimed repetitions per size")

    def probe_duration(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--probe-duration",
            type=float,
            default=1.0,
            help="agents' seconds per probe direction (default 1)",
        )

    def outputs(p: argparse.ArgumentParser, name: str, keep: str, timeout: str = "") -> None:
        p.add_argument(
            "--out",
            type=Path,
            help=f"results JSON (default {RESULTS_DIR_NAME}/{name}-SCENARIO.json)",
        )
        p.add_argument("--plot", type=Path, help="plot PNG (default: results path with .png)")
        p.add_argument("--keep", action="store_true", help=keep)
        if timeout:
            p.add_argument("--timeout", type=float, default=None, help=timeout)

    p = sub.add_parser("up", help="create the namespaces, veths and shaped links")
    common(p)
    p.add_argument(
        "--check-links",
        type=float,
        metavar="SECONDS",
        default=None,
        help="then measure every link for SECONDS per direction",
    )
    p.add_argument(
        "--host-cmd",
        metavar="TEMPLATE",
        help="start this command in every host namespace; placeholders {host} "
        "{rank} {netns} {iface} {addr} {world} {service_addr} {prefix}",
    )
    p.add_argument(
        "--service-cmd",
        metavar="TEMPLATE",
        help="start this command in the service namespace (same placeholders)",
    )
    p.set_defaults(func=_wrap(_cmd_up))

    p = sub.add_parser("run", help="time all-reduce over the testbed (brought up if needed)")
    common(p)
    timing(p)
    p.add_argument(
        "--plans",
        nargs="*",
        type=Path,
        default=[],
        help="plan documents to time through the executor as well",
    )
    p.add_argument(
        "--check-links",
        type=float,
        metavar="SECONDS",
        default=None,
        help="measure every link first (SECONDS per direction); stored in results",
    )
    outputs(p, "testbed", "leave a testbed this run created up", "limit for the whole run, s")
    p.set_defaults(func=_wrap(_cmd_run))

    p = sub.add_parser(
        "loop",
        help="the whole loop: agents measure, the service plans, "
        "the executor runs; timed against gloo",
    )
    common(p)
    timing(p)
    p.add_argument(
        "--algorithms",
        default="ring,hierarchical,forest,auto",
        help="plans to fetch from the service (default %(default)s)",
    )
    probe_duration(p)
    add_cost_model_args(p)
    outputs(p, "testbed", "leave the testbed up at the end", "limit for the timed part, s")
    p.set_defaults(func=_wrap(_cmd_loop))

    p = sub.add_parser(
        "follow",
        help="a link degrades under a running job: the agents "
        "measure it, the service replans, the job switches; timed against gloo",
    )
    common(p)
    p.add_argument("--host", required=True, help="host whose link degrades (e.g. h3)")
    p.add_argument("--rate-mbit", type=float, required=True, help="its new rate, Mbit/s")
    p.add_argument("--size", default="8MiB", help="all-reduce buffer (default %(default)s)")
    p.add_argument("--healthy", type=float, default=30.0, help="seconds before the change")
    p.add_argument(
        "--degraded",
        type=float,
        default=20.0,
        help="seconds between the change and the agents' probe cycle",
    )
    p.add_argument("--after", type=float, default=40.0, help="seconds after the switch")
    probe_duration(p)
    outputs(p, "testbed-follow", "leave the testbed up at the end")
    p.set_defaults(func=_wrap(_cmd_follow))

    p = sub.add_parser("down", help="remove everything the testbed created")
    common(p)
    p.add_argument("--force", action="store_true", help="even if a runner seems to use it")
    p.set_defaults(func=_wrap(_cmd_down))

    p = sub.add_parser("status", help="print what exists of the testbed (JSON)")
    common(p)
    p.set_defaults(func=_wrap(_cmd_status))

    p = sub.add_parser("check", help="measure the shaped links of an up testbed")
    common(p)
    p.add_argument("--seconds", type=float, default=2.0, help="per direction")
    p.add_argument(
        "--messages",
        default="",
        metavar="SIZES",
        help="also time single messages of these sizes per link (e.g. "
        "4KiB,64KiB,1MiB) against their wire time at the shaped rate",
    )
    p.set_defaults(func=_wrap(_cmd_check))

    p = sub.add_parser(
        "plans",
        help="write plan documents from the scenario's shaped rates "
        "(development aid: the real loop plans from agents' measurements)",
    )
    p.add_argument("scenario")
    p.add_argument("--sizes", default="64MiB", help="comma-separated sizes")
    p.add_argument("--algorithms", default="ring,hierarchical,forest,auto")
    p.add_argument("--out-dir", type=Path, required=True)
    p.set_defaults(func=_wrap(_cmd_plans))

    p = sub.add_parser("plot", help="plot result files into one PNG")
    p.add_argument("results", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--speedups",
        action="store_true",
        help="bars of speed-up over gloo per scenario and size, and predictions",
    )
    p.set_defaults(func=_wrap(_cmd_plot))


def _wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn TestbedError into one message and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        from syncplan.testbed import TestbedError

        try:
            return fn(args)
        except TestbedError as exc:
            print(f"syncplan testbed: error: {exc}", file=sys.stderr)
            return 2

    return run


def _need_root() -> None:
    from syncplan.testbed import TestbedError
    from syncplan.testbed.netns import is_root

    if not is_root():
        raise TestbedError("needs root (network namespaces and tc)")


def _state_dir(args: argparse.Namespace) -> Path:
    from syncplan.testbed.state import DEFAULT_STATE_DIR

    return args.state_dir or DEFAULT_STATE_DIR


def _say(msg: str) -> None:
    print(msg, flush=True)


def _sigterm_as_interrupt() -> None:
    def handler(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def _check(state: Any, seconds: float) -> list[dict[str, Any]]:
    from syncplan.testbed.linkcheck import measure_links

    return [m.to_dict() for m in measure_links(state, seconds, progress=_say)]


def _cmd_up(args: argparse.Namespace) -> int:
    from syncplan.testbed import emulator
    from syncplan.testbed.scenario import load_scenario

    _need_root()
    scenario = load_scenario(args.scenario)
    state = emulator.up(scenario, _state_dir(args))
    _say(
        f"testbed {scenario.name} up: prefix {state.prefix}, {len(state.hosts)} hosts, "
        f"state {state.path}"
    )
    for h in state.hosts:
        _say(f"  {h.name}: netns {h.netns} iface {h.iface} addr {h.addr} {h.rate_mbit:g} Mbit/s")
    if args.check_links:
        _check(state, args.check_links)
    if args.service_cmd:
        emulator.spawn_template(state, args.service_cmd, "service", service=True)
    if args.host_cmd:
        emulator.spawn_template(state, args.host_cmd, "host")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import parse_size
    from syncplan.testbed import emulator
    from syncplan.testbed.runner import RunConfig, run_benchmark
    from syncplan.testbed.scenario import REPO_ROOT, load_scenario
    from syncplan.testbed.state import load_state, state_file

    _need_root()
    scenario = load_scenario(args.scenario)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    cfg = RunConfig(
        sizes=sizes, reps=args.reps, warmup=args.warmup, plans=args.plans, timeout_s=args.timeout
    )
    out = args.out or REPO_ROOT / RESULTS_DIR_NAME / f"testbed-{scenario.name}.json"
    _sigterm_as_interrupt()
    state = load_state(state_file(_state_dir(args), scenario.name))
    created = state is None or state.phase != "up"
    if created:
        state = emulator.up(scenario, _state_dir(args))
        _say(f"[{scenario.name}] testbed up: prefix {state.prefix}")
    else:
        emulator.ensure_unused(state)
        _say(f"[{scenario.name}] using the testbed already up (prefix {state.prefix})")
    assert state is not None
    state.processes.append(emulator.self_record("run"))
    state.save()
    try:
        links = _check(state, args.check_links) if args.check_links else None
        result = run_benchmark(state, scenario, cfg, out, progress=_say, links=links)
    finally:
        if created and not args.keep:
            removed = emulator.down(state)
            _say(f"[{scenario.name}] testbed down: removed {len(removed)} namespaces")
        else:
            emulator.kill_recorded(state, "run")
    _say(f"[{scenario.name}] results: {out}")
    rows = result["results"]
    extras = [f" (ring bound {e['ring_bound_s']:.3f} s)" for e in rows]
    return _report(scenario.name, result, rows, extras, args.plot or out.with_suffix(".png"))


def _cmd_loop(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import parse_size
    from syncplan.testbed.loop import LoopConfig, run_loop
    from syncplan.testbed.loop_options import cost_model_kwargs
    from syncplan.testbed.scenario import REPO_ROOT, load_scenario

    _need_root()
    scenario = load_scenario(args.scenario)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    algos = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    cfg = LoopConfig(
        sizes=sizes,
        reps=args.reps,
        warmup=args.warmup,
        algorithms=algos,
        probe_duration_s=args.probe_duration,
        run_timeout_s=args.timeout,
        **cost_model_kwargs(args),
    )
    out = args.out or REPO_ROOT / RESULTS_DIR_NAME / f"testbed-{scenario.name}.json"
    _sigterm_as_interrupt()
    result = run_loop(scenario, _state_dir(args), cfg, out, say=_say, keep=args.keep)
    _say(f"[{scenario.name}] results: {out}")
    for a in result["loop"]["agents"]:
        _say(
            f"  agent {a['host']}: measured {a['measured_mbit']} Mbit/s, shaped "
            f"{a['shaped_mbit']:g}"
        )
    extras = []
    for row in result["summary"]:
        extra = ""
        if "speedup_over_gloo" in row and row["algorithm"] != "gloo":
            extra += f", {row['speedup_over_gloo']:.2f}x gloo"
        if "measured_over_predicted" in row:
            extra += (
                f", predicted {row['predicted_time_s']:.3f} s "
                f"(measured/predicted {row['measured_over_predicted']:.2f})"
            )
        extras.append(extra)
    plot = args.plot or out.with_suffix(".png")
    return _report(scenario.name, result, result["summary"], extras, plot)


def _cmd_follow(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import parse_size
    from syncplan.testbed.follow import FollowConfig, plot_follow, run_follow
    from syncplan.testbed.scenario import REPO_ROOT, load_scenario

    _need_root()
    scenario = load_scenario(args.scenario)
    cfg = FollowConfig(
        host=args.host,
        rate_mbit=args.rate_mbit,
        size_bytes=parse_size(args.size),
        healthy_s=args.healthy,
        degraded_s=args.degraded,
        after_s=args.after,
        probe_duration_s=args.probe_duration,
    )
    out = args.out or REPO_ROOT / RESULTS_DIR_NAME / f"testbed-follow-{scenario.name}.json"
    _sigterm_as_interrupt()
    result = run_follow(scenario, _state_dir(args), cfg, out, say=_say, keep=args.keep)
    _say(f"[{scenario.name}] results: {out}")
    _say(f"  {'phase':<20} {'iterations':>10} {'plan s':>8} {'gloo s':>8} {'x gloo':>7}")
    for row in result["phases"]:
        _say(
            f"  {row['phase']:<20} {row['iterations']:>10} {row['plan_median_s']:>8.3f} "
            f"{row['gloo_median_s']:>8.3f} {row['speedup_over_gloo']:>7.2f}"
        )
    png = plot_follow(result, args.plot or out.with_suffix(".png"))
    _say(f"[{scenario.name}] plot: {png}")
    return 0 if result["correct"] else 1


def _report(name: str, result: dict, rows: list[dict], extras: list[str], plot: Path) -> int:
    """Say each row's median (``extras`` appended), plot the result, return the exit code."""
    from syncplan.testbed.plots import plot_results

    for row, extra in zip(rows, extras, strict=True):
        _say(
            f"  {row['size_bytes'] / 2**20:g} MiB {row['algorithm']}: median "
            f"{row['median_s']:.3f} s{extra}{'' if row['correct'] else ' WRONG'}"
        )
    _say(f"[{name}] plot: {plot_results([result], plot)}")
    return _exit_code(result, rows)


def _exit_code(result: dict, rows: list[dict]) -> int:
    """1 when a result is wrong, a run failed or runs are missing; reports the failures."""
    for f in result.get("failures", []):
        first = f["error"].splitlines()[0] if f["error"] else ""
        _say(f"  {f['size_bytes'] / 2**20:g} MiB {f['algorithm']}: FAILED ({first})")
    if result.get("incomplete"):
        _say(f"  incomplete: {result['incomplete']}")
    ok = (
        all(r["correct"] for r in rows)
        and not result.get("failures")
        and not result.get("incomplete")
    )
    return 0 if ok else 1


def _cmd_down(args: argparse.Namespace) -> int:
    from syncplan.testbed.emulator import down_by_name

    _need_root()
    name = _scenario_name(args.scenario)
    removed = down_by_name(_state_dir(args), name, force=args.force)
    _say(
        f"testbed {name}: removed {len(removed)} objects"
        if removed
        else f"testbed {name}: nothing recorded, nothing to remove"
    )
    return 0


def _scenario_name(arg: str) -> str:
    """The scenario's name; a bare valid name even if its file is gone (to clean up)."""
    from syncplan.testbed import TestbedError
    from syncplan.testbed.scenario import NAME_RE, load_scenario

    try:
        return load_scenario(arg).name
    except TestbedError:
        if NAME_RE.match(arg):
            return arg
        raise


def _cmd_status(args: argparse.Namespace) -> int:
    from syncplan.testbed import TestbedError
    from syncplan.testbed.emulator import status
    from syncplan.testbed.state import load_state, state_file

    name = _scenario_name(args.scenario)
    state = load_state(state_file(_state_dir(args), name))
    if state is None:
        raise TestbedError(f"testbed {name} is not up (no state in {_state_dir(args)})")
    print(json.dumps(status(state), indent=2))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from syncplan.testbed import TestbedError
    from syncplan.testbed.state import load_state, state_file

    _need_root()
    name = _scenario_name(args.scenario)
    state = load_state(state_file(_state_dir(args), name))
    if state is None or state.phase != "up":
        raise TestbedError(f"testbed {name} is not up; run `syncplan testbed up {name}`")
    _check(state, args.seconds)
    if args.messages:
        from syncplan.planner.sizes import parse_size
        from syncplan.testbed.linkcheck import measure_messages

        sizes = [parse_size(x) for x in args.messages.split(",") if x.strip()]
        measure_messages(state, sizes, progress=_say)
    return 0


def _cmd_plans(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import parse_size
    from syncplan.testbed import TestbedError
    from syncplan.testbed.runner import write_ground_truth_plans
    from syncplan.testbed.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    algos = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not write_ground_truth_plans(scenario, sizes, algos, args.out_dir, progress=_say):
        raise TestbedError("no plan could be made")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from syncplan.testbed import TestbedError
    from syncplan.testbed.plots import plot_results, plot_speedups

    try:
        results = [json.loads(p.read_text()) for p in args.results]
    except (OSError, ValueError) as exc:
        raise TestbedError(f"cannot read results: {exc}") from exc
    plot = plot_speedups if args.speedups else plot_results
    _say(f"plot: {plot(results, args.out)}")
    return 0
