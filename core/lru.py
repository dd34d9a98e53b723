"""A least-recently-used cache bounded by a number of entries and by a byte budget."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Keeps at most ``max_items`` entries whose ``size(value)`` add up to at most
    ``max_bytes``, dropping the least recently used first (``on_evict(key, value)`` is told
    of each). ``get`` and ``put`` count as use; ``peek`` does not."""

    def __init__(
        self,
        max_items: int,
        max_bytes: float = math.inf,
        size: Callable[[V], int] = lambda value: 0,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        if max_items < 0 or max_bytes < 0:
            raise ValueError("max_items and max_bytes must be >= 0")
        self.max_items, self.max_bytes = max_items, max_bytes
        self.size, self.on_evict = size, on_evict
        self.nbytes = 0  # the sizes of the entries held, added up
        self.entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def __iter__(self) -> Iterator[K]:
        return iter(self.entries)

    def peek(self, key: K) -> V | None:
        """The value held for ``key`` (None when none), leaving the order as it is."""
        return self.entries.get(key)

    def get(self, key: K) -> V | None:
        """The value held for ``key`` (None when none), now the most recently used."""
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> bool:
        """Hold ``value`` as the most recently used and evict beyond the bounds; False (and
        nothing held for ``key``) when the value alone is over the byte budget."""
        self.pop(key)
        nbytes = self.size(value)
        if nbytes > self.max_bytes:
            return False
        self.entries[key] = value
        self.nbytes += nbytes
        while len(self.entries) > self.max_items or self.nbytes > self.max_bytes:
            old_key, old = self.entries.popitem(last=False)
            self.nbytes -= self.size(old)
            if self.on_evict is not None:
                self.on_evict(old_key, old)
        return key in self.entries

    def pop(self, key: K) -> V | None:
        """Remove and return the value held for ``key`` (None when none)."""
        value = self.entries.pop(key, None)
        if value is not None:
            self.nbytes -= self.size(value)
        return value

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0
