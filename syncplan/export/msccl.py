"""A plan document (docs/formats.md, Plan document) as an MSCCL algorithm (msccl_xml).

The plan's buffer of ``units`` becomes ``nchunksperloop`` equal chunks: exactly (every chunk
boundary divided by their greatest common divisor) when the executor's limits allow, else
quantized: boundary b maps to round(b * Q / units). Quantizing keeps the program correct:
the transfers that cover chunk j are exactly those that covered one unit of the plan, so
chunk j follows that unit's schedule; only the load balance changes (``info`` reports it).

Each transfer becomes a send (``s``) on its source and a receive (``r``, or ``rrc`` when it
adds) on its destination, in program order (a step's sends before its receives). Each GPU
has one sending threadblock per (peer, channel) and one receiving threadblock per (peer,
channel): a threadblock that did both could wait on its own send while its peer does the
same (a deadlock once several messages of one step exceed the connection's buffer).
Dependencies on the same GPU follow the data: a send waits for the last write of its
chunks, a receive for the last write and for every read since (the lockstep rule "send
the value held at the start of the step"); extra dependencies go into ``nop`` steps
before the step, the last one on the step itself.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from syncplan.core.program import Program, program_from_doc
from syncplan.export.msccl_xml import (
    ExportError,
    MscclAlgo,
    MscclGPU,
    MscclStep,
    MscclTB,
)

# (src, dst, lo, hi, reduce) in chunks
Xfer = tuple[int, int, int, int, bool]


@dataclass(frozen=True)
class MscclLimits:
    """The executor's compile-time limits (msccl_struct.h of each runtime)."""

    max_steps_per_tb: int
    max_tbs_per_channel: int  # threadblocks sending (and receiving) on one channel of a GPU
    max_tbs: int  # threadblocks of one GPU
    max_channels: int
    max_count: int  # a step's cnt must be below this


TARGETS = {
    # MSCCL executor: 256 steps, 32 threadblocks per channel, 32 channels; every threadblock
    # of a GPU must be resident at once, so no more than an A100's 108 SMs.
    "msccl": MscclLimits(256, 32, 108, 32, 72),
    "rccl": MscclLimits(64, 32, 64, 32, 72),  # RCCL's MSCCL: 64 steps, 64 threadblocks
}


class LimitError(ExportError):
    """The algorithm does not fit the target's limits at this resolution."""


def plan_program(plan: dict[str, Any]) -> Program:
    """The plan's program (contract or compact form); ExportError if it has none."""
    if not isinstance(plan, dict):
        raise ExportError("plan must be a JSON object")
    if plan.get("collective", "allreduce") != "allreduce":
        raise ExportError(f"collective {plan.get('collective')!r}: only allreduce plans export")
    if "program_compact" in plan:
        from syncplan.core.compact import expand_document

        plan = expand_document(plan)
    prog = plan.get("program")
    if not isinstance(prog, dict) or "units" not in prog or "steps" not in prog:
        raise ExportError("plan has no program (expected a plan document, docs/formats.md)")
    try:
        return program_from_doc(prog)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ExportError(f"malformed program: {exc!r}") from None


def exact_chunks(program: Program) -> int:
    """The fewest equal chunks that represent every transfer's range exactly."""
    g = program.units
    for step in program.steps:
        for t in step:
            g = math.gcd(g, t.lo, t.hi)
    return program.units // g


def chunked(program: Program, chunks: int) -> list[list[Xfer]]:
    """The program's steps over ``chunks`` equal chunks (exact when ``chunks`` divides the
    boundaries, else quantized); empty transfers dropped, contiguous transfers of one pair
    and kind in a step merged."""
    u = program.units
    exact = exact_chunks(program)
    if chunks == exact:
        g = u // exact

        def q(b: int) -> int:
            return b // g
    else:

        def q(b: int) -> int:
            return (b * chunks + u // 2) // u

    out: list[list[Xfer]] = []
    for step in program.steps:
        groups: dict[tuple[int, int, bool], list[tuple[int, int]]] = {}
        for t in step:
            a, b = q(t.lo), q(t.hi)
            if a < b:
                groups.setdefault((t.src, t.dst, t.reduce), []).append((a, b))
        merged: list[Xfer] = []
        for (src, dst, red), ranges in groups.items():
            ranges.sort()
            cur_a, cur_b = ranges[0]
            for a, b in ranges[1:]:
                if a == cur_b:
                    cur_b = b
                else:
                    merged.append((src, dst, cur_a, cur_b, red))
                    cur_a, cur_b = a, b
            merged.append((src, dst, cur_a, cur_b, red))
        if merged:
            out.append(merged)
    return out


def _channels_of(steps: list[list[Xfer]], channels: int) -> list[list[int]]:
    """Channel of each transfer: each pair's transfers in order, cut into ``channels``
    contiguous runs."""
    total: dict[tuple[int, int], int] = defaultdict(int)
    for step in steps:
        for t in step:
            total[(t[0], t[1])] += 1
    seen: dict[tuple[int, int], int] = defaultdict(int)
    chans = []
    for step in steps:
        row = []
        for t in step:
            key = (t[0], t[1])
            row.append(seen[key] * channels // total[key])
            seen[key] += 1
        chans.append(row)
    return chans


def _pieces(a: int, b: int, max_count: int) -> list[tuple[int, int]]:
    n = max_count - 1
    return [(x, min(x + n, b)) for x in range(a, b, n)]


class _Builder:
    """Lowers chunked steps to one GPU's threadblocks and dependencies."""

    def __init__(self, rank: int, chunks: int) -> None:
        self.rank = rank
        self.tbs: dict[tuple[int, int, bool], MscclTB] = {}
        self.by_id: list[MscclTB] = []
        self.writer: list[tuple[int, int] | None] = [None] * chunks
        self.readers: list[dict[int, int]] = [{} for _ in range(chunks)]

    def tb(self, peer: int, chan: int, send: bool) -> MscclTB:
        key = (peer, chan, send)
        tb = self.tbs.get(key)
        if tb is None:
            tb = self.tbs[key] = MscclTB(len(self.tbs), -1, -1, chan)
            self.by_id.append(tb)
        return tb

    def place(self, peer: int, chan: int, send: bool, a: int, b: int, reduce: bool) -> None:
        tb = self.tb(peer, chan, send)
        if send:
            tb.send = peer
        else:
            tb.recv = peer
        deps: dict[int, int] = {}

        def need(who: tuple[int, int] | None) -> None:
            if who is not None and who[0] != tb.id and deps.get(who[0], -1) < who[1]:
                deps[who[0]] = who[1]

        for c in range(a, b):
            need(self.writer[c])
            if not send:
                for rtb, rs in self.readers[c].items():
                    need((rtb, rs))
        order = sorted(deps.items())
        for dtb, ds in order[:-1]:
            tb.steps.append(MscclStep(len(tb.steps), "nop", depid=dtb, deps=ds))
            self._mark(dtb, ds)
        kind = "s" if send else ("rrc" if reduce else "r")
        step = MscclStep(len(tb.steps), kind, "i", a, "i", a, b - a)
        if order:
            step.depid, step.deps = order[-1]
            self._mark(*order[-1])
        tb.steps.append(step)
        for c in range(a, b):
            if send:
                self.readers[c][tb.id] = step.s
            else:
                self.writer[c] = (tb.id, step.s)
                self.readers[c] = {}

    def _mark(self, tb_id: int, s: int) -> None:
        self.by_id[tb_id].steps[s].hasdep = 1


def _lower(
    steps: list[list[Xfer]], n: int, chunks: int, channels: int, limits: MscclLimits
) -> list[MscclGPU]:
    chans = _channels_of(steps, channels)
    builders = [_Builder(r, chunks) for r in range(n)]
    for step, row in zip(steps, chans, strict=True):
        for (src, dst, a, b, red), ch in zip(step, row, strict=True):
            for pa, pb in _pieces(a, b, limits.max_count):
                builders[src].place(dst, ch, True, pa, pb, red)
        for (src, dst, a, b, red), ch in zip(step, row, strict=True):
            for pa, pb in _pieces(a, b, limits.max_count):
                builders[dst].place(src, ch, False, pa, pb, red)
    gpus = []
    for bld in builders:
        tbs = sorted(bld.tbs.values(), key=lambda t: t.id)
        _check_gpu(bld.rank, tbs, limits)
        gpus.append(MscclGPU(bld.rank, chunks, 0, 0, tbs))
    return gpus


def _check_gpu(rank: int, tbs: list[MscclTB], limits: MscclLimits) -> None:
    if len(tbs) > limits.max_tbs:
        raise LimitError(
            f"gpu {rank} needs {len(tbs)} threadblocks, more than the "
            f"{limits.max_tbs} the target allows"
        )
    sends: dict[int, int] = defaultdict(int)
    recvs: dict[int, int] = defaultdict(int)
    for tb in tbs:
        if len(tb.steps) > limits.max_steps_per_tb:
            raise LimitError(
                f"gpu {rank} threadblock {tb.id} (peer {max(tb.send, tb.recv)}, "
                f"channel {tb.chan}) needs {len(tb.steps)} steps, more than the "
                f"{limits.max_steps_per_tb} the target allows"
            )
        sends[tb.chan] += tb.send >= 0
        recvs[tb.chan] += tb.recv >= 0
    for chan, count in [*sends.items(), *recvs.items()]:
        if count > limits.max_tbs_per_channel:
            raise LimitError(
                f"gpu {rank} channel {chan} needs {count} sending or receiving "
                f"threadblocks, more than the {limits.max_tbs_per_channel} "
                "the target allows"
            )


def _worst_pair(steps: list[list[Xfer]], limits: MscclLimits) -> tuple[int, int, int]:
    """(gpu, peer, operations) of the GPU with the most sends to (or receives from) one
    peer: a cheap lower bound on the steps its threadblocks need."""
    ops: dict[tuple[int, int, bool], int] = defaultdict(int)  # (gpu, peer, sending) -> ops
    for step in steps:
        for src, dst, a, b, _ in step:
            k = -(-(b - a) // (limits.max_count - 1))
            ops[(src, dst, True)] += k
            ops[(dst, src, False)] += k
    if not ops:
        return 0, 0, 0
    (gpu, peer, _), worst = max(ops.items(), key=lambda kv: kv[1])
    return gpu, peer, worst


def _most_tbs(steps: list[list[Xfer]], channels: int) -> int:
    """The threadblocks of the busiest GPU at ``channels`` (exact: a pair with n transfers
    uses min(channels, n) channels, each a sending and a receiving threadblock)."""
    pairs: dict[tuple[int, int], int] = defaultdict(int)
    for step in steps:
        for t in step:
            pairs[(t[0], t[1])] += 1
    per_gpu: dict[int, int] = defaultdict(int)
    for (src, dst), n in pairs.items():
        per_gpu[src] += min(channels, n)
        per_gpu[dst] += min(channels, n)
    return max(per_gpu.values(), default=0)


def _candidates(exact: int, chunks: int | None) -> list[int]:
    if chunks is not None:
        return [chunks]
    out = [exact] if exact <= 8192 else []
    q = 1 << min(12, max(0, exact.bit_length() - 1))
    while q >= 1:
        if q < exact and q not in out:
            out.append(q)
        q //= 2
    return out


def export_msccl(
    plan: dict[str, Any],
    *,
    target: str = "msccl",
    chunks: int | None = None,
    channels: int | None = None,
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    proto: str = "Simple",
) -> tuple[MscclAlgo, dict[str, Any]]:
    """The plan as an MSCCL algorithm and a summary (``chunks``, ``exact``, ``channels``,
    ``program``: the chunked program it encodes). Raises ExportError when it cannot fit."""
    if target not in TARGETS:
        raise ExportError(f"target {target!r} is unknown; choose one of {', '.join(TARGETS)}")
    if proto not in ("Simple", "LL", "LL128"):
        raise ExportError(f"proto {proto!r} is unknown; choose Simple, LL or LL128")
    limits = TARGETS[target]
    program = plan_program(plan)
    n = len(plan.get("ranks") or [])
    if n < 1:
        raise ExportError("plan has no ranks")
    size = int(plan.get("size_bytes") or 0)
    lo = min_bytes if min_bytes is not None else max(1, size // 4)
    hi = max_bytes if max_bytes is not None else max(lo, size * 4)
    if lo < 0 or hi < lo:
        raise ExportError(f"need 0 <= min_bytes <= max_bytes, got {lo} and {hi}")
    if chunks is not None and chunks < 1:
        raise ExportError(f"chunks must be a positive integer, got {chunks}")
    if channels is not None and not 1 <= channels <= limits.max_channels:
        raise ExportError(f"channels must be in [1, {limits.max_channels}], got {channels}")
    exact = exact_chunks(program)
    chan_options = (
        [channels] if channels else [c for c in (1, 2, 4, 8, 16, 32) if c <= limits.max_channels]
    )
    first_error: str | None = None
    for q in _candidates(exact, chunks):
        steps = chunked(program, q)
        gpu, peer, worst = _worst_pair(steps, limits)
        for c in chan_options:
            if worst > c * limits.max_steps_per_tb:
                first_error = first_error or (
                    f"at {q} chunks gpu {gpu} and peer {peer} need {worst} steps, more than "
                    f"{c} channel(s) x {limits.max_steps_per_tb}"
                )
                continue
            tbs = _most_tbs(steps, c)
            if tbs > limits.max_tbs:
                first_error = first_error or (
                    f"at {q} chunks and {c} channels a GPU needs {tbs} threadblocks, more "
                    f"than the {limits.max_tbs} the target allows"
                )
                continue
            try:
                gpus = _lower(steps, n, q, c, limits)
            except LimitError as exc:
                first_error = first_error or f"at {q} chunks and {c} channels: {exc}"
                continue
            used = 1 + max((tb.chan for g in gpus for tb in g.tbs), default=0)
            name = f"syncplan-{plan.get('algorithm', 'plan')}-{str(plan.get('plan_id', ''))[:12]}"
            algo = MscclAlgo(name, proto, used, q, n, "allreduce", 1, 0, lo, hi, gpus)
            info = {
                "chunks": q,
                "exact": q == exact,
                "exact_chunks": exact,
                "channels": used,
                "target": target,
                "max_steps_per_tb": max((len(tb.steps) for g in gpus for tb in g.tbs), default=0),
                "max_tbs_per_gpu": max((len(g.tbs) for g in gpus), default=0),
                "transfers": sum(len(s) for s in steps),
                "program": steps,
            }
            return algo, info
    raise ExportError(
        f"the plan does not fit the {target} executor's limits "
        f"({limits.max_steps_per_tb} steps per threadblock, "
        f"{limits.max_tbs_per_channel} threadblocks per channel, "
        f"{limits.max_tbs} per GPU): {first_error}"
    )


def chunked_doc(plan: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """A plan document of the chunked program the export encodes (for planner.verify)."""
    steps = [
        [{"src": s, "dst": d, "chunk": [a, b], "reduce": r} for s, d, a, b, r in step]
        for step in info["program"]
    ]
    return {
        **{k: v for k, v in plan.items() if k not in ("program", "program_compact")},
        "program": {"units": info["chunks"], "steps": steps},
    }
