"""The verifier accepts correct programs and names the first error of wrong ones."""

from __future__ import annotations

import copy

import pytest

from planner.builders import star
from planner.topology import Topology
from planner.verify import verify_plan

TOPO = Topology.from_dict(star([10.0, 10.0, 5.0]))
RANKS = ["h0/cpu0", "h1/cpu0", "h2/cpu0"]


def t(src: int, dst: int, a: int, b: int, reduce: bool, path: list[str] | None = None) -> dict:
    out = {"src": src, "dst": dst, "chunk": [a, b], "reduce": reduce}
    if path:
        out["path"] = path
    return out


def plan(steps: list[list[dict]], units: int = 3) -> dict:
    return {"ranks": RANKS, "collective": "allreduce", "size_bytes": 3_000_000,
            "program": {"units": units, "steps": steps}}


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


@pytest.mark.parametrize(("edit", "message"), [
    (lambda p: p["program"]["steps"][0][0].update(src=7), "src must be a rank index in [0, 3)"),
    (lambda p: p["program"]["steps"][0][0].update(dst=0), "src and dst are both rank 0"),
    (lambda p: p["program"]["steps"][0][0].update(chunk=[2, 1]), "chunk must be [a, b]"),
    (lambda p: p["program"]["steps"][0][0].update(chunk=[0, 9]), "chunk must be [a, b]"),
    (lambda p: p["program"]["steps"][0][0].update(reduce="yes"), "reduce must be true or false"),
    (lambda p: p["program"].update(units=0), "units must be a positive integer"),
    (lambda p: p.update(ranks=["h0/cpu0", "switch0", "h2/cpu0"]), "is a switch"),
    (lambda p: p.update(ranks=["h0/cpu0", "h0/cpu0", "h2/cpu0"]), "ranks must be distinct"),
    (lambda p: p.update(collective="broadcast"), "not supported"),
])
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
