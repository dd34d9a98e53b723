"""``syncplan demo`` on an emulated cluster with a slow link (root, network namespaces, ``tc``).

Eight hosts on one switch, seven at 400 Mbit/s and one at 50 Mbit/s, each a network namespace
with its link shaped in both directions. The agents measure the links, the service plans from
their measurements, and one gloo process per host times gloo's own all_reduce, the service's
``auto`` plan and its ring plan, all in the same run (docs/testbed.md describes the testbed).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncplan.core.errors import CLIError

FAST_MBIT = 400.0
SLOW_MBIT = 50.0
DEMO_SIZE = "4MiB"
DEMO_REPS = 3
# progress lines of the benchmark that the demo does not print (one per repetition)
QUIET = re.compile(r" rep \d+/\d+:| warm-up:")


def unavailable() -> str | None:
    """Why the emulated cluster cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "not root (network namespaces and tc need root)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed (iproute2)"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    return None


def scenario(hosts: int) -> Any:
    """``hosts`` hosts on one switch, the last one slow."""
    from syncplan.testbed.scenario import Scenario

    return Scenario.from_dict(
        {
            "name": "demo",
            "description": f"{hosts - 1} hosts at {FAST_MBIT:g} Mbit/s, one at {SLOW_MBIT:g}",
            "hosts": [
                {"count": hosts - 1, "rate_mbit": FAST_MBIT},
                {"count": 1, "rate_mbit": SLOW_MBIT},
            ],
        },
        source="demo",
    )


def run_emulated(hosts: int, size: int, timeout_s: float, keep: bool, out: Path | None) -> int:
    """Run the whole loop on the emulated cluster and print what it measured; the exit code."""
    from syncplan.testbed import TestbedError
    from syncplan.testbed.loop import LoopConfig, run_loop

    t0 = time.monotonic()

    def say(msg: str) -> None:
        if not QUIET.search(msg):
            print(f"[{time.monotonic() - t0:5.1f} s] {msg.removeprefix('[demo] ')}", flush=True)

    sc = scenario(hosts)
    say(
        f"emulated cluster: {hosts} hosts on one switch, h0-h{hosts - 2} at {FAST_MBIT:g} "
        f"Mbit/s, h{hosts - 1} at {SLOW_MBIT:g} Mbit/s (network namespaces, links shaped "
        "with tc); the service plans from what the agents measure"
    )
    cfg = LoopConfig(
        sizes=[size],
        reps=DEMO_REPS,
        algorithms=["auto", "ring"],
        run_timeout_s=timeout_s,
        calibrate_switch=False,
    )
    state = Path(tempfile.mkdtemp(prefix="syncplan-demo-state-"))
    path = out or state / "demo.json"
    try:
        result = run_loop(sc, state, cfg, path, say=say, keep=keep)
    except TestbedError as exc:
        raise CLIError(f"emulated cluster: {exc}") from None
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    print()
    print("\n".join(table(result, size)))
    print()
    print("\n".join(explain(result, hosts)))
    if out is not None:
        print(f"results: {out}")
    print(f"done in {time.monotonic() - t0:.1f} s")
    rows = result["summary"]
    return 0 if all(r["correct"] for r in rows) and not result.get("failures") else 1


def table(result: dict[str, Any], size: int) -> list[str]:
    """Measured and predicted per program, as a table."""
    from syncplan.planner.sizes import format_size

    rows = [r for r in result["summary"] if r["size_bytes"] == size]
    head = f"{'all-reduce of ' + format_size(size):<28} {'measured':>10} {'predicted':>10}"
    lines = [head + f" {'vs gloo':>8} {'measured/predicted':>19}", "-" * 79]
    for r in rows:
        name = "gloo all_reduce" if r["algorithm"] == "gloo" else f"syncplan {r['algorithm']}"
        if r.get("plan_algorithm") and r["plan_algorithm"] != r["algorithm"]:
            name += f" ({r['plan_algorithm']})"
        pred = r.get("predicted_time_s")
        ratio = r.get("measured_over_predicted")
        lines.append(
            f"{name:<28} {seconds(r['median_s']):>10} "
            f"{seconds(pred) if pred else '-':>10} "
            f"{r.get('speedup_over_gloo', 1.0):>7.2f}x "
            f"{f'{ratio:.2f}' if ratio else '-':>19}" + ("" if r["correct"] else "  WRONG RESULT")
        )
    return lines


def seconds(t: float) -> str:
    """A time to three significant digits: 806 ms, 1.29 s."""
    return f"{t:.3g} s" if t >= 1 else f"{t * 1e3:.3g} ms"


def explain(result: dict[str, Any], hosts: int) -> list[str]:
    """Why the plan is faster (or, when it is not here, why not)."""
    auto = next((r for r in result["summary"] if r["algorithm"] == "auto"), None)
    ring_share = 2 * (hosts - 1) / hosts
    lines = [
        f"gloo's ring passes 2(n-1)/n = {ring_share:.2f} buffers through every link, so the "
        f"{SLOW_MBIT:g} Mbit/s host paces it;",
        "the plan sends the slow host only what it must (its own share in, the result out) "
        "and routes",
        f"the rest over the fast hosts: at most {ring_share:.2f}x gloo on this cluster.",
    ]
    if auto is None:
        return lines
    speedup = auto.get("speedup_over_gloo", 0.0)
    ratio = auto.get("measured_over_predicted")
    if speedup <= 1.05:
        load = result.get("loop", {}).get("load_after") or []
        lines.append(
            f"Here the plan was not faster ({speedup:.2f}x): every host shares this machine's "
            f"{os.cpu_count()} cores (load average {load[0] if load else '?'}); "
            "on a busy machine the CPU, not the links, sets the pace."
        )
    if ratio is not None and not 0.8 <= ratio <= 1.25:
        lines.append(
            f"Measured / predicted is {ratio:.2f}: the cost model was fitted to this machine at "
            "the start of the run; other work on it since moves the times."
        )
    return lines


def emulated_or_reason(say: Callable[[str], None]) -> bool:
    """Whether to run on the emulated cluster; says why not when it cannot."""
    reason = unavailable()
    if reason is not None:
        say(
            f"the emulated cluster with a slow link needs root, iproute2 and torch: {reason}; "
            "running on loopback instead"
        )
    return reason is None
