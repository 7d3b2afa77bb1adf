"""``covey models``: what the live workers serve, or (none publishing) what a worker started here would."""

from __future__ import annotations

import click

from covey import wire
from covey.cli.app import cli, connect, print_json
from covey.client.errors import StoreUnavailable
from covey.config.settings import get_settings
from covey.models.catalog import Catalog
from covey.store.catalog import listed_models
from covey.worker.catalog import redacted

LOCAL = "showing what a worker started with this machine's settings would serve"


@cli.command("models")
@click.option("--json", "as_json", is_flag=True, help="print the models as JSON")
def models(as_json: bool) -> None:
    """List the models the live workers serve: name, endpoint, provider model id, whether
    its key variable is set there, how a JSON answer is asked for, and which workers. With no worker publishing, the
    models this machine's settings serve (COVEY_MODELS, COVEY_OPENAI_BASE_URL, OPENAI_API_KEY)."""
    try:
        client = connect()
    except StoreUnavailable as e:  # the local view needs no Redis
        rows, why = [], str(e)
    else:
        rows, why = listed_models(client.catalog.entries()), "no worker is publishing its catalog"
        client.close()
    if not rows:
        click.echo(f"{why}; {LOCAL}", err=True)
        # An endpoint's URL may carry a password, a param a key: neither is printed.
        local = redacted(Catalog.from_settings(get_settings()).served())
        rows = [{**row.model_dump(mode="json"), "workers": None} for row in local]
    if as_json:
        print_json(rows)
        return
    listed = [
        (
            r["name"],
            r["endpoint"],
            r["model"],
            r["key_env"],
            _key_state(r["key_set"]),
            _params(r["params"]),
            r.get("structured"),  # as in use: a worker that was refused json_schema asks in tools mode
            None if r["workers"] is None else ", ".join(r["workers"]),
        )
        for r in rows
    ]
    columns = ["model", "endpoint", "provider model", "key variable", "key", "params", "json", "workers"]
    click.echo(wire.table(columns, listed))


def _key_state(key_set: bool | None) -> str | None:
    return None if key_set is None else "set" if key_set else "NOT SET"


def _params(params: dict) -> str | None:
    return " ".join(f"{k}={v}" for k, v in params.items()) or None
