// A job's page, kept live: the job's events (Server-Sent Events, after the last
// one the page was drawn from) add agents to the tree, move their status, and add
// each call's spend to its agent and the agents above it (a live agent's row
// counts its subtree, as its ledger row does; an ended one's is its node's, exact);
// a settled model call has the ledger read again (at most once a second). The
// buttons post JSON to the page's own origin.
"use strict";
(function () {
  const page = document.getElementById("job");
  const job = page.dataset.job;
  const base = "/jobs/" + encodeURIComponent(job);
  const tbody = document.querySelector("#tree tbody");
  const rows = new Map();
  for (const row of tbody.rows) rows.set(row.dataset.agent, row);

  function at(event) {  // an event's time, from its id: "<milliseconds>-<n>"
    return new Date(Number(event.lastEventId.split("-")[0]));
  }

  function setStatus(row, status, why) {
    row.className = "agent " + status;
    const badge = row.querySelector(".status");
    badge.className = "status " + status;
    badge.textContent = status;
    row.querySelector(".why").textContent = why || "";
  }

  function addAgent(e) {
    if (rows.has(e.agent_id)) return rows.get(e.agent_id);
    const row = document.getElementById("agent-row").content.firstElementChild.cloneNode(true);
    const parent = e.parent_id ? rows.get(e.parent_id) : null;
    const depth = parent ? Number(parent.dataset.depth) + 1 : 0;
    row.dataset.agent = e.agent_id;
    row.dataset.parent = e.parent_id || "";
    row.dataset.depth = depth;
    row.dataset.started = "";
    const link = row.querySelector(".name a");
    link.textContent = e.agent_id;
    link.href = base + "/agents/" + encodeURIComponent(e.agent_id);
    row.querySelector(".name").style.paddingLeft = (0.4 + depth * 1.2) + "em";
    row.querySelector(".role").textContent = e.role || "agent";
    row.querySelector(".task").textContent = (e.task || "").replace(/\s+/g, " ").slice(0, 80);
    let next = null;  // after the parent's last descendant
    if (parent) {
      next = parent.nextElementSibling;
      while (next && Number(next.dataset.depth) > Number(parent.dataset.depth)) next = next.nextElementSibling;
    }
    tbody.insertBefore(row, next);
    rows.set(e.agent_id, row);
    document.getElementById("agent-count").textContent = rows.size;
    return row;
  }

  function tokens(usage) {
    return usage ? (usage.prompt_tokens || 0) + (usage.completion_tokens || 0) : 0;
  }

  function finish(row, e) {
    const wrapped = e.status === "completed" && e.cause;  // answered in a wrap-up call: views.why says the same
    const why = e.error ? (e.cause ? e.cause.kind + ": " : "") + e.error
      : wrapped ? "wrapped up: its " + (e.cause.resource || e.cause.kind) + " budget ran out" : "";
    setStatus(row, e.status, why);
    row.dataset.final = "true";
    const usage = e.usage || {};
    row.querySelector(".tokens").textContent = tokens(usage);
    row.querySelector(".cycles").textContent = usage.cycles || 0;
    row.querySelector(".tools").textContent = usage.tool_calls || 0;
    row.querySelector(".cost").textContent = usage.cost_micros ? "$" + (usage.cost_micros / 1e6).toFixed(6) : "";
    tick(row, at(e.raw));
  }

  function addUp(agent, cell, amount, shown) {  // to the agent and every live agent above it
    for (let row = rows.get(agent); row; row = rows.get(row.dataset.parent)) {
      if (row.dataset.final === "true") continue;
      const td = row.querySelector("." + cell);
      const value = Number(td.dataset.value || td.textContent.replace(/[$,]/g, "") || 0) + amount;
      td.dataset.value = value;
      td.textContent = shown ? shown(value) : value;
    }
  }

  function tick(row, now) {
    if (!row.dataset.started) return;
    const seconds = (now - new Date(row.dataset.started)) / 1000;
    row.querySelector(".elapsed").textContent = Math.max(0, seconds).toFixed(1) + "s";
  }

  let ledgerDue = null;
  function readLedger() {
    if (ledgerDue) return;
    ledgerDue = setTimeout(async function () {
      ledgerDue = null;
      const answer = await fetch(base + "/ledger");
      if (!answer.ok) return;
      const row = await answer.json();
      const show = {tokens: [row.tokens_used, row.tokens_reserved, row.tokens_limit],
                    cost: [row.cost_used, row.cost_reserved, row.cost_limit],
                    cycles: [row.cycles_used, null, row.cycles_limit],
                    agents: [row.agents_spawned, null, row.agents_limit],
                    "tool calls": [row.tool_calls_used, null, row.tool_calls_limit]};
      for (const [name, [used, reserved, limit]] of Object.entries(show)) {
        const tr = document.querySelector('#ledger tr[data-resource="' + name + '"]');
        if (!tr) continue;
        const fmt = name === "cost" ? (v) => "$" + Number(v).toFixed(6) : (v) => String(v);
        tr.querySelector(".used").textContent = fmt(used);
        tr.querySelector(".reserved").textContent = reserved ? "+" + fmt(reserved) + " reserved" : "";
        const fill = tr.querySelector(".fill");
        if (fill && limit) fill.style.width = Math.min(100, 100 * used / limit) + "%";
      }
    }, 1000);
  }

  function addApproval(e) {
    const list = document.querySelector("#approvals ul");
    if (list.querySelector('[data-call="' + CSS.escape(e.call_id) + '"]')) return;
    const item = document.getElementById("approval-item").content.firstElementChild.cloneNode(true);
    item.dataset.call = e.call_id;
    item.querySelector(".tool").textContent = e.tool;
    item.querySelector(".args").textContent = e.arguments || "";
    item.querySelector(".agent").textContent = e.agent_id;
    list.appendChild(item);
    document.getElementById("approvals").hidden = false;
  }

  function dropApproval(callId) {
    const item = document.querySelector('#approvals [data-call="' + CSS.escape(callId) + '"]');
    if (item) item.remove();
    document.getElementById("approvals").hidden = !document.querySelector("#approvals li");
  }

  const on = {
    "agent.opened": (e) => addAgent(e),
    "agent.running": (e) => {
      const row = addAgent(e);
      if (!row.dataset.started) row.dataset.started = at(e.raw).toISOString();
      setStatus(row, "running", "");
    },
    "agent.waiting": (e) => {
      const why = e.awaiting ? "on " + e.awaiting.length + " children" : (e.wait ? e.wait.reason : "");
      setStatus(addAgent(e), "waiting", why);
    },
    "agent.finished": (e) => finish(addAgent(e), e),
    "model.started": (e) => addUp(e.agent_id, "cycles", 1),
    "model.finished": (e) => {
      if (e.usage) {
        addUp(e.agent_id, "tokens", tokens(e.usage));
        if (e.usage.cost_micros) addUp(e.agent_id, "cost", e.usage.cost_micros / 1e6, (v) => "$" + v.toFixed(6));
      }
      readLedger();
    },
    "tool.started": (e) => addUp(e.agent_id, "tools", 1),
    "approval.requested": (e) => addApproval(e),
    "approval.decided": (e) => dropApproval(e.call_id),
    "job.finished": (e) => {
      const badge = document.getElementById("job-status");
      badge.className = "status " + e.status;
      badge.textContent = e.status;
      source.close();
      setTimeout(() => location.reload(), 500);  // the final ledger and answer, drawn by the server
    },
  };

  let source = null;
  if (page.dataset.final !== "true") {
    const after = page.dataset.after;  // none: the job has no event yet, follow from its first
    source = new EventSource(base + "/events" + (after ? "?after=" + encodeURIComponent(after) : ""));
    for (const [type, handle] of Object.entries(on)) {
      source.addEventListener(type, (raw) => {
        const e = JSON.parse(raw.data);
        e.raw = raw;
        handle(e);
      });
    }
    source.addEventListener("error", (raw) => {  // the server's own "error" event has data; a lost connection none
      if (raw.data) document.getElementById("acted").textContent = raw.data;
    });
    setInterval(() => {
      const now = new Date();
      for (const row of rows.values()) if (row.dataset.final !== "true") tick(row, now);
    }, 1000);
  }

  async function post(path, body) {
    const answer = await fetch(base + path, {method: "POST", headers: {"content-type": "application/json"},
                                             body: JSON.stringify(body || {})});
    const said = await answer.json();
    if (!answer.ok) document.getElementById("acted").textContent = said.error;
    return answer.ok ? said : null;
  }

  const cancel = document.getElementById("cancel");
  if (cancel) cancel.addEventListener("click", async () => {
    if (await post("/cancel")) document.getElementById("acted").textContent = "cancelling: every agent stops at its next step";
  });
  const retry = document.getElementById("retry");
  if (retry) retry.addEventListener("click", async () => {
    const sent = await post("/retry");
    if (sent) location.href = "/jobs/" + encodeURIComponent(sent.job_id);
  });
  document.getElementById("approvals").addEventListener("click", async (click) => {
    const button = click.target.closest("button");
    if (!button) return;
    const item = button.closest("li");
    const decision = button.classList.contains("approve") ? "approved" : "denied";
    const reason = item.querySelector(".reason").value || null;
    const done = await post("/approvals/" + encodeURIComponent(item.dataset.call), {decision, reason});
    if (done) dropApproval(item.dataset.call);
  });
})();
