"""Recovery explorer (§11.5): preempt a request yourself, step on, watch what the prefix cache returns.

The engine runs a small seeded scene (two shared system prompts, a small KV pool) one
step at a time. Pick a running request and press "preempt": the Scheduler's own
``preempt_request`` frees its blocks (hashes kept) and puts it back at the head of the
queue. Step on: at resumption the prefix cache returns the full blocks nobody popped
meanwhile (path A) and the rest is recomputed (path B). The block map outlines the chosen
request's blocks; the timeline below counts the tokens.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.run import DEFAULT_PRESET, make_runner, shared_prefix_workload
from minivllm.lab.viz.figures.blocks import kv_block_map
from minivllm.lab.viz.figures.recovery import recovery_timeline
from minivllm.lab.viz.figures.theme import message_figure
from minivllm.lab.viz.figures.timeline import RecoveryEvent, recovery_events
from minivllm.lab.viz.widgets.base import FigureWidget, message_html, sync_figure


def step_label(n: int) -> str:
    """The step button says how many steps one click runs (the steps slider sets it)."""
    return "run 1 step" if n == 1 else f"run {n} steps"


def freed_note(block_pool: Any, blocks: list[int]) -> str:
    """What a preemption's free did to each of the request's blocks, read from the block pool afterwards
    (§11.5, vLLM ``BlockPool.free_blocks``): a block whose ``ref_cnt`` fell to 0 went back to the free
    list (a full block keeps its hash, so the prefix cache can find it again until it is reused); a
    block another request shares (``ref_cnt`` still > 0) stays in use."""
    pool = block_pool.blocks
    free = [b for b in blocks if pool[b].ref_cnt == 0]
    shared = [b for b in blocks if pool[b].ref_cnt > 0]
    hashed = [b for b in free if pool[b].block_hash is not None]
    parts = [f"of its {len(blocks)} blocks, {len(free)} went back to the free list {free}"]
    if free:
        parts[0] += f" ({len(hashed)} with their hash kept for the prefix cache)"
    if shared:
        parts.append(f"{len(shared)} {shared} stay in use, shared with another request (ref_cnt > 0)")
    return "; ".join(parts) + "."


class RecoveryExplorer:
    """``app.request.value = "req-3"; app.preempt.click(); app.step.click()``, then read ``app.state()``."""

    def __init__(
        self,
        requests: list[Any] | None = None,
        num_gpu_blocks: int = 64,
        block_size: int = 16,
        max_num_batched_tokens: int = 64,
        preset: str | None = DEFAULT_PRESET,
    ) -> None:
        self.requests = list(requests) if requests is not None else shared_prefix_workload()
        self.block_size = block_size
        self.budget = max_num_batched_tokens
        self.preset = preset
        self.request = W.Dropdown(options=[], description="request")
        self.preempt = W.Button(description="preempt", button_style="warning")
        self.step = W.Button(description=step_label(1))
        self.num_steps = W.IntSlider(value=1, min=1, max=50, description="steps")
        self.num_blocks = W.IntSlider(value=num_gpu_blocks, min=1, max=256, description="KV blocks")
        self.reset = W.Button(description="reset")
        self.message = W.HTML()
        self.blocks = FigureWidget(message_figure("starting...", "KV block map (§11.5)"))
        self.timeline = FigureWidget(message_figure("starting...", "Recovery (§11.5)"))
        self.note = ""  # the last message shown (plain text)
        self.forced: list[tuple[str, int, list[int]]] = []  # (request, step it was preempted before, its blocks)
        self.engine: LLMEngine | None = None
        self._filling = False  # True while _render refills the dropdown (its events are not a choice)
        self.preempt.on_click(lambda _: self.do_preempt())
        self.step.on_click(lambda _: self.do_step(self.num_steps.value))
        self.reset.on_click(lambda _: self.rebuild())
        self.num_blocks.observe(lambda _: self.rebuild(), names="value")
        self.num_steps.observe(lambda ch: setattr(self.step, "description", step_label(ch["new"])), names="value")
        self.request.observe(lambda _: self._chosen(), names="value")
        self.rebuild()
        buttons = W.HBox([self.request, self.preempt, self.num_steps, self.step, self.reset])
        self.ui = W.VBox([buttons, self.num_blocks, self.message, self.blocks, self.timeline])

    # ------------------------------------------------------------------ engine
    def rebuild(self) -> None:
        """A fresh engine on the scene with the current number of KV blocks."""
        from minivllm.config import EngineConfig

        self.engine, self.forced = None, []
        self.pending = sorted(self.requests, key=lambda r: r.arrival_time)
        try:
            config = EngineConfig.from_kwargs(
                model="none",
                max_num_batched_tokens=self.budget,
                max_num_seqs=8,
                max_model_len=256,
                num_gpu_blocks=self.num_blocks.value,
                block_size=self.block_size,
            )
            self.engine = LLMEngine(config, model_runner=make_runner(config, self.preset), record_block_pool=True)
        except ValueError as e:
            self._show(f"Invalid setting: {e}", "error")
            return
        self.do_step(1)

    def _live_engine(self) -> LLMEngine:
        """The engine, for the methods that run only once ``reset`` built one."""
        if self.engine is None:
            raise RuntimeError("The recovery app has no engine: reset() has not built one (invalid settings?).")
        return self.engine

    def _admit_arrivals(self) -> None:
        """Add the requests that have arrived by now (as LLMEngine.run does); jump ahead when idle."""
        engine = self._live_engine()
        if self.pending and not engine.has_unfinished_requests():
            engine.clock.wait_until(self.pending[0].arrival_time)
        now = engine.clock.now()
        while self.pending and self.pending[0].arrival_time <= now:
            r = self.pending.pop(0)
            engine.add_request(r.request_id, r.prompt_token_ids, r.sampling_params, arrival_time=r.arrival_time)

    def do_step(self, n: int = 1) -> None:
        """Run ``n`` engine steps (fewer if everything finishes); the steps slider is left as it is."""
        if self.engine is None:
            return
        for _ in range(n):
            if not self.pending and not self.engine.has_unfinished_requests():
                break
            self._admit_arrivals()
            k = len(self.engine.trace.steps)
            self.engine.step()
            for req_id, step, _ in self.forced:  # a forced preemption shows in the step it preceded
                if step == k:
                    self.engine.trace.steps[k].preempted = sorted({*self.engine.trace.steps[k].preempted, req_id})
                    self.engine.trace.requests[req_id].num_preemptions += 1
        self._render()

    def do_preempt(self) -> None:
        """Preempt the chosen running request the way the Scheduler does (Scheduler.preempt_request)."""
        if self.engine is None or not self.request.value:
            self._show("Nothing to preempt: no request is running.", "warning")
            return
        req_id = self.request.value
        blocks = self.engine.scheduler.kv_cache_manager.get_block_ids(req_id)
        try:
            self.engine.scheduler.preempt_request(req_id)
        except ValueError as e:
            self._show(str(e), "error")
            return
        self.forced.append((req_id, len(self.engine.trace.steps), blocks))
        self._render(f"Preempted {req_id}: " + freed_note(self.engine.scheduler.kv_cache_manager.block_pool, blocks))

    # ------------------------------------------------------------------ view
    def events(self) -> list[RecoveryEvent]:
        return recovery_events(self.engine.trace, self.block_size) if self.engine is not None else []

    def _show(self, text: str, level: str) -> None:
        self.note = text
        self.message.value = message_html(text, level)
        sync_figure(self.blocks, message_figure(text, "KV block map (§11.5)"))
        sync_figure(self.timeline, message_figure(text, "Recovery (§11.5)"))
        self.request.options = []

    def _render(self, note: str = "") -> None:
        engine = self._live_engine()
        running = [r.request_id for r in engine.scheduler.running]
        keep = self.request.value if self.request.value in running else (running[0] if running else None)
        self._filling = True
        try:
            self.request.options = running
            self.request.value = keep
        finally:
            self._filling = False
        self._draw_blocks()
        sync_figure(self.timeline, recovery_timeline(engine.trace, block_size=self.block_size, events=self.events()))
        self.note = note
        self.message.value = message_html(note or self.summary())

    def _chosen(self) -> None:
        """A request picked in the dropdown: outline its blocks now, not at the next step."""
        if not self._filling and self.engine is not None:
            self._draw_blocks()

    def _draw_blocks(self) -> None:
        engine, keep = self._live_engine(), self.request.value
        pool = engine.scheduler.kv_cache_manager
        tables = {r: pool.get_block_ids(r) for r in pool.req_to_blocks}
        chosen = tables.get(keep, []) if keep else []
        title = f"KV block map before step {len(engine.trace.steps)} (§11.5)"
        name = f"blocks of {keep}" if keep else "selected blocks"
        snapshot = pool.block_pool.snapshot()
        sync_figure(self.blocks, kv_block_map(snapshot, tables, title, highlight=chosen, highlight_name=name))

    def state(self) -> dict:
        """Step, queues, and every preemption with the block ids that came back or were recomputed."""
        if self.engine is None:
            return {"message": self.note, "events": []}
        s = self.engine.scheduler
        events = []
        for ev in self.events():
            events.append(
                dict(
                    request=ev.request_id,
                    preempted_at_step=ev.preempt_step,
                    resumed_at_step=ev.resume_step,
                    blocks_before=ev.blocks_before,
                    tokens_before=ev.computed_before,
                    cached_tokens=ev.cached,
                    recomputed_tokens=ev.recomputed,
                    blocks_from_cache=ev.cached_blocks(self.block_size),
                    blocks_recomputed=ev.recomputed_blocks(self.block_size) if ev.resume_step is not None else [],
                    path=ev.path,
                )
            )
        return {
            "message": self.note,
            "step": len(self.engine.trace.steps),
            "running": [r.request_id for r in s.running],
            "waiting": [r.request_id for r in s.waiting],
            "free_blocks": s.kv_cache_manager.block_pool.get_num_free_blocks(),
            "events": events,
        }

    def summary(self) -> str:
        st = self.state()
        if "step" not in st:
            return "no engine: " + st["message"]
        lines = [f"after {st['step']} steps: running {st['running']}, waiting {st['waiting']}"]
        for e in st["events"]:
            if e["resumed_at_step"] is None:
                lines.append(f"{e['request']} preempted at step {e['preempted_at_step']}, waiting to resume")
            else:
                lines.append(
                    f"{e['request']} (step {e['preempted_at_step']} -> {e['resumed_at_step']}): path {e['path']}, "
                    f"{e['cached_tokens']} tokens from cache in blocks {e['blocks_from_cache']}, "
                    f"{e['recomputed_tokens']} recomputed into blocks {e['blocks_recomputed']}"
                )
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.ui._repr_mimebundle_(**kwargs)
