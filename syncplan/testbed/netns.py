"""Thin wrappers over ``ip`` and ``tc`` and over processes living in network namespaces."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from syncplan.testbed import TestbedError

log = logging.getLogger(__name__)
CMD_TIMEOUT_S = 30.0


def sh(argv: Sequence[str], timeout: float = CMD_TIMEOUT_S, check: bool = True) -> str:
    """Run a command, return its stdout; TestbedError (with stderr) if it fails and ``check``."""
    log.debug("run: %s", " ".join(argv))
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise TestbedError(f"{argv[0]} not found: install iproute2") from exc
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"{' '.join(argv)}: timed out after {timeout:g} s") from exc
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc.stdout


def is_root() -> bool:
    return os.geteuid() == 0


def netns_list() -> list[str]:
    """Names of all named network namespaces."""
    out = sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(ns: str) -> list[int]:
    """Pids of the processes whose network namespace is ``ns``."""
    out = sh(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def root_links() -> list[str]:
    """Interface names in the root (this process's) network namespace."""
    out = sh(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def start_ticks(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), None if the process is gone."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def alive(pid: int, ticks: int | None, proc_root: Path = Path("/proc")) -> bool:
    """True if ``pid`` runs and is the same process (same start time) as recorded."""
    now = start_ticks(pid, proc_root)
    return now is not None and (ticks is None or now == ticks)


def terminate(pids: Sequence[int], grace_s: float = 3.0) -> None:
    """SIGTERM each pid, wait up to ``grace_s``, then SIGKILL the survivors."""
    pending = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            pending.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if _exists(p)]
        if pending:
            time.sleep(0.05)
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _exists(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # reap our own child: no zombie
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = start_ticks(pid)
    if stat is None:
        return False
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
