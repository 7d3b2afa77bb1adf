"""Global ledger scope names: ``global``, ``tenant:<name>`` and ``sweep:<id>``.

The one home of their grammar: the spec, the ledger, the CLI and sweeps build and
check names here, so a name one of them accepts is one every other accepts.
"""

from __future__ import annotations

import re

GLOBAL = "global"  # every job's: caps across the whole deployment
TENANT, SWEEP = "tenant", "sweep"
# A tenant's or a sweep's own part of a name: safe in a Redis key, a shell and a log line.
LABEL_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_NAME = re.compile(rf"{GLOBAL}|({TENANT}|{SWEEP}):{LABEL_PATTERN[1:-1]}")


def tenant(name: str) -> str:
    return f"{TENANT}:{name}"


def sweep(sweep_id: str) -> str:
    return f"{SWEEP}:{sweep_id}"


def of_job(tenant_name: str | None, sweep_id: str | None) -> list[str]:
    """The scopes a job is charged to: always ``global``, then its tenant's and its sweep's."""
    return [GLOBAL] + ([tenant(tenant_name)] if tenant_name else []) + ([sweep(sweep_id)] if sweep_id else [])


def kind(name: str) -> str:
    """``global``, ``tenant`` or ``sweep``: what a valid name scopes."""
    return name.split(":", 1)[0]


def check(name: str) -> None:
    """``ValueError``, saying what a scope name looks like, unless ``name`` is one."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"scope name {name!r} must be {GLOBAL}, {TENANT}:<name> or {SWEEP}:<name>")
