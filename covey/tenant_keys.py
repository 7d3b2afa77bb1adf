"""Tenant keys: what proves a job is its tenant's.

A job names its tenant itself, and anyone who can push to the broker can send
``covey.run_job``; without a key, one tenant could spend another's budget and use
its tools. ``covey tenant create`` gives a tenant a key; a job for a tenant that
has one must carry a signature made with it (``sign``: the job's id and its
spec's digest), which workers check before anything runs.

The key is derived from the workers' signing secret and a random nonce
(``derive``); Redis keeps the nonce and the key's fingerprint, never the key, so
reading Redis does not give it, and issuing a new nonce revokes the old key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

PREFIX = "ctk_"  # how a tenant key reads, so one pasted where it does not belong is recognised


def nonce() -> str:
    return secrets.token_hex(16)


def derive(secret: bytes, tenant: str, nonce: str) -> str:
    """Tenant ``tenant``'s key for ``nonce``, under the workers' signing ``secret``."""
    return PREFIX + hmac.new(secret, f"tenant-key\0{tenant}\0{nonce}".encode(), hashlib.sha256).hexdigest()


def fingerprint(key: str) -> str:
    """A short name of a key, to tell keys apart without showing one."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def sign(key: str, job_id: str, digest: str) -> str:
    """The signature of job ``job_id`` whose spec has ``digest`` (``covey.wire.digest``)."""
    return hmac.new(key.encode(), f"{job_id}\0{digest}".encode(), hashlib.sha256).hexdigest()


def valid(key: str, job_id: str, digest: str, signature: object) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign(key, job_id, digest), signature)
