"""``Settings``: every knob, read from ``COVEY_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from covey.budgets.budget import Budget
from covey.keys import RESERVATION_TTL_SECONDS

SDK_MAX_BACKOFF_SECONDS = 8  # the openai SDK's longest wait between two retries


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COVEY_", extra="ignore")

    redis_url: str = "redis://localhost:6379/0"
    broker_url: str | None = Field(default=None, description="defaults to redis_url")
    result_backend: str | None = Field(default=None, description="defaults to redis_url")
    queue: str = "covey"

    model: str = "sim"
    models: Path | None = Field(
        default=None, description="COVEY_MODELS: a TOML file mapping model names to endpoints (covey.models.catalog)"
    )
    openai_base_url: str | None = None
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("COVEY_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    model_timeout: float = Field(default=60.0, gt=0, description="seconds for one model HTTP call")
    model_retries: int = Field(default=2, ge=0, description="SDK retries on 429/5xx/timeouts")
    sim_latency_ms: int = Field(default=0, ge=0)

    max_tokens: int | None = Field(default=200_000, ge=1)
    max_cycles: int | None = Field(default=200, ge=1)
    max_agents: int | None = Field(default=50, ge=0)
    max_depth: int = Field(default=3, ge=0)

    worker_pool: Literal["threads", "prefork", "gevent", "solo"] = "threads"
    worker_concurrency: int = Field(default=4, ge=1)
    max_agent_seconds: float = Field(
        default=3600.0, gt=0,
        description="longest one agent task may run before it ends timed_out; the broker redelivers after twice this",
    )
    redelivery_check_seconds: float = Field(
        default=60.0, gt=0, description="how often a worker looks for a dead worker's tasks to redeliver"
    )

    @model_validator(mode="after")
    def _calls_fit_their_reservation(self) -> Settings:
        worst = self.model_timeout * (self.model_retries + 1) + SDK_MAX_BACKOFF_SECONDS * self.model_retries
        if worst >= RESERVATION_TTL_SECONDS:
            raise ValueError(
                f"COVEY_MODEL_TIMEOUT x (COVEY_MODEL_RETRIES + 1) plus backoff ({worst:.0f}s) must stay under "
                f"{RESERVATION_TTL_SECONDS}s, or a slow call's reservation is released while in use"
            )
        return self

    @property
    def broker(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def backend(self) -> str:
        return self.result_backend or self.redis_url

    def default_budget(self) -> Budget:
        return Budget(
            max_tokens=self.max_tokens,
            max_cycles=self.max_cycles,
            max_agents=self.max_agents,
            max_depth=self.max_depth,
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
