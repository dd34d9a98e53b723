"""Check the shaping: measure each host link (both directions) and each trunk with TCP flows.

Host h's uplink is measured by a flow h -> ref and its downlink by a flow ref -> h at the same
time (full duplex), where ref is the fastest other host of h's rack; the expected rate is
min(rate_h, rate_ref). A trunk is measured by one flow per host pair across it in each
direction at once; expected min(trunk, sum of the pairs' rates).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import child_env
from syncplan.testbed.state import HostRecord, State

PORT = 5201


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


def _run_flows(flows: list[Flow], seconds: float) -> list[float]:
    """Run the flows at once; returns Mbit/s received per receiver in ``flows`` order.

    Flows with the same receiver are summed into one figure (listed at each such flow).
    """
    receivers: dict[str, tuple[HostRecord, int]] = {}
    for _snd, rcv in flows:
        host, n = receivers.get(rcv.name, (rcv, 0))
        receivers[rcv.name] = (host, n + 1)
    py = sys.executable
    mod = "syncplan.testbed.throughput"
    timeout = seconds + 30
    procs: list[subprocess.Popen[str]] = []
    try:
        recv_procs = {}
        for name, (host, n) in receivers.items():
            p = subprocess.Popen(["ip", "netns", "exec", host.netns, py, "-m", mod, "recv",
                                  "--port", str(PORT), "--flows", str(n), "--timeout",
                                  str(timeout)], stdout=subprocess.PIPE, text=True,
                                 env=child_env())
            procs.append(p)
            recv_procs[name] = p
        for p in recv_procs.values():
            assert p.stdout is not None
            if "listening" not in p.stdout.readline():
                raise TestbedError("throughput receiver failed to start")
        for snd, rcv in flows:
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", snd.netns, py, "-m", mod, "send", "--to", rcv.addr,
                 "--port", str(PORT), "--seconds", str(seconds)],
                stdout=subprocess.DEVNULL, env=child_env()))
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


def measure_links(state: State, seconds: float = 2.0,
                  progress: Callable[[str], None] | None = None) -> list[LinkMeasurement]:
    """Measure every host link in both directions and every trunk (see module docstring)."""
    if len(state.hosts) < 2:
        raise TestbedError("link check needs at least 2 hosts")
    out: list[LinkMeasurement] = []
    for h in state.hosts:
        peers = [o for o in state.hosts if o.name != h.name and o.rack == h.rack] \
            or [o for o in state.hosts if o.name != h.name]
        ref = max(peers, key=lambda o: o.rate_mbit)
        expected = min(h.rate_mbit, ref.rate_mbit)
        up, down = _run_flows([(h, ref), (ref, h)], seconds)
        out += [LinkMeasurement(h.name, "up", expected, up),
                LinkMeasurement(h.name, "down", expected, down)]
        if progress:
            progress(f"link {h.name} ({h.rate_mbit:g} Mbit/s, ref {ref.name}): "
                     f"up {up:.1f}, down {down:.1f} Mbit/s, expected {expected:g}")
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
        out += [LinkMeasurement(f"trunk{r}", "to-rack", expected, to_r),
                LinkMeasurement(f"trunk{r}", "to-rack0", expected, to_0)]
        if progress:
            progress(f"trunk rack0<->rack{r} ({trunk} Mbit/s, {n} flows each way): "
                     f"{to_r:.1f} / {to_0:.1f} Mbit/s, expected {expected:g}")
    return out
