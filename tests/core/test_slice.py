"""Plan slices (core/slice.py): every transfer lands in exactly its sender's and its
receiver's slices, the slices together hold the whole program, one digest per plan, and the
validator refuses a corrupted slice."""

from __future__ import annotations

import copy
import json
from collections import Counter
from functools import cache
from typing import Any

import pytest
from syncplan.core.compact import compact_document
from syncplan.core.document import PlanDocument, PlanError
from syncplan.core.program import program_from_doc, program_to_doc
from syncplan.core.slice import check_slice, program_digest, slice_document
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import load_topology

CASES = [
    ("examples/dgx-2x8-1nic.json", "ring", "allreduce"),
    ("examples/dgx-2x8-1nic.json", "forest", "allreduce"),
    ("examples/dgx-2x8-1nic.json", "hierarchical", "allreduce"),
    ("examples/torus-3x3.json", "auto", "allreduce"),
    ("examples/fat-tree3.json", "halving-doubling", "allreduce"),
    ("examples/dgx-2x8-1nic.json", "auto", "reducescatter"),
    ("examples/dgx-2x8-1nic.json", "auto", "allgather"),
]


@cache
def _plan(path: str, algorithm: str, collective: str) -> dict[str, Any]:
    topo = load_topology(path)
    ranks = topo.resolve_ranks("all")
    return make_plan(topo, ranks, 1 << 20, algorithm, collective)


def _key(t: dict[str, Any], s: int, doc: dict[str, Any]) -> tuple[Any, ...]:
    table = doc["program"].get("routes")
    path = table[t["route"]] if "route" in t else t.get("path")
    return (s, t["src"], t["dst"], tuple(t["chunk"]), t["reduce"], tuple(path or ()))


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0][9:-5]}-{c[1]}-{c[2]}" for c in CASES])
def test_slices_partition_the_program(case: tuple[str, str, str]) -> None:
    doc = _plan(*case)
    n = len(doc["ranks"])
    full = Counter(_key(t, s, doc) for s, st in enumerate(doc["program"]["steps"]) for t in st)
    union: Counter[tuple[Any, ...]] = Counter()
    digest = PlanDocument.from_plan(doc).digest
    for r in range(n):
        sl = slice_document(doc, r)
        assert sl["slice"]["digest"] == digest == program_digest(doc["ranks"], doc["program"])
        assert sl["slice"]["of_plan"] == doc["plan_id"]
        assert sl["slice"]["transfers_total"] == sum(full.values())
        assert len(sl["program"]["steps"]) == len(doc["program"]["steps"])
        assert {k: v for k, v in sl.items() if k not in ("program", "slice")} == {
            k: v for k, v in doc.items() if k != "program"
        }
        plan = check_slice(sl, r)
        assert plan.digest == digest
        mine = Counter(_key(t, s, sl) for s, st in enumerate(sl["program"]["steps"]) for t in st)
        # exactly the transfers r sends or receives, each once
        assert mine == Counter({k: c for k, c in full.items() if r in (k[1], k[2])})
        union += mine
    # the union of slices is the program: each transfer in its sender's and receiver's
    assert union == Counter({k: 2 * c for k, c in full.items()})


def test_digest_differs_across_plans_and_endpoint_names_a_rank() -> None:
    a = _plan("examples/dgx-2x8-1nic.json", "ring", "allreduce")
    b = _plan("examples/dgx-2x8-1nic.json", "forest", "allreduce")
    assert slice_document(a, 0)["slice"]["digest"] != slice_document(b, 0)["slice"]["digest"]
    assert slice_document(a, a["ranks"][5]) == slice_document(a, 5) == slice_document(a, "5")
    # a compact document gives the same slice
    assert slice_document(compact_document(a), 5) == slice_document(a, 5)
    for bad in (len(a["ranks"]), -1, "nope/gpu9"):
        with pytest.raises(PlanError, match="rank"):
            slice_document(a, bad)
    with pytest.raises(PlanError, match="already a slice"):
        slice_document(slice_document(a, 0), 0)


def test_route_table_holds_only_the_paths_used() -> None:
    doc = _plan("examples/dgx-2x8-1nic.json", "forest", "allreduce")
    tabled = {**doc, "program": program_to_doc(program_from_doc(doc["program"]), True)}
    sl = slice_document(tabled, 2)
    used = {t["route"] for st in sl["program"]["steps"] for t in st}
    assert used == set(range(len(sl["program"]["routes"])))
    assert len(sl["program"]["routes"]) < len(tabled["program"]["routes"])
    check_slice(sl, 2)
    assert sl["slice"]["digest"] == PlanDocument.from_plan(tabled).digest


def _corrupt(sl: dict[str, Any], how: str) -> dict[str, Any]:
    bad = copy.deepcopy(sl)
    steps = bad["program"]["steps"]
    first = next(st for st in steps if st)
    if how == "foreign":  # another pair's transfer
        n = len(bad["ranks"])
        r = bad["slice"]["rank"]
        a, b = [x for x in range(n) if x != r][:2]
        first.append({**first[0], "src": a, "dst": b})
        first[-1].pop("path", None)
    elif how == "chunk":
        first[0]["chunk"] = [0, bad["program"]["units"] + 1]
    elif how == "of_plan":
        bad["slice"]["of_plan"] = "another"
    elif how == "digest":
        bad["slice"]["digest"] = "xyz"
    elif how == "rank":
        bad["slice"]["rank"] = len(bad["ranks"])
    elif how == "count":
        bad["slice"]["transfers_total"] = 0
    elif how == "no-slice":
        del bad["slice"]
    return bad


@pytest.mark.parametrize(
    "how,match",
    [
        ("foreign", "not rank 3's transfer"),
        ("chunk", "chunk"),
        ("of_plan", "of_plan"),
        ("digest", "digest"),
        ("rank", "slice.rank"),
        ("count", "transfers_total"),
        ("no-slice", "not a plan slice"),
    ],
)
def test_validator_rejects_a_corrupted_slice(how: str, match: str) -> None:
    doc = _plan("examples/dgx-2x8-1nic.json", "ring", "allreduce")
    sl = slice_document(doc, 3)
    check_slice(json.loads(json.dumps(sl)), 3)  # round-trips through JSON
    check_slice(compact_document(sl), 3)  # and through the compact form
    with pytest.raises(PlanError, match=match):
        check_slice(_corrupt(sl, how), 3)
    with pytest.raises(PlanError, match="not rank 4's"):
        check_slice(sl, 4)


def test_the_formats_doc_example_is_a_valid_slice() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    body = re.search(r"<!-- example: plan-slice -->\s*```json\n(.*?)```", text, re.S)
    assert body is not None
    sl = json.loads(body.group(1))
    plan = check_slice(sl, "h1/gpu0")
    assert plan.digest == sl["slice"]["digest"] and sum(map(len, plan.steps)) == 8
