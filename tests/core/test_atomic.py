"""core.atomic: the target holds the old content or the new one, and no temporary file stays."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from syncplan.core.atomic import AtomicFile, atomic_write, atomic_write_json


def test_writes_text_bytes_and_json_replacing_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "a.json"  # missing folders are made
    atomic_write(path, "old")
    atomic_write_json(path, {"b": [1, 2]}, indent=None)
    assert path.read_text() == '{"b": [1, 2]}\n'
    atomic_write(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.json"]


def test_a_failed_write_keeps_the_old_content_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    atomic_write_json(path, {"v": 1})
    with pytest.raises(RuntimeError), AtomicFile(path) as f:
        f.write("half")
        raise RuntimeError("crash before the rename")
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_the_temporary_file_keeps_the_suffix_and_commits_once(tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    f = AtomicFile(path, mode=0o600)
    assert f.tmp is not None and f.tmp.parent == tmp_path and f.tmp.suffix == ".png"
    f.tmp.write_bytes(b"png")  # written by another tool, as matplotlib's savefig does
    f.commit()
    f.commit()
    f.discard()
    assert path.read_bytes() == b"png" and stat.S_IMODE(path.stat().st_mode) == 0o600
    g = AtomicFile(path)
    g.discard()
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]
    with pytest.raises(AssertionError):
        g.write("late")
