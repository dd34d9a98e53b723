"""The state file: everything a testbed created, so that ``down`` can remove it after a crash.

One JSON file per scenario in the state directory (default ``/run/syncplan-testbed``, which,
like the namespaces, does not survive a reboot). It is written before the first object is
created and after every change, atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.testbed import TestbedError

DEFAULT_STATE_DIR = Path(os.environ.get("SYNCPLAN_TESTBED_STATE", "/run/syncplan-testbed"))


@dataclass
class ProcRecord:
    """A process the testbed started (or a runner driving it)."""

    pid: int
    start_ticks: int | None
    role: str
    netns: str | None = None
    log: str | None = None


@dataclass
class HostRecord:
    """One host as created: its namespace, interface, address and shaped rate."""

    name: str
    rank: int
    netns: str
    iface: str
    addr: str
    rate_mbit: float
    rack: int


@dataclass
class State:
    """The record of one testbed instance (``prefix`` names every object it creates)."""

    scenario: dict[str, Any]
    prefix: str
    phase: str = "creating"  # creating -> up
    namespaces: list[str] = field(default_factory=list)
    hosts: list[HostRecord] = field(default_factory=list)
    service: HostRecord | None = None
    qdiscs: list[dict[str, Any]] = field(default_factory=list)
    processes: list[ProcRecord] = field(default_factory=list)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("path")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], path: Path | None = None) -> State:
        try:
            svc = d.get("service")
            return cls(
                scenario=d["scenario"],
                prefix=d["prefix"],
                phase=d.get("phase", "?"),
                namespaces=list(d.get("namespaces", [])),
                hosts=[HostRecord(**h) for h in d.get("hosts", [])],
                service=HostRecord(**svc) if svc else None,
                qdiscs=list(d.get("qdiscs", [])),
                processes=[ProcRecord(**p) for p in d.get("processes", [])],
                path=path,
            )
        except (KeyError, TypeError) as exc:
            raise TestbedError(f"{path}: not a testbed state file ({exc})") from exc

    def save(self) -> None:
        if self.path is None:
            raise TestbedError("state has no file path")
        atomic_write_json(self.path, self.to_dict())


def state_file(state_dir: Path, scenario_name: str) -> Path:
    return state_dir / f"{scenario_name}.json"


def load_state(path: Path) -> State | None:
    """The state at ``path``, or None if there is no such file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TestbedError(
            f"{path}: unreadable state file ({exc}); remove it after checking "
            "`ip netns list` for leftovers"
        ) from exc
    return State.from_dict(data, path)
