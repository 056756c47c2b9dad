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
// A stall, as everywhere in the chapter (minivllm/lab/metrics/summary.py STALL_FACTOR): a gap over 5x the
// median decode step. The panes' counters turn red past it, relative to this machine's measured step.
const STALL_FACTOR = 5.0;
const T0 = performance.now();
// demo.chats: the chats' connection while it is open; demo.scene: what sizeScene (demo_scene.js) measured and
// chose; demo.sizing: what the sizing is doing while it runs; demo.calm: sized, and steady since; demo.steady:
// the last published steps decoded every chat and prefilled nothing; demo.stallS: STALL_FACTOR x the median
// decode step (null until one is seen); demo.ragLabels: the scheduler settings seen while the RAG prompt ran (a
// change mid-run relabels its row); ragSeed: a new seed per page, so that no RAG prompt hits the prefix cache.
const demo = { model: null, maxModelLen: 0, chatTokens: 200, streams: [], events: [], points: 0, runs: [],
               scene: null, sizing: null, chats: null, steady: false, calm: false, stallS: null, ragRunning: false,
               ragLabels: [], scheduling: null, labelBoxes: [], ragSeed: Math.floor(Math.random() * 1e6) };
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
  const ttft = s.ttft === null ? "–" : secs(s.ttft);
  const last = s.gaps.length ? secs(s.gaps[s.gaps.length - 1].g / 1000) : "–";
  s.pane.querySelector(".stats").textContent = `${s.running ? "▶" : "■"} ${s.tokens} tok · TTFT ${ttft}\n`
    + `gap ${last} · max ${secs(s.max / 1000)}`;
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
    // Nothing before a decode step is measured (the chats' own first prefill is not the scene); red past a stall.
    // While the page sizes the scene its own prompts slow the chats: shown, in grey, as the sizing's.
    const waiting = demo.stallS !== null && open > demo.stallS;
    const sizing = waiting && demo.sizing !== null;
    el.textContent = waiting ? `waiting ${open.toFixed(1)} s${sizing ? " (sizing)" : ""}` : ""; // first token too
    el.classList.toggle("late", waiting && !sizing);
    el.classList.toggle("sizing", sizing);
    s.pane.dataset.openGap = open.toFixed(3);
  }
}

// One token (one delta) of stream s arrived now: its gap (or, for a chat, its wait for a first token) is plotted.
function addToken(s, text) {
  const t = now();
  // A gap that ends while the page sizes the scene is the sizing's own stall: drawn grey, not in the maxima.
  const sizing = demo.sizing !== null;
  s.tokens += 1;
  s.total += 1;
  if (s.last === null) {
    s.ttft = t - s.start;
    // A chat's wait for its first token is a gap its user sees too: plotted, marked as a first token.
    if (s.kind === "chat") {
      s.gaps.push({ t, g: s.ttft * 1000, first: true, sizing });
      if (!sizing) s.max = Math.max(s.max, s.ttft * 1000);
    }
  } else {
    const g = (t - s.last) * 1000;
    s.gaps.push({ t, g, sizing });
    if (!sizing) s.max = Math.max(s.max, g);
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
  // The sizing's steps must be its own: the RAG button and the switch wait for it (updateScript says why).
  const sizing = sizeScene(chats.length)
    .catch((e) => { $("scene").textContent = `scene not sized: ${e.message}`; })
    .finally(() => { demo.sizing = null; });
  try {
    const auth = ADMIN_TOKEN ? { Authorization: `Bearer ${ADMIN_TOKEN}` } : {};  // /demo/chats is guarded too
    const r = await fetch("/demo/chats", { method: "POST", headers: { ...auth, "Content-Type": "application/json" },
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

async function sendRag() {
  const rag = demo.streams.find((s) => s.kind === "rag");
  if (demo.ragRunning) return;
  const n = Number($("rag-tokens").value);
  demo.ragSeed += 1;
  demo.ragRunning = true; // from now: a second click waits for this run
  demo.ragLabels = [chunkLabel()];
  try {
    const p = await api(`/admin/rag_prompt?num_tokens=${n}&seed=${demo.ragSeed}`);
    addEvent(`RAG ${p.num_tokens} tok (${chunkLabel()})`, RAG_COLOR);
    const chatIds = demo.streams.filter((s) => s.kind === "chat").map((s) => s.ids.length);
    startAnswer(rag, null); // its TTFT counts from the request, as the table's does
    if (await runRag(rag, { prompt: p.prompt_token_ids, max_tokens: 16, temperature: 0, ignore_eos: true })) {
      // The settings it ran under: a change while its row is being measured (after its last token) is not one.
      const label = demo.ragLabels.join(" → ");
      await addRun(p.num_tokens, rag.ids[rag.ids.length - 1], chatIds, label);
    }
  } catch (e) { rag.pane.querySelector(".text").textContent = `[error: ${e.message}]`; }
  demo.ragRunning = false;
}

// A scheduler change seen while the RAG prompt runs (this tab's or another's) joins its row's label.
function noteRagSettings() {
  const label = chunkLabel();
  if (demo.ragRunning && demo.ragLabels[demo.ragLabels.length - 1] !== label) demo.ragLabels.push(label);
}

// One row per RAG run, from the engine's trace (/admin/trace, engine clock): while the RAG prompt was being
// prefilled (its arrival to its first token), the longest and the p99 gap any chat saw between two of its
// tokens (or before its first one), and the RAG prompt's TTFT. The rows stay on screen for the comparison.
async function addRun(numTokens, ragId, chatIdsBefore, label) {
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
  // The steps that prefilled it: how many, how long in all, the longest (the unchunked stall the sizing predicted).
  const { steps } = await prefillSteps(rag.first_scheduled_time, w1);
  demo.runs.push({ label, numTokens, worst: gaps.length ? gaps[gaps.length - 1] : NaN,
                   p99, ttft: w1 - w0, numGaps: gaps.length, chatTokens: during, prefillSteps: steps.length,
                   prefillTime: sum(steps.map((x) => x.duration)), queued: rag.first_scheduled_time - w0,
                   longestStep: Math.max(0, ...steps.map((x) => x.duration)),
                   predicted: demo.scene && demo.scene.ragTokens === numTokens ? demo.scene.stall : null,
                   maxStall: demo.scene ? demo.scene.maxStall : null });
  showRuns();
}

function showRuns() {
  const ms = (x) => (Number.isNaN(x) ? "–" : secs(x));
  const body = $("runs").querySelector("tbody");
  body.innerHTML = "";
  demo.runs.forEach((r, i) => {
    const tr = document.createElement("tr");
    for (const v of [i + 1, r.label, r.numTokens, ms(r.worst), ms(r.p99), sum(r.chatTokens), ms(r.ttft)]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  });
  $("runs").hidden = demo.runs.length === 0;
  $("compare").textContent = compareSentence();
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
  noteRagSettings();
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
    // The decode step: the median of the recent steps that prefilled nothing; a stall is STALL_FACTOR of it.
    const decodes = st.steps.filter((x) => x.prefill_tokens === 0 && x.decode_tokens > 0).map((x) => x.duration);
    if (decodes.length >= 3) demo.stallS = STALL_FACTOR * median(decodes);
    const chats = demo.streams.filter((s) => s.kind === "chat" && s.running).length;
    demo.steady = chats > 0 && st.num_waiting === 0 && (demo.stallS === null || inStep < demo.stallS)
      && steadyDecode(st.steps, chats, 3) !== null;
    const late = demo.stallS !== null && inStep > demo.stallS;
    const step = late || inStep > 1 ? `a step has been running for ${inStep.toFixed(1)} s`
      : last ? `step ${last.step}: ${last.prefill_tokens} prefill + ${last.decode_tokens} decode tokens in `
        + `${(last.duration * 1000).toFixed(0)} ms` : "no step yet";
    $("status").textContent = (st.alive ? "" : "ENGINE NOT ANSWERING · ")
      + `${demo.model} · ${chunkLabel(st.scheduling)} · ${step} · running ${st.num_running}, waiting `
      + `${st.num_waiting} · KV blocks free ${st.num_free_blocks}/${st.num_gpu_blocks}`;
    $("status").classList.toggle("late", late || !st.alive);
    document.body.dataset.live = "1"; // the live state is on screen
  } catch (e) {
    $("status").textContent = `engine not answering: ${e.message}`;
    $("status").classList.add("late");
  }
}

async function init() {
  // Both from the server's published state (never the engine thread): a reload during a long step shows the
  // live state at once.
  const [models, sc] = await Promise.all([api("/v1/models"), api("/admin/scheduling")]);
  demo.model = models.data[0].id;
  demo.maxModelLen = models.data[0].max_model_len;
  demo.chatTokens = Math.min(300, Math.floor(demo.maxModelLen / 3));
  $("rag-tokens").value = Math.min(2000, demo.maxModelLen - 64);
  CHATS.forEach((q, i) => makeStream("chat", `chat ${i + 1}`, COLORS[i]).question = q);
  makeStream("rag", "RAG prompt", RAG_COLOR);
  showScheduling(sc);
  pollState();
  $("start-chats").onclick = startChats;
  $("send-rag").onclick = sendRag;
  $("chunked").onchange = setChunked;
  $("budget").onchange = setBudget;
  $("stop-all").onclick = () => {
    if (demo.chats) demo.chats.abort();
    demo.streams.forEach((s) => s.controller && s.controller.abort());
  };
  setInterval(pollState, 500);
  setInterval(draw, 250); // a redraw costs the browser CPU the engine needs: 4 times a second is enough
  setInterval(updateWaiting, 100);
  setInterval(renderPanes, 100);
  setInterval(updateScript, 100);
  draw();
  updateScript();
  document.body.dataset.ready = "1";
}

// init runs once every script is loaded (demo_scene.js and demo_chart.js come after this file).
window.addEventListener("DOMContentLoaded", () => {
  init().catch((e) => { $("status").textContent = `failed to start: ${e.message}`; });
});
