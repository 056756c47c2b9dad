"""The §11.9-§11.10 exercise checks: a correct answer passes, each typical wrong answer fails with a message
that names the case (floats rounded), an unfinished stub says what to return, and nothing raises."""

from __future__ import annotations

import re

import pytest

from minivllm.lab.exercises import ch11_9 as ex


def stub(*args):
    return None


# ------------------------------------------------------------------ exercise 1: TTFT and TPOT
def ttft_and_tpot(arrival, times):
    n = len(times)
    return times[0] - arrival, (times[-1] - times[0]) / (n - 1) if n > 1 else None


WRONG_1 = {
    "TPOT over n tokens": (lambda a, t: (t[0] - a, (t[-1] - t[0]) / len(t)), "TPOT of a request"),
    "TTFT without the arrival": (lambda a, t: (t[0], ttft_and_tpot(a, t)[1]), "TTFT of a request"),
    "TPOT 0 for one token": (lambda a, t: (t[0] - a, (t[-1] - t[0]) / max(len(t) - 1, 1)), "return None"),
    "divides by zero": (lambda a, t: (t[0] - a, (t[-1] - t[0]) / (len(t) - 1)), "ZeroDivisionError"),
    "a number, not a pair": (lambda a, t: t[0] - a, "return a pair (ttft, tpot)"),
}


def test_exercise_1_cases_cover_single_and_many_tokens():
    lengths = [len(times) for (_, times), _ in ex.exercise_1_cases()]
    assert min(lengths) == 1 and max(lengths) > 100


def test_exercise_1_accepts_the_solution(capsys):
    ex.check_exercise_1(ttft_and_tpot)
    assert "Exercise 1: correct!" in capsys.readouterr().out


@pytest.mark.parametrize("name", WRONG_1)
def test_exercise_1_rejects_wrong_answers(name, capsys):
    answer, words = WRONG_1[name]
    ex.check_exercise_1(answer)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 1: not yet") and words in out, out


def test_exercise_1_stub_says_what_to_return(capsys):
    ex.check_exercise_1(stub)
    out = capsys.readouterr().out
    assert "returned None" in out and "(ttft, tpot)" in out and "TypeError" not in out


def test_exercise_1_rounds_floats_in_its_messages(capsys):
    ex.check_exercise_1(WRONG_1["TPOT over n tokens"][0])
    out = capsys.readouterr().out
    assert re.search(r"expected \d+\.\d{3} ms, got \d+\.\d{3} ms", out), out
    assert not re.search(r"\d\.\d{7,}", out), out


# ------------------------------------------------------------------ exercise 2: KV tokens read by chunks
def kv_tokens_read(prompt_len, chunk):
    m = -(-prompt_len // chunk)
    return chunk * m * (m - 1) // 2


def test_exercise_2_accepts_the_solution_and_the_engine_agrees(capsys):
    assert ex.kv_tokens_read(2048, 512) == 512 * (0 + 1 + 2 + 3)
    ex.check_exercise_2(kv_tokens_read)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "answer",
    [
        lambda p, c: c * (p // c) * (p // c - 1) // 2,  # forgets the last, partial chunk
        lambda p, c: c * (-(-p // c)) * (-(-p // c) + 1) // 2,  # counts each chunk's own tokens too
        lambda p, c: kv_tokens_read(p, c) / 1.0001,  # a float that is close, not equal
    ],
)
def test_exercise_2_rejects_wrong_answers(answer, capsys):
    ex.check_exercise_2(answer)
    out = capsys.readouterr().out
    assert re.match(r"Exercise 2: not yet — for \(\d+, \d+\) expected \d+, got [\d.]+$", out.strip()), out
    assert not re.search(r"\d\.\d{7,}", out), out


def test_exercise_2_stub(capsys):
    ex.check_exercise_2(stub)
    assert "returned None" in capsys.readouterr().out


# ------------------------------------------------------------------ exercise 3: tokens back from the cache
def tokens_back(num_tokens, num_computed, block_size):
    return min(num_computed, num_tokens - 1) // block_size * block_size


def test_exercise_3_reaches_the_last_token_rule():
    cases = ex.exercise_3_cases()
    assert any(num_computed == num_tokens and num_tokens % 16 == 0 for (num_tokens, num_computed, _), _ in cases)
    assert any(num_computed < num_tokens for (num_tokens, num_computed, _), _ in cases)  # preemption scenes


def test_exercise_3_accepts_the_solution(capsys):
    ex.check_exercise_3(tokens_back)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "case"),
    [
        (lambda n, c, b: c // b * b, "(64, 64, 16) expected 48, got 64"),  # ignores the last-token rule
        (lambda n, c, b: c, "expected 48, got 60"),  # forgets that only full blocks are cached
        (lambda n, c, b: min(c, n - 1), "expected 48, got 60"),
        (lambda n, c, b: (c + b - 1) // b * b, "expected 48, got 64"),  # rounds up
    ],
)
def test_exercise_3_rejects_wrong_answers(answer, case, capsys):
    ex.check_exercise_3(answer)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 3: not yet") and case in out, out


def test_exercise_3_stub(capsys):
    ex.check_exercise_3(stub)
    assert "returned None" in capsys.readouterr().out
