"""Check the shaping: measure each host link (both directions) and each trunk with TCP flows.

Host h's uplink is measured by a flow h -> ref and its downlink by a flow ref -> h at the same
time (full duplex), where ref is the fastest other host of h's rack; the expected rate is
min(rate_h, rate_ref). A trunk is measured by one flow per host pair across it in each
direction at once; expected min(trunk, sum of the pairs' rates).

``measure_messages`` times single messages (4 KiB - 1 MiB) from each host to the same ref,
the link idle before each, and compares the time over a tiny message's with the message's
wire time at the expected rate: a shaper whose token bucket lets a message through at the
veth's speed shows as a ratio well below 1.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import child_env
from syncplan.testbed.state import HostRecord, State

PORT = 5201
MESSAGE_PORT = 5202
TOOL = "syncplan.testbed.throughput"  # the measuring program, run in the namespaces
PROBE_BYTES = 64  # the tiny message whose time is the round trip without wire time
WIRE_SHARE = 1514 / 1448  # wire bytes per TCP payload byte (full frames)


@dataclass
class LinkMeasurement:
    """One measured direction: what it is, the rate expected from the scenario, the rate seen."""

    link: str
    direction: str
    expected_mbit: float
    measured_mbit: float

    @property
    def ratio(self) -> float:
        return self.measured_mbit / self.expected_mbit

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ratio": round(self.ratio, 4)}


Flow = tuple[HostRecord, HostRecord]  # (sender, receiver)


def _tool(netns: str, args: str) -> list[str]:
    """The command line running ``syncplan.testbed.throughput`` with ``args`` in ``netns``."""
    return ["ip", "netns", "exec", netns, sys.executable, "-m", TOOL, *args.split()]


def _run_flows(flows: list[Flow], seconds: float) -> list[float]:
    """Run the flows at once; returns Mbit/s received per receiver in ``flows`` order.

    Flows with the same receiver are summed into one figure (listed at each such flow).
    """
    receivers: dict[str, tuple[HostRecord, int]] = {}
    for _snd, rcv in flows:
        host, n = receivers.get(rcv.name, (rcv, 0))
        receivers[rcv.name] = (host, n + 1)
    timeout = seconds + 30
    procs: list[subprocess.Popen[str]] = []
    try:
        recv_procs = {}
        for name, (host, n) in receivers.items():
            p = subprocess.Popen(
                _tool(host.netns, f"recv --port {PORT} --flows {n} --timeout {timeout}"),
                stdout=subprocess.PIPE,
                text=True,
                env=child_env(),
            )
            procs.append(p)
            recv_procs[name] = p
        for p in recv_procs.values():
            assert p.stdout is not None
            if "listening" not in p.stdout.readline():
                raise TestbedError("throughput receiver failed to start")
        for snd, rcv in flows:
            procs.append(
                subprocess.Popen(
                    _tool(snd.netns, f"send --to {rcv.addr} --port {PORT} --seconds {seconds}"),
                    stdout=subprocess.DEVNULL,
                    env=child_env(),
                )
            )
        rates = {}
        for name, p in recv_procs.items():
            out, _ = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise TestbedError(f"throughput receiver on {name} failed (exit {p.returncode})")
            rates[name] = json.loads(out.strip().splitlines()[-1])["rate_mbit"]
        for p in procs:
            p.wait(timeout=timeout)
        return [rates[rcv.name] for _snd, rcv in flows]
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"throughput measurement timed out after {timeout:g} s") from exc
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def measure_links(
    state: State, seconds: float = 2.0, progress: Callable[[str], None] | None = None
) -> list[LinkMeasurement]:
    """Measure every host link in both directions and every trunk (see module docstring)."""
    if len(state.hosts) < 2:
        raise TestbedError("link check needs at least 2 hosts")
    out: list[LinkMeasurement] = []
    for h in state.hosts:
        ref = _peer(state, h)
        expected = min(h.rate_mbit, ref.rate_mbit)
        up, down = _run_flows([(h, ref), (ref, h)], seconds)
        out += [
            LinkMeasurement(h.name, "up", expected, up),
            LinkMeasurement(h.name, "down", expected, down),
        ]
        if progress:
            progress(
                f"link {h.name} ({h.rate_mbit:g} Mbit/s, ref {ref.name}): "
                f"up {up:.1f}, down {down:.1f} Mbit/s, expected {expected:g}"
            )
    trunk = state.scenario.get("trunk_mbit")
    racks = sorted({h.rack for h in state.hosts})
    for r in racks[1:]:
        a = [h for h in state.hosts if h.rack == 0]
        b = [h for h in state.hosts if h.rack == r]
        pairs = list(zip(a, b, strict=False))
        expected = min(float(trunk), sum(min(x.rate_mbit, y.rate_mbit) for x, y in pairs))
        flows = [(x, y) for x, y in pairs] + [(y, x) for x, y in pairs]
        rates = _run_flows(flows, seconds)
        n = len(pairs)
        to_r = sum(rates[:n])
        to_0 = sum(rates[n:])
        out += [
            LinkMeasurement(f"trunk{r}", "to-rack", expected, to_r),
            LinkMeasurement(f"trunk{r}", "to-rack0", expected, to_0),
        ]
        if progress:
            progress(
                f"trunk rack0<->rack{r} ({trunk} Mbit/s, {n} flows each way): "
                f"{to_r:.1f} / {to_0:.1f} Mbit/s, expected {expected:g}"
            )
    return out


def _peer(state: State, h: HostRecord) -> HostRecord:
    peers = [o for o in state.hosts if o.name != h.name and o.rack == h.rack] or [
        o for o in state.hosts if o.name != h.name
    ]
    return max(peers, key=lambda o: o.rate_mbit)


def message_times(
    snd: HostRecord, rcv: HostRecord, sizes: list[int], reps: int, gap_s: float = 0.05
) -> dict[int, list[float]]:
    """Seconds per single message of each size from ``snd`` to ``rcv`` (first byte sent to
    the receiver's answer), ``reps`` each, the link idle ``gap_s`` before each."""
    srv = subprocess.Popen(
        _tool(rcv.netns, f"echo --port {MESSAGE_PORT} --timeout 60"),
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert srv.stdout is not None
        if "listening" not in srv.stdout.readline():
            raise TestbedError("message echo server failed to start")
        res = subprocess.run(
            _tool(
                snd.netns,
                f"msgs --to {rcv.addr} --port {MESSAGE_PORT} --sizes {','.join(map(str, sizes))} "
                f"--reps {reps} --gap {gap_s:g}",
            ),
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=60 + reps * len(sizes) * (gap_s + 2),
        )
        if res.returncode != 0:
            raise TestbedError(
                f"message timing {snd.name} -> {rcv.name} failed: {res.stderr.strip()[-400:]}"
            )
        srv.wait(timeout=30)
        return {int(k): v for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"message timing {snd.name} -> {rcv.name} timed out") from exc
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def message_ratios(times: dict[int, list[float]], rate_mbit: float) -> dict[str, Any]:
    """Medians per size, and (median - the tiny message's median) / wire time at the rate."""
    base = statistics.median(times[PROBE_BYTES])
    out: dict[str, Any] = {"base_ms": round(base * 1e3, 4), "sizes": {}}
    for n, ts in sorted(times.items()):
        if n == PROBE_BYTES:
            continue
        med = statistics.median(ts)
        wire = n * 8 * WIRE_SHARE / (rate_mbit * 1e6)
        out["sizes"][str(n)] = {
            "median_ms": round(med * 1e3, 4),
            "wire_ms": round(wire * 1e3, 4),
            "ratio": round((med - base) / wire, 4),
        }
    return out


def measure_messages(
    state: State, sizes: list[int], reps: int = 9, progress: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Single-message times from every host to the fastest other host of its rack (see the
    module docstring): one entry per host."""
    if len(state.hosts) < 2:
        raise TestbedError("message check needs at least 2 hosts")
    out = []
    for h in state.hosts:
        ref = _peer(state, h)
        rate = min(h.rate_mbit, ref.rate_mbit)
        times = message_times(h, ref, [PROBE_BYTES, *sizes], reps)
        entry = {
            "link": h.name,
            "to": ref.name,
            "expected_mbit": rate,
            **message_ratios(times, rate),
        }
        out.append(entry)
        if progress:
            progress(
                f"messages {h.name} -> {ref.name} ({rate:g} Mbit/s): "
                + ", ".join(
                    f"{int(n) / 1024:g} KiB {v['median_ms']:.3f} ms ({v['ratio']:.2f} of wire)"
                    for n, v in entry["sizes"].items()
                )
            )
    return out
