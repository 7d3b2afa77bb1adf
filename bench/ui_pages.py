"""How fast ``covey ui`` draws a job's page in a browser, and whether it keeps up
while a big tree runs.

On a private Redis, a ``covey worker`` with its defaults and a ``covey ui``, in
Debian's chromium (headless, driven by Playwright):

- **drawn**: a finished job's page, from navigation to the load event, for a
  931-agent tree (``[sim:spawn width=30 depth=2]``) and, as the baseline in the
  same rounds, a 13-agent one; rounds interleave the two, medians are shown;
- **live**: the 931-agent page opened as its job is sent: every agent's row
  appears without a reload (counted), the delay from an agent's ``agent.opened``
  event (the time in its id) to its row in the page (p50, p95), and how long the
  page's main thread was kept from answering meanwhile (the longest lag of a
  100 ms timer, and the sum of its long tasks).

Run from the repo root: ``python bench/ui_pages.py [--rounds 5] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Browser, sync_playwright

from bench.harness import Worker, interruptible, private_redis, report
from covey.client import Client
from covey.config.settings import Settings
from covey.events import EventType
from tests.integration.conftest import UI_SAYS, said_address

QUEUE = "bench-ui"
BIG = "[sim:spawn width=30 depth=2] [sim:latency 300] bench"  # 1 + 30 + 900 agents
SMALL = "[sim:spawn width=3 depth=2] [sim:latency 300] bench"  # 1 + 3 + 9
WATCH = """
window.lags = []; window.longTasks = 0; window.rowsAt = {};
let last = performance.now();
setInterval(() => { const now = performance.now(); window.lags.push(now - last - 100); last = now; }, 100);
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks += e.duration; })
  .observe({type: "longtask", buffered: true});
new MutationObserver((changes) => {
  for (const c of changes) for (const n of c.addedNodes) {
    const agent = n.dataset && n.dataset.agent;
    if (agent && !(agent in window.rowsAt)) window.rowsAt[agent] = Date.now();
  }
}).observe(document, {childList: true, subtree: true});
"""


def serve(stack: ExitStack, redis_url: str, logs: Path) -> str:
    """``covey ui`` on a port it picks, listening; its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update(COVEY_REDIS_URL=redis_url, COVEY_QUEUE=QUEUE, PYTHONPATH=str(ROOT))
    log = (logs / "ui.log").open("w")
    stack.callback(log.close)
    proc = subprocess.Popen(
        [sys.executable, "-m", "covey", "ui", "--port", "0"], env=env, cwd=ROOT, stdout=log, stderr=log
    )
    stack.callback(proc.wait, 10)
    stack.callback(proc.terminate)
    return said_address(proc, Path(log.name), UI_SAYS, "covey ui")


def drawn_ms(browser: Browser, url: str) -> float:
    page = browser.new_page()
    try:
        page.goto(url, wait_until="load")
        return page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    finally:
        page.close()


def live(browser: Browser, client: Client, base: str) -> dict:
    """The big tree's page opened as its job is sent, watched to its end."""
    page = browser.new_page()
    page.add_init_script(WATCH)
    try:
        job = client.submit(client.spec(BIG))
        while job.status() == "unknown":
            time.sleep(0.05)
        page.goto(f"{base}/jobs/{job.id}")
        page.evaluate("window.stayed = true")
        page.wait_for_function("document.querySelectorAll('tr.agent').length === 931", timeout=600_000)
        stayed = page.evaluate("window.stayed === true")
        lags, long_tasks, rows_at = page.evaluate("[window.lags, window.longTasks, window.rowsAt]")
        assert job.result(timeout=600).ok
    finally:
        page.close()
    opened = {e.agent_id: e.at for e in job.events() if e.type is EventType.AGENT_OPENED}
    delays = sorted(rows_at[a] - opened[a].timestamp() * 1000 for a in rows_at if a in opened)
    return {
        "rows": len(rows_at),
        "reloaded": not stayed,
        "delay_p50_ms": statistics.median(delays),
        "delay_p95_ms": delays[int(len(delays) * 0.95)],
        "timer_lag_max_ms": max(lags),
        "long_tasks_ms": long_tasks,
    }


def measure(logs: Path, rounds: int) -> dict:
    chromium = shutil.which("chromium")
    if chromium is None:
        raise RuntimeError("needs Debian's chromium: apt-get install chromium")
    with ExitStack() as stack:
        server, _ = private_redis(stack)
        argv = [sys.executable, "-m", "covey", "worker", "--hostname", "ui@bench"]  # every other flag its default
        worker = Worker("ui@bench", argv, server.url, QUEUE, logs)
        stack.callback(worker.stop)
        client = Client(Settings(redis_url=server.url, queue=QUEUE))
        stack.callback(client.close)
        worker.wait_ready(client.app)
        base = serve(stack, server.url, logs)
        jobs = {}
        for name, task in (("931", BIG), ("13", SMALL)):
            handle = client.submit(client.spec(task))
            assert handle.result(timeout=600).ok
            jobs[name] = handle.id
        browser = stack.enter_context(sync_playwright()).chromium.launch(executable_path=chromium)
        stack.callback(browser.close)
        drawn: dict[str, list[float]] = {name: [] for name in jobs}
        for i in range(rounds):
            for name in jobs if i % 2 == 0 else reversed(list(jobs)):
                drawn[name].append(drawn_ms(browser, f"{base}/jobs/{jobs[name]}"))
        return {
            "drawn_ms": {name: statistics.median(ms) for name, ms in drawn.items()},
            "rounds": rounds,
            "live": live(browser, client, base),
            "chromium": browser.version,
        }


def section(after: dict, before: dict | None = None) -> str:
    d, live = after["drawn_ms"], after["live"]
    return f"""## `bench/ui_pages.py`: a job's page in a browser

`python bench/ui_pages.py --rounds {after["rounds"]}`: a private Redis, `covey worker` with its
defaults, `covey ui`, headless chromium {after["chromium"]} (Playwright). A finished job's
page from navigation to its load event, median of {after["rounds"]} interleaved rounds:

| tree | drawn | against 13 agents |
|---|---|---|
| 13 agents | {d["13"]:.0f} ms | 1.00× |
| 931 agents | {d["931"]:.0f} ms | {d["931"] / d["13"]:.2f}× |

The 931-agent page opened as its job was sent: {live["rows"]} rows appeared
{"after a reload (a bug)" if live["reloaded"] else "without a reload"}; an agent's row followed its
`agent.opened` event by {live["delay_p50_ms"]:.0f} ms (p50), {live["delay_p95_ms"]:.0f} ms (p95);
the page's 100 ms timer ran at most {live["timer_lag_max_ms"]:.0f} ms late and its long tasks
summed {live["long_tasks_ms"]:.0f} ms over the run.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report(lambda logs: measure(logs, args.rounds), section, args.json)


if __name__ == "__main__":
    interruptible(main)
