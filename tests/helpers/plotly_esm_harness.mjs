// Runs minivllm's FigureWidget front-end module (widgets/plotly_esm.py's ESM) in node, against a stand-in for
// the widget model, as tests/lab/viz/test_plotly_esm.py asks:
//   node plotly_esm_harness.mjs ESM_FILE EVENTS_FILE
// EVENTS_FILE holds a JSON list of {"open": state} (the comm's open message: the model is created and the
// module's initialize runs), {"update": state} (one comm message: every key set, then a change event per
// key whose value changed, as Backbone's set does) and {"render": true} (a view drawn now). A view is the
// stand-in for plotly's bundle: it returns the figure plotly's view would draw from. Prints the list of views.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

// The module imports plotly's bundle from a blob: URL, which node cannot import: a data: URL stands in.
globalThis.Blob = class {
  constructor(parts) { this.text = parts.join(""); }
};
URL.createObjectURL = (blob) => "data:text/javascript;base64," + Buffer.from(blob.text).toString("base64");
URL.revokeObjectURL = () => {};

// plotly's bundle, as far as the kept figure is concerned: its model (widgetbundle.js ``FigureModel``) writes
// each update, undecoded ("_undefined_" is written as a value), into the objects the model's get returns;
// its view draws what get returns.
const BUNDLE = `export default () => {
  let model;
  return {
    initialize(args) {
      model = args.model;
      model.on("change:_py2js_update", () => {
        const msg = model.get("_py2js_update");
        if (msg === null) return;
        const data = model.get("_widget_data");
        const traces = [].concat(msg.style_traces ?? data.map((_, i) => i));
        for (const [key, v] of Object.entries(msg.style_data || {})) {
          const values = Array.isArray(v) ? v : [v];
          traces.forEach((t, i) => {
            const value = values[i % values.length];
            if (value === null) delete data[t][key]; else if (value !== undefined) data[t][key] = value;
          });
        }
      });
    },
    render() { return structuredClone({ data: model.get("_widget_data"), layout: model.get("_widget_layout") }); },
  };
};`;

class Model {
  constructor(state) { this.state = { ...state }; this.handlers = {}; }
  get(key) { return this.state[key]; }
  set(key, value) { this.state[key] = value; }
  on(event, fn) { (this.handlers[event] ??= []).push(fn); }
  off() {}
  save_changes() {}
  send() {}
  update(state) {
    const changed = Object.keys(state).filter((k) => JSON.stringify(this.state[k]) !== JSON.stringify(state[k]));
    Object.assign(this.state, state);
    for (const key of changed) for (const fn of this.handlers["change:" + key] ?? []) fn();
  }
}

const [esmFile, eventsFile] = process.argv.slice(2);
const widgetModule = (await import(pathToFileURL(esmFile).href)).default;
let model = null;
let widget = null;
const views = [];
for (const event of JSON.parse(readFileSync(eventsFile, "utf8"))) {
  if (event.open) {
    model = new Model({ ...event.open, _plotly_bundle: BUNDLE });
    widget = widgetModule();
    widget.initialize({ model });
  } else if (event.update) {
    model.update(event.update);
  } else if (event.render) {
    views.push(await widget.render({ model, el: null }));
  }
}
console.log(JSON.stringify(views));
