"""core.lru: eviction by count and by bytes, least recently used first."""

from __future__ import annotations

import pytest
from syncplan.core.lru import LRU


def test_count_bound_evicts_the_least_recently_used() -> None:
    gone: list[tuple[str, int]] = []
    lru: LRU[str, int] = LRU(2, on_evict=lambda k, v: gone.append((k, v)))
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "b" is now the oldest
    assert lru.peek("b") == 2  # a peek is not a use
    lru.put("c", 3)
    assert list(lru) == ["a", "c"] and gone == [("b", 2)] and "b" not in lru


def test_byte_budget_and_values_over_it() -> None:
    lru: LRU[str, bytes] = LRU(10, max_bytes=10, size=len)
    assert lru.put("a", b"xxxx") and lru.put("b", b"xxxx") and lru.nbytes == 8
    assert lru.put("c", b"xxxx") and list(lru) == ["b", "c"] and lru.nbytes == 8
    assert lru.put("b", b"x") and lru.nbytes == 5  # replacing counts the new size only
    assert not lru.put("c", b"x" * 11)  # alone over the budget: not held, old value gone
    assert list(lru) == ["b"] and lru.nbytes == 1 and len(lru) == 1
    assert lru.pop("b") == b"x" and lru.pop("b") is None and lru.nbytes == 0
    lru.put("d", b"dd")
    lru.clear()
    assert len(lru) == 0 and lru.nbytes == 0
    with pytest.raises(ValueError):
        LRU(-1)
