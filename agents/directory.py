"""Peers from the service: every fresh host's advertised probe server (``GET /v1/agents``)."""

from __future__ import annotations

import logging

from syncplan.core.http import HttpClient, HttpError

log = logging.getLogger("syncplan.agent")


def parse_address(text: str) -> tuple[str, int]:
    """``"10.0.0.2:7470"`` or ``"[fe80::1]:7470"`` -> (address, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"probe address {text!r} is not ADDRESS:PORT")
    return host.strip("[]"), int(port)


class PeerDirectory:
    """Fetches the peers to probe from the service; keeps the last good list when it fails."""

    def __init__(self, server: str, me: str, token: str | None, timeout_s: float = 10.0) -> None:
        self.url = f"{server.rstrip('/')}/v1/agents"
        self.me = me
        self.token = token
        self.timeout_s = timeout_s
        self.peers: dict[str, tuple[str, int]] = {}
        self._failing = False

    def refresh(self) -> dict[str, tuple[str, int]]:
        """The fresh hosts other than this one that advertise a probe server."""
        try:
            with HttpClient(
                self.url, token=self.token, timeout_s=self.timeout_s, retries=0
            ) as http:
                hosts = http.request_json("GET", "")[0]["hosts"]
            found: dict[str, tuple[str, int]] = {}
            for name, st in hosts.items():
                addr = st.get("probe_address")
                if name == self.me or st.get("stale") or not addr:
                    continue
                try:
                    found[name] = parse_address(addr)
                except ValueError as exc:
                    log.warning("peer %s skipped: %s", name, exc)
        except (HttpError, ValueError, KeyError, TypeError, AttributeError) as exc:
            if not self._failing:
                log.warning(
                    "cannot fetch peers from %s (%s); using the last %d known",
                    self.url,
                    exc,
                    len(self.peers),
                )
            self._failing = True
            return dict(self.peers)
        if self._failing or set(found) != set(self.peers):
            log.info("peers from the service: %s", ", ".join(sorted(found)) or "none")
        self._failing = False
        self.peers = found
        return dict(found)
