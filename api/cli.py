"""``syncplan serve``: run the planning service with uvicorn."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

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
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--database-url", help="SQLAlchemy URL (SYNCPLAN_DATABASE_URL)")
    p.add_argument(
        "--demo",
        action="store_true",
        help="development mode: embedded SQLite, printed tokens, demo cluster",
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


def _settings(args: argparse.Namespace) -> Settings:
    from pydantic import ValidationError
    from syncplan.api.settings import Settings
    from syncplan.core.errors import CLIError

    overrides: dict[str, object] = {}
    if args.database_url:
        overrides["database_url"] = args.database_url
    if args.demo:
        overrides["environment"] = "development"
        overrides.setdefault("database_url", f"sqlite:///{Path(DEMO_DB).resolve()}")
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CLIError(
            f"invalid settings{' (' + where + ')' if where else ''}: "
            f"{first['msg'].removeprefix('Value error, ')}"
        ) from None


def _default_demo_topology() -> str:
    """examples/demo.json when run from a checkout, else the built-in demo cluster on disk."""
    from syncplan.planner.builders import DEMO, EXAMPLES

    if os.path.exists("examples/demo.json"):
        return "examples/demo.json"
    path = Path(DEMO_DB).with_name("syncplan-demo-cluster.json")
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


def serve(args: argparse.Namespace) -> int:
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError
    from syncplan.api.db import SchemaError
    from syncplan.api.main import create_app
    from syncplan.core.errors import CLIError

    settings = _settings(args)
    try:
        app = create_app(settings)
    except (SchemaError, SQLAlchemyError) as exc:
        raise CLIError(f"cannot open the store {settings.database_url!r}: {exc}") from None
    if args.demo:
        if args.demo_topology is None:
            args.demo_topology = _default_demo_topology()
        if not os.path.exists(args.demo_topology):
            raise CLIError(f"--demo-topology {args.demo_topology}: no such file")
        version = load_demo(app, args.demo_topology)
        snap = app.state.cluster.refresh()
        ranks = (snap.topology.endpoints() if snap.topology else [])[:8]
        tok = {
            s: getattr(settings, f"{s}_token").get_secret_value() for s in ("admin", "agent", "job")
        }
        base = f"http://{args.host}:{args.port}"
        body = '{"ranks": ' + str(ranks).replace("'", '"') + ', "size_bytes": 268435456}'
        print(
            f"syncplan demo: store {settings.database_url}, cluster {args.demo_topology} "
            f"(version {version}, {len(snap.topology.endpoints()) if snap.topology else 0} "
            "endpoints)"
        )
        print(
            f"  admin token: {tok['admin']}\n  agent token: {tok['agent']}\n"
            f"  job token:   {tok['job']}"
        )
        print(
            "  try:\n"
            f"    curl -s -H 'Authorization: Bearer {tok['job']}' "
            f"-H 'Content-Type: application/json' -d '{body}' {base}/v1/plans\n",
            flush=True,
        )
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=10
    )
    server = uvicorn.Server(config)
    if args.reuse_port:
        import socket

        sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((args.host, args.port))
        except OSError as exc:
            raise CLIError(f"cannot bind {args.host}:{args.port}: {exc}") from None
        server.run(sockets=[sock])
    else:
        server.run()
    return 0
