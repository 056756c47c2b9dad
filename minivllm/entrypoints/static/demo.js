// minivllm live demo (§11.1.1, §11.2): chat streams side by side, a long RAG prompt, and a live chart of each
// stream's inter-token gaps. Plain JS + canvas; talks only to this server (OpenAI API + /admin/*).
"use strict";

// Questions with long answers, sampled (temperature 0.8, a seed per chat and answer) with ignore_eos: each chat
// streams for the whole scene instead of finishing after a few tokens or looping on a greedy phrase.
const CHATS = [
  "Tell me the history of Paris, from the Romans to today, in detail.",
  "Give me twenty tips for staying focused while studying, each with an example.",
  "Explain how a hash table works, step by step, with an example in Python.",
  "Write a long story about a lighthouse keeper during an autumn storm.",
];
const COLORS = ["#1e88e5", "#43a047", "#8e24aa", "#00897b"];
const RAG_COLOR = "#e65100";
// The chart keeps the whole session on its time axis, and its y axis at the session's largest gap: the
// unchunked plateau stays on screen beside the chunked run, on the same scale, while the class compares them.
const WAIT_WARN_S = 0.5; // an open gap longer than this is drawn in red ("waiting 3.2 s")
const T0 = performance.now();
const demo = { model: null, maxModelLen: 0, chatTokens: 200, streams: [], events: [], points: 0, runs: [],
               ragSeed: Math.floor(Math.random() * 1e6) }; // a new seed per page: no prefix-cache hit
window.demo = demo;

const $ = (id) => document.getElementById(id);
const now = () => (performance.now() - T0) / 1000;

// A server started with --admin-token T is opened as /?admin_token=T; /admin/* calls then carry the token.
const ADMIN_TOKEN = new URLSearchParams(location.search).get("admin_token");

async function api(path, body) {
  const headers = ADMIN_TOKEN ? { Authorization: `Bearer ${ADMIN_TOKEN}` } : {};
  const init = body === undefined ? { headers } : {
    method: "POST", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, init);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((data.error && data.error.message) || r.statusText);
  return data;
}

function makeStream(kind, label, color) {
  const pane = document.createElement("div");
  pane.className = "pane";
  pane.style.borderTopColor = color;
  pane.innerHTML = '<h2></h2><div class="stats">idle</div><div class="waiting"></div><div class="text"></div>';
  pane.querySelector("h2").textContent = label;
  $("streams").appendChild(pane);
  const s = { kind, label, color, pane, gaps: [], tokens: 0, last: null, start: 0, ttft: null, max: 0,
              running: false, wanted: false, controller: null, answers: 0, ids: [] };
  demo.streams.push(s);
  return s;
}

function updateStats(s) {
  const ttft = s.ttft === null ? "–" : `${(s.ttft * 1000).toFixed(0)} ms`;
  const last = s.gaps.length ? `${s.gaps[s.gaps.length - 1].g.toFixed(0)} ms` : "–";
  s.pane.querySelector(".stats").textContent =
    `${s.running ? "streaming" : "idle"} · ${s.tokens} tok · TTFT ${ttft} · gap ${last} · max gap this run `
    + `${s.max.toFixed(0)} ms`;
}

// The open gap: how long a running stream has been waiting for its next token (its first one: since it was
// sent). It grows while the engine is inside a long step, which the server's snapshot says (step_started).
function openGap(s) {
  return s.running ? now() - (s.last === null ? s.start : s.last) : 0;
}

function updateWaiting() {
  for (const s of demo.streams) {
    const el = s.pane.querySelector(".waiting");
    const open = openGap(s);
    const waiting = open > WAIT_WARN_S;
    el.textContent = waiting ? `waiting ${open.toFixed(1)} s${s.last === null ? " for the first token" : ""}` : "";
    el.classList.toggle("late", waiting);
    s.pane.dataset.openGap = open.toFixed(3);
  }
}

function onEvent(s, event, textEl) {
  if (!event.startsWith("data: ")) return;
  const data = event.slice(6);
  if (data === "[DONE]") return;
  const msg = JSON.parse(data);
  if (msg.id && s.ids[s.ids.length - 1] !== msg.id) s.ids.push(msg.id); // the engine's request id
  if (msg.error) { textEl.textContent += `\n[error: ${msg.error.message}]`; return; }
  const c = msg.choices && msg.choices[0];
  if (!c || (c.delta && c.delta.role)) return; // the usage chunk, or chat's role-only first chunk
  const t = now();
  s.tokens += 1;
  if (s.last === null) {
    s.ttft = t - s.start;
    // A chat's wait for its first token is a gap its user sees too: plotted, marked as a first token.
    if (s.kind === "chat") { s.gaps.push({ t, g: s.ttft * 1000, first: true }); s.max = Math.max(s.max, s.ttft * 1000); }
  } else {
    const g = (t - s.last) * 1000;
    s.gaps.push({ t, g });
    s.max = Math.max(s.max, g);
    demo.points += 1;
  }
  s.last = t;
  textEl.textContent += c.text !== undefined ? c.text : (c.delta.content || "");
  textEl.scrollTop = textEl.scrollHeight;
  updateStats(s);
}

async function runStream(s, path, body) {
  s.controller = new AbortController();
  Object.assign(s, { running: true, start: now(), last: null, ttft: null, tokens: 0 });
  const textEl = s.pane.querySelector(".text");
  s.answers += 1;
  if (s.kind === "rag" || s.answers === 1) textEl.textContent = "";
  else textEl.textContent += `\n\n— answer ${s.answers} —\n`; // appended: the pane never blanks mid-scene
  updateStats(s);
  let ok = true;
  try {
    const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, model: demo.model, stream: true }), signal: s.controller.signal });
    if (!r.ok) throw new Error(((await r.json()).error || {}).message || r.statusText);
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        onEvent(s, buf.slice(0, i), textEl);
        buf = buf.slice(i + 2);
      }
    }
  } catch (e) {
    ok = false;
    if (e.name !== "AbortError") textEl.textContent += `\n[error: ${e.message}]`;
  }
  s.running = false;
  updateStats(s);
  return ok;
}

async function chatLoop(s, question) {
  if (s.wanted) return;
  s.wanted = true;
  while (s.wanted) { // a chat that finishes asks again, so the streams keep flowing during the lesson
    const body = { messages: [{ role: "user", content: question }], max_tokens: demo.chatTokens, temperature: 0.8,
                   top_p: 0.95, seed: demo.ragSeed + s.answers, ignore_eos: true };
    if (!(await runStream(s, "/v1/chat/completions", body))) s.wanted = false;
  }
}

function addEvent(label, color) {
  demo.events.push({ t: now(), label, color });
}

// Labels come from the server's settings as last read (demo.scheduling), never from what the inputs say.
function chunkLabel(sc = demo.scheduling) {
  if (!sc) return "settings unknown";
  return sc.enable_chunked_prefill ? `chunked, ${budgetLabel(sc)}` : "unchunked";
}

function budgetLabel(sc) {
  const threshold = sc.long_prefill_token_threshold ? `, threshold ${sc.long_prefill_token_threshold}` : "";
  return `budget ${sc.max_num_batched_tokens}${threshold}`;
}

async function sendRag() {
  const rag = demo.streams.find((s) => s.kind === "rag");
  if (rag.running) return;
  const n = Number($("rag-tokens").value);
  demo.ragSeed += 1;
  try {
    const p = await api(`/admin/rag_prompt?num_tokens=${n}&seed=${demo.ragSeed}`);
    const settings = demo.scheduling;
    addEvent(`RAG ${p.num_tokens} tok (${chunkLabel(settings)})`, RAG_COLOR);
    const chatIds = demo.streams.filter((s) => s.kind === "chat").map((s) => s.ids.length);
    if (await runStream(rag, "/v1/completions", { prompt: p.prompt_token_ids, max_tokens: 16, temperature: 0,
                                                  ignore_eos: true })) {
      await addRun(settings, p.num_tokens, rag.ids[rag.ids.length - 1], chatIds);
    }
  } catch (e) { rag.pane.querySelector(".text").textContent = `[error: ${e.message}]`; }
}

// One row per RAG run, from the engine's trace (/admin/trace, engine clock): while the RAG prompt was being
// prefilled (its arrival to its first token), the longest and the p99 gap any chat saw between two of its
// tokens (or before its first one), and the RAG prompt's TTFT. The rows stay on screen for the comparison.
async function addRun(settings, numTokens, ragId, chatIdsBefore) {
  await new Promise((r) => setTimeout(r, 300)); // the chats' tokens after the prefill, for the gap that spans it
  const chats = demo.streams.filter((s) => s.kind === "chat");
  const ids = chats.flatMap((s, i) => s.ids.slice(Math.max(0, chatIdsBefore[i] - 1)));
  const tr = await api(`/admin/trace?request_ids=${[ragId, ...ids].join(",")}`);
  const rag = tr.requests[ragId];
  if (!rag || !rag.token_times.length) return;
  const w0 = rag.arrival_time, w1 = rag.token_times[0];
  const gaps = [];
  for (const id of ids) {
    const r = tr.requests[id];
    if (!r) continue;
    const times = [r.arrival_time, ...r.token_times];
    for (let k = 1; k < times.length; k++) if (times[k] > w0 && times[k - 1] < w1) gaps.push(times[k] - times[k - 1]);
  }
  gaps.sort((a, b) => a - b);
  const p99 = gaps.length ? gaps[Math.min(gaps.length - 1, Math.ceil(0.99 * gaps.length) - 1)] : NaN;
  demo.runs.push({ label: chunkLabel(settings), numTokens, worst: gaps.length ? gaps[gaps.length - 1] : NaN, p99,
                   ttft: w1 - w0, numGaps: gaps.length });
  showRuns();
}

function showRuns() {
  const ms = (x) => (Number.isNaN(x) ? "–" : `${(x * 1000).toFixed(0)} ms`);
  const body = $("runs").querySelector("tbody");
  body.innerHTML = "";
  demo.runs.forEach((r, i) => {
    const tr = document.createElement("tr");
    for (const v of [i + 1, r.label, r.numTokens, ms(r.worst), ms(r.p99), ms(r.ttft)]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  });
  $("runs").hidden = demo.runs.length === 0;
}

// One change to the scheduler: the server's reply is what the page shows; a refused change leaves the
// server's settings as they were, the page re-reads them, and the error stays on screen until the next success.
async function changeScheduling(body) {
  try {
    const sc = await api("/admin/scheduling", body);
    showScheduling(sc);
    showError("");
    startRun(sc);
    addEvent(demo.runLabel, "#555");
  } catch (e) {
    showError(`setting refused, previous settings kept: ${e.message}`);
    showScheduling(await api("/admin/scheduling"), true);
  }
}

// Chunking on also caps one request's chunk at half the budget (long_prefill_token_threshold): without it the
// long prompt takes all the budget the decodes leave, and a chat that asks again in the meantime waits for its
// first token until the whole prompt is in (running requests are served first, §11.3).
function defaultThreshold(budget) {
  return Math.max(1, Math.floor(budget / 2));
}

function setChunked() {
  const on = $("chunked").checked;
  const budget = Number($("budget").value);
  return changeScheduling(on ? { enable_chunked_prefill: true, max_num_batched_tokens: budget,
                                 long_prefill_token_threshold: defaultThreshold(budget) }
                             : { enable_chunked_prefill: false });
}

function setBudget() {
  // Chunking off: the budget is max_model_len; the value typed applies when chunking is switched on.
  if (demo.scheduling && demo.scheduling.enable_chunked_prefill) {
    const budget = Number($("budget").value);
    return changeScheduling({ max_num_batched_tokens: budget, long_prefill_token_threshold: defaultThreshold(budget) });
  }
  showError(`budget ${$("budget").value} will apply when chunked prefill is switched on`);
}

// A run lasts from one scheduler change to the next: the panes' and the legend's maxima count within it, so
// the unchunked run's stall does not stay printed beside the chunked run (the table keeps both).
function startRun(sc) {
  demo.runStart = now();
  demo.runLabel = sc.enable_chunked_prefill ? `chunking on (${budgetLabel(sc)})` : "chunking off";
  for (const s of demo.streams) { s.max = 0; updateStats(s); }
}

function showError(text) {
  $("error").textContent = text;
}

function showScheduling(sc, force = false) {
  demo.scheduling = sc;
  $("chunked").checked = sc.enable_chunked_prefill;
  $("chunked-label").classList.toggle("on", sc.enable_chunked_prefill);
  $("budget").min = sc.max_num_seqs; // the engine refuses a budget below max_num_seqs
  // The field is left alone while someone types in it, unless the server just refused what was typed.
  const typing = document.activeElement === $("budget") && !force;
  if (sc.enable_chunked_prefill && !typing) $("budget").value = sc.max_num_batched_tokens;
}

async function pollState() {
  try {
    // Served from the snapshot the engine publishes after each step: it answers even during a long step.
    const st = await api("/admin/state?last_steps=20");
    const last = st.steps[st.steps.length - 1];
    const inStep = st.step_started === null ? 0 : st.now - st.step_started;
    demo.stepRunningFor = inStep;
    showScheduling(st.scheduling); // another tab (or curl) may have changed them
    const step = inStep > WAIT_WARN_S ? `a step has been running for ${inStep.toFixed(1)} s`
      : last ? `step ${last.step}: ${last.prefill_tokens} prefill + ${last.decode_tokens} decode tokens in `
        + `${(last.duration * 1000).toFixed(0)} ms` : "no step yet";
    $("status").textContent = (st.alive ? "" : "ENGINE NOT ANSWERING · ")
      + `${demo.model} · ${chunkLabel(st.scheduling)} · ${step} · running ${st.num_running}, waiting `
      + `${st.num_waiting} · KV blocks free ${st.num_free_blocks}/${st.num_gpu_blocks}`;
    $("status").classList.toggle("late", inStep > WAIT_WARN_S || !st.alive);
  } catch (e) {
    $("status").textContent = `engine not answering: ${e.message}`;
    $("status").classList.add("late");
  }
}

function niceStep(range, ticks) {
  const raw = range / ticks, mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
}

function draw() {
  const cv = $("gap-chart"), dpr = window.devicePixelRatio || 1;
  const W = cv.clientWidth, H = cv.clientHeight;
  if (cv.width !== W * dpr) { cv.width = W * dpr; cv.height = H * dpr; }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const L = 64, R = 12, T = 40, B = 32, t1 = Math.max(now(), 10), t0 = 0;
  const visible = demo.streams.flatMap((s) => s.gaps);
  const top = visible.reduce((m, p) => Math.max(m, p.g), 50) * 1.1, yStep = niceStep(top, 5);
  const yMax = Math.ceil(top / yStep) * yStep;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R), y = (v) => H - B - (v / yMax) * (H - T - B);
  g.font = "14px system-ui"; g.strokeStyle = "#e0e0e0"; g.fillStyle = "#555"; g.lineWidth = 1;
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    g.beginPath(); g.moveTo(L, y(v)); g.lineTo(W - R, y(v)); g.stroke();
    g.textAlign = "right"; g.fillText(`${v.toFixed(0)}`, L - 4, y(v) + 4);
  }
  const xStep = niceStep(t1 - t0, 8);
  for (let t = Math.ceil(t0 / xStep) * xStep; t <= t1; t += xStep) {
    g.textAlign = "center"; g.fillText(`${t.toFixed(0)} s`, x(t), H - B + 16);
  }
  g.save(); g.translate(14, (H - B + T) / 2); g.rotate(-Math.PI / 2); g.textAlign = "center";
  g.fillText("gap between tokens (ms)", 0, 0); g.restore();
  demo.events.forEach((ev, i) => { // labels alternate between two rows so that close events stay readable
    if (ev.t < t0) return;
    g.strokeStyle = ev.color; g.setLineDash([4, 4]); g.beginPath(); g.moveTo(x(ev.t), T); g.lineTo(x(ev.t), H - B);
    g.stroke(); g.setLineDash([]); g.fillStyle = ev.color; g.textAlign = "left";
    g.fillText(ev.label, x(ev.t) + 3, i % 2 ? T - 4 : T - 21);
  });
  let drawn = 0, lx = W - R - 4;
  g.save(); g.beginPath(); g.rect(L, 0, W - L - R, H); g.clip();
  for (const s of demo.streams) {
    const pts = s.gaps.filter((p) => p.t >= t0);
    // Each gap is a flat segment over the interval it lasted, at the height of its length: a stall is a plateau.
    g.strokeStyle = s.color; g.fillStyle = s.color; g.lineWidth = 1.5; g.beginPath();
    let end = null;
    for (const p of pts) {
      const start = p.t - p.g / 1000;
      if (end !== null && Math.abs(start - end) < 1e-6) g.lineTo(x(start), y(p.g)); else g.moveTo(x(start), y(p.g));
      g.lineTo(x(p.t), y(p.g));
      end = p.t;
    }
    g.stroke();
    for (const p of pts) { // a first token (the wait since the request was sent) is a hollow, larger mark
      if (p.first) g.strokeRect(x(p.t) - 3.5, y(p.g) - 3.5, 7, 7); else g.fillRect(x(p.t) - 1.5, y(p.g) - 1.5, 3, 3);
    }
    drawn += pts.length;
    const label = `${s.label}: max ${s.max.toFixed(0)} ms`;
    g.textAlign = "right"; g.fillText(label, lx, T + 18); lx -= g.measureText(label).width + 14;
  }
  g.fillStyle = "#555"; g.textAlign = "right";
  g.fillText(`largest gap since ${demo.runLabel || "page load"}:`, lx, T + 18);
  g.restore();
  cv.dataset.points = String(demo.points);
  cv.dataset.drawn = String(drawn);
  cv.dataset.ymax = String(yMax);
}

async function init() {
  const models = await api("/v1/models");
  demo.model = models.data[0].id;
  demo.maxModelLen = models.data[0].max_model_len;
  demo.chatTokens = Math.min(300, Math.floor(demo.maxModelLen / 3));
  $("rag-tokens").value = Math.min(2000, demo.maxModelLen - 64);
  CHATS.forEach((q, i) => makeStream("chat", `chat ${i + 1}`, COLORS[i]).question = q);
  makeStream("rag", "RAG prompt", RAG_COLOR);
  showScheduling(await api("/admin/scheduling"));
  $("start-chats").onclick = () => demo.streams.filter((s) => s.kind === "chat").forEach((s) => chatLoop(s, s.question));
  $("send-rag").onclick = sendRag;
  $("chunked").onchange = setChunked;
  $("budget").onchange = setBudget;
  $("stop-all").onclick = () => demo.streams.forEach((s) => { s.wanted = false; if (s.controller) s.controller.abort(); });
  setInterval(pollState, 500);
  setInterval(draw, 100);
  setInterval(updateWaiting, 100);
  pollState();
  draw();
  document.body.dataset.ready = "1";
}

init().catch((e) => { $("status").textContent = `failed to start: ${e.message}`; });
