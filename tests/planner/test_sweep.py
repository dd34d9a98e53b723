"""``syncplan sweep`` without --run (docs/sweep.md): the sizes, the predicted times and
nccl-tests' bandwidths of every algorithm, the table, the JSON, the plot, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.core.errors import RequestError
from syncplan.planner.sweep import MAX_SWEEP_BYTES, bus_factor, predict_sweep, sweep_sizes
from syncplan.planner.topology import load_topology

from .conftest import EXAMPLES
from .test_cli_errors import cli, one_line_error

STAR = str(EXAMPLES / "star-one-slow.json")


def test_sizes_run_from_lo_to_hi_by_the_factor() -> None:
    assert sweep_sizes(8, 1024, 2) == [8 << i for i in range(8)]
    assert sweep_sizes(8, 1000, 4) == [8, 32, 128, 512]
    assert sweep_sizes(5, 5, 2) == [5]
    for lo, hi, factor, words in [
        (1024, 8, 2, "larger than --to"),
        (8, 1024, 1, "--factor"),
        (8, MAX_SWEEP_BYTES * 2, 2, "above the cap"),
    ]:
        with pytest.raises(RequestError, match=words):
            sweep_sizes(lo, hi, factor)


def test_predicted_sweep_points_and_bandwidths() -> None:
    topo = load_topology(STAR)
    ranks = topo.resolve_ranks("all")
    n = len(ranks)
    sizes = sweep_sizes(1024, 4 << 20, 64)  # 1 KiB, 64 KiB, 4 MiB
    doc = predict_sweep(topo, ranks, sizes, ["auto", "ring", "hierarchical"])
    assert doc["format"] == "syncplan-sweep" and doc["nranks"] == n == 4
    assert doc["sizes"] == sizes and len(doc["points"]) == 3 * len(sizes)
    for p in doc["points"]:
        t = p["predicted_time_s"]
        assert t > 0
        # nccl-tests: algbw = size / time; busbw = algbw * 2(n-1)/n for all-reduce
        assert p["predicted_algbw_GBps"] == pytest.approx(p["size_bytes"] / t / 1e9)
        assert p["predicted_busbw_GBps"] == pytest.approx(
            p["size_bytes"] / t / 1e9 * 2 * (n - 1) / n
        )
    for name in ("auto", "ring", "hierarchical"):
        times = [p["predicted_time_s"] for p in doc["points"] if p["algorithm"] == name]
        assert times == sorted(times) and times[0] < times[-1], name
    auto = [p for p in doc["points"] if p["algorithm"] == "auto"]
    assert all(p["chosen"] and p["chosen"] != "auto" for p in auto)
    json.dumps(doc)  # a JSON document as it stands


def test_reduce_scatter_bus_factor() -> None:
    assert bus_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("reducescatter", 8) == bus_factor("allgather", 8) == pytest.approx(7 / 8)
    topo = load_topology(STAR)
    doc = predict_sweep(topo, topo.resolve_ranks("all"), [4096], ["auto", "ring"], "reducescatter")
    for p in doc["points"]:
        assert p["predicted_busbw_GBps"] == pytest.approx(p["predicted_algbw_GBps"] * 3 / 4)


def test_sweep_command_table_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep.json"
    png = tmp_path / "sweep.png"
    res = cli(capsys, "sweep", "-t", STAR, "-b", "8", "-e", "1KiB", "-f", "4", "-a",
              "auto,ring", "--json", str(out), "--plot", str(png))  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("allreduce over 4 ranks")
    assert lines[1].split() == ["size", "algorithm", "predicted", "algbw", "busbw"]
    rows = [line for line in lines[3:] if not line.startswith("wrote")]
    assert len(rows) == 2 * 4  # 8, 32, 128, 512 bytes x (auto, ring)
    assert rows[0].startswith("8 B") and "auto (" in rows[0] and rows[1].split()[0] == "ring"
    assert max(map(len, lines)) <= 100
    doc = json.loads(out.read_text())
    assert doc["sizes"] == [8, 32, 128, 512] and doc["algorithms"] == ["auto", "ring"]
    assert {"predicted_time_s", "predicted_algbw_GBps", "predicted_busbw_GBps"} <= set(
        doc["points"][0]
    )
    assert png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-b", "1MiB", "-e", "1KiB"], ["--from 1 MiB is larger than --to 1 KiB"]),
        (["-f", "1"], ["--factor must be a whole number >= 2"]),
        (["-e", "1TiB"], ["above the cap"]),
        (["-a", "auto,nosuch"], ["unknown algorithm nosuch"]),
        (["-b", "12 parsecs"], ["size '12 parsecs'"]),
        (["--run", "2", "-e", "1KiB"], ["--run 2 does not match the 4 ranks"]),
        (["--run", "4", "-e", "1GiB"], ["above the cap of 256 MiB"]),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], words: list[str]
) -> None:
    one_line_error(cli(capsys, "sweep", "-t", STAR, *args), *words)


def test_plot_without_matplotlib_is_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; from syncplan.cli import main; "
        f"sys.exit(main(['sweep', '-t', {STAR!r}, '-e', '64', '--plot', "
        f"{str(tmp_path / 'p.png')!r}]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    one_line_error(res, "--plot needs matplotlib", ".[plot]")
    assert res.stdout == ""
