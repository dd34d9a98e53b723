"""The ``syncplan`` command: one entry point, one subcommand module per component.

Each component module exposes ``register(subparsers)``, which adds its subcommands and sets
``func`` (taking the parsed namespace, returning an exit code) on each. Registration must
stay cheap: heavy imports (FastAPI, torch) happen inside ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from planner.errors import PlannerError
from syncplan.errors import CLIError

COMPONENTS = (
    "planner.cli",
    "api.cli",
    "agents.cli",
    "executor.cli",
    "syncplan.testbed.cli",
    "syncplan.export.cli",
    "syncplan.draw.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syncplan", description="Topology-aware all-reduce planning and execution.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMPONENTS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # component not present in this checkout
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (CLIError, PlannerError) as exc:
        print(f"syncplan {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        print(f"syncplan {args.command}: error: missing dependency {exc.name!r}; install "
              "the matching extra, for example: pip install 'syncplan[all]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


__all__ = ["CLIError", "build_parser", "main"]
