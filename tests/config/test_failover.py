"""A broker connection that fails over to the next address of its URL keeps covey's
transport (``covey.config.failover``): kombu's switch took the new address's
scheme for the transport, and a Sentinel worker lost covey's at its first failover."""

from __future__ import annotations

import pytest

from covey.config import broker
from covey.config.celery import create_app
from covey.config.settings import Settings

SENTINELS = [f"sentinel://127.0.0.1:{port}" for port in (26379, 26380, 26381)]


@pytest.mark.parametrize("made", ["connection_for_read", "connection_for_write"])
def test_every_failover_switch_keeps_covey_s_sentinel_transport(made):
    url = ";".join([f"{SENTINELS[0]}/3", *SENTINELS[1:]])
    app = create_app(Settings(redis_url=url, redis_master="covey"))
    connection = getattr(app, made)()
    seen = []
    for _ in range(len(SENTINELS) + 1):  # round the list and back to its first address
        assert type(connection.transport) is broker.SentinelTransport
        seen.append(connection.as_uri())
        connection.maybe_switch_next()
        assert type(connection.clone().transport) is broker.SentinelTransport
    assert seen == [f"{s}/3" for s in [*SENTINELS, SENTINELS[0]]]


def test_a_failover_of_plain_redis_addresses_keeps_covey_s_transport():
    app = create_app(Settings(redis_url="redis://127.0.0.1:6391/2;redis://127.0.0.1:6392/2"))
    connection = app.connection_for_read()
    connection.maybe_switch_next()
    assert type(connection.transport) is broker.Transport
    assert connection.as_uri() == "redis://127.0.0.1:6392/2"


def test_a_broker_named_by_its_url_alone_still_follows_each_address_s_scheme():
    app = create_app(Settings(broker_url="amqp://guest@rabbit-a//;amqp://guest@rabbit-b//"))
    connection = app.connection_for_read()
    connection.maybe_switch_next()
    assert (connection.transport_cls, connection.hostname) == ("amqp", "rabbit-b")
