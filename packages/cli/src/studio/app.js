// Keel studio's page: plain DOM, no framework, no build. Every text from the log goes through esc().
const $ = (sel) => document.querySelector(sel);
const state = {
  q: "",
  selected: null,
  detail: null,
  openTurns: new Set(),
  openRequests: new Set(),
  approvals: false,
  polling: false,
  // "session", or the experiment list / one experiment (then `experiment` is its id).
  view: "session",
  experiment: null,
  openCases: new Set(),
};
// The token came in this file's own URL; it goes in a header, never in a cookie (every port of 127.0.0.1 would get one).
const TOKEN = new URL(import.meta.url).searchParams.get("token") ?? "";
const POLL_MS = 700;

const esc = (v) =>
  String(v ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );
// Numbers from the log are shown only when they are numbers (a tampered store could put markup there).
const ms = (v) =>
  typeof v !== "number" || !Number.isFinite(v)
    ? ""
    : v >= 10_000
      ? `${(v / 1000).toFixed(1)} s`
      : v >= 1000
        ? `${(v / 1000).toFixed(2)} s`
        : v >= 10
          ? `${Math.round(v)} ms`
          : `${v.toFixed(2)} ms`;
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v.toLocaleString("en-US") : "");
const when = (t) => new Date(t).toLocaleString();
const badge = (status) => `<span class="badge status-${esc(status)}">${esc(status)}</span>`;
const plugins = (list) =>
  list?.length
    ? list.map((p) => `<span class="plugin">${esc(p)}</span>`).join(", ")
    : '<span class="muted">kernel</span>';

// Dollars: small amounts keep their digits (a cent is many requests of a small model).
const money = (v) =>
  typeof v !== "number" || !Number.isFinite(v) ? "" : `$${v >= 0.01 || v === 0 ? v.toFixed(4) : v.toPrecision(2)}`;
/** A turn's or the session's cost: the priced requests' sum, and how many had no price. */
const costText = (c) =>
  !c || typeof c.priced !== "number"
    ? ""
    : c.priced === 0
      ? c.unpriced
        ? "cost unknown (no price for the model)"
        : ""
      : `${money(c.usd)}${c.unpriced ? ` + ${num(c.unpriced)} unpriced request(s)` : ""}`;
const timeOf = (t) => (typeof t === "number" && Number.isFinite(t) ? new Date(t).toLocaleTimeString() : "");

async function api(path, init = {}) {
  const res = await fetch(path, {
    ...init,
    credentials: "omit",
    headers: { ...init.headers, authorization: `Bearer ${TOKEN}` },
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `${res.status}`);
  return body;
}

/** A line under the header when the studio cannot be reached or the store fails; cleared when it works again. */
function trouble(message) {
  let el = $("#trouble");
  if (!message) return el?.remove();
  if (!el) {
    el = document.createElement("p");
    el.id = "trouble";
    el.className = "trouble";
    document.body.insertBefore(el, $("main"));
  }
  el.textContent = message;
}

const decodeHash = () => {
  try {
    return decodeURIComponent(location.hash.slice(1));
  } catch {
    return "";
  }
};

async function loadSessions() {
  const data = await api(`/api/sessions?q=${encodeURIComponent(state.q)}`);
  $("#where").textContent = data.where;
  state.approvals = data.approvals;
  $("#mode").textContent = data.approvals ? "approvals allowed" : "read-only";
  const nav = $("#sessions");
  if (!data.sessions.length) {
    nav.innerHTML = `<p class="muted" style="padding:12px">${state.q ? "No session matches." : "No sessions yet."}</p>`;
    return;
  }
  nav.innerHTML = data.sessions
    .map(
      (s) =>
        `<a href="#${encodeURIComponent(s.id)}" data-session="${esc(s.id)}" class="${s.id === state.selected ? "selected" : ""}"><span class="title">${esc(s.title)}</span><span class="meta">${badge(s.status)} ${esc(s.agent)} · ${num(s.eventCount)} events · ${esc(when(s.updatedAt))}</span><span class="meta" style="display:block">${esc(s.id)}</span></a>`,
    )
    .join("");
}

async function select(id) {
  state.view = "session";
  if (state.selected !== id) {
    state.openTurns.clear();
    state.openRequests.clear();
  }
  state.selected = id;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("selected", a.dataset.session === id);
  await loadDetail(true);
}

async function loadDetail(first) {
  const id = state.selected;
  let data;
  try {
    data = await api(`/api/sessions/${encodeURIComponent(id)}`);
  } catch (err) {
    if (id === state.selected) $("#detail").innerHTML = `<p class="finding">${badge("error")} ${esc(err.message)}</p>`;
    return;
  }
  if (id !== state.selected || state.view !== "session") return;
  state.detail = data;
  state.approvals = data.approvals;
  // The newest turn starts expanded; later refreshes keep what the person opened.
  if (first && data.turns.length) state.openTurns.add(data.turns.at(-1).id);
  for (const t of data.turns) if (t.status === "running" || t.pending.length) state.openTurns.add(t.id);
  render();
}

/** Live: ask what is new (one small request, no open connection), reload the session when its log grew. */
async function poll() {
  if (state.polling || !state.selected || !state.detail || document.visibilityState === "hidden") return;
  state.polling = true;
  try {
    const id = state.selected;
    const { lastSeq } = await api(`/api/sessions/${encodeURIComponent(id)}/since?after=${state.detail.lastSeq}`);
    trouble("");
    if (id === state.selected && lastSeq !== state.detail.lastSeq) await loadDetail(false);
  } catch (err) {
    trouble(`Live updates stopped: ${err.message}`);
  } finally {
    state.polling = false;
  }
}

function render() {
  const d = state.detail;
  const running = d.turns.some((t) => t.status === "running");
  const head = `<h2 style="margin:0 0 4px;font-size:16px">${running ? '<span class="live-dot" title="a turn is running"></span>' : ""}Session <code>${esc(d.info.id)}</code></h2>${d.parent ? `<p class="muted" style="margin:0 0 4px">Subagent <strong>${esc(d.parent.name)}</strong> (depth ${num(d.parent.depth)}) of session <a href="#${encodeURIComponent(d.parent.sessionId)}" data-parent="${esc(d.parent.sessionId)}">${esc(d.parent.sessionId)}</a>, tool call ${esc(d.parent.callId)}</p>` : ""}<p class="muted" style="margin:0 0 12px">${esc(d.info.agent)} · started ${esc(when(d.info.createdAt))} · ${num(d.turns.length)} turn(s) · ${num(d.info.eventCount)} events${costText(d.cost) ? ` · <span data-cost="session" title="what the session's model requests cost, every turn">${esc(costText(d.cost))}${d.cost.priced ? " in all" : ""}</span>` : ""} · <a href="#replay=${esc(encodeURIComponent(d.info.id))}" data-replay-link>replay with today's config</a></p>`;
  const earlier = d.earlierTurns
    ? `<p class="muted">${num(d.earlierTurns)} earlier turn(s) not shown (the page shows the last ${num(d.turns.length)}; keel sessions show ID --json has them all).</p>`
    : "";
  // A reason being typed survives the refresh a poll brings (the log grew: another answer, a running turn).
  const typed = new Map([...document.querySelectorAll("input[data-reason]")].map((i) => [i.dataset.reason, i.value]));
  const focused = document.activeElement?.dataset?.reason;
  $("#detail").innerHTML =
    head + earlier + (d.turns.length ? d.turns.map(turnHtml).join("") : '<p class="muted">No turns yet.</p>');
  for (const i of document.querySelectorAll("input[data-reason]")) {
    if (typed.get(i.dataset.reason)) i.value = typed.get(i.dataset.reason);
    if (i.dataset.reason === focused) i.focus();
  }
  for (const el of document.querySelectorAll("details.turn"))
    el.addEventListener("toggle", () =>
      el.open ? state.openTurns.add(el.dataset.turn) : state.openTurns.delete(el.dataset.turn),
    );
  for (const el of document.querySelectorAll("details.request"))
    el.addEventListener("toggle", () =>
      el.open ? state.openRequests.add(el.dataset.request) : state.openRequests.delete(el.dataset.request),
    );
  for (const b of document.querySelectorAll("button[data-answer]")) b.addEventListener("click", () => answer(b));
}

function turnHtml(t) {
  const duration = t.endedAt ? t.endedAt - t.startedAt : undefined;
  const u = t.usage;
  const summary = `<summary><span class="muted">#${num(t.index)}</span><span class="input">${esc(t.input || "(resumed)")}</span>${badge(t.status)}${t.mode === "chat" ? ' <span class="badge" title="no tools were sent">chat mode</span>' : ""}${t.recovered ? ` <span class="badge" title="a stopped process left this turn unfinished; it went on from its log${t.recovered.cut.length ? ` (cut calls: ${esc(t.recovered.cut.join(", "))})` : ""}">recovered</span>` : ""}<span class="muted">${num(t.rounds)} round(s) · ${num(t.toolCalls)} tool call(s)${u ? ` · ${num(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens)} in / ${num(u.outputTokens)} out tokens` : ""}${duration !== undefined ? ` · ${ms(duration)}` : ""}${costText(t.cost) ? ` · <span data-cost="turn">${esc(costText(t.cost))}</span>` : ""}</span></summary>`;
  const open = state.openTurns.has(t.id) ? " open" : "";
  return `<details class="turn" data-turn="${esc(t.id)}"${open}>${summary}<div class="turn-body">${[verdictHtml(t), answerHtml(t), pendingHtml(t), approvalsHtml(t), callsHtml(t), timelineHtml(t), pluginTimesHtml(t), requestsHtml(t), findingsHtml(t)].join("")}</div></details>`;
}

function verdictHtml(t) {
  const v = t.verdict;
  if (!v || v.status === "completed") return "";
  const where = [
    v.plugin ? `plugin <span class="plugin">${esc(v.plugin)}</span>` : "",
    v.phase ? `phase ${esc(v.phase)}` : "",
  ]
    .filter(Boolean)
    .join(", ");
  return `<p class="finding">${badge(v.status)} ${esc(v.reason)}${v.code ? ` <code>${esc(v.code)}</code>` : ""}${where ? ` (${where})` : ""}${v.message ? `: ${esc(v.message)}` : ""}${v.detail ? `: ${esc(v.detail)}` : ""}</p>`;
}

function answerHtml(t) {
  return t.answer ? `<h3>Answer</h3><div class="answer">${esc(t.answer)}</div>` : "";
}

function pendingHtml(t) {
  if (!t.pending.length) return "";
  const rows = t.pending
    .map((p) => {
      const buttons = state.approvals
        ? `<input data-reason="${esc(p.callId)}" placeholder="reason (optional)" aria-label="reason"><button class="approve" data-answer="approve" data-call="${esc(p.callId)}">Approve</button><button class="deny" data-answer="deny" data-call="${esc(p.callId)}">Deny</button>`
        : '<span class="muted">read-only: start keel studio --allow-approvals to answer here</span>';
      return `<div class="approval" data-pending="${esc(p.callId)}"><strong>${esc(p.name)}</strong>${p.via ? `<span class="muted">in subagent ${esc(p.via.child)} (<a href="#${encodeURIComponent(p.via.sessionId)}" data-child="${esc(p.via.sessionId)}">its session</a>)</span>` : ""}<code title="${esc(p.args)}">${esc(p.args)}</code>${p.plugin ? `asked by <span class="plugin">${esc(p.plugin)}</span>` : ""}${p.reason ? `<span class="muted">${esc(p.reason)}</span>` : ""}${buttons}</div>`;
    })
    .join("");
  return `<h3>Waiting for approval</h3>${rows}`;
}

/** Who answered an approval, as the log records it (older logs name only how the answer came). */
function answererHtml(a) {
  if (a.answerer) return `<strong data-answerer>${esc(a.answerer)}</strong>`;
  const how = {
    host: "the host (who was not recorded)",
    callback: "the approve() callback",
    always: 'an earlier "always"',
  };
  return `<span class="muted">${esc(how[a.by] ?? a.by)}</span>`;
}

/** Answered approvals stay in the turn's history: what was asked and why, who answered, when. */
function approvalsHtml(t) {
  const answered = (t.approvals ?? []).filter((a) => a.answer);
  if (!answered.length) return "";
  const rows = answered
    .map((a) => {
      const x = a.answer;
      return `<tr data-approval="${esc(a.callId)}"><td><strong>${esc(a.name)}</strong>${a.via ? ` <span class="muted">in subagent ${esc(a.via.child)}</span>` : ""}${a.args ? `<pre class="call-text">${esc(a.args)}</pre>` : ""}</td><td data-asked>${a.plugin ? `<span class="plugin">${esc(a.plugin)}</span>` : ""}${a.reason ? ` <span data-ask-reason>${esc(a.reason)}</span>` : ""}${a.askedAt ? ` <span class="muted">at ${esc(timeOf(a.askedAt))}</span>` : ""}</td><td>${badge(x.approved ? "approved" : "denied")}${x.always ? ' <span class="muted">always, in this session</span>' : ""}${x.reason ? ` <span data-answer-reason>${esc(x.reason)}</span>` : ""}</td><td>${answererHtml(x)}</td><td data-answered-at title="${esc(when(x.at))}">${esc(timeOf(x.at))}</td></tr>`;
    })
    .join("");
  return `<h3>Approvals</h3><table data-table="approvals"><thead><tr><th>call</th><th>asked by, why, when</th><th>answer</th><th>answered by</th><th>when</th></tr></thead><tbody>${rows}</tbody></table>${omitted(t, "approvals", "approvals")}`;
}

/** Each call with its arguments and its result, as text. */
function callsHtml(t) {
  if (!t.calls?.length) return "";
  const rows = t.calls
    .map(
      (c) =>
        `<tr data-call="${esc(c.callId)}"><td><strong>${esc(c.name)}</strong> <span class="muted">round ${num(c.round)}</span>${c.status ? ` ${badge(c.status)}` : ""}${c.durationMs !== undefined ? ` <span class="muted">${ms(c.durationMs)}</span>` : ""}${c.answeredBy ? ` <span class="muted">answered by <span class="plugin">${esc(c.answeredBy)}</span></span>` : ""}</td><td><pre class="call-text" data-args>${esc(c.args)}</pre></td><td>${c.result === undefined ? '<span class="muted">no result yet</span>' : `<pre class="call-text${c.isError ? " call-error" : ""}" data-result>${esc(c.result)}</pre>`}</td></tr>`,
    )
    .join("");
  return `<h3>Tool calls</h3><table data-table="calls"><thead><tr><th>call</th><th>arguments</th><th>result</th></tr></thead><tbody>${rows}</tbody></table>${omitted(t, "calls", "tool calls")}`;
}

async function answer(button) {
  const callId = button.dataset.call;
  const reason = document.querySelector(`input[data-reason="${CSS.escape(callId)}"]`)?.value ?? "";
  button.disabled = true;
  try {
    await api(`/api/sessions/${encodeURIComponent(state.selected)}/approvals/${encodeURIComponent(callId)}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-keel-studio": "1" },
      body: JSON.stringify({ approved: button.dataset.answer === "approve", ...(reason ? { reason } : {}) }),
    });
  } catch (err) {
    alert(err.message);
  }
  await loadDetail(false);
}

function timelineHtml(t) {
  const items = [...t.timeline].sort((a, b) => a.start - b.start || a.end - b.end);
  if (!items.length) return "";
  const total = Math.max(1, t.endedAt ? t.endedAt - t.startedAt : 0, ...items.map((i) => i.end));
  const rows = items
    .map((i) => {
      const left = (i.start / total) * 100;
      const width = Math.max(0.3, ((i.end - i.start) / total) * 100);
      const bad =
        ["threw", "timeout", "invalid", "error", "failed", "aborted"].includes(i.status) ||
        (i.kind === "request" && i.label.endsWith("failed"));
      const extra =
        i.kind === "request" && i.detail?.usage
          ? ` · ${num((i.detail.usage.inputTokens ?? 0) + (i.detail.usage.cacheReadTokens ?? 0) + (i.detail.usage.cacheWriteTokens ?? 0))} in / ${num(i.detail.usage.outputTokens ?? 0)} out${i.detail.firstChunkMs !== undefined ? ` · first chunk ${ms(i.detail.firstChunkMs)}` : ""}`
          : i.kind === "tool" && i.detail?.resultChars !== undefined
            ? ` · ${num(i.detail.resultChars)} chars`
            : "";
      const label = `${{ phase: "phase", background: "background", request: "model", tool: "tool", job: "job", compaction: "compaction", guard: "guard" }[i.kind] ?? i.kind} · ${i.label}`;
      const handlers = i.handlers?.length
        ? `<div class="tl-handlers">${i.handlers.map((h) => `<span class="plugin">${esc(h.plugin)}</span> ${ms(h.durationMs)}${h.status !== "ok" ? ` ${badge(h.status)}` : ""}${h.contributions ? ` · ${num(h.contributions)} contribution(s)` : ""}`).join(" · ")}</div>`
        : "";
      const child =
        typeof i.detail?.childSession === "string"
          ? ` <a href="#${encodeURIComponent(i.detail.childSession)}" data-child="${esc(i.detail.childSession)}">its child session →</a>`
          : "";
      return `<div class="tl-row kind-${esc(i.kind)}${bad ? " bad" : ""}" data-timeline="${esc(i.kind)}" title="${esc(`${label} (${i.status})${extra}`)}"><span class="tl-label">${esc(label)}<span class="muted">${esc(extra)}</span></span><span class="tl-track"><span class="tl-bar" style="left:${left.toFixed(3)}%;width:${width.toFixed(3)}%"></span></span><span class="tl-ms">${ms(i.end - i.start)}</span>${handlers}${child ? `<div class="tl-handlers">${child}</div>` : ""}</div>`;
    })
    .join("");
  return `<h3>Timeline</h3><div class="timeline">${rows}</div>${omitted(t, "timeline", "timeline items")}`;
}

function pluginTimesHtml(t) {
  const rows = Object.entries(t.timings?.plugins ?? {}).sort((a, b) => b[1].ms - a[1].ms);
  if (!rows.length) return "";
  return `<h3>Time by plugin</h3><table data-table="plugin-times"><thead><tr><th>plugin</th><th class="num">handler calls</th><th class="num">time</th></tr></thead><tbody>${rows.map(([p, v]) => `<tr><td><span class="plugin">${esc(p)}</span></td><td class="num">${num(v.calls)}</td><td class="num">${ms(v.ms)}</td></tr>`).join("")}</tbody></table>`;
}

function requestsHtml(t) {
  if (!t.requests.length) return "";
  return `<h3>Requests</h3>${t.requests.map((r, i) => requestHtml(t, r, i)).join("")}${omitted(t, "requests", "requests")}`;
}

function requestHtml(t, r, i) {
  const key = `${t.id}:${i}`;
  const u = r.usage;
  const head = `Round ${num(r.round)}${r.model ? ` · ${esc(r.model)}` : r.provider ? ` · ${esc(r.provider)}` : ""}${u ? ` · ${num((u.inputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0))} in / ${num(u.outputTokens ?? 0)} out` : ""}${u && typeof u.costUsd === "number" ? ` · ${money(u.costUsd)}` : ""}${r.durationMs !== undefined ? ` · ${ms(r.durationMs)}` : ""}${r.firstChunkMs !== undefined ? ` (first chunk ${ms(r.firstChunkMs)})` : ""}${r.stopReason ? ` · ${esc(r.stopReason)}` : ""}${r.error ? ` ${badge("failed")}` : ""}${r.compactions.length ? ` ${badge("compacted")}` : ""}`;
  const m = r.manifest;
  const parts = [];
  if (r.error)
    parts.push(
      `<p class="finding">${badge("error")} ${esc(r.error.errorClass)}${r.error.status ? ` (HTTP ${num(r.error.status)})` : ""}: ${esc(r.error.message)}</p>`,
    );
  for (const n of r.notices) parts.push(`<p class="finding">${badge(n.kind)} ${esc(n.message)}</p>`);
  if (r.compactions.length)
    parts.push(
      `<h3>Compaction before this request</h3><table data-table="compactions"><thead><tr><th>plugin</th><th class="num">messages before</th><th class="num">after</th><th class="num">edits</th><th>what it did</th></tr></thead><tbody>${r.compactions.map((c) => `<tr><td><span class="plugin">${esc(c.plugin)}</span></td><td class="num">${num(c.before)}</td><td class="num">${num(c.after)}</td><td class="num">${num(c.edits)}</td><td>${esc(c.reason)}${c.what.length ? `<ul class="edits">${c.what.map((w) => `<li>${esc(w)}</li>`).join("")}</ul>` : ""}</td></tr>`).join("")}</tbody></table>`,
    );
  if (m?.route)
    parts.push(
      `<p class="route" data-route="${esc(m.route.model)}">${badge("routed")} to <code>${esc(m.route.model)}</code> (${esc(m.route.provider)}) by ${plugins([m.route.plugin])}: ${esc(m.route.reason)}</p>`,
    );
  if (m) {
    parts.push(
      `<h3>System prompt sections</h3>${m.sections.length ? `<table data-table="sections"><thead><tr><th>section</th><th>title</th><th class="num">chars</th><th>contributed by</th></tr></thead><tbody>${m.sections.map((s) => `<tr data-section="${esc(s.sectionId)}"><td><code>${esc(s.sectionId)}</code></td><td>${esc(s.title ?? "")}</td><td class="num">${num(s.chars)}</td><td>${plugins(s.plugins)}</td></tr>`).join("")}</tbody></table>` : '<p class="muted">None: instructions only.</p>'}`,
    );
    if (m.context.length)
      parts.push(
        `<h3>Context entries</h3><table data-table="context"><thead><tr><th>entry</th><th>domain</th><th class="num">chars</th><th>contributed by</th></tr></thead><tbody>${m.context.map((c) => `<tr data-context="${esc(c.id)}"><td><code>${esc(c.id)}</code></td><td>${esc(c.domain)}</td><td class="num">${num(c.chars)}</td><td>${plugins([c.plugin])}</td></tr>`).join("")}</tbody></table>`,
      );
    const hidden = m.hiddenTools ?? [];
    parts.push(
      `<h3>Tools sent (${m.tools.length})${hidden.length ? ` and hidden (${hidden.length})` : ""}</h3><table data-table="tools"><thead><tr><th>tool</th><th>from</th><th></th></tr></thead><tbody>${m.tools.map((x) => `<tr><td><code>${esc(x.name)}</code></td><td>${esc(x.source)}</td><td>sent</td></tr>`).join("")}${hidden.map((x) => `<tr class="muted"><td><code>${esc(x.name)}</code></td><td>${esc(x.source)}</td><td>hidden</td></tr>`).join("")}</tbody></table>`,
    );
    const e = m.tokenEstimate;
    parts.push(
      `<h3>Tokens by part (${e.exact ? "counted" : "estimated"})</h3><table data-table="tokens"><thead><tr><th class="num">system prompt</th><th class="num">tool schemas</th><th class="num">messages (${num(m.messageCount)})</th><th class="num">total</th></tr></thead><tbody><tr><td class="num">${num(e.system)}</td><td class="num">${num(e.tools)}</td><td class="num">${num(e.messages)}</td><td class="num">${num(e.total)}</td></tr></tbody></table>`,
    );
  }
  return `<details class="request" data-request="${esc(key)}"${state.openRequests.has(key) ? " open" : ""}><summary>${head}</summary><div class="request-body">${parts.join("")}</div></details>`;
}

function omitted(t, key, what) {
  const n = t.omitted?.[key];
  return typeof n === "number" && n > 0
    ? `<p class="muted">… ${num(n)} more ${what} in the middle of this turn are not shown.</p>`
    : "";
}

function findingsHtml(t) {
  const rows = [
    ...t.findings,
    ...t.guards.map((g) => ({
      level: "warn",
      code: `guard ${g.guard}`,
      message: `${g.value} reached the limit ${g.limit}`,
    })),
  ];
  if (!rows.length) return "";
  return `<h3>Diagnostics and rejected contributions (${num(rows.length + (t.omitted?.findings ?? 0))})</h3>${omitted(t, "findings", "findings")}${rows.map((f) => `<div class="finding" data-finding="${esc(f.code)}">${badge(f.level)} <code>${esc(f.code)}</code>${f.plugin ? ` <span class="plugin">${esc(f.plugin)}</span>` : ""}${f.phase ? ` <span class="muted">in ${esc(f.phase)}</span>` : ""} ${esc(f.message)}</div>`).join("")}`;
}

// Experiments (keel eval): the list, and one experiment compared with its baseline.
const pct = (v) => (typeof v === "number" && Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : "");
const usd = (v) => (typeof v === "number" && Number.isFinite(v) ? `$${v.toFixed(4)}` : "");
const change = (c) => (c ? `<span class="badge change-${esc(c)}" data-change="${esc(c)}">${esc(c)}</span>` : "");
const expHref = (id) => `#experiment=${encodeURIComponent(id)}`;
const shown = (t) =>
  `${esc(t?.text)}${t?.more > 0 ? `<span class="muted"> … ${num(t.more)} more characters</span>` : ""}`;

/** Leave the session view: the page shows experiments until a session is picked again. */
function leaveSession(view) {
  state.view = view;
  state.selected = null;
  state.detail = null;
  for (const a of document.querySelectorAll("nav a")) a.classList.remove("selected");
}

async function showExperiments() {
  leaveSession("experiments");
  let data;
  try {
    data = await api("/api/experiments");
  } catch (err) {
    $("#detail").innerHTML = `<p class="finding">${badge("error")} ${esc(err.message)}</p>`;
    return;
  }
  if (state.view !== "experiments") return;
  const head = '<h2 style="margin:0 0 12px;font-size:16px">Experiments</h2>';
  if (!data.experiments.length) {
    $("#detail").innerHTML =
      `${head}<p class="muted" data-empty="experiments">${data.available ? "No experiments yet." : "This studio was started without an experiment store."} Run <code>keel eval DATASET</code> (a JSONL file of cases, one per line) to score the agent on it; the experiment shows here while it runs, and <code>--baseline NAME</code> compares it with an earlier one.</p>`;
    return;
  }
  const rows = data.experiments
    .map((e) => {
      const t = e.totals;
      return `<tr data-experiment="${esc(e.id)}"><td><a href="${esc(expHref(e.id))}">${esc(e.name)}</a></td><td>${esc(e.dataset)}</td><td>${esc(e.agent)}</td><td>${badge(e.status)}</td><td class="num">${pct(t.passRate)}</td><td class="num">${num(t.passed)}/${num(t.cases)}</td><td class="num">${usd(t.costUsd)}</td><td>${esc(when(e.startedAt))}</td><td>${e.baseline ? (e.baselineName ? `<a href="${esc(expHref(e.baseline))}">${esc(e.baselineName)}</a>` : `<span class="muted">${esc(e.baseline)}</span>`) : ""}</td></tr>`;
    })
    .join("");
  $("#detail").innerHTML =
    `${head}<table data-table="experiments"><thead><tr><th>name</th><th>dataset</th><th>agent</th><th>status</th><th class="num">pass rate</th><th class="num">passed / cases</th><th class="num">cost</th><th>when</th><th>baseline</th></tr></thead><tbody>${rows}</tbody></table>`;
}

async function showExperiment(id, first) {
  if (first && state.experiment !== id) state.openCases.clear();
  leaveSession("experiment");
  state.experiment = id;
  let d;
  try {
    d = await api(`/api/experiments/${encodeURIComponent(id)}`);
  } catch (err) {
    if (state.experiment === id)
      $("#detail").innerHTML = `<p class="finding">${badge("error")} ${esc(err.message)}</p>`;
    return;
  }
  if (state.view !== "experiment" || state.experiment !== id) return;
  state.experimentData = d;
  const e = d.experiment;
  const t = e.totals;
  // Regressions start open; later refreshes keep what the person opened.
  if (first) for (const c of d.cases) if (c.diff?.change === "regression") state.openCases.add(c.caseId);
  const baseline = d.baseline
    ? `<p data-baseline>Compared with baseline <a href="${esc(expHref(d.baseline.id))}">${esc(d.baseline.name)}</a> (${pct(d.baseline.summary?.passRate)}): ${["regression", "fixed", "unchanged", "new"].map((k) => `${change(k)} ${num(d.changes?.[k] ?? 0)}`).join(" · ")}${d.missing?.length ? ` · <span class="muted">${num(d.missing.length)} baseline case(s) not in this run: ${esc(d.missing.slice(0, 20).join(", "))}</span>` : ""}</p>`
    : e.baseline
      ? `<p class="muted">Baseline ${esc(e.baseline)} is not in this store.</p>`
      : "";
  const head = `<p class="muted" style="margin:0 0 4px"><a href="#experiments">← Experiments</a></p><h2 style="margin:0 0 4px;font-size:16px">Experiment ${esc(e.name)} ${badge(e.status)}</h2><p class="muted" style="margin:0 0 8px">${esc(e.dataset)} · ${esc(e.agent)} · started ${esc(when(e.startedAt))} · <code>${esc(e.id)}</code></p><p data-totals><strong>${pct(t.passRate)}</strong> passed (${num(t.passed)} of ${num(t.cases)}; ${num(t.failed)} failed, ${num(t.errored)} errors) · ${usd(t.costUsd)} · ${ms(t.durationMs)}</p>${baseline}`;
  const scorers = d.scorers.length
    ? `<h3>Scorers</h3><table data-table="scorers"><thead><tr><th>scorer</th><th class="num">passed</th><th class="num">pass rate</th><th class="num">mean score</th></tr></thead><tbody>${d.scorers.map((s) => `<tr data-scorer="${esc(s.scorer)}"><td><code>${esc(s.scorer)}</code></td><td class="num">${num(s.passed)}/${num(s.total)}</td><td class="num">${pct(s.total ? s.passed / s.total : 0)}</td><td class="num">${typeof s.mean === "number" ? esc(s.mean.toFixed(3)) : ""}</td></tr>`).join("")}</tbody></table>`
    : "";
  const cases = d.cases.length ? d.cases.map(caseHtml).join("") : '<p class="muted">No cases yet.</p>';
  $("#detail").innerHTML = `${head}${scorers}<h3>Cases (${num(d.cases.length)})</h3>${cases}`;
  for (const el of document.querySelectorAll("details.case"))
    el.addEventListener("toggle", () =>
      el.open ? state.openCases.add(el.dataset.case) : state.openCases.delete(el.dataset.case),
    );
}

function caseHtml(c) {
  const m = c.metrics ?? {};
  const diff = c.diff;
  const summary = `<summary><span class="muted">#${num(c.index)}</span> <code>${esc(c.caseId)}</code> ${badge(c.status)} ${change(diff?.change)}<span class="input">${esc(c.input[0]?.text ?? "")}</span></summary>`;
  const input = `<h3>Input</h3>${c.input.map((t) => `<div class="answer">${shown(t)}</div>`).join("")}`;
  const before = diff?.before;
  const output =
    before && (before.output.text !== c.output.text || before.status !== c.status)
      ? `<h3>Output: baseline (${esc(before.status)}) → this run (${esc(c.status)})</h3><div class="diff"><div class="answer before" data-output="before">${shown(before.output)}</div><div class="answer after" data-output="after">${shown(c.output)}</div></div>`
      : `<h3>Output</h3><div class="answer" data-output="after">${shown(c.output)}</div>`;
  const was = new Map((diff?.scorers ?? []).map((s) => [s.scorer, s]));
  const scores = c.scores.length
    ? `<h3>Scores</h3><table data-table="scores"><thead><tr><th>scorer</th><th>pass</th><th class="num">score</th><th>why</th>${diff ? "<th>vs baseline</th>" : ""}</tr></thead><tbody>${c.scores
        .map((s) => {
          const d = was.get(s.scorer);
          return `<tr data-score="${esc(s.scorer)}"><td><code>${esc(s.scorer)}</code></td><td>${badge(s.pass ? "passed" : "failed")}</td><td class="num">${typeof s.score === "number" ? esc(s.score.toFixed(3)) : ""}</td><td>${esc(s.reason ?? "")}${s.error ? ` <span class="finding">${badge("error")} ${esc(s.error)}</span>` : ""}</td>${diff ? `<td>${change(d?.change)}${d && d.before !== undefined ? ` <span class="muted">${d.before ? "pass" : "fail"} → ${d.after ? "pass" : "fail"}</span>` : ""}</td>` : ""}</tr>`;
        })
        .join("")}</tbody></table>`
    : "";
  const metrics = `<p class="muted" data-metrics>${num(m.rounds)} round(s) · ${num(m.toolCalls)} tool call(s) · ${num(m.inputTokens)} in / ${num(m.outputTokens)} out tokens · ${usd(m.costUsd)} · ${ms(m.durationMs)}</p>`;
  const error = c.error ? `<p class="finding">${badge("error")} ${esc(c.error)}</p>` : "";
  const session = c.sessionId
    ? `<p class="case-session">Session <a href="#${esc(encodeURIComponent(c.sessionId))}" data-session-link="${esc(c.sessionId)}">${esc(c.sessionId)}</a> · <a href="#replay=${esc(encodeURIComponent(c.sessionId))}" data-replay-link>replay it against today's plugins</a>: <code class="replay">${esc(c.replay)}</code> <button data-copy="${esc(c.replay)}" title="copy the command">Copy</button></p>`
    : '<p class="muted">No session (the case did not run).</p>';
  const open = state.openCases.has(c.caseId) ? " open" : "";
  return `<details class="case case-${esc(diff?.change ?? "none")}" data-case="${esc(c.caseId)}"${open}>${summary}<div class="turn-body">${error}${input}${output}${scores}${metrics}${session}</div></details>`;
}

async function copy(button) {
  const text = button.dataset.copy;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // No clipboard (an old browser, a denied permission): select the command to copy by hand.
    const code = button.previousElementSibling;
    getSelection()?.selectAllChildren(code);
    button.textContent = "Selected";
  }
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

const refreshList = () =>
  loadSessions().then(
    () => trouble(""),
    (err) => trouble(`The session list could not be read: ${err.message}`),
  );
$("#search").addEventListener("input", (e) => {
  state.q = e.target.value;
  refreshList();
});
/** `#replay=ID`: the session replayed with today's config, each request compared with the recording. */
async function showReplay(id) {
  leaveSession("replay");
  state.replay = id;
  const back = `<p class="muted" style="margin:0 0 4px"><a href="#${esc(encodeURIComponent(id))}">← Session</a></p>`;
  $("#detail").innerHTML =
    `${back}<h2 style="margin:0 0 8px;font-size:16px">Replay of <code>${esc(id)}</code></h2><p class="muted" data-replay="running">Replaying with today's config and plugins (model answers and tool results from the recording)…</p>`;
  let r;
  try {
    r = await api(`/api/sessions/${encodeURIComponent(id)}/replay`);
  } catch (err) {
    if (state.view === "replay" && state.replay === id)
      $("#detail").innerHTML =
        `${back}<p class="finding" data-replay="error">${badge("error")} ${esc(err.message)}</p>`;
    return;
  }
  if (state.view !== "replay" || state.replay !== id) return;
  const result = r.identical
    ? `<p data-replay="identical">${badge("identical")} Every request and every turn's outcome match the recording.</p>`
    : `<p data-replay="diverged">${badge("diverged")} First difference: request #${num((r.firstDivergence ?? 0) + 1)}.</p>`;
  const rows = r.requests.map(replayRowHtml).join("");
  const turns = r.turns
    .map(
      (t, i) =>
        `<tr data-replay-turn="${i}"><td>${num(i + 1)}</td><td>${esc(t.input)}</td><td>${badge(t.recorded.status)}</td><td>${badge(t.replayed.status)}${t.replayed.message ? ` <span class="muted">${esc(t.replayed.message)}</span>` : ""}</td><td>${t.same ? "same" : "<strong>differs</strong>"}</td></tr>`,
    )
    .join("");
  const calls = r.toolChanges.length
    ? `<h3>Tool calls decided differently</h3><ul>${r.toolChanges.map((c) => `<li><code>${esc(c.callId)}</code> ${esc(c.name)}: ${esc(c.recorded)} → ${esc(c.replayed)}</li>`).join("")}</ul>`
    : "";
  const notes = [
    ...r.notes.map((n) => esc(n)),
    ...r.pluginProblems.map(
      (p) => `${esc(p.plugin)} ${esc(p.status)} in ${esc(p.phase)}${p.error ? `: ${esc(p.error)}` : ""}`,
    ),
  ];
  const asked = r.asked
    ? `<h3>What the model would have been asked at request #${num(r.firstDivergence + 1)}</h3><p class="muted">tools: ${esc(r.asked.tools.join(", ") || "(none)")}</p>${r.systemDiff ? `<p class="muted">The system prompt changed (${num(r.systemDiff.recordedChars)} → ${num(r.systemDiff.replayedChars)} characters): − recorded, + today</p><pre class="call-text" data-asked="system-diff">${esc(r.systemDiff.lines.join("\n"))}</pre>` : `<div class="answer" data-asked="system">${esc(r.asked.system)}</div>`}${r.asked.lastMessages.map((m) => `<div class="answer"><span class="muted">${esc(m.role)}:</span> ${esc(m.text)}</div>`).join("")}`
    : "";
  $("#detail").innerHTML =
    `${back}<h2 style="margin:0 0 8px;font-size:16px">Replay of <code>${esc(id)}</code> <span class="muted">(tools ${r.tools === "log" ? "from the log" : "run live"})</span></h2>${result}<h3>Requests</h3><table data-table="replay"><thead><tr><th>#</th><th>round</th><th>request</th><th>what changed</th><th class="num">tokens</th></tr></thead><tbody>${rows}</tbody></table><h3>Turns</h3><table data-table="replay-turns"><thead><tr><th>#</th><th>input</th><th>recorded</th><th>replayed</th><th></th></tr></thead><tbody>${turns}</tbody></table>${calls}${notes.length ? `<h3>Notes</h3><ul>${notes.map((n) => `<li>${n}</li>`).join("")}</ul>` : ""}${asked}`;
}

function replayRowHtml(q) {
  const what = [
    ...q.sections.map((x) => `section <code>${esc(x.sectionId)}</code> ${esc(x.change)} by ${plugins(x.plugins)}`),
    ...q.context.map((x) => `context <code>${esc(x.id)}</code> ${esc(x.change)} by ${plugins([x.plugin])}`),
    ...q.tools.added.map((n) => `tool <code>${esc(n)}</code> added`),
    ...q.tools.removed.map((n) => `tool <code>${esc(n)}</code> removed`),
    ...(q.messages.same ? [] : [`messages (${num(q.messages.recorded)} → ${num(q.messages.replayed)})`]),
    ...(q.optionsSame ? [] : ["request options"]),
    ...(q.systemSame || q.sections.length || q.context.length ? [] : ["system prompt"]),
    ...(JSON.stringify(q.edits.recorded) === JSON.stringify(q.edits.replayed) ? [] : ["history edits"]),
  ];
  const status = q.only
    ? `only ${q.only === "recorded" ? "in the recording" : "in the replay"}`
    : q.same
      ? "same"
      : "changed";
  return `<tr data-request="${num(q.index)}" class="replay-${q.same ? "same" : "changed"}"><td>${num(q.index + 1)}</td><td>${num(q.round)}</td><td>${badge(status)}</td><td>${what.join("; ")}</td><td class="num">${num(q.tokens.recorded)} → ${num(q.tokens.replayed)}</td></tr>`;
}

/** `#experiments`, `#experiment=ID`, `#replay=ID`, or a session id. */
function route(hash) {
  if (hash === "experiments") return showExperiments();
  if (hash.startsWith("replay=")) return showReplay(hash.slice("replay=".length));
  if (hash.startsWith("experiment=")) return showExperiment(hash.slice("experiment=".length), true);
  if (hash && (hash !== state.selected || state.view !== "session")) return select(hash);
}
window.addEventListener("hashchange", () => route(decodeHash()));
$("#detail").addEventListener("click", (e) => {
  const button = e.target.closest?.("button[data-copy]");
  if (button) copy(button);
});
await refreshList();
setInterval(() => {
  if (document.visibilityState === "hidden") return;
  refreshList();
  if (state.view === "experiments") showExperiments();
  else if (state.view === "experiment" && state.experimentData?.experiment.status === "running")
    showExperiment(state.experiment, false);
}, 3_000);
setInterval(poll, POLL_MS);
const initial = decodeHash() || document.querySelector("nav a")?.dataset.session;
if (initial) await route(initial);
