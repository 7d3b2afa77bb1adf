"""A model call's settlement, which an agent's end carries in its final record's
round trip, through a real worker and Redis: a step that breaks between the call
and that end still settles it, so the ledger charges what the call cost and holds
nothing for it."""

from __future__ import annotations

import pytest

from covey.client import Client
from covey.config.settings import Settings
from covey.orchestration import registry
from covey.status import AgentStatus, CauseKind
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker

QUEUE = "covey-settlements"


@pytest.fixture(scope="module")
def client(redis_server, tmp_path_factory):
    """A worker and a client with the ``crash`` strategy installed under the
    ``covey.strategies`` entry point group."""
    where = tmp_path_factory.mktemp("plugins")
    dist = where / "covey_settlements-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: covey-settlements\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[covey.strategies]\ncrash = tests.integration.crash_strategy\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(where))
        registry._plugins.cache_clear()
        worker = start_worker(redis_server.url, COVEY_QUEUE=QUEUE, PYTHONPATH=str(where))
        made = Client(Settings(redis_url=redis_server.url, queue=QUEUE))
        wait_for_worker(made, worker)
        yield made
        made.close()
        stop_worker(worker)
    registry._plugins.cache_clear()
    registry.strategy.cache_clear()


def test_a_step_that_breaks_after_its_call_still_settles_the_call(client):
    handle = client.submit(client.spec("What is 2 + 3?", strategy="crash", tools=[]))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.FAILED and result.cause.kind is CauseKind.INTERNAL
    assert result.error == "internal error: RuntimeError: the strategy broke on its reply"
    ledger = handle.ledger()
    assert result.usage.cycles == ledger.cycles_used == 1
    assert ledger.tokens_used == result.usage.total_tokens > 0  # charged what the call cost
    assert ledger.tokens_reserved == 0  # not held until the reservation expires


def test_a_one_call_agent_ends_with_its_call_settled(client):
    handle = client.submit(client.spec("What is 2 + 3?", strategy="single"))
    result = handle.result(timeout=60)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "5")
    ledger = handle.ledger()
    assert ledger.tokens_used == result.usage.total_tokens > 0 and ledger.tokens_reserved == 0
