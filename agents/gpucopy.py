"""GPU copy bandwidth with torch: device to host per GPU, device to device per GPU pair."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("syncplan.agent.gpucopy")


@dataclass
class CopyBandwidth:
    d2h: dict[int, float] = field(default_factory=dict)  # GPU -> GB/s
    h2d: dict[int, float] = field(default_factory=dict)
    d2d: dict[tuple[int, int], float] = field(default_factory=dict)  # (src, dst) -> GB/s


def measure_gpu_copies(size_bytes: int = 256 * 2**20, iters: int = 5) -> CopyBandwidth | None:
    """None when torch or CUDA is missing; otherwise the median of ``iters`` timed copies."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    out = CopyBandwidth()
    n = torch.cuda.device_count()

    def timed(dst, src, device: int) -> float:
        times = []
        with torch.cuda.device(device):
            dst.copy_(src, non_blocking=True)  # warm-up
            torch.cuda.synchronize()
            for _ in range(iters):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                dst.copy_(src, non_blocking=True)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
        times.sort()
        return size_bytes / times[len(times) // 2] / 1e9

    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=True)
    bufs = [torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
    for i in range(n):
        out.d2h[i] = timed(host, bufs[i], i)
        out.h2d[i] = timed(bufs[i], host, i)
    for i in range(n):
        for j in range(n):
            if i != j:
                out.d2d[(i, j)] = timed(bufs[j], bufs[i], i)
    del bufs, host
    torch.cuda.empty_cache()
    return out
