"""The cost model's per-exchange overhead (``exchange_overhead_s``): a step pays it per
message end of its exchanged transfers (a pair sending both ways in the step), counted like
the message overhead; every candidate prices it, the verifier simulates it, a plan records
it, and 0 (the default) changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.errors import RequestError
from syncplan.core.options import PlanOptions
from syncplan.core.program import Transfer
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.cost import CostModel, exchange_ends
from syncplan.planner.plan import compare, make_plan
from syncplan.planner.routing import Router
from syncplan.planner.topology import Topology, load_topology
from syncplan.planner.verify import step_exchange_ends, step_features, verify_plan

from tests.planner.conftest import EXAMPLES
from tests.planner.priced import priced_and_verified

X = 7e-6  # seconds per exchanged message end
OH = 5e-6
CORES = 2


def _steps(n: int) -> dict[str, tuple[list[Transfer], float, float]]:
    """Steps over n ranks: (transfers, exchanged ends per rank, with 2 shared cores)."""
    return {
        "ring": ([Transfer(i, (i + 1) % n, 0, 1, True) for i in range(n)], 0, 0),
        "pairs": ([Transfer(i, i ^ 1, 0, 1, True) for i in range(n)], 2, 2 * n / CORES),
        "direct": (
            [Transfer(i, j, 0, 1, True) for i in range(n) for j in range(n) if i != j],
            2 * (n - 1),
            2 * n * (n - 1) / CORES,
        ),
        "gather": ([Transfer(i, 0, 0, 1, True) for i in range(1, n)], 0, 0),
        "one pair": (
            [Transfer(0, 1, 0, 1, True), Transfer(1, 0, 0, 1, True), Transfer(2, 3, 0, 1, True)],
            2,
            2,
        ),
    }


def test_a_step_pays_x_per_exchanged_message_end() -> None:
    topo = load_topology(EXAMPLES / "demo.json")
    ranks = topo.endpoints()
    router = Router(topo)
    plain = CostModel(router)
    for name, (step, per_rank, shared) in _steps(len(ranks)).items():
        assert exchange_ends(step) == per_rank, name
        assert exchange_ends(step, CORES) == max(per_rank, shared), name
        assert CostModel(router, options=PlanOptions(exchange_overhead_s=X)).step_time(
            ranks, step, 1024
        ) == pytest.approx(plain.step_time(ranks, step, 1024) + X * per_rank, rel=1e-12), name
        both = CostModel(
            router,
            options=PlanOptions(message_overhead_s=OH, message_cores=CORES, exchange_overhead_s=X),
        )
        assert both.step_time(ranks, step, 1024) == pytest.approx(
            CostModel(
                router, options=PlanOptions(message_overhead_s=OH, message_cores=CORES)
            ).step_time(ranks, step, 1024)
            + X * exchange_ends(step, CORES),
            rel=1e-12,
        ), name
    with pytest.raises(ValueError):
        CostModel(router, options=PlanOptions(exchange_overhead_s=-1.0))


@pytest.mark.parametrize(
    "name,size", [("demo", 4096), ("star-one-slow", 1), ("dgx-2x8-1nic", 1 << 20)]
)
def test_every_candidate_prices_it_on_its_own_program_and_the_verifier_agrees(
    name: str, size: int
) -> None:
    topo = load_topology(EXAMPLES / f"{name}.json")
    ranks = topo.endpoints()
    ctx = PlanContext.create(
        topo,
        ranks,
        size,
        options=PlanOptions(message_overhead_s=OH, message_cores=CORES, exchange_overhead_s=X),
    )
    without = PlanContext.create(
        topo, ranks, size, options=PlanOptions(message_overhead_s=OH, message_cores=CORES)
    )
    exchanging = 0
    for algorithm, _, prog, cost, doc in priced_and_verified(ctx, topo):
        extra = X * sum(step_exchange_ends(doc, topo, message_cores=CORES))
        assert len(step_exchange_ends(doc, topo)) == len(step_features(doc, topo))
        assert cost == pytest.approx(
            without.cost.program_time(ranks, prog, size) + extra, rel=1e-9
        ), algorithm
        exchanging += extra > 0
    assert exchanging  # some candidate exchanges (direct, recursive doubling ...)


def test_zero_changes_nothing_and_a_plan_says_what_it_priced() -> None:
    topo = load_topology(EXAMPLES / "demo.json")
    ranks = topo.endpoints()
    a = make_plan(topo, ranks, 1024, options=PlanOptions(message_overhead_s=OH))
    b = make_plan(
        topo, ranks, 1024, options=PlanOptions(message_overhead_s=OH, exchange_overhead_s=0.0)
    )
    assert a["plan_id"] == b["plan_id"] and a["candidates"] == b["candidates"]
    assert "exchange_overhead_s" not in b
    c = make_plan(
        topo, ranks, 1024, options=PlanOptions(message_overhead_s=OH, exchange_overhead_s=X)
    )
    assert c["exchange_overhead_s"] == X and c["plan_id"] != a["plan_id"]
    assert verify_plan(
        c, topo, options=PlanOptions(message_overhead_s=OH, exchange_overhead_s=X)
    ).simulated_time_s == pytest.approx(c["predicted_time_s"], rel=1e-9)
    # the cores count with the exchange term alone
    d = make_plan(
        topo, ranks, 1024, options=PlanOptions(exchange_overhead_s=X, message_cores=CORES)
    )
    assert d["message_cores"] == CORES and "message_overhead_s" not in d
    for bad in (-1.0, float("inf")):
        with pytest.raises(RequestError):
            make_plan(topo, ranks, 1024, options=PlanOptions(exchange_overhead_s=bad))
    with pytest.raises(RequestError):
        make_plan(
            topo, ranks, 1024, collective="allgather", options=PlanOptions(exchange_overhead_s=X)
        )


def test_the_term_moves_auto_off_pairwise_exchanges_at_1_mib_on_the_testbed_graph() -> None:
    """8 hosts at 200 Mbit/s on one switch, 2 shared cores (the emulated testbed): with o
    alone halving-doubling's 6 steps beat the ring's 14; with the exchange term of the size
    session 7's calibrations refit with it (o 48-96 us, x 68-112 us), the ring is cheaper."""
    from syncplan.testbed.scenario import load_scenario

    topo = Topology.from_dict(load_scenario("homogeneous").ground_truth_topology())
    ranks = [f"h{i}/cpu0" for i in range(8)]
    algos = ["ring", "halving-doubling"]
    base = PlanOptions(min_step_s=50e-6, message_overhead_s=50e-6, message_cores=CORES)
    assert compare(topo, ranks, 1 << 20, algorithms=algos, options=base).best.algorithm == (
        "halving-doubling"
    )
    with_x = base.with_(exchange_overhead_s=100e-6)
    assert compare(topo, ranks, 1 << 20, algorithms=algos, options=with_x).best.algorithm == "ring"


def test_cli_plans_with_it_and_verify_simulates_it(
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
        "--exchange-overhead-us",
        "5",
        "--algorithm",
        "direct",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["exchange_overhead_s"] == pytest.approx(5e-6)
    res = cli(capsys, "verify", str(out), "-t", STAR)
    assert res.returncode == 0 and format_time(doc["predicted_time_s"]) in res.stdout
    bad = cli(capsys, "plan", "-t", STAR, "--size", "1KiB", "--exchange-overhead-us", "-1")
    assert bad.returncode != 0 and "--exchange-overhead-us" in bad.stderr


def test_with_the_term_a_tie_goes_to_the_fewest_exchanged_transfers() -> None:
    """1 MiB on the testbed graph: the ring and halving-doubling move the same bytes. Without
    the term a tie goes to the fewest transfers (halving-doubling, 48 against 112); with it,
    to the fewest exchanged ones (the ring, none): with o = 89 us (session 8's repeat
    calibration) and x = 20 us halving-doubling is priced 0.6 % below the ring."""
    from syncplan.planner.plan import exchanged_count

    from syncplan.testbed.scenario import load_scenario

    topo = Topology.from_dict(load_scenario("homogeneous").ground_truth_topology())
    ranks = [f"h{i}/cpu0" for i in range(8)]
    kw = {"algorithms": ["ring", "halving-doubling"]}
    base = PlanOptions(min_step_s=50e-6, message_cores=CORES)
    assert compare(topo, ranks, 1 << 20, **kw, options=base).best.algorithm == "halving-doubling"
    comp = compare(
        topo,
        ranks,
        1 << 20,
        **kw,
        options=base.with_(message_overhead_s=89e-6, exchange_overhead_s=20e-6),
    )
    ring, hd = comp.candidates["ring"], comp.candidates["halving-doubling"]
    assert hd.predicted_time_s < ring.predicted_time_s < hd.predicted_time_s * 1.01
    assert comp.best.algorithm == "ring"
    assert exchanged_count(ring.build()) == 0 and exchanged_count(hd.build()) == 48
