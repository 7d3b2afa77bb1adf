"""MCP tools on the gevent pool: the sessions' loop thread is a greenlet there, and a
slot waiting on a slow call must not hold up the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.tools.mcp.conftest import ROOT, stdio_table

SLOTS = 20
SCRIPT = f"""
from gevent import monkey; monkey.patch_all()
import sys
from pathlib import Path
import gevent
from covey.tools.mcp.servers import McpServers
from covey.tools.tool import ToolContext

servers = McpServers.load(Path(sys.argv[1]))
tools = {{tool.name: tool for tool in servers.tools()}}
context = ToolContext("j", "a", "c", None)
marker = Path(sys.argv[2])
hung = gevent.spawn(tools["local__hang"].run, {{"marker": str(marker), "seconds": 600}}, context)
while not marker.exists():
    gevent.sleep(0.02)
slots = [gevent.spawn(tools["local__echo"].run, {{"text": str(i)}}, context) for i in range({SLOTS})]
gevent.joinall(slots, timeout=60, raise_error=True)
print(not hung.ready(), sorted(slot.value for slot in slots))
hung.kill()
servers.close()
"""


def test_greenlet_slots_call_while_another_call_hangs(tmp_path: Path):
    path = tmp_path / "mcp.toml"
    path.write_text(stdio_table())
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), str(tmp_path / "hang-started")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = sorted(str(i) for i in range(SLOTS))
    assert done.stdout.strip() == f"True {answers}"
