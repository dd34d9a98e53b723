"""Launch integration: fetch the job's plan from the service once, check it against the
world, and hand back a PlanComm (the plan, or torch's own all-reduce with one warning).

Typical use under torchrun::

    with distributed():                       # init_process_group with explicit timeout
        comm = init_plan_comm()               # SYNCPLAN_JOB_ID / SYNCPLAN_SERVER from env
        model.register_comm_hook(comm, plan_allreduce_hook)
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from syncplan.core.document import PlanDocument, PlanError
from syncplan.core.http import Backoff, HttpClient, HttpError
from syncplan.executor.comm import PlanComm
from syncplan.executor.engine import ExecutorConfig, PlanExecutor
from syncplan.executor.replan import PlanWatcher, Replanner

log = logging.getLogger("executor")


class FetchError(RuntimeError):
    """The job's plan could not be fetched; the message says why."""


@dataclass(frozen=True)
class LaunchConfig:
    """Where to fetch the plan and how patiently. ``from_env`` reads ``SYNCPLAN_*``."""

    job_id: str | None = None
    server: str | None = None
    token: str | None = None
    fetch_timeout_s: float = 5.0  # per HTTP attempt
    retries: int = 3  # attempts after the first one
    compact: bool = True  # ask for the compact program form (planner.compact) and expand it
    backoff_s: float = 0.5  # doubled after each failed attempt
    host: str | None = None  # this process's host name in the topology (default: hostname)
    endpoint: str | None = None  # this process's endpoint id ({rank}, {local_rank} filled in)
    plan_file: str | None = None  # a plan document file to run instead of asking the service
    topology: Any = None  # a planner Topology: when given, the plan is also verified on it
    refresh_every: int = 0  # all-reduces between checks for a newer plan; 0: never
    refresh_interval_s: float = 30.0  # how often rank 0 asks the service for a newer plan
    sliced: bool = False  # every rank fetches only its own slice (docs/executor.md, "Plan slices")
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def __post_init__(self) -> None:
        if not self.fetch_timeout_s > 0:
            raise ValueError(f"fetch_timeout_s must be > 0, got {self.fetch_timeout_s}")
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError("retries and backoff_s must be >= 0")
        if self.server is not None and not self.server.startswith(("http://", "https://")):
            raise ValueError(f"server must be an http(s) URL, got {self.server!r}")
        if self.plan_file is not None and self.refresh_every:
            raise ValueError("refresh_every needs the service; a plan file is never refreshed")
        if self.refresh_every < 0:
            raise ValueError(f"refresh_every must be >= 0, got {self.refresh_every}")
        if not self.refresh_interval_s > 0:
            raise ValueError(f"refresh_interval_s must be > 0, got {self.refresh_interval_s}")
        if self.sliced and (self.plan_file or self.refresh_every or self.topology is not None):
            raise ValueError(
                "sliced fetches each rank's slice from the service: it takes no plan file, "
                "refresh_every or topology (a slice cannot be verified alone)"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LaunchConfig:
        """Read SYNCPLAN_JOB_ID, SYNCPLAN_SERVER, SYNCPLAN_JOB_TOKEN, SYNCPLAN_HOST,
        SYNCPLAN_ENDPOINT, SYNCPLAN_PLAN_FILE, SYNCPLAN_REFRESH_EVERY,
        SYNCPLAN_REFRESH_INTERVAL_S and SYNCPLAN_PLAN_SLICES (1: sliced); keyword
        arguments that are not None win. A malformed number raises ValueError naming it."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "job_id": env.get("SYNCPLAN_JOB_ID") or None,
            "server": (env.get("SYNCPLAN_SERVER") or "").rstrip("/") or None,
            "token": env.get("SYNCPLAN_JOB_TOKEN") or None,
            "host": env.get("SYNCPLAN_HOST") or None,
            "endpoint": env.get("SYNCPLAN_ENDPOINT") or None,
            "plan_file": env.get("SYNCPLAN_PLAN_FILE") or None,
        }
        for name, key, kind in (
            ("SYNCPLAN_REFRESH_EVERY", "refresh_every", int),
            ("SYNCPLAN_REFRESH_INTERVAL_S", "refresh_interval_s", float),
        ):
            if env.get(name):
                try:
                    values[key] = kind(env[name])
                except ValueError:
                    raise ValueError(f"{name} must be a number, got {env[name]!r}") from None
        slices = env.get("SYNCPLAN_PLAN_SLICES", "").strip().lower()
        if slices not in ("", "0", "1", "true", "false", "yes", "no"):
            raise ValueError(f"SYNCPLAN_PLAN_SLICES must be 1 or 0, got {slices!r}")
        values["sliced"] = slices in ("1", "true", "yes")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def local_endpoint(config: LaunchConfig, device: torch.device | None = None) -> str:
    """This process's endpoint id: ``config.endpoint`` with ``{rank}`` and ``{local_rank}``
    filled in (``h{rank}/cpu0`` maps process r to the topology's host h<r>), else
    ``{host}/gpu{i}`` (i: the CUDA device, else LOCAL_RANK) for a CUDA device,
    ``{host}/cpu{LOCAL_RANK}`` otherwise."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if config.endpoint:
        rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
        try:
            return config.endpoint.format(rank=rank, local_rank=local_rank)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"SYNCPLAN_ENDPOINT {config.endpoint!r}: only {{rank}} and {{local_rank}} "
                f"may be filled in ({exc})"
            ) from None
    host = config.host or socket.gethostname()
    if device is not None and device.type == "cuda":
        index = device.index if device.index is not None else local_rank
        return f"{host}/gpu{index}"
    return f"{host}/cpu{local_rank}"


def fetch_plan(config: LaunchConfig) -> dict[str, Any]:
    """GET {server}/v1/jobs/{job_id}/plan with a timeout, retrying connection failures, 5xx
    and 429 answers with exponential backoff (core.http); return the plan document
    (docs/formats.md, Plan document). With ``config.compact`` it asks for ``?format=compact``
    (gzip-encoded, about 20x fewer bytes for a large forest plan) and expands the program; a
    service that ignores the parameter answers with the full document, used as it is."""
    doc, _ = fetch_plan_if_changed(config, None)
    assert doc is not None  # no ETag sent: never 304
    return doc


def fetch_plan_if_changed(
    config: LaunchConfig, etag: str | None, rank: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """As fetch_plan, sending ``etag`` in If-None-Match: (None, etag) when the service
    answers 304 (the plan it would send is the one already held), else (document, its
    ETag or None). With ``rank`` (an endpoint id) only that rank's slice (``?rank=``)."""
    from syncplan.core.compact import CompactError, expand_document

    headers = {"If-None-Match": etag} if etag else None
    params = {"format": "compact"} if config.compact else {}
    if rank is not None:
        params["rank"] = rank
    with job_client(config) as http:
        try:
            body, resp = http.request_json(
                "GET",
                "plan",
                ok=(200, 304) if etag else (200,),
                params=params or None,
                headers=headers,
            )
        except HttpError as exc:
            raise FetchError(str(exc)) from None
        url = http.url("plan")
    if resp.status_code == 304:
        return None, etag
    if isinstance(body, dict) and "program" not in body and isinstance(body.get("plan"), dict):
        body = {**body["plan"], "topology_version": body.get("topology_version")}
    if not isinstance(body, dict):
        raise FetchError(f"GET {url}: the answer is not a plan document")
    try:
        return expand_document(body), resp.headers.get("etag")
    except CompactError as exc:
        raise FetchError(f"GET {url}: {exc}") from None


def read_plan_file(path: str) -> dict[str, Any]:
    """A plan document (full or compact) from a file; FetchError naming what is wrong."""
    import json

    from syncplan.core.compact import COMPACT_KEY, CompactError, expand_document

    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
    except (OSError, ValueError) as exc:
        raise FetchError(f"plan file {path}: {exc}") from None
    if not isinstance(body, dict) or not ({"program", COMPACT_KEY} & set(body)):
        raise FetchError(f"plan file {path}: not a plan document (docs/formats.md)")
    try:
        return expand_document(body)
    except CompactError as exc:
        raise FetchError(f"plan file {path}: {exc}") from None


def job_client(config: LaunchConfig) -> HttpClient:
    """An HttpClient for ``{server}/v1/jobs/{job_id}/`` with the config's token, timeout,
    retries and backoff; raises FetchError when the job id or the service URL is missing."""
    if not config.job_id or not config.server:
        raise FetchError("no job id or service URL (set SYNCPLAN_JOB_ID and SYNCPLAN_SERVER)")
    backoff = Backoff(config.backoff_s, max_s=math.inf, jitter=False) if config.backoff_s else None
    return HttpClient(
        f"{config.server}/v1/jobs/{config.job_id}",
        token=config.token,
        timeout_s=config.fetch_timeout_s,
        retries=config.retries,
        backoff=backoff,
    )


def slice_id(result: dict[str, Any]) -> tuple[str, str] | None:
    """(of_plan, digest) of the slice a rank fetched; None when its fetch failed."""
    info = result.get("plan", {}).get("slice") if "plan" in result else None
    if not isinstance(info, dict):
        return None if "error" in result else ("?", "?")
    return str(info.get("of_plan")), str(info.get("digest"))


def slices_disagree(endpoints: list[str], ids: list[tuple[str, str] | None]) -> str | None:
    """Why the ranks' slices are not of one plan (names the first rank that differs from
    the first rank holding a slice), or None when they all agree."""
    held = [(r, i) for r, i in enumerate(ids) if i is not None]
    for r, i in held[1:]:
        if i != held[0][1]:
            (q, (pa, da)), (pb, db) = held[0], i
            return (
                f"plan slices disagree: rank {q} ({endpoints[q]}) holds a slice of plan {pa} "
                f"(digest {da[:12]}) but rank {r} ({endpoints[r]}) one of plan {pb} "
                f"(digest {db[:12]})"
            )
    return None


def _check(
    doc: dict[str, Any], endpoints: list[str], config: LaunchConfig, mine: str | None = None
) -> tuple[PlanDocument, list[int]]:
    """The program and rank map of ``doc`` for a world whose rank r is ``endpoints[r]``;
    raises PlanError when the plan does not fit. With ``mine``, ``doc`` is the slice of
    this process's endpoint ``mine``: only its structure is checked."""
    from syncplan.core.slice import check_slice

    program = PlanDocument.from_plan(doc) if mine is None else check_slice(doc, mine)
    if program.nranks != len(endpoints):
        raise PlanError(
            f"plan {program.plan_id} has {program.nranks} ranks but the job has "
            f"{len(endpoints)} processes"
        )
    where = {e: r for r, e in enumerate(endpoints)}
    if len(where) != len(endpoints):
        raise PlanError(f"two processes claim the same endpoint: {sorted(endpoints)}")
    missing = [e for e in program.ranks if e not in where]
    if missing:
        raise PlanError(
            f"plan {program.plan_id} names endpoints no process of this job runs "
            f"on: {missing[:4]} (this job: {endpoints[:4]}...)"
        )
    if mine is None:
        program.check_allreduce()
    if config.topology is not None:
        from syncplan.planner.verify import verify_plan

        rep = verify_plan(doc, config.topology)
        if not rep.ok:
            raise PlanError(f"plan {program.plan_id} fails verification: {rep.error}")
    return program, [where[e] for e in program.ranks]


def init_plan_comm(
    config: LaunchConfig | None = None, group: Any = None, *, device: torch.device | None = None
) -> PlanComm:
    """Collective over ``group``: rank 0 fetches the job's plan (or reads
    ``config.plan_file``) and broadcasts it, every rank checks it, and all agree on running
    it or on torch's own all-reduce. With ``config.sliced`` every rank fetches only the slice
    of its endpoint instead, and the plan runs only when every slice names the same plan
    and digest (docs/executor.md, "Plan slices"). With
    ``config.refresh_every`` the comm also follows the service's newer plans
    (executor.replan); close it (or use it in a ``with`` block) to stop the watcher."""
    if not dist.is_initialized():
        raise RuntimeError(
            "torch.distributed is not initialised: call init_process_group "
            "(or use executor.launch.distributed()) first"
        )
    config = config or LaunchConfig.from_env()
    me = dist.get_rank(group)
    box: list[Any] = [None]
    etag: str | None = None
    mine = local_endpoint(config, device)
    if config.sliced:
        try:
            box[0] = {"plan": fetch_plan_if_changed(config, None, rank=mine)[0]}
        except FetchError as exc:
            box[0] = {"error": f"cannot fetch this rank's plan slice: {exc}"}
    elif me == 0:
        try:
            if config.plan_file:
                box[0] = {"plan": read_plan_file(config.plan_file)}
            else:
                doc, etag = fetch_plan_if_changed(config, None)
                box[0] = {"plan": doc}
        except FetchError as exc:
            box[0] = {"error": f"cannot fetch the job's plan: {exc}"}
    if not config.sliced:
        src = 0 if group is None else dist.get_global_rank(group, 0)
        dist.broadcast_object_list(box, src=src, group=group)
    result: dict[str, Any] = box[0]
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(
        gathered, (mine, slice_id(result) if config.sliced else None), group=group
    )
    endpoints = [e for e, _ in gathered]
    if config.sliced and "error" not in result:
        mismatch = slices_disagree(endpoints, [i for _, i in gathered])
        if mismatch is not None:
            result = {"error": mismatch}

    def admit(doc: dict[str, Any]) -> PlanExecutor:
        program, rank_map = _check(doc, endpoints, config, mine if config.sliced else None)
        return PlanExecutor(
            program, group, rank_map=rank_map, config=replace(config.executor, verify=False)
        )

    executor: PlanExecutor | None = None
    reason = result.get("error")
    if reason is None:
        try:
            executor = admit(result["plan"])
        except PlanError as exc:
            reason = str(exc)
    # Every rank decided on the same inputs; agree anyway so no rank runs a plan alone.
    verdicts: list[Any] = [None] * len(endpoints)
    dist.all_gather_object(verdicts, reason, group=group)
    reason = next((v for v in verdicts if v is not None), None)
    replanner = None
    if config.refresh_every:
        watcher = None
        if me == 0:
            running = None if reason is not None else result["plan"].get("plan_id")
            watcher = PlanWatcher(
                lambda tag: fetch_plan_if_changed(config, tag),
                config.refresh_interval_s,
                running,
                etag if reason is None else None,
            )
        replanner = Replanner(group, config.refresh_every, admit, watcher)
    if reason is not None:
        return PlanComm(None, group, reason=reason, replanner=replanner)
    assert executor is not None
    if me == 0:
        doc = result["plan"]
        log.info(
            "syncplan executor: running plan %s (%s, topology version %s) on %d ranks",
            executor.program.plan_id,
            doc.get("algorithm", "?"),
            doc.get("topology_version", "?"),
            executor.world_size,
        )
    return PlanComm(executor, group, replanner=replanner)


@contextlib.contextmanager
def distributed(backend: str | None = None, timeout_s: float = 300.0) -> Iterator[None]:
    """Initialise the default process group from torchrun's environment with an explicit
    timeout (NCCL when CUDA is available, gloo otherwise) and destroy it on every exit."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    try:
        yield
    finally:
        dist.destroy_process_group()
