"""Pricing a block-sparse all-reduce under the cost model, and choosing sparse or dense.

A sparse run (``executor.sparse``) sends, per transfer, only the non-zero blocks of the value
its source holds. With per-rank block densities ``d_i`` that are independent, a value that
sums the inputs of a set S of ranks has expected density ``1 - prod_{i in S}(1 - d_i)`` (the
union grows as it moves up a tree); with overlapping non-zeros (the same blocks on every
rank) it is ``max_{i in S} d_i``. A transfer's bytes are its dense bytes times that density.
The index overhead is the all-gather of every rank's bitmap (``nblocks / 8`` bytes each),
priced as the all-gather half of the dense program for ``n x nblocks / 8`` bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from syncplan.core.errors import RequestError
from syncplan.core.program import Program
from syncplan.planner.cost import CostModel

DEFAULT_BLOCK_ELEMS = 256
ELEM_BYTES = 4  # the element size a plan request's size_bytes is assumed to count (float32)
# sparse is chosen only when predicted at least this fraction faster than dense
SPARSE_MARGIN = 0.05


@dataclass(frozen=True)
class Density:
    """Expected fraction of non-zero blocks per rank, and whether they overlap."""

    per_rank: tuple[float, ...]
    overlap: bool = False
    block_elems: int = DEFAULT_BLOCK_ELEMS

    @classmethod
    def from_request(
        cls,
        density: Any,
        nranks: int,
        *,
        overlap: Any = False,
        block_elems: Any = DEFAULT_BLOCK_ELEMS,
    ) -> Density:
        """Validate a plan request's ``density`` (a number, or one per rank),
        ``density_overlap`` and ``block_elems``; raise RequestError naming the field."""
        vals = density if isinstance(density, list) else [density]
        if isinstance(density, list) and len(density) != nranks:
            raise RequestError(f"density lists {len(density)} values but there are {nranks} ranks")
        for v in vals:
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or not 0 < v <= 1
            ):
                raise RequestError(
                    f"density must be a number in (0, 1] or a list of them, got {v!r}"
                )
        if not isinstance(overlap, bool):
            raise RequestError(f"density_overlap must be true or false, got {overlap!r}")
        if (
            isinstance(block_elems, bool)
            or not isinstance(block_elems, int)
            or not 1 <= block_elems <= 1 << 20
        ):
            raise RequestError(
                f"block_elems must be an integer in 1..{1 << 20}, got {block_elems!r}"
            )
        per = tuple(float(v) for v in vals) if len(vals) == nranks else (float(vals[0]),) * nranks
        return cls(per, overlap, block_elems)

    def uniform(self, d: float) -> Density:
        return Density((d,) * len(self.per_rank), self.overlap, self.block_elems)


def transfer_weights(program: Program, density: Density) -> list[np.ndarray]:
    """Per step, per transfer: the expected fraction of its units that hold non-zero blocks
    in the value its source sends."""
    bounds = sorted(
        {0, program.units} | {b for st in program.steps for t in st for b in (t.lo, t.hi)}
    )
    index = {b: i for i, b in enumerate(bounds)}
    seglen = np.diff(np.asarray(bounds, dtype=np.float64))
    d = np.asarray(density.per_rank, dtype=np.float64)
    # independent: probability that the value's block is all zero; overlap: its density
    state = np.repeat((d if density.overlap else 1 - d)[:, None], len(seglen), axis=1)
    out = []
    for step in program.steps:
        snaps = [state[t.src, index[t.lo] : index[t.hi]].copy() for t in step]
        w = np.empty(len(step))
        for i, (t, v) in enumerate(zip(step, snaps, strict=True)):
            a, b = index[t.lo], index[t.hi]
            dens = v if density.overlap else 1 - v
            w[i] = float(dens @ seglen[a:b]) / (t.hi - t.lo)
        for t, v in zip(step, snaps, strict=True):
            a, b = index[t.lo], index[t.hi]
            if not t.reduce:
                state[t.dst, a:b] = v
            elif density.overlap:
                np.maximum(state[t.dst, a:b], v, out=state[t.dst, a:b])
            else:
                state[t.dst, a:b] *= v
        out.append(w)
    return out


def bitmap_bytes(size_bytes: int, block_elems: int) -> int:
    """Bytes of one rank's bitmap of non-zero blocks."""
    nblocks = -(-size_bytes // (ELEM_BYTES * block_elems))
    return -(-nblocks // 8)


def sparse_time(
    cost: CostModel, ranks: Sequence[str], program: Program, size_bytes: int, density: Density
) -> float:
    """Cost-model time of ``program`` run block-sparse at ``density``, index overhead
    included."""
    bpu = size_bytes / program.units
    weights = transfer_weights(program, density)
    data = sum(
        cost.step_time(ranks, step, bpu, w) for step, w in zip(program.steps, weights, strict=True)
    )
    index = 0.5 * cost.program_time(
        ranks, program, len(ranks) * bitmap_bytes(size_bytes, density.block_elems)
    )
    return data + index


def break_even(
    cost: CostModel,
    ranks: Sequence[str],
    program: Program,
    size_bytes: int,
    density: Density,
    dense_s: float,
) -> float:
    """The uniform density below which the sparse run is predicted faster than ``dense_s``
    (0.0 when it never is; 1.0 when it always is)."""
    if sparse_time(cost, ranks, program, size_bytes, density.uniform(1.0)) < dense_s:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(12):
        mid = (lo + hi) / 2
        if sparse_time(cost, ranks, program, size_bytes, density.uniform(mid)) < dense_s:
            lo = mid
        else:
            hi = mid
    return lo


def choose(
    cost: CostModel,
    ranks: Sequence[str],
    size_bytes: int,
    density: Density,
    candidates: dict[str, tuple[float, Program]],
    dense_best: str,
) -> tuple[str, dict[str, Any]]:
    """Pick the algorithm and mode: the fastest sparse candidate when it beats the fastest
    dense one (``dense_best``) by SPARSE_MARGIN, else dense. ``candidates`` maps algorithm
    to (dense predicted time, program). Returns the algorithm and the plan's ``sparse``
    object (mode, predictions, the executor's fallback density ``max_density``)."""
    priced = {
        name: sparse_time(cost, ranks, prog, size_bytes, density)
        for name, (_, prog) in candidates.items()
    }
    best_sparse = min(priced, key=lambda k: priced[k])
    dense_s = candidates[dense_best][0]
    sparse_wins = priced[best_sparse] < dense_s * (1 - SPARSE_MARGIN)
    name = best_sparse if sparse_wins else dense_best
    prog = candidates[name][1]
    own_dense = cost.program_time(ranks, prog, size_bytes)  # priced as sparse_time prices
    info: dict[str, Any] = {
        "mode": "sparse" if sparse_wins else "dense",
        "density": list(density.per_rank),
        "density_overlap": density.overlap,
        "block_elems": density.block_elems,
        "predicted_sparse_s": priced[name],
        "predicted_dense_s": own_dense,
        "candidates_sparse": priced,
        # the executor runs the dense plan above it: where sparse stops winning by the margin
        "max_density": break_even(
            cost, ranks, prog, size_bytes, density, own_dense * (1 - SPARSE_MARGIN)
        ),
    }
    return name, info
