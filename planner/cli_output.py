"""What the planner commands write: tables, the plan file (-o) and progress on stderr."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from syncplan.core.errors import RequestError


def load_json(path: str, what: str) -> Any:
    """The JSON document at ``path``; RequestError naming ``what`` when it cannot be read."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise RequestError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise RequestError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def table(rows: list[list[str]], header: list[str]) -> str:
    """``rows`` under ``header`` in aligned columns, the first left-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Output:
    """The plan document's destination, opened before planning: a temporary file beside it
    proves the directory is writable; ``commit`` renames it into place, ``close`` removes
    whatever is left, so no temporary file outlives the command."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise RequestError(
                f"-o {path}: is a directory; name a file, for example {self.path / 'plan.json'}"
            )
        parent = self.path.parent
        if not parent.is_dir():
            raise RequestError(f"-o {path}: directory {parent} does not exist")
        try:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise RequestError(
                f"-o {path}: cannot write in {parent} ({exc.strerror or exc})"
            ) from None
        self._file = os.fdopen(fd, "w")
        self._tmp: Path | None = Path(tmp)

    def commit(self, text: str) -> None:
        assert self._tmp is not None
        try:
            with self._file:
                self._file.write(text)
            self._tmp.replace(self.path)
        except OSError as exc:
            raise RequestError(f"-o {self.path}: cannot write ({exc.strerror or exc})") from None
        self._tmp = None

    def close(self) -> None:
        self._file.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None


class Progress(logging.Handler):
    """Progress of a long plan on stderr: elapsed time (redrawn each second on a terminal,
    a line every 10 s otherwise) and each algorithm as the planner finishes pricing it."""

    def __init__(self, label: str, verbose: bool) -> None:
        super().__init__(logging.DEBUG)
        self.label, self.verbose = label, verbose
        self.done: list[str] = []
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._log = logging.getLogger("syncplan.planner.plan")
        self._stages = logging.getLogger("syncplan.planner.algorithms.forest.effort")
        self.stage = ""

    def __enter__(self) -> Progress:
        self._saved = (
            self._log.level,
            self._log.propagate,
            self._stages.level,
            self._stages.propagate,
        )
        self._log.setLevel(logging.DEBUG)
        self._log.propagate = False  # forwarded by emit, below, at the level asked for
        self._log.addHandler(self)
        self._stages.setLevel(logging.INFO)
        self._stages.propagate = False  # shown in the progress line only
        self._stages.addHandler(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._log.removeHandler(self)
        self._log.setLevel(self._saved[0])
        self._log.propagate = self._saved[1]
        self._stages.removeHandler(self)
        self._stages.setLevel(self._saved[2])
        self._stages.propagate = self._saved[3]
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == self._stages.name:  # a stage of forest's thorough search
            self.stage = record.getMessage()
            self._line()
            return
        if record.levelno >= logging.INFO or self.verbose:
            logging.getLogger().handle(record)
        if record.msg == "%s priced in %.3f s" and len(record.args or ()) == 2:
            name, secs = record.args  # type: ignore[misc]
            self.done.append(f"{name} {secs:.1f} s")
            self._line()

    def _line(self) -> None:
        text = (
            f"planning {self.label}: {time.monotonic() - self.t0:.0f} s"
            + (f" (priced: {', '.join(self.done)})" if self.done else "")
            + (f"; {self.stage}" if self.stage else "")
        )
        sys.stderr.write(f"\r\x1b[K{text}" if self.tty else text + "\n")
        sys.stderr.flush()

    def _tick(self) -> None:
        every = 1.0 if self.tty else 10.0
        while not self._stop.wait(every):
            self._line()


def check_slice_option(args: Any, ranks: list[str]) -> None:
    """RequestError unless ``--slice`` is absent, or given with ``-o`` and names a rank."""
    if getattr(args, "slice", None) is None:
        return
    from syncplan.core.document import PlanError
    from syncplan.core.slice import resolve_rank

    if not args.output:
        raise RequestError("--slice needs -o FILE: it writes one rank's slice of the plan")
    try:
        resolve_rank(ranks, args.slice)
    except PlanError as exc:
        raise RequestError(f"--slice: {exc}") from None


def plan_text(doc: dict[str, Any], rank: str | None) -> str:
    """The plan document as written by -o: the whole plan, or rank ``rank``'s slice."""
    if rank is not None:
        from syncplan.core.slice import slice_document

        doc = slice_document(doc, rank)
    return json.dumps(doc, separators=(",", ":"))
