"""One service port everywhere: `syncplan serve`'s default is the port every unit, doc,
help text and example uses to reach the service."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from syncplan.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
URL_PORT = re.compile(r"https?://[A-Za-z0-9_.\-]+:(\d+)")
SOURCES = [
    "README.md",
    "docs/*.md",
    "deploy/*",
    "executor/*.py",
    "agents/cli.py",
    "api/cli.py",
    "syncplan/**/*.py",
]


def _sub(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def serve_port() -> int:
    serve = _sub(build_parser(), "serve")
    return next(a.default for a in serve._actions if a.dest == "port")


def test_every_service_url_uses_the_default_port() -> None:
    port = serve_port()
    assert port == 8080
    seen: dict[str, list[int]] = {}
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file():
                ports = [int(p) for p in URL_PORT.findall(path.read_text(errors="replace"))]
                if ports:
                    seen[str(path.relative_to(ROOT))] = ports
    wrong = {f: ps for f, ps in seen.items() if any(p != port for p in ps)}
    assert not wrong, f"service URLs not on port {port}: {wrong}"
    # The places a new user copies from all name the service with its port.
    for needed in (
        "README.md",
        "deploy/syncplan-agent.service",
        "docs/agent.md",
        "docs/executor.md",
        "executor/demo.py",
        "agents/cli.py",
    ):
        assert needed in seen, needed


def test_help_texts_name_the_default_port() -> None:
    parser = build_parser()
    assert f"default {serve_port()}" in _sub(parser, "serve").format_help()
    assert f":{serve_port()}" in _sub(parser, "agent").format_help()
    unit = (ROOT / "deploy" / "syncplan-api.service").read_text()
    assert f"--port {serve_port()}" in unit
