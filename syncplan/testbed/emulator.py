"""Bring an emulated cluster up and down.

Layout for prefix ``P`` (``spt`` + 5 random hex digits, so parallel testbeds never collide):

- namespace ``P-sw<r>`` per rack with a bridge ``br0``;
- namespace ``P-<host>`` per host, joined to its rack's bridge by a veth pair ``P<i>h`` (host
  side, the interface ranks bind to) / ``P<i>s`` (switch side); address 10.77.0.<i+1>/24;
- for rack r > 0 a trunk veth pair ``P<r>t`` (in ``P-sw<r>``) / ``P<r>u`` (in ``P-sw0``);
- namespace ``P-svc`` for a service, unshaped, address 10.77.0.254/24.

Every host link and trunk is shaped in both directions: an htb qdisc on the egress of each of
its two veth ends, with TCP segments without data (ACKs) in a priority class ahead of bulk
data. With one FIFO (plain tbf), the ACKs of a flow queue behind the data of the opposite flow and a
bidirectional transfer such as a ring all-reduce loses up to 60% of a link's rate.

The veth pairs are created directly inside their namespaces, so nothing but the namespaces'
mount points ever exists outside them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from syncplan.testbed import TestbedError
from syncplan.testbed.netns import (
    alive,
    netns_list,
    netns_pids,
    root_links,
    sh,
    start_ticks,
    terminate,
)
from syncplan.testbed.scenario import REPO_ROOT, Scenario
from syncplan.testbed.state import HostRecord, ProcRecord, State, load_state, state_file

log = logging.getLogger(__name__)
SUBNET = "10.77.0"
SERVICE_OCTET = 254
PREFIX_STEM = "spt"
# htb burst: BURST_S at the class rate, at least MIN_BURST_BYTES (two full frames). A larger
# bucket lets a message of that size through at the veth's speed (2 ms, the old value, is
# 100 KB at 400 Mbit/s: a 64 KiB message crossed a link in 0.04 of its wire time); with two
# frames every message of 64 KiB - 1 MiB takes 0.93-0.99 of its wire time at 50-400 Mbit/s
# and long flows still get 95.3-95.8 % of the rate (1448/1514 payload share: 95.6 %), also
# with both cores busy (bench/testbed/burst_sweep.py, docs/testbed.md "Shaping").
BURST_S = 0.0
MIN_BURST_BYTES = 3028
QUEUE_S = 0.05  # the switch ports' bulk queue: 50 ms at the link rate, in bytes
# A host's own uplink queue holds packets, like a NIC's transmit queue (txqueuelen 1000): a
# 50 ms byte FIFO there made the 50 Mbit/s host drop its own packets when it sent to 7 peers
# at once (991 drops in 9 runs of 4 plans at 64 KiB and 1 MiB on one-slow, each loss a
# 200 ms TCP timeout for the collective); with 1000 packets it drops none, and the incast
# drops into a switch port's 50 ms buffer remain (docs/testbed.md "Shaping").
HOST_QUEUE_PACKETS = 1000


def htb_cmds(
    dev: str,
    rate_mbit: float,
    burst_s: float | None = None,
    queue_packets: int = 0,
    fair_to: Sequence[str] = (),
) -> list[list[str]]:
    """htb at ``rate_mbit`` with TCP segments that carry no data (ACKs) in a priority class
    ahead of bulk data (``pure_ack_filters``);
    ``burst_s`` (default ``BURST_S``) of tokens at the rate, at least two full frames; the
    bulk queue ``queue_packets`` packets (a host's NIC), or else ``QUEUE_S`` at the rate in
    bytes (a switch port). ``fair_to`` (a host's uplink): one bulk class per destination
    address, served round robin two frames at a time (``fair_classes``)."""
    rate_Bps = rate_mbit * 1e6 / 8
    burst = str(max(int(rate_Bps * (BURST_S if burst_s is None else burst_s)), MIN_BURST_BYTES))
    limit = str(max(int(rate_Bps * QUEUE_S), 65536))
    r = f"{rate_mbit:g}mbit"
    bulk = f"pfifo limit {queue_packets}" if queue_packets else f"bfifo limit {limit}"
    htb = f"ceil {r} burst {burst} cburst {burst}"
    return [
        f"qdisc replace dev {dev} root handle 1: htb default 20".split(),
        f"class add dev {dev} parent 1: classid 1:1 htb rate {r} {htb} quantum 60000".split(),
        f"class add dev {dev} parent 1:1 classid 1:10 htb rate {rate_mbit / 10:g}mbit {htb} "
        "prio 0 quantum 60000".split(),
        f"class add dev {dev} parent 1:1 classid 1:20 htb "
        f"rate {rate_mbit * 0.9 / (len(fair_to) + 1):g}mbit {htb} prio 1 quantum 60000".split(),
        f"qdisc add dev {dev} parent 1:20 handle 20: {bulk}".split(),
        *pure_ack_filters(dev, "1:10"),
        *fair_classes(dev, rate_mbit, burst, fair_to, queue_packets or 1000),
    ]


def fair_classes(
    dev: str, rate_mbit: float, burst: str, dests: Sequence[str], queue_packets: int
) -> list[list[str]]:
    """One htb class (and packet FIFO) per destination address under ``1:1``, each
    guaranteed an equal share of the bulk rate and allowed all of it, two frames per turn.

    A host's NIC queue is per flow on Linux (fq_codel / fq, absent from this kernel); in one
    FIFO a small message to one peer (gloo's receive-ready notice) waits behind the megabyte
    TCP may queue towards another, and gloo's own ring at 1 MiB took 1.9x its wire time.
    gloo keeps one connection per pair of ranks, so a class per destination is a class per
    flow for a collective."""
    out: list[list[str]] = []
    share = f"{rate_mbit * 0.9 / (len(dests) + 1):g}mbit"
    for k, addr in enumerate(dests):
        cls = f"1:{0x100 + k:x}"
        out += [
            f"class add dev {dev} parent 1:1 classid {cls} htb rate {share} "
            f"ceil {rate_mbit:g}mbit burst {burst} cburst {burst} prio 1 "
            f"quantum {MIN_BURST_BYTES}".split(),
            f"qdisc add dev {dev} parent {cls} pfifo limit {queue_packets}".split(),
            f"filter add dev {dev} parent 1: protocol ip prio 2 u32 "
            f"match ip dst {addr}/32 flowid {cls}".split(),
        ]
    return out


def pure_ack_filters(dev: str, flowid: str) -> list[list[str]]:
    """u32 filters sending IPv4 TCP segments without payload (pure ACKs, SYN, FIN) to
    ``flowid``: IP total length == 20 + the TCP header length, one filter per data offset.

    Segments that carry data stay in the bulk FIFO whatever their size: a small message
    (gloo's receive-ready notice) put ahead of the queued data of its own TCP connection
    arrives out of order, and the sender's loss detection then resends the data queued
    behind it (docs/testbed.md "Pure ACKs only")."""
    return [
        f"filter add dev {dev} parent 1: protocol ip prio 1 u32 "
        "match u8 0x45 0xff at 0 "  # IPv4, no IP options
        "match u8 0x06 0xff at 9 "  # TCP
        f"match u16 0x{20 + 4 * doff:04x} 0xffff at 2 "
        f"match u8 0x{doff << 4:02x} 0xf0 at 32 flowid {flowid}".split()
        for doff in range(5, 16)
    ]


def new_prefix() -> str:
    """A prefix no existing namespace uses."""
    existing = netns_list()
    while True:
        prefix = PREFIX_STEM + secrets.token_hex(3)[:5]
        if not any(ns.startswith(prefix + "-") for ns in existing):
            return prefix


def up(scenario: Scenario, state_dir: Path, prefix: str | None = None) -> State:
    """Create the testbed of ``scenario``; replaces leftovers of an earlier one first.

    Raises TestbedError if a live runner is using the earlier testbed. On any failure every
    object created so far is removed before the error propagates.
    """
    path = state_file(state_dir, scenario.name)
    old = load_state(path)
    if old is not None:
        ensure_unused(old)
        log.info("removing leftovers of %s (prefix %s)", scenario.name, old.prefix)
        down(old)
    state = State(scenario=scenario.to_dict(), prefix=prefix or new_prefix(), path=path)
    state.processes.append(self_record("up"))
    p = state.prefix
    state.namespaces = (
        [f"{p}-sw{r}" for r in scenario.racks]
        + [f"{p}-{h.name}" for h in scenario.hosts]
        + [f"{p}-svc"]
    )
    state.save()
    try:
        _create(scenario, state)
    except BaseException:
        down(state)
        raise
    state.phase = "up"
    state.processes = [r for r in state.processes if r.role != "up"]
    state.save()
    return state


def self_record(role: str) -> ProcRecord:
    return ProcRecord(pid=os.getpid(), start_ticks=start_ticks(os.getpid()), role=role)


def _create(scenario: Scenario, state: State) -> None:
    p = state.prefix
    for ns in state.namespaces:
        sh(["ip", "netns", "add", ns])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
    for r in scenario.racks:
        sw = f"{p}-sw{r}"
        sh(
            [
                "ip",
                "-n",
                sw,
                "link",
                "add",
                "br0",
                "type",
                "bridge",
                "stp_state",
                "0",
                "forward_delay",
                "0",
            ]
        )
        sh(["ip", "-n", sw, "link", "set", "br0", "up"])
    for i, h in enumerate(scenario.hosts):
        ns, sw = f"{p}-{h.name}", f"{p}-sw{h.rack}"
        rec = HostRecord(
            name=h.name,
            rank=i,
            netns=ns,
            iface=f"{p}{i}h",
            addr=f"{SUBNET}.{i + 1}",
            rate_mbit=h.rate_mbit,
            rack=h.rack,
        )
        _veth(rec.iface, ns, f"{p}{i}s", sw, rec.addr)
        state.hosts.append(rec)
        peers = [f"{SUBNET}.{j + 1}" for j in range(len(scenario.hosts)) if j != i]
        _shape(
            state,
            ns,
            rec.iface,
            h.rate_mbit,
            HOST_QUEUE_PACKETS,
            [*peers, f"{SUBNET}.{SERVICE_OCTET}"],
        )
        _shape(state, sw, f"{p}{i}s", h.rate_mbit)
    for r in scenario.racks[1:]:
        assert scenario.trunk_mbit is not None
        _veth(f"{p}{r}t", f"{p}-sw{r}", f"{p}{r}u", f"{p}-sw0", None)
        sh(["ip", "-n", f"{p}-sw{r}", "link", "set", f"{p}{r}t", "master", "br0"])
        _shape(state, f"{p}-sw{r}", f"{p}{r}t", scenario.trunk_mbit)
        _shape(state, f"{p}-sw0", f"{p}{r}u", scenario.trunk_mbit)
    svc = HostRecord(
        name="svc",
        rank=-1,
        netns=f"{p}-svc",
        iface=f"{p}vh",
        addr=f"{SUBNET}.{SERVICE_OCTET}",
        rate_mbit=0.0,
        rack=0,
    )
    _veth(svc.iface, svc.netns, f"{p}vs", f"{p}-sw0", svc.addr)
    state.service = svc
    state.save()


def _veth(a: str, ns_a: str, b: str, ns_b: str, addr_a: str | None) -> None:
    """A veth pair ``a`` (in ns_a) / ``b`` (in ns_b, enslaved to br0 there, unless a trunk)."""
    sh(["ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b])
    sh(["ip", "-n", ns_b, "link", "set", b, "master", "br0"])
    if addr_a is not None:
        sh(["ip", "-n", ns_a, "addr", "add", f"{addr_a}/24", "dev", a])
    sh(["ip", "-n", ns_a, "link", "set", a, "up"])
    sh(["ip", "-n", ns_b, "link", "set", b, "up"])


def _shape(
    state: State,
    ns: str,
    dev: str,
    rate_mbit: float,
    queue_packets: int = 0,
    fair_to: Sequence[str] = (),
) -> None:
    for cmd in htb_cmds(dev, rate_mbit, queue_packets=queue_packets, fair_to=fair_to):
        sh(["tc", "-n", ns, *cmd])
    state.qdiscs.append(
        {
            "netns": ns,
            "dev": dev,
            "rate_mbit": rate_mbit,
            **({"queue_packets": queue_packets} if queue_packets else {}),
            **({"fair_to": list(fair_to)} if fair_to else {}),
        }
    )


def reshape(state: State, host: str, rate_mbit: float) -> None:
    """Change the rate of ``host``'s link, both directions, while the testbed runs (a link
    that degrades or recovers)."""
    rec = next((h for h in state.hosts if h.name == host), None)
    if rec is None:
        raise TestbedError(f"no host {host!r} in testbed {state.prefix}")
    if not rate_mbit > 0:
        raise TestbedError(f"rate must be > 0 Mbit/s, got {rate_mbit}")
    devs = {(rec.netns, rec.iface), (f"{state.prefix}-sw{rec.rack}", f"{state.prefix}{rec.rank}s")}
    for q in state.qdiscs:
        if (q["netns"], q["dev"]) in devs:
            sh(["tc", "-n", q["netns"], "qdisc", "del", "dev", q["dev"], "root"])
            for cmd in htb_cmds(
                q["dev"],
                rate_mbit,
                queue_packets=q.get("queue_packets", 0),
                fair_to=q.get("fair_to", ()),
            ):
                sh(["tc", "-n", q["netns"], *cmd])
            q["rate_mbit"] = rate_mbit
    rec.rate_mbit = rate_mbit
    state.save()


def ensure_unused(state: State) -> None:
    """TestbedError if a process other than this one still drives ``state``'s testbed."""
    for rec in state.processes:
        if rec.role in ("run", "up") and rec.pid != os.getpid() and alive(rec.pid, rec.start_ticks):
            raise TestbedError(
                f"testbed {state.scenario.get('name')} (prefix {state.prefix}) is "
                f"in use by pid {rec.pid} ({rec.role}); wait for it or stop it"
            )


def down(state: State) -> list[str]:
    """Remove everything ``state`` records, and any namespace with its prefix; returns them."""
    mine = [r for r in state.processes if r.pid != os.getpid() and r.role not in ("run", "up")]
    terminate([r.pid for r in mine if alive(r.pid, r.start_ticks)])
    namespaces = sorted(
        set(state.namespaces) | {ns for ns in netns_list() if ns.startswith(state.prefix + "-")}
    )
    present = set(netns_list())
    for ns in namespaces:
        if ns in present:
            terminate([pid for pid in netns_pids(ns) if pid != os.getpid()])
    removed = []
    for ns in namespaces:
        if ns in present:
            sh(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    for link in root_links():
        if link.startswith(state.prefix):
            sh(["ip", "link", "del", link], check=False)
            removed.append(link)
    left = [ns for ns in netns_list() if ns.startswith(state.prefix + "-")]
    if left:
        raise TestbedError(f"could not remove namespaces {left}")
    if state.path is not None:
        for sub in ("run", "logs"):  # worker and process logs of this testbed
            shutil.rmtree(state.path.parent / f"{state.prefix}-{sub}", ignore_errors=True)
        state.path.unlink(missing_ok=True)
    return removed


def down_by_name(state_dir: Path, scenario_name: str, force: bool = False) -> list[str]:
    """``down`` for the testbed recorded under ``scenario_name``; [] if none is recorded."""
    state = load_state(state_file(state_dir, scenario_name))
    if state is None:
        return []
    if not force:
        ensure_unused(state)
    return down(state)


def status(state: State) -> dict[str, object]:
    """What exists of ``state``'s testbed: namespaces, qdisc rates, live processes."""
    present = set(netns_list())
    qdiscs = []
    for q in state.qdiscs:
        out = (
            sh(["tc", "-n", q["netns"], "qdisc", "show", "dev", q["dev"]], check=False)
            if q["netns"] in present
            else ""
        )
        qdiscs.append({**q, "present": "htb" in out})
    return {
        "scenario": state.scenario.get("name"),
        "prefix": state.prefix,
        "phase": state.phase,
        "namespaces": {ns: ns in present for ns in state.namespaces},
        "hosts": [
            {
                "name": h.name,
                "netns": h.netns,
                "iface": h.iface,
                "addr": h.addr,
                "rate_mbit": h.rate_mbit,
            }
            for h in state.hosts
        ],
        "qdiscs": qdiscs,
        "processes": [
            {"pid": r.pid, "role": r.role, "netns": r.netns, "alive": alive(r.pid, r.start_ticks)}
            for r in state.processes
        ],
    }


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for processes in the namespaces: this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    env.update(extra or {})
    return env


def spawn(
    state: State,
    netns: str,
    argv: Sequence[str],
    role: str,
    log_path: Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` inside ``netns`` (own session, output to ``log_path``); record it."""
    if netns not in state.namespaces:
        raise TestbedError(f"{netns} is not a namespace of testbed {state.prefix}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=child_env(env),
            start_new_session=True,
        )
    state.processes.append(
        ProcRecord(
            pid=proc.pid,
            start_ticks=start_ticks(proc.pid),
            role=role,
            netns=netns,
            log=str(log_path),
        )
    )
    state.save()
    return proc


def spawn_rank(
    state: State,
    host: HostRecord,
    argv: Sequence[str],
    run_dir: Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a job rank's ``argv`` in ``host``'s namespace (gloo on its interface, one
    thread, log ``run_dir/rank{rank}.log``), with ``env`` added."""
    base = {
        "GLOO_SOCKET_IFNAME": host.iface,
        "OMP_NUM_THREADS": "1",
        "TORCH_CPP_LOG_LEVEL": "ERROR",
    }
    log_path = run_dir / f"rank{host.rank}.log"
    return spawn(state, host.netns, argv, "worker", log_path, env={**base, **(env or {})})


def spawn_template(state: State, template: str, role: str, service: bool = False) -> list[int]:
    """Start one process per host (or one in the service namespace) from a command template.

    Placeholders: {host} {rank} {netns} {iface} {addr} {world} {service_addr} {prefix}.
    """
    targets = [state.service] if service else state.hosts
    pids = []
    log_dir = (state.path.parent if state.path else Path(".")) / f"{state.prefix}-logs"
    for h in targets:
        assert h is not None
        fields = {
            "host": h.name,
            "rank": h.rank,
            "netns": h.netns,
            "iface": h.iface,
            "addr": h.addr,
            "world": len(state.hosts),
            "prefix": state.prefix,
            "service_addr": state.service.addr if state.service else "",
        }
        try:
            argv = [part.format(**fields) for part in template.split()]
        except (KeyError, IndexError, ValueError) as exc:
            raise TestbedError(f"bad command template {template!r}: {exc}") from exc
        proc = spawn(state, h.netns, argv, role, log_dir / f"{role}-{h.name}.log")
        pids.append(proc.pid)
    return pids


def running_processes(state: State) -> list[ProcRecord]:
    return [r for r in state.processes if alive(r.pid, r.start_ticks)]


def kill_recorded(state: State, role: str) -> None:
    """Stop the recorded processes of ``role`` and drop them from the state."""
    recs = [r for r in state.processes if r.role == role]
    terminate([r.pid for r in recs if alive(r.pid, r.start_ticks)])
    for r in recs:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(r.pid, os.WNOHANG)
    state.processes = [r for r in state.processes if r.role != role]
    state.save()
