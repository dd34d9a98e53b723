"""NCCL topology export checked against the structure NCCL's topology loader reads
(src/graph/topo.cc: ncclTopoAddCpu / AddPci / AddGpu / AddNic / AddNet / AddNvLinks)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from syncplan.export.msccl_xml import ExportError
from syncplan.export.nccl_topo import nccl_env, nccl_topology_xml

BUSID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
LANE_GBPS = {"2.5 GT/s": 15 / 80, "5 GT/s": 30 / 80, "8 GT/s": 60 / 80, "16 GT/s": 120 / 80}
PCI_CLASSES = {"0x060400", "0x068000", "0x068001"}  # bridge, nvswitch, cpu; 0x03*, 0x02*


def check_nccl_structure(text: str) -> dict:
    """Assert NCCL's loader would accept ``text``; return counts and NCCL's view of rates."""
    root = ET.fromstring(text)
    assert root.tag == "system" and root.get("version") is not None
    seen: set[str] = set()
    out = {"gpus": 0, "nets": [], "pci": []}
    for cpu in root:
        assert cpu.tag == "cpu"
        int(cpu.get("numaid"))
        assert cpu.get("arch") in ("x86_64", "arm64", "ppc64")
        if cpu.get("arch") == "x86_64":
            assert cpu.get("vendor") in ("GenuineIntel", "AuthenticAMD")
            if cpu.get("vendor") == "GenuineIntel":
                int(cpu.get("familyid"))
                int(cpu.get("modelid"))
        stack = [(p, cpu) for p in cpu]
        while stack:
            el, _ = stack.pop()
            assert el.tag in ("pci", "nic"), el.tag
            if el.tag == "nic":
                continue
            bus, cls = el.get("busid"), el.get("class")
            assert BUSID.match(bus), bus
            assert bus not in seen
            seen.add(bus)
            assert cls in PCI_CLASSES or cls.startswith(("0x03", "0x02")), cls
            assert el.get("link_speed") in LANE_GBPS
            width = int(el.get("link_width"))
            out["pci"].append(width * LANE_GBPS[el.get("link_speed")])
            gpu, nic = el.find("gpu"), el.find("nic")
            if gpu is not None:
                assert cls.startswith("0x03")
                for k in ("dev", "sm", "rank", "gdr"):
                    int(gpu.get(k))
                out["gpus"] += 1
                for nv in gpu:
                    assert nv.tag == "nvlink"
                    assert int(nv.get("count")) > 0
                    assert nv.get("tclass") in ("0x030200", "0x068000", "0x068001")
                    assert BUSID.match(nv.get("target"))
            elif nic is not None:
                assert cls.startswith("0x02")
                for net in nic:
                    assert net.tag == "net" and net.get("name")
                    int(net.get("dev"))
                    out["nets"].append(int(net.get("speed")) / 8000)  # NCCL: Mbit/s -> GB/s
            else:
                assert cls == "0x060400"
                stack.extend((c, el) for c in el)
    return out


@pytest.mark.parametrize(
    "example", ["demo", "dgx-2x8-1nic", "dgx-4x8-rail", "mixed-100-25", "one-slow-nic"]
)
def test_every_host_matches_nccl_structure_and_rates(example: str) -> None:
    graph = json.loads(Path(f"examples/{example}.json").read_text())
    hosts = sorted({n["host"] for n in graph["nodes"] if n.get("host")})
    for host in hosts:
        got = check_nccl_structure(nccl_topology_xml(graph, host))
        ids = {n["id"] for n in graph["nodes"] if n.get("host") == host}
        gpus = [i for i in ids if i.split("/")[1].startswith("gpu")]
        assert got["gpus"] == len(gpus)
        # each NIC's NCCL speed is the rate of its link out of the host
        rates = sorted(
            lk["bandwidth_GBps"]
            for lk in graph["links"]
            if (lk["src"] in ids) != (lk["dst"] in ids)
        )
        assert sorted(got["nets"]) == pytest.approx(rates, rel=1e-3)


def test_the_slow_nic_is_slow_in_nccls_eyes() -> None:
    graph = json.loads(Path("examples/one-slow-nic.json").read_text())
    speeds = {
        h: check_nccl_structure(nccl_topology_xml(graph, h))["nets"]
        for h in ("h0", "h1", "h2", "h3")
    }
    assert len({tuple(v) for v in speeds.values()}) == 2  # one host differs


def test_agent_hardware_gives_real_bus_ids_and_nic_names() -> None:
    graph = json.loads(Path("examples/demo.json").read_text())
    hw = {
        "gpus": [{"index": 0, "pci_bus_id": "00000000:07:00.0"}],
        "nics": [{"name": "mlx5_0", "kind": "infiniband", "pci_address": "0000:0c:00.0"}],
    }
    text = nccl_topology_xml(graph, "h0", hardware=hw)
    check_nccl_structure(text)
    assert 'busid="0000:07:00.0"' in text and 'name="mlx5_0"' in text
    env = nccl_env(graph, "h0", "/etc/nccl/h0.xml", hardware=hw)
    assert env == {"NCCL_TOPO_FILE": "/etc/nccl/h0.xml", "NCCL_IB_HCA": "mlx5_0"}


def test_unknown_host() -> None:
    graph = json.loads(Path("examples/demo.json").read_text())
    with pytest.raises(ExportError, match=r"no host 'h9'.*h0, h1"):
        nccl_topology_xml(graph, "h9")


def test_cli(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "syncplan", "export", "nccl-topo", "examples/demo.json"]
    bad = subprocess.run(run, capture_output=True, text=True)
    assert bad.returncode == 2 and "--host is required" in bad.stderr
    assert bad.stderr.count("\n") == 1
    out, env = tmp_path / "h1.xml", tmp_path / "h1.env"
    ok = subprocess.run(
        [*run, "--host", "h1", "-o", str(out), "--env", str(env)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    check_nccl_structure(out.read_text())
    assert env.read_text() == f"NCCL_TOPO_FILE={out}\n"
