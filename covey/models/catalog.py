"""Which endpoint serves each model name: the models file (``COVEY_MODELS``).

One worker may serve several providers at once, so a sweep can compare them: the
models file maps a covey model name to a base URL, the NAME of the environment
variable holding its key (never the key), the provider's own model id and request
parameters::

    [models.fast]
    base_url = "http://127.0.0.1:8766/v1"
    api_key_env = "FAST_KEY"
    model = "sim"                      # the provider's id; the covey name by default
    params = { temperature = 0.2 }     # temperature, top_p, seed
    tokenizer = "fast/tokenizer.json"  # or "tiktoken:o200k_base", or "server" (llama.cpp's, vLLM's /tokenize)
    price = { input = 0.15, cached_input = 0.075, output = 0.60 }  # USD per million tokens
    structured = "json_schema"         # or "json_object", "json_object_schema", "tools": how JSON is asked for
    reply_cap = ["max_tokens", "max_completion_tokens"]  # the names the reply cap is sent under
    stream = true                      # read replies as streams, cut at the tokens reserved
    tool_results = "tool"              # or "user": for a server whose template drops tool messages
    body = { repeat_penalty = 1.0 }    # the server's own request fields, sent as they are
    fallbacks = ["backup", "sim"]      # asked in turn when its retries end in a 429, a 5xx or no connection

``sim`` is built in and always runs in-process; it counts its prompts exactly (its
tokenizer is its own billing) and takes its prices from ``COVEY_SIM_PRICE``. A
tokenizer path is relative to the models file's folder; a model without one is
reserved by its bytes (``covey.models.tokens``), and one without a price cannot
run under a cost cap. Any other name not in the file
goes to the default endpoint (``COVEY_OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), if
one is configured. Keys are read once, when the catalog is built: a worker serves
with the environment it was started with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from covey.budgets.budget import MAX_COUNT
from covey.budgets.prices import Price
from covey.config.files import read_toml
from covey.config.settings import Settings
from covey.errors import CoveyError
from covey.models.dialect import REPLY_CAPS, Dialect, Dialects, ReplyCap
from covey.models.server_tokenizer import SERVER_TOKENIZER, ServerTokenizer
from covey.models.structured import StructuredMode
from covey.models.tokenizers import SimTokenizer, Tokenizer, TokenizerError
from covey.models.tokenizers import load as load_tokenizer

SIM_MODEL = "sim"
MAX_FALLBACKS = 3  # each may take a model timeout: the chain stays well inside a reservation's life
OPENAI_BASE_URL = "https://api.openai.com/v1"  # the SDK's own default endpoint
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ToolResults = Literal["tool", "user"]
# What covey's own request sets: a models file's ``body`` may not override it.
COVEY_FIELDS = frozenset(
    {"model", "messages", "tools", "tool_choice", "stream", "stream_options", "response_format", "temperature",
     "top_p", "seed", *REPLY_CAPS}
)  # fmt: skip


class ModelsFileError(CoveyError, ValueError):
    """A models file that cannot be used; one line naming the file, the model and the field."""


class UnservableModel(CoveyError, ValueError):
    """A model name this worker has no usable endpoint for; says what to configure."""


class UnknownModel(UnservableModel):
    """A name no endpoint serves at all (not a key left unset): a typo, most often.
    ``known`` lists the names that are served, for a caller to suggest one."""

    def __init__(self, message: str, name: str, known: list[str]) -> None:
        super().__init__(message)
        self.name, self.known = name, known


class ModelParams(BaseModel):
    """Request parameters passed to the provider as they are. A job's override the
    models file's; the sim ignores them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    seed: int | None = Field(default=None, strict=True, ge=-MAX_COUNT, le=MAX_COUNT)

    def request(self) -> dict[str, Any]:
        """The parameters that were given, as ``chat.completions.create`` keywords."""
        return self.model_dump(exclude_none=True)


class ModelEntry(BaseModel):
    """One ``[models.NAME]`` table."""

    model_config = ConfigDict(extra="forbid")

    base_url: HttpUrl
    api_key_env: str
    model: str | None = Field(default=None, min_length=1)
    params: ModelParams = Field(default_factory=ModelParams)
    tokenizer: str | None = Field(default=None, min_length=1)
    price: Price | None = None
    structured: StructuredMode = "json_schema"
    reply_cap: list[ReplyCap] = Field(default_factory=lambda: list(REPLY_CAPS), min_length=1)
    stream: bool = True
    tool_results: ToolResults = "tool"
    body: dict[str, Any] = Field(default_factory=dict)
    fallbacks: list[str] = Field(default_factory=list, max_length=MAX_FALLBACKS)

    @field_validator("body")
    @classmethod
    def _adds_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(value) & COVEY_FIELDS)
        if taken:
            raise PydanticCustomError(
                "covey_field",
                "{names}: covey sets these itself (params takes temperature, top_p and seed)",
                {"names": ", ".join(taken)},
            )
        return value

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, value: str) -> str:
        # The value is never echoed: a key pasted here by mistake must not reach a log.
        if not _ENV_NAME.fullmatch(value):
            raise PydanticCustomError(
                "env_name", "must be the NAME of the environment variable holding the key, never the key itself"
            )
        return value


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, ModelEntry] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fallbacks_are_models(self) -> ModelsFile:
        """A fallback is another model of the file (or ``sim``), named once; its own
        fallbacks are not followed."""
        for name, entry in self.models.items():
            for other in entry.fallbacks:
                if other == name or (other != SIM_MODEL and other not in self.models):
                    raise ValueError(f"model {name!r}: fallbacks: {other!r} is no other model of this file (or 'sim')")
            if len(set(entry.fallbacks)) < len(entry.fallbacks):
                raise ValueError(f"model {name!r}: fallbacks: a model named twice")
        return self


@dataclass(frozen=True)
class Endpoint:
    """Where one model name's calls go. Endpoints equal in ``base_url`` and
    ``key_env`` share one SDK client."""

    base_url: str | None  # None: the in-process sim
    key_env: str | None
    model: str  # the provider's model id
    api_key: str | None = field(default=None, repr=False)  # None: not set (the default endpoint may go without)
    params: ModelParams = field(default_factory=ModelParams)
    tokenizer: Tokenizer | None = None  # None: prompts are bounded by their bytes
    price: Price | None = None  # None: no cost is kept, and no cost cap can be met
    structured: StructuredMode = "json_schema"  # how a JSON answer is asked for (covey.models.structured)
    reply_caps: tuple[ReplyCap, ...] = REPLY_CAPS  # the names the reply cap is sent under
    streams: bool = True  # replies read as streams and cut at their reservation (covey.models.stream)
    tool_results: ToolResults = "tool"  # "user": tool results sent as user messages (covey.models.chat)
    body: Mapping[str, Any] = field(default_factory=dict)  # the server's own request fields
    fallbacks: tuple[str, ...] = ()  # models asked in turn when its calls fail for want of a server

    @property
    def in_process(self) -> bool:
        return self.base_url is None

    @property
    def key(self) -> tuple[str | None, str]:
        """What a dialect is learnt for: one model at one address."""
        return self.base_url, self.model

    @property
    def dialect(self) -> Dialect:
        """How the models file says to speak to it, before any refusal teaches otherwise."""
        return Dialect(caps=self.reply_caps, structured=self.structured)


class ServedModel(BaseModel):
    """One row of ``covey models``: never the key, only whether its variable is set."""

    name: str
    endpoint: str
    model: str
    key_env: str | None
    key_set: bool | None
    params: dict[str, Any]
    tokenizer: str | None = None
    price: Price | None = None
    structured: StructuredMode = "json_schema"  # as in use: a refusal may have taught another
    reply_cap: list[ReplyCap] = Field(default_factory=lambda: list(REPLY_CAPS))
    stream: bool = False
    fallbacks: list[str] = Field(default_factory=list)


class Catalog:
    """Resolves a model name to its endpoint, or refuses it with what to configure."""

    def __init__(
        self,
        entries: Mapping[str, ModelEntry],
        settings: Settings,
        environ: Mapping[str, str],
        folder: Path | None = None,
    ) -> None:
        self._named = {name: _endpoint(name, entry, environ, folder) for name, entry in entries.items()}
        self._default = _default_endpoint(settings)
        # In-process and honouring every cap: its replies need no stream to be cut.
        self._sim = Endpoint(
            base_url=None,
            key_env=None,
            model=SIM_MODEL,
            tokenizer=SimTokenizer(),
            price=settings.sim_price,
            streams=False,
        )
        priced = {name: e.price is not None for name, e in [(SIM_MODEL, self._sim), *self._named.items()]}
        for name, endpoint in self._named.items():  # a cost cap holds only if every answer's cost is known
            unlike = [f for f in endpoint.fallbacks if priced[f] != priced[name]]
            if unlike:
                raise ModelsFileError(
                    f"model {name!r} and its fallback {unlike[0]!r}: give both a price or neither, "
                    "or a cost cap could not hold whichever answers"
                )

    @classmethod
    def from_settings(cls, settings: Settings, environ: Mapping[str, str] = os.environ) -> Catalog:
        entries = load(settings.models) if settings.models is not None else {}
        return cls(entries, settings, environ, settings.models.parent if settings.models is not None else None)

    def endpoint(self, name: str) -> Endpoint:
        """The endpoint serving ``name``; ``UnservableModel`` when none can."""
        if name == SIM_MODEL:
            return self._sim
        if name in self._named:
            endpoint = self._named[name]
            if endpoint.api_key is None:
                raise UnservableModel(f"model {name!r}: its key variable {endpoint.key_env} is not set on this worker")
            return endpoint
        if self._default is None:
            raise UnknownModel(
                f"model {name!r}: no endpoint on this worker serves it; add it to the models file (COVEY_MODELS), "
                "or set COVEY_OPENAI_BASE_URL or OPENAI_API_KEY for a default endpoint",
                name,
                [SIM_MODEL, *sorted(self._named)],
            )
        return replace(self._default, model=name)

    def chain(self, name: str) -> list[tuple[str, Endpoint]]:
        """``name``'s endpoint, then each of its fallbacks this worker can serve, in turn."""
        found = [(name, self.endpoint(name))]
        for other in found[0][1].fallbacks:
            try:
                found.append((other, self.endpoint(other)))
            except UnservableModel:  # its key is not set here: the chain goes on without it
                continue
        return found

    def api_keys(self) -> list[str]:
        """The keys this catalog sends: a worker keeps each out of what people read."""
        endpoints = [*self._named.values(), *([self._default] if self._default else [])]
        return [e.api_key for e in endpoints if e.api_key]

    def served(self, dialects: Dialects | None = None) -> list[ServedModel]:
        """``sim``, every named model, and ``*`` (any other name) when a default endpoint
        is set; each speaking the dialect ``dialects`` has learnt for it, if any."""
        sim_row = ServedModel(
            name=SIM_MODEL, endpoint="in-process", model=SIM_MODEL, key_env=None, key_set=None, params={}
        )
        rows = [sim_row.model_copy(update={"tokenizer": SimTokenizer.name, "price": self._sim.price})]
        named = sorted(self._named.items())
        if self._default is not None:
            named.append(("*", self._default))
        for name, e in named:
            spoken = dialects.of(e) if dialects else e.dialect
            rows.append(
                ServedModel(
                    name=name,
                    endpoint=e.base_url or "in-process",
                    model=e.model,
                    key_env=e.key_env,
                    key_set=e.api_key is not None,
                    params=e.params.request(),
                    tokenizer=e.tokenizer.name if e.tokenizer else None,
                    price=e.price,
                    structured=spoken.structured,
                    reply_cap=list(spoken.caps),
                    stream=e.streams,
                    fallbacks=list(e.fallbacks),
                )
            )
        return rows


def load(path: Path) -> dict[str, ModelEntry]:
    """The validated entries of a models file; ``ModelsFileError`` names what is wrong."""
    raw = read_toml(path, "the models file (COVEY_MODELS)", ModelsFileError)
    if isinstance(raw.get("models"), dict) and SIM_MODEL in raw["models"]:
        raise ModelsFileError(f"{path}: model 'sim' is built in and always in-process; give this endpoint another name")
    try:
        return ModelsFile.model_validate(raw).models
    except ValidationError as e:
        raise ModelsFileError(f"{path}: " + "; ".join(_described(item) for item in e.errors())) from e


def _described(item: Any) -> str:
    """``model 'fast': params.temperature: <message>`` for an error in a model's table."""
    loc = [str(part) for part in item["loc"]]
    if len(loc) >= 2 and loc[0] == "models":
        where = ": ".join(part for part in (f"model {loc[1]!r}", ".".join(loc[2:])) if part)
    else:
        where = ".".join(loc) or "the file"
    return f"{where}: {item['msg']}"


def _default_endpoint(settings: Settings) -> Endpoint | None:
    """``COVEY_OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, when either is set; its model
    ``*`` stands for whatever name was asked, passed on as the provider's id."""
    if not (settings.openai_base_url or settings.openai_api_key):
        return None
    url = settings.openai_base_url or OPENAI_BASE_URL
    # OpenAI's own API refuses max_tokens for its reasoning models; other servers may read it alone.
    caps = ("max_completion_tokens",) if urlsplit(url).hostname == "api.openai.com" else REPLY_CAPS
    return Endpoint(base_url=url, key_env=DEFAULT_KEY_ENV, model="*", api_key=settings.openai_api_key, reply_caps=caps)


def _endpoint(name: str, entry: ModelEntry, environ: Mapping[str, str], folder: Path | None) -> Endpoint:
    api_key = environ.get(entry.api_key_env) or None
    tokenizer: Tokenizer | None = None
    try:
        if entry.tokenizer == SERVER_TOKENIZER:
            tokenizer = ServerTokenizer(str(entry.base_url), entry.model or name, api_key)
        elif entry.tokenizer:
            tokenizer = load_tokenizer(entry.tokenizer, folder)
    except TokenizerError as e:
        raise ModelsFileError(f"model {name!r}: {e}") from e
    return Endpoint(
        base_url=str(entry.base_url),
        key_env=entry.api_key_env,
        model=entry.model or name,
        api_key=api_key,
        params=entry.params,
        tokenizer=tokenizer,
        price=entry.price,
        structured=entry.structured,
        reply_caps=tuple(dict.fromkeys(entry.reply_cap)),
        streams=entry.stream,
        tool_results=entry.tool_results,
        body=entry.body,
        fallbacks=tuple(entry.fallbacks),
    )
