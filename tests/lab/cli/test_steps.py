"""``python -m minivllm steps``: §11.3's step table, synchronous and with async scheduling (vLLM 0.10)."""

from __future__ import annotations

from minivllm.lab.cli.steps import main


def _rows(capsys, *args: str) -> list[list[str]]:
    main(list(args))
    lines = capsys.readouterr().out.splitlines()
    return [[c.strip() for c in line.split("|")] for line in lines[2:]]


def test_async_step_table_has_the_same_decisions_and_one_discarded_step(capsys):
    sync = _rows(capsys)
    async_ = _rows(capsys, "--async-scheduling")
    # Same cells step by step (chats: P12 then D1s; the long prompt chunked 61+61+61+17 among them) ...
    assert [r[1:6] for r in async_[: len(sync)]] == [r[1:6] for r in sync]
    assert sync[-1][-1] == async_[len(sync) - 1][-1] == "chat0,chat1,chat2,long"
    # ... and one more step, scheduled before the stops were known: its tokens are discarded.
    assert len(async_) == len(sync) + 1
    assert async_[-1][1:5] == ["(D1)"] * 4 and async_[-1][-1] == ""
    # The gauges of an async row: step 1 is applied after step 2 admitted the long prompt.
    assert (sync[1][7], async_[1][7]) == ("3", "4")
