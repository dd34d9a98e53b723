"""The settings a plan is priced and searched with, checked once and passed whole.

``PlanOptions`` travels from the service's settings, the CLI's flags or a request to the cost
model (planner/cost.py) and into the plan document (docs/formats.md, Plan document); the
terms are defined in docs/cost-model.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from syncplan.core.errors import RequestError

EFFORTS = ("fast", "thorough")  # how hard forest searches (docs/planner.md, "Effort")


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """Cost-model terms and search effort of one plan; raises RequestError when a value is
    out of range."""

    min_step_s: float = 0.0  # the transport's per-step cost, overlapped with the data
    message_overhead_s: float = 0.0  # LogP's o: seconds per message end
    message_cores: int | None = None  # CPU cores the ranks share (None: one per rank)
    exchange_overhead_s: float = 0.0  # per message end of a step's exchanged transfers
    switch_overhead: float = 0.0  # fraction of a switched transfer's wire time
    effort: str = "fast"  # one of EFFORTS

    def __post_init__(self) -> None:
        if self.effort not in EFFORTS:
            raise RequestError(f"effort must be one of {', '.join(EFFORTS)}, got {self.effort!r}")
        for name in ("min_step_s", "message_overhead_s", "exchange_overhead_s", "switch_overhead"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                what = "a fraction" if name == "switch_overhead" else "a time"
                raise RequestError(f"{name} must be {what} >= 0, got {value!r}")
        cores = self.message_cores
        if cores is not None and (
            isinstance(cores, bool) or not isinstance(cores, int) or cores < 0
        ):
            raise RequestError(
                f"message_cores must be a whole number >= 0 (0 or None: unlimited), got {cores!r}"
            )
        if cores == 0:
            object.__setattr__(self, "message_cores", None)

    @property
    def messages_priced(self) -> bool:
        """Whether a per-message term is priced (message_cores matters only then)."""
        return bool(self.message_overhead_s or self.exchange_overhead_s)

    @property
    def cores(self) -> int | None:
        """The shared cores the price uses: None unless a per-message term is priced."""
        return self.message_cores if self.messages_priced else None

    @property
    def priced(self) -> bool:
        """Whether any cost term beyond the wire and latency is set (all-reduce only)."""
        return bool(
            self.message_overhead_s
            or self.message_cores
            or self.exchange_overhead_s
            or self.switch_overhead
        )

    def doc_fields(self) -> dict[str, Any]:
        """The fields a plan document records: each term that is set, in this order."""
        out: dict[str, Any] = {}
        for name in ("min_step_s", "message_overhead_s", "exchange_overhead_s", "switch_overhead"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.cores:
            out["message_cores"] = self.cores
        if self.effort != "fast":
            out["effort"] = self.effort
        return out

    @classmethod
    def recorded_in(cls, doc: Any) -> PlanOptions:
        """The cost-model terms a plan document records (a term out of range reads as 0)."""

        def term(key: str) -> float:
            v = doc.get(key, 0.0) if isinstance(doc, dict) else 0.0
            ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf
            return float(v) if ok else 0.0

        return cls(
            min_step_s=term("min_step_s"),
            message_overhead_s=term("message_overhead_s"),
            message_cores=int(term("message_cores")) or None,
            exchange_overhead_s=term("exchange_overhead_s"),
            switch_overhead=term("switch_overhead"),
        )

    def with_(self, **changes: Any) -> PlanOptions:
        """A copy with ``changes`` applied (and checked)."""
        return replace(self, **changes)


DEFAULT_OPTIONS = PlanOptions()
