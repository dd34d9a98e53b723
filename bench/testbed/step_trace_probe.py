"""Per-step timeline of plans run through the executor on a testbed that is up: one rank per
host namespace runs each plan's data-flow program with a timestamp after every instruction
(``syncplan.executor.schedule`` opcodes), and rank 0 writes, per plan and repetition, every rank's
trace. docs/testbed.md "Issue 18, session 9".

    S=$(mktemp -d); python3 -m syncplan testbed up homogeneous --state-dir $S
    python3 -m syncplan testbed plans homogeneous --sizes 1MiB \
        --algorithms ring,halving-doubling --out-dir /tmp/plans
    PYTHONPATH=. flock /tmp/syncplan-bench.lock python3 bench/testbed/step_trace_probe.py \
        --state $S/homogeneous.json --plans /tmp/plans/*.json --reps 7 --out /tmp/trace.json \
        [--config split_pieces=4 ...]
    python3 -m syncplan testbed down homogeneous --state-dir $S

The summary printed per plan: the slowest rank's median time, and per program step the
median (over repetitions, max over ranks) of the time its last receive completed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

OPS = ("post_send", "post_recv", "wait_send", "wait_recv", "apply")


def _traced_run(prep: Any, flat: Any, timeout: timedelta) -> list[tuple[int, int, float]]:
    """``syncplan.executor.engine._GlooPrepared.run`` with (opcode, index, perf_counter) per op."""
    from syncplan.executor.dataflow import APPLY, POST_RECV, POST_SEND, WAIT_RECV
    from syncplan.executor.engine import _apply

    send_bufs, recv_bufs, applies = prep.views(flat)
    send, recv = prep.pg.send, prep.pg.recv
    sent: list[Any] = [None] * len(prep.sends)
    got: list[Any] = [None] * len(prep.recvs)
    out: list[tuple[int, int, float]] = []
    clock = time.perf_counter
    for op, i in prep.code:
        if op == WAIT_RECV:
            got[i].wait(timeout)
        elif op == POST_SEND:
            peer, _, _, tag = prep.sends[i]
            sent[i] = send(send_bufs[i], peer, tag)
        elif op == POST_RECV:
            peer, _, _, tag = prep.recvs[i]
            got[i] = recv(recv_bufs[i], peer, tag)
        elif op == APPLY:
            _apply(applies[i])
        else:
            sent[i].wait(timeout)
        out.append((op, i, clock()))
    return out


def worker(args: argparse.Namespace) -> None:
    import syncplan.executor.engine as engine
    import torch
    import torch.distributed as dist
    from syncplan.executor.engine import ExecutorConfig, PlanExecutor

    built: list[Any] = []
    real_build = engine.build_schedule

    def recording_build(*a: Any, **k: Any) -> Any:
        built.append(real_build(*a, **k))
        return built[-1]

    engine.build_schedule = recording_build

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=300),
    )
    cfg = ExecutorConfig(
        **{
            k: (None if v == "None" else type_of(k)(v))
            for k, v in (c.split("=", 1) for c in args.config)
        }
    )
    report: list[dict[str, Any]] = []
    for path in args.plans:
        plan = json.loads(Path(path).read_text())
        ex = PlanExecutor(plan, config=cfg)
        count = plan["size_bytes"] // 4
        prep = ex.prepare(count, torch.float32, "cpu")
        steps: dict[str, list[int]] = {"send": [], "recv": []}  # program step of each message
        for st in built[-1].steps:
            steps["send"] += [st.index] * len(st.sends)
            steps["recv"] += [st.index] * len(st.recvs)
        buf = torch.ones(count)
        reps, starts = [], []
        for rep in range(args.warmup + args.reps):
            buf.fill_(1.0)
            dist.barrier()
            t0 = time.perf_counter()
            trace = _traced_run(prep, buf.view(-1), timedelta(seconds=300))
            if rep >= args.warmup:
                reps.append([(op, i, round(t - t0, 7)) for op, i, t in trace])
                starts.append(t0)
            assert bool((buf == args.world).all()), "wrong result"
        gathered: list[Any] = [None] * args.world
        dist.all_gather_object(
            gathered,
            {
                "rank": args.rank,
                "reps": reps,
                "starts": starts,
                **steps,
                "sends": prep.sends,
                "recvs": prep.recvs,
            },
        )
        report.append(
            {
                "plan": str(path),
                "algorithm": plan.get("algorithm"),
                "predicted_time_s": plan.get("predicted_time_s"),
                "ranks": gathered,
            }
        )
    if args.rank == 0:
        Path(args.out).write_text(json.dumps({"config": args.config, "plans": report}))
    dist.destroy_process_group()


def type_of(name: str) -> type:
    from syncplan.executor.engine import ExecutorConfig

    return {
        "float": float,
        "int": int,
        "str": str,
        "bool": lambda v: v == "True",
        "int | None": int,
    }[ExecutorConfig.__dataclass_fields__[name].type]


def summarize(doc: dict[str, Any]) -> None:
    """Print each plan's median total and per-step completion times (max over ranks)."""
    for p in doc["plans"]:
        nrep = len(p["ranks"][0]["reps"])
        totals, per_step = [], {}
        for k in range(nrep):
            totals.append(max(r["reps"][k][-1][2] for r in p["ranks"]))
            for r in p["ranks"]:
                for op, i, t in r["reps"][k]:
                    if op == 3:
                        s = r["recv"][i]
                        per_step.setdefault(s, [[] for _ in range(nrep)])[k].append(t)
        print(
            f"{p['algorithm']}: median {statistics.median(totals) * 1e3:.1f} ms "
            f"(predicted {p['predicted_time_s'] * 1e3:.1f}) reps "
            + " ".join(f"{t * 1e3:.1f}" for t in totals)
        )
        prev = 0.0
        for s in sorted(per_step):
            done = statistics.median(max(x) for x in per_step[s][:nrep] if x)
            print(
                f"  step {s}: last receive done at {done * 1e3:7.2f} ms "
                f"(+{(done - prev) * 1e3:.2f})"
            )
            prev = done


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", help="the testbed's state file (driver)")
    ap.add_argument("--plans", nargs="+", default=[])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--config", nargs="*", default=[], help="ExecutorConfig field=value")
    ap.add_argument("--out", default="/tmp/step-trace.json")
    ap.add_argument("--summarize", help="print the summary of an earlier --out")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--master")
    args = ap.parse_args()
    if args.summarize:
        summarize(json.loads(Path(args.summarize).read_text()))
        return 0
    if args.rank is not None:
        worker(args)
        return 0
    import subprocess

    from syncplan.testbed.emulator import child_env

    st = json.loads(Path(args.state).read_text())
    hosts = st["hosts"]
    master = f"{hosts[0]['addr']}:{20000 + secrets.randbelow(30000)}"
    procs = []
    for h in hosts:
        argv = [
            "ip",
            "netns",
            "exec",
            h["netns"],
            sys.executable,
            "-u",
            __file__,
            "--rank",
            str(h["rank"]),
            "--world",
            str(len(hosts)),
            "--master",
            master,
            "--reps",
            str(args.reps),
            "--warmup",
            str(args.warmup),
            "--out",
            args.out,
            "--plans",
            *[str(Path(p).resolve()) for p in args.plans],
        ]
        if args.config:
            argv += ["--config", *args.config]
        procs.append(
            subprocess.Popen(
                argv, env=child_env({"GLOO_SOCKET_IFNAME": h["iface"], "OMP_NUM_THREADS": "1"})
            )
        )
    codes = [p.wait() for p in procs]
    if any(codes):
        print(f"workers failed: {codes}", file=sys.stderr)
        return 1
    summarize(json.loads(Path(args.out).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
