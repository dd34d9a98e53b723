"""The circle-method probe schedule."""

from __future__ import annotations

import itertools

import pytest
from syncplan.agents.schedule import circle_rounds, my_pairs, next_cycle_start


@pytest.mark.parametrize("n", range(0, 10))
def test_every_pair_once_and_disjoint_rounds(n: int) -> None:
    hosts = [f"h{i}" for i in range(n)]
    rounds = circle_rounds(list(reversed(hosts)))
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == sorted(itertools.combinations(sorted(hosts), 2))
    for r in rounds:
        members = [h for p in r for h in p]
        assert len(members) == len(set(members))
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)


def test_my_pairs_initiator_is_first_by_name() -> None:
    hosts = ["c", "a", "b"]
    assert sorted(p[1] for p in my_pairs(hosts, "a")) == ["b", "c"]
    assert all(init for _, _, init in my_pairs(hosts, "a"))
    assert not any(init for _, _, init in my_pairs(hosts, "c"))
    # every agent computes the same rounds
    a = {(r, "a", p) for r, p, i in my_pairs(hosts, "a") if i}
    b = {(r, p, "b") for r, p, i in my_pairs(hosts, "b") if not i and p == "a"}
    assert {(r, x, y) for r, x, y in a if y == "b"} == {(r, x, y) for r, x, y in b}


def test_cycle_start_is_aligned() -> None:
    assert next_cycle_start(100.2, 5.0) == 105.0
    assert next_cycle_start(104.8, 5.0) == 110.0  # less than lead_s away: the next one
