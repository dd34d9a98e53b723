"""How small can the htb burst be? Shaped rate and single-message times per burst.

For each burst (microseconds at the class rate; 0 = the floor, two full frames) the sweep
brings up a testbed of ``--scenario`` (default ``rates``: links at 400, 200 and 50 Mbit/s),
runs the link check (one flow each way per host link, ``--seconds``) and times single
messages of ``--sizes`` from every host to its reference host (``linkcheck``), then removes
the testbed. ``--busy`` repeats every burst with as many busy-looping processes as cores
(the load the 8 gloo ranks put on the machine). Run it alone:

    PYTHONPATH=. flock /tmp/syncplan-bench.lock python3 bench/testbed/burst_sweep.py \\
        --bursts 2000,500,100,0 --busy --out bench/results/testbed-burst-sweep.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from syncplan.planner.sizes import parse_size

from syncplan.testbed import emulator
from syncplan.testbed.linkcheck import measure_links, measure_messages
from syncplan.testbed.scenario import load_scenario


@contextlib.contextmanager
def busy_cores(n: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def one(
    scenario: str, burst_us: float, seconds: float, sizes: list[int], reps: int, state_dir: Path
) -> dict:
    emulator.BURST_S = burst_us * 1e-6
    state = emulator.up(load_scenario(scenario), state_dir)
    try:
        links = [m.to_dict() for m in measure_links(state, seconds)]
        msgs = measure_messages(state, sizes, reps)
    finally:
        emulator.down(state)
    return {
        "burst_us": burst_us,
        "burst_bytes": {
            f"{r:g}": max(int(r * 1e6 / 8 * burst_us * 1e-6), emulator.MIN_BURST_BYTES)
            for r in sorted({h.rate_mbit for h in state.hosts})
        },
        "links": links,
        "messages": msgs,
        "link_ratio_range": [min(m["ratio"] for m in links), max(m["ratio"] for m in links)],
        "message_ratio_range": {
            n: [
                min(m["sizes"][str(n)]["ratio"] for m in msgs),
                max(m["sizes"][str(n)]["ratio"] for m in msgs),
            ]
            for n in sizes
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="rates")
    ap.add_argument("--bursts", default="2000,500,100,0", help="microseconds, comma-separated")
    ap.add_argument("--sizes", default="4KiB,64KiB,1MiB")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--busy", action="store_true", help="also with every core busy")
    ap.add_argument("--state-dir", type=Path, default=Path("/run/syncplan-burst-sweep"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    runs = []
    for busy in [False, True] if args.busy else [False]:
        for b in (float(x) for x in args.bursts.split(",")):
            with busy_cores(os.cpu_count() or 1) if busy else contextlib.nullcontext():
                r = one(args.scenario, b, args.seconds, sizes, args.reps, args.state_dir)
            r["busy_cores"] = (os.cpu_count() or 1) if busy else 0
            runs.append(r)
            print(
                f"burst {b:g} us{' (cores busy)' if busy else ''}: links "
                f"{r['link_ratio_range'][0]:.3f}-{r['link_ratio_range'][1]:.3f} of shaped; "
                + "; ".join(
                    f"{n / 1024:g} KiB {lo:.2f}-{hi:.2f} of wire time"
                    for n, (lo, hi) in r["message_ratio_range"].items()
                ),
                flush=True,
            )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "scenario": args.scenario,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "load_after": os.getloadavg(),
                    "runs": runs,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
