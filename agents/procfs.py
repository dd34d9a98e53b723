"""Read-only access to a procfs tree under an injectable root (``/proc`` on a real host)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path


class ProcFS:
    """A procfs tree rooted at ``root``; network files describe the reader's namespace."""

    def __init__(self, root: str | os.PathLike[str] = "/proc") -> None:
        self.root = Path(root)

    def read(self, rel: str) -> str | None:
        try:
            return (self.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def local_ipv4(self) -> list[str]:
        """The host's local IPv4 addresses (``/32 host LOCAL`` entries of ``net/fib_trie``)."""
        text = self.read("net/fib_trie") or ""
        found: list[str] = []
        last: str | None = None
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("|-- "):
                last = s[4:].strip()
            elif s.startswith("/32 host LOCAL") and last and last not in found:
                found.append(last)
        return found

    def routes(self) -> list[tuple[str, ipaddress.IPv4Network]]:
        """(interface, directly connected network) from ``net/route``, default route left out."""
        text = self.read("net/route") or ""
        out: list[tuple[str, ipaddress.IPv4Network]] = []
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) < 8:
                continue
            try:
                dest = ipaddress.IPv4Address(int(cols[1], 16).to_bytes(4, "little"))
                mask = ipaddress.IPv4Address(int(cols[7], 16).to_bytes(4, "little"))
                net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
            except ValueError:
                continue
            if net.prefixlen > 0:
                out.append((cols[0], net))
        return out

    def ipv4_by_interface(self) -> dict[str, str]:
        """Interface name -> its first local IPv4 address (matched by the longest route)."""
        routes = self.routes()
        result: dict[str, str] = {}
        for addr in self.local_ipv4():
            ip = ipaddress.IPv4Address(addr)
            best = max(
                (r for r in routes if ip in r[1]), key=lambda r: r[1].prefixlen, default=None
            )
            if best is not None and best[0] not in result:
                result[best[0]] = addr
        return result
