"""The planner commands on bad input and in pipes: one line, non-zero exit, checked before
planning, no temporary files left, quiet on a closed pipe; help, version, progress."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.sizes import parse_size

from syncplan import __version__

from .conftest import EXAMPLES
from .test_cli import run

STAR = str(EXAMPLES / "star-one-slow.json")
BIG = str(EXAMPLES / "dgx-16x8-rail.json")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``syncplan ARGS`` in this process (no interpreter start-up), as a CompletedProcess."""
    from syncplan.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


def one_line_error(res: subprocess.CompletedProcess[str], *words: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_size_accepts_exponents() -> None:
    assert parse_size("1e6") == 1_000_000
    assert parse_size("2.5e3KiB") == 2_560_000
    res = run("plan", "-t", STAR, "-a", "ring", "--size", "1e6")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("all-reduce of 976.562 KiB over 4 ranks")


def test_output_directory_is_checked_before_planning(tmp_path: Path) -> None:
    # A 128-rank topology: the error comes before any planning output.
    res = run("plan", "-t", BIG, "-o", str(tmp_path / "missing" / "plan.json"))
    one_line_error(res, "does not exist")
    assert res.stdout == ""
    res = run("plan", "-t", BIG, "-o", str(tmp_path))
    one_line_error(res, "is a directory")
    assert res.stdout == ""
    assert list(tmp_path.iterdir()) == [] and not Path(f"{tmp_path}.tmp").exists()


def test_unwritable_output_directory(tmp_path: Path) -> None:
    # /proc takes no new files, not even from root.
    res = run("plan", "-t", BIG, "-o", "/proc/syncplan-plan.json")
    one_line_error(res, "cannot write in /proc")
    assert res.stdout == ""


def test_output_leaves_only_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    res = cli(capsys, "plan", "-t", STAR, "-a", "ring", "--size", "1MiB", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]
    assert json.loads(out.read_text())["size_bytes"] == 1 << 20


def test_bad_request_fails_before_the_output_is_touched(tmp_path: Path) -> None:
    res = run("plan", "-t", STAR, "--ranks", "h0/cpu0,nope", "-o", str(tmp_path / "p.json"))
    one_line_error(res, "nope")
    assert list(tmp_path.iterdir()) == []


def test_closed_pipe_exits_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncplan", "topo", "show", BIG],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_version() -> None:
    res = run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"syncplan {__version__}"


def test_plan_help_lists_algorithms_and_defaults() -> None:
    res = run("plan", "--help")
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    assert f"one of: {', '.join(ALGORITHMS)} (default auto)" in text
    assert "(default 256MiB)" in text and "(default all)" in text and "1e6" in text


def test_one_rank_plan_prints_no_infinities() -> None:
    res = run("plan", "-t", STAR, "--ranks", "h0/cpu0", "--size", "1000")
    assert res.returncode == 0, res.stderr
    assert "inf" not in res.stdout and "over 1 rank (1 host)" in res.stdout
    assert "nothing to exchange" in res.stdout


def test_verify_says_when_the_topology_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    assert (
        cli(capsys, "plan", "-t", STAR, "-a", "ring", "--size", "1000", "-o", str(out)).returncode
        == 0
    )
    same = cli(capsys, "verify", str(out), "-t", STAR)
    assert same.returncode == 0 and same.stderr == "", same.stderr
    other = tmp_path / "other.json"
    data = json.loads(Path(STAR).read_text())
    data["links"][0]["bandwidth_GBps"] *= 2
    other.write_text(json.dumps(data))
    res = cli(capsys, "verify", str(out), "-t", str(other))
    assert res.returncode == 0
    assert "made for another topology" in res.stderr and "different topology" in res.stdout
    # A document without the fingerprint (an older one) is checked through its plan_id.
    doc = json.loads(out.read_text())
    del doc["topology_fingerprint"]
    out.write_text(json.dumps(doc))
    assert cli(capsys, "verify", str(out), "-t", STAR).stderr == ""
    assert "does not match" in cli(capsys, "verify", str(out), "-t", str(other)).stderr


def test_progress_only_when_asked_or_on_a_terminal() -> None:
    quiet = run("plan", "-t", STAR, "--size", "1MiB")
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = run("plan", "-t", STAR, "--size", "1MiB", "--progress")
    assert loud.returncode == 0, loud.stderr
    assert "planning 4 ranks, 1 MiB" in loud.stderr and "forest" in loud.stderr
    assert loud.stdout == quiet.stdout
    # On a terminal, without --progress: one line redrawn, then cleared.
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncplan", "plan", "-t", STAR, "--size", "1MiB"],
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    err = b""
    with contextlib.suppress(OSError):  # EIO once the child has closed its end
        while chunk := os.read(master, 4096):
            err += chunk
    os.close(master)
    assert proc.returncode == 0 and out == quiet.stdout
    assert b"\r\x1b[Kplanning 4 ranks, 1 MiB" in err and err.endswith(b"\r\x1b[K")


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for args, word in (
        (["plan"], "--topology"),
        (["topo", "show"], "file"),
        (["plan", "-t", STAR, "--min-step-us", "abc"], "invalid float"),
        (["nope"], "invalid choice"),
    ):
        one_line_error(cli(capsys, *args), word, "--help")


def test_compare_prices_once_and_names_infeasible_algorithms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo = str(EXAMPLES / "demo.json")
    res = cli(
        capsys,
        "plan",
        "-t",
        demo,
        "--ranks",
        "h0/gpu0,h1/gpu0,h2/gpu0",
        "--size",
        "1MiB",
        "--compare",
    )
    assert res.returncode == 0, res.stderr
    assert "two-level-star is infeasible: two-level-star needs a host with two ranks" in res.stdout
    # auto prices every algorithm once: --compare reuses that (no second pricing).
    res = cli(capsys, "plan", "-t", STAR, "--size", "1MiB", "--compare", "--progress")
    last = res.stderr.strip().splitlines()[-1]
    priced = re.findall(r"([\w-]+) \d+\.\d s", last.split("(priced:")[1])
    assert len(priced) == len(set(priced)), last  # each priced once
    infeasible = set(re.findall(r"^([\w-]+) is infeasible", res.stdout, re.M))
    assert set(priced) | infeasible == set(ALGORITHMS), last
    assert all(a in res.stdout for a in ALGORITHMS)
