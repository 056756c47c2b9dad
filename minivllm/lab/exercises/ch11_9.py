"""Exercise checks for §11.9-§11.10 (production evaluation, the book's five misconceptions).

Each check recomputes the expected answers with the engine (the simulator's trace, the real
Scheduler with FakeModelRunner) and compares the student's function with them. A wrong answer
prints the first case that differs, floats rounded; an unfinished one (``...`` returns None)
says what to return. Checks print their verdict and never raise, so the notebook always runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from minivllm.lab.exercises.common import Hint, hint_text, last_token_rule_hint
from minivllm.lab.testbench import make_request, make_scheduler, run_steps, step
from minivllm.worker.fake_runner import FakeModelRunner


def _show(x: Any) -> str:
    """A value for a message: floats rounded to 6 significant digits, tuples and lists element by element
    (a long list shows its first 3 elements and its length)."""
    if isinstance(x, tuple):
        return "(" + ", ".join(_show(v) for v in x) + ")"
    if isinstance(x, list):
        head = ", ".join(_show(v) for v in x[:3])
        return f"[{head}]" if len(x) <= 3 else f"[{head}, ... ({len(x)} items)]"
    if isinstance(x, float):
        return f"{x:.6g}"
    return repr(x)


def _call(name: str, student: Callable[..., Any], args: tuple, returns: str) -> tuple[bool, Any]:
    """(True, result) or (False, None) after printing why: an exception, or None from an unfinished stub."""
    try:
        got = student(*args)
    except Exception as e:  # a half-written answer: say what went wrong, keep the notebook running
        print(f"{name}: not yet — for ({', '.join(map(_show, args))}) it raised {type(e).__name__}: {e}")
        return False, None
    if got is None:
        print(f"{name}: not yet — your function returned None; replace the `...` with code that returns {returns}.")
        return False, None
    return True, got


def _check_ints(
    name: str, student: Callable[..., Any], cases: Iterable[tuple[tuple, int]], returns: str, hint: Hint | None = None
) -> bool:
    for args, expected in cases:
        ok, got = _call(name, student, args, returns)
        if not ok:
            return False
        if got != expected:
            advice = hint_text(hint(args, expected, got) if hint is not None else None)
            print(
                f"{name}: not yet — for ({', '.join(map(_show, args))}) expected {expected}, got {_show(got)}{advice}"
            )
            return False
    print(f"{name}: correct!")
    return True


# ---------------------------------------------------------------------------------------------- exercise 1
def _close(a: float | None, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _ms(x: Any) -> str:
    return f"{x * 1e3:.3f} ms" if isinstance(x, (int, float)) and not isinstance(x, bool) else _show(x)


def exercise_1_cases() -> list[tuple[tuple[float, list[float]], tuple[float | None, float | None]]]:
    """(arrival_time, token_times) -> (TTFT, TPOT) for every request of a simulated run (metrics.summarize's
    definitions); the run has requests with one output token (TPOT None) and with hundreds."""
    from minivllm.lab.sim.run import simulate
    from minivllm.lab.sim.workload import make_workload

    w = make_workload("azure_code", 24, rate=4.0, seed=3, vocab_size=32000, max_model_len=4096)
    result = simulate(w.requests, max_num_batched_tokens=512, max_num_seqs=16, max_model_len=4096)
    assert result.trace is not None and result.ok, result.message
    cases = []
    for rec in result.trace.requests.values():
        cases.append(((rec.arrival_time, list(rec.token_times)), (rec.ttft, rec.tpot)))
    return cases


def check_exercise_1(student: Callable[[float, list[float]], tuple[float, float | None]]) -> None:
    """TTFT and TPOT of one request from its arrival time and its output tokens' times."""
    _check_pairs(student)


def _check_pairs(student: Callable[[float, list[float]], Any]) -> bool:
    name, returns = "Exercise 1", "a pair (ttft, tpot)"
    for (arrival, times), (ttft, tpot) in exercise_1_cases():
        ok, got = _call(name, student, (arrival, list(times)), returns)
        if not ok:
            return False
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            print(f"{name}: not yet — return {returns} (tpot None for a single token), got {_show(got)}")
            return False
        where = f"a request that arrived at {arrival:.4f} s with {len(times)} output token(s)"
        if not _close(ttft, got[0]):
            print(f"{name}: not yet — TTFT of {where}: expected {_ms(ttft)}, got {_ms(got[0])}")
            return False
        if not _close(tpot, got[1]):
            hint = " (a single token has no TPOT: return None)" if tpot is None else ""
            print(f"{name}: not yet — TPOT of {where}: expected {_ms(tpot)}, got {_ms(got[1])}{hint}")
            return False
    print(f"{name}: correct!")
    return True


# ---------------------------------------------------------------------------------------------- exercise 2
def kv_tokens_read(prompt_len: int, chunk: int) -> int:
    """What the engine does: a lone prompt prefilled in chunks of ``chunk`` tokens. Sum over its steps of
    the tokens already in the KV cache that attention reads (the context of each chunk)."""
    s = make_scheduler(max_num_batched_tokens=chunk, max_num_seqs=1, max_model_len=8192, num_gpu_blocks=600)
    s.add_request(make_request("doc", range(3, 3 + prompt_len), max_tokens=1))
    return sum(out.num_computed_tokens["doc"] for out, _ in run_steps(s))


def check_exercise_2(student: Callable[[int, int], int]) -> None:
    cases = [(2048, 512), (100, 32), (64, 64), (65, 64), (1000, 7), (4096, 128)]
    _check_ints("Exercise 2", student, [(c, kv_tokens_read(*c)) for c in cases], "the number of tokens", _hint_2)


def _hint_2(args: tuple, expected: int, got: object) -> str | None:
    """P²/(2c) is the area under the staircase, not the staircase: recognise it (however it was rounded)."""
    prompt_len, chunk = args
    if isinstance(got, (int, float)) and abs(got - prompt_len**2 / (2 * chunk)) <= 1:
        return (
            "P²/(2c) is the large-prompt approximation. Count the steps instead: the k-th chunk (k = 0, 1, ...) "
            "reads the k·c tokens before it, and the last chunk may be shorter than c."
        )
    return None


# ---------------------------------------------------------------------------------------------- exercise 3
def preemption_case(prompt_len: int, budget: int, steps: int) -> tuple[int, int, int]:
    """A lone request runs ``steps`` steps and is preempted, then readmitted at once (nothing evicted):
    (num_tokens, num_computed_tokens) when it was preempted, and the tokens the prefix cache gave back."""
    s = make_scheduler(
        max_num_batched_tokens=budget,
        max_num_seqs=2,
        max_model_len=1024,
        num_gpu_blocks=200,
        enable_prefix_caching=True,
    )
    s.add_request(make_request("r", range(3, 3 + prompt_len), max_tokens=100))
    runner = FakeModelRunner()
    for _ in range(steps):
        step(s, runner)
    request = s.requests["r"]
    before = (request.num_tokens, request.num_computed_tokens)
    s.preempt_request("r")
    out = s.schedule()
    return (*before, out.scheduled_cached_reqs[0].num_computed_tokens)


def repeat_case(first_prompt_len: int, prompt_len: int) -> tuple[int, int, int]:
    """Request A (``first_prompt_len`` tokens) runs to the end; then B, whose prompt is A's first
    ``prompt_len`` tokens, arrives: every token of B was computed (by A). (num_tokens, num_computed, back)."""
    s = make_scheduler(max_num_batched_tokens=256, max_num_seqs=2, max_model_len=1024, enable_prefix_caching=True)
    prompt = list(range(3, 3 + first_prompt_len))
    s.add_request(make_request("a", prompt, max_tokens=2))
    for _ in run_steps(s):
        pass
    s.add_request(make_request("b", prompt[:prompt_len], max_tokens=2))
    out = s.schedule()
    return prompt_len, prompt_len, out.scheduled_new_reqs[0].num_computed_tokens


def exercise_3_cases() -> list[tuple[tuple[int, int, int], int]]:
    """Preempted-and-readmitted requests (mid-prefill and mid-decode), then repeated prompts whose every
    token is cached: only those reach the last-token rule."""
    preempted = [(100, 32, 2), (100, 20, 3), (40, 64, 5), (47, 64, 2), (200, 64, 1), (30, 8, 2)]
    repeats = [(100, 50), (64, 64), (100, 48), (40, 32), (17, 16)]
    scenes = [preemption_case(*p) for p in preempted] + [repeat_case(*r) for r in repeats]
    return [((num_tokens, num_computed, 16), back) for num_tokens, num_computed, back in scenes]


def check_exercise_3(student: Callable[[int, int, int], int]) -> None:
    _check_ints("Exercise 3", student, exercise_3_cases(), "the number of tokens", _hint_3)


def _hint_3(args: tuple, expected: int, got: object) -> str | None:
    num_tokens, num_computed, block_size = args
    return last_token_rule_hint(got, num_computed // block_size * block_size, expected)
