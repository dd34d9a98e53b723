"""Asynchronous communication: a communication thread (gloo) or a side CUDA stream (NCCL),
so that backward keeps computing while buckets synchronize.

``CommThread.submit(fn)`` runs ``fn`` on one worker thread, in submission order (every rank
submits the same sequence, so their messages pair up), and returns a pending
``torch.futures.Future``. CUDA work is issued on a side stream that first waits for the
producer stream's current work; the future completes once the side stream is done.

``async_plan_allreduce_hook`` is the DDP hook on top of it: it returns at once with a
pending future, where ``syncplan.executor.ddp.plan_allreduce_hook`` runs the plan inside the hook.

No ``from __future__ import annotations`` here: DDP inspects the hook's real annotations.
"""

import queue
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.comm import PlanComm

_STOP = object()


class CommThread:
    """One daemon thread running submitted communication in order."""

    def __init__(self, name: str = "syncplan-comm") -> None:
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._streams: dict[torch.device, Any] = {}
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is _STOP:
                return
            fn, fut, stream, ready = item
            try:
                if stream is not None:
                    with torch.cuda.stream(stream):
                        stream.wait_event(ready)
                        result = fn()
                    stream.synchronize()
                else:
                    result = fn()
            except Exception as exc:  # handed to the waiter
                fut.set_exception(exc)
            else:
                fut.set_result(result)

    def submit(
        self, fn: Callable[[], Any], device: torch.device | None = None
    ) -> torch.futures.Future[Any]:
        """Run ``fn()`` after everything submitted before; CUDA ``device``: on a side stream
        that waits for the current stream's work first."""
        fut: torch.futures.Future[Any] = torch.futures.Future()
        stream = ready = None
        if device is not None and device.type == "cuda":
            stream = self._streams.get(device)
            if stream is None:
                stream = self._streams[device] = torch.cuda.Stream(device)
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(device))
        self._q.put((fn, fut, stream, ready))
        return fut

    def close(self) -> None:
        """Stop after the submitted work; idempotent."""
        if self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()


class AsyncPlanComm:
    """A PlanComm plus the thread its all-reduces run on (the DDP hook's state)."""

    def __init__(self, comm: PlanComm, thread: CommThread | None = None) -> None:
        self.comm = comm
        self.thread = thread or CommThread()
        self.world_size = comm.world_size

    def all_reduce(
        self, tensor: torch.Tensor, *, average: bool = False
    ) -> torch.futures.Future[torch.Tensor]:
        """Sum (or average) ``tensor`` in place, asynchronously; the future yields it."""
        return self.thread.submit(
            lambda: self.comm.all_reduce(tensor, average=average), tensor.device
        )

    def close(self) -> None:
        self.thread.close()
        self.comm.close()


def async_plan_allreduce_hook(
    state: AsyncPlanComm, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """``model.register_comm_hook(AsyncPlanComm(comm), async_plan_allreduce_hook)``: average
    each bucket with the plan on the communication thread; backward continues meanwhile."""
    buf = bucket.buffer()
    buf.div_(state.world_size)
    return state.all_reduce(buf)
