"""``ToolCallPart.invalid_args``: a typed field for argument text that did not parse, in JSON and in old history."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter, ValidationError

from repertory import ModelMessage, ToolCallPart
from repertory.core.history import HistoryEntry

_MESSAGE = TypeAdapter(ModelMessage)


def test_a_well_formed_call_is_stored_in_the_shape_it_had_before_the_field() -> None:
    part = ToolCallPart(tool_call_id="c", tool_name="lookup", args={"q": 1})
    assert json.loads(part.model_dump_json()) == {
        "type": "tool-call",
        "tool_call_id": "c",
        "tool_name": "lookup",
        "args": {"q": 1},
    }
    assert "invalid_args" not in part.model_dump()
    assert ToolCallPart.model_validate_json(part.model_dump_json()) == part


def test_invalid_args_round_trip_through_json() -> None:
    part = ToolCallPart(tool_call_id="c", tool_name="lookup", invalid_args='{"q": ')
    raw = part.model_dump_json()
    assert json.loads(raw)["invalid_args"] == '{"q": ' and json.loads(raw)["args"] == {}
    message = ModelMessage(role="assistant", parts=[part])
    again = _MESSAGE.validate_json(message.model_dump_json())
    assert again == message and again.tool_calls[0].invalid_args == '{"q": '


def test_history_stored_with_the_old_in_band_key_loads_into_the_field() -> None:
    # What an adapter wrote before the field existed: the raw text under a reserved key of ``args``.
    old = (
        '{"id":"e1","created_at":1,"message":{"role":"assistant","origin":null,"parts":['
        '{"type":"tool-call","tool_call_id":"c","tool_name":"lookup","args":{"__invalid_json__":"{q: 1}"}}]}}'
    )
    entry = HistoryEntry.model_validate_json(old)
    (call,) = entry.message.tool_calls
    assert call.invalid_args == "{q: 1}" and call.args == {}
    assert call == ToolCallPart(tool_call_id="c", tool_name="lookup", invalid_args="{q: 1}")
    assert ToolCallPart.model_validate({"tool_call_id": "c", "tool_name": "t", "args": {"__invalid_json__": None}}) == (
        ToolCallPart(tool_call_id="c", tool_name="t", invalid_args="None")  # as the loop quoted it before
    )


def test_a_call_cannot_have_both_args_and_invalid_args() -> None:
    with pytest.raises(ValidationError, match="no args"):
        ToolCallPart(tool_call_id="c", tool_name="t", args={"q": 1}, invalid_args="{q")
    with pytest.raises(ValidationError):
        ToolCallPart(tool_call_id="c", tool_name="t", invalid_args=7)
