"""Which blocks every message of a block-sparse run carries; numpy only, no torch.

Every rank all-gathers a bitmap of its non-zero blocks; from the bitmaps of all ranks each
rank replays the program on bitmaps (a reduce ORs the sender's start-of-step bitmap into
the receiver's, a replace copies it) and so knows, before any data moves, which blocks each
of its messages carries: sender and receiver derive the same list, so payloads need no size
header and no index list on the wire. A bit is "may be non-zero": a sum that cancels to zero
is still sent, which keeps the result exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from syncplan.core.document import PlanDocument
from syncplan.executor.dataflow import Flow
from syncplan.executor.schedule import RankSchedule


@dataclass(frozen=True, slots=True)
class Part:
    """One apply of a received message: payload rows ``lo..hi`` (or, with ``rows``, those
    rows of it) go to ``blocks`` (added, or copied), and with a replace the blocks in
    ``zero`` (non-zero only on the receiver) become zero."""

    lo: int
    hi: int
    blocks: np.ndarray  # int64 block indices, ascending
    reduce: bool
    zero: np.ndarray  # int64 block indices (replace only)
    rows: np.ndarray | None = None  # int64 payload rows, one per block (None: lo..hi)


@dataclass(frozen=True, slots=True)
class Fold:
    """The rank-order part of a received message's applies (see ``fold_blocks``), in
    rows of the whole receive buffer (every message's payload, in message order): first
    ``acc_dst`` rows += ``acc_src`` rows, then the message's parts, then
    ``blocks[fin_blocks] += rows[fin_rows]``."""

    acc_src: np.ndarray
    acc_dst: np.ndarray
    fin_blocks: np.ndarray
    fin_rows: np.ndarray


@dataclass(frozen=True, slots=True)
class BlockFlow:
    """Per message of a rank's Flow (same order): the blocks it carries; per received
    message the parts to apply. ``moved``/``dense`` count the blocks all ranks send."""

    send_blocks: tuple[np.ndarray, ...]
    recv_blocks: tuple[np.ndarray, ...]
    recv_parts: tuple[tuple[Part, ...], ...]
    moved: int
    dense: int
    recv_folds: tuple[Fold | None, ...] = ()  # per received message (empty: none at all)

    @property
    def traffic_fraction(self) -> float:
        """Blocks sent over the whole program, sparse over dense (1.0 for an empty program)."""
        return self.moved / self.dense if self.dense else 1.0


def message_steps(sched: RankSchedule) -> tuple[list[int], list[int]]:
    """Program step index of every send and every receive, in the order ``dataflow`` and
    ``build_schedule`` list them."""
    sends = [st.index for st in sched.steps for _ in st.sends]
    recvs = [st.index for st in sched.steps for _ in st.recvs]
    return sends, recvs


Ranges = list[list[tuple[int, int, int, int, bool]]]


def block_ranges(program: PlanDocument, nblocks: int) -> Ranges:
    """Per step, every transfer as (src, dst, first block, end block, reduce); transfers
    with no block left out. Computed once per block count (``executor.sparse`` caches it)."""
    u = program.units
    out: Ranges = []
    for step in program.steps:
        out.append(
            [
                (t.src, t.dst, t.lo * nblocks // u, t.hi * nblocks // u, t.reduce)
                for t in step
                if t.lo * nblocks // u < t.hi * nblocks // u
            ]
        )
    return out


def block_flow(
    program: PlanDocument,
    rank: int,
    bitmaps: np.ndarray,
    flow: Flow,
    sched: RankSchedule,
    ranges: Ranges | None = None,
) -> BlockFlow:
    """Replay ``program`` on ``bitmaps`` (bool, ranks x blocks: plan rank i's non-zero
    blocks) and list the blocks of plan rank ``rank``'s messages in ``flow`` (built from
    ``sched`` for ``bitmaps.shape[1]`` elements, one element per block, with
    ``build_schedule(canonical=False)``); ``ranges``: ``block_ranges(program, nblocks)`` if
    already computed. A step's reduces into one block are added in rank order
    (``fold_blocks``), as the dense engine adds them."""
    n, nblocks = bitmaps.shape
    if n != program.nranks:
        raise ValueError(f"bitmaps has {n} rows, the program {program.nranks} ranks")
    if sched.numel != nblocks:
        raise ValueError(f"the schedule is for {sched.numel} blocks, bitmaps has {nblocks}")
    bm = bitmaps.astype(bool, copy=True)
    if ranges is None:
        ranges = block_ranges(program, nblocks)
    send_step, recv_step = message_steps(sched)
    sends_at: dict[int, list[int]] = {}
    recvs_at: dict[int, list[int]] = {}
    for i, s in enumerate(send_step):
        sends_at.setdefault(s, []).append(i)
    for j, s in enumerate(recv_step):
        recvs_at.setdefault(s, []).append(j)
    send_blocks: list[np.ndarray] = [np.empty(0, np.int64)] * len(flow.sends)
    recv_blocks: list[np.ndarray] = [np.empty(0, np.int64)] * len(flow.recvs)
    recv_parts: list[tuple[Part, ...]] = [()] * len(flow.recvs)
    recv_folds: list[Fold | None] = [None] * len(flow.recvs)
    row_of: list[int] = []  # first row of every received message in the whole buffer
    rows_so_far = 0
    moved = dense = 0
    for s, step in enumerate(ranges):
        for i in sends_at.get(s, ()):
            _, a, b, _ = flow.sends[i]
            send_blocks[i] = np.flatnonzero(bm[rank, a:b]) + a
        for j in recvs_at.get(s, ()):
            peer, a, b, _ = flow.recvs[j]
            src = bm[peer, a:b]
            idx = np.flatnonzero(src) + a
            recv_blocks[j] = idx
            row_of.append(rows_so_far)
            rows_so_far += len(idx)
            parts = []
            for ap in flow.recv_applies[j]:
                if ap.target is not None:
                    raise ValueError("block_flow needs build_schedule(canonical=False)")
                lo = int(np.searchsorted(idx, ap.start))
                hi = int(np.searchsorted(idx, ap.stop))
                zero = (
                    (
                        np.flatnonzero(bm[rank, ap.start : ap.stop] & ~bm[peer, ap.start : ap.stop])
                        + ap.start
                    )
                    if not ap.reduce
                    else np.empty(0, np.int64)
                )
                parts.append(Part(lo, hi, idx[lo:hi], ap.reduce, zero))
            recv_parts[j] = tuple(parts)
        fold_blocks(
            [(j, flow.recvs[j][0]) for j in recvs_at.get(s, ())],
            rank,
            row_of,
            recv_parts,
            recv_folds,
        )
        vals = [bm[src, a:b].copy() for src, _, a, b, _ in step]
        for (_, dst, a, b, reduce), v in zip(step, vals, strict=True):
            moved += int(np.count_nonzero(v))
            dense += b - a
            if reduce:
                bm[dst, a:b] |= v
            else:
                bm[dst, a:b] = v
    return BlockFlow(
        tuple(send_blocks),
        tuple(recv_blocks),
        tuple(recv_parts),
        moved,
        dense,
        tuple(recv_folds) if any(f is not None for f in recv_folds) else (),
    )


def fold_blocks(
    recvs: list[tuple[int, int]],
    rank: int,
    row_of: list[int],
    parts: list[tuple[Part, ...]],
    folds: list[Fold | None],
) -> None:
    """One step's applies in rank order, per block (``executor.schedule.fold_in_rank_order``
    on packed rows): ``recvs`` lists (message, peer) in message order (peers ascending).
    For a block that two or more messages from ranks below ``rank`` add to, the first one's
    row is not applied, each later one's row is added into it, and the last of them adds it
    to the block. Blocks a sender holds as zero are not sent: x + 0 == x, so the sum is the
    dense fold's. Rewrites ``parts`` and sets ``folds`` of the messages concerned."""
    low = [
        (j, k, p)
        for j, peer in recvs
        if peer < rank
        for k, p in enumerate(parts[j])
        if p.reduce and p.hi > p.lo
    ]
    if len({j for j, _, _ in low}) < 2:
        return
    blk = np.concatenate([p.blocks for _, _, p in low])
    msg = np.concatenate([np.full(p.hi - p.lo, j) for j, _, p in low])
    row = np.concatenate([np.arange(p.lo, p.hi) + row_of[j] for j, _, p in low])
    order = np.lexsort((msg, blk))  # by block, then message (peer) order
    blk, msg, row = blk[order], msg[order], row[order]
    new_group = np.ones(len(blk), bool)
    new_group[1:] = blk[1:] != blk[:-1]
    start = np.flatnonzero(new_group)
    size = np.diff(np.append(start, len(blk)))
    shared = np.repeat(size > 1, size)  # blocks with two or more lower values
    if not shared.any():
        return
    first = np.repeat(row[start], size)
    last = np.zeros(len(blk), bool)
    last[np.append(start[1:], len(blk)) - 1] = True
    later = shared & ~new_group
    fin = shared & last
    for j in {j for j, _, _ in low}:
        acc = later & (msg == j)
        end = fin & (msg == j)
        kept = []
        for p in parts[j]:
            if not (p.reduce and p.hi > p.lo and rank > _peer_of(recvs, j)):
                kept.append(p)
                continue
            taken = np.isin(p.blocks, blk[shared])
            if taken.any():
                own = np.flatnonzero(~taken)
                kept.append(Part(p.lo, p.hi, p.blocks[own], True, p.zero, own + p.lo))
            else:
                kept.append(p)
        parts[j] = tuple(kept)
        folds[j] = Fold(row[acc], first[acc], blk[end], first[end])


def _peer_of(recvs: list[tuple[int, int]], j: int) -> int:
    return next(peer for m, peer in recvs if m == j)
