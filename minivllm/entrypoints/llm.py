"""LLM: the offline entry point, ``LLM(...).generate(prompts, params)`` (vLLM's ``vllm/entrypoints/llm.py``).

Builds an LLMEngine from vLLM-named keyword arguments, queues every prompt,
steps until all are done, and returns the outputs in prompt order. The tqdm bar
shows how many requests finished and the prefill / decode throughput (§11.9).

Prompts take vLLM's forms (``vllm/inputs/data.py``): a string, a list of token ids, ``{"prompt": str}``,
``{"prompt_token_ids": [...]}`` (a dict may also carry vLLM 0.9's ``"cache_salt"``: prefix-cache blocks are
shared only between prompts of the same salt), or a list of any of these; ``sampling_params`` is one SamplingParams for
all, or a list with one per prompt. ``chat`` takes one conversation or a list of them, with vLLM's
``chat_template``, ``add_generation_prompt`` and ``continue_final_message``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams

Prompt = str | list[int] | dict[str, Any]  # vLLM: TextPrompt / TokensPrompt / a bare str or token-id list
PROMPT_KEYS = ("prompt", "prompt_token_ids")
OPTIONAL_PROMPT_KEYS = ("cache_salt",)  # vLLM 0.9+ (TextPrompt / TokensPrompt)


def parse_prompt(prompt: Any, index: int) -> str | list[int]:
    """One prompt in any of vLLM's single-prompt forms, as the engine takes it (text or token ids)."""
    if isinstance(prompt, dict):
        keys = [k for k in PROMPT_KEYS if k in prompt]
        extra = sorted(set(prompt) - set(PROMPT_KEYS) - set(OPTIONAL_PROMPT_KEYS))
        if extra:
            raise ValueError(
                f"prompts[{index}]: unsupported key {extra[0]!r}; a prompt dict has one of {PROMPT_KEYS}, "
                f"and optionally {OPTIONAL_PROMPT_KEYS}."
            )
        if len(keys) != 1:
            got = sorted(prompt)
            raise ValueError(f"prompts[{index}]: a prompt dict needs exactly one of {PROMPT_KEYS}, got {got}.")
        prompt = prompt[keys[0]]
    if isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
        return prompt
    raise ValueError(
        f"prompts[{index}] must be a str, a list of token ids, {{'prompt': str}} or {{'prompt_token_ids': [...]}}, "
        f"got {type(prompt).__name__}."
    )


def prompt_cache_salt(prompt: Any, index: int) -> str | None:
    """The ``cache_salt`` of a prompt dict (None for other forms, or when absent); a non-empty string."""
    salt = prompt.get("cache_salt") if isinstance(prompt, dict) else None
    if salt is not None and (not isinstance(salt, str) or not salt):
        raise ValueError(f"prompts[{index}]: cache_salt must be a non-empty string, got {salt!r}.")
    return salt


SPECULATIVE_KEYS = ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")


def speculative_kwargs(config: Any) -> dict[str, Any]:
    """vLLM's ``speculative_config={"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": n}`` as
    minivllm's flat engine arguments (the only method minivllm has is prompt lookup, §11.8.2)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ValueError(f"speculative_config must be a dict, got {type(config).__name__}.")
    method = config.get("method", "ngram")
    if method not in ("ngram", "[ngram]"):
        raise ValueError(f"speculative_config: method must be 'ngram' (prompt lookup), got {method!r}.")
    extra = sorted(set(config) - {"method", *SPECULATIVE_KEYS})
    if extra:
        allowed = ["method", *SPECULATIVE_KEYS]
        raise ValueError(f"speculative_config: unsupported key {extra[0]!r}; allowed: {allowed}.")
    return {k: config[k] for k in SPECULATIVE_KEYS if k in config}


def _is_single(prompts: Any) -> bool:
    return isinstance(prompts, (str, dict)) or (
        isinstance(prompts, list) and bool(prompts) and all(isinstance(t, int) for t in prompts)
    )


class LLM:
    """``LLM(model="smollm2", max_num_batched_tokens=512, ...)``: keyword names as vLLM's engine args."""

    def __init__(self, model: str = "smollm2", **kwargs: Any) -> None:
        model_runner = kwargs.pop("model_runner", None)  # a minivllm addition: e.g. a SimRunner or FakeModelRunner
        if "speculative_config" in kwargs:
            kwargs.update(speculative_kwargs(kwargs.pop("speculative_config")))
        self.engine = LLMEngine(EngineConfig.from_kwargs(model=model, **kwargs), model_runner=model_runner)
        self.tokenizer = self.engine.tokenizer
        self._counter = 0

    def get_tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (None for a model folder without one), as vLLM's."""
        return self.tokenizer

    def generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        """Generate for one prompt or a list of them (any of vLLM's prompt forms); outputs in prompt order."""
        raw = [prompts] if _is_single(prompts) else list(prompts)
        parsed = [parse_prompt(p, i) for i, p in enumerate(raw)]
        salts = [prompt_cache_salt(p, i) for i, p in enumerate(raw)]
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            sampling_params = [sampling_params or SamplingParams()] * len(parsed)
        sampling_params = list(sampling_params)
        if len(sampling_params) != len(parsed):
            raise ValueError(
                f"sampling_params: got {len(sampling_params)} for {len(parsed)} prompts; pass one SamplingParams, "
                "or a list with one per prompt."
            )
        prompts = parsed
        if not prompts:  # as vLLM: no prompts, no outputs (and no step of the engine for other callers' requests)
            return []
        ids = []
        try:
            for prompt, params, salt in zip(prompts, sampling_params, salts):
                req_id = str(self._counter)
                self._counter += 1
                self.engine.add_request(req_id, prompt, params, cache_salt=salt)
                ids.append(req_id)
        except ValueError:
            self.engine.abort_request(ids)
            raise
        try:
            outputs = self._run_engine(ids, use_tqdm)
        except BaseException:  # an engine bug, or Ctrl-C in a notebook: leave no request behind
            self.engine.abort_request(ids)
            for req_id in ids:
                self.engine.output_processor.pop_output(req_id)
            raise
        return [outputs[i] for i in ids]

    def chat(
        self,
        messages: list[dict[str, str]] | list[list[dict[str, str]]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
        chat_template: str | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> list[RequestOutput]:
        """Apply the chat template (the tokenizer's, or ``chat_template``) to one or more conversations, then
        generate. ``continue_final_message`` leaves the last (assistant) message open, for the model to go on;
        it excludes ``add_generation_prompt``, as in vLLM."""
        if self.tokenizer is None:
            raise ValueError("LLM.chat needs a tokenizer; this model folder has none.")
        if continue_final_message and add_generation_prompt:
            raise ValueError("continue_final_message and add_generation_prompt cannot both be True.")
        conversations = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = [
            self.tokenizer.apply_chat_template(
                c,
                chat_template=chat_template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                tokenize=False,
            )
            for c in conversations
        ]
        token_ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        outputs = self.generate(token_ids, sampling_params, use_tqdm)
        for out, text in zip(outputs, prompts):
            out.prompt = text
        return outputs

    def _run_engine(self, ids: list[str], use_tqdm: bool) -> dict[str, RequestOutput]:
        """Step until every request in ``ids`` has finished; collect their outputs as they finish. The bar
        counts finished prompts and, as vLLM's does, the input / output token speed of the finished ones."""
        engine, wanted, done = self.engine, set(ids), {}
        bar = None
        if use_tqdm:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(ids), desc="Processed prompts", dynamic_ncols=True)
        num_in = num_out = 0
        while len(done) < len(ids):
            for out in engine.step():
                if not out.finished or out.request_id not in wanted:
                    continue
                done[out.request_id] = engine.output_processor.pop_output(out.request_id)
                num_in, num_out = num_in + len(out.prompt_token_ids), num_out + len(out.outputs[0].token_ids)
                if bar is not None:
                    elapsed = bar.format_dict["elapsed"] or 1e-9
                    bar.set_postfix_str(
                        f"est. speed input: {num_in / elapsed:.2f} toks/s, output: {num_out / elapsed:.2f} toks/s",
                        refresh=False,
                    )
                    bar.update(1)
        if bar is not None:
            bar.close()
        return done
