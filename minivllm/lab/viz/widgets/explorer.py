"""Config explorer (§11.7): move a scheduler setting, rerun the simulator, see the latency Gantt change.

Every change reruns the real Scheduler on the same seeded workload (§11.1's scene: chats
decoding, then long prompts land) in simulated time (SimRunner, cost-model preset; a
timed FakeModelRunner when the simulator is missing), then redraws the Gantt and a metrics
table. Settings keep vLLM's names. The sliders offer only values the engine accepts with the
fixed settings (a budget of at least ``max_num_seqs``, a threshold of at most ``max_model_len``, a
KV cache that holds one ``max_model_len`` request); a setting that is still refused (e.g. fixed
values changed after construction) shows the config's message, naming the parameter and its range,
in place of the figure, and a valid setting replaces it (redrawn through ``sync_figure``).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from minivllm.lab.sim.run import DEFAULT_PRESET, SimResult, demo_workload, simulate
from minivllm.lab.viz.figures.gantt import latency_gantt
from minivllm.lab.viz.figures.theme import message_figure
from minivllm.lab.viz.widgets.base import FigureWidget, message_html, metrics_table, sync_figure

BUDGETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
THRESHOLDS = (0, 16, 64, 128, 256, 512, 1024, 2048)
NUM_BLOCKS = (40, 100, 200, 300, 400, 600, 1000, 2000, 4000)


def valid_options(max_model_len: int, max_num_seqs: int, block_size: int) -> dict[str, list[int]]:
    """The slider values the engine accepts with these fixed settings (SchedulerConfig / LLMEngine rules):
    max_num_batched_tokens >= max_num_seqs, long_prefill_token_threshold <= max_model_len, and
    (num_gpu_blocks - 1) x block_size >= max_model_len (the null block holds nothing)."""
    options = {
        "max_num_batched_tokens": [b for b in BUDGETS if b >= max_num_seqs],
        "long_prefill_token_threshold": [t for t in THRESHOLDS if t <= max_model_len],
        "num_gpu_blocks": [n for n in NUM_BLOCKS if (n - 1) * block_size >= max_model_len],
    }
    empty = [name for name, values in options.items() if not values]
    if empty:
        raise ValueError(
            f"no value of {empty[0]} is valid with max_model_len={max_model_len}, max_num_seqs={max_num_seqs}, "
            f"block_size={block_size} (budgets {BUDGETS[0]}..{BUDGETS[-1]}, "
            f"KV blocks {NUM_BLOCKS[0]}..{NUM_BLOCKS[-1]})."
        )
    return options


def _pick(options: list[int], wanted: int) -> int:
    return wanted if wanted in options else min(options, key=lambda v: abs(v - wanted))


HEADLINE = ("ttft_p50", "ttft_p99", "tpot_p50", "itl_p99", "itl_max", "output_throughput", "num_preemptions")


class ConfigExplorer:
    """Sliders and toggles for the scheduler; ``explorer.budget.value = 256`` reruns and redraws."""

    def __init__(
        self,
        requests: list[Any] | None = None,
        preset: str | None = DEFAULT_PRESET,
        max_model_len: int = 4096,
        max_num_seqs: int = 16,
        block_size: int = 16,
    ) -> None:
        self.requests = list(requests) if requests is not None else demo_workload()
        self.preset = preset
        self.fixed = dict(max_model_len=max_model_len, max_num_seqs=max_num_seqs, block_size=block_size)
        opts = valid_options(max_model_len, max_num_seqs, block_size)
        wide = {"description_width": "initial"}
        budgets, thresholds, blocks = (
            opts["max_num_batched_tokens"],
            opts["long_prefill_token_threshold"],
            opts["num_gpu_blocks"],
        )
        self.budget = W.SelectionSlider(
            options=budgets, value=_pick(budgets, 512), description="max_num_batched_tokens", style=wide
        )
        self.threshold = W.SelectionSlider(
            options=thresholds, value=0, description="long_prefill_token_threshold", style=wide
        )
        self.chunked = W.ToggleButton(value=True, description="chunked prefill", icon="check")
        self.policy = W.ToggleButtons(options=("fcfs", "priority"), value="fcfs", description="policy")
        self.num_blocks = W.SelectionSlider(
            options=blocks, value=_pick(blocks, 600), description="KV blocks", style=wide
        )
        self.message = W.HTML()
        self.metrics_html = W.HTML()
        self.fig = FigureWidget(message_figure("running...", "Latency Gantt (§11.1.3)"))
        self.result: SimResult | None = None
        self.settings: dict[str, Any] = {}
        for w in (self.budget, self.threshold, self.chunked, self.policy, self.num_blocks):
            w.observe(self._rerun, names="value")
        self._rerun()
        controls = W.VBox([self.budget, self.threshold, W.HBox([self.chunked, self.policy]), self.num_blocks])
        self.ui = W.VBox([W.HBox([controls, self.metrics_html]), self.message, self.fig])

    def engine_kwargs(self) -> tuple[dict[str, Any], list[str]]:
        """The settings the widgets ask for, made valid where vLLM's rules leave one choice, with notes."""
        notes = []
        kw = dict(
            max_num_batched_tokens=self.budget.value,
            long_prefill_token_threshold=self.threshold.value,
            enable_chunked_prefill=self.chunked.value,
            policy=self.policy.value,
            num_gpu_blocks=self.num_blocks.value,
            **self.fixed,
        )
        self.threshold.disabled = not self.chunked.value
        if not self.chunked.value:
            if kw["long_prefill_token_threshold"]:
                notes.append("long_prefill_token_threshold needs chunked prefill: using 0.")
                kw["long_prefill_token_threshold"] = 0
            if kw["max_num_batched_tokens"] < kw["max_model_len"]:
                notes.append(
                    f"Chunked prefill off: the budget must hold a whole prompt, so max_num_batched_tokens is raised "
                    f"to max_model_len ({kw['max_model_len']}), as vLLM requires."
                )
                kw["max_num_batched_tokens"] = kw["max_model_len"]
        return kw, notes

    def _rerun(self, change: Any = None) -> None:
        kw, notes = self.engine_kwargs()
        self.chunked.icon = "check" if self.chunked.value else ""  # a check mark only while it is on
        self.settings = kw
        self.result = simulate(self.requests, preset=self.preset, **kw)
        r = self.result
        trace = r.trace
        if trace is None:  # invalid settings (no engine): say why, draw nothing
            self.message.value = message_html(r.message, "error")
            self.metrics_html.value = ""
            sync_figure(self.fig, message_figure(r.message, "Latency Gantt (§11.1.3)"))
            return
        label = "chunked" if kw["enable_chunked_prefill"] else "unchunked"
        title = (
            f"Latency Gantt: {label}, budget {kw['max_num_batched_tokens']}, threshold "
            f"{kw['long_prefill_token_threshold']}, {kw['num_gpu_blocks']} KV blocks, {kw['policy']}"
        )
        sync_figure(self.fig, latency_gantt(trace, title))
        self.metrics_html.value = metrics_table(self.metrics())
        text = " ".join(notes + ([r.message] if r.message else []))
        self.message.value = message_html(text, "warning" if r.message else "info")

    def metrics(self) -> dict[str, float]:
        """Headline metrics of the current run (metrics.summarize), {} when there is no run."""
        trace = None if self.result is None else self.result.trace  # None: no run, or no engine
        if trace is None:
            return {}
        from minivllm.lab.metrics.summary import summarize

        d = summarize(trace).to_dict()
        return {k: d[k] for k in (*HEADLINE, "num_steps") if k in d}

    def state(self) -> dict:
        """Settings run, message shown and headline metrics (seconds), as plain data."""
        r = self.result
        return {
            "settings": dict(self.settings),
            "message": r.message if r is not None else "",
            "ok": bool(r is not None and r.ok),
            "num_steps": len(r.trace.steps) if r is not None and r.trace is not None else 0,
            "metrics": {k: round(v, 6) for k, v in self.metrics().items()},
        }

    def summary(self) -> str:
        st = self.state()
        s = st["settings"]
        head = (
            f"budget {s['max_num_batched_tokens']}, threshold {s['long_prefill_token_threshold']}, "
            f"chunked {s['enable_chunked_prefill']}, {s['policy']}, {s['num_gpu_blocks']} blocks"
        )
        if not st["metrics"]:
            return f"{head}: {st['message']}"
        m = st["metrics"]
        return (
            f"{head}: {st['num_steps']} steps, TTFT p99 {m['ttft_p99'] * 1e3:.1f} ms, "
            f"ITL max {m['itl_max'] * 1e3:.1f} ms, {m['output_throughput']:.0f} tok/s, "
            f"{m['num_preemptions']:.0f} preemptions" + (f" ({st['message']})" if st["message"] else "")
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.ui._repr_mimebundle_(**kwargs)
