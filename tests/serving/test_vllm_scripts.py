"""Scripts written for vLLM's offline API run on minivllm with only the import swapped (§11.9, issue [6/8]).

Each script below is vLLM code as its documentation writes it (``from vllm import LLM, SamplingParams``, the
quickstart's loop over ``output.outputs[0].text``, token-id prompts, ``llm.chat``, seeded sampling), with the model
name set to SmolLM2. The test swaps ``vllm`` for ``minivllm`` in the import line and nothing else, runs it, and
checks what it computed: greedy tokens equal HF transformers' on the same weights.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.helpers.hf_reference import hf_greedy

pytestmark = pytest.mark.slow  # the real model, loaded by each script as a vLLM script would

QUICKSTART = """
from vllm import LLM, SamplingParams

prompts = [
    "Hello, my name is",
    "The president of the United States is",
    "The capital of France is",
    "The future of AI is",
]
sampling_params = SamplingParams(temperature=0.8, top_p=0.95)
llm = LLM(model="smollm2", max_num_seqs=16)
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    prompt = output.prompt
    generated_text = output.outputs[0].text
    print(f"Prompt: {prompt!r}, Generated text: {generated_text!r}")
"""

TOKEN_IDS = """
from vllm import LLM, SamplingParams

llm = LLM(model="smollm2", max_model_len=1024)
tokenizer = llm.get_tokenizer()
prompts = [{"prompt_token_ids": tokenizer.encode(text)} for text in ["The capital of France is", "def fibonacci(n):"]]
outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), use_tqdm=False)
prompt_ids = [o.prompt_token_ids for o in outputs]
generated_ids = [list(o.outputs[0].token_ids) for o in outputs]
"""

CHAT = """
from vllm import LLM, SamplingParams

llm = LLM(model="smollm2", max_model_len=1024)
conversation = [
    {"role": "system", "content": "You are a helpful assistant"},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hello! How can I assist you today?"},
    {"role": "user", "content": "Write an essay about the importance of higher education."},
]
params = SamplingParams(temperature=0, max_tokens=24)
outputs = llm.chat(conversation, params, use_tqdm=False)
batch = llm.chat([conversation, conversation[:2]], params, use_tqdm=False)
for output in outputs:
    print(output.outputs[0].text)
"""

SEEDED = """
from vllm import LLM, SamplingParams

llm = LLM(model="smollm2", max_model_len=512)
texts = []
for seed in (42, 42, 7):
    params = SamplingParams(temperature=0.8, top_p=0.95, seed=seed, max_tokens=20)
    texts.append(llm.generate("Once upon a time", params, use_tqdm=False)[0].outputs[0].text)
"""


def run_as_minivllm(script: str) -> tuple[dict, str]:
    """Run a vLLM script with ``from vllm import`` made ``from minivllm import`` (only that); its globals and
    what it printed."""
    assert script.count("from vllm import") == 1
    source = script.replace("from vllm import", "from minivllm import")
    namespace: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<vllm script>", "exec"), namespace)
    return namespace, out.getvalue()


def test_the_quickstart_runs_unchanged():
    ns, printed = run_as_minivllm(QUICKSTART)
    outputs = ns["outputs"]
    assert [o.prompt for o in outputs] == ns["prompts"]
    for o in outputs:  # vLLM's default max_tokens is 16
        (c,) = o.outputs
        assert o.finished and c.text and len(c.token_ids) <= 16 and c.finish_reason in ("length", "stop")
        assert (c.finish_reason == "length") == (len(c.token_ids) == 16)
    assert printed.count("Prompt: ") == 4 and "Generated text: " in printed


def test_token_id_prompts_give_hf_greedy_tokens(smollm2):
    ns, _ = run_as_minivllm(TOKEN_IDS)
    assert ns["generated_ids"] == hf_greedy(smollm2.hf_folder, ns["prompt_ids"], 12)


def test_chat_runs_unchanged_and_uses_the_chat_template(smollm2):
    ns, printed = run_as_minivllm(CHAT)
    (out,) = ns["outputs"]
    assert out.prompt.endswith("<|im_start|>assistant\n")  # SmolLM2's template with the generation prompt
    assert "Write an essay about the importance of higher education." in out.prompt
    ids = ns["llm"].get_tokenizer().encode(out.prompt, add_special_tokens=False)
    assert out.prompt_token_ids == ids
    assert out.outputs[0].token_ids == hf_greedy(smollm2.hf_folder, [ids], len(out.outputs[0].token_ids))[0]
    assert ns["batch"][0].outputs[0].text == out.outputs[0].text and out.outputs[0].text in printed


def test_seeded_sampling_repeats_itself():
    ns, _ = run_as_minivllm(SEEDED)
    same, again, other = ns["texts"]
    assert same == again and same != other and len(same) > 10
