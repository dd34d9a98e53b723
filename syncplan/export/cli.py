"""``syncplan export msccl PLAN`` and ``syncplan export nccl-topo TOPOLOGY|--server URL``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from syncplan.core.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a plan or the measured cluster for NCCL/MSCCL")
    act = p.add_subparsers(dest="export_command", metavar="FORMAT", required=True)

    m = act.add_parser("msccl", help="a plan document as MSCCL algorithm XML")
    m.add_argument("plan", help="plan document (JSON file, '-' for stdin)")
    m.add_argument("-o", "--output", help="write the XML here (default: stdout)")
    m.add_argument(
        "--target",
        default="msccl",
        choices=["msccl", "rccl"],
        help="executor whose limits apply (default msccl)",
    )
    m.add_argument("--chunks", type=int, help="nchunksperloop (default: exact if it fits)")
    m.add_argument("--channels", type=int, help="channels (default: fewest that fit)")
    m.add_argument("--min-bytes", type=int, help="minBytes (default: plan size / 4)")
    m.add_argument("--max-bytes", type=int, help="maxBytes (default: plan size x 4)")
    m.add_argument("--proto", default="Simple", choices=["Simple", "LL", "LL128"])
    m.set_defaults(func=cmd_msccl)

    t = act.add_parser(
        "nccl-topo",
        help="one host of a cluster as an NCCL_TOPO_FILE, and the job's NCCL environment",
    )
    src = t.add_mutually_exclusive_group(required=True)
    src.add_argument("topology", nargs="?", help="topology file (docs/formats.md, Topology file)")
    src.add_argument("--server", help="read the measured graph from this service URL")
    t.add_argument("--host", help="the host (required when the cluster has several)")
    t.add_argument("-o", "--output", help="write the XML here (default: stdout)")
    t.add_argument(
        "--env", metavar="FILE", help="also write the NCCL environment (KEY=VALUE lines) here"
    )
    t.add_argument(
        "--topo-path", help="NCCL_TOPO_FILE value in the environment (default: the -o path)"
    )
    t.add_argument("--sm", type=int, default=80, help="GPU compute capability x10 (default 80)")
    t.set_defaults(func=cmd_nccl_topo)


def read_json(path: str, what: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise CLIError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def _write(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise CLIError(f"{path}: cannot write ({exc.strerror or exc})") from None


def cmd_msccl(args: argparse.Namespace) -> int:
    from syncplan.export.msccl import export_msccl
    from syncplan.export.msccl_xml import ExportError

    plan = read_json(args.plan, "plan document")
    try:
        algo, info = export_msccl(
            plan,
            target=args.target,
            chunks=args.chunks,
            channels=args.channels,
            min_bytes=args.min_bytes,
            max_bytes=args.max_bytes,
            proto=args.proto,
        )
    except ExportError as exc:
        raise CLIError(str(exc)) from None
    _write(args.output, algo.to_xml())
    how = "exact" if info["exact"] else f"quantized from {info['exact_chunks']}"
    print(
        f"{args.output or 'stdout'}: {algo.ngpus} GPUs, {info['chunks']} chunks ({how}), "
        f"{info['channels']} channel(s), up to {info['max_steps_per_tb']} steps per "
        f"threadblock and {info['max_tbs_per_gpu']} threadblocks per GPU, "
        f"minBytes {algo.minBytes} maxBytes {algo.maxBytes}",
        file=sys.stderr,
    )
    return 0


def fetch_topology(server: str, timeout: float = 10.0) -> dict[str, Any]:
    """GET {server}/v1/topology; CLIError on any failure."""
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # no line per request
    url = server.rstrip("/") + "/v1/topology"
    try:
        resp = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        raise CLIError(f"{url}: {exc}") from None
    if resp.status_code != 200:
        raise CLIError(f"{url}: HTTP {resp.status_code}")
    try:
        return resp.json()
    except ValueError:
        raise CLIError(f"{url}: the answer is not JSON") from None


def cmd_nccl_topo(args: argparse.Namespace) -> int:
    from syncplan.export.msccl_xml import ExportError
    from syncplan.export.nccl_topo import nccl_env, nccl_topology_xml

    graph = fetch_topology(args.server) if args.server else read_json(args.topology, "topology")
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise CLIError("the topology has no nodes list")
    hosts = sorted({n.get("host") for n in graph["nodes"] if n.get("host")})
    host = args.host
    if host is None:
        if len(hosts) != 1:
            raise CLIError(
                f"--host is required: the cluster has {len(hosts)} hosts "
                f"({', '.join(hosts[:8])}{' ...' if len(hosts) > 8 else ''})"
            )
        host = hosts[0]
    try:
        xml = nccl_topology_xml(graph, host, sm=args.sm)
        env = nccl_env(graph, host, args.topo_path or args.output or f"nccl-topo-{host}.xml")
    except ExportError as exc:
        raise CLIError(str(exc)) from None
    _write(args.output, xml)
    if args.env:
        _write(args.env, "".join(f"{k}={v}\n" for k, v in env.items()))
    return 0
