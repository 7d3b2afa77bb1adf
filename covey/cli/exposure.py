"""A server covey starts (Flower, ``covey ui``) never open to a network without a
password, and a busy port said in one line (``covey sim-server``'s too) rather than
as the server's traceback."""

from __future__ import annotations

import ipaddress
import socket
import sys
from typing import NoReturn

import click


class Exposed(ValueError):
    """A server would answer a network without a password, or the password is malformed."""


class PortBusy(OSError):
    """Another process holds the port a server would listen on."""


def listening(address: str, port: int) -> socket.socket:
    """A socket bound to ``address:port`` (port 0: any free one) and listening, for a
    server to serve on; ``PortBusy`` naming the port, which the server would find
    busy only after its start-up, as a traceback."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a closing socket is no holder
    try:
        sock.bind((address.strip("[]") or "", port))
        sock.listen(socket.SOMAXCONN)
    except OSError as e:
        sock.close()
        raise busy(address, port, e) from None
    return sock


def busy(address: str, port: int, error: OSError) -> PortBusy:
    return PortBusy(f"--port {port}: {address or '*'}:{port} is in use ({error.strerror}); give another --port")


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
    """Go on when ``server`` may listen on ``address:port`` (it binds the port
    itself); else say why in one line and exit 2."""
    listen_or_exit(address, port, basic_auth, server, env).close()


def listen_or_exit(address: str, port: int, basic_auth: str | None, server: str, env: str) -> socket.socket:
    """The socket ``server`` serves on, listening on ``address:port``; or why it may
    not, in one line, and exit 2 (``check``, ``listening``)."""
    try:
        check(address, basic_auth, server, env)
        return listening(address, port)
    except (Exposed, PortBusy) as e:
        exit_saying(e)


def exit_saying(error: Exception) -> NoReturn:
    """Say why a server does not start, in one line, and exit 2 (bad input)."""
    click.echo(f"Error: {error}", err=True)
    sys.exit(2)
