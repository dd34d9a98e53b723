"""``syncplan serve``: run the planning service with uvicorn."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncplan.core.atomic import atomic_write_json

if TYPE_CHECKING:
    from fastapi import FastAPI
    from syncplan.api.settings import Settings

DEMO_DB = "syncplan-demo.db"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the central planning service (REST API)",
        description="Run the planning service. Settings come from SYNCPLAN_* environment "
        "variables; the flags below override them.",
    )
    p.add_argument(
        "--host",
        default=None,
        help="address to bind (default 127.0.0.1; with --demo, any other address is "
        "warned about: the demo's tokens are well known)",
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--database-url", help="SQLAlchemy URL (SYNCPLAN_DATABASE_URL)")
    p.add_argument(
        "--demo",
        action="store_true",
        help="development mode: a demo cluster, printed (well-known) tokens, and an SQLite "
        "store in a temporary folder removed at exit (--database-url keeps one)",
    )
    p.add_argument(
        "--demo-topology",
        default=None,
        help="topology file loaded as the fabric in --demo mode (default "
        "examples/demo.json, or the built-in demo cluster when that is absent)",
    )
    p.add_argument(
        "--reuse-port",
        action="store_true",
        help="bind with SO_REUSEPORT, so that several `syncplan serve` processes "
        "sharing one store listen on one host:port (the kernel spreads "
        "connections among them)",
    )
    p.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    p.set_defaults(func=serve)


def _settings(args: argparse.Namespace, scratch: str | None = None) -> Settings:
    from pydantic import ValidationError
    from syncplan.api.settings import Settings
    from syncplan.core.errors import CLIError

    overrides: dict[str, object] = {}
    if args.database_url:
        overrides["database_url"] = args.database_url
    if args.demo:
        overrides["environment"] = "development"
        if scratch and not args.database_url and not os.environ.get("SYNCPLAN_DATABASE_URL"):
            overrides["database_url"] = f"sqlite:///{Path(scratch) / DEMO_DB}"
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CLIError(
            f"invalid settings{' (' + where + ')' if where else ''}: "
            f"{first['msg'].removeprefix('Value error, ')}"
        ) from None


def _default_demo_topology(scratch: str) -> str:
    """examples/demo.json when run from a checkout, else the built-in demo cluster, written
    to the ``scratch`` folder."""
    from syncplan.planner.builders import DEMO, EXAMPLES

    if os.path.exists("examples/demo.json"):
        return "examples/demo.json"
    path = Path(scratch) / "syncplan-demo-cluster.json"
    atomic_write_json(path, EXAMPLES[DEMO](), indent=1)
    return str(path)


def load_demo(app: FastAPI, path: str) -> str:
    """Store the topology file at ``path`` as the fabric; return its graph version."""
    import json
    import time

    from pydantic import ValidationError
    from syncplan.api import store
    from syncplan.api.errors import APIError
    from syncplan.api.fabric import normalize_fabric
    from syncplan.api.models import FabricCreate
    from syncplan.core.errors import CLIError
    from syncplan.planner.topology import load_topology

    load_topology(path)  # a clear TopologyError for a bad file
    try:
        fabric = normalize_fabric(FabricCreate.model_validate(json.loads(Path(path).read_text())))
    except (ValidationError, APIError, ValueError) as exc:
        raise CLIError(f"{path}: not usable as a fabric: {exc}") from None
    with app.state.sessions() as s:
        store.put_fabric(s, fabric, time.time())
    app.state.cluster.invalidate()
    return app.state.cluster.refresh().version


def demo_ranks(topo: Any, n: int = 4) -> list[str]:
    """``n`` endpoints for the banner's example: two of each of the first hosts."""
    ranks: list[str] = []
    for eps in topo.hosts().values():
        ranks += eps[:2]
    rest = [e for e in topo.endpoints() if e not in ranks]
    return (ranks + rest)[:n]


def demo_banner(
    base: str,
    cluster: str,
    store: str,
    temporary: bool,
    tokens: dict[str, str],
    ranks: list[str],
) -> str:
    """What ``syncplan serve --demo`` prints: where to look, the tokens, one curl to try."""
    body = json.dumps({"ranks": ranks, "size_bytes": 256 << 20})
    keep = " (temporary: removed at exit; --database-url keeps one)" if temporary else ""
    return (
        f"syncplan demo at {base}\n"
        f"  web page:    {base}/ui\n"
        f"  API docs:    {base}/docs\n"
        f"  cluster:     {cluster}\n"
        f"  store:       {store}{keep}\n"
        f"  admin token: {tokens['admin']}\n  agent token: {tokens['agent']}\n"
        f"  job token:   {tokens['job']}\n"
        f"  try: a plan for {len(ranks)} ranks (its first 20 lines):\n"
        f"    curl -s -H 'Authorization: Bearer {tokens['job']}' "
        f"-H 'Content-Type: application/json' -d '{body}' "
        f"'{base}/v1/plans?format=compact' | python3 -m json.tool | head -20\n"
    )


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or name."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    if not args.demo:
        return _serve(args, None)
    import signal
    import sys

    scratch = tempfile.mkdtemp(prefix="syncplan-demo-")
    # uvicorn shuts down on SIGTERM, then raises it again under the handler found before:
    # exit through Python so that the temporary store is removed
    old = signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return _serve(args, scratch)
    finally:
        signal.signal(signal.SIGTERM, old)
        shutil.rmtree(scratch, ignore_errors=True)


def _serve(args: argparse.Namespace, scratch: str | None) -> int:
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError
    from syncplan.api.db import SchemaError
    from syncplan.api.main import create_app
    from syncplan.core.errors import CLIError

    host = args.host or "127.0.0.1"
    settings = _settings(args, scratch)
    try:
        app = create_app(settings)
    except (SchemaError, SQLAlchemyError) as exc:
        raise CLIError(f"cannot open the store {settings.database_url!r}: {exc}") from None
    if args.demo:
        assert scratch is not None
        if args.demo_topology is None:
            args.demo_topology = _default_demo_topology(scratch)
        if not os.path.exists(args.demo_topology):
            raise CLIError(f"--demo-topology {args.demo_topology}: no such file")
        version = load_demo(app, args.demo_topology)
        snap = app.state.cluster.refresh()
        topo = snap.topology
        tok = {
            s: getattr(settings, f"{s}_token").get_secret_value() for s in ("admin", "agent", "job")
        }
        url_host = f"[{host}]" if ":" in host else host
        n = len(topo.endpoints()) if topo else 0
        if not loopback(host):
            print(
                f"warning: --demo on --host {host}: anyone who reaches this address can use "
                "the well-known demo tokens below; bind 127.0.0.1 (the default) unless that "
                "is what you want",
                flush=True,
            )
        print(
            demo_banner(
                f"http://{url_host}:{args.port}",
                f"{args.demo_topology} (version {version}, {n} endpoints)",
                settings.database_url,
                settings.database_url.startswith(f"sqlite:///{scratch}"),
                tok,
                demo_ranks(topo) if topo else [],
            ),
            flush=True,
        )
    config = uvicorn.Config(
        app, host=host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=10
    )
    server = uvicorn.Server(config)
    if args.reuse_port:
        import socket

        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((host, args.port))
        except OSError as exc:
            raise CLIError(f"cannot bind {host}:{args.port}: {exc}") from None
        server.run(sockets=[sock])
    else:
        server.run()
    return 0
