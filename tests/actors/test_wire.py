"""``repertory.actors._wire``: the text form of the direct ``run_turn`` call gives back what it was given."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from repertory.actors._wire import decode_request, decode_result, encode_request, encode_result
from repertory.core.result import RunResult
from tests.records import full_runs, rich_messages


@pytest.mark.parametrize("kind", ["message", "notification"])
@pytest.mark.parametrize("traceparent", [None, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"])
def test_a_request_comes_back_whole(kind: str, traceparent: str | None) -> None:
    for message in rich_messages():
        text = encode_request("s-1", message, kind, 'sub-"quoted"', traceparent)  # type: ignore[arg-type]
        assert decode_request(text) == ("s-1", message, kind, 'sub-"quoted"', traceparent)


def test_every_run_state_field_survives_a_result() -> None:
    for state in full_runs("t", "rev-1"):
        result = RunResult(run_id=state.run_id, status=state.status, state=state, text='ünï "x"')
        text = encode_result(result)
        assert isinstance(text, str)
        assert decode_result(text) == result


class _Answer(BaseModel):
    value: int


def test_a_result_with_an_output_object_is_passed_as_it_is() -> None:
    state = full_runs("t", "rev-1")[0]
    result = RunResult(run_id=state.run_id, status="done", state=state, text='{"value": 1}', output=_Answer(value=1))
    assert encode_result(result) is result
    assert decode_result(result) is result


def test_bad_text_is_refused_with_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        decode_request('["s-1", "not a kind", "sub", null, {}]')
    with pytest.raises(TypeError, match="int"):
        decode_result(3)  # type: ignore[arg-type]
