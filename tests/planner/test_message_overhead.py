"""The cost model's per-message overhead (LogP's o): every candidate prices it on the
program it builds, the verifier simulates it, and 0 (the default) changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.errors import RequestError
from syncplan.core.options import PlanOptions
from syncplan.core.program import Program, Transfer
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.cost import CostModel
from syncplan.planner.plan import compare, make_plan
from syncplan.planner.routing import Router
from syncplan.planner.topology import load_topology
from syncplan.planner.verify import verify_plan

from tests.planner.conftest import EXAMPLES
from tests.planner.priced import priced_and_verified

OH = 5e-6  # seconds per message


def test_a_step_pays_o_per_message_of_its_busiest_rank() -> None:
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    ranks = topo.endpoints()
    router = Router(topo)
    plain, charged = (
        CostModel(router),
        CostModel(router, options=PlanOptions(message_overhead_s=OH)),
    )
    n = len(ranks)
    direct = [Transfer(i, j, 0, 1, True) for i in range(n) for j in range(n) if i != j]
    gather = [Transfer(i, 0, 0, 1, True) for i in range(1, n)]
    one = [Transfer(0, 1, 0, 1, True)]
    for step, busiest in ((direct, 2 * (n - 1)), (gather, n - 1), (one, 1)):
        wire = plain.step_time(ranks, step, 1024)
        assert charged.step_time(ranks, step, 1024) == pytest.approx(
            max(wire + OH * min(busiest, 2), OH * busiest), rel=1e-12
        )
    assert charged.step_time(ranks, [], 1024) == 0.0
    with pytest.raises(ValueError):
        CostModel(router, options=PlanOptions(message_overhead_s=-1.0))


def test_overhead_beyond_two_message_ends_overlaps_the_wire() -> None:
    """The star's gather into rank 0 (busiest: n - 1 receives): with little on the wire the
    step is its n - 1 message ends; with a long wire time only two ends stay in series."""
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    ranks = topo.endpoints()
    router = Router(topo)
    n = len(ranks)
    gather = [Transfer(i, 0, 0, 1, True) for i in range(1, n)]
    plain = CostModel(router)
    short, long_ = plain.step_time(ranks, gather, 1), plain.step_time(ranks, gather, 1 << 24)
    big = 10 * short / (n - 1)  # o x (n - 1) far above the 1-byte step's wire time
    small = long_ / (100 * n)  # o x (n - 1) far below the 16 MiB step's
    assert CostModel(router, options=PlanOptions(message_overhead_s=big)).step_time(
        ranks, gather, 1
    ) == pytest.approx(big * (n - 1), rel=1e-12)
    assert CostModel(router, options=PlanOptions(message_overhead_s=small)).step_time(
        ranks, gather, 1 << 24
    ) == pytest.approx(long_ + 2 * small, rel=1e-12)


@pytest.mark.parametrize(
    "name,size",
    [("demo", 1024), ("star-one-slow", 1), ("dgx-2x8-1nic", 1 << 20), ("demo", 64 << 20)],
)
def test_every_candidate_prices_the_overhead_on_its_own_program(name: str, size: int) -> None:
    topo = load_topology(EXAMPLES / f"{name}.json")
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size, options=PlanOptions(message_overhead_s=OH))
    plain = PlanContext.create(topo, ranks, size)
    for algorithm, _, prog, cost, doc in priced_and_verified(ctx, topo):
        zero = verify_plan(doc, topo).simulated_time_s
        assert zero == pytest.approx(plain.cost.program_time(ranks, prog, size), rel=1e-9), (
            algorithm
        )
        assert cost > zero, algorithm


def test_zero_changes_nothing_and_a_plan_says_what_it_priced() -> None:
    topo = load_topology(EXAMPLES / "demo.json")
    ranks = topo.endpoints()
    a = make_plan(topo, ranks, 1024)
    b = make_plan(topo, ranks, 1024, options=PlanOptions(message_overhead_s=0.0))
    assert a["plan_id"] == b["plan_id"] and a["candidates"] == b["candidates"]
    assert "message_overhead_s" not in a
    c = make_plan(topo, ranks, 1024, options=PlanOptions(message_overhead_s=OH))
    assert c["message_overhead_s"] == OH and c["plan_id"] != a["plan_id"]
    assert verify_plan(
        c, topo, options=PlanOptions(message_overhead_s=OH)
    ).simulated_time_s == pytest.approx(c["predicted_time_s"], rel=1e-9)
    with pytest.raises(RequestError):
        make_plan(topo, ranks, 1024, options=PlanOptions(message_overhead_s=-1.0))
    with pytest.raises(RequestError):
        make_plan(
            topo, ranks, 1024, collective="allgather", options=PlanOptions(message_overhead_s=OH)
        )


def test_a_large_overhead_turns_auto_from_direct_exchanges_to_fewer_messages() -> None:
    """On demo (8 ranks) at 1 KiB the direct exchanges win under the pure model; at 20 us
    per message their 14 messages per rank cost more than the star's rounds."""
    topo = load_topology(EXAMPLES / "demo.json")
    ranks = topo.endpoints()
    assert compare(topo, ranks, 1024).best.algorithm.startswith("direct")
    comp = compare(topo, ranks, 1024, options=PlanOptions(message_overhead_s=20e-6))
    assert comp.best.algorithm != "direct"
    assert comp.best.predicted_time_s < comp.candidates["direct"].predicted_time_s


def test_program_without_steps_costs_nothing() -> None:
    topo = load_topology(EXAMPLES / "demo.json")
    cost = CostModel(Router(topo), options=PlanOptions(message_overhead_s=OH))
    assert cost.program_time(topo.endpoints(), Program(1, []), 1024) == 0.0


def test_cli_plans_with_the_overhead_and_verify_simulates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncplan.planner.sizes import format_time

    from tests.planner.test_cli_errors import STAR, cli

    out = tmp_path / "plan.json"
    res = cli(
        capsys, "plan", "-t", STAR, "--size", "1KiB", "--message-overhead-us", "5", "-o", str(out)
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["message_overhead_s"] == pytest.approx(5e-6)
    res = cli(capsys, "verify", str(out), "-t", STAR)
    assert res.returncode == 0 and format_time(doc["predicted_time_s"]) in res.stdout
    bad = cli(capsys, "plan", "-t", STAR, "--size", "1KiB", "--message-overhead-us", "-1")
    assert bad.returncode != 0 and "--message-overhead-us" in bad.stderr


CORES = 2


def test_shared_cores_charge_the_steps_message_ends_over_the_cores() -> None:
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    ranks = topo.endpoints()
    router = Router(topo)
    per_rank = CostModel(router, options=PlanOptions(message_overhead_s=OH))
    shared = CostModel(router, options=PlanOptions(message_overhead_s=OH, message_cores=CORES))
    n = len(ranks)
    direct = [Transfer(i, j, 0, 1, True) for i in range(n) for j in range(n) if i != j]
    gather = [Transfer(i, 0, 0, 1, True) for i in range(1, n)]
    one = [Transfer(0, 1, 0, 1, True)]
    plain = CostModel(router)
    for step, charged in (
        (direct, 2 * n * (n - 1) / CORES),
        (gather, max(n - 1, 2 * (n - 1) / CORES)),
        (one, 1),
    ):
        wire = plain.step_time(ranks, step, 1024)
        assert shared.step_time(ranks, step, 1024) == pytest.approx(
            max(wire + OH * min(charged, 2), OH * charged), rel=1e-12
        )
    # unlimited cores (None or 0) is the per-rank model
    for cores in (None, 0):
        assert CostModel(
            router, options=PlanOptions(message_overhead_s=OH, message_cores=cores)
        ).step_time(ranks, direct, 1024) == per_rank.step_time(ranks, direct, 1024)
    # without an overhead the cores change nothing
    assert CostModel(router, options=PlanOptions(message_cores=CORES)).step_time(
        ranks, direct, 1024
    ) == plain.step_time(ranks, direct, 1024)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            CostModel(router, options=PlanOptions(message_overhead_s=OH, message_cores=bad))


@pytest.mark.parametrize(
    "name,size", [("demo", 4096), ("star-one-slow", 1), ("dgx-2x8-1nic", 1 << 20)]
)
def test_every_candidate_prices_the_shared_cores_on_its_own_program(name: str, size: int) -> None:
    topo = load_topology(EXAMPLES / f"{name}.json")
    ranks = topo.endpoints()
    ctx = PlanContext.create(
        topo, ranks, size, options=PlanOptions(message_overhead_s=OH, message_cores=CORES)
    )
    per_rank = PlanContext.create(topo, ranks, size, options=PlanOptions(message_overhead_s=OH))
    for algorithm, _, prog, cost, _ in priced_and_verified(ctx, topo):
        assert cost >= per_rank.cost.program_time(ranks, prog, size) - 1e-15, algorithm


def test_a_plan_records_its_cores_and_auto_leaves_the_direct_exchange_on_shared_cores() -> None:
    """demo (8 ranks) at 4 KiB, 100 us per message, on 2 shared cores: the direct exchange's
    step has 8 x 14 = 112 message ends (56 x o), far more than the star's."""
    topo = load_topology(EXAMPLES / "demo.json")
    ranks = topo.endpoints()
    a = make_plan(topo, ranks, 4096, options=PlanOptions(message_overhead_s=OH))
    b = make_plan(topo, ranks, 4096, options=PlanOptions(message_overhead_s=OH, message_cores=0))
    assert a["plan_id"] == b["plan_id"] and "message_cores" not in b
    c = make_plan(
        topo, ranks, 4096, options=PlanOptions(message_overhead_s=OH, message_cores=CORES)
    )
    assert c["message_cores"] == CORES and c["plan_id"] != a["plan_id"]
    assert verify_plan(
        c, topo, options=PlanOptions(message_overhead_s=OH, message_cores=CORES)
    ).simulated_time_s == pytest.approx(c["predicted_time_s"], rel=1e-9)
    # the cores alone (no overhead) change nothing and are not recorded
    d = make_plan(topo, ranks, 4096, options=PlanOptions(message_cores=CORES))
    assert "message_cores" not in d and d["plan_id"] == make_plan(topo, ranks, 4096)["plan_id"]
    shared = compare(
        topo, ranks, 4096, options=PlanOptions(message_overhead_s=100e-6, message_cores=CORES)
    )
    assert not shared.best.algorithm.startswith("direct")
    for bad in (-1, 1.5):
        with pytest.raises(RequestError):
            make_plan(
                topo, ranks, 4096, options=PlanOptions(message_overhead_s=OH, message_cores=bad)
            )
    with pytest.raises(RequestError):
        make_plan(
            topo, ranks, 4096, collective="allgather", options=PlanOptions(message_cores=CORES)
        )


def test_cli_plans_with_shared_cores_and_verify_simulates_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncplan.planner.sizes import format_time

    from tests.planner.test_cli_errors import STAR, cli

    out = tmp_path / "plan.json"
    res = cli(
        capsys,
        "plan",
        "-t",
        STAR,
        "--size",
        "1KiB",
        "--message-overhead-us",
        "5",
        "--message-cores",
        "2",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["message_cores"] == 2
    res = cli(capsys, "verify", str(out), "-t", STAR)
    assert res.returncode == 0 and format_time(doc["predicted_time_s"]) in res.stdout
    bad = cli(capsys, "plan", "-t", STAR, "--size", "1KiB", "--message-cores", "-1")
    assert bad.returncode != 0 and "--message-cores" in bad.stderr
