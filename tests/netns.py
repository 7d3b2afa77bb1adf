"""A network namespace joined to the host by its own veth link, whose cable a test
can pull and plug back in.

Host side ``10.213.X.Y+1/30``, namespace side ``10.213.X.Y+2/30`` (the /30 chosen
from the test run's pid); the namespace's loopback is up. ``cut()`` sets the
host-side veth down: the namespace side loses carrier, and whatever either end
sends over the link vanishes without an error (TCP connections stall and
retransmit; nothing resets them). A blackhole route for the /30, shadowed by the
link's own route while the link is up, keeps the host's packets for the namespace
from leaving through the default route while it is down. ``restore()`` sets it up
again, which puts the host's routes back.

Needs root and iproute2; ``NetnsUnavailable`` says why when either is missing or
the kernel refuses. Everything made is removed on the way out, whatever happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

IP_SECONDS = 30  # for one `ip` command: they take milliseconds
BLACKHOLE_METRIC = 4242  # above the link's own route (metric 0), so only used while the link is down


class NetnsUnavailable(RuntimeError):
    """No network namespaces here (not root, no ``ip``, or the kernel refused)."""


def ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_SECONDS)


def _must(*args: str) -> None:
    done = ip(*args)
    if done.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


@dataclass
class Link:
    namespace: str
    host_veth: str
    ns_veth: str
    host_address: str  # where the namespace reaches the host
    ns_address: str
    subnet: str
    down: bool = False

    def exec_args(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def cut(self) -> None:
        done = ip("link", "set", self.host_veth, "down")
        assert done.returncode == 0, f"could not cut {self.host_veth}: {done.stderr}"
        self.down = True

    def restore(self) -> None:
        if not self.down:
            return
        done = ip("link", "set", self.host_veth, "up")
        assert done.returncode == 0, f"could not restore {self.host_veth}: {done.stderr}"
        self.down = False


@contextmanager
def veth_namespace() -> Iterator[Link]:
    """A fresh namespace and veth link for this block; raises ``NetnsUnavailable``
    (before the block runs) when they cannot be made."""
    if shutil.which("ip") is None:
        raise NetnsUnavailable("no `ip` command (iproute2) to make a network namespace")
    if os.geteuid() != 0:
        raise NetnsUnavailable("network namespaces need root")
    pid = os.getpid()
    block = (pid % 16384) * 4  # one /30 of 10.213.0.0/16 per test run
    base = f"10.213.{block // 256}"
    first = block % 256
    link = Link(
        namespace=f"covey-part-{pid}",
        host_veth=f"cvh{pid}",
        ns_veth=f"cvn{pid}",
        host_address=f"{base}.{first + 1}",
        ns_address=f"{base}.{first + 2}",
        subnet=f"{base}.{first}/30",
    )
    _must("netns", "add", link.namespace)
    try:
        _must("link", "add", link.host_veth, "type", "veth", "peer", "name", link.ns_veth)
        _must("link", "set", link.ns_veth, "netns", link.namespace)
        _must("addr", "add", f"{link.host_address}/30", "dev", link.host_veth)
        _must("link", "set", link.host_veth, "up")
        _must("route", "add", "blackhole", link.subnet, "metric", str(BLACKHOLE_METRIC))
        _must("-n", link.namespace, "addr", "add", f"{link.ns_address}/30", "dev", link.ns_veth)
        _must("-n", link.namespace, "link", "set", link.ns_veth, "up")
        _must("-n", link.namespace, "link", "set", "lo", "up")
    except BaseException:
        _remove(link)
        raise
    try:
        yield link
    finally:
        _remove(link)


def _remove(link: Link) -> None:
    """Everything ``veth_namespace`` made, each step whether or not the last worked
    (deleting the namespace takes its veth end, and with it the host's)."""
    ip("netns", "del", link.namespace)
    ip("link", "del", link.host_veth)  # still there if the namespace never got its end
    ip("route", "del", "blackhole", link.subnet, "metric", str(BLACKHOLE_METRIC))
