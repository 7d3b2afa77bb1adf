"""``covey models``: what a worker started on this machine would serve, and where."""

from __future__ import annotations

import click

from covey import wire
from covey.cli.app import cli, print_json
from covey.config.settings import get_settings
from covey.models.catalog import Catalog
from covey.worker.redaction import redact


@cli.command("models")
@click.option("--json", "as_json", is_flag=True, help="print the models as JSON")
def models(as_json: bool) -> None:
    """List the models served with this machine's settings (COVEY_MODELS, COVEY_OPENAI_BASE_URL,
    OPENAI_API_KEY): name, endpoint, provider model id and whether its key variable is set."""
    # An endpoint's URL may carry a password, a param a key: neither is printed.
    served = [
        row.model_copy(
            update={
                "endpoint": redact(row.endpoint),
                "params": {k: redact(v) if isinstance(v, str) else v for k, v in row.params.items()},
            }
        )
        for row in Catalog.from_settings(get_settings()).served()
    ]
    if as_json:
        print_json([row.model_dump(mode="json") for row in served])
        return
    rows = [(r.name, r.endpoint, r.model, r.key_env, _key_state(r.key_set), _params(r.params)) for r in served]
    click.echo(wire.table(["model", "endpoint", "provider model", "key variable", "key", "params"], rows))


def _key_state(key_set: bool | None) -> str | None:
    return None if key_set is None else "set" if key_set else "NOT SET"


def _params(params: dict) -> str | None:
    return " ".join(f"{k}={v}" for k, v in params.items()) or None
