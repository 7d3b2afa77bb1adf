"""Real MCP servers for the tests: the same small server over stdio (started by the
session under test) and over streamable HTTP on a loopback port it picks."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("server.py")
TOKEN_ENV = "MCP_TEST_TOKEN"  # the variable a servers file names for the Authorization header
TOKEN = "s3cret-token-value"
START_SECONDS = 30


class HttpServer:
    """``server.py http PORT``, requiring ``Bearer TOKEN``; ``kill`` then ``start`` is a restart on the same port."""

    def __init__(self, port: int = 0) -> None:
        # 0: the first start's pick (none another process can take first); a restart keeps it
        self.port = port
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        env = {**os.environ, "EXPECT_TOKEN": TOKEN}
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(self.port)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        said = select.select([self.proc.stdout], [], [], START_SECONDS)[0] and self.proc.stdout.readline()
        if not said or not said.startswith("listening on "):
            self.kill()
            raise RuntimeError(f"no test MCP server on port {self.port} after {START_SECONDS}s: {said!r}")
        self.port = int(said.split()[-1])

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=START_SECONDS)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    server.start()
    yield server
    server.kill()


def stdio_table(name: str = "local", script: Path = SERVER, timeout: float = 30, grown: Path | None = None) -> str:
    """A stdio server's table; with ``grown``, the file of the tools it grew (server.py's ``GROWN``)."""
    env = f'env = {{ GROWN = "{grown}" }}\n' if grown else ""
    return f"""
[servers.{name}]
command = "{sys.executable}"
args = ["{script}", "stdio"]
timeout = {timeout}
{env}"""


def http_table(url: str, name: str = "remote", timeout: float = 30) -> str:
    return f"""
[servers.{name}]
url = "{url}"
headers = {{ Authorization = "{TOKEN_ENV}" }}
timeout = {timeout}
"""
