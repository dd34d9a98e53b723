"""Scenario files: which emulated hosts exist, their link rates and racks.

A scenario is YAML or JSON::

    name: two-racks
    description: free text
    trunk_mbit: 400            # rate of each link joining rack r > 0 to rack 0 (2+ racks)
    hosts:                     # expanded in order into h0, h1, ...
      - {count: 4, rate_mbit: 200, rack: 0}
      - {count: 4, rate_mbit: 200, rack: 1}

Each host entry takes ``rate_mbit`` (Mbit/s = 10^6 bit/s, each direction), optional ``count``
(default 1), ``rack`` (default 0) and ``name`` (only with ``count: 1``; default ``h<index>``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from syncplan.testbed import TestbedError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO_ROOT / "bench" / "testbed" / "scenarios"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
HOST_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MAX_HOSTS = 64
MAX_RATE_MBIT = 10_000.0


def mbit_to_GBps(rate_mbit: float) -> float:
    """Mbit/s (10^6 bit/s) to GB/s (10^9 bytes/s)."""
    return rate_mbit * 1e6 / 8 / 1e9


@dataclass(frozen=True)
class Host:
    """One emulated host: its name, rack and link rate (each direction)."""

    name: str
    rate_mbit: float
    rack: int = 0

    def __post_init__(self) -> None:
        if not HOST_RE.match(self.name):
            raise TestbedError(
                f"host name {self.name!r}: use 1-8 lowercase letters/digits, starting with a letter"
            )
        _check_rate(f"host {self.name}: rate_mbit", self.rate_mbit)
        if isinstance(self.rack, bool) or not isinstance(self.rack, int) or self.rack < 0:
            raise TestbedError(
                f"host {self.name}: rack must be a non-negative integer, got {self.rack!r}"
            )


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: hosts in rank order, racks numbered 0..R-1."""

    name: str
    hosts: tuple[Host, ...]
    trunk_mbit: float | None = None
    description: str = ""
    racks: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise TestbedError(
                f"scenario name {self.name!r}: use lowercase letters, digits "
                "and '-', at most 32 characters"
            )
        if not 1 <= len(self.hosts) <= MAX_HOSTS:
            raise TestbedError(
                f"scenario {self.name}: needs 1..{MAX_HOSTS} hosts, got {len(self.hosts)}"
            )
        names = [h.name for h in self.hosts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TestbedError(f"scenario {self.name}: duplicate host names {dup}")
        racks = tuple(sorted({h.rack for h in self.hosts}))
        if racks != tuple(range(len(racks))):
            raise TestbedError(
                f"scenario {self.name}: racks must be numbered 0..R-1 without "
                f"gaps, got {list(racks)}"
            )
        object.__setattr__(self, "racks", racks)
        if len(racks) > 1:
            if self.trunk_mbit is None:
                raise TestbedError(f"scenario {self.name}: {len(racks)} racks need trunk_mbit")
            _check_rate(f"scenario {self.name}: trunk_mbit", self.trunk_mbit)
        elif self.trunk_mbit is not None:
            raise TestbedError(
                f"scenario {self.name}: trunk_mbit given but all hosts are in rack 0"
            )

    @classmethod
    def from_dict(cls, data: Any, source: str = "scenario") -> Scenario:
        """Build from a parsed file; raise TestbedError naming the bad field."""
        if not isinstance(data, Mapping):
            raise TestbedError(f"{source}: expected a mapping with 'name' and 'hosts'")
        unknown = set(data) - {"name", "description", "hosts", "trunk_mbit"}
        if unknown:
            raise TestbedError(f"{source}: unknown keys {sorted(unknown)}")
        raw_hosts = data.get("hosts")
        if not isinstance(raw_hosts, list) or not raw_hosts:
            raise TestbedError(f"{source}: 'hosts' must be a non-empty list")
        hosts: list[Host] = []
        for i, entry in enumerate(raw_hosts):
            hosts.extend(_expand(f"{source}: hosts[{i}]", entry, len(hosts)))
        name = data.get("name")
        if not isinstance(name, str):
            raise TestbedError(f"{source}: 'name' must be a string")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise TestbedError(f"{source}: 'description' must be a string")
        return cls(
            name=name,
            hosts=tuple(hosts),
            trunk_mbit=data.get("trunk_mbit"),
            description=description,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "hosts": [
                {"name": h.name, "rate_mbit": h.rate_mbit, "rack": h.rack} for h in self.hosts
            ],
        }
        if self.trunk_mbit is not None:
            out["trunk_mbit"] = self.trunk_mbit
        return out

    def hosts_in_rack(self, rack: int) -> list[Host]:
        return [h for h in self.hosts if h.rack == rack]

    def bottleneck_mbit(self) -> float:
        """The slowest shaped link: the rate a rack-contiguous ring is held to."""
        rates = [h.rate_mbit for h in self.hosts]
        if self.trunk_mbit is not None:
            rates.append(self.trunk_mbit)
        return min(rates)

    def ring_bound_s(self, size_bytes: int) -> float:
        """Bandwidth time of a rack-contiguous ring all-reduce: 2(n-1)/n * size / bottleneck."""
        n = len(self.hosts)
        if n == 1:
            return 0.0
        return 2 * (n - 1) / n * size_bytes / (self.bottleneck_mbit() * 1e6 / 8)

    def ground_truth_topology(self) -> dict[str, Any]:
        """The shaped network as a topology (docs/formats.md) (for comparisons only).

        One ``cpu0`` endpoint and ``nic0`` per host, one switch ``sw<rack>`` per rack,
        trunks from ``sw<r>`` to ``sw0``.
        """
        nodes: list[dict[str, Any]] = [{"id": f"sw{r}", "kind": "switch"} for r in self.racks]
        links: list[dict[str, Any]] = []
        for h in self.hosts:
            nodes += [
                {"id": f"{h.name}/cpu0", "kind": "cpu", "host": h.name},
                {"id": f"{h.name}/nic0", "kind": "nic", "host": h.name},
            ]
            links += [
                {
                    "src": f"{h.name}/cpu0",
                    "dst": f"{h.name}/nic0",
                    "bandwidth_GBps": 100.0,
                    "latency_us": 0.0,
                    "kind": "pcie",
                },
                {
                    "src": f"{h.name}/nic0",
                    "dst": f"sw{h.rack}",
                    "bandwidth_GBps": mbit_to_GBps(h.rate_mbit),
                    "latency_us": 0.0,
                    "kind": "network",
                },
            ]
        for r in self.racks[1:]:
            assert self.trunk_mbit is not None
            links.append(
                {
                    "src": f"sw{r}",
                    "dst": "sw0",
                    "bandwidth_GBps": mbit_to_GBps(self.trunk_mbit),
                    "latency_us": 0.0,
                    "kind": "network",
                }
            )
        return {"nodes": nodes, "links": links}


def _check_rate(what: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_RATE_MBIT
    ):
        raise TestbedError(f"{what} must be a number in (0, {MAX_RATE_MBIT:g}], got {value!r}")


def _expand(where: str, entry: Any, start: int) -> list[Host]:
    if not isinstance(entry, Mapping):
        raise TestbedError(f"{where}: expected a mapping with 'rate_mbit'")
    unknown = set(entry) - {"name", "count", "rate_mbit", "rack"}
    if unknown:
        raise TestbedError(f"{where}: unknown keys {sorted(unknown)}")
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_HOSTS:
        raise TestbedError(f"{where}: count must be an integer in 1..{MAX_HOSTS}, got {count!r}")
    if "name" in entry and count != 1:
        raise TestbedError(f"{where}: 'name' is only allowed with count 1")
    if "rate_mbit" not in entry:
        raise TestbedError(f"{where}: 'rate_mbit' is required")
    hosts = []
    for k in range(count):
        name = entry.get("name", f"h{start + k}")
        if not isinstance(name, str):
            raise TestbedError(f"{where}: 'name' must be a string")
        hosts.append(Host(name=name, rate_mbit=entry["rate_mbit"], rack=entry.get("rack", 0)))
    return hosts


def scenario_path(name_or_path: str) -> Path:
    """A file path as given, or ``bench/testbed/scenarios/<name>.yaml`` for a bare name."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        return p
    return SCENARIO_DIR / f"{name_or_path}.yaml"


def load_scenario(name_or_path: str) -> Scenario:
    """Load a scenario by name (``mixed``) or by file path; TestbedError on any problem."""
    path = scenario_path(name_or_path)
    if not path.is_file():
        known = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
        raise TestbedError(f"no scenario {name_or_path!r} (looked for {path}); known: {known}")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise TestbedError(f"{path}: cannot parse: {exc}") from exc
    return Scenario.from_dict(data, source=str(path))
