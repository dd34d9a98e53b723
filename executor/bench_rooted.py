"""Broadcast and reduce plans versus ``dist.broadcast`` / ``dist.reduce`` (``syncplan
exec-bench``): each rank's result checked against the exact answer and torch's, then timed.

A broadcast must leave every rank the root's buffer bit for bit, as ``dist.broadcast`` does.
A reduce must leave the root the sum of every rank's input; the inputs are small integers,
so the sum is exact in every dtype and checked bitwise against the exact answer, and against
``dist.reduce`` with ``torch.allclose`` (the two may add in different orders). The other
ranks' buffers after a reduce hold partial sums, as torch leaves them unspecified.
"""

from __future__ import annotations

import sys
from typing import Any

from syncplan.executor.bench_common import (
    BenchCase,
    check_fields,
    rank_inputs,
    tensor_digest,
    time_pair,
)


def rooted_case(
    ex: Any, case: BenchCase, dtype_name: str, seed: int, progress: bool
) -> dict[str, Any]:
    """One case of a broadcast or reduce plan (``ex.program.root`` is the plan's root)."""
    import torch
    import torch.distributed as dist

    dtype = getattr(torch, dtype_name)
    n = dist.get_world_size()
    prog, me = ex.program, ex.plan_rank
    coll, root = prog.collective, prog.root
    src = ex.rank_map[root]  # the process group rank that plays the root
    reduce = coll == "reduce"
    x = rank_inputs(case.numel, dtype, seed, me, integers=reduce)
    if reduce:
        native_op = "reduce"
        want = sum(rank_inputs(case.numel, dtype, seed, r, True).double() for r in range(n))
        want = torch.as_tensor(want).to(dtype)

        def native(buf: Any) -> None:
            dist.reduce(buf, dst=src)
    else:
        native_op = "broadcast"
        want = rank_inputs(case.numel, dtype, seed, root, False)

        def native(buf: Any) -> None:
            dist.broadcast(buf, src=src)

    y = ex.run(x.clone())
    buf = x.clone()
    native(buf)
    checked = not reduce or me == root  # a reduce defines the root's buffer only
    exact = tensor_digest(y) == tensor_digest(want) if checked else True
    err = (y.double() - want.double()).abs().max().item() if checked else 0.0
    if reduce:
        same = bool(torch.allclose(y.double(), buf.double())) if checked else True
    else:
        same = tensor_digest(y) == tensor_digest(buf)
    flags = torch.tensor([err, 0.0 if exact else 1.0, 0.0 if same else 1.0], dtype=torch.float64)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    digests: list[Any] = [None] * n
    dist.all_gather_object(digests, "" if reduce else tensor_digest(y))
    identical = reduce or len(set(digests)) == 1
    del y, buf
    res = {
        "collective": coll,
        "root": root,
        "native_op": native_op,
        **check_fields(case, x, flags, identical, n, dtype_name),
        **time_pair(x, ex.run, native, case),
    }
    if progress and dist.get_rank() == 0:
        print(
            f"  {coll} from {root} {res['bytes']:>12,d} B  plan {res['plan_s'] * 1e3:9.3f} ms  "
            f"{native_op} {res['native_s'] * 1e3:9.3f} ms  ratio {res['ratio']:.3f}  "
            f"correct={res['correct']}  matches_native={res['matches_native']}",
            file=sys.stderr,
            flush=True,
        )
    return res
