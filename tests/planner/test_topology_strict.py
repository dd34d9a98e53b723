"""Node kinds and keys are strict (docs/formats.md, Topology file): a capitalised kind or a
misspelt key is an error naming the node or link, the bad value and what is allowed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.core.errors import TopologyError
from syncplan.planner.builders import star
from syncplan.planner.topology import NODE_KINDS, Topology, load_topology

from .conftest import EXAMPLES as EXAMPLE_DIR

REPO = Path(__file__).resolve().parents[2]
MAIN = "import sys; from syncplan.cli import main; sys.exit(main())"


def _two_hosts() -> dict:
    return star([12.5, 12.5])


def _error(data: dict) -> str:
    with pytest.raises(TopologyError) as info:
        Topology.from_dict(data)
    return str(info.value)


def test_capitalised_kind_is_an_error_naming_node_value_and_allowed_kinds() -> None:
    data = _two_hosts()
    data["nodes"][1]["kind"] = "GPU"
    nid = data["nodes"][1]["id"]
    msg = _error(data)
    assert msg.startswith(f"nodes[1] ({nid}): unknown kind 'GPU'"), msg
    assert "did you mean 'gpu'?" in msg
    for kind in NODE_KINDS:
        assert kind in msg


def test_unknown_kind_without_a_near_match_lists_the_allowed_kinds() -> None:
    data = _two_hosts()
    data["nodes"][0]["kind"] = "router"
    msg = _error(data)
    assert "unknown kind 'router'" in msg and "allowed kinds: gpu, cpu" in msg, msg


def test_misspelt_link_key_is_named_with_a_suggestion() -> None:
    data = _two_hosts()
    link = data["links"][1]
    link["bandwidth_Gbps"] = link.pop("bandwidth_GBps")
    msg = _error(data)
    assert msg == (
        f"links[1] ({link['src']} -> {link['dst']}): unknown key 'bandwidth_Gbps'; "
        "did you mean 'bandwidth_GBps'?"
    ), msg


def test_a_missing_bandwidth_is_called_missing() -> None:
    data = _two_hosts()
    del data["links"][0]["bandwidth_GBps"]
    assert _error(data).endswith("'bandwidth_GBps' is missing"), _error(data)


def test_unknown_node_and_top_level_keys_are_named() -> None:
    data = _two_hosts()
    data["nodes"][2]["hots"] = "h9"
    assert "nodes[2]" in _error(data) and "unknown key 'hots'; did you mean 'host'?" in _error(data)
    data = _two_hosts()
    data["link"] = data.pop("links")
    assert _error(data) == "unknown key 'link'; did you mean 'links'?"
    data = _two_hosts()
    data["comment"] = "x"
    assert re.match(r"unknown key 'comment'; allowed keys: nodes, links", _error(data))


def test_the_service_topology_document_still_loads() -> None:
    # GET /v1/topology is the graph plus version and freshness: those keys are accepted
    data = {
        **_two_hosts(),
        "version": "v1",
        "hosts": {},
        "stale_hosts": [],
        "unlinked_hosts": [],
        "dropped_fabric_links": 0,
    }
    assert Topology.from_dict(data).endpoints()


def test_every_shipped_example_loads() -> None:
    files = sorted(EXAMPLE_DIR.glob("*.json"))
    assert len(files) >= 29
    for path in files:
        assert load_topology(path).endpoints(), path


def test_plan_with_a_capitalised_kind_exits_2_naming_it(tmp_path: Path) -> None:
    # Before: 'GPU' made the node a forwarder and the plan said "nothing to exchange", exit 0.
    data = _two_hosts()
    for node in data["nodes"]:
        if node["kind"] == "cpu":
            node["kind"] = "CPU"
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(data))
    p = subprocess.run(
        [sys.executable, "-c", MAIN, "plan", "-t", str(path), "--size", "1MiB"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "unknown kind 'CPU'" in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
