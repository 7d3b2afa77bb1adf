"""``covey tenant create``: a tenant's key, which its jobs must be signed with (``covey.tenant_keys``)."""

from __future__ import annotations

import re
import time

import click

from covey import tenant_keys
from covey.budgets import scopes
from covey.cli.app import cli, connect, print_json
from covey.cli.options import names
from covey.config.settings import get_settings


@cli.group()
def tenant() -> None:
    """Tenants whose jobs must prove they are theirs."""


@tenant.command()
@click.argument("name")
@click.option("--tools", default=None, help="the only tools its jobs may use, comma-separated (default: any)")
@click.option("--models", default=None, help="the only models its jobs may use, comma-separated (default: any)")
@click.option("--strategies", default=None, help="the only strategies its jobs may use, comma-separated (default: any)")
@click.option("--json", "as_json", is_flag=True, help="print the key and what it allows as JSON")
def create(name: str, tools: str | None, models: str | None, strategies: str | None, as_json: bool) -> None:
    """Issue tenant NAME a key, printed once: covey keeps only its fingerprint.

    From then on a job for NAME runs only if signed with the key (clients set
    COVEY_TENANT_KEY to it); running this again issues a new key, and the old one
    stops working. Creates the ledger scope tenant:NAME if it is new. Needs the
    workers' signing secret (COVEY_SECRET, or their host's secret file).
    """
    from covey.orchestration import registry
    from covey.store.tenants import Tenant, Tenants
    from covey.worker import signing

    if not re.fullmatch(scopes.LABEL_PATTERN, name):
        raise click.BadParameter("1 to 64 of A-Z a-z 0-9 _ . - (the name alone, without tenant:)", param_hint="NAME")
    allowed = names(strategies)
    unknown = [s for s in allowed or [] if s not in registry.names()]
    if unknown:
        raise click.BadParameter(
            f"unknown strategy {unknown[0]!r}; known: {', '.join(registry.names())}", param_hint="--strategies"
        )
    settings = get_settings()
    try:
        secret = signing.shared_secret(settings.secret, settings.broker)
    except signing.SecretRequired as e:
        raise click.ClickException(str(e)) from None
    client = connect()
    nonce = tenant_keys.nonce()
    key = tenant_keys.derive(secret, name, nonce)
    record = Tenant(name, nonce, tenant_keys.fingerprint(key), time.time(), names(tools), names(models), allowed)
    scope = f"{scopes.TENANT}:{name}"
    if not client.ledger.has_scope(scope):
        client.ledger.set_scope(scope, None, None)
    Tenants(client.redis).put(record)
    if as_json:
        limits = {"tools": record.tools, "models": record.models, "strategies": record.strategies}
        print_json({"tenant": name, "key": key, "fingerprint": record.fingerprint, **limits})
        return
    click.echo(key)
    click.echo(
        f"tenant {name}: key {record.fingerprint} issued, shown this once (covey keeps its fingerprint alone); "
        f"clients of tenant {name} sign their jobs with it: COVEY_TENANT_KEY=<key>. An earlier key of {name} "
        "no longer works.",
        err=True,
    )
