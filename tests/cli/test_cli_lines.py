"""Mistakes a newcomer makes at the command line, each answered in one line."""

from __future__ import annotations

import socket

import pytest

from tests.cli.test_cli import covey
from tests.redis_server import free_port


def one_line(proc, code: int) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr.strip()


def test_watching_the_tree_of_an_unknown_job_says_so_instead_of_redrawing(redis_server):
    line = one_line(covey("tree", "no-such-job", "--watch", redis_url=redis_server.url), 1)
    assert line.startswith("Error: unknown job no-such-job")


@pytest.mark.parametrize("command", [("status", "j"), ("submit", "x"), ("worker",)])
def test_a_redis_url_without_a_scheme_is_one_line_saying_how_to_write_it(command):
    line = one_line(covey(*command, redis_url="localhost:6379"), 2)
    assert line == (
        "Error: invalid configuration: redis_url: 'localhost:6379' has no scheme: "
        "write it as redis://localhost:6379/0 (or rediss://, amqp://, unix://, sentinel://)"
    )


def test_flower_on_a_busy_port_is_one_line_naming_it(redis_server):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = one_line(covey("flower", "--port", str(port), redis_url=redis_server.url), 2)
    assert line.startswith(f"Error: --port {port}: 127.0.0.1:{port} is in use")
    assert line.endswith("give another --port")


def test_a_worker_whose_metrics_port_is_busy_is_one_line_naming_it(redis_server):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = one_line(covey("worker", "--metrics-port", str(port), redis_url=redis_server.url), 1)
    assert line == f"Error: --metrics-port {port}: Address already in use; give another --metrics-port"


def test_a_tenant_given_with_its_scope_prefix_is_told_to_drop_it(redis_server):
    line = one_line(covey("submit", "x", "--tenant", "tenant:acme", redis_url=redis_server.url), 2)
    assert line.endswith("tenant: give the name without its prefix: 'acme'")


@pytest.mark.parametrize(
    "env, said",
    [
        ({}, "Error: invalid configuration: a sentinel:// URL needs COVEY_REDIS_MASTER"),
        ({"COVEY_REDIS_MASTER": "covey"}, "Error: cannot reach Redis (sentinel://127.0.0.1:"),
    ],
)
def test_a_sentinel_url_without_its_master_or_its_sentinels_is_one_line(env, said):
    url = f"sentinel://127.0.0.1:{free_port()};sentinel://127.0.0.1:{free_port()}"
    line = one_line(covey("status", "j", redis_url=url, **env), 2)
    assert line.startswith(said)
