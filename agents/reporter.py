"""Deliver reports to ``PUT {server}/v1/agents/{host}/report``; never lose the latest one.

Each report gets a sequence number ``max(last + 1, unix milliseconds)``, persisted in the spool
folder before it is sent, so numbers keep growing across restarts and even when the spool is
lost. The latest undelivered report is kept in ``spool/pending.json`` (written atomically);
a sender thread delivers it, retrying with exponential backoff and jitter while the service is
unreachable, and removes it once the service accepted it. Reports are full snapshots, so only
the newest one matters: a newer report replaces an undelivered older one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from syncplan.core.atomic import atomic_write
from syncplan.core.http import Backoff, HttpClient, HttpError, retry_after
from syncplan.core.report import HostReport

log = logging.getLogger("syncplan.agent.reporter")

RETRY_STATUSES = {401, 403, 404, 408, 425, 429}  # may heal without a new report

__all__ = ["RETRY_STATUSES", "Backoff", "Reporter"]  # Backoff: core.http's, used here


class Reporter:
    """Spools and sends reports; ``start()`` the sender, ``stop()`` to end it."""

    def __init__(
        self,
        server: str | None,
        host: str,
        token: str | None,
        spool_dir: str | os.PathLike[str],
        *,
        timeout_s: float = 10.0,
        backoff: Backoff | None = None,
        on_delivered: Callable[[int], None] | None = None,
        on_failure: Callable[[str], None] | None = None,
        ready_poll_s: float = 2.0,
    ) -> None:
        self.server = server.rstrip("/") if server else None
        self.host = host
        self.token = token
        self.spool = Path(spool_dir)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self.on_delivered = on_delivered
        self.on_failure = on_failure
        self.ready_poll_s = ready_poll_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_delivered_seq: int | None = None
        self.last_success_at: float | None = None
        self.last_error: str | None = None  # why the last attempt failed
        self.refused: tuple[int, str] | None = None  # (seq, why): the service said no
        self._attempted = threading.Event()  # set after each delivery attempt

    # sequence numbers -----------------------------------------------------------------

    @property
    def _seq_file(self) -> Path:
        return self.spool / "seq"

    @property
    def pending_file(self) -> Path:
        return self.spool / "pending.json"

    def _last_seq(self) -> int:
        try:
            return int(self._seq_file.read_text().strip())
        except (OSError, ValueError):
            return -1

    def next_seq(self, above: int = -1) -> int:
        """A new seq, higher than every earlier one and than ``above``."""
        with self._lock:
            seq = max(self._last_seq() + 1, above + 1, int(time.time() * 1000))
            atomic_write(self._seq_file, f"{seq}\n")
            return seq

    # spooling --------------------------------------------------------------------------

    def submit(self, report: HostReport) -> HostReport:
        """Number the report, spool it and wake the sender; returns the numbered report."""
        numbered = report.model_copy(update={"seq": self.next_seq()})
        with self._lock:
            atomic_write(self.pending_file, numbered.model_dump_json() + "\n")
        self._wake.set()
        return numbered

    def pending(self) -> dict | None:
        with self._lock:
            try:
                return json.loads(self.pending_file.read_text())
            except (OSError, ValueError):
                return None

    def _clear_pending(self, seq: int) -> None:
        with self._lock:
            try:
                current = json.loads(self.pending_file.read_text())
            except (OSError, ValueError):
                return
            if current.get("seq") == seq:  # a newer report may have been spooled meanwhile
                with contextlib.suppress(OSError):
                    self.pending_file.unlink()

    # sending ---------------------------------------------------------------------------

    def start(self) -> Reporter:
        if self.server and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="reporter", daemon=True)
            self._thread.start()
        return self

    def stop(self, flush_timeout_s: float = 0.0) -> None:
        """Stop the sender; first try for up to ``flush_timeout_s`` to deliver the pending one."""
        if flush_timeout_s > 0 and self.server:
            deadline = time.monotonic() + flush_timeout_s
            while self.pending() is not None and time.monotonic() < deadline:
                time.sleep(0.05)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5)
            self._thread = None

    close = stop

    def outcome(self, seq: int, timeout_s: float) -> str | None:
        """Wait for report ``seq``: None once delivered, else why not: refused (401, 403 and
        the answers that drop a report end the wait at once) or not delivered in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.last_delivered_seq is not None and self.last_delivered_seq >= seq:
                return None
            if self.refused is not None and self.refused[0] >= seq:
                return self.refused[1]
            left = deadline - time.monotonic()
            if left <= 0 or self.server is None:
                return (
                    f"report seq {seq} not delivered within {timeout_s:g} s "
                    f"({self.last_error or 'no answer'})"
                )
            if self._attempted.wait(min(left, 1.0)):
                self._attempted.clear()

    def _run(self) -> None:
        attempt = 0
        http = HttpClient(
            self.server or "",
            token=self.token,
            timeout_s=self.timeout_s,
            retries=0,
            retry_statuses=RETRY_STATUSES,
        )
        with http:
            while not self._stop.is_set():
                body = self.pending()
                if body is None:
                    self._wake.wait(timeout=1.0)
                    self._wake.clear()
                    continue
                outcome, asked = self._send(http, body)
                if outcome == "retry":
                    delay = max(self.backoff.delay(attempt), min(asked or 0.0, self.backoff.max_s))
                    attempt += 1
                    if self._wait_for_service(http, delay):
                        attempt = 0
                else:
                    attempt = 0

    def _wait_for_service(self, http: HttpClient, delay: float) -> bool:
        """Sleep up to ``delay`` before the next try, but end early (True) once the service
        answers ``GET /readyz`` (checked every ``ready_poll_s``, jittered) or a new report
        is submitted, so that delivery resumes within seconds of the service's return."""
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._wake.wait(min(left, self.ready_poll_s * random.uniform(0.5, 1.5))):
                self._wake.clear()
                return not self._stop.is_set()
            with contextlib.suppress(HttpError):
                if http.request("GET", "/readyz", timeout_s=2.0).status_code == 200:
                    return True
        return False

    def _send(self, http: HttpClient, body: dict) -> tuple[str, float | None]:
        """Deliver ``body`` once: ("ok" | "retry" | "dropped", the Retry-After asked for)."""
        try:
            return self._send_once(http, body)
        finally:
            self._attempted.set()

    def _refuse(self, seq: int, resp: object) -> None:
        code = getattr(resp, "status_code", "?")
        text = getattr(resp, "text", "")
        try:
            why = json.loads(text)["detail"][0]["msg"]
        except (ValueError, KeyError, IndexError, TypeError):
            why = text[:200].strip()
        self.refused = (seq, f"report seq {seq} refused ({code}{': ' + why if why else ''})")

    def _send_once(self, http: HttpClient, body: dict) -> tuple[str, float | None]:
        seq = int(body.get("seq", -1))
        try:
            resp = http.request("PUT", f"/v1/agents/{self.host}/report", json=body)
        except HttpError as exc:
            if exc.response is None:
                self._failed(f"service unreachable: {exc}")
                return "retry", None
            resp = exc.response
            if resp.status_code in (401, 403):  # may heal (a token rotated), never by itself
                self._refuse(seq, resp)
            self._failed(f"service answered {resp.status_code}: {resp.text[:300]}")
            return "retry", retry_after(resp.headers)
        if 200 <= resp.status_code < 300:
            self.last_delivered_seq = seq
            self.last_success_at = time.time()
            self._clear_pending(seq)
            if self.on_delivered:
                self.on_delivered(seq)
            log.debug("report seq %d delivered", seq)
            return "ok", None
        if resp.status_code == 409 and self._renumber(http, body):
            return "retry", None  # resend soon with a seq above the stored one
        # 400/409/413/422: this report will never be accepted; drop it, keep the next one.
        log.error("report seq %d refused with %d: %s", seq, resp.status_code, resp.text[:300])
        self._refuse(seq, resp)
        self._clear_pending(seq)
        if self.on_failure:
            self.on_failure(f"refused {resp.status_code}")
        return "dropped", None

    def _renumber(self, http: HttpClient, body: dict) -> bool:
        """After a 409: read the stored seq (``GET /v1/agents``) and give the pending report
        a seq above it (another agent or a lost spool may have gone ahead). False when the
        stored seq cannot be read or is not the cause."""
        try:
            doc, _ = http.request_json("GET", "/v1/agents")
            stored = int(doc["hosts"][self.host]["seq"])
        except (HttpError, ValueError, KeyError, TypeError):
            stored = None
        seq = int(body.get("seq", -1))
        if stored is None or stored < seq:
            return False
        new = self.next_seq(above=stored)
        with self._lock:
            try:
                current = json.loads(self.pending_file.read_text())
            except (OSError, ValueError):
                return True
            if current.get("seq") == seq:
                current["seq"] = new
                atomic_write(self.pending_file, json.dumps(current) + "\n")
        log.warning(
            "report seq %d refused: the service holds seq %d; resending as %d", seq, stored, new
        )
        return True

    def _failed(self, why: str) -> None:
        self.last_error = why
        log.warning("report not delivered (%s); will retry", why)
        if self.on_failure:
            self.on_failure(why)
