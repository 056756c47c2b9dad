"""Request, ConstantList and check_stop (§11.4, §11.4.3)."""

from __future__ import annotations

import pytest

from minivllm.request import ConstantList, Request, RequestStatus, check_stop
from minivllm.sampling_params import SamplingParams


def make(max_tokens=5, eos=2, **params) -> Request:
    return Request("r", [10, 11, 12], SamplingParams(max_tokens=max_tokens, **params), eos_token_id=eos)


def test_one_progress_integer_and_derived_counts():
    r = make()
    assert (r.num_tokens, r.num_output_tokens, r.num_computed_tokens, r.status) == (3, 0, 0, RequestStatus.WAITING)
    r.append_output_token_ids(7)
    r.append_output_token_ids([8, 9])
    r.spec_token_ids = [1, 1]
    assert list(r.output_token_ids) == [7, 8, 9]
    assert list(r.all_token_ids) == [10, 11, 12, 7, 8, 9]
    assert (r.num_tokens, r.num_tokens_with_spec, r.num_output_tokens) == (6, 8, 3)
    assert r.prompt_token_ids == [10, 11, 12]


def test_constant_list_is_a_live_read_only_view():
    r = make()
    view = r.output_token_ids
    r.append_output_token_ids(4)
    assert len(view) == 1 and view[0] == 4 and view[-1:] == [4] and 4 in view and view.index(4) == 0
    assert repr(view) == "ConstantList([4])"
    for mutate in (lambda: view.append(1), lambda: view.pop(), lambda: view.__setitem__(0, 1), view.clear):
        with pytest.raises(TypeError, match="Cannot modify a constant list"):
            mutate()
    assert isinstance(view, ConstantList)


def test_status_order_and_finish_reasons():
    assert RequestStatus.WAITING == 1 and RequestStatus.FINISHED_IGNORED == 8
    assert not RequestStatus.is_finished(RequestStatus.PREEMPTED)
    assert RequestStatus.is_finished(RequestStatus.FINISHED_STOPPED)
    reasons = {s: RequestStatus.get_finished_reason(s) for s in RequestStatus}
    assert reasons[RequestStatus.FINISHED_STOPPED] == "stop"
    assert reasons[RequestStatus.FINISHED_LENGTH_CAPPED] == "length"
    assert reasons[RequestStatus.FINISHED_ABORTED] == "abort"
    assert reasons[RequestStatus.FINISHED_IGNORED] == "length"
    assert reasons[RequestStatus.RUNNING] is None


def test_check_stop_length_before_eos():
    r = make(max_tokens=1)
    r.append_output_token_ids(2)  # EOS and the max_tokens-th token at once
    assert check_stop(r, max_model_len=100)
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED


def test_check_stop_eos_then_stop_tokens():
    r = make(stop_token_ids=[2, 5])
    r.append_output_token_ids(2)
    assert check_stop(r, 100) and r.status == RequestStatus.FINISHED_STOPPED and r.stop_reason is None
    r = make(stop_token_ids=[5])
    r.append_output_token_ids(5)
    assert check_stop(r, 100) and r.status == RequestStatus.FINISHED_STOPPED and r.stop_reason == 5


def test_check_stop_ignore_eos_and_max_model_len():
    r = make(ignore_eos=True)
    r.append_output_token_ids(2)
    assert not check_stop(r, 100)
    r.append_output_token_ids(3)
    assert check_stop(r, max_model_len=5) and r.get_finished_reason() == "length"


def test_grammar_request_starts_waiting_for_fsm():
    class NotReady:
        error = None

        def is_ready(self):
            return False

    r = Request("g", [1], SamplingParams(), grammar=NotReady())
    assert r.status == RequestStatus.WAITING_FOR_FSM
