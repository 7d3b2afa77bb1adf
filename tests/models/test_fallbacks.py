"""A model's fallbacks: asked in turn when its calls fail for want of a server (a
429, a 5xx, no connection), never for a request the server refused as wrong or a
call that may have been billed; the reply names who answered. A models file
names only models it has, and prices all of a chain or none of it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from covey.budgets.prices import Price, dearest
from covey.config.settings import Settings
from covey.models import sim
from covey.models.catalog import Catalog, ModelEntry, ModelsFileError, load
from covey.models.chat import ModelError
from covey.models.dialect import Dialects
from covey.models.llm import LLM

ASK = [{"role": "user", "content": "What is 6 * 7?"}]
PRICE = {"input": 1.0, "output": 2.0}


class Hosts:
    """Two servers on one mock transport: ``primary.test`` answers ``status`` (or
    drops the connection, status None); ``backup.test`` is the sim."""

    def __init__(self, status: int | None) -> None:
        self.status, self.asked, self._sim = status, [], sim.make_handler()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.asked.append(request.url.host)
        if request.url.host == "backup.test":
            return self._sim(request)
        if self.status is None:
            raise httpx2.ConnectError("connection refused", request=request)
        return httpx2.Response(self.status, json={"error": {"message": f"primary says {self.status}"}})


def llm(hosts: Hosts, **primary) -> LLM:
    entries = {
        "primary": ModelEntry(base_url="http://primary.test/v1", api_key_env="K", model="sim", **primary),
        "backup": ModelEntry(base_url="http://backup.test/v1", api_key_env="K", model="sim"),
    }
    settings = Settings(model_retries=0)
    return LLM(settings, Catalog(entries, settings, {"K": "k"}), httpx2.MockTransport(hosts), Dialects())


@pytest.mark.parametrize("status", [429, 500, 503, None])
def test_a_busy_broken_or_absent_server_hands_the_call_to_the_fallback(status):
    hosts = Hosts(status)
    reply, usage = llm(hosts, fallbacks=["backup"]).call("primary", ASK, [], 100)
    assert hosts.asked == ["primary.test", "backup.test"]
    assert reply.model == "backup" and reply.content and usage.total_tokens > 0


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_request_refused_as_wrong_is_no_reason_to_ask_another_model(status):
    hosts = Hosts(status)
    with pytest.raises(ModelError, match=f"primary says {status}"):
        llm(hosts, fallbacks=["backup"]).call("primary", ASK, [], 100)
    assert hosts.asked == ["primary.test"]


def test_without_fallbacks_the_failure_stands_and_an_answer_names_no_fallback():
    with pytest.raises(ModelError, match="primary says 429"):
        llm(Hosts(429)).call("primary", ASK, [], 100)
    reply, _ = llm(Hosts(429), fallbacks=["backup"]).call("backup", ASK, [], 100)
    assert reply.model is None


def test_the_last_fallbacks_failure_is_the_one_raised():
    hosts = Hosts(500)
    hosts._sim = lambda request: httpx2.Response(502, json={"error": {"message": "backup says 502"}})
    with pytest.raises(ModelError, match="backup says 502"):
        llm(hosts, fallbacks=["backup"]).call("primary", ASK, [], 100)


def models_file(tmp_path: Path, models: dict) -> Path:
    lines = []
    for name, fields in models.items():
        lines.append(f"[models.{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    path = tmp_path / "models.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


BASE = {"base_url": "http://a.test/v1", "api_key_env": "K"}


@pytest.mark.parametrize(
    ("fallbacks", "said"),
    [
        (["nowhere"], "model 'a': fallbacks: 'nowhere' is no other model of this file (or 'sim')"),
        (["a"], "model 'a': fallbacks: 'a' is no other model of this file"),
        (["b", "b"], "model 'a': fallbacks: a model named twice"),
        (["b", "sim", "b", "b"], "fallbacks: List should have at most 3 items"),
    ],
)
def test_a_fallback_must_be_another_model_of_the_file(tmp_path, fallbacks, said):
    with pytest.raises(ModelsFileError, match=said.replace("(", r"\(").replace(")", r"\)")):
        load(models_file(tmp_path, {"a": {**BASE, "fallbacks": fallbacks}, "b": BASE}))


def test_a_chain_is_priced_whole_or_not_at_all(tmp_path):
    entries = load(models_file(tmp_path, {"a": {**BASE, "fallbacks": ["b"]}, "b": BASE}))
    entries["a"] = entries["a"].model_copy(update={"price": Price(**PRICE)})
    with pytest.raises(ModelsFileError, match="model 'a' and its fallback 'b': give both a price or neither"):
        Catalog(entries, Settings(), {"K": "k"})
    chain = Catalog(load(models_file(tmp_path, {"a": {**BASE, "fallbacks": ["b"]}, "b": BASE})), Settings(), {})
    with pytest.raises(Exception, match="key variable K is not set"):
        chain.chain("a")


def test_a_fallback_whose_key_is_unset_here_is_left_out_of_the_chain(tmp_path):
    entries = load(
        models_file(tmp_path, {"a": {**BASE, "fallbacks": ["b", "sim"]}, "b": {**BASE, "api_key_env": "KB"}})
    )
    assert [name for name, _ in Catalog(entries, Settings(), {"K": "k"}).chain("a")] == ["a", "sim"]


def test_the_dearest_price_is_no_lower_than_any_for_any_token():
    cheap, dear = Price(input=1, output=8, cached_input=0.5), Price(input=3, output=4)
    most = dearest([cheap, dear])
    assert (most.input, most.output, most.cached) == (3, 8, 3)
    for tokens in [(1000, 10, 0), (10, 1000, 0), (1000, 10, 900)]:
        assert most.cost(*tokens) >= max(cheap.cost(*tokens), dear.cost(*tokens))
