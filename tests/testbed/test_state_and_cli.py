"""State file round trip and atomicity; CLI errors and plotting without root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import htb_cmds
from syncplan.testbed.state import HostRecord, ProcRecord, State, atomic_write_json, load_state


def test_state_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s" / "x.json"
    st = State(scenario={"name": "x"}, prefix="spt12345", path=path, namespaces=["spt12345-h0"])
    st.hosts.append(HostRecord("h0", 0, "spt12345-h0", "spt123450h", "10.77.0.1", 100.0, 0))
    st.processes.append(ProcRecord(pid=1, start_ticks=5, role="host", netns="spt12345-h0"))
    st.save()
    back = load_state(path)
    assert back is not None and back.to_dict() == st.to_dict()
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary left over


def test_missing_and_corrupt_state(tmp_path: Path) -> None:
    assert load_state(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TestbedError, match="unreadable state file"):
        load_state(bad)
    bad.write_text('{"prefix": "x"}')
    with pytest.raises(TestbedError, match="not a testbed state file"):
        load_state(bad)


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    atomic_write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_htb_commands_shape_at_the_rate_and_prioritise_pure_acks() -> None:
    cmds = htb_cmds("d0", 50)
    flat = [" ".join(c) for c in cmds]
    assert any("classid 1:1 htb rate 50mbit ceil 50mbit" in c for c in flat)
    ack = "match u16 0x0034 0xffff at 2 match u8 0x80 0xf0 at 32 flowid 1:10"  # 52-byte ACK
    assert any(ack in c for c in flat)
    assert all("dev d0" in c for c in flat)


def test_host_uplinks_get_one_bulk_class_per_destination() -> None:
    flat = [
        " ".join(c)
        for c in htb_cmds("h0", 100, queue_packets=1000, fair_to=["10.77.0.2", "10.77.0.254"])
    ]
    assert any("classid 1:100 htb rate 30mbit ceil 100mbit" in c for c in flat)
    assert any("match ip dst 10.77.0.254/32 flowid 1:101" in c for c in flat)
    assert any("classid 1:20 htb rate 30mbit" in c for c in flat)  # the rest: an equal share
    assert not any("1:100" in c for c in (" ".join(x) for x in htb_cmds("s0", 100)))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncplan", "testbed", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_unknown_scenario_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = cli("status", "no-such", "--state-dir", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "not up" in res.stderr
    res = cli("up", str(tmp_path / "missing.yaml"), "--state-dir", str(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "no scenario" in res.stderr or "needs root" in res.stderr


def test_cli_plot_writes_a_png(tmp_path: Path) -> None:
    result = {
        "scenario": {"name": "small"},
        "results": [
            {
                "size_bytes": s << 20,
                "algorithm": a,
                "median_s": t,
                "ring_bound_s": s / 10,
                **({"predicted_time_s": t * 0.9} if a != "gloo" else {}),
            }
            for s in (1, 4)
            for a, t in (("gloo", s / 8), ("ring", s / 9))
        ],
    }
    src = tmp_path / "r.json"
    src.write_text(json.dumps(result))
    out = tmp_path / "p.png"
    res = cli("plot", str(src), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = cli("plot", str(tmp_path / "nope.json"), "--out", str(out))
    assert res.returncode == 2 and "cannot read results" in res.stderr


def test_bad_command_template_is_refused_before_starting_anything(tmp_path: Path) -> None:
    from syncplan.testbed.emulator import spawn_template

    st = State(
        scenario={"name": "x"},
        prefix="spt12345",
        path=tmp_path / "x.json",
        namespaces=["spt12345-h0"],
    )
    st.hosts.append(HostRecord("h0", 0, "spt12345-h0", "spt123450h", "10.77.0.1", 100.0, 0))
    with pytest.raises(TestbedError, match="bad command template"):
        spawn_template(st, "agent --host {nope}", "host")
    assert st.processes == []
