"""Run a function in N local processes joined by a gloo process group over loopback."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write

log = logging.getLogger("syncplan.executor")


@dataclass(frozen=True)
class LocalRunConfig:
    """How to start the processes."""

    nprocs: int
    timeout_s: float = 120.0  # whole run, start-up included
    pg_timeout_s: float = 60.0  # process-group timeout inside the workers
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the workers

    def __post_init__(self) -> None:
        if not 1 <= self.nprocs <= 64:
            raise ValueError(f"nprocs must be in 1..64, got {self.nprocs}")
        if not self.timeout_s > 0 or not self.pg_timeout_s > 0:
            raise ValueError("timeout_s and pg_timeout_s must be > 0")


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    local_rank: int,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    nprocs: int,
    port: int,
    pg_timeout_s: float,
    env: dict[str, str],
    outdir: str,
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(env)
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(nprocs),
            "LOCAL_WORLD_SIZE": str(nprocs),
        }
    )
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)  # as torchrun does: one intra-op thread per process
    dist.init_process_group(
        "gloo", rank=local_rank, world_size=nprocs, timeout=timedelta(seconds=pg_timeout_s)
    )
    try:
        result = fn(*args)
        atomic_write(Path(outdir) / f"{local_rank}.pkl", pickle.dumps(result))
    finally:
        dist.destroy_process_group()


def run_local(fn: Callable[..., Any], args: tuple[Any, ...], config: LocalRunConfig) -> list[Any]:
    """Call ``fn(*args)`` in ``config.nprocs`` spawned processes (rank i = process i) and
    return their results by rank. ``fn`` must be importable by module path. Raises
    RuntimeError if a process fails or the run exceeds its timeout; no process outlives it."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="syncplan-exec-") as outdir:
        ctx = mp.start_processes(
            _worker,
            args=(
                fn,
                args,
                config.nprocs,
                free_port(),
                config.pg_timeout_s,
                dict(config.env),
                outdir,
            ),
            nprocs=config.nprocs,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + config.timeout_s
        try:
            while not ctx.join(timeout=0.2):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"local run of {config.nprocs} processes exceeded {config.timeout_s:.0f} s"
                    )
        except mp.ProcessRaisedException as exc:
            raise RuntimeError(f"a worker process failed:\n{exc}") from None
        except mp.ProcessExitedException as exc:
            done = all((Path(outdir) / f"{r}.pkl").exists() for r in range(config.nprocs))
            if not done:
                raise RuntimeError(f"a worker process exited abnormally: {exc}") from None
            # every rank returned its result; the crash came while tearing the group down
            log.warning("a worker process exited abnormally after every rank finished: %s", exc)
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            for p in ctx.processes:
                p.join(5)
                if p.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        p.kill()
                    p.join(5)
        return [
            pickle.loads((Path(outdir) / f"{r}.pkl").read_bytes()) for r in range(config.nprocs)
        ]
