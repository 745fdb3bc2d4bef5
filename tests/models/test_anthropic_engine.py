"""AnthropicModel driving the whole engine: a session with thinking, parallel tools and an approval end to
end; fallback on overload; cache usage through the run; the record-then-replay workflow."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

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
from repertory.models import AnthropicModel, FallbackModel, ModelPrice
from repertory.testing import ReplayModel, ScriptedModel

from .anthropic_server import (
    MODEL,
    FakeAnthropic,
    Request,
    SSEReply,
    api_error,
    message_start,
    reply,
    text_block,
    thinking_block,
    tool_block,
)
from .conftest import AnthropicFactory, ModelFactory
from .server import FakeOpenAI, chunk
from .server import SSEReply as OpenAIReply


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


def results(request: Request) -> dict[str, Any]:
    """tool_use_id -> tool_result block, over the request's user turns."""
    return {
        b["tool_use_id"]: b
        for turn in request.body["messages"]
        if turn["role"] == "user"
        for b in turn["content"]
        if b["type"] == "tool_result"
    }


@pytest.fixture(params=["memory", "sqlite-file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    s: SessionStore = (
        InMemorySessionStore() if request.param == "memory" else await SqliteSessionStore.open(tmp_path / "runs.db")
    )
    yield s
    await s.close()


PRICE = ModelPrice(
    input_per_million=3.0, output_per_million=15.0, cache_read_per_million=0.3, cache_write_per_million=3.75
)


async def test_session_with_thinking_tools_and_an_approval(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, store: SessionStore
) -> None:
    ledger = Ledger()
    model = make_anthropic(max_tokens=8000, thinking_budget=2000, pricing=PRICE)
    agent = Agent(name="ops", model=model, instructions="You operate accounts.", tools=ledger.tools)

    def first(request: Request) -> SSEReply:
        body = request.body
        assert body["system"] == [
            {"type": "text", "text": "You operate accounts.", "cache_control": {"type": "ephemeral"}}
        ]
        assert [t["name"] for t in body["tools"]] == ["lookup", "delete_account"]
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        return reply(
            thinking_block(0, "Look it up, ", "then delete.", signature="sig-A"),
            tool_block(1, "toolu_look", "lookup", '{"q":', ' "acct_1"}'),
            tool_block(2, "toolu_del", "delete_account", '{"account_', 'id": "acct_1"}'),
            stop_reason="tool_use",
            input_tokens=20,
            cache_write=3000,
            output_tokens=80,
        )

    def second(request: Request) -> SSEReply:
        turns = request.body["messages"]
        assert [t["role"] for t in turns] == ["user", "assistant", "user"]
        # The thinking block goes back unchanged, with its signature, before the tool calls.
        assert turns[1]["content"][0] == {
            "type": "thinking",
            "thinking": "Look it up, then delete.",
            "signature": "sig-A",
        }
        assert [b["type"] for b in turns[1]["content"]] == ["thinking", "tool_use", "tool_use"]
        done = results(request)
        assert json.loads(done["toolu_look"]["content"]) == {"account": "acct_1", "balance": 12}
        assert done["toolu_del"]["content"] == "deleted acct_1" and "is_error" not in done["toolu_del"]
        assert turns[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        return reply(
            text_block(0, "acct_1 ", "is gone."), input_tokens=30, cache_read=3000, cache_write=100, output_tokens=10
        )

    fake_anthropic.add(first, second)
    sess = Session(store=store, agent=agent)
    r = await sess.start("delete acct_1")
    assert r.status == "suspended" and r.state.suspended_on is not None
    assert r.state.suspended_on.kind == "approval" and r.state.suspended_on.tool_call_id == "toolu_del"
    assert ledger.ran == [("lookup", {"q": "acct_1"}, None)]  # calls needing no approval ran first

    done = await Session.approve_suspended(
        store=store, agent=agent, run_id=r.run_id, resume_token=r.state.suspended_on.token, approval={"by": "ops"}
    )
    assert done.status == "done" and done.text == "acct_1 is gone."
    assert ledger.ran[1:] == [("delete_account", {"account_id": "acct_1"}, {"by": "ops"})]
    state = await store.load_run(r.run_id)
    assert state is not None and state.step_index == 2
    usage = state.usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (20 + 3000 + 30 + 3000 + 100, 90, 2)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (3000, 3100)
    expected = (50 * 3.0 + 3000 * 0.3 + 3100 * 3.75 + 90 * 15.0) / 1e6
    assert state.cost == pytest.approx(expected)
    assert state.history_revision_id is not None
    history = await store.load_history(state.history_revision_id)
    assert history is not None
    messages = history.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.model for m in messages] == [None, MODEL, None, None, MODEL]
    thinking = messages[1].parts[0]
    assert thinking.type == "reasoning" and thinking.signature == "sig-A"  # stored, as the API needs it back


async def test_runtime_streams_thinking_and_text_as_events(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    agent = Agent(name="a", model=make_anthropic())
    fake_anthropic.add(reply(thinking_block(0, "hmm"), text_block(1, "Hel", "lo")))
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


async def test_a_failed_request_leaves_history_whole(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, store: SessionStore
) -> None:
    agent = Agent(name="ops", model=make_anthropic(max_retries=0), tools=Ledger().tools)
    fake_anthropic.add(SSEReply([message_start(), *text_block(0, "I will now", " say someth")[:3]], cut=True))
    sess = Session(store=store, agent=agent)
    with pytest.raises(ModelError, match="broke off"):
        await sess.start("hello")
    assert sess.state is not None and sess.state.status == "error"
    assert sess.state.history_revision_id is not None
    history = await store.load_history(sess.state.history_revision_id)
    assert history is not None and [m.role for m in history.messages] == ["user"]

    def again(request: Request) -> SSEReply:
        turns = request.body["messages"]
        assert [t["role"] for t in turns] == ["user"] and len(turns[0]["content"]) == 2  # two user messages, one turn
        return reply(text_block(0, "Hello!"))

    fake_anthropic.add(again)
    r = await sess.start("hello again")
    assert r.status == "done" and r.text == "Hello!"


async def test_fallback_on_overload(
    fake_anthropic: FakeAnthropic,
    make_anthropic: AnthropicFactory,
    fake: FakeOpenAI,
    make_model: ModelFactory,
    store: SessionStore,
) -> None:
    """The primary is overloaded past its retries: the OpenAI-compatible fallback answers, and says so."""
    ledger = Ledger()
    primary = make_anthropic(max_retries=1)
    backup = make_model("backup-model")
    agent = Agent(name="ops", model=FallbackModel(primary, backup), tools=ledger.tools)
    overloaded = api_error(529, "overloaded_error", "Overloaded", retry_after="0")
    fake_anthropic.add(
        reply(tool_block(0, "toolu_1", "lookup", '{"q": "acct_1"}'), stop_reason="tool_use"),
        overloaded,
        overloaded,
    )

    def answer(request: Any) -> OpenAIReply:
        messages = request.body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]  # the call written by the primary
        assert messages[1]["tool_calls"][0]["id"] == "toolu_1"
        return OpenAIReply([chunk("Balance: 12.", finish="stop", model="backup-model-v2")])

    fake.add(answer)
    r = await Session(store=store, agent=agent).start("balance?")
    assert r.status == "done" and r.text == "Balance: 12."
    assert len(fake_anthropic.requests) == 3 and primary.slept == [0.0]  # type: ignore[attr-defined]
    assert r.state.history_revision_id is not None
    history = await store.load_history(r.state.history_revision_id)
    assert history is not None
    assert [m.model for m in history.messages if m.role == "assistant"] == [MODEL, "backup-model-v2"]


async def test_fallback_when_every_model_fails(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, store: SessionStore
) -> None:
    first, second = make_anthropic(max_retries=0), make_anthropic("claude-second", max_retries=0)
    fake_anthropic.add(api_error(529, "overloaded_error", "Overloaded"), api_error(500, "api_error", "Internal"))
    sess = Session(store=store, agent=Agent(name="a", model=FallbackModel(first, second)))
    with pytest.raises(ModelError, match="all 2 models failed") as info:
        await sess.start("hi")
    assert "'claude-test-4-5'" in str(info.value) and "'claude-second'" in str(info.value)
    assert info.value.status_code == 500  # type: ignore[attr-defined]
    assert sess.state is not None and sess.state.status == "error" and sess.state.error is not None
    assert "Overloaded" in sess.state.error.message


async def test_agent_from_a_model_string(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    agent = Agent(name="a", model="anthropic:claude-haiku-4-5")
    model = agent.model
    assert isinstance(model, AnthropicModel) and model.model == "claude-haiku-4-5"
    fake_anthropic.add(reply(text_block(0, "hi"), model="claude-haiku-4-5-20251001"))
    store = InMemorySessionStore()
    try:
        r = await Session(store=store, agent=agent).start("hello")
    finally:
        await model.aclose()
        await store.close()
    assert r.text == "hi" and r.state.cost is not None  # priced from the table
    assert fake_anthropic.requests[0].body["model"] == "claude-haiku-4-5"


async def test_record_then_replay(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, tmp_path: Path
) -> None:
    """Record a run against the (fake) API, then replay it with no server: the same tools run the same way."""
    ledger = Ledger()
    fake_anthropic.add(
        reply(thinking_block(0, "look"), tool_block(1, "toolu_1", "lookup", '{"q": "acct_9"}'), stop_reason="tool_use"),
        reply(text_block(0, "Balance: 12.")),
    )
    recorded_agent = Agent(name="ops", model=make_anthropic(), instructions="Be exact.", tools=ledger.tools)
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'rec.db'}", agents={"ops": recorded_agent}) as rt:
        h = await rt.create_session(agent="ops")
        run = await h.run("balance of acct_9?")
        history = await rt.store.load_history(run.state.history_revision_id or "")
    assert history is not None and run.text == "Balance: 12."

    replayed = Ledger()
    replay = ReplayModel.from_history(history)
    agent = Agent(name="ops", model=replay, instructions="Be exact.", tools=replayed.tools)
    async with await Runtime.start(store="memory://", agents={"ops": agent}) as rt:
        h = await rt.create_session(agent="ops")
        again = await h.run("balance of acct_9?")
        assert again.text == "Balance: 12." and replay.requests == 2
        assert replayed.ran == ledger.ran == [("lookup", {"q": "acct_9"}, None)]
        with pytest.raises(ModelError, match="recording ends at message 4"):
            await h.run("and then?")  # a turn the recording never had
        other = await rt.create_session(agent="ops")
        with pytest.raises(ModelError, match="leaves the recorded path at recorded message 0"):
            await other.run("balance of acct_7?")
    assert len(fake_anthropic.requests) == 2  # the replay never called the API


async def test_tree_usage_rolls_up_cache_tokens() -> None:
    """Cache counts add up through runs and the session tree like every other count."""
    cached = {"usage": {"input_tokens": 1_000, "output_tokens": 10, "cache_read_tokens": 900, "cache_write_tokens": 50}}
    model = ScriptedModel([{"text": "done", **cached}], name="claude-cached")
    async with await Runtime.start(store="memory://", agents={"a": Agent(name="a", model=model)}) as rt:
        root = await rt.create_session(agent="a")
        await root.run("hi")
        child = await root.spawn()
        await child.run("hi")
        assert (await root.usage()).cache_read_tokens == 900
        tree = await root.usage(tree=True)
    assert (tree.input_tokens, tree.cache_read_tokens, tree.cache_write_tokens, tree.requests) == (2_000, 1_800, 100, 2)


async def test_tool_input_that_is_not_json_becomes_an_error_the_model_corrects(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    ledger = Ledger()
    agent = Agent(name="ops", model=make_anthropic(), tools=ledger.tools)

    def corrected(request: Request) -> SSEReply:
        turns = request.body["messages"]
        assert isinstance(turns[1]["content"][0]["input"], dict)  # the API takes only an object back
        error = results(request)["toolu_bad"]
        assert error["is_error"] is True and "not a JSON object" in error["content"]
        return reply(tool_block(0, "toolu_ok", "lookup", '{"q": "acct_1"}'), stop_reason="tool_use")

    fake_anthropic.add(
        reply(tool_block(0, "toolu_bad", "lookup", '{"q": "acct_1"'), stop_reason="tool_use"),
        corrected,
        reply(text_block(0, "Balance: 12.")),
    )
    store = InMemorySessionStore()
    r = await Session(store=store, agent=agent).start("balance of acct_1?")
    await store.close()
    assert r.status == "done" and r.text == "Balance: 12."
    assert ledger.ran == [("lookup", {"q": "acct_1"}, None)]  # the broken call never ran
