"""A Sentinel-managed Redis on loopback, owned by the test that starts it: a
master, a replica and three sentinels (``redis-server --sentinel``), each on a
port found free (another tried if one is taken first), with failure detection
lowered so a failover takes seconds.

``kill_master`` SIGKILLs whichever server is master now; ``restart`` brings it
back on its port, empty, as a replica of the master the sentinels promoted;
``fail_over`` does both, leaving the promoted master alone until a write has
waited on it for a replica.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from covey.cli.embedded import PORT_TRIES
from tests.redis_server import RedisServer, free_port

MASTER = "covey"  # the name the sentinels monitor it by: COVEY_REDIS_MASTER
QUORUM = 2
DOWN_AFTER_MS = 1_000  # Redis's default is 30 s: a test would wait that long before a failover starts
FAILOVER_TIMEOUT_MS = 4_000  # default 3 min; also how soon a failed-over master may fail over again
SETTLE_SECONDS = 60  # a topology that has not formed (or failed over) by then is not going to
# A promoted master runs this long without a replica, once a write waits on it for one,
# before the killed one comes back as its replica (as until its operator restarts it):
# longer than a ledger write's WAIT blocks (1 s), so that write is answered "0 replicas".
ALONE_SECONDS = 3


def wait_for(what: str, check: Callable[[], bool], seconds: float = SETTLE_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"waited {seconds}s for {what}")


def _a_write_waits(server: RedisServer) -> bool:
    """Whether a client of ``server`` is blocked in ``WAIT``, for a replica to confirm its writes."""
    with redis.Redis(port=server.port, socket_timeout=5, decode_responses=True) as client:
        return any(c["cmd"] == "wait" for c in client.client_list())


def _replicas_in_sync(server: RedisServer) -> int:
    with redis.Redis(port=server.port, socket_timeout=5, decode_responses=True) as client:
        info = client.info("replication")
    return sum(1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict) and v["state"] == "online")


class Node(RedisServer):
    """A redis-server of the topology: a replica of ``replica_of`` (a port), or a master."""

    def __init__(self, replica_of: int | None = None) -> None:
        super().__init__()
        self.replica_of = replica_of

    def persistence(self) -> list[str]:
        # Diskless full syncs start at once, not after Redis's 5 s wait for more replicas.
        role = [] if self.replica_of is None else ["--replicaof", "127.0.0.1", str(self.replica_of)]
        return [*super().persistence(), "--repl-diskless-sync-delay", "0", *role]


class Sentinel:
    """One ``redis-server --sentinel`` watching the master at ``master_port``."""

    def __init__(self, binary: str, master_port: int, directory: Path) -> None:
        for _ in range(PORT_TRIES):  # a port found free may be taken before the sentinel binds it
            self.port = free_port()
            self.config = directory / f"sentinel-{self.port}.conf"  # sentinels rewrite their config: one file each
            self.config.write_text(
                f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {master_port} {QUORUM}\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            )
            self.proc = subprocess.Popen(
                [binary, str(self.config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            self.client = redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=5, decode_responses=True)
            if self._answers():
                return
            self.stop()
        raise RuntimeError(f"no sentinel kept a port in {PORT_TRIES} tries (the last exited {self.proc.returncode})")

    def _answers(self) -> bool:
        """Whether this sentinel, not another process on its port, answers there; False
        once it has exited (its port was taken first)."""

        def answered_or_exited() -> bool:
            return self.proc.poll() is not None or self.client.info("server")["process_id"] == self.proc.pid

        wait_for(f"a sentinel to answer on port {self.port}", answered_or_exited)
        return self.proc.poll() is None

    def master_port(self) -> int:
        _, port = self.client.sentinel_get_master_addr_by_name(MASTER)
        return int(port)

    def state(self) -> dict:
        return self.client.sentinel_master(MASTER)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class SentinelRedis:
    """``with SentinelRedis() as s:`` the topology, reached at ``s.url`` with ``MASTER``."""

    def __init__(self) -> None:
        self.servers: list[Node] = []
        self.sentinels: list[Sentinel] = []
        self._dir = Path(tempfile.mkdtemp(prefix="covey-sentinel-"))

    @property
    def url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{s.port}" for s in self.sentinels)

    def start(self) -> SentinelRedis:
        try:
            master = Node()
            self.servers = [master]  # stopped with the rest if one fails to start
            master.start()  # first: it may take another port than the one it found free
            self.servers.append(Node(replica_of=master.port))
            self.servers[-1].start()
            for _ in range(3):
                self.sentinels.append(Sentinel(master.binary, master.port, self._dir))
            self.formed()
        except BaseException:
            self.stop()
            raise
        return self

    def formed(self) -> None:
        """Wait until every sentinel sees a master with a replica in sync, and its two
        peers (a failover needs a quorum and a leader)."""

        def ready() -> bool:
            master = self.master()
            if master.proc is None or _replicas_in_sync(master) < 1:
                return False
            for s in self.sentinels:
                state = s.state()
                if s.master_port() != master.port or int(state["num-other-sentinels"]) < 2:
                    return False
                replicas = s.client.sentinel_slaves(MASTER)
                if state.get("flags") != "master" or not replicas:
                    return False
                if any(r["flags"] != "slave" for r in replicas):  # one seen down, not yet seen up again
                    return False
            return True

        wait_for("the sentinels to see a master, its replica and each other", ready)

    def master(self) -> Node:
        port = self.sentinels[0].master_port()
        return next(s for s in self.servers if s.port == port)

    def kill_master(self) -> Node:
        """SIGKILL the master now; returns it (stopped), for ``restart``."""
        master = self.master()
        assert master.proc is not None
        master.proc.send_signal(signal.SIGKILL)
        master.proc.wait()
        master.proc = None
        return master

    def failed_over(self, old: Node) -> None:
        """Wait until the sentinels have promoted a server other than ``old``."""
        wait_for(
            "the sentinels to promote the replica", lambda: all(s.master_port() != old.port for s in self.sentinels)
        )

    def restart(self, server: Node) -> None:
        """Start ``server`` again on its port, empty, as a replica of the master the
        sentinels promoted (as its operator would; left to the sentinels, a returning
        master is turned into a replica only after some ten seconds), and wait until
        it is in sync and every sentinel sees it."""
        self.failed_over(server)
        server.replica_of = self.master().port
        server.start()
        self.formed()

    def fail_over(self) -> None:
        """SIGKILL the master, wait for the promotion and for a write to wait on the
        new master for a replica, leave it alone ``ALONE_SECONDS`` more, then restart
        the killed one as its replica. Waiting for the write, not a fixed time: a
        loaded machine may take the writers longer to reach the new master than
        any fixed time alone (Celery's consumer reconnects after 2 s, then 4 s...)."""
        killed = self.kill_master()
        self.failed_over(killed)
        promoted = self.master()
        wait_for("a write to wait on the promoted master for a replica", lambda: _a_write_waits(promoted))
        time.sleep(ALONE_SECONDS)
        self.restart(killed)

    def stop(self) -> None:
        for s in self.sentinels:
            s.stop()
        for server in self.servers:
            server.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SentinelRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
