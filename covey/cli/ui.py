"""``covey ui``: covey in a browser (the newest jobs, a job's live tree, ledger,
approvals and transcripts: ``covey.ui.pages``; sweeps: ``covey.ui.sweeps``) and each job's events as
Server-Sent Events for services in any language (``covey.ui.events``); like
``covey flower``, it answers only this machine unless it is given users and
passwords."""

from __future__ import annotations

from pathlib import Path

import click

from covey.cli.app import cli, connect

DEFAULT_PORT = 8600


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="0: any free port")
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--basic-auth", envvar="COVEY_UI_BASIC_AUTH", default=None, help="user:password[,user2:pw2]")
@click.option(
    "--sweeps",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="a folder of sweeps (each one a `covey sweep --out` directory) to show under /sweeps",
)
def ui(port: int, address: str, basic_auth: str | None, sweeps: Path | None) -> None:
    """Serve covey's pages: the newest jobs, and each job's tree live as it runs,
    its ledger, waiting approvals and transcripts; with --sweeps, the sweeps in
    that folder and their samples side by side (docs/ui.md). GET /jobs/JOB_ID/events
    streams a job's events as Server-Sent Events (resumable with Last-Event-ID;
    docs/events.md). A non-loopback --address needs --basic-auth. Its address, once
    it listens, is the first line on standard error."""
    import uvicorn

    from covey.cli import exposure
    from covey.ui.app import create_app

    sock = exposure.listen_or_exit(address, port, basic_auth, "covey ui", "COVEY_UI_BASIC_AUTH")
    app = create_app(connect(), exposure.users(basic_auth) if basic_auth else None, sweeps)
    where = f"http://{address}:{sock.getsockname()[1]}"
    click.echo(f"covey ui on {where}/jobs (a job's events: /jobs/JOB_ID/events)", err=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
