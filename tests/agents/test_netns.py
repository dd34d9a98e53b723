"""Real measurements: agents in network namespaces joined by veth pairs to a bridge, with each
host's link shaped by ``tc tbf`` in both directions. Needs root and iproute2.

The service (``syncplan serve``, package ``api``) is used when it is importable: agents then
report to it and its ``GET /v1/topology`` is checked; the agents' own measurements are always
checked from their ``--once --print`` output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from syncplan.core.report import HostReport

pytestmark = [pytest.mark.netns, pytest.mark.slow]

REPO = Path(__file__).parents[2]
MAIN = "import sys; from syncplan.cli import main; sys.exit(main())"
RATES_MBIT = {"h0": 400, "h1": 400, "h2": 100}  # each host's access link, both directions
SUBNET = "10.77.0"
SERVICE_IP = f"{SUBNET}.254"
TOKEN = "netns-agent-token-0123456789abcdefghij"
HAVE_SERVICE = importlib.util.find_spec("api") is not None and (
    importlib.util.find_spec("syncplan.api.main") is not None
)


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs iproute2 (ip, tc)"
    probe = subprocess.run(["ip", "netns", "add", f"spchk{os.getpid()}"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot create network namespaces: {probe.stderr.decode().strip()}"
    subprocess.run(["ip", "netns", "del", f"spchk{os.getpid()}"], capture_output=True)
    return None


def sh(*cmd: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


@dataclass
class Net:
    switch: str
    hosts: dict[str, str]  # host -> namespace
    addrs: dict[str, str]  # host -> IPv4


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    tag = f"spa{os.getpid() % 100000}"
    sw = f"{tag}sw"
    made: list[str] = []
    try:
        sh("ip", "netns", "add", sw)
        made.append(sw)
        sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        sh("ip", "-n", sw, "link", "set", "lo", "up")
        sh("ip", "-n", sw, "addr", "add", f"{SERVICE_IP}/24", "dev", "br0")
        hosts, addrs = {}, {}
        for k, (host, mbit) in enumerate(sorted(RATES_MBIT.items())):
            ns, vsw, vh = f"{tag}{host}", f"{tag}s{k}", f"{tag}e{k}"
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh(
                "ip",
                "link",
                "add",
                vsw,
                "netns",
                sw,
                "type",
                "veth",
                "peer",
                "name",
                vh,
                "netns",
                ns,
            )
            addr = f"{SUBNET}.{k + 1}"
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", vh)
            sh("ip", "-n", ns, "link", "set", vh, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", sw, "link", "set", vsw, "master", "br0", "up")
            burst = f"{max(32, mbit // 4)}kb"
            for where, dev in ((sw, vsw), (ns, vh)):  # toward the host, and from the host
                sh(
                    "ip",
                    "netns",
                    "exec",
                    where,
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    f"{mbit}mbit",
                    "burst",
                    burst,
                    "latency",
                    "100ms",
                )
            hosts[host], addrs[host] = ns, addr
        yield Net(sw, hosts, addrs)
    finally:
        for ns in reversed(made):  # deleting a namespace deletes its veth ends and qdiscs
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def ns_popen(ns: str, args: list[str], **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.update(kw.pop("env", {}))
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-c", MAIN, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def ns_get_json(ns: str, url: str, timeout: float = 5.0) -> dict | None:
    code = (
        "import json,sys,urllib.request;"
        f"print(urllib.request.urlopen({url!r}, timeout={timeout}).read().decode())"
    )
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout + 10,
    )
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return None


def wait_until(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.3)
    return check()


def expected_GBps(a: str, b: str) -> float:
    return min(RATES_MBIT[a], RATES_MBIT[b]) * 1e6 / 8 / 1e9


def peers_arg(net: Net, me: str) -> str:
    return ",".join(f"{h}={net.addrs[h]}:7470" for h in sorted(net.hosts) if h != me)


class Service:
    """``syncplan serve`` in the switch namespace, on a SQLite file that outlives restarts."""

    def __init__(self, net: Net, db: Path) -> None:
        self.net, self.db, self.proc = net, db, None
        self.url = f"http://{SERVICE_IP}:18470"

    def start(self) -> None:
        env = {
            "SYNCPLAN_DATABASE_URL": f"sqlite:///{self.db}",
            "SYNCPLAN_AGENT_TOKEN": TOKEN,
            "SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN": "true",
            "SYNCPLAN_ADMIN_TOKEN": "netns-admin-token-0123456789abcdefghij",
            "SYNCPLAN_JOB_TOKEN": "netns-job-token-0123456789abcdefghijk",
        }
        self.proc = ns_popen(
            self.net.switch, ["serve", "--host", SERVICE_IP, "--port", "18470"], env=env
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            if ns_get_json(self.net.switch, f"{self.url}/healthz") is not None:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited: {self.proc.communicate()[1][-2000:]}")
            time.sleep(0.3)
        raise RuntimeError("service did not become healthy")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()

    def topology(self) -> dict | None:
        return ns_get_json(self.net.switch, f"{self.url}/v1/topology")


@pytest.fixture
def service(net: Net, tmp_path: Path) -> Iterator[Service | None]:
    if not HAVE_SERVICE:
        yield None
        return
    svc = Service(net, tmp_path / "service.db")
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def test_agents_measure_shaped_rates(net: Net, service: Service | None, tmp_path: Path) -> None:
    procs = {}
    for host, ns in net.hosts.items():
        args = [
            "agent",
            "--once",
            "--print",
            "--host-name",
            host,
            "--bind",
            net.addrs[host],
            "--probe-port",
            "7470",
            "--peers",
            peers_arg(net, host),
            "--probe-duration",
            "1.5",
            "--slot",
            "4.5",
            "--no-gpu-copy",
            "--spool-dir",
            str(tmp_path / host),
        ]
        if service:
            args += ["--server", service.url, "--token", TOKEN]
        procs[host] = ns_popen(ns, args)
    reports: dict[str, HostReport] = {}
    for host, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"{host}: {err[-3000:]}"
        assert "Traceback" not in err
        reports[host] = HostReport.model_validate_json(out)

    for host, rep in reports.items():
        assert rep.endpoint_kind == "cpu"
        assert [n.address for n in rep.nics] == [net.addrs[host]]  # the veth is the NIC
        assert rep.probe_address == f"{net.addrs[host]}:7470"
        got = {p.peer_host: p for p in rep.peers}
        assert sorted(got) == sorted(h for h in net.hosts if h != host), rep.peers
        for peer, m in got.items():
            want = expected_GBps(host, peer)
            print(
                f"{host}->{peer}: {m.bandwidth_GBps * 8e3:.1f} Mbit/s measured, "
                f"{want * 8e3:.0f} shaped, latency {m.latency_us:.0f} us"
            )
            assert abs(m.bandwidth_GBps / want - 1) <= 0.15, (host, peer, m.bandwidth_GBps, want)
            assert 0 < m.latency_us < 50_000
            assert m.nic == "nic0"

    if service:
        topo = service.topology()
        assert topo is not None
        node_ids = [n["id"] for n in topo["nodes"]]
        for host in net.hosts:
            assert any(i.startswith(f"{host}/") for i in node_ids), host
        bws = [ln["bandwidth_GBps"] for ln in topo["links"]]
        for a, b in (("h0", "h1"), ("h0", "h2")):
            want = expected_GBps(a, b)
            assert any(abs(bw / want - 1) <= 0.15 for bw in bws), (a, b, want, bws)


@pytest.mark.skipif(
    not HAVE_SERVICE,
    reason="the service (api.main) is not in this checkout; "
    "tests/agents/test_cli.py covers the outage against a stand-in",
)
def test_service_outage_loses_nothing(net: Net, service: Service, tmp_path: Path) -> None:
    procs = {}
    for host, ns in net.hosts.items():
        procs[host] = ns_popen(
            ns,
            [
                "agent",
                "--server",
                service.url,
                "--token",
                TOKEN,
                "--host-name",
                host,
                "--bind",
                net.addrs[host],
                "--probe-port",
                "7471",
                "--http-port",
                "-1",
                "--interval",
                "1",
                "--probe-interval",
                "3600",
                "--no-gpu-copy",
                "--spool-dir",
                str(tmp_path / host),
            ],
        )
    try:
        # every agent has reported once before the outage (a loaded machine starts them slowly)
        assert wait_until(
            lambda: (
                (t := service.topology()) is not None and all(h in t["hosts"] for h in net.hosts)
            ),
            60,
        ), "no first reports"
        service.stop()
        pending = [tmp_path / h / "pending.json" for h in net.hosts]
        assert wait_until(lambda: all(f.exists() for f in pending), 30), "nothing spooled"
        time.sleep(2)  # a few more failed deliveries while the service is down
        for host, p in procs.items():
            assert p.poll() is None, f"{host} died while the service was down"
        spooled = {
            h: json.loads((tmp_path / h / "pending.json").read_text())["seq"] for h in net.hosts
        }
        service.start()
        # every host's report spooled during the outage (or a newer one) reaches the service
        deadline, topo = time.time() + 40, None
        while time.time() < deadline:
            topo = service.topology()
            if topo and all(
                topo["hosts"].get(h, {}).get("seq", -1) >= spooled[h] for h in net.hosts
            ):
                break
            time.sleep(0.5)
        assert topo is not None
        for host in net.hosts:
            assert topo["hosts"][host]["seq"] >= spooled[host], (host, topo["hosts"][host])
            # without peer measurements a host may be listed as unlinked rather than as nodes
            assert (
                any(n["id"].startswith(f"{host}/") for n in topo["nodes"])
                or host in topo["unlinked_hosts"]
            ), host
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for host, p in procs.items():
            try:
                _, err = p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            assert p.returncode == 0, f"{host}: {err[-2000:]}"
