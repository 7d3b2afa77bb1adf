"""A model call's settlement, which an agent's end carries in its final record's
round trip, through a real worker and Redis: a step that breaks between the call
and that end still settles it, so the ledger charges what the call cost and holds
nothing for it."""

from __future__ import annotations

import pytest

from covey.status import AgentStatus, CauseKind
from tests.integration.conftest import plugin_worker

QUEUE = "covey-settlements"


@pytest.fixture(scope="module")
def client(redis_server, tmp_path_factory):
    """A worker and a client with the ``crash`` strategy installed."""
    where = tmp_path_factory.mktemp("plugins")
    with plugin_worker(redis_server.url, where, QUEUE, {"crash": "tests.integration.crash_strategy"}) as made:
        yield made


def test_a_step_that_breaks_after_its_call_still_settles_the_call(client):
    handle = client.submit(client.spec("What is 2 + 3?", strategy="crash", tools=[]))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.FAILED and result.cause.kind is CauseKind.INTERNAL
    assert result.error == "internal error: RuntimeError: the strategy broke on its reply"
    ledger = handle.ledger()
    assert result.usage.cycles == ledger.cycles_used == 1
    assert ledger.tokens_used == result.usage.total_tokens > 0  # charged what the call cost
    assert ledger.tokens_reserved == 0  # not held until the reservation expires
    (node,) = handle.tree()  # its record kept: the tree's elapsed stops at its end
    assert result.finished_at is not None and node.finished_at == result.finished_at
    assert node.usage == result.usage


def test_a_one_call_agent_ends_with_its_call_settled(client):
    handle = client.submit(client.spec("What is 2 + 3?", strategy="single"))
    result = handle.result(timeout=60)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "5")
    ledger = handle.ledger()
    assert ledger.tokens_used == result.usage.total_tokens > 0 and ledger.tokens_reserved == 0
