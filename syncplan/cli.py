"""The ``syncplan`` command: one entry point, one subcommand module per component.

Each component module exposes ``register(subparsers)``, which adds its subcommands and sets
``func`` (taking the parsed namespace, returning an exit code) on each. Registration must
stay cheap: heavy imports (FastAPI, torch) happen inside ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn

from syncplan.core.errors import CLIError, PlannerError
from syncplan.extras import install_hint

COMPONENTS = (
    "syncplan.planner.cli",
    "syncplan.api.cli",
    "syncplan.api.identity",
    "syncplan.agents.cli",
    "syncplan.executor.cli",
    "syncplan.testbed.cli",
    "syncplan.demo",
    "syncplan.export.cli",
    "syncplan.draw.cli",
    "syncplan.sweep",
)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the problem and where to find help (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="syncplan", description="Topology-aware all-reduce planning and execution."
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log debug messages (and show tracebacks of unexpected errors)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMPONENTS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # component not present in this checkout
            if exc.name and not exc.name.startswith("syncplan"):
                continue  # its extra is not installed (an agent host has no planner)
            raise
        module.register(sub)
    return parser


def version() -> str:
    """The installed distribution's version, else the package's own."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from syncplan import __version__

    try:
        return dist_version("syncplan")
    except PackageNotFoundError:
        return __version__


def _quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``| head``): stop quietly, as a C tool would."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush goes nowhere
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows up here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (CLIError, PlannerError) as exc:
        print(f"syncplan {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        print(
            f"syncplan {args.command}: error: missing dependency {exc.name!r}; "
            f"install it with: {install_hint(exc.name)}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        # Reached only by a case no component turned into a CLIError: still one line.
        if args.verbose:
            raise
        print(
            f"syncplan {args.command}: error: {type(exc).__name__}: {exc} "
            "(run with -v for the traceback)",
            file=sys.stderr,
        )
        return 2


__all__ = ["CLIError", "build_parser", "main"]
