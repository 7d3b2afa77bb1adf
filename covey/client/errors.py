"""What the client raises: a job refused or unknown, a wait run out, a store out of reach.

The names of the stores (``REDIS``, ``BROKER``, ``RESULT_STORE``) live here too:
``StoreUnavailable.store`` is one of them, so a caller can tell which is down.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from covey.errors import CoveyError
from covey.status import Cause

REDIS, BROKER, RESULT_STORE = "Redis", "the broker", "the result store"


class JobRefused(CoveyError):
    """The worker refused the job (an invalid spec) or the job crashed before its
    root ran: ``cause`` says which (``invalid_spec`` or ``internal``)."""

    def __init__(self, message: str, cause: Cause) -> None:
        super().__init__(message)
        self.cause = cause


class JobTimeout(CoveyError, TimeoutError):
    """``result(timeout)`` ran out before the job finished; the job goes on.
    ``reason`` says why it is stuck, when that is known."""

    def __init__(self, job_id: str, waited: float, reason: str | None) -> None:
        self.job_id, self.waited, self.reason = job_id, waited, reason
        super().__init__(f"job {job_id} not finished after {waited:.1f}s" + (f": {reason}" if reason else ""))


class UnknownJob(CoveyError, LookupError):
    """Nothing is recorded of the job that the call needs (``missing``: its spec for
    ``Client.retry``, its events): never sent by a covey client, expired, or lost
    with its records."""

    def __init__(self, job_id: str, missing: str = "no spec recorded") -> None:
        self.job_id = job_id
        super().__init__(
            f"unknown job {job_id}: {missing} (never submitted by covey, expired, or lost with its records)"
        )


class StoreUnavailable(CoveyError, ConnectionError):
    """Redis, the broker or the result store cannot be reached: ``store`` says which
    and ``url`` where (its password masked), since each may live elsewhere."""

    def __init__(self, store: str, url: str, reason: BaseException) -> None:
        self.store, self.url = store, _masked(url, url)
        super().__init__(f"cannot reach {store} ({self.url}): {_masked(' '.join(str(reason).split()), url)}")


def _masked(text: str, url: str) -> str:
    """``text`` with ``url``'s password replaced, so no message shows it."""
    password = urlsplit(url).password
    return text.replace(f":{password}@", ":***@") if password else text
