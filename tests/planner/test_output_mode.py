"""``syncplan plan -o FILE`` writes the file with the permissions a new file gets (0666 less
the umask), not the temporary file's 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import EXAMPLES
from .test_cli_errors import cli


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_plan_output_honours_the_umask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, umask: None, mask: int, mode: int
) -> None:
    os.umask(mask)
    out = tmp_path / "plan.json"
    topo = str(EXAMPLES / "demo.json")
    res = cli(capsys, "plan", "-t", topo, "-a", "ring", "--size", "1MiB", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]
