import re
from decimal import Decimal

import pytest
from pydantic import ValidationError

from covey.config.celery import celery_config
from covey.config.sentinel import SentinelURL
from covey.config.settings import Settings


def test_env_configures_covey(monkeypatch):
    monkeypatch.setenv("COVEY_REDIS_URL", "redis://example:6380/2")
    monkeypatch.setenv("COVEY_MAX_TOKENS", "1234")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    s = Settings()
    assert s.broker == s.backend == "redis://example:6380/2"
    assert s.default_budget().max_tokens == 1234
    assert s.openai_api_key == "sk-test"


def test_celery_is_configured_for_long_agent_tasks():
    settings = Settings(slice_seconds=60, model_timeout=60, model_retries=2)
    conf = celery_config(settings)
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    # longer than any task runs (a slice and one call with its retries), and minutes, not hours
    assert 60 + settings.longest_call_seconds < conf["broker_transport_options"]["visibility_timeout"] <= 600
    assert conf["result_expires"] > 0


def test_events_and_extended_results_are_off_unless_asked_for():
    off, on = celery_config(Settings()), celery_config(Settings(task_events=True))
    keys = ("worker_send_task_events", "task_send_sent_event", "result_extended", "task_track_started")
    assert not any(off[k] for k in keys)
    assert all(on[k] for k in keys)


@pytest.mark.parametrize("pool, concurrency, slots", [("threads", None, 100), ("gevent", None, 500), ("threads", 7, 7)])
def test_every_pool_holds_a_connection_per_slot(pool, concurrency, slots):
    settings = Settings(worker_pool=pool, worker_concurrency=concurrency)
    conf = celery_config(settings)
    assert settings.worker_slots == slots
    assert conf["broker_pool_limit"] >= slots and conf["redis_max_connections"] >= slots
    assert conf["broker_transport_options"]["max_connections"] >= slots


def test_a_redis_result_store_waits_out_an_outage_and_others_are_left_alone():
    assert celery_config(Settings(redis_url="redis://h:1/0"))["result_backend"].endswith(
        ":PatientRedisBackend+redis://h:1/0"
    )
    assert celery_config(Settings(result_backend="rpc://"))["result_backend"] == "rpc://"


def test_a_model_timeout_longer_than_a_reservation_is_refused():
    with pytest.raises(ValidationError, match="COVEY_MODEL_TIMEOUT"):
        Settings(model_timeout=300, model_retries=2)


def test_a_visibility_timeout_shorter_than_a_task_is_refused():
    with pytest.raises(ValidationError, match="COVEY_VISIBILITY_TIMEOUT"):
        Settings(slice_seconds=60, visibility_timeout=90)


def test_tool_timeouts_are_read_as_json_seconds(monkeypatch):
    monkeypatch.setenv("COVEY_TOOL_TIMEOUTS", '{"lookup_weather": 5, "hang": 0.5}')
    assert Settings().tool_timeouts == {"lookup_weather": 5.0, "hang": 0.5}
    monkeypatch.setenv("COVEY_TOOL_TIMEOUTS", '{"hang": 0}')
    with pytest.raises(ValidationError, match="tool_timeouts.hang"):
        Settings()


def test_the_sims_price_is_json_with_the_models_files_keys(monkeypatch):
    monkeypatch.setenv("COVEY_SIM_PRICE", '{"input": 0.15, "cached_input": 0.075, "output": 0.6}')
    price = Settings().sim_price
    assert (price.input, price.cached, price.output) == (Decimal("0.15"), Decimal("0.075"), Decimal("0.6"))
    monkeypatch.setenv("COVEY_SIM_PRICE", '{"input": -1, "output": 0.6}')
    with pytest.raises(ValidationError, match="sim_price.input"):
        Settings()
    monkeypatch.delenv("COVEY_SIM_PRICE")
    assert Settings().sim_price is None  # the sim keeps no cost unless asked to


SENTINELS = "sentinel://:pw@10.0.0.1:26379/2;sentinel://10.0.0.2:26380;sentinel://10.0.0.3"


def test_a_sentinel_url_reaches_the_broker_the_result_store_and_the_ledger_through_its_master():
    settings = Settings(redis_url=SENTINELS, redis_master="covey")
    conf = celery_config(settings)
    assert conf["broker_url"] == SENTINELS
    assert conf["broker_transport"] == "covey.config.broker:SentinelTransport"
    assert conf["result_backend"] == f"covey.config.backend:PatientSentinelBackend+{SENTINELS}"
    for options in (conf["broker_transport_options"], conf["result_backend_transport_options"]):
        assert options["master_name"] == "covey"
        assert options["sentinel_kwargs"]["socket_timeout"] > 0  # a silent sentinel is given up on
    assert settings.ledger_wait_replicas == 1  # on by default under Sentinel
    assert Settings(redis_url=SENTINELS, redis_master="covey", ledger_replicas=0).ledger_wait_replicas == 0
    assert Settings().ledger_wait_replicas == 0  # a lone Redis has no replica to wait for
    assert celery_config(Settings())["result_backend_transport_options"] == {}


def test_a_sentinel_url_names_its_sentinels_and_the_masters_login():
    where = SentinelURL.parse(SENTINELS)
    assert where.hosts == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("10.0.0.3", 26379))
    assert (where.db, where.password) == (2, "pw")


@pytest.mark.parametrize(
    "url, said",
    [
        ("sentinel://h:port", "'sentinel://h:port' is not a sentinel address"),
        ("sentinel://h:1;redis://h:2", "'redis://h:2' is not a sentinel address"),
        ("sentinel://h:1/zero", "the database after the first sentinel's address must be a number"),
    ],
)
def test_a_bad_sentinel_url_is_refused_naming_the_address(url, said):
    with pytest.raises(ValidationError, match=said):
        Settings(redis_url=url, redis_master="covey")


@pytest.mark.parametrize("field", ["redis_url", "broker_url", "result_backend"])
def test_a_sentinel_url_without_its_masters_name_is_refused(field):
    with pytest.raises(ValidationError, match="COVEY_REDIS_MASTER"):
        Settings(**{field: "sentinel://h:26379"})


@pytest.mark.parametrize(
    "field, url",
    [
        ("broker_url", "amqp://guest@localhost//"),
        ("broker_url", "redis+socket:///tmp/redis.sock"),
        ("result_backend", "rpc://"),
        ("result_backend", "db+postgresql://localhost/results"),
    ],
)
def test_every_transport_and_result_store_celery_knows_is_taken(field, url):
    assert getattr(Settings(**{field: url}), field) == url


@pytest.mark.parametrize(
    "field, url, said",
    [
        ("redis_url", "amqp://localhost", "unknown scheme amqp://, not one of redis, rediss, unix, sentinel"),
        ("broker_url", "amqq://localhost", "unknown scheme amqq://, not one of redis, rediss, unix, sentinel, ...; "),
        ("result_backend", "rdis://localhost", "did you mean redis://?"),
    ],
)
def test_a_scheme_no_client_takes_is_refused_naming_the_closest(field, url, said):
    with pytest.raises(ValidationError, match=re.escape(said)):
        Settings(**{field: url})
