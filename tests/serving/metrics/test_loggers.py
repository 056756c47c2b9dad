"""The live stat logger (§11.9): its page equals prometheus_text's, its counters survive a bounded trace,
and rendering it reads no trace at all."""

from __future__ import annotations

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.clock import VirtualClock
from minivllm.sampling_params import SamplingParams
from minivllm.serving.metrics.loggers import PrometheusStatLogger
from minivllm.serving.metrics.prometheus import prometheus_text
from minivllm.worker.fake_runner import FakeModelRunner
from tests.helpers.prometheus import parse, value

TICK = 1 / 64  # dyadic times: every sum is exact whatever the order, so the pages agree to the last digit
GAUGES = (
    "vllm:num_requests_running{",
    "vllm:num_requests_waiting{",
    "vllm:gpu_cache_usage_perc{",
    "vllm:kv_cache_usage_perc{",
)
PREFIX = list(range(100, 132))  # two full blocks shared by every prompt: prefix-cache hits


def make_engine(num_gpu_blocks: int = 64, num_spec_tokens: int = 0, max_model_len: int = 256) -> LLMEngine:
    config = EngineConfig.from_kwargs(
        model="fake",
        device="cpu",
        max_num_batched_tokens=32,
        max_num_seqs=4,
        max_model_len=max_model_len,
        num_gpu_blocks=num_gpu_blocks,
    )
    runner = FakeModelRunner(vocab_size=1000, num_spec_tokens=num_spec_tokens)
    return LLMEngine(config, model_runner=runner, clock=VirtualClock())


def add(engine: LLMEngine, req_id: str, n: int, max_tokens: int, stop_after: int | None = None) -> None:
    """A prompt of PREFIX + ``n`` own tokens; with ``stop_after`` its k-th output token is a stop token."""
    prompt = PREFIX + [200 + (sum(map(ord, req_id)) * 7 + i) % 700 for i in range(n)]
    stop = [] if stop_after is None else [engine.model_runner.true_token(req_id, len(prompt) + stop_after - 1)]
    engine.add_request(req_id, prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True, stop_token_ids=stop))


def script() -> dict[int, list]:
    """Arrivals over time, a stop, aborts of a waiting, a mid-prefill and a mid-decode request."""
    return {
        0: [lambda e: add(e, "a", 40, 30), lambda e: add(e, "b", 10, 20, stop_after=3), lambda e: add(e, "c", 60, 25)],
        2: [lambda e: add(e, "d", 90, 12), lambda e: add(e, "e", 5, 40), lambda e: add(e, "w", 8, 8)],
        3: [lambda e: e.abort_request("w"), lambda e: e.abort_request("d")],  # w still waiting, d mid-prefill
        6: [lambda e: add(e, "f", 20, 16, stop_after=5), lambda e: add(e, "g", 33, 10)],
        9: [lambda e: e.abort_request("a")],  # mid-decode
        14: [lambda e: add(e, "h", 2, 24), lambda e: add(e, "i", 70, 6), lambda e: add(e, "j", 9, 1)],
    }


def drive(engine: LLMEngine, actions: dict[int, list], on_step=None) -> None:
    """Between steps: arrivals and aborts, a quarter tick; each step then takes 1-5 ticks."""
    n = 0
    while n <= max(actions) or engine.has_unfinished_requests():
        for action in actions.get(n, []):
            action(engine)
        engine.clock.advance(TICK / 4)
        if engine.has_unfinished_requests():
            engine.step()
            engine.clock.advance(TICK * (1 + engine.trace.steps[-1].num_scheduled_tokens % 5))
            if on_step is not None:
                on_step(engine)
        n += 1


def watched_run(**kwargs) -> tuple[LLMEngine, PrometheusStatLogger]:
    engine = make_engine(**kwargs)
    logger = PrometheusStatLogger("smollm2")
    engine.trace.observers.append(logger)
    drive(engine, script())
    return engine, logger


def live_render(engine: LLMEngine, logger: PrometheusStatLogger) -> str:
    s = engine.scheduler
    return logger.render(len(s.running), len(s.waiting), s.kv_cache_manager.usage)


def without_gauges(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(GAUGES)]


def counters(text: str) -> dict[tuple, float]:
    """Every counter sample and every histogram _count/_bucket/_sum, keyed by name and labels."""
    out = {}
    for fam in parse(text).values():
        if fam["type"] != "gauge":
            for name, labels, value in fam["samples"]:
                out[(name, tuple(sorted(labels.items())))] = value
    return out


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"num_gpu_blocks": 10, "max_model_len": 128}, {"num_spec_tokens": 2}],
    ids=["prefix_hits_aborts_stop_length", "preemptions", "several_tokens_per_step"],
)
def test_incremental_page_equals_prometheus_text_but_for_gauges(kwargs):
    engine, logger = watched_run(**kwargs)
    trace, text = engine.trace, live_render(engine, logger)
    assert without_gauges(text) == without_gauges(prometheus_text(trace))
    assert len(text.splitlines()) == len(prometheus_text(trace).splitlines())
    reasons = {r.finish_reason for r in trace.requests.values()}
    assert reasons == {"stop", "length", "abort"}
    assert trace.requests["w"].first_scheduled_time is None and trace.requests["d"].token_times == []
    assert trace.requests["a"].token_times and trace.requests["a"].finish_reason == "abort"
    assert sum(sum(s.prefix_cache_hit_tokens.values()) for s in trace.steps) > 0
    if "num_gpu_blocks" in kwargs:
        assert sum(len(s.preempted) for s in trace.steps) > 0
    if "num_spec_tokens" in kwargs:
        assert any(r.num_output_tokens > len(set(r.token_times)) for r in trace.requests.values())
    fams = parse(text)  # the gauges are the live ones: nothing left running
    assert value(fams, "vllm:num_requests_running") == value(fams, "vllm:num_requests_waiting") == 0
    assert value(fams, "vllm:kv_cache_usage_perc") == engine.scheduler.kv_cache_manager.usage


def test_sums_agree_to_rounding_when_times_are_not_binary_fractions():
    engine, logger = make_engine(), PrometheusStatLogger("smollm2")
    engine.trace.observers.append(logger)
    drive(engine, script(), on_step=lambda e: e.clock.advance(0.01))
    live, offline = without_gauges(live_render(engine, logger)), without_gauges(prometheus_text(engine.trace))
    assert len(live) == len(offline)
    for a, b in zip(live, offline):
        (name_a, x), (name_b, y) = a.rsplit(" ", 1), b.rsplit(" ", 1)
        if "_sum{" in a:  # added in event order here, in request order there
            assert name_a == name_b and float(x) == pytest.approx(float(y), rel=1e-12)
        else:
            assert a == b


def test_gauges_are_live_after_aborts_between_steps():
    """Finding 7: three streams dropped mid-decode and no step after: the last step still says 3 running."""
    engine, logger = make_engine(), PrometheusStatLogger("smollm2")
    engine.trace.observers.append(logger)
    for req_id in "xyz":
        add(engine, req_id, 4, 50)
    for _ in range(4):
        engine.step()
    engine.abort_request(list("xyz"))
    assert value(parse(prometheus_text(engine.trace)), "vllm:num_requests_running") == 3  # stale
    fams = parse(live_render(engine, logger))
    assert value(fams, "vllm:num_requests_running") == 0
    assert value(fams, "vllm:request_success_total", finished_reason="abort") == 3


def test_counters_survive_a_bounded_trace_and_steps_keep_their_numbers():
    full, full_logger = watched_run()
    engine, logger = make_engine(), PrometheusStatLogger("smollm2")
    engine.trace.observers.append(logger)
    engine.trace.max_steps = 8  # as AsyncEngine bounds a server's trace
    seen: list[dict] = []

    def bound(e: LLMEngine) -> None:
        seen.append(counters(live_render(e, logger)))

    drive(engine, script(), on_step=bound)
    assert len(full.trace.steps) > 16 and len(engine.trace.steps) <= 8  # it was cut several times
    for before, after in zip(seen, seen[1:]):
        assert all(after[key] >= value for key, value in before.items())
    # Every step and request was counted once: the same page as the run that kept its whole trace.
    assert without_gauges(live_render(engine, logger)) == without_gauges(live_render(full, full_logger))
    offline = counters(prometheus_text(engine.trace))  # what rebuilding from the kept window says: less
    assert (
        offline[("vllm:generation_tokens_total", (("engine", "0"), ("model_name", "smollm2")))]
        < seen[-1][("vllm:generation_tokens_total", (("engine", "0"), ("model_name", "smollm2")))]
    )
    steps = [s.step for s in engine.trace.steps]
    assert steps == list(range(len(full.trace.steps) - len(steps), len(full.trace.steps)))
    assert engine.trace.num_steps_recorded == len(full.trace.steps)
    assert [s.step for s in full.trace.steps] == list(range(len(full.trace.steps)))  # step == index when kept


class Untouchable(list):
    """A steps list that can be appended to and indexed, never walked."""

    def __iter__(self):
        raise AssertionError("iterated every step")

    __reversed__ = __iter__


class Watched(dict):
    """A requests dict that records which requests were read, and refuses to be walked."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __iter__(self):
        raise AssertionError("iterated every request")

    values = items = keys = __iter__


class Spy:
    """Observes after the logger: which requests were read during the step, and which the step touched."""

    def __init__(self) -> None:
        self.steps: list[tuple[set[str], set[str]]] = []

    def on_step(self, trace, record, new_tokens) -> None:
        touched = {*record.prefill_tokens, *record.decode_tokens, *record.spec_tokens, *new_tokens, *record.finished}
        self.steps.append((set(trace.requests.read), touched))
        trace.requests.read.clear()

    def on_request_finished(self, rec) -> None:
        pass


def test_events_touch_only_their_requests_and_render_reads_no_trace():
    engine, logger, spy = make_engine(), PrometheusStatLogger("smollm2"), Spy()
    trace = engine.trace
    trace.observers.append(logger)
    drive(engine, {0: script()[0]})  # a first run; then the trace can no longer be walked
    trace.steps, trace.requests = Untouchable(trace.steps), Watched(trace.requests)
    trace.observers.append(spy)

    def abort_x(e: LLMEngine) -> None:
        e.abort_request("x")
        e.trace.requests.read.clear()  # an abort reads its own request only

    drive(engine, {0: [lambda e: add(e, "x", 50, 6), lambda e: add(e, "y", 3, 4)], 3: [abort_x]})
    assert len(spy.steps) > 3 and all(read <= touched for read, touched in spy.steps)
    assert trace.requests["x"].finish_reason == "abort"
    page = live_render(engine, logger)
    assert value(parse(page), "vllm:request_success_total", finished_reason="abort") == 1
    assert value(parse(page), "vllm:request_success_total", finished_reason="length") == 3
    assert value(parse(page), "vllm:request_success_total", finished_reason="stop") == 1
    trace.steps, trace.requests = Untouchable(), Watched()  # render reads neither, nor the engine
    del engine, trace
    assert without_gauges(logger.render(0, 0, 0.0)) == without_gauges(page)
