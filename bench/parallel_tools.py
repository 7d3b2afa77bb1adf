"""How long an agent waits for the tool calls of one reply: three 2 s calls.

Run from the repo root: ``python bench/parallel_tools.py``. A private redis-server
and one ``covey worker`` (one process, 4 thread slots) serving
``tests.integration.served_tools``; a react agent on the sim asks for ``nap``
(2 s) three times in one reply (``[sim:parallel 3]``), three times over. Prints
each agent's seconds from start to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/parallel_tools.py` puts bench/, not the root, on the path

from covey.client import Client
from covey.config.settings import Settings
from tests.redis_server import RedisServer


def main() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    with RedisServer() as server, tempfile.TemporaryDirectory() as directory:
        env.update(COVEY_REDIS_URL=server.url, COVEY_MODEL="sim", COVEY_TOOLS="tests.integration.served_tools")
        env["PYTHONPATH"] = str(ROOT)
        argv = [sys.executable, "-m", "covey", "worker", "--processes", "1", "--concurrency", "4"]
        worker = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = Client(Settings(redis_url=server.url))
        try:
            deadline = time.monotonic() + 60
            while not client.queue_has_worker() and time.monotonic() < deadline:
                time.sleep(0.5)
            for i in range(3):
                task = f'Nap. [sim:parallel 3] [sim:call nap {{"seconds": 2, "path": "{directory}/naps-{i}"}}]'
                result = client.run(client.spec(task, tools=["nap"]), timeout=60)
                print(f"agent {i + 1}: {(result.finished_at - result.started_at).total_seconds():.2f} s")
        finally:
            worker.terminate()
            worker.wait()
            client.close()


if __name__ == "__main__":
    main()
