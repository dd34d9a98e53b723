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
from syncplan.api.limits import (
    ALGORITHM_NAMES,
    COLLECTIVE_NAMES,
    MAX_BUCKETS,
    MAX_DISTINCT_SIZES,
    MAX_FABRIC_LINKS,
    MAX_FABRIC_NODES,
    MAX_RANKS,
    MAX_SIZE_BYTES,
    PLAN_ALGORITHM_NAMES,
    PLAN_COLLECTIVE_NAMES,
    check_size_text,
)
from syncplan.core.errors import TopologyError
from syncplan.core.report import MAX_BANDWIDTH_GBPS, MAX_LATENCY_US, MIN_BANDWIDTH_GBPS
from syncplan.planner.sizes import parse_size
from syncplan.planner.topology import check_keys

Id = Annotated[str, Field(min_length=1, max_length=256)]
HostName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
JobId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("must be a finite number")
    return x


Bandwidth = Annotated[
    StrictFloat | StrictInt,
    Field(ge=MIN_BANDWIDTH_GBPS, le=MAX_BANDWIDTH_GBPS),
    AfterValidator(_finite),
]
Latency = Annotated[
    StrictFloat | StrictInt, Field(ge=0, le=MAX_LATENCY_US), AfterValidator(_finite)
]
Size = (
    Annotated[StrictInt, Field(gt=0, le=MAX_SIZE_BYTES)]
    | Annotated[
        str,
        Field(min_length=1, max_length=32, pattern=r"^\s*\d+(\.\d+)?\s*[A-Za-z]*\s*$"),
        AfterValidator(check_size_text),
    ]
)
Algorithm = Literal[ALGORITHM_NAMES]  # type: ignore[valid-type]
Collective = Literal[COLLECTIVE_NAMES]  # type: ignore[valid-type]
PlanAlgorithm = Literal[PLAN_ALGORITHM_NAMES]  # type: ignore[valid-type]
PlanCollective = Literal[PLAN_COLLECTIVE_NAMES]  # type: ignore[valid-type]
Density = Annotated[StrictFloat | StrictInt, Field(gt=0, le=1), AfterValidator(_finite)]


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
    """Switches, racks, uplinks, or a whole declared cluster (docs/formats.md, Topology file).

    Links may name nodes that agents report (``{host}/{local_id}``) without declaring them.
    """

    model_config = ConfigDict(extra="ignore")
    nodes: Annotated[list[FabricNode], Field(max_length=MAX_FABRIC_NODES)] = []
    links: Annotated[list[FabricLink], Field(max_length=MAX_FABRIC_LINKS)] = []

    @model_validator(mode="before")
    @classmethod
    def _strict(cls, data: Any) -> Any:
        """Kinds and keys as strict as a topology file's (planner.topology.check_keys)."""
        if isinstance(data, dict):
            try:  # what GET /v1/fabric adds may come back unchanged
                check_keys({k: v for k, v in data.items() if k not in ("digest", "updated_at")})
            except TopologyError as exc:
                raise ValueError(str(exc)) from None
        return data


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


class AgentTokenPublic(BaseModel):
    host: str
    token: str


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
    """The merged graph (docs/formats.md, Topology file) plus its version and per-host freshness."""

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
    """A plan request (docs/formats.md, Plan request); ``size_bytes`` may also be ``"256MiB"``."""

    ranks: Annotated[list[Id], Field(min_length=1, max_length=MAX_RANKS)]
    collective: PlanCollective = "allreduce"
    size_bytes: Size
    algorithm: PlanAlgorithm = "auto"
    # broadcast / reduce: the root, one of ``ranks`` or its index (default rank 0)
    root: Id | Annotated[StrictInt, Field(ge=0, lt=MAX_RANKS)] | None = None
    # block-sparse all-reduce (planner.sparse): expected non-zero block fraction, overall or
    # one per rank, whether the non-zero blocks are the same on every rank, the block size
    density: (
        Density | Annotated[list[Density], Field(min_length=1, max_length=MAX_RANKS)] | None
    ) = None
    density_overlap: StrictBool = False
    block_elems: Annotated[StrictInt, Field(ge=1, le=1 << 20)] = 256
    # reduce-scatter / all-gather: equal shards, or any (the planner sizes them, by rate)
    shards: Literal["equal", "any"] = "equal"
    # all-reduce: how hard forest searches; a thorough solve may outlast the solve timeout
    # (504 with Retry-After: the solve goes on and the same request later gets its plan)
    effort: Literal["fast", "thorough"] = "fast"

    @model_validator(mode="after")
    def _root(self) -> PlanCreate:
        if self.root is not None and self.collective not in ("broadcast", "reduce"):
            raise ValueError("root applies to broadcast and reduce only")
        if isinstance(self.root, str) and self.root not in self.ranks:
            raise ValueError(f"root {self.root!r} is not one of the ranks")
        if isinstance(self.root, int) and self.root >= len(self.ranks):
            raise ValueError(f"root {self.root} is not a rank index in [0, {len(self.ranks)})")
        return self


class PlanPublic(BaseModel):
    """A plan document (docs/formats.md) plus the topology version it was planned for."""

    model_config = ConfigDict(extra="allow")
    plan_id: str
    algorithm: str
    collective: str
    ranks: list[str]
    size_bytes: int
    predicted_time_s: float
    program: dict[str, Any] | None = Field(
        default=None, description="docs/formats.md, Plan document (the default form)"
    )
    program_compact: dict[str, Any] | None = Field(
        default=None, description="instead of program with ?format=compact (core/compact.py)"
    )
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


Seconds = Annotated[StrictFloat | StrictInt, Field(ge=0, le=3600), AfterValidator(_finite)]
MAX_GRADIENTS = 10_000


class Gradient(_In):
    """One gradient tensor of a job, in backward order, with the optional compute times of
    the layer that produces it (forward and backward, seconds)."""

    numel: Annotated[StrictInt, Field(gt=0, le=2**40)]
    dtype: Literal["float32", "float16", "bfloat16", "float64"] = "float32"
    forward_s: Seconds | None = None
    backward_s: Seconds | None = None


class JobProfile(_In):
    """Measured compute times per gradient (backward order), as the executor reports them."""

    forward_s: Annotated[list[Seconds], Field(min_length=1, max_length=MAX_GRADIENTS)]
    backward_s: Annotated[list[Seconds], Field(min_length=1, max_length=MAX_GRADIENTS)]
    iterations: Annotated[StrictInt, Field(ge=1, le=10**9)] = 1

    @model_validator(mode="after")
    def _same_length(self) -> JobProfile:
        if len(self.forward_s) != len(self.backward_s):
            raise ValueError("forward_s and backward_s must have one entry per gradient")
        return self


class JobCreate(_In):
    """A job's ranks and either one buffer size or its gradient bucket sizes; optionally its
    gradients (for ``/schedule``), which alone also size it (their total)."""

    ranks: Annotated[list[Id | RankRef], Field(min_length=1, max_length=MAX_RANKS)]
    size_bytes: Size | None = None
    bucket_sizes: Annotated[list[Size], Field(min_length=1, max_length=MAX_BUCKETS)] | None = None
    collective: Collective = "allreduce"
    algorithm: Algorithm = "auto"
    # all-reduce: how hard forest searches (a long job's plans may take minutes once)
    effort: Literal["fast", "thorough"] = "fast"
    gradients: Annotated[list[Gradient], Field(min_length=1, max_length=MAX_GRADIENTS)] | None = (
        None
    )
    profile: JobProfile | None = None  # measured, set through PUT .../profile

    @model_validator(mode="after")
    def _one_size(self) -> JobCreate:
        if self.effort != "fast" and self.collective != "allreduce":
            raise ValueError("effort applies to all-reduce plans only")
        if self.size_bytes is not None and self.bucket_sizes is not None:
            raise ValueError("give exactly one of 'size_bytes' and 'bucket_sizes'")
        if self.size_bytes is None and self.bucket_sizes is None and self.gradients is None:
            raise ValueError("give exactly one of 'size_bytes' and 'bucket_sizes' (or 'gradients')")
        if self.profile is not None and (
            self.gradients is None or len(self.profile.forward_s) != len(self.gradients)
        ):
            raise ValueError("a profile needs gradients, one entry per gradient")
        if self.bucket_sizes is not None:
            distinct = {parse_size(s) for s in self.bucket_sizes}
            if len(distinct) > MAX_DISTINCT_SIZES:
                raise ValueError(
                    f"bucket_sizes: {len(distinct)} distinct sizes, more than the "
                    f"limit of {MAX_DISTINCT_SIZES} (each one is a plan to solve)"
                )
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


class ProfileAccepted(BaseModel):
    job_id: str
    changed: bool  # false: the same profile was already stored (no re-plan)


class JobSchedulePublic(BaseModel):
    """The job's schedule (docs/schedule.md): per mode its buckets, their plans and the
    predicted iteration time with and without overlap."""

    model_config = ConfigDict(extra="allow")
    job_id: str
    topology_version: str
    recommended: str
    modes: dict[str, Any]


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
