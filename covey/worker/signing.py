"""Only covey's own messages run agents.

``covey.agent`` and ``covey.resume`` messages carry ``sig``: an HMAC-SHA256, keyed
by the secret every worker shares, over the canonical JSON of what the task will
trust (the agent's context and spec; the job, agent and round a callback resumes).
A worker refuses a message whose signature is missing or wrong: whoever sent it
does not hold the secret. ``covey.run_job`` carries none: it is the wire contract,
open to any client, and everything else about a job is read from its ledger.

The secret is ``COVEY_SECRET``. Without it, workers share a random one kept in
Redis, made by the first worker that needs it: that keeps out whoever reaches
only the broker (a RabbitMQ, say), not whoever reaches Redis itself.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

import redis

from covey import keys

SECRET_BYTES = 32


def canonical(payload: Any) -> bytes:
    """One byte string per JSON value, whatever the order of its keys."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(payload: Any) -> str:
    """A fingerprint of a JSON value: the same for the same value, however it was sent."""
    return hashlib.sha256(canonical(payload)).hexdigest()


def sign(secret: bytes, payload: Any) -> str:
    return hmac.new(secret, canonical(payload), hashlib.sha256).hexdigest()


def valid(secret: bytes, payload: Any, signature: Any) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign(secret, payload), signature)


def shared_secret(configured: str | None, client: redis.Redis) -> bytes:
    """``COVEY_SECRET``, else the deployment's secret in Redis (created once, atomically)."""
    if configured:
        return configured.encode()
    client.set(keys.secret(), secrets.token_hex(SECRET_BYTES), nx=True)
    stored = client.get(keys.secret())
    return stored.encode() if isinstance(stored, str) else stored
