"""``Settings``: every knob, read from ``COVEY_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from covey import wire
from covey.budgets.budget import MAX_COUNT, MAX_SECONDS, Budget
from covey.budgets.prices import Price
from covey.config import sentinel
from covey.errors import CoveyError, describe
from covey.keys import DEFAULT_CATALOG_TTL_SECONDS, DEFAULT_JOB_TTL_SECONDS, RESERVATION_TTL_SECONDS

SDK_MAX_BACKOFF_SECONDS = 8  # the openai SDK's longest wait between two retries
REDELIVERY_MARGIN_SECONDS = 30  # beyond a task's longest run, before the broker redelivers it
MAX_CONCURRENCY = 1024  # worker slots: Celery starts them all at once, so a typo must not start millions
MAX_PROCESSES = 256
MAX_LEDGER_REPLICAS = 16  # WAIT for more replicas than a deployment runs would refuse every charge
Pool = Literal["threads", "prefork", "gevent", "solo"]
# Slots per worker process when COVEY_WORKER_CONCURRENCY is unset. An agent spends
# nearly all its time waiting on its model, so a process of threads or greenlets
# keeps many in flight (as a WSGI server runs workers x threads); prefork forks
# a process per slot, and solo has one.
DEFAULT_SLOTS: dict[str, int] = {"threads": 100, "gevent": 500, "prefork": 4, "solo": 1}
DEFAULT_SESSION_TTL_SECONDS = 30 * 24 * 3600
DEFAULT_SESSION_BYTES = 64 * 1024  # a session's turns are sent with every job on it: a bound on that prompt
REDIS_SCHEMES = ("redis", "rediss", "unix", sentinel.SCHEME)  # what redis-py and covey's Sentinel URLs take


class InvalidConfiguration(CoveyError, ValueError):
    """``COVEY_*`` settings that cannot be used: one line naming each bad one."""


class Settings(BaseSettings):
    # Every number has an upper bound (covey.budgets.budget) and floats are finite.
    model_config = SettingsConfigDict(env_prefix="COVEY_", extra="ignore", allow_inf_nan=False)

    redis_url: str = "redis://localhost:6379/0"
    broker_url: str | None = Field(default=None, description="defaults to redis_url")
    result_backend: str | None = Field(default=None, description="defaults to redis_url")
    redis_master: str | None = Field(
        default=None,
        description="COVEY_REDIS_MASTER: the master's name for sentinel:// URLs (kombu's and Celery's master_name)",
    )
    ledger_replicas: int | None = Field(
        default=None,
        ge=0,
        le=MAX_LEDGER_REPLICAS,
        description="COVEY_LEDGER_REPLICAS: replicas that must hold each ledger write before it counts "
        "(Redis WAIT; 0 = off; default: 1 under Sentinel, else 0)",
    )
    queue: str = "covey"
    sweep_queue: str = Field(
        default="covey-sweeps",
        description="COVEY_SWEEP_QUEUE: where `covey sweep` sends its jobs; a default worker reads it too",
    )
    secret: str | None = Field(
        default=None, repr=False, description="signs the messages between workers (see covey.worker.signing)"
    )
    tenant_key: str | None = Field(
        default=None,
        repr=False,
        description="COVEY_TENANT_KEY: signs the jobs a client sends for their tenant (`covey tenant create`)",
    )

    model: str = "sim"
    models: Path | None = Field(
        default=None, description="COVEY_MODELS: a TOML file mapping model names to endpoints (covey.models.catalog)"
    )
    tools: str | None = Field(
        default=None,
        description="COVEY_TOOLS: comma-separated `module` or `module:object` paths of tools a worker serves",
    )
    tool_timeouts: dict[str, Annotated[float, Field(gt=0, le=MAX_SECONDS)]] = Field(
        default_factory=dict,
        description='COVEY_TOOL_TIMEOUTS: JSON {"tool": seconds}, over the timeouts the tools were registered with',
    )
    mcp: Path | None = Field(
        default=None, description="COVEY_MCP: a TOML file of MCP servers whose tools agents may use (covey.tools.mcp)"
    )
    openai_base_url: str | None = None
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("COVEY_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    model_timeout: float = Field(default=60.0, gt=0, le=MAX_SECONDS, description="seconds for one model HTTP call")
    model_retries: int = Field(
        default=2,
        ge=0,
        le=MAX_COUNT,
        description="retries of a model call: the SDK's on 429/5xx; a timed-out call is asked again, reserved anew",
    )
    sim_latency_ms: int = Field(default=0, ge=0, le=MAX_SECONDS * 1000)
    sim_price: Price | None = Field(
        default=None, description='COVEY_SIM_PRICE: the sim\'s prices as JSON, {"input": 0.15, "output": 0.6}'
    )

    max_tokens: int | None = Field(default=200_000, ge=1, le=MAX_COUNT)
    max_cycles: int | None = Field(default=200, ge=1, le=MAX_COUNT)
    max_agents: int | None = Field(default=50, ge=0, le=MAX_COUNT)
    max_depth: int = Field(default=3, ge=0, le=MAX_COUNT)

    task_events: bool = Field(
        default=False,
        description="COVEY_TASK_EVENTS: workers send Celery task events from the start, clients send "
        "task-sent events, and each task's result keeps its name, arguments and worker. Off, a worker "
        "sends events only once Flower asks for them (it does when it starts)",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="COVEY_LOG_FORMAT: the worker's log lines, readable or one JSON object each"
    )
    worker_pool: Pool = "threads"
    worker_concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, description="slots per worker process (default: DEFAULT_SLOTS)"
    )
    worker_processes: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PROCESSES,
        description="worker processes `covey worker` starts (default: one per core, or one for prefork)",
    )
    slice_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_SECONDS,
        description="an agent task that has run this long checkpoints and goes on as a new task",
    )
    visibility_timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_SECONDS,
        description="seconds before the broker hands an unacknowledged task to another worker "
        "(default: a slice, the longest model call and a margin)",
    )
    job_ttl: int = Field(
        default=DEFAULT_JOB_TTL_SECONDS,
        ge=60,
        le=MAX_SECONDS,
        description="COVEY_JOB_TTL: seconds a job's records (tree, ledger, results) are kept after it ends",
    )
    session_ttl: int = Field(
        default=DEFAULT_SESSION_TTL_SECONDS,
        ge=60,
        le=MAX_SECONDS,
        description="COVEY_SESSION_TTL: seconds a session's conversation is kept after its last job",
    )
    cache_ttl: int = Field(
        default=DEFAULT_JOB_TTL_SECONDS,
        ge=60,
        le=MAX_SECONDS,
        description="COVEY_CACHE_TTL: seconds a model reply is kept for the jobs that ask for the cache",
    )
    session_bytes: int = Field(
        default=DEFAULT_SESSION_BYTES,
        ge=1024,
        le=64 * 1024 * 1024,
        description="COVEY_SESSION_BYTES: the most a session keeps; past it its oldest turns are dropped",
    )
    redis_outage_seconds: float = Field(
        default=120.0,
        gt=0,
        le=MAX_SECONDS,
        description="how long a worker waits out an unreachable Redis (or broker) before a step gives up "
        "and is handed back to the broker, and a client waiting on a job before it reports the outage",
    )
    redelivery_check_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_SECONDS,
        description="how often a worker looks for a dead worker's tasks to redeliver",
    )
    worker_heartbeat_seconds: float = Field(
        default=6.0,
        gt=0,
        le=MAX_SECONDS,
        description="a worker process that has not beaten for this long counts as dead, and another worker "
        "puts its unacknowledged tasks back on their queues at once (covey.worker.takeover)",
    )
    reconcile_seconds: float = Field(
        default=5.0,
        gt=0,
        le=MAX_SECONDS,
        description="how often one of the workers sends again the expected messages found in no queue "
        "(covey.worker.reconciler); a message is looked for only once it is this old",
    )
    catalog_ttl: float = Field(
        default=DEFAULT_CATALOG_TTL_SECONDS,
        gt=0,
        le=MAX_SECONDS,
        description="COVEY_CATALOG_TTL: seconds a worker's published catalog (its tools and models) outlives "
        "its last heartbeat; it is refreshed every third of this",
    )
    trace_content: bool = Field(
        default=False,
        description="COVEY_TRACE_CONTENT: put what calls sent and got, redacted, on their trace spans (opt-in)",
    )
    transcripts: bool = Field(
        default=True,
        description="COVEY_TRANSCRIPTS: record every agent's messages, model calls and tool calls (off: none)",
    )
    transcript_bytes: int = Field(
        default=256 * 1024,
        ge=1024,
        le=MAX_COUNT,
        description="COVEY_TRANSCRIPT_BYTES: the most one agent's transcript keeps; later entries are cut, "
        "and the transcript says from where and how much",
    )
    fault: str | None = Field(
        default=None, description="kill the worker at named points, for tests (covey.config.faults)"
    )

    @field_validator("redis_url", "broker_url", "result_backend")
    @classmethod
    def _has_a_known_scheme(cls, url: str | None, info: ValidationInfo) -> str | None:
        """``localhost:6379`` would reach redis-py as a URL of scheme ``localhost``, and
        ``redsi://`` kombu as a transport it has not: a traceback deep in a client."""
        if url is None:
            return url
        known = _schemes(info.field_name)
        if "://" not in url:
            raise ValueError(f"{url!r} has no scheme: write it as redis://{url}/0 (or {', '.join(REDIS_SCHEMES[1:])})")
        scheme = url.partition("://")[0]
        if scheme.partition("+")[0] not in known:  # db+postgresql://, redis+socket://: the part before the +
            near = wire.nearest(scheme, known)
            hint = f"; did you mean {near}://?" if near else ""
            shown = ", ".join(REDIS_SCHEMES) + ("" if info.field_name == "redis_url" else ", ...")
            raise ValueError(f"unknown scheme {scheme}://, not one of {shown}{hint}")
        if sentinel.is_sentinel(url):
            sentinel.SentinelURL.parse(url)
        return url

    @model_validator(mode="after")
    def _sentinels_name_their_master(self) -> Settings:
        if not self.redis_master and any(sentinel.is_sentinel(u) for u in (self.redis_url, self.broker, self.backend)):
            raise ValueError("a sentinel:// URL needs COVEY_REDIS_MASTER, the name its sentinels monitor the master by")
        return self

    @property
    def worker_slots(self) -> int:
        """Concurrent tasks in one worker process."""
        return self.worker_concurrency or DEFAULT_SLOTS[self.worker_pool]

    @property
    def longest_call_seconds(self) -> float:
        """One model call with all the SDK's retries and their backoff."""
        return self.model_timeout * (self.model_retries + 1) + SDK_MAX_BACKOFF_SECONDS * self.model_retries

    @property
    def redelivery_seconds(self) -> float:
        """The broker's visibility timeout: longer than any task runs (a slice, plus
        the model call that may have started just before it ended)."""
        return self.visibility_timeout or self.slice_seconds + self.longest_call_seconds + REDELIVERY_MARGIN_SECONDS

    @model_validator(mode="after")
    def _tasks_end_before_redelivery(self) -> Settings:
        longest = self.slice_seconds + self.longest_call_seconds
        if self.visibility_timeout is not None and self.visibility_timeout <= longest:
            raise ValueError(
                f"COVEY_VISIBILITY_TIMEOUT ({self.visibility_timeout:g}s) must exceed COVEY_SLICE_SECONDS plus the "
                f"longest model call ({longest:.0f}s), or a healthy task is handed to a second worker"
            )
        return self

    @model_validator(mode="after")
    def _calls_fit_their_reservation(self) -> Settings:
        worst = self.longest_call_seconds
        if worst >= RESERVATION_TTL_SECONDS:
            raise ValueError(
                f"COVEY_MODEL_TIMEOUT x (COVEY_MODEL_RETRIES + 1) plus backoff ({worst:.0f}s) must stay under "
                f"{RESERVATION_TTL_SECONDS}s, or a slow call's reservation is released while in use"
            )
        return self

    @property
    def ledger_wait_replicas(self) -> int:
        """Replicas each ledger write waits for: a Sentinel deployment has at least one,
        and a failover must not lose a charge the master acknowledged."""
        if self.ledger_replicas is not None:
            return self.ledger_replicas
        return 1 if sentinel.is_sentinel(self.redis_url) else 0

    @property
    def broker(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def redis_broker(self) -> bool:
        """Whether the broker is a Redis, whose queues and unacknowledged deliveries
        covey can read (to find a job's message, or one that was lost)."""
        return self.broker.startswith(("redis://", "rediss://", "unix://", "sentinel://"))

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
    """The settings of this process's environment; ``InvalidConfiguration`` naming each bad one."""
    try:
        return Settings()
    except ValidationError as e:
        raise InvalidConfiguration(f"invalid configuration: {describe(e)}") from None


def _schemes(field: str | None) -> list[str]:
    """The URL schemes ``field`` takes: Redis's, or every transport kombu has (a
    broker) or backend Celery has (a result store), asked only when one is set."""
    if field == "broker_url":
        from kombu.transport import TRANSPORT_ALIASES

        return [*REDIS_SCHEMES, *TRANSPORT_ALIASES]
    if field == "result_backend":
        from celery.app.backends import BACKEND_ALIASES

        return [*REDIS_SCHEMES, *BACKEND_ALIASES]
    return list(REDIS_SCHEMES)
