"""The front-end module of minivllm's FigureWidget: plotly's widget bundle loaded once per page.

plotly.py 7 ships its FigureWidget front end as one 5 MB ES module (``plotly/package_data/widgetbundle.js``)
in every widget's ``_esm``. anywidget's front end (0.9 to 0.11, ``Runtime`` in its ``widget.ts``) gives a
model 2 s from its creation to load and initialise that module, and when the 2 s pass first it drops
every later message from the kernel to that model: on a busy laptop, or with several figures parsing
the bundle at once in a fresh page, a chart keeps its first state for good ("[anywidget] Failed to
initialize model." in the browser console).

So the ``_esm`` here is this small module, which anywidget loads at once, and plotly's bundle travels
as a plain synced string (``_plotly_bundle``). The module imports the bundle once per page (every later
figure reuses the loaded module) and never makes anywidget wait for it: ``initialize`` returns at once,
the first ``render`` starts the import when the page is next idle (the parse is one long task of the
page's main thread, and a model whose 2 s run out behind it would be lost; by the time a figure is drawn
the models of its app exist), and each figure hands over to plotly's own ``initialize`` and ``render``
once the module is there.

A view may be drawn at any moment of the kernel's messages: when the bundle arrives, a cell may be half
way through sending a change (``base.sync_figure`` sends plotly's update, then the whole new figure). So
the module keeps the figure as the kernel has it from the model's creation on: the last whole figure
(``_widget_data`` / ``_widget_layout``) with every later change applied (``_py2js_update``,
``_py2js_restyle``, ...), and plotly's model and views read copies of it. plotly's own model applies each
change in place to the widget model's ``_widget_data``, but reads the message undecoded: a trace whose
``y`` an update leaves as it was (``"_undefined_"``, while another trace's ``y`` changes) gets the string
``"_undefined_"`` as its ``y``. A view drawn between such an update and the whole figure that follows it
drew those traces without their y (11_7's ConfigExplorer lost its queued bars and step lines, 1 run in
about 30), or new data under the older title, and kept them.
"""

from __future__ import annotations

from pathlib import Path

import plotly

PLOTLY_BUNDLE_PATH = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"

ESM = """
// minivllm: plotly's FigureWidget front end, its bundle imported once per page (widgets/plotly_esm.py).
const KEY = "__minivllm_plotly_widget_bundle_@VERSION@";

// One loader per page: its promise settles with plotly's module; the import starts when a figure is first
// drawn, once the page is idle, so that the long parse does not delay a model's creation (see above).
function pageLoader() {
  if (!globalThis[KEY]) {
    let resolve, reject;
    const module = new Promise((res, rej) => { resolve = res; reject = rej; });
    let started = false;
    const start = (model) => {
      if (started) return;
      started = true;
      const load = () => {
        const url = URL.createObjectURL(new Blob([model.get("_plotly_bundle")], { type: "text/javascript" }));
        import(/* webpackIgnore: true */ url).then(resolve, reject).finally(() => URL.revokeObjectURL(url));
      };
      if (globalThis.requestIdleCallback) requestIdleCallback(load, { timeout: 1000 }); else setTimeout(load, 50);
    };
    globalThis[KEY] = { module, start };
  }
  return globalThis[KEY];
}

// The figure as the kernel has it: the last whole figure (_widget_data / _widget_layout) with every change
// since applied, by plotly's merge rules (a key set or, when null, removed; an undefined value, sent as
// "_undefined_", leaves the key as it is). Values stay as the messages carry them (typed arrays as specs):
// plotly's model decodes what it reads.
const pathOf = (p) => (Array.isArray(p) ? p : String(p).replace(/\\[(\\d+)\\]/g, ".$1").split("."));
function setPath(obj, path, value) {
  const keys = pathOf(path);
  let o = obj;
  keys.slice(0, -1).forEach((k, i) => {
    if (o[k] === null || typeof o[k] !== "object") o[k] = /^\\d+$/.test(keys[i + 1]) ? [] : {};
    o = o[k];
  });
  o[keys[keys.length - 1]] = value;
}
function unsetPath(obj, path) {
  const keys = pathOf(path);
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (o === null || typeof o !== "object") return;
    o = o[k];
  }
  if (o !== null && typeof o === "object") delete o[keys[keys.length - 1]];
}
const skip = (v) => v === undefined || v === "_undefined_";
function relayout(target, changes) {  // {path: value}; null removes
  for (const [path, v] of Object.entries(changes || {})) {
    if (v === null) unsetPath(target, path); else if (!skip(v)) setPath(target, path, v);
  }
}
const indexes = (data, traces) => (traces === null || traces === undefined ? data.map((_, i) => i) : [].concat(traces));
function restyle(data, changes, traces) {  // {path: value or one value per trace}
  const inds = indexes(data, traces);
  for (const [path, v] of Object.entries(changes || {})) {
    const values = Array.isArray(v) ? v : [v];
    inds.forEach((t, i) => data[t] && relayout(data[t], { [path]: values[i % values.length] }));
  }
}
const CHANGES = {
  _py2js_addTraces: (fig, m) => fig.data.push(...m.trace_data),
  _py2js_deleteTraces: (fig, m) => m.delete_inds.slice().reverse().forEach((i) => fig.data.splice(i, 1)),
  _py2js_moveTraces: (fig, m) => {
    const moved = m.current_trace_inds.map((i) => fig.data[i]);
    fig.data = fig.data.filter((_, i) => !m.current_trace_inds.includes(i));
    m.new_trace_inds.map((to, k) => [to, moved[k]]).sort((a, b) => a[0] - b[0])
      .forEach(([to, trace]) => fig.data.splice(to, 0, trace));
  },
  _py2js_restyle: (fig, m) => restyle(fig.data, m.restyle_data, m.restyle_traces),
  _py2js_relayout: (fig, m) => relayout(fig.layout, m.relayout_data),
  _py2js_update: (fig, m) => { restyle(fig.data, m.style_data, m.style_traces); relayout(fig.layout, m.layout_data); },
  _py2js_animate: (fig, m) => {
    const inds = indexes(fig.data, m.style_traces);
    (m.style_data || []).forEach((changes, i) => fig.data[inds[i]] && relayout(fig.data[inds[i]], changes));
    relayout(fig.layout, m.layout_data);
  },
  // These two only say that the kernel now counts those values as plotly.js's defaults (a view reported
  // them): what is drawn does not change (plotly's views ignore them too), and neither does the kept figure.
  _py2js_removeTraceProps: () => {},
  _py2js_removeLayoutProps: () => {},
};

function keptFigure(model) {
  const copy = (v) => structuredClone(v ?? null);
  const fig = { data: copy(model.get("_widget_data")) || [], layout: copy(model.get("_widget_layout")) || {} };
  model.on("change:_widget_data", () => { fig.data = copy(model.get("_widget_data")) || []; });
  model.on("change:_widget_layout", () => { fig.layout = copy(model.get("_widget_layout")) || {}; });
  for (const [key, apply] of Object.entries(CHANGES)) {
    model.on("change:" + key, () => {
      const m = model.get(key);
      if (m !== null && m !== undefined) apply(fig, m);
    });
  }
  return fig;
}

export default () => {
  let plotlyWidget = null;
  let ready = null;
  return {
    initialize({ model }) {
      // Kept from the model's creation on, before plotly's code has loaded: a view drawn at any moment draws
      // the kernel's figure, whatever changes came before it (these listeners run before any view's).
      const fig = keptFigure(model);
      // plotly's model and views see the widget model through this: the figure they read is a copy of the
      // kept one (plotly's model writes each change, undecoded, into what it reads: see above).
      const kept = { _widget_data: () => fig.data, _widget_layout: () => fig.layout };
      const seen = {
        get: (key) => (key in kept ? structuredClone(kept[key]()) : model.get(key)),
        set: (...args) => model.set(...args),
        on: (...args) => model.on(...args),
        off: (...args) => model.off(...args),
        save_changes: () => model.save_changes(),
        send: (...args) => model.send(...args),
      };
      // not awaited: anywidget drops a model's messages for good if initialize takes over 2 s
      ready = pageLoader().module.then((mod) => {
        plotlyWidget = mod.default();
        plotlyWidget.initialize({ model: seen });
      });
      ready.catch((err) => console.error("[minivllm] plotly's widget bundle failed to load", err));
    },
    async render(args) {
      pageLoader().start(args.model);
      await ready;
      return plotlyWidget.render(args);
    },
  };
};
""".replace("@VERSION@", plotly.__version__.replace(".", "_"))


def plotly_bundle() -> str:
    """plotly's widget bundle (the ES module plotly.py itself would put in ``_esm``)."""
    return PLOTLY_BUNDLE_PATH.read_text(encoding="utf-8")
