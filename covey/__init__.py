"""covey: trees of LLM agents as Celery tasks under a Redis budget ledger."""

from importlib import import_module

from covey.budgets.budget import Budget
from covey.budgets.ledger import LedgerError
from covey.errors import CoveyError
from covey.models.catalog import ModelsFileError, UnservableModel
from covey.orchestration.plan import PlanError
from covey.orchestration.registry import UnknownStrategy
from covey.parts import BadPart, File, Image
from covey.results import AgentResult, Usage
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.status import AgentStatus, Cause, CauseKind, JobStatus, Resource

# What pulls in Celery, redis or jsonschema: imported only when asked for.
_LAZY = {
    "Client": "covey.client",
    "JobHandle": "covey.client",
    "JobRefused": "covey.client.errors",
    "JobTimeout": "covey.client.errors",
    "StoreUnavailable": "covey.client.errors",
    "UnknownJob": "covey.client.errors",
    "SweepInputError": "covey.sweeps.errors",
    "WorkspaceError": "covey.store.workspace",
    "InvalidSchema": "covey.models.structured",
    "tool": "covey.tools.function",
    "guardrail": "covey.tools.guardrails",
    "Guardrail": "covey.tools.guardrails",
    "Tool": "covey.tools.tool",
    "ToolContext": "covey.tools.tool",
    "SchemaMismatch": "covey.models.structured",
}

__all__ = [
    "AgentResult",
    "AgentSpec",
    "AgentStatus",
    "BadPart",
    "Budget",
    "Cause",
    "CauseKind",
    "Guardrail",
    "Client",
    "CoveyError",
    "File",
    "Image",
    "InvalidSchema",
    "InvalidSpec",
    "JobHandle",
    "JobRefused",
    "JobSpec",
    "JobStatus",
    "JobTimeout",
    "LedgerError",
    "ModelsFileError",
    "PlanError",
    "Resource",
    "SchemaMismatch",
    "StoreUnavailable",
    "Tool",
    "ToolContext",
    "SweepInputError",
    "UnknownJob",
    "UnknownStrategy",
    "UnservableModel",
    "Usage",
    "WorkspaceError",
    "guardrail",
    "tool",
]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    # `celery -A covey worker|inspect|events ...` looks for `covey.app`: the worker's app,
    # with covey's tasks and its COVEY_* configuration.
    if name == "app":
        from covey.worker.app import app

        return app
    raise AttributeError(name)
