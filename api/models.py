"""Request and response bodies, per resource (``...Create`` in, ``...Public`` out)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)

Id = Annotated[str, Field(min_length=1, max_length=256)]
HostName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
JobId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
MAX_RANKS = 65536


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("must be a finite number")
    return x


Bandwidth = Annotated[StrictFloat | StrictInt, Field(gt=0), AfterValidator(_finite)]
Density = Annotated[StrictFloat | StrictInt, Field(gt=0, le=1), AfterValidator(_finite)]
Latency = Annotated[StrictFloat | StrictInt, Field(ge=0), AfterValidator(_finite)]
Size = Annotated[StrictInt, Field(gt=0, le=2**53)] | Annotated[str, Field(min_length=1,
                                                                           max_length=32)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- fabric --------------------------------------------------------------------------------

class FabricNode(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: Id
    kind: Annotated[str, Field(min_length=1, max_length=64)]
    host: HostName | None = None


class FabricLink(BaseModel):
    model_config = ConfigDict(extra="ignore")
    src: Id
    dst: Id
    bandwidth_GBps: Bandwidth
    latency_us: Latency = 0.0
    kind: Annotated[str, Field(min_length=1, max_length=64)] = "network"
    directed: StrictBool = False


class FabricCreate(BaseModel):
    """Switches, racks, uplinks, or a whole declared cluster (CONTRACTS section 1).

    Links may name nodes that agents report (``{host}/{local_id}``) without declaring them.
    """

    model_config = ConfigDict(extra="ignore")
    nodes: Annotated[list[FabricNode], Field(max_length=200_000)] = []
    links: Annotated[list[FabricLink], Field(max_length=1_000_000)] = []


class FabricPublic(BaseModel):
    nodes: list[FabricNode]
    links: list[FabricLink]
    digest: str
    updated_at: datetime | None


# ---- agents ----------------------------------------------------------------------------------

class ReportAccepted(BaseModel):
    host: str
    seq: int
    status: Literal["stored", "unchanged"]
    received_at: datetime


class HostStatus(BaseModel):
    seq: int
    last_report_at: datetime
    stale: bool
    measured_GBps: float | None = None
    endpoints: int
    probe_address: str | None = None


class AgentsPublic(BaseModel):
    stale_after_s: float
    hosts: dict[str, HostStatus]


# ---- topology ----------------------------------------------------------------------------------

class TopologyPublic(BaseModel):
    """The merged graph (CONTRACTS section 1) plus its version and per-host freshness."""

    model_config = ConfigDict(extra="allow")
    version: str
    nodes: list[dict[str, Any]]
    links: list[dict[str, Any]]
    hosts: dict[str, HostStatus]
    stale_hosts: list[str]
    unlinked_hosts: list[str]
    dropped_fabric_links: int


# ---- plans ---------------------------------------------------------------------------------

class PlanCreate(_In):
    """A plan request (CONTRACTS section 2); ``size_bytes`` may also be ``"256MiB"``."""

    ranks: Annotated[list[Id], Field(min_length=1, max_length=MAX_RANKS)]
    collective: Annotated[str, Field(min_length=1, max_length=64)] = "allreduce"
    size_bytes: Size
    algorithm: Annotated[str, Field(min_length=1, max_length=64)] = "auto"
    # block-sparse all-reduce (planner.sparse): expected non-zero block fraction, overall or
    # one per rank, whether the non-zero blocks are the same on every rank, the block size
    density: Density | Annotated[list[Density], Field(min_length=1,
                                                      max_length=MAX_RANKS)] | None = None
    density_overlap: StrictBool = False
    block_elems: Annotated[StrictInt, Field(ge=1, le=1 << 20)] = 256


class PlanPublic(BaseModel):
    """A plan document (CONTRACTS section 3) plus the topology version it was planned for."""

    model_config = ConfigDict(extra="allow")
    plan_id: str
    algorithm: str
    collective: str
    ranks: list[str]
    size_bytes: int
    predicted_time_s: float
    program: dict[str, Any]
    topology_version: str


# ---- jobs ------------------------------------------------------------------------------------

class RankRef(_In):
    """A rank named by host and GPU index (``{host}/gpu{gpu}``) or by its position among the
    host's endpoints in topology order (``local_rank``)."""

    host: HostName
    gpu: Annotated[StrictInt, Field(ge=0, le=1_000_000)] | None = None
    local_rank: Annotated[StrictInt, Field(ge=0, le=1_000_000)] | None = None

    @model_validator(mode="after")
    def _one(self) -> RankRef:
        if (self.gpu is None) == (self.local_rank is None):
            raise ValueError("give exactly one of 'gpu' and 'local_rank'")
        return self


class JobCreate(_In):
    """A job's ranks and either one buffer size or its gradient bucket sizes."""

    ranks: Annotated[list[Id | RankRef], Field(min_length=1, max_length=MAX_RANKS)]
    size_bytes: Size | None = None
    bucket_sizes: Annotated[list[Size], Field(min_length=1, max_length=4096)] | None = None
    collective: Annotated[str, Field(min_length=1, max_length=64)] = "allreduce"
    algorithm: Annotated[str, Field(min_length=1, max_length=64)] = "auto"

    @model_validator(mode="after")
    def _one_size(self) -> JobCreate:
        if (self.size_bytes is None) == (self.bucket_sizes is None):
            raise ValueError("give exactly one of 'size_bytes' and 'bucket_sizes'")
        return self


class JobPublic(BaseModel):
    """The stored job and its ranks resolved against the current graph (``ranks`` is null
    and ``problem`` says why when they no longer resolve)."""

    job_id: str
    spec: dict[str, Any]
    sizes: list[int]
    ranks: list[str] | None
    problem: str | None = None
    topology_version: str
    updated_at: datetime


class JobPlanPublic(BaseModel):
    """For ``size_bytes`` jobs: the plan document plus ``job_id`` and ``topology_version``.
    For ``bucket_sizes`` jobs: ``job_id``, ``topology_version``, ``bucket_sizes`` and
    ``plans`` (one document per bucket, in bucket order)."""

    model_config = ConfigDict(extra="allow")
    job_id: str
    topology_version: str


# ---- health ----------------------------------------------------------------------------------

class Health(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    status: Literal["ready"]
    database: str
