"""Benchmark of the planning service over real sockets against a real uvicorn process.

Measures (writes bench/results/service.json and bench/results/service.png):
  * cached job-plan fetches: throughput and p50/p99 latency at 1, 16 and 64 concurrent
    clients, of the form the executor fetches (``?format=compact``, gzip-encoded; checked
    once to expand to the full plan and pass the verifier), the full form at 1 and
    16 clients, and /healthz (a trivial FastAPI route) measured the same way in the same
    run. Clients read each whole body without decoding it; only 200 answers count;
  * cold plan latency for 64 and 1,024 ranks (8 and 128 hosts of 8 GPUs);
  * 1,000 hosts reporting every 10 s: ingest latency at that offered rate, the burst ingest
    rate, and the time to rebuild the merged graph afterwards.

Usage: python -m bench.service.run [--quick] [--duration 5] [--out bench/results]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from syncplan.core.atomic import atomic_write_json  # noqa: E402
from syncplan.planner.builders import dgx_cluster  # noqa: E402

from tests.api.helpers import ServerProcess, auth, host_report  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class RawClient:
    """One keep-alive HTTP/1.1 connection that sends a fixed GET and reads the whole body
    as bytes (Content-Length framing), decoding neither gzip nor JSON: the bench's clients
    share the cores with the server and must cost far less than it."""

    def __init__(self, host: str, port: int, request: bytes) -> None:
        self.host, self.port, self.request = host, port, request

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def get(self) -> tuple[int, int, str]:
        """(status, body bytes received, content-encoding) of one request."""
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
        }
        if "content-length" not in fields:
            raise RuntimeError(f"response without Content-Length: {lines[0]}")
        body = await self.reader.readexactly(int(fields["content-length"]))
        return status, len(body), fields.get("content-encoding", "identity")

    def close(self) -> None:
        self.writer.close()


def raw_request(url: str, path: str, headers: dict[str, str]) -> bytes:
    host = url.split("//", 1)[1]
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _loop(
    url: str, path: str, headers: dict[str, str], clients: int, start_at: float, stop_at: float
) -> tuple[list[float], int, int, str, float]:
    """``clients`` connections fetching ``path`` back to back from start_at to stop_at."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    request = raw_request(url, path, headers)
    conns = [RawClient(host, int(port), request) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    await asyncio.gather(*(c.get() for c in conns))  # warm the connections
    await asyncio.sleep(max(0.0, start_at - time.time()))
    cpu0 = time.process_time()
    lat: list[float] = []
    errors = nbytes = 0
    encoding = ""

    async def worker(c: RawClient) -> None:
        nonlocal errors, nbytes, encoding
        while time.time() < stop_at:
            t0 = time.perf_counter()
            status, nbytes, encoding = await c.get()
            if status == 200:  # only complete answers count as fetches
                lat.append(time.perf_counter() - t0)
            else:
                errors += 1

    await asyncio.gather(*(worker(c) for c in conns))
    cpu = time.process_time() - cpu0
    for c in conns:
        c.close()
    return lat, errors, nbytes, encoding, cpu


def _client_proc(
    args: tuple[str, str, dict[str, str], int, float, float],
) -> tuple[list[float], int, int, str, float]:
    try:
        import uvloop

        return uvloop.run(_loop(*args))
    except ImportError:
        return asyncio.run(_loop(*args))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def closed_loop(
    url: str,
    path: str,
    headers: dict[str, str],
    clients: int,
    duration: float,
    procs: int,
    server_pid: int,
) -> dict[str, Any]:
    """Closed-loop load from ``procs`` client processes (the client must not be the
    bottleneck), ``clients`` connections in all."""
    procs = max(1, min(procs, clients))
    start_at = time.time() + 1.5
    stop_at = start_at + duration
    shares = [clients // procs + (i < clients % procs) for i in range(procs)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(procs) as pool:
        pending = pool.map_async(
            _client_proc, [(url, path, headers, n, start_at, stop_at) for n in shares]
        )
        time.sleep(max(0.0, start_at - time.time()))
        cpu0 = cpu_seconds(server_pid)
        time.sleep(max(0.0, stop_at - time.time()))
        cpu = cpu_seconds(server_pid) - cpu0
        parts = pending.get()
    lat = [x for p in parts for x in p[0]]
    return {
        "clients": clients,
        "client_procs": procs,
        "requests": len(lat),
        "errors": sum(p[1] for p in parts),
        "per_s": len(lat) / duration,
        "p50_ms": pct(lat, 0.5) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "wire_bytes": max(p[2] for p in parts),
        "content_encoding": ",".join(sorted({p[3] for p in parts})),
        "server_cpu_s": cpu,
        "client_cpu_s": sum(p[4] for p in parts),
        "per_server_cpu_s": len(lat) / cpu if cpu > 0 else None,
    }


FORMS = {"compact": "/v1/jobs/bench/plan?format=compact", "full": "/v1/jobs/bench/plan"}


def check_forms(c: httpx.Client, spec: dict[str, Any]) -> dict[str, Any]:
    """Fetch the job's plan in both forms (decoded here, once, outside the timed loops):
    the compact one must expand to the full one and pass the verifier. Returns the bytes
    of each form as sent gzip-encoded and decoded."""
    from syncplan.core.compact import expand_document
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import verify_plan

    out: dict[str, Any] = {}
    docs = {}
    for form, path in FORMS.items():
        r = c.get(path, headers={**auth("job"), "Accept-Encoding": "gzip"})
        r.raise_for_status()
        docs[form] = r.json()
        out[form] = {
            "path": path,
            "content_encoding": r.headers.get("content-encoding"),
            "wire_bytes": int(r.headers["content-length"]),
            "body_bytes": len(r.content),
            "etag": r.headers.get("etag"),
        }
    expanded = expand_document(docs["compact"])
    if expanded != docs["full"]:
        raise RuntimeError("the compact plan does not expand to the full one")
    report = verify_plan(expanded, Topology.from_dict(spec))
    if not report.ok:
        raise RuntimeError(f"the job's plan fails the verifier: {report.error}")
    out["compact_expands_to_full"] = True
    out["verified"] = True
    out["transfers"] = report.transfers
    return out


def cold_plan(c: httpx.Client, hosts: int) -> dict[str, Any]:
    topo = dgx_cluster(hosts)
    c.put("/v1/fabric", json=topo, headers=auth("admin")).raise_for_status()
    ranks = [n["id"] for n in topo["nodes"] if n["kind"] == "gpu"]
    req = {"ranks": ranks, "size_bytes": 256 << 20}
    t0 = time.perf_counter()
    r = c.post("/v1/plans", json=req, headers=auth("job"))
    cold = time.perf_counter() - t0
    r.raise_for_status()
    t0 = time.perf_counter()
    c.post("/v1/plans", json=req, headers=auth("job")).raise_for_status()
    warm = time.perf_counter() - t0
    doc = r.json()
    return {
        "hosts": hosts,
        "ranks": len(ranks),
        "cold_s": cold,
        "cached_s": warm,
        "solver_s": doc.get("solve_time_s"),
        "algorithm": doc["algorithm"],
        "body_bytes": len(r.content),
    }


async def ingest(
    url: str, hosts: int, period_s: float, rounds: int, server_pid: int
) -> dict[str, Any]:
    """Every host reports once per ``period_s``, spread evenly; ``rounds`` periods."""
    names = [f"n{i:04d}" for i in range(hosts)]
    bodies = {}
    for i, h in enumerate(names):  # each host measured 4 peers
        peers = {names[(i + k) % hosts]: 12.0 - 0.5 * (i % 3) for k in (1, 2, 3, 4)}
        bodies[h] = host_report(h, 0, gpus=8, peers=peers)
    lat: list[float] = []
    errors = retries = 0
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=4.0)
    async with httpx.AsyncClient(
        base_url=url, headers=auth("agent"), limits=limits, timeout=30
    ) as c:

        async def send(h: str, seq: int) -> None:
            nonlocal errors, retries
            body = dict(bodies[h], seq=seq)
            t0 = time.perf_counter()
            for attempt in range(3):  # as an agent does: a closed keep-alive is retried
                try:
                    r = await c.put(f"/v1/agents/{h}/report", json=body)
                    break
                except httpx.TransportError:
                    if attempt == 2:
                        raise
                    retries += 1
            lat.append(time.perf_counter() - t0)
            errors += r.status_code != 200

        # burst: every host's first report as fast as 64 connections allow
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(64)

        async def limited(h: str) -> None:
            async with sem:
                await send(h, 1)

        await asyncio.gather(*(limited(h) for h in names))
        burst_s = time.perf_counter() - t0
        burst = {
            "reports": hosts,
            "per_s": hosts / burst_s,
            "p50_ms": pct(lat, 0.5) * 1e3,
            "p99_ms": pct(lat, 0.99) * 1e3,
        }
        lat.clear()
        # steady: offered load hosts / period_s reports per second
        cpu0 = cpu_seconds(server_pid)
        start = time.perf_counter()
        tasks = []
        gap = period_s / hosts
        for r in range(rounds):
            for i, h in enumerate(names):
                due = start + (r * hosts + i) * gap
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send(h, 2 + r)))
        await asyncio.gather(*tasks)
        steady_s = time.perf_counter() - start
        steady_cpu = cpu_seconds(server_pid) - cpu0
        t0 = time.perf_counter()
        topo = await c.get("/v1/topology", headers=auth("job"))
        merge_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        await c.get("/v1/topology", headers=auth("job"))
        cached_topo_s = time.perf_counter() - t0
    data = topo.json()
    return {
        "hosts": hosts,
        "period_s": period_s,
        "rounds": rounds,
        "offered_per_s": hosts / period_s,
        "achieved_per_s": len(lat) / steady_s,
        "p50_ms": pct(lat, 0.5) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "max_ms": max(lat) * 1e3,
        "errors": errors,
        "retries": retries,
        "server_cpu_per_report_ms": steady_cpu / max(1, len(lat)) * 1e3,
        "burst": burst,
        "topology_rebuild_s": merge_s,
        "topology_cached_s": cached_topo_s,
        "topology_nodes": len(data["nodes"]),
        "topology_bytes": len(topo.content),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    fetch, health = result["cached_fetch"], result["healthz"]
    xs = [r["clients"] for r in fetch]
    ax = axes[0]
    form = result.get("fetch_forms", {}).get("compact", {})
    ax.plot(
        xs,
        [r["per_s"] for r in fetch],
        "o-",
        label=f"cached job plan, compact gzip ({form.get('wire_bytes', 0) / 1e3:.0f} kB)",
    )
    full = result.get("cached_fetch_full") or []
    if full:
        kb = result["fetch_forms"]["full"]["wire_bytes"] / 1e3
        ax.plot(
            [r["clients"] for r in full],
            [r["per_s"] for r in full],
            "x-",
            label=f"same, full form gzip ({kb:.0f} kB)",
        )
    ax.plot(xs, [r["per_s"] for r in health], "s--", label="/healthz (through FastAPI)")
    ax.plot(
        xs,
        [r["per_server_cpu_s"] or 0 for r in fetch],
        "^:",
        label="job plan per server CPU-second",
    )
    ax.axhline(1000, color="grey", lw=0.8, ls=":", label="target 1,000/s")
    ax.set(
        xscale="log",
        xlabel="concurrent clients",
        ylabel="requests/s",
        title="Cached job-plan fetches",
        ylim=(0, None),
    )
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.legend(fontsize=7, loc="lower center")
    ax = axes[1]
    for key, style in (("p50_ms", "o-"), ("p99_ms", "s-")):
        ax.plot(xs, [r[key] for r in fetch], style, label=f"job plan {key[:3]}")
    if full:
        ax.plot(
            [r["clients"] for r in full], [r["p99_ms"] for r in full], "x:", label="full form p99"
        )
    ax.axhline(50, color="grey", lw=0.8, ls=":", label="p99 target 50 ms")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="concurrent clients",
        ylabel="latency (ms)",
        title="Fetch latency",
    )
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.legend()
    ax = axes[2]
    cold = result["cold_plan"]
    labels = [f"{c['ranks']} ranks" for c in cold]
    ax.bar(
        [i - 0.2 for i in range(len(cold))], [c["cold_s"] for c in cold], 0.4, label="cold (solve)"
    )
    ax.bar([i + 0.2 for i in range(len(cold))], [c["cached_s"] for c in cold], 0.4, label="cached")
    ing = result["ingest"]
    ax.set(
        yscale="log",
        ylabel="seconds",
        xticks=range(len(cold)),
        xticklabels=labels,
        title=f"Plan latency; ingest {ing['hosts']} hosts/{ing['period_s']:.0f}s: "
        f"p99 {ing['p99_ms']:.1f} ms",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per fetch level")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="short run: 1 s per level, 128 hosts ingest, no 1,024-rank plan",
    )
    ap.add_argument(
        "--client-procs",
        type=int,
        default=2,
        help="client processes sharing the connections (default 2)",
    )
    ap.add_argument(
        "--server-cpus",
        default=None,
        help="pin the server to these CPUs, for example 0,1 (default: no pinning)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    duration = 1.0 if args.quick else args.duration
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="syncplan-bench-"))
    srv = ServerProcess(
        f"sqlite:///{tmp / 'bench.db'}",
        log=tmp / "server.log",
        env={"SYNCPLAN_STALE_AFTER_S": "3600"},
    ).start()
    if args.server_cpus and srv.proc:
        os.sched_setaffinity(srv.proc.pid, {int(x) for x in args.server_cpus.split(",")})
    log(f"server on {srv.url} (pid {srv.proc.pid if srv.proc else '?'}), log {tmp}/server.log")
    result: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "duration_per_level_s": duration,
        "python": sys.version.split()[0],
        "load_average_at_start": os.getloadavg(),
        "server_cpus": args.server_cpus,
        "client_procs": args.client_procs,
    }
    try:
        with httpx.Client(base_url=srv.url, timeout=600) as c:
            result["cold_plan"] = []
            for hosts in (8,) if args.quick else (8, 128):
                log(f"cold plan on {hosts} hosts x 8 GPUs ...")
                result["cold_plan"].append(cold_plan(c, hosts))
                log(f"  {result['cold_plan'][-1]}")
            c.put("/v1/fabric", json=dgx_cluster(8), headers=auth("admin")).raise_for_status()
            job = {
                "ranks": [{"host": f"h{h}", "gpu": g} for h in range(8) for g in range(8)],
                "size_bytes": 256 << 20,
            }
            c.put("/v1/jobs/bench", json=job, headers=auth("job")).raise_for_status()
            result["fetch_forms"] = check_forms(c, dgx_cluster(8))
            log(f"  forms: {result['fetch_forms']}")
        gz = {**auth("job"), "Accept-Encoding": "gzip"}
        levels = [
            ("cached_fetch", FORMS["compact"], (1, 16, 64)),
            ("healthz", "/healthz", (1, 16, 64)),
            ("cached_fetch_full", FORMS["full"], (1, 16)),
        ]
        for key, _, _ in levels:
            result[key] = []
        for clients in (1, 16, 64):
            for key, path, counts in levels:
                if clients not in counts:
                    continue
                r = closed_loop(
                    srv.url,
                    path,
                    gz,
                    clients,
                    duration,
                    args.client_procs,
                    srv.proc.pid if srv.proc else 0,
                )
                r["path"] = path
                result[key].append(r)
                log(
                    f"{key:12s} {clients:3d} clients: {r['per_s']:8.0f}/s  p50 "
                    f"{r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms  "
                    f"({r['wire_bytes']} B sent), "
                    f"{r['per_server_cpu_s'] or 0:.0f} per server CPU-second"
                )
        for key in ("cached_fetch", "cached_fetch_full"):
            for f, h in zip(result[key], result["healthz"], strict=False):
                f["ratio_to_healthz"] = f["per_s"] / h["per_s"]
        hosts, rounds = (128, 1) if args.quick else (1000, 2)
        log(f"ingest: {hosts} hosts reporting every 10 s, {rounds} rounds ...")
        result["ingest"] = asyncio.run(
            ingest(srv.url, hosts, 10.0, rounds, srv.proc.pid if srv.proc else 0)
        )
        log(f"  {result['ingest']}")
    finally:
        srv.stop()
    out = args.out / "service.json"
    atomic_write_json(out, result)
    plot(result, args.out / "service.png")
    log(f"wrote {out} and {args.out / 'service.png'}")
    f16 = result["cached_fetch"][1]
    log(f"(fetching {f16['path']}, {f16['content_encoding']}, {f16['wire_bytes']} B each)")
    log(
        f"16 clients: {f16['per_s']:.0f} fetches/s (target >= 1000), p99 "
        f"{f16['p99_ms']:.1f} ms (target < 50), {f16['ratio_to_healthz']:.2f}x /healthz"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
