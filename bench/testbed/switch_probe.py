"""What moving to another connection between steps costs: every rank runs halving-doubling's
six exchanges at 1 MiB (512, 256, 128, 128, 256, 512 KiB each way, two pieces per message)
step by step (post the receives, send, wait for both), with the partner of step k at
``rank xor d_k``, through gloo (``send``/``recv``) or plain TCP sockets. ``--partners 124421``
is halving-doubling's; ``111111`` keeps one connection busy throughout. Prints the slowest
rank's median (gloo) or each rank's median (tcp). docs/testbed.md "Issue 18, session 9".

    S=$(mktemp -d); python3 -m syncplan testbed up homogeneous --state-dir $S
    for p in 124421 111111 111222 121212; do
      PYTHONPATH=. flock /tmp/syncplan-bench.lock python3 bench/testbed/switch_probe.py \
          --state $S/homogeneous.json --transport gloo --partners $p
    done
    python3 -m syncplan testbed down homogeneous --state-dir $S

``--scale 4`` divides every message by 4; ``--local N`` runs N ranks on 127.0.0.1 without a
testbed (a smoke test, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

KIB = 1024
SIZES = (512 * KIB, 256 * KIB, 128 * KIB, 128 * KIB, 256 * KIB, 512 * KIB)


def _gloo(args: argparse.Namespace, sizes: list[int], dists: list[int]) -> list[float]:
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=120),
    )
    pg, me = dist.group.WORLD, args.rank
    send = torch.ones(max(sizes) // 4)
    recv = [torch.empty(n // 4) for n in sizes]
    out, tag = [], 0
    for rep in range(args.warmup + args.reps):
        dist.barrier()
        t0 = time.perf_counter()
        waits = []
        for k, (n, d) in enumerate(zip(sizes, dists, strict=True)):  # receives first
            h = n // 8
            waits.append(
                [pg.recv([recv[k][i * h : (i + 1) * h]], me ^ d, tag + 2 * k + i) for i in range(2)]
            )
        for k, (n, d) in enumerate(zip(sizes, dists, strict=True)):
            h = n // 8
            sent = [pg.send([send[i * h : (i + 1) * h]], me ^ d, tag + 2 * k + i) for i in range(2)]
            for w in waits[k] + sent:
                w.wait()
        tag += 2 * len(sizes)
        el = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(el, op=dist.ReduceOp.MAX)
        if rep >= args.warmup:
            out.append(float(el.item()))
    dist.destroy_process_group()
    return out


def _tcp(args: argparse.Namespace, sizes: list[int], dists: list[int]) -> list[float]:
    addrs = args.addrs.split(",")
    base = int(args.master.rsplit(":", 1)[1])
    me, world = args.rank, args.world
    socks: dict[int, socket.socket] = {}
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((addrs[me], base + 1 + me))
    lst.listen(world)

    def accept() -> None:
        for _ in range(world - 1 - me):
            s, _ = lst.accept()
            socks[struct.unpack("i", _recv(s, 4))[0]] = s

    th = threading.Thread(target=accept)
    th.start()
    for p in range(me):
        for _ in range(400):
            try:
                s = socket.create_connection((addrs[p], base + 1 + p))
                break
            except OSError:
                time.sleep(0.05)
        s.sendall(struct.pack("i", me))
        socks[p] = s
    th.join()
    for s in socks.values():
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = b"x" * max(sizes)
    out = []
    for rep in range(args.warmup + args.reps):
        if me == 0:  # barrier through rank 0
            for p in range(1, world):
                _recv(socks[p], 1)
            for p in range(1, world):
                socks[p].sendall(b"b")
        else:
            socks[0].sendall(b"b")
            _recv(socks[0], 1)
        t0 = time.perf_counter()
        for n, d in zip(sizes, dists, strict=True):
            t = threading.Thread(target=socks[me ^ d].sendall, args=(data[:n],))
            t.start()
            _recv(socks[me ^ d], n)
            t.join()
        if rep >= args.warmup:
            out.append(time.perf_counter() - t0)
    time.sleep(0.5)
    return out


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = s.recv_into(view[got:])
        if not k:
            raise EOFError("peer closed")
        got += k
    return bytes(buf)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", help="the testbed's state file")
    ap.add_argument("--local", type=int, default=0, help="ranks on 127.0.0.1 (smoke test)")
    ap.add_argument("--transport", choices=("gloo", "tcp"), default="gloo")
    ap.add_argument("--partners", default="124421", help="d_k per step (rank xor d_k)")
    ap.add_argument("--scale", type=int, default=1, help="divide every message by this")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--master")
    ap.add_argument("--addrs")
    args = ap.parse_args()
    dists = [int(c) for c in args.partners]
    sizes = [n // args.scale for n in SIZES[: len(dists)]]
    if args.rank is not None:
        times = (_gloo if args.transport == "gloo" else _tcp)(args, sizes, dists)
        if args.rank == 0 or args.transport == "tcp":
            print(
                f"{args.transport} partners {args.partners} scale 1/{args.scale} rank "
                f"{args.rank}: median {statistics.median(times) * 1e3:.1f} ms, "
                + " ".join(f"{t * 1e3:.1f}" for t in times),
                flush=True,
            )
        return 0
    if args.local:
        hosts = [
            {"rank": r, "addr": "127.0.0.1", "netns": None, "iface": "lo"}
            for r in range(args.local)
        ]
    else:
        hosts = json.loads(Path(args.state).read_text())["hosts"]
    world = len(hosts)
    if any(d >= world or world & (world - 1) for d in dists):
        raise SystemExit("needs a power-of-two rank count above every partner distance")
    port = 20000 + secrets.randbelow(20000)
    addrs = ",".join(h["addr"] for h in hosts)
    procs = []
    for h in hosts:
        argv = [
            sys.executable,
            "-u",
            __file__,
            "--rank",
            str(h["rank"]),
            "--world",
            str(world),
            "--master",
            f"{hosts[0]['addr']}:{port}",
            "--addrs",
            addrs,
            "--transport",
            args.transport,
            "--partners",
            args.partners,
            "--scale",
            str(args.scale),
            "--reps",
            str(args.reps),
            "--warmup",
            str(args.warmup),
        ]
        if h["netns"]:
            argv = ["ip", "netns", "exec", h["netns"], *argv]
        env = {
            "GLOO_SOCKET_IFNAME": h["iface"],
            "OMP_NUM_THREADS": "1",
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        }
        procs.append(subprocess.Popen(argv, env=env))
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
