"""``syncplan sweep``: predicted (and with ``--run N`` measured) time, algbw and busbw of every
algorithm over a range of sizes, like nccl-tests' ``-b 8 -e 1G -f 2`` (docs/sweep.md)."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from syncplan.core.errors import CLIError
from syncplan.extras import install_hint

COST_FLAGS = (
    ("--min-step-us", float, "least time of a step (default 0)"),
    ("--message-overhead-us", float, "all-reduce: time per message end in a step (default 0)"),
    ("--message-cores", int, "all-reduce: CPU cores the ranks share (default 0: one each)"),
    ("--exchange-overhead-us", float, "all-reduce: time per exchanged message end (default 0)"),
    ("--switch-overhead", float, "all-reduce: fraction of a switched transfer's wire time"),
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="predicted (and measured) time and bandwidth over a range of sizes",
        description="Price every algorithm at sizes --from, --from x --factor, ... up to "
        "--to (nccl-tests' -b/-e/-f) and print time, algbw and busbw (GB/s, nccl-tests' "
        "definitions); --run N also times each plan and torch's own collective in N "
        "local gloo processes. See docs/sweep.md.",
    )
    p.add_argument("--topology", "-t", required=True, help="topology file (.json, .yaml)")
    p.add_argument(
        "--ranks", default="all", help="'all' or comma-separated endpoint ids (default all)"
    )
    p.add_argument("--from", "-b", dest="lo", default="8", help="first size (default 8)")
    p.add_argument("--to", "-e", dest="hi", default="256MiB", help="last size (default 256MiB)")
    p.add_argument("--factor", "-f", type=int, default=2, help="size multiplier (default 2)")
    p.add_argument(
        "--algorithms",
        "-a",
        default=None,
        help="comma-separated: auto and any of plan --compare's (default: all of them)",
    )
    p.add_argument(
        "--collective",
        default="allreduce",
        choices=("allreduce", "reducescatter", "allgather"),
        help="the collective (default allreduce)",
    )
    p.add_argument("--shards", default="equal", choices=("equal", "any"), help="as plan's")
    for flag, kind, text in COST_FLAGS:
        p.add_argument(flag, type=kind, default=0, help=text)
    p.add_argument("--effort", default="fast", choices=("fast", "thorough"), help="as plan's")
    p.add_argument("--json", dest="json_path", help="write the sweep document here (JSON)")
    p.add_argument("--plot", help="write busbw against size here (PNG; needs the plot extra)")
    p.add_argument(
        "--run",
        type=int,
        default=0,
        metavar="N",
        help="also measure every plan and torch's collective in N local gloo processes "
        "(N: the number of ranks; needs the executor extra)",
    )
    p.add_argument("--repeat", type=int, default=5, help="--run: timed calls (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="--run: untimed calls (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="--run: seconds (default 600)")
    p.add_argument(
        "--progress",
        action="store_true",
        help="one line per size on stderr (default: when stderr is a terminal or with --run)",
    )
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from syncplan.planner.cli import plan_options
    from syncplan.planner.sizes import format_size, parse_size
    from syncplan.planner.sweep import (
        default_algorithms,
        parse_algorithms,
        predict_sweep,
        sweep_sizes,
    )
    from syncplan.planner.topology import load_topology

    options = plan_options(args)
    algorithms = parse_algorithms(args.algorithms) if args.algorithms else default_algorithms()
    cap = None
    if args.run:
        from syncplan.executor.sweep_run import MAX_RUN_BYTES

        cap = MAX_RUN_BYTES
        if args.repeat < 1 or args.warmup < 0 or not args.timeout > 0:
            raise CLIError("--repeat must be >= 1, --warmup >= 0, --timeout > 0")
    lo, hi = parse_size(args.lo), parse_size(args.hi)
    sizes = sweep_sizes(lo, hi, args.factor, *(() if cap is None else (cap,)))
    if args.plot:
        _check_plot(args.plot)
    topo = load_topology(args.topology)
    ranks = topo.resolve_ranks(args.ranks)
    if args.run and args.run != len(ranks):
        raise CLIError(
            f"--run {args.run} does not match the {len(ranks)} ranks selected; "
            "pick that many with --ranks"
        )
    show = args.progress or bool(args.run) or sys.stderr.isatty()

    def on_size(i: int, count: int, size: int, secs: float) -> None:
        if show:
            print(f"priced {i + 1}/{count}: {format_size(size)} ({secs:.2f} s)", file=sys.stderr)

    doc = predict_sweep(
        topo,
        ranks,
        sizes,
        algorithms,
        args.collective,
        options=options,
        shards=args.shards,
        on_size=on_size,
    )
    doc["topology"] = args.topology
    if args.run:
        _measure(doc, topo, args, options, show)
    print(render(doc))
    if args.json_path:
        from syncplan.core.atomic import atomic_write_json

        atomic_write_json(args.json_path, doc)
        print(f"wrote {args.json_path}")
    if args.plot:
        plot_sweep(doc, args.plot)
        print(f"wrote {args.plot}")
    return 0 if all(p.get("correct", True) for p in doc["points"]) else 1


def _measure(
    doc: dict[str, Any], topo: Any, args: argparse.Namespace, options: Any, show: bool
) -> None:
    """Add the measured time, algbw and busbw to every feasible point, and a "gloo" point
    per size (torch's own collective, timed beside the plans)."""
    from syncplan.executor.sweep_run import ELEMENT_BYTES, run_numel, run_sweep
    from syncplan.planner.plan import make_plan
    from syncplan.planner.sweep import bandwidths

    live = [p for p in doc["points"] if p["predicted_time_s"] is not None]
    plans = [
        (
            p["size_bytes"],
            make_plan(
                topo,
                doc["ranks"],
                p["size_bytes"],
                p["algorithm"],
                doc["collective"],
                options=options,
                shards=args.shards,
            ),
        )
        for p in live
    ]
    try:
        results = run_sweep(
            plans,
            args.run,
            repeat=args.repeat,
            warmup=args.warmup,
            timeout_s=args.timeout,
            progress=show,
        )
    except RuntimeError as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    n, coll = doc["nranks"], doc["collective"]
    native: dict[int, list[float]] = {}
    for p, res in zip(live, results, strict=True):
        nbytes = run_numel(p["size_bytes"]) * ELEMENT_BYTES
        algbw, busbw = bandwidths(coll, nbytes, res["plan_s"], n)
        p.update(
            measured_bytes=nbytes,
            measured_time_s=res["plan_s"],
            measured_algbw_GBps=algbw,
            measured_busbw_GBps=busbw,
            native_op=res["native_op"],
            native_time_s=res["native_s"],
            correct=res["correct"],
        )
        native.setdefault(p["size_bytes"], []).append(res["native_s"])
    points = []
    for size in doc["sizes"]:
        points += [p for p in doc["points"] if p["size_bytes"] == size]
        if size in native:
            t = statistics.median(native[size])
            nbytes = run_numel(size) * ELEMENT_BYTES
            algbw, busbw = bandwidths(coll, nbytes, t, n)
            points.append(
                {
                    "size_bytes": size,
                    "algorithm": "gloo",
                    "chosen": "gloo",
                    "predicted_time_s": None,
                    "predicted_algbw_GBps": None,
                    "predicted_busbw_GBps": None,
                    "measured_bytes": nbytes,
                    "measured_time_s": t,
                    "measured_algbw_GBps": algbw,
                    "measured_busbw_GBps": busbw,
                }
            )
    doc["points"] = points
    doc["run"] = {"nprocs": args.run, "repeat": args.repeat, "warmup": args.warmup}


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def render(doc: dict[str, Any]) -> str:
    """The sweep as one aligned table: a row per size x algorithm, the size on its first."""
    from syncplan.planner.cli_output import table
    from syncplan.planner.sizes import format_size, format_time

    measured = "run" in doc
    header = ["size", "algorithm", "predicted", "algbw", "busbw"]
    if measured:
        header += ["measured", "algbw", "busbw"]
    rows, last = [], None
    for p in doc["points"]:
        size = format_size(p["size_bytes"]) if p["size_bytes"] != last else ""
        last = p["size_bytes"]
        name = p["algorithm"]
        if name == "auto" and p.get("chosen"):
            name = f"auto ({p['chosen']})"
        t = p["predicted_time_s"]
        row = [
            size,
            name,
            format_time(t) if t is not None else ("-" if name == "gloo" else "infeasible"),
            _num(p.get("predicted_algbw_GBps")),
            _num(p.get("predicted_busbw_GBps")),
        ]
        if measured:
            m = p.get("measured_time_s")
            row += [
                format_time(m) if m is not None else "-",
                _num(p.get("measured_algbw_GBps")),
                _num(p.get("measured_busbw_GBps")),
            ]
        rows.append(row)
    width = max((len(r[1]) for r in rows), default=0)
    for r in rows:  # left-aligned, as the table aligns only its first column so
        r[1] = r[1].ljust(width)
    n = doc["nranks"]
    title = (
        f"{doc['collective']} over {n} rank{'s' if n != 1 else ''}: algbw = size / time, "
        f"busbw = algbw x {doc['bus_factor']:.3g} (GB/s)"
    )
    return title + "\n" + table(rows, header)


def _check_plot(path: str) -> None:
    """One clear line before any work when matplotlib is missing or ``path`` unwritable."""
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        raise CLIError(f"--plot needs matplotlib: {install_hint('matplotlib')}") from None
    if not Path(path).parent.is_dir():
        raise CLIError(f"--plot {path}: directory {Path(path).parent} does not exist")


def plot_sweep(doc: dict[str, Any], path: str) -> None:
    """busbw against size (log2 x axis): one color per algorithm, predicted solid,
    measured dashed. Writes a PNG atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from syncplan.core.atomic import AtomicFile

    fig, ax = plt.subplots(figsize=(8, 5))
    names = list(dict.fromkeys(p["algorithm"] for p in doc["points"]))
    for i, name in enumerate(names):
        pts = [p for p in doc["points"] if p["algorithm"] == name]
        for key, style, what in (
            ("predicted_busbw_GBps", "-", "predicted"),
            ("measured_busbw_GBps", "--", "measured"),
        ):
            xy = [(p["size_bytes"], p[key]) for p in pts if p.get(key) is not None]
            if xy:
                xs, ys = zip(*xy, strict=True)
                ax.plot(xs, ys, style, marker=".", color=f"C{i % 10}", label=f"{name} {what}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{doc['collective']}, {doc['nranks']} ranks")
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with AtomicFile(path) as f:
        fig.savefig(f.tmp, format="png", dpi=100)
    plt.close(fig)
