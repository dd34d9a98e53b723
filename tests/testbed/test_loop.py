"""The whole loop on the small scenario: agents measure, the service plans, the executor runs.

Needs root and iproute2 (skipped otherwise); about a minute. No timing thresholds: it checks
that the agents' rates match the shaping, that every plan came from the service and passed
the verifier, that every result equals gloo's, and that nothing is left behind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from syncplan.testbed.calibrate import (
    LARGE_ALGORITHMS,
    LARGE_SIZE,
    REFERENCE_ALGORITHMS,
    REFERENCE_SIZES,
    S_GRID,
    X_GRID_US,
    fit_settings,
    points_from_record,
)
from syncplan.testbed.loop import (
    ALGORITHMS,
    MESSAGE_OVERHEAD_US,
    MIN_STEP_US,
    LoopConfig,
    machine_cores,
    run_loop,
)
from syncplan.testbed.netns import netns_list
from syncplan.testbed.scenario import load_scenario
from tests.testbed.marks import NETNS

pytestmark = NETNS
MIB = 1 << 20


def test_full_loop_on_small_scenario(tmp_path: Path) -> None:
    scenario = load_scenario("small")
    before = set(netns_list())
    out = tmp_path / "loop.json"
    lines: list[str] = []
    cfg = LoopConfig(
        sizes=[1 * MIB, 2 * MIB],
        reps=2,
        probe_duration_s=1.0,
        measure_timeout_s=120.0,
        calibration_reps=3,
        calibration_warmup=1,
    )
    result = run_loop(scenario, tmp_path / "state", cfg, out, say=lines.append)

    assert out.is_file()
    prefix = next(line.split("prefix ")[1].split(",")[0] for line in lines if "prefix " in line)
    assert not [ns for ns in set(netns_list()) - before if ns.startswith(prefix)], (
        "the loop left namespaces behind"
    )
    assert not any(p.name.endswith("-logs") for p in (tmp_path / "state").iterdir())
    agents = result["loop"]["agents"]
    assert [a["host"] for a in agents] == [h.name for h in scenario.hosts]
    for a in agents:
        assert a["measured_mbit"] is not None, a
        assert abs(a["measured_mbit"] / a["shaped_mbit"] - 1) <= 0.15, a
    # every plan came from the service's job plans and passed the verifier (fetch_plans
    # raises otherwise); each algorithm and size was timed and gave gloo's exact result
    rows = {(r["algorithm"], r["size_bytes"]) for r in result["summary"]}
    assert rows == {(a, s) for a in ("gloo", *ALGORITHMS) for s in cfg.sizes}
    assert all(r["correct"] for r in result["summary"])
    for e in result["results"]:
        if e["algorithm"] != "gloo":
            assert e["plan_id"] and e["predicted_time_s"] > 0
    assert any("measured 4/4 hosts" in line for line in lines)
    # before planning the loop timed the reference plans and fitted the step floor and the
    # message overhead (over this machine's cores) to them; the restarted service priced
    # every plan with the fitted values, on the graph the agents measured
    loop = result["loop"]
    cal = loop["calibration"]
    assert cal["defaults"] == {
        "min_step_us": MIN_STEP_US,
        "message_overhead_us": MESSAGE_OVERHEAD_US,
        "exchange_overhead_us": 0.0,
        "switch_overhead": 0.0,
    }
    assert {(p["label"], p["size_bytes"]) for p in cal["programs"]} == {
        (a, s) for a in REFERENCE_ALGORITHMS for s in REFERENCE_SIZES
    } | {(a, LARGE_SIZE) for a in LARGE_ALGORITHMS}
    assert all(len(p["times_s"]) == cal["reps"] for p in cal["programs"])
    assert cal["fit"]["usable"] and isinstance(cal["graph_unchanged"], bool)
    assert cal["graph_before"]["rates_mbit"].keys() == {a["host"] for a in agents}
    # the floor stays at the default; o, the exchange and the switch terms are fitted
    assert cal["fit"]["fitted"] == ["message_overhead", "exchange_overhead", "switch_overhead"]
    assert all(
        len(p["exchange_ends"]) == len(p["switch_wires"]) == len(p["feats"])
        for p in cal["programs"]
    )
    refit = fit_settings(
        points_from_record(cal),
        m_grid_us=np.array([MIN_STEP_US]),
        x_grid_us=X_GRID_US,
        s_grid=S_GRID,
        bootstrap=cal["fit"]["bootstrap"]["n"],
    )
    # the fit used the times as recorded (0.1 us); the record rounds the ratios and the error
    ratios = refit.pop("predicted_over_measured")
    assert ratios == pytest.approx(cal["fit"]["predicted_over_measured"], abs=2e-3)
    assert refit.pop("rms_log_error") == pytest.approx(cal["fit"]["rms_log_error"], abs=2e-3)
    rounded = ("predicted_over_measured", "rms_log_error")
    assert refit == {k: v for k, v in cal["fit"].items() if k not in rounded}
    assert (
        loop["min_step_us"],
        loop["message_overhead_us"],
        loop["exchange_overhead_us"],
        loop["switch_overhead"],
        loop["message_cores"],
    ) == (
        cal["fit"]["min_step_us"],
        cal["fit"]["message_overhead_us"],
        cal["fit"]["exchange_overhead_us"],
        cal["fit"]["switch_overhead"],
        machine_cores(),
    )
    assert any(line.endswith("service listening") for line in lines)
