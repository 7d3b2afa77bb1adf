"""Celery's broker connections, keeping the transport they were given when they fail over.

A broker URL of several addresses (``sentinel://a;sentinel://b;...``) gives kombu a
list to fail over along: on a connection error ``Connection.switch`` moves to the
next address, and re-parses it, taking its scheme for the transport. A worker on
Sentinel thus left covey's transport (``covey.config.broker``) for kombu's own at
its first failover, and with it the guard that keeps a dropped connection from
killing the worker (it died at the second or third) and the records of which
process holds each delivery (a killed worker's tasks were never taken over).
Here a switch keeps the transport the connection was made with; one made from
its URL alone (RabbitMQ, ``rediss://``) still follows the new URL's scheme.
"""

from __future__ import annotations

from celery.app.amqp import AMQP as CeleryAMQP
from kombu import Connection as KombuConnection


class Connection(KombuConnection):
    def switch(self, conn_str: str) -> None:
        super().switch(conn_str)
        given = self._initial_params["transport"]  # Celery's broker_transport, None when the URL picks it
        if given:
            self.transport_cls = given


class AMQP(CeleryAMQP):
    """The app's ``amqp``: every broker connection Celery makes is one of these."""

    Connection = Connection
