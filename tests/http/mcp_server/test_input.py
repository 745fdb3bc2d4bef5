"""Approvals and suspend() as MRTR input required, answered through the official client's elicitation callback."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as t
import pytest
from mcp.shared.exceptions import MCPError

from tests.http.agents import DELETED
from tests.http.conftest import ALICE, BOB, ServerThread
from tests.http.mcp_server.conftest import connect


def _text(result: t.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, t.TextContent)
    return first.text


class Human:
    """An elicitation callback that answers with the given results in order and records what it was asked."""

    def __init__(self, *answers: t.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[t.ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        assert isinstance(params, t.ElicitRequestFormParams)
        self.asked.append(params)
        return self.answers.pop(0)


def accept(**content: Any) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content=content)


async def test_an_approval_is_asked_and_approved_once(sqlite_server: ServerThread) -> None:
    human = Human(accept(decision="approve"))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=human) as client:
        result = await client.call_tool("assistant", {"task": "delete mcp-approve"})
    assert not result.is_error
    assert _text(result) == "finished: deleted mcp-approve (approved by alice)"
    assert DELETED["mcp-approve"] == 1
    [asked] = human.asked
    assert "delete_account" in asked.message and '"account_id": "mcp-approve"' in asked.message
    assert asked.requested_schema["properties"]["decision"]["enum"] == ["approve", "reject", "edit"]


async def test_a_rejected_or_declined_approval_never_runs_the_tool(sqlite_server: ServerThread) -> None:
    reject = Human(accept(decision="reject", reason="not this one"))
    decline = Human(t.ElicitResult(action="decline"))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=reject) as client:
        rejected = await client.call_tool("assistant", {"task": "delete mcp-reject"})
    async with connect(sqlite_server.url, ALICE, elicitation_callback=decline) as client:
        declined = await client.call_tool("assistant", {"task": "delete mcp-decline"})
    assert _text(rejected) == "finished: not this one (error)"
    assert _text(declined).startswith("finished: the user declined the tool call for `delete_account`")
    assert DELETED["mcp-reject"] == 0 and DELETED["mcp-decline"] == 0


async def test_an_edited_approval_runs_with_the_new_arguments(sqlite_server: ServerThread) -> None:
    human = Human(accept(decision="edit", args=json.dumps({"account_id": "mcp-edited"})))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=human) as client:
        result = await client.call_tool("assistant", {"task": "delete mcp-original"})
    assert _text(result) == "finished: deleted mcp-edited (approved by alice)"
    assert DELETED["mcp-edited"] == 1 and DELETED["mcp-original"] == 0


async def test_a_bad_edit_is_refused_and_changes_nothing(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        first = await client.session.call_tool("assistant", {"task": "delete mcp-bad-edit"}, allow_input_required=True)
        assert isinstance(first, t.InputRequiredResult) and first.input_requests
        [key] = first.input_requests
        bad: dict[str, t.InputResponse] = {key: accept(decision="edit", args=json.dumps({"account_id": 7}))}
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool(
                "assistant",
                {"task": "delete mcp-bad-edit"},
                input_responses=bad,
                request_state=first.request_state,
                allow_input_required=True,
            )
        assert refused.value.code == -32602 and "do not validate" in refused.value.message
        good: dict[str, t.InputResponse] = {key: accept(decision="approve")}
        done = await client.session.call_tool(
            "assistant",
            {"task": "delete mcp-bad-edit"},
            input_responses=good,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, t.CallToolResult)
    assert _text(done) == "finished: deleted mcp-bad-edit (approved by alice)"


async def test_a_second_answer_is_refused(sqlite_server: ServerThread) -> None:
    arguments = {"task": "delete mcp-twice"}
    async with connect(sqlite_server.url, ALICE) as client:
        first = await client.session.call_tool("assistant", arguments, allow_input_required=True)
        assert isinstance(first, t.InputRequiredResult) and first.input_requests is not None
        [key] = first.input_requests
        assert key.startswith("approval-")
        responses: dict[str, t.InputResponse] = {key: accept(decision="approve")}
        answered = await client.session.call_tool(
            "assistant", arguments, input_responses=responses, request_state=first.request_state
        )
        assert _text(answered) == "finished: deleted mcp-twice (approved by alice)"
        with pytest.raises(MCPError) as again:
            await client.session.call_tool(
                "assistant", arguments, input_responses=responses, request_state=first.request_state
            )
        assert again.value.code == -32602 and again.value.message == "already answered"
        # A reject arriving second is refused the same way: the first answer stands.
        with pytest.raises(MCPError):
            await client.session.call_tool(
                "assistant",
                arguments,
                input_responses={key: accept(decision="reject")},
                request_state=first.request_state,
            )
    assert DELETED["mcp-twice"] == 1


async def test_another_key_cannot_answer_with_the_state(sqlite_server: ServerThread) -> None:
    arguments = {"task": "delete mcp-foreign"}
    async with connect(sqlite_server.url, ALICE) as alice:
        first = await alice.session.call_tool("assistant", arguments, allow_input_required=True)
    assert isinstance(first, t.InputRequiredResult) and first.input_requests is not None
    [key] = first.input_requests
    async with connect(sqlite_server.url, BOB) as bob:
        with pytest.raises(MCPError) as refused:
            await bob.session.call_tool(
                "assistant",
                arguments,
                input_responses={key: accept(decision="approve")},
                request_state=first.request_state,
            )
    assert refused.value.code == -32602
    assert DELETED["mcp-foreign"] == 0


async def test_a_suspension_is_answered_with_its_payload_shown(sqlite_server: ServerThread) -> None:
    human = Human(accept(value="teal"))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=human) as client:
        result = await client.call_tool("assistant", {"task": "ask"})
    assert _text(result) == "you said teal"
    [asked] = human.asked
    assert asked.message == 'need input: {"question": "which color?"}'
    assert list(asked.requested_schema["properties"]) == ["value"]


async def test_a_declined_suspension_cancels_the_turn(sqlite_server: ServerThread) -> None:
    human = Human(t.ElicitResult(action="decline"))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=human) as client:
        result = await client.call_tool("assistant", {"task": "ask"})
    assert result.is_error and _text(result).startswith("the turn was cancelled")


async def test_a_delegated_childs_approval_is_asked_at_the_parents_call(sqlite_server: ServerThread) -> None:
    # lead delegates to assistant: the child waits for the approval, so the lead's call does too,
    # and the answer is applied in the child's session, where the question is.
    human = Human(accept(decision="approve"))
    async with connect(sqlite_server.url, ALICE, elicitation_callback=human) as client:
        result = await client.call_tool("lead", {"task": "delete mcp-nested"})
    assert not result.is_error
    assert _text(result) == "lead: finished: deleted mcp-nested (approved by alice)"
    assert DELETED["mcp-nested"] == 1
    [asked] = human.asked
    assert '"account_id": "mcp-nested"' in asked.message
