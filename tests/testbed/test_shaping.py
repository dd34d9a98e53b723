"""The htb commands' burst, and the single-message probe of the link check (loopback)."""

from __future__ import annotations

import socket
import threading

import pytest

from syncplan.testbed import emulator
from syncplan.testbed.emulator import MIN_BURST_BYTES, htb_cmds
from syncplan.testbed.linkcheck import PROBE_BYTES, WIRE_SHARE, message_ratios
from syncplan.testbed.throughput import echo, messages


def _bursts(cmds: list[list[str]]) -> set[int]:
    out = set()
    for c in cmds:
        if "burst" in c:
            out.add(int(c[c.index("burst") + 1]))
            assert c[c.index("cburst") + 1] == c[c.index("burst") + 1]
    return out


@pytest.mark.parametrize("rate", [50, 200, 400, 1000])
def test_default_burst_is_two_full_frames_at_every_rate(rate: float) -> None:
    # a bucket of more than a couple of frames lets a 64 KiB message cross a link at the
    # veth's speed (docs/testbed.md "Shaping"); every class of the qdisc uses the same one
    assert emulator.BURST_S * rate * 1e6 / 8 <= MIN_BURST_BYTES
    assert _bursts(htb_cmds("d0", rate)) == {MIN_BURST_BYTES}


def test_burst_in_seconds_scales_with_the_rate_above_the_floor() -> None:
    assert _bursts(htb_cmds("d0", 400, burst_s=0.002)) == {100_000}
    assert _bursts(htb_cmds("d0", 200, burst_s=0.002)) == {50_000}
    assert _bursts(htb_cmds("d0", 50, burst_s=1e-4)) == {MIN_BURST_BYTES}


def test_host_uplinks_queue_packets_and_switch_ports_queue_50_ms_of_bytes() -> None:
    host = [" ".join(c) for c in htb_cmds("h0", 50, queue_packets=emulator.HOST_QUEUE_PACKETS)]
    port = [" ".join(c) for c in htb_cmds("s0", 50)]
    assert any(f"handle 20: pfifo limit {emulator.HOST_QUEUE_PACKETS}" in c for c in host)
    assert any(f"handle 20: bfifo limit {int(50e6 / 8 * emulator.QUEUE_S)}" in c for c in port)
    assert emulator.HOST_QUEUE_PACKETS >= 1000  # a NIC's txqueuelen: no drops of its own


def test_message_ratios_subtract_the_round_trip_and_divide_by_wire_time() -> None:
    wire = 65536 * 8 * WIRE_SHARE / 200e6
    times = {PROBE_BYTES: [1e-4, 2e-4, 3e-4], 65536: [2e-4 + wire] * 3, 4096: [2e-4, 2e-4, 9.0]}
    out = message_ratios(times, 200)
    assert out["base_ms"] == pytest.approx(0.2)
    assert out["sizes"]["65536"]["ratio"] == pytest.approx(1.0, abs=1e-3)
    assert out["sizes"]["65536"]["wire_ms"] == pytest.approx(wire * 1e3, abs=1e-3)
    assert out["sizes"]["4096"]["ratio"] == 0.0  # median: the outlier does not count
    assert list(out["sizes"]) == ["4096", "65536"]


def test_echo_answers_every_message_once_it_arrived_in_full() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    seen: list[int] = []
    srv = threading.Thread(target=lambda: seen.append(echo(port, 30.0)), daemon=True)
    srv.start()
    times = messages("127.0.0.1", port, [64, 300_000], reps=3, gap_s=0.0, connect_timeout_s=10.0)
    srv.join(30)
    assert seen == [6]
    assert {k: len(v) for k, v in times.items()} == {"64": 3, "300000": 3}
    assert all(t > 0 for v in times.values() for t in v)
