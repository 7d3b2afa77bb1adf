"""The job's shared workspace, in Redis so every worker on every machine sees it.

Any agent reads the whole workspace; an agent writes only below its own subroot
(children: ``.sub_agents/<agent_id>``). Paths are normalised and anything that
would escape is refused. One tool call at a time writes a job's workspace
(``writing``), whichever agents call them and whatever a strategy labels them,
so a write never interleaves with another's read-modify-write.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from covey import keys
from covey.errors import CoveyError

MAX_FILE_BYTES = 256 * 1024  # one file; keeps a runaway agent from filling Redis
MAX_FILES = 1000  # per job


class WorkspaceError(CoveyError, ValueError):
    """A refused read or write; the message is shown to the model as the tool result."""


def normalise(path: str, root: str = "") -> str:
    """``path`` relative to ``root``, as a clean relative path, or ``WorkspaceError``."""
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("path is empty")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        raise WorkspaceError(f"path {path!r} must be relative, with / separators")
    joined = posixpath.normpath(posixpath.join(root or ".", path))
    inside = root == "" or joined.startswith(root + "/")
    if joined in (".", "") or joined.startswith("..") or not inside:
        raise WorkspaceError(f"path {path!r} escapes {root or 'the workspace'}")
    return joined


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
        clean = normalise(path)
        content = self._redis.hget(self._key, clean)
        if content is None:
            raise WorkspaceError(f"no file {clean!r}")
        return content.decode() if isinstance(content, bytes) else content

    def own(self, subroot: str, path: str) -> str:
        """The workspace path ``write(subroot, path, ...)`` writes, or ``WorkspaceError``."""
        return normalise(path, subroot)

    def write(self, subroot: str, path: str, content: str) -> str:
        """Write ``path`` below ``subroot``; returns the workspace path written."""
        clean = self.own(subroot, path)
        if len(content.encode()) > MAX_FILE_BYTES:
            raise WorkspaceError(f"file too large: over {MAX_FILE_BYTES} bytes")
        if not self._redis.hexists(self._key, clean) and self._redis.hlen(self._key) >= MAX_FILES:
            raise WorkspaceError(f"workspace full: {MAX_FILES} files")
        pipe = self._redis.pipeline()
        pipe.hset(self._key, clean, content)
        pipe.expire(self._key, self._job_ttl)
        pipe.execute()
        return clean

    def files(self) -> list[str]:
        return sorted(k.decode() if isinstance(k, bytes) else k for k in self._redis.hkeys(self._key))
