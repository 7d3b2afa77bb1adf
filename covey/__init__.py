"""covey: trees of LLM agents as Celery tasks under a Redis budget ledger."""

from covey.budgets.budget import Budget
from covey.results import AgentResult, Usage
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.status import AgentStatus, JobStatus

__all__ = [
    "AgentResult", "AgentSpec", "AgentStatus", "Budget", "Client", "InvalidSpec", "JobHandle", "JobSpec", "JobStatus",
    "Usage",
]


def __getattr__(name: str):
    # The client pulls in Celery and redis; import it only when asked for.
    if name in ("Client", "JobHandle"):
        from covey import client

        return getattr(client, name)
    # `celery -A covey worker|inspect|events ...` looks for `covey.app`: the worker's app,
    # with covey's tasks and its COVEY_* configuration.
    if name == "app":
        from covey.worker.app import app

        return app
    raise AttributeError(name)
