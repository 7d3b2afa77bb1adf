"""``covey files JOB [PATH]``: list, read and put the files of a job's workspace."""

from __future__ import annotations

import sys
from typing import BinaryIO

import click

from covey.cli.app import cli, connect
from covey.parts import MAX_BYTES, image_type
from covey.store.workspace import WorkspaceError


@cli.command()
@click.argument("job_id")
@click.argument("path", required=False)
@click.option(
    "--put",
    "source",
    type=click.File("rb"),
    help="put this local file (- for standard input) into the workspace at PATH",
)
@click.option("-o", "--output", type=click.File("wb"), help="write the file here instead of standard output")
def files(job_id: str, path: str | None, source: BinaryIO | None, output: BinaryIO | None) -> None:
    """List JOB's workspace, print the file at PATH, or put one there with --put.

    A binary file (an image a tool returned) is written to a pipe or -o FILE,
    never to a terminal."""
    handle = connect().job(job_id)
    try:
        if path is None:
            if source is not None or output is not None:
                raise click.UsageError("--put and -o name a file: give its PATH")
            _list(handle.files(), job_id)
        elif source is not None:
            data = source.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                raise click.ClickException(f"{source.name}: larger than {MAX_BYTES // 1024} KiB, the most a file holds")
            click.echo(f"put {handle.put_file(path, data)} ({len(data)} bytes)")
        else:
            _write(handle.get_file(path), path, output)
    except WorkspaceError as e:
        raise click.ClickException(str(e)) from None


def _list(sizes: dict[str, int], job_id: str) -> None:
    if not sizes:
        click.echo(f"no files in job {job_id}'s workspace")
    for name, size in sizes.items():
        click.echo(f"{size:>9}  {name}")


def _write(data: bytes, path: str, output: BinaryIO | None) -> None:
    if output is not None:
        output.write(data)
        return
    try:
        text = data.decode()
    except UnicodeDecodeError:
        if sys.stdout.isatty():
            kind = image_type(data) or "binary"
            raise click.ClickException(
                f"{path} is {kind}, {len(data)} bytes: write it with -o FILE, or pipe it"
            ) from None
        sys.stdout.buffer.write(data)
        return
    click.echo(text, nl=not text.endswith("\n"))
