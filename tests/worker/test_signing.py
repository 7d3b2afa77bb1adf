"""Signatures bind a message to its task id, and the secret lives outside Redis."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from covey.worker import signing

PAYLOAD = {"job_id": "j", "agent_id": "root", "spawn_round": 1}


def test_a_signature_holds_only_for_the_task_id_it_was_made_for():
    sig = signing.sign(b"s", "task-a", PAYLOAD)
    assert signing.valid(b"s", "task-a", PAYLOAD, sig)
    assert not signing.valid(b"s", "task-b", PAYLOAD, sig)
    assert not signing.valid(b"s", "task-a", {**PAYLOAD, "job_id": "k"}, sig)
    assert not signing.valid(b"other", "task-a", PAYLOAD, sig)
    assert not signing.valid(b"s", "task-a", PAYLOAD, None)


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "redis://127.0.0.1:6379",
        "redis://:pw@127.0.0.2/1",
        "redis://[::1]:6379",
        "redis+socket:///run/redis.sock",
        "redis://",
        "sentinel://127.0.0.1:26379;sentinel://localhost:26380",
    ],
)
def test_a_broker_on_loopback_is_on_this_host(url):
    assert signing.on_this_host(url)


@pytest.mark.parametrize(
    "url",
    [
        "redis://10.0.0.5:6379/0",
        "redis://redis.internal:6379",
        "amqp://guest@rabbit//",
        "sentinel://127.0.0.1:26379;sentinel://10.0.0.6:26379",
    ],
)
def test_a_broker_elsewhere_is_not(url):
    assert not signing.on_this_host(url)


def test_without_covey_secret_a_broker_elsewhere_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    with pytest.raises(signing.SecretRequired, match="set COVEY_SECRET") as refused:
        signing.shared_secret(None, "redis://:pw@10.0.0.5:6379/0")
    assert "\n" not in str(refused.value) and "pw" not in str(refused.value)
    assert not (tmp_path / "covey").exists()
    assert signing.shared_secret("configured", "redis://10.0.0.5:6379/0") == b"configured"


def test_the_host_secret_is_made_once_readable_by_its_owner_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    found: list[bytes] = []
    workers = [
        threading.Thread(target=lambda: found.append(signing.shared_secret(None, "redis://localhost")))
        for _ in range(8)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    path = tmp_path / "covey" / "secret"
    assert len(set(found)) == 1 and len(found[0]) == 2 * signing.SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["secret"]  # no draft left behind


def test_a_secret_file_others_may_read_is_refused(tmp_path):
    path = tmp_path / "secret"
    path.write_text("abc")
    path.chmod(0o644)
    with pytest.raises(signing.SecretRequired, match="chmod 600"):
        signing.host_secret(path)
