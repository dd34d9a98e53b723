"""``syncplan draw topology FILE|--server URL -o OUT`` and ``syncplan draw plan PLAN -o OUT``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from syncplan.core.errors import CLIError

if TYPE_CHECKING:
    from syncplan.draw.canvas import Canvas


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draw", help="draw the cluster or a plan (SVG or PNG)")
    act = p.add_subparsers(dest="draw_command", metavar="WHAT", required=True)
    t = act.add_parser("topology", help="hosts grouped by switch, links by measured rate")
    src = t.add_mutually_exclusive_group(required=True)
    src.add_argument("topology", nargs="?", help="topology file (docs/formats.md, Topology file)")
    src.add_argument("--server", help="draw the service's measured graph (GET /v1/topology)")
    t.add_argument("--host", help="draw the inside of this host")
    t.add_argument("-o", "--output", required=True, help="picture file (.svg or .png)")
    t.set_defaults(func=cmd_topology)
    pl = act.add_parser("plan", help="a plan's traffic, link utilisation and trees/stages")
    pl.add_argument("plan", help="plan document (JSON)")
    where = pl.add_mutually_exclusive_group(required=True)
    where.add_argument("--topology", "-t", help="the topology the plan was made for")
    where.add_argument("--server", help="take the topology from this service")
    pl.add_argument("-o", "--output", required=True, help="picture file (.svg or .png)")
    pl.set_defaults(func=cmd_plan)


def _check_output(path: str) -> None:
    if not path.lower().endswith((".svg", ".png")):
        raise CLIError(f"{path}: the picture must end in .svg or .png")


def _graph(args: argparse.Namespace, path: str | None) -> dict:
    from syncplan.export.cli import fetch_topology, read_json

    doc = fetch_topology(args.server) if args.server else read_json(path or "", "topology")
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise CLIError("the topology has no nodes list")
    return doc


def _save(canvas: Canvas, path: str) -> None:
    try:
        canvas.save(path)
    except OSError as exc:
        raise CLIError(f"{path}: cannot write ({exc.strerror or exc})") from None
    print(f"wrote {path} ({canvas.width}x{canvas.height})", file=sys.stderr)


def cmd_topology(args: argparse.Namespace) -> int:
    from syncplan.draw.topology import topology_picture

    _check_output(args.output)
    doc = _graph(args, args.topology)
    title = args.server or args.topology
    try:
        canvas = topology_picture(
            doc, host=args.host, title=title, rates="measured" if args.server else "file"
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    _save(canvas, args.output)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from syncplan.core.errors import PlannerError
    from syncplan.draw.plan import plan_picture
    from syncplan.export.cli import read_json
    from syncplan.export.msccl_xml import ExportError

    _check_output(args.output)
    plan = read_json(args.plan, "plan document")
    doc = _graph(args, args.topology)
    if not isinstance(plan, dict) or not isinstance(plan.get("ranks"), list):
        raise CLIError(f"{args.plan}: not a plan document (no ranks)")
    try:
        canvas = plan_picture(plan, doc)
    except (ExportError, PlannerError) as exc:
        raise CLIError(str(exc)) from None
    except KeyError as exc:
        raise CLIError(f"the plan names {exc} which the topology lacks") from None
    _save(canvas, args.output)
    return 0
