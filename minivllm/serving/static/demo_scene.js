// minivllm live demo: the scene sized to this machine (§11.1.1, §11.2), the lecturer's script, and the
// comparison sentence. Loaded after demo.js (it uses its api, demo, $ and helpers).
"use strict";

// The longest unchunked stall the page will ever choose (seconds): ?max_stall_s=N on the page's address.
const MAX_STALL_S = Number(new URLSearchParams(location.search).get("max_stall_s")) || 15;
const STALL_TARGET = 10; // aim: the unchunked step ~10x the chunked run's slowest step (below the cap)
const FIT_TOLERANCE = 0.25; // the fit must predict a measured prompt near the chosen length within 25%
const MAX_CALIBRATIONS = 7;
const BRACKET_STALL = 1.15; // the sizing's probe above the chosen length: predicted at most 1.15x the cap
const FIRST_PROBE = 128; // tokens: the first sizing prompt, short enough to be a short stall on any machine

// A steady baseline: the last `count` published steps each decoded every chat and prefilled nothing, and
// nothing waits. Returns their median duration (the decode step), or null.
function steadyDecode(steps, n, count) {
  const last = steps.slice(-count);
  if (last.length < count || !last.every((x) => x.prefill_tokens === 0 && x.decode_tokens === n && x.num_waiting === 0)) {
    return null;
  }
  return median(last.map((x) => x.duration));
}

async function waitSteady(n) {
  for (let tries = 0; ; tries++) {
    if (tries > 960 || !demo.chats) throw new Error("the chats did not settle into steady decoding");
    const d = steadyDecode((await api("/admin/state?last_steps=8")).steps, n, 8);
    if (d !== null) return d;
    await sleep(250);
  }
}

// One sizing prompt of numTokens tokens, sent with max_tokens 1 while the chats stream (unchunked: sizeScene
// switches chunking off): the prompt tokens of the steps that prefilled it (first scheduling to first token, engine
// clock) and the time those steps took beyond a decode step (the chats' share).
// The decode step is the median of the 8 decode-only steps just before the prompt was first scheduled (the
// machine's speed drifts when its load changes: the scene-wide value would mis-measure a later prompt).
async function calibrate(numTokens, decode) {
  demo.ragSeed += 1;
  const p = await api(`/admin/rag_prompt?num_tokens=${numTokens}&seed=${demo.ragSeed}`);
  const out = await api("/v1/completions", { model: demo.model, prompt: p.prompt_token_ids, max_tokens: 1,
                                             temperature: 0 });
  const rec = (await api(`/admin/trace?request_ids=${out.id}`)).requests[out.id];
  const { steps, all } = await prefillSteps(rec.first_scheduled_time, rec.token_times[0]);
  const tokens = steps.reduce((a, x) => a + x.prefill_tokens, 0);
  if (!tokens) throw new Error("no prefill step was recorded for the sizing prompt");
  const before = all.filter((x) => x.end <= rec.first_scheduled_time && x.prefill_tokens === 0).slice(-8);
  const d = before.length >= 3 ? median(before.map((x) => x.duration)) : decode;
  const t = steps.reduce((a, x) => a + Math.max(0, x.duration - d), 0);
  // L counts every token those steps prefilled (the cost being fitted: another request's prompt may share a
  // step); `cached` is this prompt's own prefix-cache hit, from its trace record.
  return { L: tokens, sent: numTokens, cached: rec.num_cached_tokens, t, steps: steps.length, decode: d };
}

// The published steps that prefilled between first and last (engine clock), once the snapshot has them.
async function prefillSteps(first, last) {
  let st = null;
  for (let tries = 0; !st || !st.steps.length || st.steps[st.steps.length - 1].end < last; tries++) {
    if (tries > 100) throw new Error("the engine did not publish the prompt's steps");
    if (st) await sleep(20); // the reply can come back before the snapshot of its last step is published
    st = await api("/admin/state?last_steps=1000");
  }
  return { steps: st.steps.filter((x) => x.start >= first && x.end <= last && x.prefill_tokens > 0), all: st.steps };
}

// Least squares for t = a·L + b·L² (b: attention over a longer prompt costs more per token), with a, b >= 0;
// one prompt, or a negative coefficient (timing noise), gives the best line or parabola through the origin.
function fitCost(pts) {
  const s = (f) => pts.reduce((acc, p) => acc + f(p), 0);
  const [s2, s3, s4] = [s((p) => p.L ** 2), s((p) => p.L ** 3), s((p) => p.L ** 4)];
  const [y1, y2] = [s((p) => p.t * p.L), s((p) => p.t * p.L ** 2)];
  const line = { a: Math.max(1e-9, y1 / s2), b: 0 };
  const det = s2 * s4 - s3 * s3;
  if (pts.length < 2 || det <= 0) return line;
  const a = (y1 * s4 - y2 * s3) / det, b = (s2 * y2 - s3 * y1) / det;
  if (b < 0) return line;
  if (a < 0) return { a: 0, b: y2 / s4 };
  return { a, b };
}

// The scene sized to this machine (a laptop CPU or a GPU), with the chats streaming steadily. What it predicts is
// one unchunked step, so that is what it measures: chunking is switched off for the sizing (and restored after),
// and each sizing prompt is read in one step, timed by the engine (the published step's duration, less a decode
// step). The prompts start small (FIRST_PROBE) and grow geometrically (at most 2x the longest measured, and no
// longer than a quadratic extrapolation of it allows under the cap: the page never makes a stall much longer than
// the cap while sizing), then measure the chosen length itself; the fit is refitted after each, until it predicts
// a prompt measured near the chosen length within 25% and predicted the last prompt (before it was measured)
// within 25%. The RAG prompt is the shortest whose unchunked step lasts STALL_TARGET times the chunked run's
// slowest step (its last chunk, which attends to the whole prompt), never one whose predicted unchunked stall
// exceeds MAX_STALL_S, and within max_model_len and the KV cache.
async function sizeScene(n) {
  demo.sizing = { what: "waiting for the chats to settle", measured: [] };
  const decode = await waitSteady(n);
  const budget = Number($("budget").value);
  const chunk = Math.max(1, Math.min(defaultThreshold(budget), budget - n)); // a chunk of the chunked run
  // The RAG prompt and its 16 tokens must fit in max_model_len, and in the KV cache beside the chats' longest
  // answers (each chat's prompt, under 64 tokens, and its max_tokens), or preemption would blur the scene.
  const st = await api("/admin/state?last_steps=0");
  const room = 0.9 * st.num_gpu_blocks * st.block_size - n * (64 + demo.chatTokens);
  const lenCap = Math.floor(Math.min(demo.maxModelLen - 48, room));
  const before = demo.scheduling; // restored once the sizing is done
  addEvent("sizing the scene", "#555");
  if (before.enable_chunked_prefill) showScheduling(await api("/admin/scheduling", { enable_chunked_prefill: false }));
  let result;
  try {
    result = await probeScene(n, decode, chunk, lenCap);
  } finally {
    if (before.enable_chunked_prefill) {
      showScheduling(await api("/admin/scheduling", { enable_chunked_prefill: true,
        max_num_batched_tokens: before.max_num_batched_tokens,
        long_prefill_token_threshold: before.long_prefill_token_threshold }));
    }
  }
  demo.scene = result;
  demo.sizing = null;
  $("rag-tokens").value = result.ragTokens;
  $("scene").textContent = sceneSentence(result, n);
}

// The tokens of a sizing prompt the prefix cache already held (the template's opening): the least over them.
// (Not sent - L: a step that also prefilled another request's prompt makes L exceed the tokens sent.)
const cached = (pts) => Math.max(0, Math.min(...pts.map((p) => p.cached)));

async function probeScene(n, decode, chunk, lenCap) {
  const stall = (f, L) => decode + f.a * L + f.b * L * L;
  const lastChunk = (f, L) => decode + f.a * chunk + f.b * (2 * L * chunk - chunk * chunk);
  // The longest length whose predicted stall is within `limit` seconds (and lenCap); the shortest reaching the aim.
  const longest = (f, limit) => { let L = 16; while (L + 16 <= lenCap && stall(f, L + 16) <= limit) L += 16; return L; };
  const choose = (f) => {
    const most = longest(f, MAX_STALL_S);
    let L = Math.min(4 * chunk, most);
    while (L + 16 <= most && stall(f, L) < STALL_TARGET * lastChunk(f, L)) L += 16;
    return L;
  };
  const near = (p, L) => Math.abs(p.L - L) <= FIT_TOLERANCE * L;
  const within = (f, p) => Math.abs(f.a * p.L + f.b * p.L ** 2 - p.t) <= FIT_TOLERANCE * p.t;
  const pts = [];
  let L = Math.min(FIRST_PROBE, lenCap), f = null, converged = false;
  while (pts.length < MAX_CALIBRATIONS) {
    demo.sizing.what = `reading a ${L}-token prompt in one step (${pts.length + 1} of at most ${MAX_CALIBRATIONS})`;
    const m = await calibrate(L, decode);
    const previous = f; // the fit without this prompt: did it predict it?
    pts.push(m);
    demo.sizing.measured = pts;
    f = fitCost(pts);
    const target = choose(f);
    const close = pts.filter((p) => near(p, target)).sort((p, q) => Math.abs(p.L - target) - Math.abs(q.L - target));
    const below = pts.some((p) => p.L <= target), above = pts.some((p) => p.L >= target) || target + 16 > lenCap;
    if (below && above && close.length && within(f, close[0]) && previous !== null && within(previous, m)) {
      converged = true;
      break;
    }
    // The longest prompt measured, and how long the next may be while growing: at most twice it, and no longer
    // than its time grown quadratically (a·L + b·L² with a, b >= 0 grows no faster) allows under the cap.
    const top = pts.reduce((p, q) => (q.L > p.L ? q : p));
    let safe = Math.min(2 * top.L, lenCap);
    while (safe > top.L && decode + top.t * (safe / top.L) ** 2 > MAX_STALL_S) safe -= 16;
    // Below the chosen length: grow towards it; near it (the longest measured within 25%, predicted by the fit
    // before it within 25%): one prompt up to 10% above it, to bracket it, predicted at most 1.15x the cap (the
    // longest stall the sizing makes); bracketed: the chosen length itself, measured again.
    const trusted = near(top, target) && previous !== null && within(previous, m);
    const bracket = Math.min(1.1 * target, longest(f, BRACKET_STALL * MAX_STALL_S));
    let next = !above && trusted ? bracket : target > safe ? safe : target;
    next = Math.max(16, Math.round(next / 16) * 16);
    if (next <= top.L && target > top.L) break; // the cap stops the growth below the chosen length: not converged
    L = Math.min(lenCap, next + cached(pts)); // the prompt to send: its prefill plus the cached opening
  }
  // Not converged: the fit is not trusted up to the cap; the prompt stays within 3/4 of it.
  const aimed = choose(f);
  const L1 = converged ? aimed : Math.min(aimed, longest(f, 0.75 * MAX_STALL_S));
  const pred = stall(f, L1), slow = lastChunk(f, L1);
  // The fit counts the tokens prefilled; a prompt also has the template's opening, whose full blocks the prefix
  // cache may already hold (each sizing prompt's own prefix-cache hit, from its trace record: the least of them).
  const ragTokens = Math.min(lenCap, L1 + cached(pts));
  return { decode, a: f.a, b: f.b, chunk, cap: lenCap, maxStall: MAX_STALL_S, ragTokens, stall: pred,
           lastChunk: slow, ratio: pred / slow, converged, trimmed: L1 < aimed, measured: pts, capped: pred < STALL_TARGET * slow - 1e-9 };
}

const secs = (x) => `${x < 0.1 ? x.toFixed(3) : x < 10 ? x.toFixed(2) : x.toFixed(1)} s`;

function sceneSentence(sc, n) {
  const measured = sc.measured.map((p) => `${secs(p.t)} for ${p.L.toLocaleString("en")} tokens`).join(", ");
  const why = sc.trimmed ? `kept within 3/4 of the ${sc.maxStall} s limit: the measurements disagreed by more `
      + `than ${FIT_TOLERANCE * 100}%, so the fit is not trusted up to the limit`
    : !sc.capped ? `about ${Math.round(sc.ratio)}× the longest pause with chunking (${secs(sc.lastChunk)})`
    : sc.stall >= 0.7 * sc.maxStall ? `kept under the ${sc.maxStall} s limit`
      : `as long as max_model_len and the KV cache allow`;
  // A stall is a gap over STALL_FACTOR decode steps: on a busy machine the cap may leave little of it to see.
  const busy = sc.stall < 1.5 * STALL_FACTOR * sc.decode
    ? ` This machine is busy: a stall (over ${STALL_FACTOR}× a decode step) starts at ${secs(STALL_FACTOR * sc.decode)}, `
      + `so the counters will barely turn red; close other programs or raise the cap (?max_stall_s=).` : "";
  return `Measured on this machine: one step that gives each of the ${n} chats a token takes ${secs(sc.decode)}; `
    + `reading a prompt in one step (chunking off) took ${measured}. `
    + `Chosen: a ${sc.ragTokens.toLocaleString("en")}-token prompt, predicted to `
    + `freeze every chat for ${secs(sc.stall)} without chunking (${why}).${busy}`;
}

// The comparison, from the two runs' numbers: what chunking did to the chats and to the long prompt's first token.
function compareSentence() {
  const off = demo.runs.find((r) => r.label === "unchunked");
  const on = [...demo.runs].reverse().find((r) => r.label.startsWith("chunked"));
  if (!off || !on) return "";
  const times = off.worst / on.worst;
  const predicted = off.predicted === null ? "" : ` (the sizing predicted ${secs(off.predicted)})`;
  let s = `Chunking off, the long prompt was read in one step of ${secs(off.longestStep)}${predicted} and every chat froze for `
    + `up to ${secs(off.worst)} (${sum(off.chatTokens)} chat tokens meanwhile); chunking on, it took `
    + `${on.prefillSteps} steps and the chats' worst gap was ${secs(on.worst)}, ${times.toFixed(1)}× shorter `
    + `(${sum(on.chatTokens)} chat tokens meanwhile). `;
  // The sizing's prediction is a promise to the lecturer: when the machine slowed down since, the page says so.
  const over = off.maxStall !== null && off.longestStep > off.maxStall ? `, over the ${off.maxStall} s limit` : "";
  if (off.predicted !== null && off.longestStep > (1 + FIT_TOLERANCE) * off.predicted) {
    s += `That step overshot: ${secs(off.longestStep)} against ${secs(off.predicted)} predicted${over}; this `
      + `machine ran slower than while the page measured it. `;
  } else if (off.predicted !== null && over) {
    s += `That step took ${secs(off.longestStep)} against ${secs(off.predicted)} predicted${over} (within the `
      + `sizing's ${FIT_TOLERANCE * 100}% tolerance: a busy machine's timings vary). `;
  }
  if (on.ttft < off.ttft) {
    s += `Its first token even came earlier (${secs(off.ttft)} → ${secs(on.ttft)}): `
      + (on.prefillTime < off.prefillTime
        ? `its ${on.prefillSteps} small steps took ${secs(on.prefillTime)} in all, less than the one big step `
          + `(${secs(off.prefillTime)}): on this machine small steps ran faster per token.`
        : `it waited less before its first step (${secs(on.queued)} against ${secs(off.queued)}).`);
  } else {
    s += `Its first token came later (${secs(off.ttft)} → ${secs(on.ttft)}): each of its steps also carried the `
      + `chats' tokens (${secs(on.prefillTime)} of steps against ${secs(off.prefillTime)}), the price of their `
      + `smooth streaming.`;
  }
  return s;
}

const sum = (xs) => xs.reduce((a, x) => a + x, 0);

// The lecturer's script: each step is done once what it asks for has happened; the first not done is the next,
// and its control is highlighted.
const SCRIPT = [
  ["Start the chats", "#start-chats", () => demo.chats !== null || demo.runs.length > 0],
  ["Wait until calm: the page measures this machine", null, () => demo.calm || (demo.calm = demo.scene !== null
    && demo.sizing === null && demo.steady)],
  ["Switch chunked prefill off", "#chunked-label", () => !demo.scheduling.enable_chunked_prefill || hasRun("unchunked")],
  ["Send the long RAG prompt", "#send-rag", () => demo.ragLabels.includes("unchunked") || hasRun("unchunked")],
  ["Watch: every chat waits for one long step", null, () => hasRun("unchunked")],
  ["Switch chunked prefill on", "#chunked-label", () => demo.scheduling.enable_chunked_prefill || hasRun("chunked")],
  ["Send it again", "#send-rag", () => demo.ragLabels.some((l) => l.startsWith("chunked")) || hasRun("chunked")],
  ["Compare the two rows", "#runs", () => hasRun("chunked")],
];
const hasRun = (prefix) => demo.runs.some((r) => r.label.startsWith(prefix));

function updateScript() {
  if (!demo.scheduling) return;
  let next = SCRIPT.length;
  for (let i = 0, ok = true; i < SCRIPT.length; i++) {
    ok = ok && SCRIPT[i][2]();
    if (!ok && next === SCRIPT.length) next = i;
  }
  const items = $("script").children;
  for (let i = 0; i < SCRIPT.length; i++) {
    items[i].className = i < next ? "done" : i === next ? "next" : "";
  }
  for (const sel of ["#start-chats", "#chunked-label", "#send-rag", "#runs"]) {
    document.querySelector(sel).classList.toggle("next", next < SCRIPT.length && SCRIPT[next][1] === sel);
  }
  document.body.dataset.step = String(next + 1);
  const reasons = {
    "start-chats": demo.chats ? "the chats are streaming" : "",
    "send-rag": !demo.chats ? "start the chats first"
      : demo.sizing ? `sizing the scene: ${demo.sizing.what}`
        : demo.ragRunning ? "the RAG prompt is still being answered"
          : !demo.steady ? "waiting for the chats to settle (a prefill is in flight)" : "",
    "chunked": demo.sizing ? "sizing the scene" : "",
  };
  for (const [id, why] of Object.entries(reasons)) {
    $(id).disabled = why !== "";
    $(id).title = why;
  }
  $("reason").textContent = demo.chats ? reasons["send-rag"] : "";
}
