"""``covey ui``'s pages in a real browser, on a real worker and Redis: a running
tree's page gains agents as they start without a reload, a tool call is approved
from the page and its agent goes on, a failed agent is red with its cause, the
buttons cancel and retry, and bad input is one page with its HTTP status."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Browser, Page, expect

from covey.client import Client
from tests.browser import chromium
from tests.integration.conftest import ROOT, own_worker
from tests.integration.test_durability import wait_until
from tests.integration.test_tools import covey
from tests.integration.test_ui_events import served
from tests.redis_server import RedisServer

pytestmark = pytest.mark.slow  # a browser and a worker of their own: the full suite's (.ci/run installs chromium)

RED = "rgb(198, 40, 40)"
SECRET = "sk-covey-ui-test-4f1d9b"  # an API key the UI's own environment holds


@dataclass(frozen=True)
class Site:
    """``covey ui`` (at ``base``) on a worker and Redis of the module's own, and a browser."""

    base: str
    client: Client
    browser: Browser
    server: RedisServer


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sweeps")


@pytest.fixture(scope="module")
def site(sweeps):
    env = {"COVEY_TOOLS": "tests.integration.served_tools", "PYTHONPATH": str(ROOT)}
    with own_worker(4, **env) as (server, client), chromium() as browser:
        os.environ["OPENAI_API_KEY_FOR_UI_TEST"] = SECRET
        try:
            with served(server.url, "--sweeps", str(sweeps)) as base:
                yield Site(base, client, browser, server)
        finally:
            os.environ.pop("OPENAI_API_KEY_FOR_UI_TEST")


@pytest.fixture
def page(site):
    base, browser = site.base, site.browser
    page = browser.new_page(base_url=base)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    page.close()
    assert errors == [], errors  # no script of the page failed


def test_a_running_trees_page_gains_its_agents_as_they_start_without_a_reload(site, page: Page):
    client = site.client
    job = client.submit(client.spec("[sim:spawn width=3 depth=2] [sim:latency 1200] What is 2 + 3?"))
    wait_until(lambda: job.status() != "unknown", "the job to be recorded")
    page.goto(f"/jobs/{job.id}")
    first = page.locator("tr.agent").count()
    page.evaluate("window.stayed = true")  # gone if the page were loaded again
    expect(page.locator("tr.agent")).to_have_count(13, timeout=60_000)
    assert first < 13 and page.evaluate("window.stayed === true")
    root = page.locator('tr.agent[data-agent="root"]')
    expect(root.locator(".status")).to_have_text("waiting")  # on its children, with what it spent so far
    assert int(root.locator(".tokens").inner_text()) > 0 and int(root.locator(".cycles").inner_text()) >= 1
    order = page.eval_on_selector_all("tr.agent", "rows => rows.map(r => [r.dataset.agent, r.dataset.parent])")
    seen: set[str] = set()
    for agent, parent in order:  # every agent below its parent, as the tree is read
        assert not parent or parent in seen, (agent, parent, order)
        seen.add(agent)
    expect(page.locator("#job-status")).to_have_text("completed", timeout=60_000)
    expect(page.locator("#answer pre")).to_have_text("leaves=9")  # drawn again at its end
    expect(page.locator("tr.agent.completed")).to_have_count(13)
    result = job.result(timeout=10)
    assert int(root.locator(".tokens").inner_text()) == result.usage.total_tokens


def test_a_call_approved_from_the_page_runs_once_and_its_agent_goes_on(site, page: Page, tmp_path: Path):
    client = site.client
    tally = tmp_path / "tally"
    task = f'[sim:call tally {{"path": "{tally}"}}] count'
    job = client.submit(client.spec(task, tools=["tally"], approve=["tally"]))
    page.goto(f"/jobs/{job.id}")  # before or after the call asks: the page shows it either way
    waiting = page.locator("#approvals li.approval")
    expect(waiting).to_have_count(1, timeout=60_000)
    expect(waiting.locator(".tool")).to_have_text("tally")
    assert json.loads(waiting.locator(".args").inner_text()) == {"path": str(tally)}
    waiting.locator("button.approve").click()
    expect(page.locator("#job-status")).to_have_text("completed", timeout=60_000)
    assert job.result(timeout=10).output.startswith("tallied")
    assert len(tally.read_text().splitlines()) == 1
    expect(page.locator("#approvals")).to_be_hidden()


def test_a_call_denied_from_the_page_never_runs_and_the_model_reads_why(site, page: Page, tmp_path: Path):
    client = site.client
    tally = tmp_path / "tally"
    task = f'[sim:call tally {{"path": "{tally}"}}] count'
    job = client.submit(client.spec(task, tools=["tally"], approve=["tally"]))
    page.goto(f"/jobs/{job.id}")
    waiting = page.locator("#approvals li.approval")
    expect(waiting).to_have_count(1, timeout=60_000)
    waiting.locator("input.reason").fill("not on a Sunday")
    waiting.locator("button.deny").click()
    expect(page.locator("#job-status")).to_have_text("completed", timeout=60_000)
    assert not tally.exists()
    transcript = job.transcript()
    assert transcript is not None
    assert any("not on a Sunday" in e.result for e in transcript.events if e.kind == "tool")


def test_a_failed_agent_is_red_with_its_cause_and_its_transcript_a_click_away(site, page: Page):
    client = site.client
    job = client.submit(client.spec("[sim:fail 500] explain tides"))
    assert job.result(timeout=60).status == "failed"
    page.goto(f"/jobs/{job.id}")
    root = page.locator('tr.agent[data-agent="root"]')
    expect(root).to_have_class("agent failed")
    expect(root.locator(".why")).to_contain_text("model_error: model call failed: HTTP 500")
    assert root.locator(".status").evaluate("b => getComputedStyle(b).color") == RED
    expect(page.locator("#answer .error")).to_contain_text("failed (model_error)")
    root.locator(".name a").click()
    expect(page.locator("h1")).to_contain_text("Agent root")
    expect(page.locator("ol.transcript li.model .error")).to_contain_text("HTTP 500")


def test_an_agent_that_wrapped_up_says_so_live_and_on_its_page(site, page: Page):
    """Its budget ran out and it answered without tools: completed, and the row says
    why its answer may be short, whether the page saw it end or was drawn after."""
    client = site.client
    job = client.submit(client.spec("[sim:latency 1500] What is 2 * 21?", budget={"max_tokens": 800}))
    page.goto(f"/jobs/{job.id}")
    live = page.locator('tr.agent[data-agent="root"]')
    expect(live.locator(".why")).to_have_text("wrapped up: its tokens budget ran out", timeout=60_000)
    assert job.result(timeout=10).wrapped_up
    page.reload()
    expect(live).to_have_class("agent completed")
    expect(live.locator(".why")).to_have_text("wrapped up: its tokens budget ran out")
    live.locator(".name a").click()
    expect(page.locator("dd.why")).to_have_text("wrapped up: its tokens budget ran out")


def test_cancel_stops_a_running_job_and_retry_sends_a_finished_one_again(site, page: Page):
    client = site.client
    job = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 3000] What is 2 + 3?"))
    wait_until(lambda: job.status() in ("running", "waiting"), "the job to start")
    page.goto(f"/jobs/{job.id}")
    page.locator("#cancel").click()
    expect(page.locator("#job-status")).to_have_text("cancelled", timeout=60_000)
    assert job.result(timeout=10).status == "cancelled"
    page.locator("#retry").click()
    page.wait_for_url(lambda url: job.id not in url, timeout=30_000)
    again = client.job(page.url.rsplit("/", 1)[1])
    expect(page.locator("#job-status")).to_have_text("completed", timeout=60_000)
    assert again.result(timeout=10).output == "leaves=2"


def test_the_jobs_page_lists_the_newest_filtered_by_status_and_tenant_and_finds_one_by_id(site, page: Page):
    client = site.client
    done = client.submit(client.spec("What is 2 + 3?"))
    failed = client.submit(client.spec("[sim:fail 500] explain tides"))
    done.result(timeout=60), failed.result(timeout=60)
    page.goto("/jobs")
    expect(page.locator(f'tr.job[data-job="{done.id}"] .status')).to_have_text("completed")
    row = page.locator(f'tr.job[data-job="{done.id}"]')
    assert int(row.locator("td.n").first.inner_text()) == done.result(timeout=1).usage.total_tokens
    page.locator('input[name=status][value="failed"]').check()
    page.locator(".filters button").click()
    expect(page.locator(f'tr.job[data-job="{failed.id}"]')).to_have_count(1)
    expect(page.locator(f'tr.job[data-job="{done.id}"]')).to_have_count(0)
    statuses = page.locator("tr.job .status").all_inner_texts()
    assert statuses and set(statuses) == {"failed"}
    page.goto("/jobs?tenant=nobody")
    expect(page.locator("p.empty")).to_have_text("no jobs match")
    page.locator("header input[name=q]").fill(done.id)
    page.locator("header input[name=q]").press("Enter")
    expect(page.locator("h1 .id")).to_have_text(done.id)


def test_bad_input_is_one_clear_page_or_line_with_its_status_and_no_secret_anywhere(site):
    base, client = site.base, site.client
    job = client.submit(client.spec("What is 2 + 3?"))
    job.result(timeout=60)
    pages = {
        "/jobs/no-such-job": (404, "no job 'no-such-job' here"),
        f"/jobs/{job.id}/agents/nobody": (404, f"job {job.id} has no agent 'nobody'"),
        "/jobs/no-such-job/agents/root": (404, "no job 'no-such-job' here"),
        "/jobs?status=lost": (400, "no status 'lost'"),
        "/jobs?limit=many": (400, "limit 'many'"),
        "/jobs/no-such-job/ledger": (404, "no job 'no-such-job' here"),
    }
    for path, (status, said) in pages.items():
        answer = httpx2.get(base + path, timeout=10)
        assert (answer.status_code, said in html.unescape(answer.text)) == (status, True), (path, answer.text)
        assert "Traceback" not in answer.text
    post = f"{base}/jobs/{job.id}/approvals/no-such-call"
    assert httpx2.post(post, json={"decision": "approved"}, timeout=10).status_code == 409  # the job ended
    assert httpx2.post(post, json={"decision": "maybe"}, timeout=10).json() == {
        "error": 'give "decision": "approved" or "denied"'
    }
    assert httpx2.post(f"{base}/jobs/no-such-job/cancel", timeout=10).status_code == 404
    assert httpx2.post(f"{base}/jobs/{job.id}/cancel", content=b"{", timeout=10).status_code == 400
    forged = httpx2.post(f"{base}/jobs/{job.id}/retry", headers={"Origin": "https://elsewhere.example"}, timeout=10)
    assert forged.status_code == 403 and "may not act here" in forged.json()["error"]

    gone = client.submit(client.spec("What is 3 + 4?"))
    gone.result(timeout=60)
    for key in list(client.redis.scan_iter(match=f"*{gone.id}*")):  # as its records expire: each key goes
        client.redis.delete(key)
    expired = httpx2.get(f"{base}/jobs/{gone.id}", timeout=10)
    assert expired.status_code == 404 and "its records expired" in expired.text

    shown = [
        httpx2.get(base + path, timeout=10).text for path in ("/jobs", f"/jobs/{job.id}", f"/jobs/{job.id}/agents/root")
    ]
    shown.append(httpx2.get(f"{base}/jobs/{job.id}/events", timeout=30).text)
    for text in shown:
        assert SECRET not in text and client.settings.redis_url not in text


def test_a_sweeps_page_shows_each_configuration_and_a_samples_page_shows_them_side_by_side(site, sweeps, page: Page):
    arith = ["examples/arithmetic.jsonl", "--grid", "examples/arithmetic.toml", "--limit", "4"]
    swept = covey(site.server, "sweep", *arith, "--out", str(sweeps / "arith"))
    assert swept.returncode == 0, swept.stderr
    page.goto("/sweeps")
    page.locator("a", has_text="arith").click()
    configs = page.locator("tr.config")
    expect(configs).to_have_count(2)
    assert configs.evaluate_all("rows => rows.map(r => r.dataset.config)") == ["sim/react", "sim/single"]
    expect(configs.locator(".accuracy")).to_have_text(["100.0%", "100.0%"])
    page.wait_for_function("document.querySelector('img.chart').complete", timeout=30_000)  # it may still be loading
    assert page.locator("img.chart").evaluate("img => img.naturalWidth > 0")
    expect(page.locator("tr.sample")).to_have_count(4)
    expect(page.locator("tr.sample").first.locator(".status.right")).to_have_count(2)

    page.locator("tr.sample a").first.click()
    units = page.locator("section.unit")
    expect(units).to_have_count(2)
    assert units.evaluate_all("s => s.map(u => u.dataset.config)") == ["sim/react", "sim/single"]
    for unit in units.all():  # each configuration's answer, and its root's transcript from Redis
        assert unit.locator(".output").inner_text() == unit.locator("dd pre").nth(1).inner_text()
        expect(unit.locator("ol.transcript li.model").first).to_be_visible()
    expect(units.nth(0).locator("li.tool")).to_have_count(1)  # react asked the calculator; single did not
    expect(units.nth(1).locator("li.tool")).to_have_count(0)


def test_a_malformed_or_unknown_sweep_is_one_clear_page(site, sweeps):
    base = site.base
    broken = sweeps / "broken"
    broken.mkdir()
    (broken / "results.jsonl").write_text('{"unit": "u1"}\nnot json\n{"unit": "u2"}\n')
    answers = {
        "/sweeps/broken": (422, "results.jsonl line 1"),
        "/sweeps/broken/samples/x": (422, "results.jsonl line 1"),
        "/sweeps/nothing-here": (404, "no sweep 'nothing-here'"),
        "/sweeps/%2E%2E": (404, "no sweep '..'"),  # never the folder above
        "/sweeps/..%2F..%2Fetc": (404, "Not Found"),  # no route takes a path with a slash as a sweep
    }
    for path, (status, said) in answers.items():
        answer = httpx2.get(base + path, timeout=10)
        assert (answer.status_code, said in html.unescape(answer.text)) == (status, True), (path, answer.text)
        assert "Traceback" not in answer.text
