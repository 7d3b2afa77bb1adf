import pytest
from pydantic import ValidationError

from covey.config.celery import celery_config
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
    assert conf["worker_send_task_events"] and conf["task_send_sent_event"]
    assert conf["result_expires"] > 0


def test_a_model_timeout_longer_than_a_reservation_is_refused():
    with pytest.raises(ValidationError, match="COVEY_MODEL_TIMEOUT"):
        Settings(model_timeout=300, model_retries=2)


def test_a_visibility_timeout_shorter_than_a_task_is_refused():
    with pytest.raises(ValidationError, match="COVEY_VISIBILITY_TIMEOUT"):
        Settings(slice_seconds=60, visibility_timeout=90)
