"""The whole engine over the loopback server: sessions with tools and an approval, on memory and SQLite."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from repertory import (
    Agent,
    InMemorySessionStore,
    ModelError,
    Runtime,
    Session,
    SessionEvent,
    SessionStore,
    SqliteSessionStore,
    ToolContext,
    tool,
)
from repertory.models import PRICES, ModelPrice, OpenAIChatModel

from .conftest import ModelFactory
from .server import FakeOpenAI, Request, SSEReply, chunk, tool_piece


class Ledger:
    """Tools that note every real execution, so a test can count them."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any], Any]] = []

        @tool(idempotent=True)
        async def lookup(q: str) -> dict[str, Any]:
            """Look up an account."""
            self.ran.append(("lookup", {"q": q}, None))
            return {"account": q, "balance": 12}

        @tool(requires_approval=True)
        async def delete_account(ctx: ToolContext, account_id: str) -> str:
            """Delete an account for good."""
            self.ran.append(("delete_account", {"account_id": account_id}, ctx.approval))
            return f"deleted {account_id}"

        self.tools = [lookup, delete_account]


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt": prompt, "completion": completion}


def wire_tool_messages(request: Request) -> dict[str, str]:
    """tool_call_id -> content of the tool messages a request carried."""
    return {m["tool_call_id"]: m["content"] for m in request.body["messages"] if m["role"] == "tool"}


@pytest.fixture(params=["memory", "sqlite-file"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def open_store(kind: str, path: Path) -> SessionStore:
    if kind == "memory":
        return InMemorySessionStore()
    return await SqliteSessionStore.open(path / "runs.db")


@pytest.fixture
async def stores(store_kind: str, tmp_path: Path) -> AsyncIterator[list[SessionStore]]:
    """Stores opened by a test (the first from the fixture); all closed at teardown."""
    opened = [await open_store(store_kind, tmp_path)]
    yield opened
    for s in opened:
        await s.close()


async def test_session_with_tools_and_an_approval(
    fake: FakeOpenAI, make_model: ModelFactory, stores: list[SessionStore], store_kind: str, tmp_path: Path
) -> None:
    ledger = Ledger()
    model = make_model("acme-large", pricing=ModelPrice(input_per_million=1.0, output_per_million=2.0))
    agent = Agent(name="ops", model=model, instructions="You operate accounts.", tools=ledger.tools)

    def first(request: Request) -> SSEReply:
        body = request.body
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert body["messages"][0]["content"] == "You operate accounts."
        assert sorted(t["function"]["name"] for t in body["tools"]) == ["delete_account", "lookup"]
        return SSEReply(
            [
                chunk(reasoning="Look it up, then delete."),
                chunk(tool_calls=[tool_piece(0, id="call_look", name="lookup", args='{"q":')]),
                chunk(tool_calls=[tool_piece(1, id="call_del", name="delete_account", args='{"account_')]),
                chunk(tool_calls=[tool_piece(0, args=' "acct_1"}')]),
                chunk(tool_calls=[tool_piece(1, args='id": "acct_1"}')]),
                chunk(finish="tool_calls"),
                chunk(no_choices=True, usage=usage(100, 20)),
            ]
        )

    def second(request: Request) -> SSEReply:
        messages = request.body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
        assert "reasoning_content" not in messages[2] and messages[2]["content"] is None
        assert [c["id"] for c in messages[2]["tool_calls"]] == ["call_look", "call_del"]
        results = wire_tool_messages(request)
        assert json.loads(results["call_look"]) == {"account": "acct_1", "balance": 12}
        assert results["call_del"] == "deleted acct_1"
        return SSEReply([chunk("acct_1 "), chunk("is gone."), chunk(finish="stop", usage=usage(200, 10))])

    fake.add(first, second)
    store = stores[0]
    sess = Session(store=store, agent=agent)
    r = await sess.start("delete acct_1")
    assert r.status == "suspended"
    assert r.state.suspended_on is not None and r.state.suspended_on.kind == "approval"
    assert r.state.suspended_on.tool_call_id == "call_del"
    assert ledger.ran == [("lookup", {"q": "acct_1"}, None)]  # calls needing no approval ran first

    if store_kind == "sqlite-file":  # the decision comes from another process, on its own store object
        await store.close()
        store = await open_store(store_kind, tmp_path)
        stores.append(store)
    done = await Session.approve_suspended(
        store=store, agent=agent, run_id=r.run_id, resume_token=r.state.suspended_on.token, approval={"by": "ops"}
    )
    assert done.status == "done" and done.text == "acct_1 is gone."
    assert ledger.ran[1:] == [("delete_account", {"account_id": "acct_1"}, {"by": "ops"})]
    state = await store.load_run(r.run_id)
    assert state is not None and state.status == "done" and state.step_index == 2
    assert (state.usage.input_tokens, state.usage.output_tokens, state.usage.requests) == (300, 30, 2)
    assert state.cost == pytest.approx((300 * 1.0 + 30 * 2.0) / 1e6)
    assert state.history_revision_id is not None
    history = await store.load_history(state.history_revision_id)
    assert history is not None
    messages = history.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert messages[1].parts[0].type == "reasoning"  # kept in history, never sent back
    calls = [c.tool_call_id for c in messages[1].tool_calls]
    answered = [p.tool_call_id for m in messages if m.role == "tool" for p in m.tool_results]
    assert sorted(calls) == sorted(answered)


async def test_invalid_json_arguments_become_an_error_the_model_corrects(
    fake: FakeOpenAI, make_model: ModelFactory, stores: list[SessionStore]
) -> None:
    ledger = Ledger()
    agent = Agent(name="ops", model=make_model(), tools=ledger.tools)
    broken = '{"q": "acct_1"'

    def corrected(request: Request) -> SSEReply:
        messages = request.body["messages"]
        assert messages[1]["tool_calls"][0]["function"]["arguments"] == "{}"  # never the broken text
        error = wire_tool_messages(request)["call_1"]
        assert error.startswith("Error: the arguments of this call to 'lookup' are not a JSON object")
        assert broken in error
        return SSEReply(
            [
                chunk(tool_calls=[tool_piece(0, id="call_2", name="lookup", args='{"q": "acct_1"}')]),
                chunk(finish="tool_calls"),
            ]
        )

    def final(request: Request) -> SSEReply:
        assert json.loads(wire_tool_messages(request)["call_2"])["balance"] == 12
        return SSEReply([chunk("Balance: 12.", finish="stop")])

    fake.add(
        SSEReply([chunk(tool_calls=[tool_piece(0, id="call_1", name="lookup", args=broken)]), chunk(finish="stop")]),
        corrected,
        final,
    )
    r = await Session(store=stores[0], agent=agent).start("balance of acct_1?")
    assert r.status == "done" and r.text == "Balance: 12."
    assert ledger.ran == [("lookup", {"q": "acct_1"}, None)]  # the broken call never ran


async def test_invalid_json_arguments_to_an_approval_tool_ask_nobody(
    fake: FakeOpenAI, make_model: ModelFactory, stores: list[SessionStore]
) -> None:
    ledger = Ledger()
    agent = Agent(name="ops", model=make_model(), tools=ledger.tools)

    def final(request: Request) -> SSEReply:
        assert wire_tool_messages(request)["c"].startswith("Error: the arguments of this call to 'delete_account'")
        return SSEReply([chunk("I could not do that.", finish="stop")])

    fake.add(
        SSEReply(
            [
                chunk(tool_calls=[tool_piece(0, id="c", name="delete_account", args="{acct_1}")]),
                chunk(finish="tool_calls"),
            ]
        ),
        final,
    )
    r = await Session(store=stores[0], agent=agent).start("delete acct_1")
    assert r.status == "done" and ledger.ran == []


async def test_a_failed_request_leaves_history_whole(
    fake: FakeOpenAI, make_model: ModelFactory, stores: list[SessionStore]
) -> None:
    """A stream cut mid-way is an error checkpoint with no half message; the next run goes on normally."""
    agent = Agent(name="ops", model=make_model(max_retries=0), tools=Ledger().tools)
    fake.add(SSEReply([chunk("I will now"), chunk(" say someth")], cut=True))
    sess = Session(store=stores[0], agent=agent)
    with pytest.raises(ModelError, match="broke off"):
        await sess.start("hello")
    assert sess.state is not None and sess.state.status == "error"
    assert sess.state.error is not None and sess.state.error.type == "ModelError"
    assert sess.state.history_revision_id is not None
    history = await stores[0].load_history(sess.state.history_revision_id)
    assert history is not None and [m.role for m in history.messages] == ["user"]

    def again(request: Request) -> SSEReply:
        assert [m["role"] for m in request.body["messages"]] == ["user", "user"]
        return SSEReply([chunk("Hello!", finish="stop")])

    fake.add(again)
    r = await sess.start("hello again")
    assert r.status == "done" and r.text == "Hello!"


class Verdict(BaseModel):
    approved: bool
    reason: str


async def test_output_type_asks_for_structured_output(
    fake: FakeOpenAI, make_model: ModelFactory, stores: list[SessionStore]
) -> None:
    agent = Agent(name="judge", model=make_model(), output_type=Verdict)

    def reply(request: Request) -> SSEReply:
        fmt = request.body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Verdict"
        assert fmt["json_schema"]["schema"] == Verdict.model_json_schema()
        return SSEReply([chunk('{"approved": true, '), chunk('"reason": "fine"}', finish="stop")])

    fake.add(reply)
    r = await Session(store=stores[0], agent=agent).start("judge this")
    assert r.output == Verdict(approved=True, reason="fine")


async def test_agent_model_string_and_environment(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent(name="a", model="openai:gpt-4o-mini")
    model = agent.model
    assert isinstance(model, OpenAIChatModel) and model.model == "gpt-4o-mini"
    fake.add(SSEReply([chunk("hi", finish="stop", usage=usage(1_000_000, 0))]))
    store = InMemorySessionStore()
    try:
        r = await Session(store=store, agent=agent).start("hello")
    finally:
        await model.aclose()
        await store.close()
    assert r.text == "hi" and r.state.cost == pytest.approx(PRICES["gpt-4o-mini"].input_per_million)
    request = fake.requests[0]
    assert request.body["model"] == "gpt-4o-mini"
    assert request.headers["authorization"] == "Bearer not-needed"  # a local server needs no key


async def test_runtime_streams_deltas_as_events(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    agent = Agent(name="a", model=make_model())
    fake.add(SSEReply([chunk(reasoning="hmm"), chunk("Hel"), chunk("lo"), chunk(finish="stop")]))
    seen: list[SessionEvent] = []
    store = InMemorySessionStore()
    async with await Runtime.start(store=store, agents={"a": agent}) as rt:
        h = await rt.create_session(agent="a")
        listener = h.on_progress(seen.append)
        r = await h.run("hi")
        listener.dispose()
    await store.close()
    assert r.text == "Hello"
    live = [(e.type, e.data["text"]) for e in seen if e.type.endswith(".delta")]
    # Stored, gathered per window: the two text deltas the model streamed at once are one event.
    assert live == [("reasoning.delta", "hmm"), ("text.delta", "Hello")]
