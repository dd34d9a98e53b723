"""Service settings from ``SYNCPLAN_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_TOKENS = {"admin": "dev-admin-token", "agent": "dev-agent-token", "job": "dev-job-token"}
MIN_TOKEN_LENGTH = 8


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
    plan_cache_bytes: int = Field(default=512 * 1024 * 1024, ge=1024 * 1024,
                                  description="memory for cached plans, and as much again "
                                              "for cached job-plan responses")
    solver_threads: int = Field(default=2, ge=1, le=64)
    sync_interval_s: float = Field(
        default=1.0, ge=0,
        description="how often to look for writes made by other replicas sharing the store")
    db_pool_size: int = Field(default=8, ge=1)
    db_timeout_s: float = Field(
        default=5.0, gt=0, le=300,
        description="how long a request waits for the store (SQLite lock, PostgreSQL "
                    "connection) before it is answered 503 with Retry-After")
    min_step_us: float = Field(
        default=0.0, ge=0, le=1e6,
        description="least time of a program step in the cost model (the transport's "
                    "per-step cost, overlapped with moving data; 1,000 for gloo on the "
                    "emulated testbed); plans are keyed by it")

    @model_validator(mode="after")
    def _check_tokens(self) -> Settings:
        tokens = {"admin": self.admin_token, "agent": self.agent_token, "job": self.job_token}
        if self.environment == "development":
            for scope, value in tokens.items():
                if value is None:
                    setattr(self, f"{scope}_token", SecretStr(DEV_TOKENS[scope]))
            return self
        missing = [f"SYNCPLAN_{s.upper()}_TOKEN" for s, v in tokens.items() if v is None]
        if missing:
            raise ValueError(f"{', '.join(missing)} not set: the service refuses to start "
                             "without tokens outside SYNCPLAN_ENVIRONMENT=development")
        values = {s: v.get_secret_value() for s, v in tokens.items() if v is not None}
        short = [s for s, v in values.items() if len(v) < MIN_TOKEN_LENGTH]
        if short:
            raise ValueError(f"SYNCPLAN_{short[0].upper()}_TOKEN is shorter than "
                             f"{MIN_TOKEN_LENGTH} characters")
        insecure = [s for s, v in values.items()
                    if v in DEV_TOKENS.values() or v.lower().startswith("change-me")]
        if insecure:
            raise ValueError(f"SYNCPLAN_{insecure[0].upper()}_TOKEN is a placeholder or "
                             "development token; generate a random one outside development")
        if len(set(values.values())) != len(values):
            raise ValueError("the admin, agent and job tokens must all differ")
        return self

    def token_scopes(self) -> dict[str, frozenset[str]]:
        """Token value to the scopes it grants; the admin token grants every scope."""
        grants = {"admin": frozenset({"admin", "agent", "job", "read"}),
                  "agent": frozenset({"agent", "read"}),
                  "job": frozenset({"job", "read"})}
        out: dict[str, frozenset[str]] = {}
        for scope, granted in grants.items():
            secret: SecretStr | None = getattr(self, f"{scope}_token")
            if secret is not None:
                out[secret.get_secret_value()] = granted
        return out
