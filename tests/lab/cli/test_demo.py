"""``python -m minivllm demo``'s load warning and its §11.1 scene numbers (no model: the simulator's runner)."""

from __future__ import annotations

from minivllm.lab.cli.demo import load_warning


def test_no_warning_on_a_quiet_machine():
    # before: the 1-minute load average of a machine doing nothing; after: the demo's own two threads, and a bit
    assert load_warning(0.05, 2.3, own_threads=2) is None


def test_warns_when_other_work_ran_before_or_during():
    before = load_warning(3.0, 3.4, own_threads=2)
    during = load_warning(0.1, 6.0, own_threads=2)
    assert before is not None and "load average 3.0 before" in before and "may not hold" in before
    assert during is not None and "6.0 at the end" in during


def test_no_load_average_no_warning():
    assert load_warning(None, None, own_threads=2) is None
