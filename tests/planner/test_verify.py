"""The verifier accepts correct programs and names the first error of wrong ones."""

from __future__ import annotations

import copy
import json
import re

import pytest
from syncplan.planner.builders import star
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

TOPO = Topology.from_dict(star([10.0, 10.0, 5.0]))
RANKS = ["h0/cpu0", "h1/cpu0", "h2/cpu0"]


def t(src: int, dst: int, a: int, b: int, reduce: bool, path: list[str] | None = None) -> dict:
    out = {"src": src, "dst": dst, "chunk": [a, b], "reduce": reduce}
    if path:
        out["path"] = path
    return out


def plan(steps: list[list[dict]], units: int = 3) -> dict:
    return {
        "ranks": RANKS,
        "collective": "allreduce",
        "size_bytes": 3_000_000,
        "program": {"units": units, "steps": steps},
    }


# A 3-rank ring: reduce-scatter then all-gather; rank i ends owning chunk (i + 1) % 3.
GOOD = [
    [t(0, 1, 0, 1, True), t(1, 2, 1, 2, True), t(2, 0, 2, 3, True)],
    [t(1, 2, 0, 1, True), t(2, 0, 1, 2, True), t(0, 1, 2, 3, True)],
    [t(2, 0, 0, 1, False), t(0, 1, 1, 2, False), t(1, 2, 2, 3, False)],
    [t(0, 1, 0, 1, False), t(1, 2, 1, 2, False), t(2, 0, 2, 3, False)],
]


def test_correct_program_and_its_time() -> None:
    rep = verify_plan(plan(GOOD), TOPO)
    assert rep.ok, rep.error
    # Each step moves 1 MB per transfer; the slowest is through h2's 5 GB/s link, plus 2 us.
    assert rep.simulated_time_s == pytest.approx(4 * (1e6 / 5e9 + 2e-6))


def test_missing_input() -> None:
    steps = copy.deepcopy(GOOD)
    del steps[3][2]
    rep = verify_plan(plan(steps), TOPO)
    assert not rep.ok and "rank 0 units [2, 3) lack the input of rank" in rep.error


def test_input_counted_twice() -> None:
    steps = copy.deepcopy(GOOD)
    steps[1][0]["reduce"] = True
    steps.insert(1, [t(0, 1, 0, 1, True)])
    rep = verify_plan(plan(steps), TOPO)
    assert not rep.ok and "would count the input of rank 0 twice" in rep.error


def test_conflicting_writes_in_one_step() -> None:
    steps = copy.deepcopy(GOOD)
    steps[3].append(t(2, 1, 0, 1, False))
    rep = verify_plan(plan(steps), TOPO)
    assert not rep.ok and "step 3: conflicting writes to rank 1 units [0, 1)" in rep.error


def test_path_over_missing_link() -> None:
    steps = copy.deepcopy(GOOD)
    steps[0][0]["path"] = ["h0/cpu0", "h1/cpu0"]
    rep = verify_plan(plan(steps), TOPO)
    assert not rep.ok and "missing link 'h0/cpu0' -> 'h1/cpu0'" in rep.error
    steps[0][0]["path"] = ["h0/cpu0", "switch0", "h2/cpu0"]
    rep = verify_plan(plan(steps), TOPO)
    assert not rep.ok and "path must run from 'h0/cpu0' to 'h1/cpu0'" in rep.error


def test_explicit_valid_path_is_accepted() -> None:
    steps = copy.deepcopy(GOOD)
    steps[0][0]["path"] = ["h0/cpu0", "switch0", "h1/cpu0"]
    assert verify_plan(plan(steps), TOPO).ok


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p["program"]["steps"][0][0].update(src=7), "src must be a rank index in [0, 3)"),
        (lambda p: p["program"]["steps"][0][0].update(dst=0), "src and dst are both rank 0"),
        (lambda p: p["program"]["steps"][0][0].update(chunk=[2, 1]), "chunk must be [a, b]"),
        (lambda p: p["program"]["steps"][0][0].update(chunk=[0, 9]), "chunk must be [a, b]"),
        (
            lambda p: p["program"]["steps"][0][0].update(reduce="yes"),
            "reduce must be true or false",
        ),
        (lambda p: p["program"].update(units=0), "units must be a positive integer"),
        (lambda p: p.update(ranks=["h0/cpu0", "switch0", "h2/cpu0"]), "is a switch"),
        (lambda p: p.update(ranks=["h0/cpu0", "h0/cpu0", "h2/cpu0"]), "ranks must be distinct"),
        (lambda p: p.update(collective="alltoall"), "not supported"),
    ],
)
def test_malformed_fields(edit, message: str) -> None:
    p = plan(copy.deepcopy(GOOD))
    edit(p)
    rep = verify_plan(p, TOPO)
    assert not rep.ok and message in rep.error


def test_replace_reads_start_of_step_values() -> None:
    # Swapping chunks in one step: each side must read the other's start-of-step value.
    steps = [[t(0, 1, 0, 3, True)], [t(1, 0, 0, 3, False), t(0, 1, 0, 3, False)]]
    rep = verify_plan({**plan(steps), "ranks": RANKS[:2]}, TOPO)
    assert not rep.ok and "rank 1 units [0, 3) lack the input of rank 1" in rep.error


# ---- route tables (program.routes + "route" indices) ------------------------------------


def _table_doc():
    from syncplan.core.program import program_from_doc, program_to_doc
    from syncplan.planner.builders import dgx_cluster
    from syncplan.planner.plan import make_plan

    spec = dgx_cluster(2, gpus=4)
    topo = Topology.from_dict(spec)
    doc = make_plan(topo, topo.endpoints(), 16 << 20, "forest")
    program = program_from_doc(doc["program"])
    tabled = {**doc, "program": program_to_doc(program, route_table=True)}
    return topo, doc, tabled


def test_a_route_table_document_is_the_same_plan() -> None:
    from syncplan.core.program import program_from_doc

    topo, doc, tabled = _table_doc()
    prog = tabled["program"]
    assert list(prog) == ["units", "routes", "steps"]
    assert all("path" not in t for s in prog["steps"] for t in s)
    assert any("route" in t for s in prog["steps"] for t in s)
    assert len(prog["routes"]) == len({tuple(p) for p in prog["routes"]})
    assert program_from_doc(prog) == program_from_doc(doc["program"])
    full, table = verify_plan(doc, topo), verify_plan(tabled, topo)
    assert full.ok and table.ok and table.simulated_time_s == full.simulated_time_s
    assert len(json.dumps(tabled)) < len(json.dumps(doc))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p, t: t.update(route=len(p["routes"])), "route must index program.routes"),
        (lambda p, t: t.update(route=True), "route must index program.routes"),
        (lambda p, t: t.update(path=p["routes"][t["route"]]), "both path and route"),
        (
            lambda p, t: p["routes"].__setitem__(t["route"], p["routes"][t["route"]][::-1]),
            "runs from",
        ),
        (lambda p, t: p["routes"][0].__setitem__(1, "nowhere"), "missing link"),
        (lambda p, t: p.update(routes={"a": 1}), "program.routes must be a list"),
        (lambda p, t: p["routes"].append(["h0/gpu0"]), r"program.routes\[\d+\] must be a list"),
    ],
)
def test_bad_route_tables_are_named(mutate, message: str) -> None:
    topo, _, tabled = _table_doc()
    prog = tabled["program"]
    first = next(t for s in prog["steps"] for t in s if "route" in t)
    mutate(prog, first)
    report = verify_plan(tabled, topo)
    assert not report.ok and re.search(message, report.error), report.error


def test_large_programs_get_a_route_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from syncplan.core import program as plan_program
    from syncplan.planner.builders import dgx_cluster
    from syncplan.planner.plan import make_plan

    topo = Topology.from_dict(dgx_cluster(2, gpus=4))
    small = make_plan(topo, topo.endpoints(), 16 << 20, "forest")
    assert "routes" not in small["program"]
    monkeypatch.setattr(plan_program, "ROUTE_TABLE_ABOVE", 10)
    large = make_plan(topo, topo.endpoints(), 16 << 20, "forest")
    assert "routes" in large["program"]
    assert verify_plan(large, topo).simulated_time_s == verify_plan(small, topo).simulated_time_s
