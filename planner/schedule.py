"""Per-job synchronization schedules: fusion buckets sized by the cost model, overlap modes.

A job lists its gradient tensors in backward order (element count, dtype and, optionally,
the forward and backward compute time of the layer that produces each). Two modes:

- ``allreduce`` (WFBP/DDP): a bucket's all-reduce starts when its last gradient is ready and
  the previous bucket's communication is done; the next forward waits for every bucket.
- ``dear`` (DeAR, seed 004): a bucket is reduce-scattered in backward the same way, and
  all-gathered before the next forward, in forward order; each layer's forward waits for
  its bucket's all-gather only.

Communication times come from real plans. A bounded number of planner solves
(``anchors``: all-reduce plans at geometric sizes between the smallest tensor and the whole
model, every algorithm) gives a set of all-reduce programs, each also split into a
reduce-scatter and an all-gather (planner.collectives). Any program runs at any size, so a
bucket of ``b`` bytes costs the cheapest program priced by the cost model at ``b``: the bucket
DP reads these times at ``GRID`` sizes, interpolated between, and every emitted plan is the
cheapest program priced exactly at its bucket's size (planner.comm_curves).

Buckets: a dynamic program over contiguous groups of same-dtype tensors minimises the end of
the communication chain (exact for the model: a later chain end never helps). For ``dear``
the partitions the DP finds for reduce-scatter and for all-reduce times, one bucket and
one bucket per tensor are each simulated in full (backward and forward), and the fastest is
kept. Work is O(tensors * MAX_SPAN) after at most ``anchors`` solves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from syncplan.core.errors import RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.planner.comm_curves import CommCurves
from syncplan.planner.topology import Topology

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
MAX_TENSORS = 10_000
MAX_SPAN = 512  # tensors one bucket may hold
MODES = ("allreduce", "dear")


@dataclass(frozen=True)
class TensorSpec:
    """One gradient tensor, in backward order; times in seconds (0: unknown)."""

    numel: int
    dtype: str = "float32"
    forward_s: float = 0.0
    backward_s: float = 0.0

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


def check_tensors(tensors: Sequence[TensorSpec]) -> None:
    """Raise RequestError naming the first bad tensor."""
    if not tensors:
        raise RequestError("a schedule needs at least one tensor")
    if len(tensors) > MAX_TENSORS:
        raise RequestError(f"at most {MAX_TENSORS} tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        if t.dtype not in DTYPE_BYTES:
            raise RequestError(
                f"tensors[{i}].dtype {t.dtype!r} is not one of {', '.join(DTYPE_BYTES)}"
            )
        if isinstance(t.numel, bool) or not isinstance(t.numel, int) or t.numel < 1:
            raise RequestError(f"tensors[{i}].numel must be a positive integer")
        for name in ("forward_s", "backward_s"):
            v = getattr(t, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and 0 <= v <= 3600):
                raise RequestError(f"tensors[{i}].{name} must be a time in [0, 3600] s")


def partition(
    nbytes: np.ndarray, ready: np.ndarray, groups: np.ndarray, curves: CommCurves, kind: str
) -> list[tuple[int, int]]:
    """Contiguous buckets [lo, hi) of tensors (same ``groups`` value) that minimise the end
    of a sequential communication chain; tensor i's gradient is ready at ``ready[i]``."""
    m = len(nbytes)
    prefix = np.concatenate(([0.0], np.cumsum(nbytes)))
    end = np.full(m + 1, np.inf)
    end[0] = 0.0
    arg = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, m + 1):
        j0 = max(0, i - MAX_SPAN)
        js = np.arange(j0, i)
        same = groups[js] == groups[i - 1]
        # a bucket [j, i) may not cross a dtype change: only the trailing same-dtype run
        if not same.all():
            js = js[np.nonzero(~same)[0][-1] + 1 :]
        sizes = prefix[i] - prefix[js]
        cand = np.maximum(end[js], ready[i - 1]) + curves.time(kind, sizes)
        k = int(np.argmin(cand))
        end[i], arg[i] = cand[k], js[k]
    out = []
    i = m
    while i > 0:
        out.append((int(arg[i]), i))
        i = int(arg[i])
    return out[::-1]


def simulate(
    tensors: Sequence[TensorSpec],
    buckets: list[tuple[int, int]],
    mode: str,
    comm: list[float] | list[tuple[float, float]],
) -> dict[str, Any]:
    """Predicted iteration time (steady state) with and without overlap, and a timeline.

    ``comm[k]`` is bucket k's all-reduce time, or its (reduce-scatter, all-gather) times.
    The iteration runs forward (layers in reverse backward order), backward, communication.
    """
    fwd = [t.forward_s for t in tensors][::-1]  # forward order
    m = len(tensors)
    forward_s, backward_s = sum(fwd), sum(t.backward_s for t in tensors)
    events: list[dict[str, Any]] = []
    if mode == "allreduce":
        ar = [float(c) for c in comm]  # type: ignore[arg-type]
        ready = np.cumsum([t.backward_s for t in tensors]) + forward_s
        t_end = forward_s
        for k, (_, hi) in enumerate(buckets):
            start = max(t_end, float(ready[hi - 1]))
            t_end = start + ar[k]
            events.append({"bucket": k, "op": "allreduce", "start_s": start, "end_s": t_end})
        overlap = max(t_end, forward_s + backward_s)
        return {
            "overlap_s": overlap,
            "no_overlap_s": forward_s + backward_s + sum(ar),
            "forward_s": forward_s,
            "backward_s": backward_s,
            "comm_s": sum(ar),
            "events": events,
        }
    rs = [c[0] for c in comm]  # type: ignore[index]
    ag = [c[1] for c in comm]  # type: ignore[index]
    bucket_of = [0] * m
    for k, (lo, hi) in enumerate(buckets):
        for i in range(lo, hi):
            bucket_of[i] = k
    # forward: all-gathers in forward order (last bucket first), each layer waits for its own
    t_comm, ag_end = 0.0, [0.0] * len(buckets)
    for k in range(len(buckets) - 1, -1, -1):
        events.append({"bucket": k, "op": "allgather", "start_s": t_comm, "end_s": t_comm + ag[k]})
        t_comm += ag[k]
        ag_end[k] = t_comm
    t = 0.0
    for f, i in zip(fwd, range(m - 1, -1, -1), strict=True):
        t = max(t, ag_end[bucket_of[i]]) + f
    fwd_end = t
    ready = np.cumsum([x.backward_s for x in tensors]) + fwd_end
    for k, (_, hi) in enumerate(buckets):
        start = max(t_comm, float(ready[hi - 1]))
        t_comm = start + rs[k]
        events.append({"bucket": k, "op": "reducescatter", "start_s": start, "end_s": t_comm})
    overlap = max(t_comm, fwd_end + backward_s)
    total = sum(rs) + sum(ag)
    return {
        "overlap_s": overlap,
        "no_overlap_s": forward_s + backward_s + total,
        "forward_s": forward_s,
        "backward_s": backward_s,
        "comm_s": total,
        "events": events,
    }


def _comm_times(
    curves: CommCurves, nbytes: np.ndarray, buckets: list[tuple[int, int]], mode: str, exact: bool
) -> list[Any]:
    sizes = [float(nbytes[lo:hi].sum()) for lo, hi in buckets]
    if mode == "allreduce":
        if exact:
            return [curves.best("allreduce", s)[1] for s in sizes]
        return list(curves.time("allreduce", np.array(sizes)))
    if exact:
        return [(curves.best("reducescatter", s)[1], curves.best("allgather", s)[1]) for s in sizes]
    arr = np.array(sizes)
    return list(zip(curves.time("reducescatter", arr), curves.time("allgather", arr), strict=True))


def make_schedule(
    topo: Topology,
    ranks: list[str],
    tensors: Sequence[TensorSpec],
    *,
    modes: Sequence[str] = MODES,
    anchors: int = 4,
    algorithms: Sequence[str] | None = None,
    options: PlanOptions = DEFAULT_OPTIONS,
    curves: CommCurves | None = None,
    with_plans: bool = True,
) -> dict[str, Any]:
    """The schedule document for one job (see docs/schedule.md). ``options`` (core/options.py)
    gives the step floor and the per-message overhead (shared by ``message_cores`` cores when
    set); bucket sizes, plan choices and predicted times include them, and each plan document
    records them, so the verifier reproduces its ``predicted_time_s``."""
    check_tensors(tensors)
    topo.check_ranks(ranks)
    for mode in modes:
        if mode not in MODES:
            raise RequestError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    nbytes = np.array([t.nbytes for t in tensors], dtype=np.float64)
    if curves is None:
        curves = CommCurves(
            topo,
            ranks,
            int(nbytes.min()),
            int(nbytes.sum()),
            anchors=anchors,
            algorithms=algorithms,
            options=options,
        )
    dtypes = {d: i for i, d in enumerate(dict.fromkeys(t.dtype for t in tensors))}
    groups = np.array([dtypes[t.dtype] for t in tensors])
    ready = np.cumsum([t.backward_s for t in tensors])
    out: dict[str, Any] = {
        "ranks": list(ranks),
        "tensors": len(tensors),
        "total_bytes": int(nbytes.sum()),
        "solves": curves.solves,
        "profile": ("declared" if any(t.forward_s or t.backward_s for t in tensors) else "none"),
        "modes": {},
    }
    for mode in modes:
        if mode == "dear" and not curves.progs["reducescatter"]:
            continue
        bucketings = {
            "dp": partition(
                nbytes,
                ready,
                groups,
                curves,
                "allreduce" if mode == "allreduce" else "reducescatter",
            )
        }
        if mode == "dear":
            bucketings["dp-allreduce"] = partition(nbytes, ready, groups, curves, "allreduce")
            bucketings["per-tensor"] = [(i, i + 1) for i in range(len(tensors))]
            cuts = [0] + [i for i in range(1, len(tensors)) if groups[i] != groups[i - 1]]
            bucketings["one-per-dtype"] = list(zip(cuts, [*cuts[1:], len(tensors)], strict=True))
        scored = {
            name: simulate(tensors, b, mode, _comm_times(curves, nbytes, b, mode, False))
            for name, b in bucketings.items()
        }
        pick = min(scored, key=lambda k: scored[k]["overlap_s"])
        buckets = bucketings[pick]
        sim = simulate(tensors, buckets, mode, _comm_times(curves, nbytes, buckets, mode, True))
        entries = []
        for lo, hi in buckets:
            size = int(nbytes[lo:hi].sum())
            entry: dict[str, Any] = {
                "tensors": [lo, hi],
                "size_bytes": size,
                "dtype": tensors[lo].dtype,
            }
            if with_plans:
                kinds = ("allreduce",) if mode == "allreduce" else ("reducescatter", "allgather")
                entry["plans"] = {kind: curves.plan_doc(kind, size) for kind in kinds}
            entries.append(entry)
        out["modes"][mode] = {
            "buckets": entries,
            "partition": pick,
            "predicted_iteration_s": sim["overlap_s"],
            "predicted_iteration_no_overlap_s": sim["no_overlap_s"],
            "forward_s": sim["forward_s"],
            "backward_s": sim["backward_s"],
            "comm_s": sim["comm_s"],
            "timeline": sim["events"],
        }
    out["recommended"] = min(out["modes"], key=lambda k: out["modes"][k]["predicted_iteration_s"])
    return out
