"""One discovery pass: NVML (if it answers), sysfs NICs, procfs addresses -> HostReport."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from syncplan.agents import nvml as N
from syncplan.agents.build import build_report
from syncplan.agents.gpus import GpuInventory, discover_gpus
from syncplan.agents.nics import discover_nics
from syncplan.agents.procfs import ProcFS
from syncplan.agents.sysfs import SysFS
from syncplan.core.report import HostReport

log = logging.getLogger("syncplan.agent.discovery")
AGENT_VERSION = "0.1.0"


@dataclass
class Discoverer:
    """Discovers a host; NVML failures are logged once and give a CPU-only report."""

    host: str
    sysfs: SysFS = field(default_factory=SysFS)
    procfs: ProcFS = field(default_factory=ProcFS)
    nvml_factory: Callable[[], N.NVML] = N.RealNVML
    _warned: set[str] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    last_inventory: GpuInventory | None = field(default=None, init=False)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    def gpus(self) -> GpuInventory | None:
        try:
            nv = self.nvml_factory()
            nv.init()
        except N.NVMLCallError as exc:
            self._warn_once(
                f"init:{exc.code}", f"no NVIDIA GPU usable ({exc.name}); reporting a CPU-only host"
            )
            return None
        except OSError as exc:
            self._warn_once("init:os", f"NVML could not be loaded ({exc}); CPU-only host")
            return None
        try:
            inv = discover_gpus(nv)
        except N.NVMLCallError as exc:
            self._warn_once(f"query:{exc.code}", f"NVML query failed ({exc}); CPU-only host")
            return None
        finally:
            with contextlib.suppress(N.NVMLCallError):
                nv.shutdown()
        if not inv.gpus:
            self._warn_once("nogpu", "NVML sees no GPU; reporting a CPU-only host")
        return inv

    def discover(self) -> HostReport:
        with self._lock:
            inv = self.gpus()
            self.last_inventory = inv
            nics = discover_nics(self.sysfs, self.procfs.ipv4_by_interface())
            if not nics:
                self._warn_once("nonic", "no usable NIC found")
            return build_report(self.host, inv, nics, self.sysfs, agent_version=AGENT_VERSION)
