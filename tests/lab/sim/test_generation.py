"""The engine generation a cost model prices (§11.7, issue 32): vLLM 0.6 (serial host work, multi-step bursts) or V1
(host work overlapped with the GPU)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.cost_model import PRESET_DIR, TERMS, CostModel, list_presets, shapes_from_steps
from minivllm.lab.sim.generation import GENERATIONS, MultiStepBursts
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.sampling_params import SamplingParams

A100 = CostModel.from_preset("llama2_7b_a100")
SHAPES = [
    [(1, 100)],  # a lone decode: the GPU's weight read dominates
    [(1, 1000)] * 64,  # a big decode batch
    [(512, 0)] + [(1, 700)] * 8,  # a chunk with decodes riding on it
]


def with_(model: CostModel, **changes) -> CostModel:
    return CostModel(**{**model.to_dict(), **changes})


def test_the_default_is_vllm_06_single_steps_and_every_preset_names_its_generation():
    assert (CostModel().engine_generation, CostModel().num_scheduler_steps) == ("v0.6-multistep", 1)
    for name in list_presets():  # written in each preset file, not left to the default
        stored = json.loads((PRESET_DIR / f"{name}.json").read_text())
        assert (stored["engine_generation"], stored["num_scheduler_steps"]) == ("v0.6-multistep", 1), name


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"engine_generation": "v2"}, ("engine_generation", "v0.6-multistep", "v1", "'v2'")),
        ({"engine_generation": "V1"}, ("engine_generation", "v0.6-multistep, v1")),
        ({"num_scheduler_steps": 0}, ("num_scheduler_steps", ">= 1", "0")),
        ({"num_scheduler_steps": 2.5}, ("num_scheduler_steps", "integer")),
        ({"engine_generation": "v1", "num_scheduler_steps": 8}, ("num_scheduler_steps must be 1", "'v1'", "8")),
    ],
)
def test_an_invalid_generation_is_refused_naming_the_parameter_and_the_allowed_values(changes, names, tmp_path):
    with pytest.raises(ValueError) as err:
        with_(A100, **changes)
    assert all(n in str(err.value) for n in names), str(err.value)
    path = tmp_path / "bad.json"  # a preset file is checked the same way when it is loaded
    path.write_text(json.dumps({**A100.to_dict(), **changes}))
    with pytest.raises(ValueError, match=list(changes)[-1]):
        CostModel.from_preset(str(path))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("host_scale", [1.0, 50.0])  # the GPU longer than the host work, then shorter
def test_a_v1_step_costs_the_larger_of_host_and_device_not_their_sum(shape, host_scale):
    serial = with_(A100, host_step_s=A100.host_step_s * host_scale)
    v1 = with_(serial, engine_generation="v1")
    terms = serial.terms(shape)  # the same terms, priced serially: they sum to the 0.6 step
    host, device = terms["host"], terms["linear"] + terms["attention"] + terms["kv_read"]
    assert serial.step_time(shape) == pytest.approx(host + device)
    assert v1.step_time(shape) == pytest.approx(max(host, device))
    assert v1.step_time(shape) < serial.step_time(shape)
    v1_terms = v1.terms(shape)  # the host term is what the GPU waits for; the terms still sum to the step
    assert v1_terms["host"] == pytest.approx(max(0.0, host - device))
    assert sum(v1_terms[k] for k in TERMS) == pytest.approx(v1.step_time(shape))
    assert {k: v1_terms[k] for k in TERMS if k != "host"} == pytest.approx({k: terms[k] for k in TERMS if k != "host"})


def test_the_burst_bookkeeping_pays_the_host_once_per_scheduler_call():
    bursts = MultiStepBursts(num_scheduler_steps=3)
    decode, prefill = [(1, 50), (1, 60)], [(40, 0), (1, 60)]
    calls = [bursts.step(s) for s in (prefill, decode, decode, decode, decode, prefill, decode, decode)]
    assert calls == [True, True, False, False, True, True, True, False]
    assert bursts.open and bursts.num_calls == 5
    assert MultiStepBursts(1).step(decode) and not MultiStepBursts(1).open  # one step: every step is a call


def burst_engine(num_scheduler_steps: int, generation: str = "v0.6-multistep") -> LLMEngine:
    model = with_(A100, engine_generation=generation, num_scheduler_steps=num_scheduler_steps)
    config = EngineConfig.from_kwargs(max_num_batched_tokens=512, max_num_seqs=8, max_model_len=1024)
    return LLMEngine(config, model_runner=SimRunner(model, vocab_size=model.vocab_size, config=config))


def two_requests(late_arrival: float) -> list[SimpleNamespace]:
    def req(rid: str, t: float, n: int) -> SimpleNamespace:
        params = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
        return SimpleNamespace(
            request_id=rid, arrival_time=t, prompt_token_ids=list(range(3, 67)), sampling_params=params
        )

    return [req("a", 0.0, 40), req("b", late_arrival, 8)]


@pytest.mark.parametrize("n", [1, 4, 8])
def test_multi_step_bursts_hold_new_requests_to_the_burst_end_and_charge_the_host_once_per_burst(n):
    single = burst_engine(1)
    run_workload(single, two_requests(0.0))
    late = single.trace.steps[3].start + 1e-6  # b arrives just after a's third decode step has begun
    engine = burst_engine(n)
    run_workload(engine, two_requests(late))
    steps = engine.trace.steps
    shapes = shapes_from_steps(steps)
    # replay the bursts: a prompt step is a call of its own, then decode bursts of n steps
    bursts, charged = MultiStepBursts(n), []
    for shape in shapes:
        charged.append(bursts.step(shape))
    model = engine.model_runner.cost_model
    for s, shape, charge in zip(steps, shapes, charged):
        assert s.duration == pytest.approx(model.priced(shape, charge_host=charge)[0], rel=1e-12)
    host_per_call = [model.terms(shape)["host"] for shape, charge in zip(shapes, charged) if charge]
    assert engine.model_runner.term_time["host"] == pytest.approx(sum(host_per_call))
    assert sum(charged) == engine.model_runner.bursts.num_calls
    # b is scheduled in the first step after the burst that was under way when it arrived
    first_b = next(i for i, s in enumerate(steps) if "b" in s.new_requests)
    arrived_in = max(i for i, s in enumerate(steps) if s.start <= late)
    burst_end = next(i for i in range(arrived_in, len(steps)) if i + 1 == len(steps) or charged[i + 1])
    assert first_b == burst_end + 1
    ttft_b = engine.trace.requests["b"].ttft
    single_late = burst_engine(1)
    run_workload(single_late, two_requests(late))
    assert (ttft_b > single_late.trace.requests["b"].ttft) == (n > 1)  # why multi-step raises TTFT
    if n > 1:  # while a decodes alone, its per-token time falls: the host cost is shared by the burst
        a_single, a_burst = single.trace.requests["a"], engine.trace.requests["a"]
        assert a_burst.token_times[3] - a_burst.token_times[2] < a_single.token_times[3] - a_single.token_times[2]


def test_every_generation_is_named_in_the_module_and_v1_runs_every_step_as_a_call():
    assert GENERATIONS == ("v0.6-multistep", "v1")
    engine = burst_engine(1, "v1")
    run_workload(engine, two_requests(0.01))
    assert engine.model_runner.bursts.num_calls == len(engine.trace.steps)
    assert not engine.model_runner.burst_open
