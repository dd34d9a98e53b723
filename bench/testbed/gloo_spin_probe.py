"""Why a pairwise-exchange step costs more than a ring step on gloo: N loopback gloo ranks
time a few message patterns (every rank sends one buffer and receives one per step, all
receives posted first) and report per step the slowest rank's median time and the mean CPU
of all ranks' threads and of gloo's event threads (``gloo_tcp_loop``). With a plan directory,
the same for the executor's plans. docs/testbed.md "Issue 18, session 8".

    PYTHONPATH=. flock /tmp/syncplan-bench.lock python3 bench/testbed/gloo_spin_probe.py \
        --bytes 4096 --steps 12 --reps 30 [--plans DIR]

Patterns: ``ring`` (send to r+1, receive from r-1), ``pair`` (exchange with r xor 2^(k mod
log2 n): both ways on one connection), ``shift`` (send to r+2^(k mod log2 n), receive from
r-2^...: changing peers, never both ways on one connection).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

PATTERNS = ("ring", "pair", "shift")


def _peers(name: str, r: int, k: int, n: int) -> tuple[int, int]:
    """(send to, receive from) of rank r at step k."""
    bits = max(n.bit_length() - 1, 1)
    d = 1 << (k % bits)
    if name == "ring":
        return (r + 1) % n, (r - 1) % n
    if name == "pair":
        return r ^ d, r ^ d
    return (r + d) % n, (r - d) % n


def _loop_cpu_s() -> float:
    """CPU seconds of this process's gloo event threads so far."""
    total = 0
    for t in os.listdir("/proc/self/task"):
        st = Path(f"/proc/self/task/{t}/stat").read_text()
        if "gloo_tcp_loop" in st[st.index("(") : st.rindex(")")]:
            f = st[st.rindex(")") + 2 :].split()
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def worker(rank: int, n: int, port: int, args: dict[str, Any], q: Any) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    pg = dist.group.WORLD
    steps, numel = args["steps"], args["bytes"] // 4
    buf = torch.zeros(numel)
    rbufs = [torch.zeros(numel) for _ in range(steps)]
    jobs: list[tuple[str, Any]] = [(p, None) for p in PATTERNS]
    if args.get("plans"):
        from syncplan.executor.engine import PlanExecutor

        for path in sorted(Path(args["plans"]).glob("*.json")):
            doc = json.loads(path.read_text())
            if doc["size_bytes"] == args["bytes"]:
                jobs.append((path.stem, PlanExecutor(doc)))
    out: dict[str, dict[str, float]] = {}
    tag = 0
    for name, ex in jobs:
        wall, cpu, loop = [], [], []
        for rep in range(args["reps"] + 2):
            dist.barrier()
            c0, l0, t0 = time.process_time(), _loop_cpu_s(), time.perf_counter()
            if ex is not None:
                ex.all_reduce(buf)
            else:
                got = [
                    pg.recv([rbufs[k]], _peers(name, rank, k, n)[1], tag + k) for k in range(steps)
                ]
                for k in range(steps):
                    sent = pg.send([buf], _peers(name, rank, k, n)[0], tag + k)
                    got[k].wait()
                    buf.add_(rbufs[k])
                    sent.wait()
                tag += steps
            t = torch.tensor(
                [time.perf_counter() - t0, time.process_time() - c0, _loop_cpu_s() - l0],
                dtype=torch.float64,
            )
            dist.all_reduce(t[:1], op=dist.ReduceOp.MAX)
            dist.all_reduce(t[1:])
            if rep >= 2:
                wall.append(t[0].item())
                cpu.append(t[1].item())
                loop.append(t[2].item())
        per = steps if ex is None else len(ex.program.steps)
        # CPU: totals over the timed repetitions (the clock ticks are 10 ms)
        out[name] = {
            "steps": per,
            "ms_per_step": statistics.median(wall) / per * 1e3,
            "cpu_ms_per_step": sum(cpu) / len(cpu) / per * 1e3,
            "loop_cpu_ms_per_step": sum(loop) / len(loop) / per * 1e3,
        }
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def main() -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--plans", help="directory of plan documents (syncplan testbed plans)")
    ap.add_argument("--out", help="write the figures here (JSON)")
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 2000
    procs = [
        ctx.Process(target=worker, args=(r, a.ranks, port, vars(a), q)) for r in range(a.ranks)
    ]
    for p in procs:
        p.start()
    res = q.get()
    for p in procs:
        p.join()
    for name, v in res.items():
        print(
            f"{name:40s} {v['steps']:3d} steps  {v['ms_per_step']:7.3f} ms/step  "
            f"CPU {v['cpu_ms_per_step']:7.3f} ms/step (gloo event threads "
            f"{v['loop_cpu_ms_per_step']:.3f})"
        )
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
