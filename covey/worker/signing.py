"""Only covey's own messages run agents.

``covey.agent``, ``covey.resume`` and ``covey.proceed`` messages carry ``sig``: an
HMAC-SHA256, keyed by the secret every worker shares, over the canonical JSON of
the ids the task will trust (the job and agent a child's first step runs; the job,
agent and round or step a resume or proceed takes up) and of the id of the task
that carries it. What an agent runs and may do is read from its ledger row, which
its parent's spawn wrote, never from a message. A worker refuses a
message whose signature is missing or wrong, or was made for another task id:
whoever sent it does not hold the secret, or replays a message captured from
another task. ``covey.run_job`` carries none: it is the wire contract, open to any
client, and everything else about a job is read from its ledger.

The secret is ``COVEY_SECRET``, and never in Redis: whoever reaches the broker
must not be able to read it there. Without it, workers whose broker is on this
host share a random one kept in a file only its owner reads
(``$XDG_STATE_HOME/covey/secret``, else ``~/.local/state/covey/secret``), made by
the first worker that needs it; a worker whose broker is elsewhere refuses to
start, since workers on other hosts could not share that file.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from covey.errors import CoveyError
from covey.wire import canonical

SECRET_BYTES = 32
LOCAL_SCHEMES = ("redis+socket", "unix", "socket")  # a Unix socket is on this host
LOCAL_NAMES = ("localhost",)


class SecretRequired(CoveyError, ValueError):
    """No ``COVEY_SECRET`` for a broker that workers on other hosts reach."""


def sign(secret: bytes, task_id: str, payload: Any) -> str:
    """The signature of ``payload`` as carried by the task ``task_id``, and by no other."""
    return hmac.new(secret, canonical({"task_id": task_id, "payload": payload}), hashlib.sha256).hexdigest()


def valid(secret: bytes, task_id: str, payload: Any, signature: Any) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign(secret, task_id, payload), signature)


def shared_secret(configured: str | None, broker_url: str) -> bytes:
    """``COVEY_SECRET``; else, for a broker on this host, the host's secret file.

    Raises ``SecretRequired`` (one line saying what to set) for a broker elsewhere,
    and for a secret file that others may read."""
    if configured:
        return configured.encode()
    if not on_this_host(broker_url):
        raise SecretRequired(
            "COVEY_SECRET is unset and the broker is not on this host: set COVEY_SECRET to the same random "
            "string on every worker (e.g. the output of `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return host_secret(secret_path())


def on_this_host(url: str) -> bool:
    """Whether every host the URL names (Sentinel URLs name several, split by ``;``) is a loopback one."""
    return all(_local(part.strip()) for part in url.split(";") if part.strip())


def _local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return True
    host = parts.hostname
    if host is None or host in LOCAL_NAMES:  # no host: the client's default, localhost
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def secret_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "covey" / "secret"


def host_secret(path: Path) -> bytes:
    """The secret in ``path``, made first if there is none: written whole to a private
    file and linked into place, so concurrent workers all read the one that won."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(SECRET_BYTES))
            os.link(draft, path)
        except FileExistsError:  # another worker made it first: use theirs
            pass
        finally:
            draft.unlink(missing_ok=True)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretRequired(
            f"the secret file {path} may be read by others (mode {stat.filemode(mode)}): "
            f"chmod 600 it, or set COVEY_SECRET"
        )
    secret = path.read_bytes().strip()
    if not secret:
        raise SecretRequired(f"the secret file {path} is empty: delete it, or set COVEY_SECRET")
    return secret
