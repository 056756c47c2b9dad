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
once the module is there. The changes
(``_py2js_update``, ``_py2js_restyle``, ...) that reach the model while the bundle loads are kept in
order and handed to plotly's model once it exists, as if they had come then; a whole new figure
(``_widget_data`` / ``_widget_layout``, which ``base.sync_figure`` sends after its changes) replaces
the changes kept before it. So a view drawn late draws the figure as the kernel has it.
"""

from __future__ import annotations

from pathlib import Path

import plotly

PLOTLY_BUNDLE_PATH = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"

ESM = """
// minivllm: plotly's FigureWidget front end, its bundle imported once per page (widgets/plotly_esm.py).
const KEY = "__minivllm_plotly_widget_bundle_@VERSION@";
const DELTAS = ["_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces", "_py2js_restyle", "_py2js_relayout",
  "_py2js_update", "_py2js_animate", "_py2js_removeLayoutProps", "_py2js_removeTraceProps"];

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

export default () => {
  let plotlyWidget = null;
  let ready = null;
  return {
    initialize({ model }) {
      // Changes that reach the model before plotly's code has loaded, kept in order for plotly's model.
      // A whole new figure (_widget_data / _widget_layout, as base.sync_figure sends) replaces them.
      let pending = [];
      for (const key of DELTAS) {
        model.on("change:" + key, () => {
          const value = model.get(key);
          if (pending !== null && value !== null) pending.push([key, value]);
        });
      }
      for (const key of ["_widget_data", "_widget_layout"]) {
        model.on("change:" + key, () => { if (pending !== null) pending = []; });
      }
      // plotly's model and view see the widget model through this: its listeners are known, so the
      // kept changes can be handed to them one by one.
      const listeners = {};
      const replaying = {};
      const seen = {
        get: (key) => (key in replaying ? replaying[key] : model.get(key)),
        set: (...args) => model.set(...args),
        on: (event, fn) => { (listeners[event] ??= []).push(fn); model.on(event, fn); },
        off: (...args) => model.off(...args),
        save_changes: () => model.save_changes(),
        send: (...args) => model.send(...args),
      };
      // not awaited: anywidget drops a model's messages for good if initialize takes over 2 s
      ready = pageLoader().module.then((mod) => {
        plotlyWidget = mod.default();
        plotlyWidget.initialize({ model: seen });
        for (const [key, value] of pending) {
          replaying[key] = value;
          for (const fn of listeners["change:" + key] ?? []) fn();
          delete replaying[key];
        }
        pending = null;
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
