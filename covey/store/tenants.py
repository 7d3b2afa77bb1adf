"""Tenants with keys: the nonce each key is derived from, and what its jobs may use.

One hash per tenant (``keys.tenant``), without a TTL: a tenant outlives its jobs.
A tenant without one runs unsigned jobs, as a single-user setup does
(``covey.tenant_keys``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis

from covey import keys


@dataclass(frozen=True)
class Tenant:
    """A tenant's key, as Redis keeps it (its nonce and fingerprint, never the key),
    and the tools, models and strategies its jobs may use (None: any)."""

    name: str
    nonce: str
    fingerprint: str
    created_at: float
    tools: list[str] | None = None
    models: list[str] | None = None
    strategies: list[str] | None = None


class Tenants:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def put(self, tenant: Tenant) -> None:
        """Write ``tenant``'s key record, replacing its earlier key."""
        limits = {"tools": tenant.tools, "models": tenant.models, "strategies": tenant.strategies}
        fields = {"nonce": tenant.nonce, "fingerprint": tenant.fingerprint, "created_at": repr(tenant.created_at)}
        self._redis.hset(keys.tenant(tenant.name), mapping={**fields, "limits": json.dumps(limits)})

    def get(self, name: str) -> Tenant | None:
        raw = {_text(k): _text(v) for k, v in self._redis.hgetall(keys.tenant(name)).items()}
        if not raw:
            return None
        limits = json.loads(raw.get("limits", "{}"))
        return Tenant(
            name=name,
            nonce=raw["nonce"],
            fingerprint=raw["fingerprint"],
            created_at=float(raw["created_at"]),
            **{k: limits.get(k) for k in ("tools", "models", "strategies")},
        )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
