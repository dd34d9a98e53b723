"""docs/formats.md against the code: the service's OpenAPI field names appear in it, and
every example parses and is accepted by the planner, the service's models and the verifier."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "formats.md").read_text()
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```json\n(.*?)```", re.S)
# The models whose fields users write or read (request and response bodies).
MODELS = (
    "PlanCreate",
    "PlanPublic",
    "FabricCreate",
    "FabricNode",
    "FabricLink",
    "JobCreate",
    "RankRef",
    "JobPublic",
    "JobPlanPublic",
    "TopologyPublic",
)
CONTRACT_REQUEST_FIELDS = {
    "ranks",
    "collective",
    "size_bytes",
    "algorithm",
    "shards",
    "density",
    "block_elems",
    "root",
}


def examples(kind: str) -> list[Any]:
    found = [json.loads(body) for k, body in EXAMPLE.findall(DOC) if k == kind]
    assert found, f"no {kind} example in docs/formats.md"
    return found


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from syncplan.api.main import create_app
    from syncplan.api.settings import Settings

    db = tmp_path_factory.mktemp("formats") / "s.db"
    app = create_app(Settings(environment="development", database_url=f"sqlite:///{db}"))
    return app.openapi()


@pytest.fixture(scope="module")
def topo() -> Topology:
    (data,) = examples("topology")
    return Topology.from_dict(data)


def test_every_example_is_json() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC, re.S)
    assert len(blocks) == len(EXAMPLE.findall(DOC)) >= 8  # each one labelled, so checked
    for body in blocks:
        json.loads(body)


def test_model_fields_are_documented(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    missing = [
        f"{m}.{f}" for m in MODELS for f in schemas[m].get("properties", {}) if f"`{f}`" not in DOC
    ]
    assert not missing, f"fields of the service's models not in docs/formats.md: {missing}"


def test_documented_endpoints_exist(openapi: dict[str, Any]) -> None:
    paths = {re.sub(r"\{\w+\}", "{}", p): set(ops) for p, ops in openapi["paths"].items()}
    for method, path in re.findall(r"`(GET|PUT|POST) (/v1/[\w/{}]+)`", DOC):
        if "/schedule" in path and "Being added" in DOC.split("## Job schedule")[1]:
            continue
        assert method.lower() in paths.get(re.sub(r"\{\w+\}", "{}", path), set()), path


def test_being_added_only_while_absent(openapi: dict[str, Any]) -> None:
    request_fields = set(openapi["components"]["schemas"]["PlanCreate"]["properties"])
    if {"shards", "density"} & request_fields:
        assert "are being added" not in DOC, "docs/formats.md: the extensions have landed"
    if any(p.endswith("/schedule") for p in openapi["paths"]):
        assert "Being added" not in DOC, "docs/formats.md: the schedule has landed"


def test_topology_example(topo: Topology) -> None:
    assert topo.endpoints() == ["h0/gpu0", "h0/gpu1", "h1/gpu0", "h1/gpu1"]


def test_request_examples_are_planned(topo: Topology) -> None:
    from syncplan.api.models import JobCreate, PlanCreate

    (req,) = examples("request")
    PlanCreate.model_validate(req)
    doc = make_plan(topo, req["ranks"], req["size_bytes"], req["algorithm"], req["collective"])
    assert verify_plan(doc, topo).ok
    declared = set(PlanCreate.model_fields)
    for ext in examples("request-extension"):
        assert set(ext) <= CONTRACT_REQUEST_FIELDS, ext
        topo.check_ranks(ext["ranks"])
        if set(ext) <= declared:  # the service has the extension: it must take the example
            PlanCreate.model_validate(ext)
    (job,) = examples("job")
    JobCreate.model_validate(job)


def test_plan_examples_verify(topo: Topology) -> None:
    (doc,) = examples("plan")
    (routed,) = examples("plan-routes")
    for plan in (doc, routed):
        report = verify_plan(plan, topo)
        assert report.ok, report.error
    assert routed["program"]["routes"] and all(
        "route" in t for s in routed["program"]["steps"] for t in s
    )
    # The example is what the planner writes today, field for field (timing aside), and
    # every field the planner writes is described.
    fresh = make_plan(topo, doc["ranks"], doc["size_bytes"], doc["algorithm"])
    assert set(fresh) == set(doc)
    for key in (
        "program",
        "ranks",
        "plan_id",
        "predicted_time_s",
        "lower_bound_time_s",
        "topology_fingerprint",
    ):
        assert fresh[key] == doc[key], key
    assert all(f"`{k}`" in DOC for k in fresh)


def _replay(plan: dict[str, Any], start: list[list[set[int] | None]]) -> list[list[Any]]:
    """Each rank's value per unit, as the set of inputs summed (None: not valid)."""
    held = [list(row) for row in start]
    for step in plan["program"]["steps"]:
        sent = [(t, u, held[t["src"]][u]) for t in step for u in range(*t["chunk"])]
        for t, u, value in sent:
            assert value is not None, f"rank {t['src']} sends unit {u} it does not hold"
            mine = held[t["dst"]][u]
            if t["reduce"]:
                assert mine is not None and not mine & value
                held[t["dst"]][u] = mine | value
            else:
                held[t["dst"]][u] = set(value)
    return held


def test_reducescatter_then_allgather_is_an_allreduce() -> None:
    (rs,) = examples("plan-reducescatter")
    (ag,) = examples("plan-allgather")
    n, units = len(rs["ranks"]), rs["program"]["units"]
    assert rs["shards"] == ag["shards"]
    owned = sorted(u for a, b in rs["shards"] for u in range(a, b))
    assert owned == list(range(units))  # disjoint and covering
    held = _replay(rs, [[{r} for _ in range(units)] for r in range(n)])
    for r, (a, b) in enumerate(rs["shards"]):
        assert all(held[r][u] == set(range(n)) for u in range(a, b))
    start = [
        [held[r][u] if a <= u < b else None for u in range(units)]
        for r, (a, b) in enumerate(ag["shards"])
    ]
    done = _replay(ag, start)
    assert all(v == set(range(n)) for row in done for v in row)


def test_broadcast_and_reduce_examples_verify_and_need_their_root(topo: Topology) -> None:
    from syncplan.core.document import PlanDocument

    for kind in ("plan-broadcast", "plan-reduce"):
        (doc,) = examples(kind)
        assert f"`{doc['collective']}`" in DOC
        report = verify_plan(doc, topo)
        assert report.ok, (kind, report.error)
        PlanDocument.from_plan(doc).check()
        assert not verify_plan({**doc, "root": 0}, topo).ok, kind  # another root: wrong
    (req,) = [e for e in examples("request-extension") if "root" in e]
    plan = make_plan(
        topo, req["ranks"], req["size_bytes"], "auto", req["collective"], root=req["root"]
    )
    assert plan["root"] == req["ranks"].index(req["root"]) and verify_plan(plan, topo).ok
