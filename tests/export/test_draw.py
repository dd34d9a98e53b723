"""Pictures: files produced, readable, and what they show checked against the plan."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from syncplan.planner.builders import TopologyBuilder
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology, load_topology
from syncplan.planner.verify import verify_plan

from syncplan.draw.plan import link_load, plan_picture
from syncplan.draw.topology import AGGREGATE_ABOVE, topology_picture
from syncplan.export.msccl import plan_program
from tests.api.helpers import ServerProcess

SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def big_cluster(hosts: int, per_tor: int = 8) -> dict:
    b = TopologyBuilder()
    b.node("spine0", "switch")
    for t in range(-(-hosts // per_tor)):
        tor = b.node(f"tor{t}", "switch")
        b.link(tor, "spine0", 50.0, 1.0, "network")
    for h in range(hosts):
        nics = b.dgx_host(f"n{h:03d}", gpus=4, nic_GBps=[12.5 if h % 7 else 3.0])
        b.link(nics[0], f"tor{h // per_tor}", 12.5 if h % 7 else 3.0, 1.0, "network")
    return {"nodes": b.nodes, "links": b.links}


@pytest.mark.parametrize("example", sorted(p.stem for p in Path("examples").glob("*.json")))
def test_topology_picture_of_every_example(example: str, tmp_path: Path) -> None:
    doc = json.loads(Path(f"examples/{example}.json").read_text())
    pic = topology_picture(doc, title=example)
    svg = pic.to_svg()
    words = " ".join(texts(svg))
    for h in {n["host"] for n in doc["nodes"] if n.get("host")}:
        assert h in words
    out = tmp_path / "t.png"
    pic.save(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_stale_hosts_are_marked_and_slow_links_thin() -> None:
    doc = json.loads(Path("examples/one-slow-nic.json").read_text())
    doc["stale_hosts"] = ["h9"]
    svg = topology_picture(doc).to_svg()
    assert "STALE" in texts(svg) and "h9" in texts(svg)
    widths = {
        ln.find(f"{SVG}title").text.split(" - ")[0]: float(ln.get("stroke-width"))
        for ln in ET.fromstring(svg).iter(f"{SVG}polyline")
        if ln.find(f"{SVG}title") is not None
    }
    assert widths["h3"] < widths["h0"] == widths["h1"] == widths["h2"]


def test_large_clusters_stay_readable() -> None:
    mid = topology_picture(big_cluster(24))
    assert mid.width <= 2400 and "n023" in texts(mid.to_svg())
    big = topology_picture(big_cluster(AGGREGATE_ABOVE + 16))
    words = texts(big.to_svg())
    assert big.width <= 2400
    assert "8 hosts" in words and "n063" not in words  # one box per switch
    zoom = topology_picture(big_cluster(64), host="n063")
    assert {"gpu0", "gpu3", "nic0"} <= set(texts(zoom.to_svg()))


@pytest.mark.parametrize(
    "algorithm", ["ring", "hierarchical", pytest.param("forest", marks=pytest.mark.slow)]
)
def test_plan_picture(algorithm: str, tmp_path: Path) -> None:
    doc = json.loads(Path("examples/one-slow-nic.json").read_text())
    topo = Topology.from_dict(doc)
    plan = make_plan(topo, topo.endpoints(), 64 << 20, algorithm)
    # the utilisation is priced like the independent verifier prices the program
    load = link_load(plan_program(plan), plan["ranks"], topo, plan["size_bytes"])
    assert load.time_s == pytest.approx(verify_plan(plan, topo).simulated_time_s, rel=1e-9)
    busiest = max(load.util, key=load.util.get)
    assert "h3/nic0" in busiest  # the slow NIC
    pic = plan_picture(plan, doc)
    words = " ".join(texts(pic.to_svg()))
    assert ("tree of root host" in words) == (algorithm == "forest")
    assert "h3/nic0 - switch0 (3.125 GB/s)" in words
    pic.save(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 5000


@pytest.mark.slow
def test_cli_against_the_service(cluster: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "cluster.svg"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "syncplan",
            "draw",
            "topology",
            "--server",
            cluster.url,
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert {"n1", "n2", "n3"} <= set(texts(out.read_text()))
    plan = tmp_path / "plan.json"
    topo = load_topology("examples/dgx-1x8.json")
    plan.write_text(json.dumps(make_plan(topo, topo.endpoints(), 1 << 20, "ring")))
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "syncplan",
            "draw",
            "plan",
            str(plan),
            "--server",
            cluster.url,
            "-o",
            str(tmp_path / "p.svg"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
