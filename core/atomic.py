"""Atomic file writes: a reader sees the old content or the new one, never a torn file.

Everything is written to a temporary file in the target's folder, flushed to disk and then
renamed over the target (``os.replace``); a failed write leaves no temporary file behind.
The file gets the permissions a new file would (0666 less the umask) unless a ``mode`` is
given (0600 for a secret).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def new_file_mode() -> int:
    """0666 less the process umask: the mode ``open(path, "w")`` gives a new file."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it (and put it back at once)
    os.umask(mask)
    return 0o666 & ~mask


class AtomicFile:
    """A temporary file beside ``path`` (same suffix, so tools that read the format from the
    name work on it): ``write`` fills it, ``commit`` renames it over ``path``, ``discard``
    removes it. As a context manager it commits on a clean exit and discards on an error.
    Raises OSError when the folder is not writable; it is created when missing. ``mode``:
    the file's permissions (default: those of a new file, 0666 less the umask)."""

    def __init__(self, path: str | os.PathLike[str], mode: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=f".tmp{self.path.suffix}", dir=self.path.parent
        )
        os.close(fd)
        self.tmp: Path | None = Path(name)
        os.chmod(self.tmp, new_file_mode() if mode is None else mode)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def write(self, data: str | bytes) -> None:
        """Replace the temporary file's content with ``data`` (text as UTF-8)."""
        assert self.tmp is not None, "already committed or discarded"
        raw = data.encode() if isinstance(data, str) else data
        with open(self.tmp, "wb") as f:
            f.write(raw)

    def commit(self) -> None:
        """Flush the temporary file to disk and rename it over ``path`` (once)."""
        if self.tmp is None:
            return
        try:
            with open(self.tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        self.tmp = None
        with contextlib.suppress(OSError):  # make the rename itself durable
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def discard(self) -> None:
        """Remove the temporary file, if it is still there."""
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
            self.tmp = None


def atomic_write(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (``mode``: as AtomicFile's)."""
    with AtomicFile(path, mode) as f:
        f.write(data)


def atomic_write_json(path: str | os.PathLike[str], data: Any, indent: int | None = 2) -> None:
    """Write ``data`` as JSON (and a final newline) to ``path`` atomically."""
    atomic_write(path, json.dumps(data, indent=indent) + "\n")
