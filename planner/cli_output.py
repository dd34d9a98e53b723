"""What the planner commands write: tables, the plan file (-o) and progress on stderr."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncplan.core.atomic import new_file_mode
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
        os.fchmod(fd, new_file_mode())  # mkstemp's 0600 is for secrets; a plan is not one
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
    """Progress of a long plan on stderr: elapsed time and each algorithm as the planner
    finishes pricing it. On a terminal one line, cut to the terminal's width and redrawn
    (each second and at each update); elsewhere one line per update, at most one every
    ``EVERY_S`` seconds, and the final state at the end."""

    EVERY_S = 5.0

    def __init__(
        self, label: str, verbose: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(logging.DEBUG)
        self.label, self.verbose = label, verbose
        self.done: list[str] = []
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        self.clock = clock
        self.t0 = clock()
        self._written: float | None = None  # when the last line went out (not a terminal)
        self._news = False  # an update not written yet
        self._out = threading.Lock()
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
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        elif self._news:
            self._line(force=True)

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

    def _width(self) -> int:
        """The terminal's columns (stderr's, else shutil's guess: $COLUMNS, stdout, 80)."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            columns = 0
        return columns or shutil.get_terminal_size((80, 24)).columns or 80  # 0: size unset

    def _line(self, force: bool = False) -> None:
        now = self.clock()
        text = f"planning {self.label}: {now - self.t0:.0f} s"
        if self.tty:  # the stage before the list, which is what gets cut
            text += (f"; {self.stage}" if self.stage else "") + (
                f" (priced: {', '.join(self.done)})" if self.done else ""
            )
            width = max(self._width() - 1, 20)  # the last column would wrap on some terminals
            if len(text) > width:
                text = text[: width - 1] + "\u2026"
            with self._out:
                self.stream.write(f"\r\x1b[K{text}")
                self.stream.flush()
            return
        text += (f" (priced: {', '.join(self.done)})" if self.done else "") + (
            f"; {self.stage}" if self.stage else ""
        )
        with self._out:
            if not force and self._written is not None and now - self._written < self.EVERY_S:
                self._news = True
                return
            self._written, self._news = now, False
            self.stream.write(text + "\n")
            self.stream.flush()

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


def print_chosen_and_write(
    doc: dict[str, Any], output: Output | None, rank: str | None = None
) -> None:
    """The ``chosen:`` line of a plan, then the document (or rank ``rank``'s slice) written to
    ``output`` (if any)."""
    steps = doc["program"]["steps"]
    print(
        f"chosen: {doc['algorithm']}, {len(steps)} steps, "
        f"{sum(len(s) for s in steps)} transfers, plan_id {doc['plan_id']}"
    )
    if output is not None:
        output.commit(plan_text(doc, rank))
        print(f"wrote {output.path}")
