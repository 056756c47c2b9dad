"""A FigureWidget's views draw the kernel's figure however late they are drawn (widgets/plotly_esm.py), in a real
JupyterLab driven by Playwright and Debian's chromium.

plotly's bundle may load, and a view be drawn, at any moment of the kernel's messages; a figure shown again later
(``app.ui`` run a second time) is a view drawn after every change so far. plotly's own front-end model wrote each
change, undecoded, into the state later views start from: a trace that an update left as it was (``"_undefined_"``
beside another trace's new values) lost its data there, and 11_7's Gantt lost its queued bars now and then (a view
drawn in that moment). Here the moment is made certain: the figure is shown a second time after such an update,
and in a second page the bundle is held back until every message has come, so that even the first view is drawn
late. Every view must draw the kernel's figure. Skipped, saying why, where chromium or playwright is missing.
"""

from __future__ import annotations

import json
import os

import nbformat
import pytest

from tests.helpers import jupyterlab_page as P
from tests.helpers.demo_page import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.jupyterlab import running_lab

CELLS = [
    "import ipywidgets as W\n"
    "import plotly.graph_objects as go\n"
    "from minivllm.lab.viz.widgets.base import FigureWidget\n"
    "fw = FigureWidget(go.Figure([go.Bar(x=[0, 1, 2], y=[1, 5, 7], name='queued'),\n"
    "                             go.Bar(x=[0, 1], y=[2, 2], name='running')], layout={'title': {'text': 'step 0'}}))\n"
    "W.VBox([fw])",
    # one update: the first trace's name and the second one's data change (the first one's y goes as undefined)
    "with fw.batch_update():\n"
    "    fw.data[0].name = 'queued (3)'\n"
    "    fw.data[1].x, fw.data[1].y = [0, 1, 2], [3, 0, 3]\n"
    "    fw.layout.title.text = 'step 1'",
    "W.VBox([fw])  # the same figure, shown again",
]
# Held: plotly's bundle starts loading only when the test says so (the module asks for an idle moment first).
HOLD_BUNDLE = """
window.__release = new Promise((resolve) => { window.__releaseBundle = resolve; });
const idle = window.requestIdleCallback;
window.requestIdleCallback = (fn, opts) => window.__release.then(() => idle(fn, opts));
"""
PLOTS = "[...document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot')]"
DRAWN = f"(n) => {PLOTS}.filter(gd => gd.data).length >= n"
VIEWS = f"""() => {PLOTS}.map(gd => ({{
  title: (gd.layout.title || {{}}).text,
  traces: gd.data.map(t => [t.name, Array.from(t.x || []), Array.from(t.y || [])]),
}}))"""
KERNEL_FIGURE = """
import json
print(json.dumps({'title': fw.layout.title.text,
                  'traces': [[t.name, list(t.x), list(t.y)] for t in fw.data]}))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("notebooks")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, root / "views.ipynb")
    with running_lab(root, tmp_path_factory.mktemp("jupyter")) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield lab, browser
        browser.close()


@pytest.mark.slow  # a JupyterLab, a kernel and a browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (apt install chromium)")
@pytest.mark.parametrize("bundle", ["as it comes", "held until every message has come"])
def test_every_view_draws_the_kernels_figure(lab, bundle):
    pytest.importorskip("playwright")
    lab, browser = lab
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        if bundle != "as it comes":
            page.add_init_script(HOLD_BUNDLE)
        page.goto(lab.page("views.ipynb"))
        page.wait_for_function(P.WATCH_KERNEL, timeout=300_000, polling=200)  # hang guards only
        page.evaluate(P.RUN_ALL)
        page.wait_for_function(P.ALL_RAN, timeout=300_000, polling=250)
        assert not page.evaluate(P.NOT_RUN), page.evaluate(P.PAGE_PROBLEMS)
        if bundle != "as it comes":
            page.evaluate("() => window.__releaseBundle()")
        page.wait_for_function(DRAWN, arg=2, timeout=300_000, polling=250)
        page.evaluate(P.ROUND_TRIP)  # every message the kernel sent has been handled, and drawn
        views = page.evaluate(VIEWS)
        kernel = P.kernel(page, KERNEL_FIGURE)
    finally:
        page.close()
        lab.end_sessions()
    want = json.loads(kernel)
    assert want["title"] == "step 1" and want["traces"][0] == ["queued (3)", [0, 1, 2], [1, 5, 7]]
    assert len(views) == 2
    for i, view in enumerate(views):
        assert view == want, f"view {i + 1} of 2 ({bundle}) draws {view}, the kernel has {want}"
