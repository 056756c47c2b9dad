"""Drive a notebook open in JupyterLab (``--LabApp.expose_app_in_browser``) from Playwright.

Everything is read from the DOM and from plotly's own graph divs (``gd.data`` / ``gd.layout`` of each
``.js-plotly-plot``), never from pixels. A *widget app* is a cell output holding at least one plotly
figure and at least one control; its controls are tagged ``data-bt="<app>-<n>"`` so the test can
find them again.
"""

from __future__ import annotations

import json
import time
from typing import Any

PANEL = "(window.jupyterapp && window.jupyterapp.shell.currentWidget)"
SESSION = f"({PANEL} && {PANEL}.sessionContext && {PANEL}.sessionContext.session)"
KERNEL = f"({SESSION} && {SESSION}.kernel)"

# Count the kernel's returns to idle, so "the kernel has handled what I just sent" can be waited for.
WATCH_KERNEL = f"""() => {{
  const k = {KERNEL};
  if (!k || k.status !== 'idle') return false;
  if (!window.__bt) {{
    window.__bt = {{idle: 0}};
    k.statusChanged.connect((_, s) => {{ if (s === 'idle') window.__bt.idle++; }});
  }}
  return true;
}}"""
IDLE_COUNT = "() => window.__bt.idle"
IDLE_AFTER = f"(n) => window.__bt.idle > n && {KERNEL}.status === 'idle'"
# One round trip through the kernel, then two animation frames. The kernel handles its shell messages in order, so
# its reply comes after it has handled every widget message the page sent before (a slider's new value), and the
# page handles its kernel messages in order, so by then the page has applied every update the kernel sent back;
# the frames let plotly draw them.
ROUND_TRIP = f"""async () => {{
  await {KERNEL}.requestExecute({{code: '', silent: true, store_history: false}}).done;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}}"""
RUN_ALL = (
    f"() => {{ window.jupyterapp.commands.execute('notebook:run-all-cells'); return {PANEL}.content.widgets.length; }}"
)
ALL_RAN = f"""() => {{  // every code cell ran, or Run All stopped at an error
  const cells = {PANEL}.content.widgets.filter(c => c.model.type === 'code');
  const error = document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
  const busy = [...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));
  return {KERNEL}.status === 'idle' && !busy
    && (cells.every(c => c.model.executionCount !== null) || !!error);
}}"""
NOT_RUN = f"""() => {PANEL}.content.widgets.filter(c => c.model.type === 'code' && c.model.executionCount === null)
  .map(c => c.model.sharedModel.getSource().split('\\n')[0])"""

# Controls of every app, tagged; label = the widget's description or the button's text.
# a plotly figure drawn in an output (FigureWidgets draw once plotly's bundle has loaded, after Run All may end)
FIGURE_DRAWN = "() => document.querySelector('.jp-OutputArea-output .js-plotly-plot') !== null"
FIND_APPS = r"""() => {
  const kinds = [
    ['play', '.widget-play'], ['togglebuttons', '.widget-toggle-buttons'], ['slider', '.widget-slider'],
    ['dropdown', '.widget-dropdown'], ['checkbox', '.widget-checkbox'], ['toggle', 'button.widget-toggle-button'],
    ['text', '.widget-text'], ['button', 'button.widget-button'],
  ];
  const apps = [];
  for (const out of document.querySelectorAll('.jp-OutputArea-output')) {
    if (!out.querySelector('.js-plotly-plot')) continue;
    const a = apps.length, controls = [], seen = new Set();
    for (const [kind, sel] of kinds) {
      for (const el of out.querySelectorAll(sel)) {
        if ([...seen].some(s => s.contains(el))) continue;  // a Play's or a ToggleButtons' own buttons
        seen.add(el);
        const label = (el.querySelector('.widget-label') || el).textContent.trim();
        controls.push({kind, label, el});
      }
    }
    if (!controls.length) continue;
    controls.sort((x, y) => x.el.compareDocumentPosition(y.el) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
    out.setAttribute('data-bt-app', String(a));
    apps.push(controls.map((c, i) => {
      c.el.setAttribute('data-bt', `${a}-${i}`);
      return {id: `${a}-${i}`, kind: c.kind, label: c.label};
    }));
  }
  return apps;
}"""

# What an app shows: every figure (data and layout, typed arrays as lists), its texts and button labels.
APP_VIEW = r"""(a) => {
  const out = document.querySelector(`[data-bt-app="${a}"]`);
  const plain = (k, v) => (ArrayBuffer.isView(v) ? Array.from(v) : v);
  const figs = [...out.querySelectorAll('.js-plotly-plot')].map(gd => {
    const layout = Object.assign({}, gd.layout || {}); delete layout.template;
    const title = layout.title ? (typeof layout.title === 'string' ? layout.title : layout.title.text || '') : '';
    const len = v => (v && v.length !== undefined ? v.length : 0);
    return {
      json: JSON.stringify({data: gd.data || [], layout}, plain),
      title, annotations: (layout.annotations || []).map(x => x.text || ''),
      traces: (gd.data || []).map((t, i) => [
        t.type || 'scatter', ((gd._fullData || [])[i] || t).name || '', len(t.x), len(t.y)]),
      width: gd.getBoundingClientRect().width,
      svg: (gd.querySelector('svg.main-svg') || {width: {baseVal: {value: 0}}}).width.baseVal.value,
      right: gd.getBoundingClientRect().right, cell: out.getBoundingClientRect().right,
      // points in gd.data (x, y or a heatmap's z) and what plotly drew of them in the DOM
      points: (gd.data || []).reduce((n, t) => n + Math.max(len(t.x), len(t.y), len(t.z)), 0),
      drawn: gd.querySelectorAll('.cartesianlayer .trace .point, .cartesianlayer .trace .js-line, .hm image').length,
      // titles and annotations (subplot titles are annotations) that reach past the figure's own box
      clipped: [...gd.querySelectorAll('.annotation-text, .g-gtitle text, .g-xtitle text, .g-ytitle text')]
        .filter(t => { const r = t.getBoundingClientRect(), g = gd.getBoundingClientRect();
          return r.width > 0 && (r.left < g.left - 1 || r.right > g.right + 1 || r.top < g.top - 1); })
        .map(t => t.textContent),
    };
  });
  const texts = [...out.querySelectorAll('.widget-html-content')].map(e => e.innerText).join('\n');
  const buttons = [...out.querySelectorAll('button')].map(
    b => b.textContent.trim() + (b.classList.contains('mod-active') ? '*' : ''));
  return {figs, texts, buttons};
}"""

CONTROL_STATE = r"""(id) => {
  const el = document.querySelector(`[data-bt="${id}"]`);
  const h = el.querySelector('.noUi-handle'), s = el.querySelector('select'), c = el.querySelector('input');
  const disabled = !!(el.disabled || el.querySelector('[disabled]') || (s && s.disabled) || (c && c.disabled));
  return {
    disabled,
    value: h ? h.getAttribute('aria-valuenow') : s ? s.value
      : c ? String(c.type === 'checkbox' ? c.checked : c.value) : (el.classList.contains('mod-active') ? 'on' : 'off'),
    options: s ? [...s.options].map(o => o.value) : [],
    readout: (el.querySelector('.widget-readout') || {}).textContent,
    editable: !!el.querySelector('.widget-readout[contenteditable="true"]'),
  };
}"""

PAGE_PROBLEMS = r"""() => {
  const text = document.querySelector('.jp-NotebookPanel') ? document.querySelector('.jp-NotebookPanel').innerText : '';
  const found = [];
  for (const needle of ['Error displaying widget', 'Traceback (most recent call last)', 'Model not found']) {
    if (text.includes(needle)) found.push(needle);
  }
  const errors = [...document.querySelectorAll(
    '[data-mime-type="application/vnd.jupyter.error"], [data-mime-type="application/vnd.jupyter.stderr"]')];
  return found.concat(errors.map(e => 'output: ' + e.innerText.slice(0, 400)));
}"""

KERNEL_RUN = f"""async (code) => {{
  const future = {KERNEL}.requestExecute({{code, store_history: false}});
  let out = '';
  future.onIOPub = (msg) => {{
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') out += msg.content.traceback.join('\\n');
  }};
  await future.done;
  return out;
}}"""

# Every live FigureWidget in the kernel, summarised as the DOM summary is (title, annotations, traces).
PY_FIGURES = """\
import json as _j
import plotly.graph_objects as _go
from ipywidgets.widgets import widget as _w

def _bt_len(v):
    return 0 if v is None else len(v)

def _bt_summary(f):  # effective values: what Python set, else the default the front end reported
    return [f.layout.title.text or '', [a.text or '' for a in f.layout.annotations],
            [[t.type, t.name or '', _bt_len(t.x), _bt_len(t.y)] for t in f.data]]

_bt_all = getattr(_w, '_instances', None) or _w.Widget.widgets  # every live widget (ipywidgets 8 / 7)
print(_j.dumps([_bt_summary(f) for f in list(_bt_all.values()) if isinstance(f, _go.FigureWidget)]))
"""


def wait_settled(page: Any, app: int, idle_before: int | None, timeout: float = 30.0, playing_s: float = 10.0) -> dict:
    """Wait until the kernel has answered (when ``idle_before`` is given) and the app's view stops changing: two
    kernel round trips in a row (``ROUND_TRIP``) leave it as it was (the second catches an update that the first
    one's answers set off, e.g. a message ipywidgets held back until the kernel was idle). A view still changing
    after ``playing_s`` (a Play that plays on) is returned as it is then."""
    if idle_before is not None:
        page.wait_for_function(IDLE_AFTER, arg=idle_before, timeout=timeout * 1000)
    deadline, unchanged = time.monotonic() + playing_s, 0
    last = json.dumps(page.evaluate(APP_VIEW, app), sort_keys=True)
    while True:
        page.evaluate(ROUND_TRIP)
        view = page.evaluate(APP_VIEW, app)
        key = json.dumps(view, sort_keys=True)
        unchanged, last = (unchanged + 1 if key == last else 0), key
        if unchanged == 2 or time.monotonic() > deadline:
            return view


def kernel(page: Any, code: str) -> str:
    return page.evaluate(KERNEL_RUN, code)


def python_figures(page: Any) -> list[list]:
    out = kernel(page, PY_FIGURES)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise AssertionError(f"the kernel did not list its figures: {out[:2000]}") from e
