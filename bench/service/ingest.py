"""Ingest benchmark: simulated agents PUT reports to real ``syncplan serve`` processes.

For each configuration (store, processes, simulated agents) the clients run in their own
process, each agent with its own per-host token (api/identity.py) and its own 8-GPU report
measuring 4 peers, and measure:

* ``open``: each agent on its own keep-alive HTTP/1.1 connection, together offering
  ``--rate`` reports/s (each agent every agents/rate seconds, evenly spread): achieved rate,
  p50/p99/max latency, errors;
* ``saturated``: 64 connections send back to back: the most reports/s the server takes.

Server CPU per report comes from /proc. Two processes share one port (``syncplan serve
--reuse-port``: the kernel spreads connections) and one PostgreSQL database.

Usage: flock /tmp/syncplan-bench.lock python3 -m bench.service.ingest [--quick]
Writes bench/results/service-ingest.json and .png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from syncplan.api.identity import host_token  # noqa: E402

from bench.service.run import log, pct  # noqa: E402
from tests.api.helpers import AGENT_SECRET, ServerProcess, free_port, host_report  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _requests(port: int, agents: int) -> list[tuple[bytes, bytes]]:
    """Per agent: the request head up to the seq and the body after it."""
    names = [f"n{i:04d}" for i in range(agents)]
    out = []
    for i, h in enumerate(names):
        peers = {names[(i + k) % agents]: 12.0 - 0.5 * (i % 3) for k in (1, 2, 3, 4)}
        body = json.dumps(host_report(h, 0, gpus=8, peers=peers), separators=(",", ":"))
        head = (
            f"PUT /v1/agents/{h}/report HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {host_token(AGENT_SECRET, h)}\r\n"
            "Content-Type: application/json\r\n"
        )
        pre, post = body.split('"seq":0', 1)
        out.append((head.encode(), (pre + '"seq":').encode() + b"%d" + post.encode()))
    return out


class Conn:
    def __init__(self, port: int) -> None:
        self.port = port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.lock = asyncio.Lock()

    async def put(self, head: bytes, body: bytes) -> int:
        async with self.lock:
            self.writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            raw = await self.reader.readuntil(b"\r\n\r\n")
            status = int(raw.split(b" ", 2)[1])
            length = 0
            for line in raw.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await self.reader.readexactly(length)
            return status


async def _run(
    port: int, agents: int, rate: float, duration: float, mode: str, seq0: int
) -> dict[str, Any]:
    reqs = _requests(port, agents)
    nconn = 64 if mode == "saturated" else agents  # open: each agent its own connection
    conns = [Conn(port) for _ in range(nconn)]
    await asyncio.gather(*(c.open() for c in conns))
    lat: list[float] = []
    errors = 0
    seq = seq0
    cpu0 = time.process_time()

    async def one(i: int, c: Conn) -> None:
        nonlocal errors, seq
        seq += 1
        head, body = reqs[i]
        t0 = time.perf_counter()
        status = await c.put(head, body % seq)
        lat.append(time.perf_counter() - t0)
        errors += status != 200

    start = time.perf_counter()
    if mode == "saturated":
        stop = start + duration

        async def worker(k: int) -> None:
            mine = list(range(k, agents, nconn))  # an agent uses one connection only
            n = 0
            while time.perf_counter() < stop:
                await one(mine[n % len(mine)], conns[k])
                n += 1

        await asyncio.gather(*(worker(k) for k in range(nconn)))
    else:
        tasks = []
        gap = 1.0 / rate
        for n in range(int(rate * duration)):
            delay = start + n * gap - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            i = n % agents
            tasks.append(asyncio.create_task(one(i, conns[i])))
        await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    for c in conns:
        c.writer.close()
    return {
        "mode": mode,
        "agents": agents,
        "connections": nconn,
        "offered_per_s": rate if mode == "open" else None,
        "reports": len(lat),
        "achieved_per_s": len(lat) / elapsed,
        "p50_ms": pct(lat, 0.5) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "max_ms": max(lat) * 1e3,
        "errors": errors,
        "client_cpu_s": time.process_time() - cpu0,
        "seconds": elapsed,
    }


def _client(args: tuple[int, int, float, float, str, int]) -> dict[str, Any]:
    try:
        import uvloop

        return uvloop.run(_run(*args))
    except ImportError:
        return asyncio.run(_run(*args))


def measure(
    servers: list[ServerProcess],
    port: int,
    agents: int,
    rate: float,
    duration: float,
    mode: str,
    seq0: int,
) -> dict[str, Any]:
    pids = [s.proc.pid for s in servers if s.proc]
    cpu0 = sum(cpu_seconds(p) for p in pids)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out = pool.apply(_client, ((port, agents, rate, duration, mode, seq0),))
    cpu = sum(cpu_seconds(p) for p in pids) - cpu0
    out["server_cpu_per_report_ms"] = cpu / max(1, out["reports"]) * 1e3
    return out


def start_servers(url: str, processes: int, log_dir: Path) -> tuple[list[ServerProcess], int]:
    port = free_port()
    env = {"SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN": "false", "SYNCPLAN_STALE_AFTER_S": "600"}
    servers = []
    for k in range(processes):
        s = ServerProcess(
            url,
            env=env,
            log=log_dir / f"server{k}.log",
            extra_args=["--reuse-port"] if processes > 1 else [],
        )
        s.start(port=port)
        servers.append(s)
    if processes > 1:
        time.sleep(2.0)  # the readiness probe may have reached an earlier process
    return servers, port


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 s per level")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=400.0, help="offered reports/s")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--stores", default="sqlite,postgresql")
    args = ap.parse_args()
    duration = 3.0 if args.quick else args.duration
    work = Path(tempfile.mkdtemp(prefix="syncplan-ingest-"))
    result: dict[str, Any] = {
        "rate": args.rate,
        "duration_s": duration,
        "cpus": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "runs": [],
    }
    pg = None
    try:
        for store in args.stores.split(","):
            if store == "postgresql":
                from tests.reliability.pg import PgCluster

                pg = PgCluster()
            for processes in (1,) if store == "sqlite" else (1, 2):
                url = pg.url if pg else f"sqlite:///{work / f'ingest-{processes}.db'}"
                if pg:
                    _reset_pg(pg.url)
                servers, port = start_servers(url, processes, work)
                try:
                    seq = int(time.time() * 1000)
                    for agents in (200, 1000):
                        for mode in ("open", "saturated"):
                            log(f"{store} x{processes}: {agents} agents, {mode} ...")
                            run = measure(servers, port, agents, args.rate, duration, mode, seq)
                            seq += run["reports"] + 1
                            run.update(store=store, processes=processes)
                            log(
                                f"  {run['achieved_per_s']:.0f}/s p50 {run['p50_ms']:.1f} "
                                f"p99 {run['p99_ms']:.1f} ms, errors {run['errors']}, "
                                f"server {run['server_cpu_per_report_ms']:.2f} ms CPU/report"
                            )
                            result["runs"].append(run)
                finally:
                    for s in servers:
                        s.stop()
    finally:
        if pg:
            pg.remove()
    result["load_avg_end"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "service-ingest.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out / "service-ingest.png")
    log(f"wrote {out / 'service-ingest.json'}")
    return 0


def _reset_pg(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    labels, open_rate, sat_rate, p99 = [], [], [], []
    for r in result["runs"]:
        if r["mode"] != "open":
            continue
        sat = next(
            s
            for s in result["runs"]
            if s["mode"] == "saturated"
            and s["store"] == r["store"]
            and s["processes"] == r["processes"]
            and s["agents"] == r["agents"]
        )
        labels.append(f"{r['store']}\nx{r['processes']}, {r['agents']} agents")
        open_rate.append(r["achieved_per_s"])
        sat_rate.append(sat["achieved_per_s"])
        p99.append(r["p99_ms"])
    x = range(len(labels))
    ax1.bar([i - 0.2 for i in x], open_rate, 0.4, label=f"offered {result['rate']:.0f}/s")
    ax1.bar([i + 0.2 for i in x], sat_rate, 0.4, label="saturated (64 connections)")
    ax1.axhline(400, color="k", ls="--", lw=0.8)
    ax1.set_xticks(list(x), labels, fontsize=7)
    ax1.set_ylabel("reports/s")
    ax1.legend(fontsize=8)
    ax2.bar(list(x), p99, 0.5, color="tab:red")
    ax2.axhline(250, color="k", ls="--", lw=0.8)
    ax2.set_xticks(list(x), labels, fontsize=7)
    ax2.set_ylabel(f"p99 latency at {result['rate']:.0f}/s offered (ms)")
    fig.suptitle("syncplan serve: report ingest on 2 cores (server and clients)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
