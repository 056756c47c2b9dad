// minivllm live demo: the gap chart and its legend (§11.1.1, §11.2). Loaded after demo.js.
// The chart keeps the whole session on its time axis, and its y axis at the session's largest gap: the
// unchunked plateau stays on screen beside the chunked run, on the same scale, while the class compares them.
"use strict";

const SIZING_COLOR = "#9e9e9e"; // the gaps of the page's own sizing prompts (not the scene)
const LANE_PX = 3; // chat i's line is drawn i·3 px above its value, so six equal gaps show as six lines

function niceStep(range, ticks) {
  const raw = range / ticks, mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
}

const fmtTick = (v, step) => (step >= 1 ? v.toFixed(0) : v.toFixed(step >= 0.1 ? 1 : 2));

// Every text drawn on the canvas leaves its box here (canvas pixels, CSS units), so that a test can check that
// none overlaps another: demo.labelBoxes = [{text, x, y, w, h}].
function textBox(g, text, x, y, align, boxes) {
  const w = g.measureText(text).width, h = 14;
  const x0 = align === "right" ? x - w : align === "center" ? x - w / 2 : x;
  g.textAlign = "left";
  g.fillText(text, x0, y);
  boxes.push({ text, x: x0, y: y - h + 3, w, h });
}

function draw() {
  const cv = $("gap-chart"), dpr = window.devicePixelRatio || 1;
  const W = cv.clientWidth, H = cv.clientHeight;
  if (cv.width !== W * dpr) { cv.width = W * dpr; cv.height = H * dpr; }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const boxes = [];
  const L = 60, R = 12, T = 30, B = 30, t1 = Math.max(now(), 10), t0 = 0;
  // The y axis fits the scene's gaps; the sizing's own (grey) may reach past its top, clipped there.
  const all = demo.streams.flatMap((s) => s.gaps), scene = all.filter((p) => !p.sizing);
  const visible = scene.length ? scene : all;
  // The stall threshold (red dashes) stays in view too.
  const top = visible.reduce((m, p) => Math.max(m, p.g / 1000), Math.max(0.05, demo.stallS || 0)) * 1.1;
  const yStep = niceStep(top, 5);
  const yMax = Math.ceil(top / yStep) * yStep;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R), y = (v) => H - B - (v / yMax) * (H - T - B);
  g.font = "14px system-ui"; g.strokeStyle = "#e0e0e0"; g.fillStyle = "#555"; g.lineWidth = 1;
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    g.beginPath(); g.moveTo(L, y(v)); g.lineTo(W - R, y(v)); g.stroke();
    textBox(g, fmtTick(v, yStep), L - 6, y(v) + 5, "right", boxes);
  }
  const xStep = niceStep(t1 - t0, 8);
  for (let t = Math.ceil(t0 / xStep) * xStep; t <= t1; t += xStep) {
    const label = `${t.toFixed(0)} s`, half = g.measureText(label).width / 2;
    // The first tick starts at the axis (clear of the y ticks), the last ends inside the canvas.
    const left = x(t) - half < L, right = x(t) + half > W - 2;
    textBox(g, label, right ? W - 2 : x(t), H - B + 18, left ? "left" : right ? "right" : "center", boxes);
  }
  // The axis title sits left of the ticks' widest label, rotated; its box is the rotated one.
  const widest = Math.max(0, ...boxes.filter((b) => b.x < L).map((b) => b.w));
  const tx = Math.max(12, L - 6 - widest - 8), title = "gap between tokens (s)";
  g.save(); g.translate(tx, (H - B + T) / 2); g.rotate(-Math.PI / 2); g.textAlign = "center";
  g.fillText(title, 0, 0); g.restore();
  const tw = g.measureText(title).width;
  boxes.push({ text: title, x: tx - 12, y: (H - B + T) / 2 - tw / 2, w: 14, h: tw });
  // The stall line: a gap above STALL_FACTOR x the measured decode step is a stall (drawn in red on the panes).
  if (demo.stallS !== null && demo.stallS < yMax) {
    g.strokeStyle = "#c62828"; g.setLineDash([2, 4]); g.beginPath(); g.moveTo(L, y(demo.stallS));
    g.lineTo(W - R, y(demo.stallS)); g.stroke(); g.setLineDash([]);
  }
  // Event lines, each with its number on a row above the plot (the legend says what each number is): a number
  // goes on the first of two rows where it clears the previous one, else right of the row's last number.
  const rowEnd = [-Infinity, -Infinity], rowY = [T - 16, T - 1]; // boxes 14 px tall: rows 15 px apart
  demo.events.forEach((ev, i) => {
    g.strokeStyle = ev.color; g.setLineDash([4, 4]); g.beginPath(); g.moveTo(x(ev.t), T); g.lineTo(x(ev.t), H - B);
    g.stroke(); g.setLineDash([]); g.fillStyle = ev.color; g.font = "bold 13px system-ui";
    const text = String(i + 1), w = g.measureText(text).width;
    let row = rowEnd.findIndex((end) => x(ev.t) - w / 2 > end + 4);
    if (row < 0) row = rowEnd[0] <= rowEnd[1] ? 0 : 1;
    const x0 = Math.min(Math.max(x(ev.t) - w / 2, rowEnd[row] + 4), W - w - 1);
    textBox(g, text, x0, rowY[row], "left", boxes);
    rowEnd[row] = x0 + w;
  });
  g.font = "14px system-ui";
  let drawn = 0;
  g.save(); g.beginPath(); g.rect(L, T, W - L - R, H - T); g.clip();
  let lane = 0;
  for (const s of demo.streams) {
    const off = s.kind === "chat" ? LANE_PX * lane++ : 0;
    // Each gap is a flat segment over the interval it lasted, at the height of its length: a stall is a plateau.
    for (const sizing of [true, false]) {
      const gaps = s.gaps.filter((p) => Boolean(p.sizing) === sizing);
      g.strokeStyle = sizing ? SIZING_COLOR : s.color; g.fillStyle = g.strokeStyle; g.lineWidth = 2; g.beginPath();
      let end = null;
      for (const p of gaps) {
        const start = p.t - p.g / 1000, yy = y(p.g / 1000) - off;
        if (end !== null && Math.abs(start - end) < 1e-6) g.lineTo(x(start), yy); else g.moveTo(x(start), yy);
        g.lineTo(x(p.t), yy);
        end = p.t;
      }
      g.stroke();
      for (const p of gaps) { // a first token (the wait since the request was sent) is a hollow, larger mark
        const yy = y(p.g / 1000) - off;
        if (p.first) g.strokeRect(x(p.t) - 3.5, yy - 3.5, 7, 7); else g.fillRect(x(p.t) - 1.5, yy - 1.5, 3, 3);
      }
    }
    drawn += s.gaps.length;
  }
  g.restore();
  demo.labelBoxes = boxes;
  showLegend();
  cv.dataset.points = String(demo.points);
  cv.dataset.drawn = String(drawn);
  cv.dataset.ymax = String(yMax);
}

// The legend is HTML under the chart, wrapping at any width: the numbered events, then each stream's largest
// gap since the last scheduler change.
function showLegend() {
  const events = demo.events.map((ev, i) => [`${i + 1} ${ev.label}`, ev.color]);
  const stall = demo.stallS === null ? [] : [[`red dashes: a stall, a gap over ${STALL_FACTOR}× the decode `
    + `step (${secs(demo.stallS)})`, "#c62828"]];
  const streams = demo.streams.map((s) => [`■ ${s.label} ${secs(s.max / 1000)}`, s.color]);
  const sizing = demo.streams.some((s) => s.gaps.some((p) => p.sizing))
    ? [["grey: the gaps while the page sized the scene (its own prompts)", SIZING_COLOR]] : [];
  const parts = [...events, ...stall, ...sizing, [`largest gap since ${demo.runLabel || "page load"} (chat lines ${LANE_PX} px `
    + "apart):", "#555"], ...streams];
  const el = $("legend");
  const key = parts.map((p) => p[0]).join("|");
  if (el.dataset.text === key) return;
  el.dataset.text = key;
  el.replaceChildren(...parts.map(([text, color]) => {
    const span = document.createElement("span");
    span.textContent = text;
    span.style.color = color;
    return span;
  }));
}
