from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.errors import RequestError, TopologyError
from syncplan.planner.builders import EXAMPLES, star
from syncplan.planner.topology import Topology, load_topology

from .conftest import EXAMPLES as EXAMPLE_DIR


def _two_hosts() -> dict:
    return star([12.5, 12.5])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["nodes"].append(dict(d["nodes"][1])), "duplicate node id 'h0/cpu0'"),
        (lambda d: d["links"][0].update(dst="h9/cpu0"), "unknown node 'h9/cpu0'"),
        (lambda d: d["links"][1].update(bandwidth_GBps=0), "bandwidth_GBps must be a positive"),
        (lambda d: d["links"][1].update(bandwidth_GBps=-3.0), "links[1] (h1/cpu0 -> switch0)"),
        (lambda d: d["links"][0].update(latency_us=-1), "latency_us must be a non-negative"),
        (
            lambda d: d["links"][0].update(bandwidth_GBps="fast"),
            "'bandwidth_GBps' must be a number",
        ),
        (lambda d: d["links"].append(dict(d["links"][0])), "duplicate link h0/cpu0 -> switch0"),
        (lambda d: d.update(nodes=[]), "non-empty 'nodes'"),
        (lambda d: d["nodes"][0].pop("kind"), "'kind' must be a non-empty string"),
    ],
)
def test_bad_topology_names_the_problem(mutate, message: str) -> None:
    data = _two_hosts()
    mutate(data)
    with pytest.raises(
        TopologyError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        Topology.from_dict(data)


def test_rank_on_forwarding_node_and_disconnected_ranks() -> None:
    topo = Topology.from_dict(_two_hosts())
    with pytest.raises(RequestError, match="'switch0' is a switch"):
        topo.check_ranks(["h0/cpu0", "switch0"])
    data = _two_hosts()
    data["nodes"].append({"id": "h2/cpu0", "kind": "cpu", "host": "h2"})
    topo = Topology.from_dict(data)
    with pytest.raises(RequestError, match="'h2/cpu0' cannot be reached"):
        topo.check_ranks(topo.endpoints())
    with pytest.raises(RequestError, match="appears twice"):
        topo.check_ranks(["h0/cpu0", "h0/cpu0"])


def test_directed_links_need_a_way_back() -> None:
    data = _two_hosts()
    data["links"][0]["directed"] = True  # h0 can send but never receive
    topo = Topology.from_dict(data)
    with pytest.raises(RequestError, match="'h0/cpu0' cannot be reached from 'h1/cpu0'"):
        topo.check_ranks(["h0/cpu0", "h1/cpu0"])


def test_files_json_yaml_and_errors(tmp_path: Path) -> None:
    import yaml

    data = _two_hosts()
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "t.json").write_text(json.dumps(data))
    a, b = load_topology(tmp_path / "t.yaml"), load_topology(tmp_path / "t.json")
    assert a.to_dict() == b.to_dict()
    assert a.endpoints() == ["h0/cpu0", "h1/cpu0"]
    (tmp_path / "bad.json").write_text('{"nodes": [}')
    with pytest.raises(TopologyError, match=r"bad.json: invalid JSON at line 1"):
        load_topology(tmp_path / "bad.json")
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "missing.json")


def test_full_duplex_link_gives_both_directions() -> None:
    topo = Topology.from_dict(_two_hosts())
    assert topo.graph.edges["h0/cpu0", "switch0"]["bw"] == 12.5e9
    assert topo.graph.edges["switch0", "h0/cpu0"]["bw"] == 12.5e9
    assert topo.graph.edges["switch0", "h0/cpu0"]["lat"] == pytest.approx(1e-6)


def test_shipped_examples_match_their_builders() -> None:
    for name, make in EXAMPLES.items():
        shipped = json.loads((EXAMPLE_DIR / f"{name}.json").read_text())
        assert shipped == json.loads(json.dumps(make())), (
            f"examples/{name}.json is stale: run python -m syncplan.planner.examples examples"
        )
