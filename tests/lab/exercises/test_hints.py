"""The exercise checks recognise two typical mistakes and say why they are wrong: an answer that ignores the
last-token rule (ch. 5 exercise 1, §11.8 exercise 1, §11.9 exercise 3) and the P²/(2c) approximation given for
the exact count of KV tokens re-read (§11.9 exercise 2). Other wrong answers get no hint."""

from __future__ import annotations

import pytest

from minivllm.lab.exercises import ch05, ch11_8, ch11_9

RIGHT = {  # the solutions' answers
    "ch05": lambda p, s, b: min(s, p - 1) // b * b,
    "ch11_8": lambda p, s, b: p - min(s, p - 1) // b * b,
    "ch11_9": lambda n, c, b: min(c, n - 1) // b * b,
}
IGNORES_THE_RULE = {
    "ch05": (ch05.check_exercise_1, lambda p, s, b: s // b * b),
    "ch11_8": (ch11_8.check_exercise_1, lambda p, s, b: p - s // b * b),
    "ch11_9": (ch11_9.check_exercise_3, lambda n, c, b: c // b * b),
}


@pytest.mark.parametrize("chapter", IGNORES_THE_RULE)
def test_an_answer_that_ignores_the_last_token_rule_gets_its_hint(chapter, capsys):
    check, answer = IGNORES_THE_RULE[chapter]
    check(answer)
    out = capsys.readouterr().out
    assert "not yet" in out and "Hint: the last-token rule" in out and "num_tokens - 1" in out, out


@pytest.mark.parametrize("chapter", IGNORES_THE_RULE)
def test_the_right_answer_passes_and_another_mistake_gets_no_rule_hint(chapter, capsys):
    check, _ = IGNORES_THE_RULE[chapter]
    check(RIGHT[chapter])
    assert "correct!" in capsys.readouterr().out
    check(lambda *args: RIGHT[chapter](*args) + 1)  # off by one: not the last-token rule
    out = capsys.readouterr().out
    assert "not yet" in out and "Hint" not in out, out


@pytest.mark.parametrize(
    "approximation",
    [
        lambda p, c: p * p / (2 * c),
        lambda p, c: p * p // (2 * c),
        lambda p, c: round(p**2 / (2 * c)),
    ],
)
def test_the_p_squared_over_2c_approximation_gets_its_hint(approximation, capsys):
    ch11_9.check_exercise_2(approximation)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 2: not yet — for (2048, 512) expected 3072, got 4096") and "P²/(2c)" in out, out
    assert "the k-th chunk" in out and "last chunk may be shorter" in out


def test_forgetting_the_partial_chunk_gets_no_p_squared_hint(capsys):
    ch11_9.check_exercise_2(lambda p, c: c * (p // c) * (p // c - 1) // 2)
    out = capsys.readouterr().out
    assert "not yet" in out and "Hint" not in out, out
