"""``syncplan agent``: run the node agent, or discover and measure once."""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

ONCE_DELIVERY_S = 10.0  # how long --once waits for the service to take its report


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "agent",
        help="node agent: discover GPUs/links/NICs, measure peers, report",
        description="Discover this host's GPUs, NVLink/PCIe links and NICs, measure "
        "bandwidth and latency to peer hosts, and report to the service.",
    )
    p.add_argument("--server", help="service URL, e.g. http://planner:8080")
    p.add_argument("--token", help="agent token (default: $SYNCPLAN_AGENT_TOKEN)")
    p.add_argument("--host-name", help="this host's name in the cluster (default: hostname)")
    p.add_argument(
        "--interval",
        type=float,
        default=30.0,
        help="seconds between reports / heartbeats (default 30)",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=300.0,
        help="seconds between probe cycles (default 300)",
    )
    p.add_argument(
        "--peers",
        default=os.environ.get("SYNCPLAN_AGENT_PEERS", ""),
        help="peer probe servers: NAME=ADDR[:PORT],... (default "
        "$SYNCPLAN_AGENT_PEERS; when empty, every fresh host that the "
        "service (--server) lists with a probe address)",
    )
    p.add_argument("--bind", default="0.0.0.0", help="probe server bind address")
    p.add_argument("--probe-port", type=int, default=7470, help="probe server port (7470)")
    p.add_argument("--advertise", help="address peers reach this host's probe server at")
    p.add_argument(
        "--http-bind",
        default="127.0.0.1",
        help="/metrics and control bind address (127.0.0.1; any other address "
        "needs --token, which the control endpoints then require)",
    )
    p.add_argument(
        "--http-port", type=int, default=9470, help="/metrics and control port (9470; -1 disables)"
    )
    p.add_argument(
        "--spool-dir",
        default=os.environ.get("SYNCPLAN_AGENT_SPOOL", "/var/lib/syncplan-agent"),
        help="where the sequence number and undelivered report live",
    )
    p.add_argument(
        "--probe-duration",
        type=float,
        default=1.5,
        help="seconds per throughput direction (default 1.5)",
    )
    p.add_argument("--slot", type=float, help="seconds per probe round (default 2*duration+3)")
    p.add_argument("--no-gpu-copy", action="store_true", help="skip torch GPU copy timing")
    p.add_argument(
        "--sysfs-root",
        default="/sys",
        help="where the host's /sys is mounted (/sys; in a container, for example "
        "/host/sys: deploy/k8s)",
    )
    p.add_argument(
        "--procfs-root", default="/proc", help="where the host's /proc is mounted (/proc)"
    )
    p.add_argument("--nvml-fixture", help="replay an NVML recording instead of the driver")
    p.add_argument(
        "--once", action="store_true", help="discover and measure once, then exit (no daemon)"
    )
    p.add_argument(
        "--peer-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="with --once: wait up to S seconds for peers' probe servers (default 30)",
    )
    p.add_argument(
        "--print",
        dest="print_report",
        action="store_true",
        help="print the report as JSON (with --once)",
    )
    p.add_argument(
        "--record-nvml", metavar="FILE", help="record this machine's NVML answers to FILE and exit"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syncplan.core.errors import CLIError

    if args.record_nvml:
        from syncplan.agents.record_nvml import record

        return record(args.record_nvml)
    from syncplan.agents.config import AgentConfig, parse_peers
    from syncplan.agents.daemon import Agent
    from syncplan.agents.probe import ProbeSettings

    if not args.once and not args.server:
        raise CLIError("--server is required unless --once is given")
    try:
        cfg = AgentConfig(
            host=args.host_name or socket.gethostname(),
            server=args.server,
            token=args.token or os.environ.get("SYNCPLAN_AGENT_TOKEN"),
            interval_s=args.interval,
            probe_interval_s=args.probe_interval,
            peers=parse_peers(args.peers),
            bind=args.bind,
            probe_port=args.probe_port,
            advertise=args.advertise,
            http_bind=args.http_bind,
            http_port=None if args.once or args.http_port < 0 else args.http_port,
            spool_dir=args.spool_dir,
            sysfs_root=args.sysfs_root,
            procfs_root=args.procfs_root,
            nvml_fixture=args.nvml_fixture,
            probe=ProbeSettings(duration_s=args.probe_duration),
            slot_s=args.slot,
            gpu_copy=not args.no_gpu_copy,
            peer_wait_s=args.peer_wait,
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    try:
        agent = Agent(cfg)
        if args.once:
            return _once(agent, args.print_report)
        return _daemon(agent)
    except OSError as exc:
        raise CLIError(f"cannot start: {exc}") from None


def _once(agent: Any, print_report: bool) -> int:
    """Discover, measure and report once; 1 (with one line saying why) when the report was
    refused or not delivered within ONCE_DELIVERY_S."""
    import sys

    agent.start(loops=False)
    why = None
    try:
        report = agent.once()
        if agent.reporter is not None:
            why = agent.reporter.outcome(report.seq, ONCE_DELIVERY_S)
    finally:
        agent.stop(flush_timeout_s=0.0)
    if print_report:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    if why:
        sys.stdout.flush()
        print(f"syncplan agent: {why}", file=sys.stderr)
        return 1
    return 0


def _daemon(agent: Any) -> int:
    import signal
    import threading

    stop = threading.Event()

    def on_stop(signum: int, _frame: object) -> None:
        stop.set()

    old = {s: signal.signal(s, on_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    old_usr1 = signal.signal(signal.SIGUSR1, lambda *_: agent.trigger())
    agent.start()
    try:
        while not stop.wait(1.0):
            pass
    finally:
        agent.stop()
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGUSR1, old_usr1)
    return 0
