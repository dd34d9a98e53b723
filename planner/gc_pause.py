"""A process-wide pause of the cyclic garbage collector for allocation-heavy planner work."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _GcPause:
    """Pauses the cyclic garbage collector while any thread is planning: building a plan
    allocates millions of small objects and no cycles, and each collection pass rescans them
    all (at 1,024 ranks that was most of the time spent turning a program into its
    document). Reference counting still frees everything; collection resumes afterwards."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._resume:
                    gc.enable()


gc_paused = _GcPause()
