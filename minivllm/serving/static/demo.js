// minivllm live demo (§11.1.1, §11.2): chat streams side by side, a long RAG prompt, and a live chart of each
// stream's inter-token gaps. Plain JS + canvas; talks only to this server (OpenAI API + /admin/*).
"use strict";

// Questions with long answers, sampled (temperature 0.8, a seed per chat and answer) with ignore_eos: each chat
// streams for the whole scene instead of finishing after a few tokens or looping on a greedy phrase. All chats
// share one connection (POST /demo/chats): a browser opens at most six to one host, so one per chat would
// leave some chats waiting for a free connection.
const CHATS = [
  "Tell me the history of Paris, from the Romans to today, in detail.",
  "Give me twenty tips for staying focused while studying, each with an example.",
  "Explain how a hash table works, step by step, with an example in Python.",
  "Write a long story about a lighthouse keeper during an autumn storm.",
  "Describe how bread is made, from the wheat field to the bakery, in detail.",
  "Explain the water cycle to a ten-year-old, with many everyday examples.",
];
const COLORS = ["#1e88e5", "#43a047", "#8e24aa", "#00897b", "#6d4c41", "#c2185b"];
const RAG_COLOR = "#e65100";
// The chart keeps the whole session on its time axis, and its y axis at the session's largest gap: the
// unchunked plateau stays on screen beside the chunked run, on the same scale, while the class compares them.
const WAIT_WARN_S = 0.5; // an open gap longer than this is drawn in red ("waiting 3.2 s")
const STALL_TARGET = 10; // the scene's RAG prompt is sized so that its unchunked step is ~10x a chunked step
const T0 = performance.now();
// demo.chats: the chats' connection while it is open; demo.scene: what sizeScene measured and chose; ragSeed: a
// new seed per page, so that no RAG prompt hits the prefix cache.
const demo = { model: null, maxModelLen: 0, chatTokens: 200, streams: [], events: [], points: 0, runs: [],
               scene: null, chats: null, ragSeed: Math.floor(Math.random() * 1e6) };
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
  const s = { kind, label, color, pane, pending: "", gaps: [], tokens: 0, total: 0, last: null, start: 0, ttft: null, max: 0,
              running: false, controller: null, answers: 0, ids: [] };
  demo.streams.push(s);
  return s;
}

function updateStats(s) {
  const ttft = s.ttft === null ? "–" : `${(s.ttft * 1000).toFixed(0)} ms`;
  const last = s.gaps.length ? `${s.gaps[s.gaps.length - 1].g.toFixed(0)} ms` : "–";
  s.pane.querySelector(".stats").textContent = `${s.running ? "streaming" : "idle"} · ${s.tokens} tok · TTFT ${ttft}\n`
    + `gap ${last} · max this run ${s.max.toFixed(0)} ms`;
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

// One token (one delta) of stream s arrived now: its gap (or, for a chat, its wait for a first token) is plotted.
function addToken(s, text) {
  const t = now();
  s.tokens += 1;
  s.total += 1;
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
  s.pending += text;
}

// The panes are redrawn 10 times a second, not once per token: a fast model (a GPU, or the tiny test models)
// gives hundreds of tokens a second, and a layout per token would keep the page busy. A pane keeps the last
// PANE_CHARS characters of its text (it shows a few lines; the whole session's text would slow every update).
const PANE_CHARS = 3000;
function renderPanes() {
  for (const s of demo.streams) {
    if (s.pending) {
      const textEl = s.pane.querySelector(".text");
      textEl.textContent = (textEl.textContent + s.pending).slice(-PANE_CHARS);
      textEl.scrollTop = textEl.scrollHeight;
      s.pending = "";
    }
    updateStats(s);
  }
}

// A new answer of stream s begins now: the pane keeps the earlier answers (it never blanks mid-scene).
function startAnswer(s, id) {
  Object.assign(s, { running: true, start: now(), last: null, ttft: null, tokens: 0 });
  if (id) s.ids.push(id);
  s.answers += 1;
  if (s.kind === "rag" || s.answers === 1) { s.pane.querySelector(".text").textContent = ""; s.pending = ""; }
  else s.pending += `\n\n— answer ${s.answers} —\n`;
}

function showStreamError(s, message) {
  s.pending += `\n[error: ${message}]`;
}

// Reads an SSE response, calling onData with each event's JSON, until the stream ends.
async function readSSE(response, onData) {
  if (!response.ok) throw new Error(((await response.json().catch(() => ({}))).error || {}).message || response.statusText);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (event.startsWith("data: ") && event !== "data: [DONE]") onData(JSON.parse(event.slice(6)));
    }
  }
}

// The chats, all over one connection: each event names its chat (0..n-1) and answer; "start" opens an answer.
function onChatEvent(msg) {
  const s = demo.streams.filter((x) => x.kind === "chat")[msg.chat];
  if (msg.event === "start") startAnswer(s, msg.id);
  else if (msg.error) { showStreamError(s, msg.error.message); s.running = false; }
  else if (msg.text !== undefined) addToken(s, msg.text);
}

async function startChats() {
  if (demo.chats) return; // already streaming
  const chats = demo.streams.filter((s) => s.kind === "chat");
  demo.chats = new AbortController();
  const seed = demo.ragSeed * 100;
  const body = { repeat: true, chats: chats.map((s, i) => ({
    model: demo.model, messages: [{ role: "user", content: s.question }], max_tokens: demo.chatTokens,
    temperature: 0.8, top_p: 0.95, seed: seed + 1000 * i, ignore_eos: true })) };
  $("send-rag").disabled = true; // the sizing's steps must be its own
  const sizing = sizeScene(chats.length)
    .catch((e) => { $("scene").textContent = `scene not sized: ${e.message}`; })
    .finally(() => { $("send-rag").disabled = false; });
  try {
    const r = await fetch("/demo/chats", { method: "POST", headers: { "Content-Type": "application/json" },
                                           body: JSON.stringify(body), signal: demo.chats.signal });
    await readSSE(r, onChatEvent);
  } catch (e) {
    if (e.name !== "AbortError") chats.forEach((s) => showStreamError(s, e.message));
  }
  chats.forEach((s) => { s.running = false; });
  demo.chats = null;
  await sizing;
}

// The RAG prompt: an ordinary streamed /v1/completions request on its own connection.
async function runRag(s, body) {
  s.controller = new AbortController();
  let ok = true;
  try {
    const r = await fetch("/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, model: demo.model, stream: true }), signal: s.controller.signal });
    await readSSE(r, (msg) => {
      if (msg.id && s.ids[s.ids.length - 1] !== msg.id) s.ids.push(msg.id); // the engine's request id
      if (msg.error) showStreamError(s, msg.error.message);
      else if (msg.choices && msg.choices[0]) addToken(s, msg.choices[0].text);
    });
  } catch (e) {
    ok = false;
    if (e.name !== "AbortError") showStreamError(s, e.message);
  }
  s.running = false;
  return ok;
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// One calibration prompt of about numTokens tokens, sent with max_tokens 1 while the chats stream: the prompt
// tokens of the steps that prefilled it (from its first scheduling to its first token, on the engine's clock), and
// the time those steps took beyond a decode step.
async function calibrate(numTokens, decode) {
  demo.ragSeed += 1;
  const p = await api(`/admin/rag_prompt?num_tokens=${numTokens}&seed=${demo.ragSeed}`);
  const out = await api("/v1/completions", { model: demo.model, prompt: p.prompt_token_ids, max_tokens: 1,
                                             temperature: 0 });
  const rec = (await api(`/admin/trace?request_ids=${out.id}`)).requests[out.id];
  const [first, last] = [rec.first_scheduled_time, rec.token_times[0]];
  let st = null;
  for (let tries = 0; !st || !st.steps.length || st.steps[st.steps.length - 1].end < last; tries++) {
    if (tries > 100) throw new Error("the engine did not publish the calibration prompt's steps");
    if (st) await sleep(20); // the reply can come back before the snapshot of its last step is published
    st = await api("/admin/state?last_steps=1000");
  }
  const steps = st.steps.filter((x) => x.start >= first && x.end <= last && x.prefill_tokens > 0);
  const tokens = steps.reduce((a, x) => a + x.prefill_tokens, 0);
  if (!tokens) throw new Error("no prefill step was recorded for the calibration prompt");
  return { tokens, time: steps.reduce((a, x) => a + Math.max(0, x.duration - decode), 0) };
}

// The scene sized to this machine (a laptop CPU or a GPU). With the chats streaming: a decode step (the median of
// 8 steps that decode all n chats and prefill nothing), then two prompts (a chunk's size and four times that)
// give the cost of prefilling L prompt tokens, a·L + b·L² (attention over a longer prompt costs more per token).
// The RAG prompt is the shortest whose unchunked step lasts STALL_TARGET times the last step of the chunked run
// (its last chunk attends to the whole prompt, so it is the slowest), up to what max_model_len and the KV cache
// allow; the page says what it measured and chose.
async function sizeScene(n) {
  let decode = null;
  for (let tries = 0; decode === null; tries++) {
    if (tries > 240 || !demo.chats) throw new Error("the chats did not stream");
    const st = await api("/admin/state?last_steps=40");
    const ds = st.steps.filter((x) => x.prefill_tokens === 0 && x.decode_tokens === n).map((x) => x.duration);
    if (ds.length >= 8) decode = median(ds.slice(-8));
    else await sleep(250);
  }
  const budget = Number($("budget").value);
  const chunk = Math.max(1, Math.min(defaultThreshold(budget), budget - n)); // a chunk of the chunked run
  // The RAG prompt and its 16 tokens must fit in max_model_len, and in the KV cache beside the chats' longest
  // answers (each chat's prompt, under 64 tokens, and its max_tokens), or preemption would blur the scene.
  const st = await api("/admin/state?last_steps=0");
  const room = 0.9 * st.num_gpu_blocks * st.block_size - n * (64 + demo.chatTokens);
  const cap = Math.floor(Math.min(demo.maxModelLen - 48, room));
  addEvent("sizing the scene", "#555");
  // At least 128 tokens: the chat template and the question around the documents take some (84 for the tiny
  // test models' fallback template).
  const small = await calibrate(Math.max(chunk, 128), decode);
  const large = await calibrate(Math.max(Math.min(4 * Math.max(chunk, 128), cap), 128), decode);
  const [la, lb] = [small.tokens, large.tokens];
  let b = lb > la ? (large.time / lb - small.time / la) / (lb - la) : 0, a = small.time / la - b * la;
  if (b < 0 || a <= 0) { b = 0; a = Math.max(large.time / lb, 1e-6); } // timing noise: a line through one
  const stall = (L) => decode + a * L + b * L * L;
  const lastChunk = (L) => decode + a * chunk + b * (2 * L * chunk - chunk * chunk);
  let ragTokens = Math.min(4 * chunk, cap);
  while (ragTokens + 16 <= cap && stall(ragTokens) < STALL_TARGET * lastChunk(ragTokens)) ragTokens += 16;
  const reached = stall(ragTokens) >= STALL_TARGET * lastChunk(ragTokens);
  demo.scene = { decode, a, b, chunk, cap, ragTokens, stall: stall(ragTokens), lastChunk: lastChunk(ragTokens),
                 ratio: stall(ragTokens) / lastChunk(ragTokens), capped: !reached };
  $("rag-tokens").value = ragTokens;
  const ms = (x) => `${(x * 1000).toFixed(0)} ms`;
  $("scene").textContent = `Scene sized for this machine: a decode step of ${n} chats takes ${ms(decode)}, `
    + `prefilling 1,000 prompt tokens ${ms(a * 1000 + b * 1e6)} → RAG prompt ${ragTokens} tokens: predicted `
    + `unchunked stall ${ms(demo.scene.stall)}, ${demo.scene.ratio.toFixed(1)}× the chunked run's slowest step `
    + `(${chunk}-token chunks, ${ms(demo.scene.lastChunk)})`
    + (reached ? "" : ` — capped by max_model_len / the KV cache at ${cap} tokens; ${STALL_TARGET}× was the aim`);
}

async function sendRag() {
  const rag = demo.streams.find((s) => s.kind === "rag");
  if (rag.running) return;
  const n = Number($("rag-tokens").value);
  demo.ragSeed += 1;
  rag.running = true; // from now: a second click waits for this run
  try {
    const p = await api(`/admin/rag_prompt?num_tokens=${n}&seed=${demo.ragSeed}`);
    const settings = demo.scheduling;
    addEvent(`RAG ${p.num_tokens} tok (${chunkLabel(settings)})`, RAG_COLOR);
    const chatIds = demo.streams.filter((s) => s.kind === "chat").map((s) => s.ids.length);
    startAnswer(rag, null); // its TTFT counts from the request, as the table's does
    if (await runRag(rag, { prompt: p.prompt_token_ids, max_tokens: 16, temperature: 0, ignore_eos: true })) {
      await addRun(settings, p.num_tokens, rag.ids[rag.ids.length - 1], chatIds);
    }
  } catch (e) { rag.pane.querySelector(".text").textContent = `[error: ${e.message}]`; }
  rag.running = false;
}

// One row per RAG run, from the engine's trace (/admin/trace, engine clock): while the RAG prompt was being
// prefilled (its arrival to its first token), the longest and the p99 gap any chat saw between two of its
// tokens (or before its first one), and the RAG prompt's TTFT. The rows stay on screen for the comparison.
async function addRun(settings, numTokens, ragId, chatIdsBefore) {
  await sleep(300); // the chats' tokens after the prefill, for the gap that spans it
  const chats = demo.streams.filter((s) => s.kind === "chat");
  const perChat = chats.map((s, i) => s.ids.slice(Math.max(0, chatIdsBefore[i] - 1)));
  const ids = perChat.flat();
  const tr = await api(`/admin/trace?request_ids=${[ragId, ...ids].join(",")}`);
  const rag = tr.requests[ragId];
  if (!rag || !rag.token_times.length) return;
  const w0 = rag.arrival_time, w1 = rag.token_times[0];
  const gaps = [];
  const during = perChat.map(() => 0); // tokens each chat got while the RAG prompt was prefilled
  perChat.forEach((chatIds, i) => {
    for (const r of chatIds.map((id) => tr.requests[id]).filter(Boolean)) {
      const times = [r.arrival_time, ...r.token_times];
      for (let k = 1; k < times.length; k++) if (times[k] > w0 && times[k - 1] < w1) gaps.push(times[k] - times[k - 1]);
      during[i] += r.token_times.filter((t) => t > w0 && t < w1).length;
    }
  });
  gaps.sort((a, b) => a - b);
  const p99 = gaps.length ? gaps[Math.min(gaps.length - 1, Math.ceil(0.99 * gaps.length) - 1)] : NaN;
  demo.runs.push({ label: chunkLabel(settings), numTokens, worst: gaps.length ? gaps[gaps.length - 1] : NaN, p99,
                   ttft: w1 - w0, numGaps: gaps.length, chatTokens: during });
  showRuns();
}

function showRuns() {
  const ms = (x) => (Number.isNaN(x) ? "–" : `${(x * 1000).toFixed(0)} ms`);
  const body = $("runs").querySelector("tbody");
  body.innerHTML = "";
  demo.runs.forEach((r, i) => {
    const tr = document.createElement("tr");
    for (const v of [i + 1, r.label, r.numTokens, ms(r.worst), ms(r.p99), r.chatTokens.reduce((a, x) => a + x, 0), ms(r.ttft)]) {
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
  for (const s of demo.streams) s.max = 0;
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
    const label = `${t.toFixed(0)} s`, half = g.measureText(label).width / 2;
    g.textAlign = x(t) + half > W ? "right" : "center"; // the last tick stays inside the canvas
    g.fillText(label, g.textAlign === "right" ? W - 2 : x(t), H - B + 16);
  }
  g.save(); g.translate(14, (H - B + T) / 2); g.rotate(-Math.PI / 2); g.textAlign = "center";
  g.fillText("gap between tokens (ms)", 0, 0); g.restore();
  // Event lines, with their labels on two rows above the plot: each label goes on the first row where it does
  // not overlap the previous one (else the row that ends first), and left of its line near the right edge.
  const rowEnd = [-Infinity, -Infinity], rowY = [T - 21, T - 4];
  for (const ev of demo.events) {
    if (ev.t < t0) continue;
    g.strokeStyle = ev.color; g.setLineDash([4, 4]); g.beginPath(); g.moveTo(x(ev.t), T); g.lineTo(x(ev.t), H - B);
    g.stroke(); g.setLineDash([]); g.fillStyle = ev.color;
    const w = g.measureText(ev.label).width;
    const right = x(ev.t) + 3 + w > W - R;
    const x0 = right ? x(ev.t) - 3 - w : x(ev.t) + 3;
    const row = rowEnd.findIndex((end) => x0 > end + 8) >= 0 ? rowEnd.findIndex((end) => x0 > end + 8)
      : (rowEnd[0] <= rowEnd[1] ? 0 : 1);
    rowEnd[row] = x0 + w;
    g.textAlign = "left";
    g.fillText(ev.label, x0, rowY[row]);
  }
  let drawn = 0;
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
  }
  g.restore();
  showLegend();
  cv.dataset.points = String(demo.points);
  cv.dataset.drawn = String(drawn);
  cv.dataset.ymax = String(yMax);
}

// The legend is HTML under the chart, wrapping at any width: it never crosses the event lines or their labels.
function showLegend() {
  const parts = [`largest gap since ${demo.runLabel || "page load"}:`,
    ...demo.streams.map((s) => `${s.label}: max ${s.max.toFixed(0)} ms`)];
  const el = $("legend");
  if (el.dataset.text === parts.join("|")) return;
  el.dataset.text = parts.join("|");
  el.replaceChildren(...parts.map((text, i) => {
    const span = document.createElement("span");
    span.textContent = i ? `■ ${text}` : text;
    if (i) span.style.color = demo.streams[i - 1].color;
    return span;
  }));
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
  $("start-chats").onclick = startChats;
  $("send-rag").onclick = sendRag;
  $("chunked").onchange = setChunked;
  $("budget").onchange = setBudget;
  $("stop-all").onclick = () => {
    if (demo.chats) demo.chats.abort();
    demo.streams.forEach((s) => s.controller && s.controller.abort());
  };
  setInterval(pollState, 500);
  setInterval(draw, 100);
  setInterval(updateWaiting, 100);
  setInterval(renderPanes, 100);
  pollState();
  draw();
  document.body.dataset.ready = "1";
}

init().catch((e) => { $("status").textContent = `failed to start: ${e.message}`; });
