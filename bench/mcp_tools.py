"""What one MCP tool call costs an agent, against calling the function directly.

Run from the repo root: ``python bench/mcp_tools.py [--calls N] [--rounds R] [--json PATH]``.

The example server's ``forecast`` (``examples/tools/mcp_server.py``) is called five
ways: as a Python function; through the ``mcp`` SDK's own client in its own loop,
over stdio and over streamable HTTP on loopback (what the protocol and transport
cost); and as the ``Tool`` covey's worker runs, over each transport (what an
agent's call costs: the SDK's client plus covey's hop from the worker's sync slot
to the sessions' loop). Each round times N calls of each way after a warm-up, on a
session of its own for the MCP ways (opened outside the timing), the ways taking
turns going first; the figures are medians over rounds, so a slow spell on a
shared machine falls on every way alike. The HTTP server is
started here on a free port and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/mcp_tools.py` puts bench/, not the root, on the path

from mcp import Client, StdioServerParameters

from bench.harness import interruptible, report
from tests.redis_server import free_port

COMMAND = "python bench/mcp_tools.py"
EXAMPLE = ROOT / "examples" / "tools" / "mcp_server.py"
ARGUMENTS = {"city": "Lyon"}
START_SECONDS = 30
WAYS = ("direct", "hop", "sdk stdio", "sdk http", "covey stdio", "covey http")


def _example_function() -> Callable[[str], str]:
    spec = importlib.util.spec_from_file_location("example_mcp_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Building an MCPServer sets the root logger to INFO, which would log (and time)
    # every HTTP request the clients here make.
    logging.getLogger().setLevel(logging.WARNING)
    return module.forecast


def _http_server(stack: ExitStack, logs: Path) -> str:
    """The example server over streamable HTTP on a free loopback port; its URL."""
    port = free_port()
    code = (
        f"import runpy; server = runpy.run_path({str(EXAMPLE)!r})['server']; server.run('streamable-http', port={port})"
    )
    with open(logs / "mcp-http-server.log", "w") as log:  # it logs every request
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)
    stack.callback(lambda: (proc.kill(), proc.wait()))
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the example MCP server did not listen on {port} in {START_SECONDS}s") from None
            time.sleep(0.05)


def _sdk_seconds(server: StdioServerParameters | str, calls: int, warmup: int) -> tuple[float, float]:
    """Seconds per call through the SDK's client alone, awaited in its own loop."""

    async def run() -> tuple[float, float]:
        async with Client(server) as client:
            for _ in range(warmup):
                await client.call_tool("forecast", ARGUMENTS)
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                await client.call_tool("forecast", ARGUMENTS)
            return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls

    return asyncio.run(run())


async def _nothing() -> None:
    """What the hop alone costs: a coroutine that does nothing, run on the sessions' loop."""


def _seconds(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """Wall and CPU seconds (of this process: a server's own are not counted) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def measure(calls: int, rounds: int, warmup: int, logs: Path) -> dict:
    from covey.tools.mcp import loop  # not in a tree from before MCP tools
    from covey.tools.mcp.servers import McpServers
    from covey.tools.tool import ToolContext

    context = ToolContext(job_id="bench", agent_id="bench", call_id="call", workspace=None)  # MCP tools read call_id

    def covey_seconds(table: str) -> tuple[float, float]:
        """Seconds per call of the server's tool as covey's worker runs it; like the SDK's
        way, each round opens its own session (outside the timing)."""
        path = logs / "mcp.toml"
        path.write_text(table)
        servers = McpServers.load(path)
        try:
            (tool,) = servers.tools()
            for _ in range(warmup):
                tool.run(ARGUMENTS, context)
            return _seconds(lambda: tool.run(ARGUMENTS, context), calls)
        finally:
            servers.close()

    forecast = _example_function()
    with ExitStack() as stack:
        url = _http_server(stack, logs)
        stdio = StdioServerParameters(command=sys.executable, args=[str(EXAMPLE)])
        ways: dict[str, Callable[[], tuple[float, float]]] = {
            "direct": lambda: _seconds(lambda: forecast(**ARGUMENTS), calls * 100),  # too quick to time a few
            "hop": lambda: _seconds(lambda: loop.run(_nothing(), START_SECONDS), calls),
            "sdk stdio": lambda: _sdk_seconds(stdio, calls, warmup),
            "sdk http": lambda: _sdk_seconds(url, calls, warmup),
            "covey stdio": lambda: covey_seconds(
                f'[servers.stdio]\ncommand = "{sys.executable}"\nargs = ["{EXAMPLE}"]\n'
            ),
            "covey http": lambda: covey_seconds(f'[servers.http]\nurl = "{url}"\n'),
        }
        samples: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
        for i in range(rounds):
            order = WAYS[i % len(WAYS) :] + WAYS[: i % len(WAYS)]  # each way goes first in turn
            for way in order:
                samples[way].append(ways[way]())
    return {
        "calls": calls,
        "rounds": rounds,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "seconds_per_call": {way: statistics.median(wall for wall, _ in got) for way, got in samples.items()},
        "cpu_seconds_per_call": {way: statistics.median(cpu for _, cpu in got) for way, got in samples.items()},
    }


def table(after: dict) -> str:
    wall, cpu = after["seconds_per_call"], after["cpu_seconds_per_call"]

    def row(name: str, way: str, sdk: str | None = None) -> str:
        versus = f"{wall[way] / wall[sdk]:.2f}× | {cpu[way] / cpu[sdk]:.2f}×" if sdk else "— | —"
        times = f"{wall[way] / wall['direct']:,.0f}×" if way != "direct" else "—"
        return f"| {name} | {wall[way] * 1e6:,.1f} | {times} | {cpu[way] * 1e6:,.1f} | {versus} |"

    lines = [
        "| way | µs per call | × the direct call | CPU µs per call, client | covey / SDK | covey / SDK, CPU |",
        "|---|---:|---:|---:|---:|---:|",
        row("direct Python call", "direct"),
        row("covey's hop alone (a sync slot to the sessions' loop and back)", "hop"),
    ]
    for transport, name in (("stdio", "stdio"), ("http", "streamable HTTP")):
        lines.append(row(f"SDK client, {name}", f"sdk {transport}"))
        lines.append(row(f"covey tool, {name}", f"covey {transport}", f"sdk {transport}"))
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """This benchmark's section of BENCHMARKS.md: the figures of this tree alone (a commit
    from before MCP tools has none to set beside them)."""
    return f"""## MCP tool calls (`bench/mcp_tools.py`)

One call of the example server's `forecast` tool (`examples/tools/mcp_server.py`)
as a direct Python call, through the `mcp` SDK's client awaited in its own loop,
and as the tool covey's worker runs (the SDK's client on the process's MCP loop,
reached from the worker's sync slot), over stdio and over streamable HTTP on
loopback. Medians of {after["rounds"]} interleaved rounds of {after["calls"]:,} calls
each, on a fresh session after a warm-up, on {after["cores"]} cores and Python {after["python"]}; the
microseconds depend on the machine and its load; "covey / SDK" is what the hop
from a sync slot to the loop adds, in time and in the client process's CPU (the
server's own is not counted).

Command (from the repo root; it starts the servers it calls):

```
{COMMAND}
```

{table(after)}
"""


def _has_mcp_tools() -> bool:
    try:
        return importlib.util.find_spec("covey.tools.mcp") is not None
    except ModuleNotFoundError:  # not even covey.tools
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls of each way per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=30, help="calls of each way before the rounds")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    if not _has_mcp_tools():  # `bench/all.py --before` an older commit
        print("this covey has no MCP tools", file=sys.stderr)
        if args.json:
            args.json.write_text("{}\n")
        return
    report(lambda logs: measure(args.calls, args.rounds, args.warmup, logs), table, args.json)


if __name__ == "__main__":
    interruptible(main)
