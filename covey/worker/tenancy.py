"""A job for a tenant with a key runs only if signed with that key, and only as the key allows.

Checked when a ``run_job`` is taken up, before the root opens and before any model
call (``covey.tenant_keys``, ``covey.store.tenants``). A tenant without a key runs
any job that names it, as before: a single-user setup needs nothing new.
"""

from __future__ import annotations

from typing import Any

from covey import tenant_keys
from covey.spec import InvalidSpec, JobSpec
from covey.store.tenants import Tenant, Tenants
from covey.tools.registry import DEFAULT_TOOLS
from covey.worker.deps import Deps


def admitted(deps: Deps, job: JobSpec, job_id: str, digest: str, signature: Any) -> JobSpec:
    """``job`` as its tenant's key lets it run (its tools the key's when it names
    none and runs no agent of a framework), else ``InvalidSpec`` naming why not."""
    tenant = Tenants(deps.redis).get(job.tenant) if job.tenant is not None else None
    if tenant is None:
        return job
    said = f"job refused: tenant {tenant.name!r} has a key"
    if signature is None:
        raise InvalidSpec(f"{said}, and the job is not signed with it (COVEY_TENANT_KEY)")
    if not tenant_keys.valid(tenant_keys.derive(deps.secret, tenant.name, tenant.nonce), job_id, digest, signature):
        raise InvalidSpec(f"{said}, and the job's signature is not made with it (another key, or an older one)")
    # The built-ins its key allows; an agent of a framework declares its own, offered alone.
    if tenant.tools is not None and job.tools is None and job.agent is None:
        job = job.model_copy(update={"tools": [name for name in DEFAULT_TOOLS if name in tenant.tools]})
    for kind, named in (("tool", job.tools or []), ("model", [job.model]), ("strategy", [job.strategy])):
        _allowed(tenant, kind, named)
    return job


def _allowed(tenant: Tenant, kind: str, named: list[str]) -> None:
    allowed = {"tool": tenant.tools, "model": tenant.models, "strategy": tenant.strategies}[kind]
    barred = [n for n in named if allowed is not None and n not in allowed]
    if barred:
        allows = ", ".join(allowed or []) or "none"
        raise InvalidSpec(
            f"job refused: tenant {tenant.name!r} may not use {kind} {barred[0]!r} (its key allows: {allows})"
        )
