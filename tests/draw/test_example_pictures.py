"""Every example topology draws every one of its links, with labels that neither overlap
nor are cut short, the degraded link in red, and its rates said to come from the file.
The layout checks need no renderer; the PNG checks skip without matplotlib."""

from __future__ import annotations

import argparse
import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from syncplan.draw.canvas import Canvas, overlaps, text_box
from syncplan.draw.cli import cmd_topology
from syncplan.draw.graph import RED, Bundle, Line, Unit, draw_graph
from syncplan.draw.topology import topology_layout, topology_picture

EXAMPLES = sorted(p.stem for p in Path("examples").glob("*.json"))
SVG = "{http://www.w3.org/2000/svg}"
# the slow link of each degraded example, as its (red) label or box line says it
SLOW = {
    "mesh-4x4-degraded": "6.25 GB/s",
    "torus-3x3-degraded": "6.25 GB/s",
    "host-ring-4x2-slow": "6.25 GB/s",
    "xgmi-full-mesh-8-slow-pair": "12.5 GB/s",
    "one-slow-nic": "3.125 GB/s",
    "star-one-slow": "3.125 GB/s",
    "fat-tree3-slow-host": "6.25 GB/s",
    "degraded-rail": "6.25 GB/s",
}


def load(example: str) -> dict:
    return json.loads(Path(f"examples/{example}.json").read_text())


def test_every_example_is_checked() -> None:
    assert len(EXAMPLES) >= 29 and "python_api" not in EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_link_is_drawn(example: str) -> None:
    doc = load(example)
    pic = topology_layout(doc, title=example, rates="file")
    covered = [i for e in pic.edges for i in e.links]
    assert sorted(set(covered)) == list(range(len(doc["links"])))
    titles = [
        (el.findtext(f"{SVG}title") or "")
        for el in ET.fromstring(pic.canvas.to_svg()).iter()
        if el.tag in (f"{SVG}line", f"{SVG}polyline")
    ]
    words = {t["s"] for t in pic.canvas.texts()}
    for e in pic.edges:
        assert e.a in pic.units and e.b in pic.units, e
        if e.how in ("line", "box"):  # a line between the two boxes
            assert any(t.startswith(f"{e.a} - {e.b}: ") for t in titles), e
        if e.how == "box":  # the rate is printed in the box
            assert any(e.label.removesuffix(" GB/s") in w for w in words), e


@pytest.mark.parametrize("example", EXAMPLES)
def test_links_between_hosts_and_switches_are_lines(example: str) -> None:
    """Read from the SVG alone: each link joining two hosts, or two switches, is a line
    titled with both (the old pictures drew neither direct links nor core trunks)."""
    doc = load(example)
    host_of = {n["id"]: n.get("host") for n in doc["nodes"]}
    if len({h for h in host_of.values() if h}) < 2:
        return  # a one-host file draws the host's inside: covered above
    svg = topology_picture(doc, title=example).to_svg()
    titles = [
        el.findtext(f"{SVG}title") or ""
        for el in ET.fromstring(svg).iter()
        if el.tag in (f"{SVG}line", f"{SVG}polyline")
    ]
    for lk in doc["links"]:
        a, b = host_of.get(lk["src"]), host_of.get(lk["dst"])
        if a and b and a != b:
            ends = (a, b)
        elif not a and not b:
            ends = (lk["src"], lk["dst"])
        else:
            continue
        assert any(
            t.split(":")[0] in (f"{ends[0]} - {ends[1]}", f"{ends[1]} - {ends[0]}") for t in titles
        ), lk


@pytest.mark.parametrize("example", EXAMPLES)
def test_labels_neither_overlap_nor_are_cut(example: str) -> None:
    doc = load(example)
    pic = topology_layout(doc, title=example, rates="file")
    labels = pic.labels()
    for (s, p), (t, q) in itertools.combinations(labels, 2):
        assert not overlaps(p, q), (s, t)
    for s, (x0, y0, x1, y1) in labels:
        assert "…" not in s and not s.endswith("..."), s
        assert x0 >= 0 and y0 >= 0 and x1 <= pic.canvas.width and y1 <= pic.canvas.height, s
    for (u, p), (v, q) in itertools.combinations(pic.units.items(), 2):
        assert not overlaps(p, q), (u, v)
    words = {s for s, _ in labels}
    names = {n.get("host") or n["id"] for n in doc["nodes"]}
    one_host = len({n.get("host") for n in doc["nodes"] if n.get("host")}) == 1
    for name in names:  # every host, switch (or its rail group) named in full
        if one_host:
            name = name.split("/", 1)[-1]
        assert any(name in w for w in words) or any(".." in w for w in words), name


@pytest.mark.parametrize("example", EXAMPLES)
def test_legend_spans_the_drawn_rates(example: str) -> None:
    doc = load(example)
    pic = topology_layout(doc, title=example, rates="file")
    drawn = {i for e in pic.edges if e.how != "inside" for i in e.links}
    rates = [doc["links"][i]["bandwidth_GBps"] for i in drawn]
    words = [t["s"] for t in pic.canvas.texts()]
    at = words.index("link rate (from the file)")
    lo, hi = min(rates), max(rates)
    assert words[at + 1 : at + 3] == ([f"{lo:g}", f"{hi:g}"] if lo != hi else [f"{hi:g}", "GB/s"])


@pytest.mark.parametrize("example", sorted(SLOW))
def test_the_slow_link_is_red_and_labelled(example: str) -> None:
    pic = topology_layout(load(example), title=example)
    red = [t["s"] for t in pic.canvas.texts() if t["color"] == RED]
    assert any(SLOW[example] in s or SLOW[example].removesuffix(" GB/s") in s for s in red)


def test_a_file_says_its_rates_come_from_the_file(tmp_path: Path) -> None:
    out = tmp_path / "t.svg"
    args = argparse.Namespace(
        topology="examples/torus-3x3.json", server=None, host=None, output=str(out)
    )
    assert cmd_topology(args) == 0
    words = [t.text for t in ET.fromstring(out.read_text()).iter(f"{SVG}text")]
    assert "link rate (from the file)" in words and "measured rate" not in words
    assert "measured rate" in {t["s"] for t in topology_picture(load("torus-3x3")).texts()}


@pytest.mark.parametrize("example", ["dgx-16x8-rail", "cube-mesh-dgx1v", "fat-tree3"])
def test_label_boxes_hold_the_rendered_text(example: str, tmp_path: Path) -> None:
    """The layout's text boxes are at least as wide as matplotlib draws the texts."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pic = topology_layout(load(example), title=example)
    fig = plt.figure(figsize=(pic.canvas.width / 100, pic.canvas.height / 100), dpi=100)
    renderer = fig.canvas.get_renderer()
    try:
        for t in pic.canvas.texts():
            drawn = fig.text(
                0,
                0,
                t["s"],
                fontsize=t["size"] * 0.72,
                fontweight="bold" if t["bold"] else "normal",
            )
            x0, _, x1, _ = text_box(t)
            assert x1 - x0 >= drawn.get_window_extent(renderer).width, t["s"]
    finally:
        plt.close(fig)
    pic.canvas.save(tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_plan_picture_labels_do_not_overlap() -> None:
    """The utilisation legend printed "100" under "0 % of ..." ("1000 %")."""
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology

    from syncplan.draw.plan import plan_picture

    doc = load("one-slow-nic")
    topo = Topology.from_dict(doc)
    pic = plan_picture(make_plan(topo, topo.endpoints(), 64 << 20, "ring"), doc)
    labels = [(t["s"], text_box(t)) for t in pic.texts()]
    for (s, p), (t, q) in itertools.combinations(labels, 2):
        assert not overlaps(p, q), (s, t)


def test_a_full_mesh_with_every_rate_different_keeps_labels_apart() -> None:
    """A full mesh of 12 hosts, every link at its own rate: 66 labels, none overlapping."""
    hosts = [f"n{i}" for i in range(12)]
    nodes = [{"id": f"{h}/gpu0", "kind": "gpu", "host": h} for h in hosts]
    links = [
        {"src": f"{a}/gpu0", "dst": f"{b}/gpu0", "bandwidth_GBps": 1.0 + k, "kind": "direct"}
        for k, (a, b) in enumerate(itertools.combinations(hosts, 2))
    ]
    pic = topology_layout({"nodes": nodes, "links": links})
    labels = pic.labels()
    for (s, p), (t, q) in itertools.combinations(labels, 2):
        assert not overlaps(p, q), (s, t)
    words = " ".join(s for s, _ in labels)
    assert all(f"{lk['bandwidth_GBps']:g} GB/s" in words for lk in links)


def test_a_label_without_room_becomes_a_numbered_note() -> None:
    """Two boxes 12 px apart leave no room beside their line: the rate goes below."""
    c = Canvas(400, 300)
    units = {
        "a": Unit("a", 100, 100, [Line("a", 12, True), Line("x")], w=120),
        "b": Unit("b", 232, 100, [Line("b", 12, True), Line("x")], w=120),
    }
    pic = draw_graph(c, units, [Bundle("a", "b", [0], [5.0], "direct")], {}, "file")
    words = [t["s"] for t in c.texts()]
    assert "[1] a - b: 5 GB/s" in words and "[1]" in words
    assert [e.links for e in pic.edges] == [[0]]
