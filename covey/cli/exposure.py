"""A server covey starts (Flower, ``covey ui``) never open to a network without a
password, and a busy port said before the server starts."""

from __future__ import annotations

import ipaddress
import socket
import sys

import click


class Exposed(ValueError):
    """A server would answer a network without a password, or the password is malformed."""


class PortBusy(OSError):
    """Another process holds the port a server would listen on."""


def check_port(address: str, port: int) -> None:
    """Raise ``PortBusy`` naming the port: the server would find it busy only after
    its start-up, as a traceback."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a closing socket is no holder
        try:
            probe.bind((address.strip("[]") or "", port))
        except OSError as e:
            raise PortBusy(
                f"--port {port}: {address or '*'}:{port} is in use ({e.strerror}); give another --port"
            ) from None


def is_loopback(address: str) -> bool:
    """Whether a server bound to ``address`` answers this machine only. An empty
    address means every interface."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check(address: str, basic_auth: str | None, server: str, env: str) -> None:
    """Raise ``Exposed`` naming the option at fault (``env``: the variable that may
    give ``--basic-auth`` instead)."""
    if basic_auth is not None:
        for pair in basic_auth.split(","):
            user, _, password = pair.partition(":")
            if not user or not password:
                raise Exposed("--basic-auth: give user:password (comma-separated for several users)")
    elif not is_loopback(address):
        raise Exposed(
            f"--address {address or '(all interfaces)'} is not a loopback address: "
            f"give --basic-auth user:password (or {env}) to open {server} to a network"
        )


def users(basic_auth: str) -> dict[str, str]:
    """``user:password[,user2:pw2]`` (checked by ``check``) as user -> password."""
    return dict(pair.partition(":")[::2] for pair in basic_auth.split(","))


def serve_or_exit(address: str, port: int, basic_auth: str | None, server: str, env: str) -> None:
    """Go on when ``server`` may listen on ``address:port``; else say why in one line
    and exit 2 (``check``, ``check_port``)."""
    try:
        check(address, basic_auth, server, env)
        check_port(address, port)
    except (Exposed, PortBusy) as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(2)
