"""The training benchmark on the emulated testbed (syncplan/testbed: one rank per host
namespace, shaped links): every method of bench/training/run.py, per scenario. Needs root.
Writes bench/results/training-testbed.json and .png.

    flock /tmp/syncplan-bench.lock python bench/training/testbed.py \\
        [--scenarios homogeneous,one-slow,mixed] [--model emulated-small] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.training.run import RESULTS, summarize, table  # noqa: E402
from syncplan.testbed.emulator import down, spawn, up  # noqa: E402
from syncplan.testbed.scenario import load_scenario  # noqa: E402

PAYLOAD = 0.95  # TCP payload share of the configured rate (docs/testbed.md)


def run_scenario(name: str, args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    scenario = load_scenario(name)
    state = up(scenario, state_dir)
    try:
        work = state_dir / f"{state.prefix}-training"
        work.mkdir(parents=True, exist_ok=True)
        master = f"{state.hosts[0].addr}:{20000 + secrets.randbelow(30000)}"
        rates = [h.rate_mbit * 1e6 / 8 * PAYLOAD / 1e9 for h in state.hosts]
        procs = []
        for h in state.hosts:
            argv = [
                sys.executable,
                "-u",
                "-m",
                "bench.training.testbed_worker",
                "--rank",
                str(h.rank),
                "--world",
                str(len(state.hosts)),
                "--master",
                master,
                "--model",
                args.model,
                "--rounds",
                str(args.rounds),
                "--iters",
                str(args.iters),
                "--warmup",
                str(args.warmup),
                "--rates",
                ",".join(f"{r:.6f}" for r in rates),
                "--out",
                str(work / "rank0.json"),
                "--algorithms",
                args.algorithms,
                "--message-overhead",
                args.message_overhead,
            ]
            procs.append(
                spawn(
                    state,
                    h.netns,
                    argv,
                    "worker",
                    work / f"rank{h.rank}.log",
                    env={
                        "GLOO_SOCKET_IFNAME": h.iface,
                        "OMP_NUM_THREADS": "1",
                        "TORCH_CPP_LOG_LEVEL": "ERROR",
                    },
                )
            )
        deadline = time.monotonic() + args.timeout
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: the workers exceeded {args.timeout} s; see {work}")
            time.sleep(1)
        if any(p.returncode for p in procs):
            logs = (work / "rank0.log").read_text()[-2000:]
            raise RuntimeError(f"{name}: a worker failed; rank 0 log:\n{logs}")
        res = json.loads((work / "rank0.json").read_text())
    finally:
        down(state)
    res.update(
        scenario=name, nprocs=len(scenario.hosts), rates_mbit=[h.rate_mbit for h in scenario.hosts]
    )
    res["summary"] = summarize(res)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scenarios", default="homogeneous,one-slow,mixed")
    ap.add_argument("--model", default="emulated-small")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--state-dir", default="/run/syncplan-testbed")
    ap.add_argument("--out", default="training-testbed")
    ap.add_argument(
        "--algorithms",
        default="",
        help="restrict the schedule's algorithms, e.g. ring,forest (default all)",
    )
    ap.add_argument(
        "--message-overhead",
        default="0",
        help="the schedule's cost per message in seconds on top of the cost model; "
        "auto: fitted with a rate efficiency from ring plans at 1 and 4 MiB "
        "(always timed and recorded)",
    )
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name in args.scenarios.split(","):
        t0 = time.perf_counter()
        res = run_scenario(name, args, Path(args.state_dir))
        res["wall_s"] = time.perf_counter() - t0
        results[name] = res
        print(name, json.dumps(res["summary"], indent=1), flush=True)
        doc = {
            "benchmark": "training",
            "network": "testbed",
            "command": " ".join(sys.argv),
            "settings": vars(args),
            "scenarios": results,
        }
        (RESULTS / f"{args.out}.json").write_text(json.dumps(doc, indent=1))
    from bench.training.run import plot

    plot(
        {f"{k} ({args.model})": v for k, v in results.items()},
        RESULTS / f"{args.out}.png",
        "testbed",
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
