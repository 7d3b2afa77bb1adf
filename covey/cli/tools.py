"""``covey tools``: the tools live workers serve, as their catalog says."""

from __future__ import annotations

import click

from covey import wire
from covey.cli.app import cli, connect, print_json
from covey.store.catalog import listed_tools

NO_WORKER = "no worker is publishing its catalog: start one with `covey worker`"


@cli.command("tools")
@click.option("--json", "as_json", is_flag=True, help="print the tools as JSON")
def tools(as_json: bool) -> None:
    """List the tools the live workers serve: name, origin, description and which workers."""
    client = connect()
    rows = listed_tools(client.catalog.entries())
    client.close()
    if not rows:
        click.echo(NO_WORKER, err=True)
    if as_json:
        print_json([row.model_dump(mode="json") for row in rows])
    elif rows:
        listed = [(r.name, r.origin, wire.first_words(r.description), ", ".join(r.workers)) for r in rows]
        click.echo(wire.table(["tool", "origin", "description", "workers"], listed))
