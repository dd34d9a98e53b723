"""Broadcast and reduce from a root (issue 43 item 9): every algorithm's program passes the
independent verifier at its predicted time, never beats the max-flow bound, and the tree
packing reaches the bound at large sizes; broken programs and documents are refused."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
from syncplan.core.document import PlanDocument, PlanError
from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.program import program_to_doc
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.rooted import ROOTED_ALGORITHMS
from syncplan.planner.bound_rooted import rooted_bound
from syncplan.planner.families import FAMILIES, FAMILY_EXAMPLES, random_family
from syncplan.planner.plan import make_plan, with_routes
from syncplan.planner.topology import Topology, load_topology
from syncplan.planner.verify import verify_plan

from .conftest import EXAMPLES
from .test_cli_errors import cli, one_line_error

COLLECTIVES = ("broadcast", "reduce")


def check_every_algorithm(topo: Topology, ranks: list[str], size: int, root: int) -> None:
    """Each feasible algorithm, both collectives: verified, priced as the verifier simulates
    it, and never below the bound."""
    ctx = PlanContext.create(topo, ranks, size)
    for collective in COLLECTIVES:
        reduce = collective == "reduce"
        bound = rooted_bound(ctx, root, reduce)
        served = 0
        for name, algorithm in ROOTED_ALGORITHMS.items():
            try:
                cand = algorithm(ctx, root, reduce)
            except InfeasibleError as exc:
                assert str(exc), name
                continue
            served += 1
            program = with_routes(cand.build(), ranks, ctx.router)
            doc = {
                "collective": collective,
                "root": root,
                "ranks": ranks,
                "size_bytes": size,
                "program": program_to_doc(program),
            }
            rep = verify_plan(doc, topo)
            assert rep.ok, f"{collective} {name}: {rep.error}"
            PlanDocument.from_plan(doc).check()
            assert rep.simulated_time_s == pytest.approx(cand.predicted_time_s, rel=1e-6), name
            assert bound.time_s <= cand.predicted_time_s * (1 + 1e-9), (collective, name, bound)
        assert served >= 3, collective  # chain, binary tree and star serve every request


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_algorithm_on_random_family_members(family: str, seed: int) -> None:
    topo = Topology.from_dict(random_family(family, seed, max_ranks=8))
    ranks = topo.endpoints()
    root = (seed * 5) % len(ranks)  # not always rank 0
    check_every_algorithm(topo, ranks, 64 << 20 if seed else 4096, root)


@pytest.mark.parametrize("name", ["one-slow-nic", "torus-3x3-degraded", "host-ring-4x2-slow"])
def test_the_packing_reaches_the_max_flow_bound_at_large_sizes(name: str) -> None:
    topo = load_topology(EXAMPLES / f"{name}.json")
    for collective in COLLECTIVES:
        doc = make_plan(topo, topo.endpoints(), 4 << 30, "packing", collective, root=0)
        # the LP's fluid time is the bound's bandwidth term (Edmonds' branching theorem)
        fluid = doc["details"]["fluid_time_s"]
        assert fluid == pytest.approx(doc["lower_bound_bandwidth_s"], rel=1e-6)
        assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.03, collective
        assert verify_plan(doc, topo).ok


def test_family_examples_have_the_same_bound_as_their_files() -> None:
    # the examples tested above are the family builders' (planner/families.py)
    for name in ("torus-3x3-degraded", "host-ring-4x2-slow"):
        built = Topology.from_dict(FAMILY_EXAMPLES[name]())
        assert built.fingerprint() == load_topology(EXAMPLES / f"{name}.json").fingerprint()


def test_bound_on_a_star_is_the_slowest_link_of_the_root() -> None:
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, 1 << 30)
    g = topo.graph
    for root in range(len(ranks)):
        for reduce in (False, True):
            b = rooted_bound(ctx, root, reduce)
            r = ranks[root]
            # every other rank hangs off one switch: its own link or the root's is the cut
            arcs = (g.in_edges if reduce else g.out_edges)(r, data=True)
            root_cap = sum(d["bw"] for *_, d in arcs)
            others = [
                sum(d["bw"] for *_, d in (g.out_edges if reduce else g.in_edges)(v, data=True))
                for v in ranks
                if v != r
            ]
            assert b.flow_Bps == pytest.approx(min(root_cap, *others))
            assert b.bandwidth_s == pytest.approx((1 << 30) / b.flow_Bps)


def _plan(collective: str, size: int = 1 << 20, root: object = 1) -> tuple[dict, Topology]:
    topo = load_topology(EXAMPLES / "one-slow-nic.json")
    return make_plan(topo, topo.endpoints(), size, "auto", collective, root=root), topo


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_dropping_any_one_transfer_makes_the_plan_incorrect(collective: str) -> None:
    doc, topo = _plan(collective)
    assert verify_plan(doc, topo).ok
    steps = doc["program"]["steps"]
    for s in range(0, len(steps), max(1, len(steps) // 5)):
        for t in range(0, len(steps[s]), max(1, len(steps[s]) // 3)):
            bad = copy.deepcopy(doc)
            del bad["program"]["steps"][s][t]
            rep = verify_plan(bad, topo)
            assert not rep.ok and "rank" in (rep.error or ""), (s, t)
            with pytest.raises(PlanError):
                PlanDocument.from_plan(bad).check()


def test_a_reduce_counted_twice_or_a_broadcast_with_a_sum_is_refused() -> None:
    doc, topo = _plan("reduce")
    bad = copy.deepcopy(doc)
    first = bad["program"]["steps"][0][0]
    bad["program"]["steps"].append([dict(first)])  # the same partial sum added again
    rep = verify_plan(bad, topo)
    assert not rep.ok and "twice" in (rep.error or "")
    doc, topo = _plan("broadcast")
    bad = copy.deepcopy(doc)
    bad["program"]["steps"][0][0]["reduce"] = True
    rep = verify_plan(bad, topo)
    assert not rep.ok and "no reductions" in (rep.error or "")


def test_the_root_is_part_of_the_postcondition() -> None:
    doc, topo = _plan("broadcast", root=1)
    assert doc["root"] == 1 and verify_plan(doc, topo).ok
    moved = dict(doc, root=2)  # the same program from another root is not a broadcast
    rep = verify_plan(moved, topo)
    assert not rep.ok and "rank 2" in (rep.error or "")


def test_documents_must_record_a_valid_root_and_only_for_rooted_collectives() -> None:
    doc, _ = _plan("broadcast")
    for root, words in ((None, "root"), (99, "root"), ("h0/gpu0", "root"), (True, "root")):
        bad = dict(doc, root=root)
        if root is None:
            del bad["root"]
        with pytest.raises(PlanError, match=words):
            PlanDocument.from_plan(bad)
    with pytest.raises(PlanError, match="root applies to broadcast and reduce"):
        PlanDocument.from_plan(dict(doc, collective="allreduce"))


def test_the_python_api_takes_a_root_by_name_or_index() -> None:
    topo = load_topology(EXAMPLES / "one-slow-nic.json")
    ranks = topo.endpoints()
    by_name = make_plan(topo, ranks, 1 << 20, collective="broadcast", root=ranks[3])
    by_index = make_plan(topo, ranks, 1 << 20, collective="broadcast", root=3)
    assert by_name["root"] == by_index["root"] == 3
    assert by_name["plan_id"] == by_index["plan_id"]
    assert make_plan(topo, ranks, 1 << 20, collective="reduce")["root"] == 0  # default
    for bad, words in ((len(ranks), "rank index"), ("nope", "not one of the ranks")):
        with pytest.raises(RequestError, match=words):
            make_plan(topo, ranks, 1 << 20, collective="reduce", root=bad)
    with pytest.raises(RequestError, match="root applies to broadcast and reduce"):
        make_plan(topo, ranks, 1 << 20, collective="allreduce", root=0)
    with pytest.raises(RequestError, match="does not serve a broadcast"):
        make_plan(topo, ranks, 1 << 20, "ring", collective="broadcast")


def test_single_rank_plans_are_empty_and_verify() -> None:
    topo = load_topology(EXAMPLES / "one-slow-nic.json")
    ranks = topo.endpoints()[:1]
    for collective in COLLECTIVES:
        doc = make_plan(topo, ranks, 4096, collective=collective)
        assert doc["program"]["steps"] == [] and verify_plan(doc, topo).ok


def test_cli_plans_compares_and_writes_a_broadcast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.json"
    topo = str(EXAMPLES / "host-ring-4x2-slow.json")
    second = load_topology(topo).endpoints()[1]
    args = ["plan", "-t", topo, "--collective", "broadcast", "--root", second]
    res = cli(capsys, *args, "--compare", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert f"from root 1 ({second})" in res.stdout and "vs bound" in res.stdout
    for name in ROOTED_ALGORITHMS:
        assert f"\n{name} " in res.stdout
    doc = json.loads(out.read_text())
    assert doc["collective"] == "broadcast" and doc["root"] == 1
    res = cli(capsys, "verify", str(out), "-t", topo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every rank ends with the root's buffer (rank 1)" in res.stdout
    doc["program"]["steps"][-1].pop()
    out.write_text(json.dumps(doc))
    res = cli(capsys, "verify", str(out), "-t", topo)
    assert res.returncode == 1 and "INCORRECT" in res.stderr


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--collective", "broadcast", "--root", "h9/gpu0"], ["root 'h9/gpu0'", "ranks"]),
        (["--collective", "reduce", "--root", "99"], ["root 99", "rank index"]),
        (["--root", "0"], ["--root applies to --collective broadcast and reduce"]),
        (["--collective", "allgather", "--root", "1"], ["--root applies"]),
        (["--collective", "reduce", "-a", "ring"], ["does not serve a reduce"]),
    ],
)
def test_cli_bad_root_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], extra: list[str], words: list[str]
) -> None:
    res: subprocess.CompletedProcess[str] = cli(
        capsys, "plan", "-t", str(EXAMPLES / "one-slow-nic.json"), *extra
    )
    one_line_error(res, *words)
