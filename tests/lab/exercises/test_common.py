"""The shared exercise check (minivllm/lab/exercises/common.py): verdicts, and floats rounded in messages."""

from __future__ import annotations

from collections import namedtuple

from minivllm.lab.exercises.common import check_cases, rounded, show


def test_floats_are_rounded_everywhere_in_a_value_and_short_ones_print_unchanged():
    Point = namedtuple("Point", "x y")
    assert rounded([0.1 + 0.2, (1 / 3, "a"), {"k": 2 / 3}, Point(1 / 7, 2)]) == [
        0.3,
        (0.3333, "a"),
        {"k": 0.6667},
        Point(0.1429, 2),
    ]
    assert show((15.0, 0.1, [0.0], "s", None)) == "(15.0, 0.1, [0.0], 's', None)"


def test_a_wrong_float_answer_is_reported_rounded(capsys):
    assert not check_cases("Exercise", lambda x: x / 3, [((1.0,), 0.3)])
    out = capsys.readouterr().out
    assert "expected 0.3, got 0.3333" in out and "0.33333" not in out


def test_a_stub_and_a_right_answer():
    assert not check_cases("Exercise", lambda x: None, [((1,), 2)])
    assert check_cases("Exercise", lambda x: x + 1, [((1,), 2), ((2,), 3)])


def test_an_exception_is_a_verdict_not_a_crash(capsys):
    assert not check_cases("Exercise", lambda x: 1 / x, [((0,), 1)])
    assert "ZeroDivisionError" in capsys.readouterr().out
