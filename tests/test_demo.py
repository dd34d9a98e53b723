"""`syncplan demo`: service, agents on loopback and a 4-process gloo job running the
service's plan, in one command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_runs_the_services_plan() -> None:
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, "-m", "syncplan", "demo", "--timeout", "150"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=200,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    planned = re.search(r"^plan (\w+): (\w+) over 4 ranks", out, re.M)
    ran = re.search(r"^executor: syncplan executor: running plan (\w+) \((\w+),", out, re.M)
    assert planned and ran, out
    assert planned.group(1) == ran.group(1) and planned.group(2) == ran.group(2)
    assert "verified" in out and "results agree" in out and "done in" in out
    assert "demo0/cpu0, demo1/cpu0, demo2/cpu0, demo3/cpu0" in out
    work = re.search(r"SQLite in (\S+)\)", out)
    assert work and not Path(work.group(1)).exists()  # nothing left behind


def test_demo_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from syncplan.cli import main

    for args, message in (
        (["--hosts", "1"], "--hosts must be in 2..8"),
        (["--size", "3"], "float32"),
        (["--size", "x"], "size 'x'"),
    ):
        assert main(["demo", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
