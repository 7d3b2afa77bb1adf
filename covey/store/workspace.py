"""The job's shared workspace, in Redis so every worker on every machine sees it.

Any agent reads the whole workspace; an agent writes only below its own subroot
(children: ``.sub_agents/<agent_id>``). Paths are normalised and anything that
would escape is refused. One tool call at a time writes a job's workspace
(``writing``), whichever agents call them and whatever a strategy labels them,
so a write never interleaves with another's read-modify-write.

A file holds bytes: text (UTF-8) as the file tools read and write it, or an image
or other binary a tool returned or a client put (``covey.parts``). Reading one as
text is refused naming its size; ``read_bytes`` reads any.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.client import NEVER_DECODE

from covey import keys, parts
from covey.errors import CoveyError

MAX_FILE_BYTES = parts.MAX_BYTES  # one file; keeps a runaway agent from filling Redis
MAX_FILES = 1000  # per job


class WorkspaceError(CoveyError, ValueError):
    """A refused read or write; the message is shown to the model as the tool result."""


def normalise(path: str, root: str = "") -> str:
    """``path`` relative to ``root``, as a clean relative path, or ``WorkspaceError``."""
    try:
        return parts.normalise(path, root)
    except parts.BadPart as e:
        raise WorkspaceError(str(e)) from None


class Workspace:
    def __init__(self, client: redis.Redis, job_id: str, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl
        self._key = keys.workspace(job_id)
        self._writer = keys.workspace_writer(job_id)

    @contextmanager
    def writing(self, wait: float, hold: float) -> Iterator[None]:
        """Be the one writer of this workspace: wait up to ``wait`` seconds for the
        writer before, then hold it for at most ``hold`` seconds (a writer that dies
        holding it frees it then). ``WorkspaceError`` when it stays taken."""
        lock = self._redis.lock(self._writer, timeout=max(hold, 0.001), blocking_timeout=max(wait, 0.001))
        if not lock.acquire():
            raise WorkspaceError(f"another agent is writing the workspace; waited {wait:.3g}s for it")
        try:
            yield
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:  # held past ``hold``: expired, maybe taken since
                pass

    def read(self, path: str) -> str:
        """The file as text; ``WorkspaceError`` for one that is not UTF-8 (an image)."""
        clean = normalise(path)
        data = self.read_bytes(clean)
        try:
            return data.decode()
        except UnicodeDecodeError:
            kind = parts.image_type(data) or "binary"
            raise WorkspaceError(f"{clean!r} is not text: {kind}, {len(data)} bytes") from None

    def read_bytes(self, path: str) -> bytes:
        clean = normalise(path)
        # NEVER_DECODE: the raw bytes whatever the client's decode_responses (an image is no UTF-8).
        content = self._redis.execute_command("HGET", self._key, clean, **{NEVER_DECODE: True})
        if content is None:
            raise WorkspaceError(f"no file {clean!r}")
        return bytes(content)

    def own(self, subroot: str, path: str) -> str:
        """The workspace path ``write(subroot, path, ...)`` writes, or ``WorkspaceError``."""
        return normalise(path, subroot)

    def write(self, subroot: str, path: str, content: str | bytes, keep: bool = False) -> str:
        """Write ``path`` below ``subroot``; returns the workspace path written.
        ``keep``: leave a file already at that path as it is."""
        clean = self.own(subroot, path)
        data = content.encode() if isinstance(content, str) else content
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"file too large: {len(data)} bytes, over {MAX_FILE_BYTES}")
        if not self._redis.hexists(self._key, clean) and self._redis.hlen(self._key) >= MAX_FILES:
            raise WorkspaceError(f"workspace full: {MAX_FILES} files")
        pipe = self._redis.pipeline()
        if keep:
            pipe.hsetnx(self._key, clean, data)
        else:
            pipe.hset(self._key, clean, data)
        pipe.expire(self._key, self._job_ttl)
        pipe.execute()
        return clean

    def files(self) -> list[str]:
        return sorted(k.decode() if isinstance(k, bytes) else k for k in self._redis.hkeys(self._key))

    def sizes(self) -> dict[str, int]:
        """Each file's path and size in bytes, by path."""
        names = self.files()
        pipe = self._redis.pipeline()
        for name in names:
            pipe.hstrlen(self._key, name)
        return dict(zip(names, pipe.execute()))
