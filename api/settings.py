"""Service settings from ``SYNCPLAN_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from syncplan.core.options import PlanOptions

DEV_TOKENS = {"admin": "dev-admin-token", "agent": "dev-agent-token", "job": "dev-job-token"}
MIN_TOKEN_LENGTH = 32
MIN_DISTINCT_CHARS = 10


class Settings(BaseSettings):
    """Everything the service reads at start-up; invalid settings refuse to start."""

    model_config = SettingsConfigDict(env_prefix="SYNCPLAN_", extra="ignore")

    environment: Literal["development", "production"] = "production"
    database_url: str = "sqlite:///./syncplan.db"
    admin_token: SecretStr | None = None
    agent_token: SecretStr | None = None
    job_token: SecretStr | None = None
    stale_after_s: float = Field(default=60.0, gt=0, description="host report TTL")
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    plan_cache_size: int = Field(default=256, ge=1)
    plan_cache_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=1024 * 1024,
        description="memory for cached plans, and as much again for cached job-plan responses",
    )
    solver_threads: int = Field(default=2, ge=1, le=64)
    solves_per_client: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="distinct solves one token (POST /v1/plans) may have queued or running",
    )
    solve_queue: int = Field(
        default=64, ge=1, le=100_000, description="distinct solves queued or running in all"
    )
    solve_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=86_400,
        description="how long a request waits for a solve before 504 (the solve goes on "
        "and is cached)",
    )
    sync_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="how often to look for writes made by other replicas sharing the store",
    )
    db_pool_size: int = Field(default=8, ge=1)
    db_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="how long a request waits for the store (SQLite lock, PostgreSQL "
        "connection) before it is answered 503 with Retry-After",
    )
    min_step_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="least time of a program step in the cost model (the transport's "
        "per-step cost, overlapped with moving data; 1,000 for gloo on the "
        "emulated testbed); plans are keyed by it",
    )
    message_overhead_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="all-reduce plans: time a rank spends per message it sends or receives "
        "in a step, added to the step (LogP's o; docs/cost-model.md); plans are "
        "keyed by it",
    )
    message_cores: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="all-reduce plans: the ranks share this many CPU cores for their "
        "message overhead (an emulated cluster on one machine; 0: a CPU per "
        "rank); plans are keyed by it when the overhead is set",
    )
    exchange_overhead_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="all-reduce plans: added time per message end of a step's exchanged "
        "transfers (a pair sending both ways in the step), counted like the "
        "message overhead (docs/cost-model.md); plans are keyed by it",
    )
    switch_overhead: float = Field(
        default=0.0,
        ge=0,
        le=100,
        description="all-reduce plans: added fraction of the wire time of a step's slowest "
        "transfer whose sender sent only to other ranks in the previous step "
        "(docs/cost-model.md); plans are keyed by it",
    )

    agent_secret: SecretStr | None = Field(
        default=None, description="derives the per-host agent tokens (api/identity.py)"
    )
    allow_shared_agent_token: bool = Field(
        default=False,
        description="outside development, let SYNCPLAN_AGENT_TOKEN report "
        "as any host (test rigs only)",
    )

    @model_validator(mode="after")
    def _check_tokens(self) -> Settings:
        tokens = {"admin": self.admin_token, "agent": self.agent_token, "job": self.job_token}
        if self.environment == "development":
            for scope, token in tokens.items():
                if token is None:
                    setattr(self, f"{scope}_token", SecretStr(DEV_TOKENS[scope]))
            return self
        missing = [
            f"SYNCPLAN_{s.upper()}_TOKEN" for s, v in tokens.items() if v is None and s != "agent"
        ]
        if self.agent_token is None and self.agent_secret is None:
            missing.append("SYNCPLAN_AGENT_SECRET")
        if missing:
            raise ValueError(
                f"{', '.join(missing)} not set: the service refuses to start "
                "without tokens outside SYNCPLAN_ENVIRONMENT=development"
            )
        values = {
            f"SYNCPLAN_{s.upper()}_TOKEN": v.get_secret_value()
            for s, v in tokens.items()
            if v is not None
        }
        if self.agent_secret is not None:
            values["SYNCPLAN_AGENT_SECRET"] = self.agent_secret.get_secret_value()
        insecure = [
            n
            for n, v in values.items()
            if v in DEV_TOKENS.values() or v.lower().startswith("change-me")
        ]
        if insecure:
            raise ValueError(
                f"{insecure[0]} is a placeholder or development token; generate "
                "a random one outside development"
            )
        for name, value in values.items():
            problem = weakness(value)
            if problem:
                raise ValueError(
                    f"{name} {problem}; generate one with "
                    "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
                )
        if len(set(values.values())) != len(values):
            raise ValueError("the admin, agent and job tokens and the agent secret must all differ")
        if (
            self.agent_token is not None
            and self.agent_secret is None
            and not self.allow_shared_agent_token
        ):
            raise ValueError(
                "SYNCPLAN_AGENT_TOKEN alone lets any agent report as any host: "
                "set SYNCPLAN_AGENT_SECRET and give each agent its host token "
                "(syncplan token agent HOST), or set "
                "SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN=true on a test rig"
            )
        return self

    @property
    def shared_agent_token_reports(self) -> bool:
        """Whether the shared agent token may report (as any host)."""
        return self.environment == "development" or self.allow_shared_agent_token

    def plan_options(self) -> PlanOptions:
        """The cost-model terms every plan of this service is priced with."""
        return PlanOptions(
            min_step_s=self.min_step_us * 1e-6,
            message_overhead_s=self.message_overhead_us * 1e-6,
            message_cores=self.message_cores,
            exchange_overhead_s=self.exchange_overhead_us * 1e-6,
            switch_overhead=self.switch_overhead,
        )

    def token_scopes(self) -> dict[str, frozenset[str]]:
        """Token value to the scopes it grants; the admin token grants every scope. Outside
        development the shared agent token only reads unless explicitly allowed."""
        agent = {"agent", "read"} if self.shared_agent_token_reports else {"read"}
        grants = {
            "admin": frozenset({"admin", "agent", "job", "read"}),
            "agent": frozenset(agent),
            "job": frozenset({"job", "read"}),
        }
        out: dict[str, frozenset[str]] = {}
        for scope, granted in grants.items():
            secret: SecretStr | None = getattr(self, f"{scope}_token")
            if secret is not None:
                out[secret.get_secret_value()] = granted
        return out


def weakness(token: str) -> str | None:
    """Why ``token`` is too weak to guard a production service, or None."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"is shorter than {MIN_TOKEN_LENGTH} characters"
    if any(c.isspace() for c in token):
        return "contains whitespace"
    if len(set(token)) < MIN_DISTINCT_CHARS:
        return f"has fewer than {MIN_DISTINCT_CHARS} distinct characters"
    return None
