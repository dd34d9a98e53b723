"""A link degrades under a running job (syncplan testbed follow) on the small scenario.

Needs root and iproute2 (skipped otherwise); about a minute. No timing thresholds: it checks
that the agents saw the change, that the job switched to the service's new plan at the same
iteration on every rank, that every result equals gloo's, and that nothing is left behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncplan.testbed import TestbedError
from syncplan.testbed.follow import FollowConfig, phases, run_follow
from syncplan.testbed.netns import netns_list
from syncplan.testbed.scenario import load_scenario
from tests.testbed.marks import netns


def test_phases_split_at_the_events() -> None:
    events = {"degraded": 10.0, "probing": 20.0, "measured": 30.0}
    recs = [
        {"wall": w, "plan_s": p, "gloo_s": 2.0, "plan_id": i}
        for w, p, i in [
            (1, 1.0, "a"),
            (2, 3.0, "a"),
            (12, 4.0, "a"),
            (25, 5.0, "a"),
            (31, 9.0, "a"),
            (32, 1.0, "b"),
            (33, 2.0, "b"),
        ]
    ]
    got = {r["phase"]: r for r in phases(recs, events, "b")}
    assert list(got) == ["healthy", "degraded, old plan", "probing", "final plan"]
    assert got["healthy"]["plan_median_s"] == 2.0 and got["healthy"]["iterations"] == 2
    assert got["final plan"]["plans"] == ["b"]  # the old plan after the cycle is left out
    assert got["final plan"]["speedup_over_gloo"] == pytest.approx(2.0 / 1.5)


def test_follow_settings_are_checked() -> None:
    with pytest.raises(TestbedError, match="rate"):
        FollowConfig(host="h0", rate_mbit=0)
    with pytest.raises(TestbedError, match="multiple of 4"):
        FollowConfig(host="h0", rate_mbit=10, size_bytes=6)
    with pytest.raises(TestbedError, match="no host 'h9'"):
        run_follow(
            load_scenario("small"),
            Path("/nonexistent"),
            FollowConfig("h9", 10),
            Path("/nonexistent/out.json"),
        )


@netns
def test_a_job_follows_a_degraded_link(tmp_path: Path) -> None:
    scenario = load_scenario("small")
    before = set(netns_list())
    out = tmp_path / "follow.json"
    lines: list[str] = []
    cfg = FollowConfig(
        host="h0",
        rate_mbit=25.0,
        size_bytes=1 << 20,
        healthy_s=3.0,
        degraded_s=2.0,
        after_s=3.0,
        probe_duration_s=0.5,
    )
    result = run_follow(scenario, tmp_path / "state", cfg, out, say=lines.append)

    assert out.is_file() and result["correct"]
    prefix = next(line.split("prefix ")[1].split(",")[0] for line in lines if "prefix " in line)
    assert not [ns for ns in set(netns_list()) - before if ns.startswith(prefix)]
    assert result["measured_mbit"]["after"]["h0"] < 0.75 * result["measured_mbit"]["before"]["h0"]
    final = result["plans"]["final"]["plan_id"]
    ids = [r["plan_id"] for r in result["records"]]
    # late reports may change the graph once more at either end, and the job follows
    assert ids[0] != final and final in ids
    assert result["phases"][0]["phase"] == "healthy"
