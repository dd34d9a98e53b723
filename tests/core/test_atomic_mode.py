"""Atomic writes give the file the permissions a new file gets (0666 less the umask) unless
a mode is asked for (0600 for secrets)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from syncplan.core.atomic import AtomicFile, atomic_write


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_default_mode_honours_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    old = os.umask(mask)
    try:
        atomic_write(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == mode


def test_an_explicit_mode_is_kept(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with AtomicFile(tmp_path / "secret", mode=0o600) as f:
            f.write("token")
        atomic_write(tmp_path / "s2", "token", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "s2").stat().st_mode) == 0o600
