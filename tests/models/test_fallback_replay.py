"""FallbackModel and ReplayModel without a server: order, what falls back and what does not, replay paths."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator

import pytest

from repertory import (
    Agent,
    DeltaWindow,
    InMemorySessionStore,
    ModelMessage,
    ModelResponse,
    ModelSettings,
    Runtime,
    Session,
    SessionEvent,
    TextDelta,
    TextPart,
    ToolSpec,
    tool,
)
from repertory.core.model import ModelEvent, TokenCounter
from repertory.errors import ModelError
from repertory.models import FallbackModel
from repertory.testing import ReplayModel, ScriptedModel

from .helpers import collect


class Failing:
    """A model that streams ``shown`` text deltas, then fails (or, with ``answer``, answers after them)."""

    def __init__(self, name: str, shown: int = 0, *, answer: bool = False, error: Exception | None = None) -> None:
        self.model = name
        self.shown = shown
        self.answer = answer
        self.error = error or ModelError(f"model {name!r}: overloaded", status_code=529)
        self.calls = 0
        self.closed = False

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        for i in range(self.shown):
            yield TextDelta(text=f"{self.model}-{i} ")
        if self.answer:
            yield ModelResponse(message=ModelMessage(role="assistant", parts=[TextPart(text="ok")], model=self.model))
            raise self.error  # a failure after the answer changes nothing
        raise self.error

    async def aclose(self) -> None:
        self.closed = True


class Counting(Failing):
    async def count_tokens(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> int | None:
        return 99


async def test_first_model_that_answers_wins() -> None:
    first, second = Failing("first", shown=1), ScriptedModel([{"text": "from second"}], name="second")
    third = Failing("third")
    model = FallbackModel(first, second, third)
    events, response = await collect(model)
    assert response.message.text == "from second" and response.message.model == "second"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["first-0 ", "from second"]  # shown live, both
    # Between them the answer starts over: what the first model streamed belongs to no reply.
    assert [type(e).__name__ for e in events] == ["TextDelta", "StreamRestart", "TextDelta"]
    assert (first.calls, third.calls) == (1, 0)
    assert model.model == "first" and "Failing" in repr(model)


async def test_every_model_failing() -> None:
    model = FallbackModel(Failing("a"), Failing("b", error=ModelError("model 'b': refused", status_code=400)))
    with pytest.raises(
        ModelError, match="all 2 models failed: 'a': model 'a': overloaded; 'b': model 'b': refused"
    ) as info:
        await collect(model)
    err = info.value
    assert err.status_code == 400 and err.failures == ["model 'a': overloaded", "model 'b': refused"]  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err) and copy.failures == err.failures  # type: ignore[attr-defined]


async def test_fallback_on_decides_which_errors_move_on() -> None:
    refused = ModelError("model 'a': bad request", status_code=400)
    backup = ScriptedModel([{"text": "never"}])
    model = FallbackModel(
        Failing("a", error=refused), backup, fallback_on=lambda e: getattr(e, "status_code", 0) >= 429
    )
    with pytest.raises(ModelError, match="bad request") as info:
        await collect(model)
    assert info.value is refused and backup.requests == 0


async def test_other_exceptions_pass_through() -> None:
    backup = ScriptedModel([{"text": "never"}])
    with pytest.raises(RuntimeError, match="bug"):
        await collect(FallbackModel(Failing("a", error=RuntimeError("bug")), backup))
    assert backup.requests == 0


async def test_no_fallback_once_answered() -> None:
    backup = ScriptedModel([{"text": "never"}])
    with pytest.raises(ModelError, match="overloaded"):
        await collect(FallbackModel(Failing("a", answer=True), backup))
    assert backup.requests == 0


async def test_count_tokens_and_aclose() -> None:
    plain, counting = Failing("plain"), Counting("counting")
    model = FallbackModel(plain, counting)
    assert isinstance(model, TokenCounter)
    assert await model.count_tokens([], [], ModelSettings()) == 99  # the first model that can count
    assert await FallbackModel(plain, Failing("other")).count_tokens([], [], ModelSettings()) is None
    await model.aclose()
    assert plain.closed and counting.closed
    with pytest.raises(TypeError, match="takes models"):
        FallbackModel(plain, "openai:gpt-4o-mini")  # type: ignore[arg-type]


class Slow(Failing):
    """``Failing`` that takes a moment before it fails: long enough for its deltas to be stored."""

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        async for event in super().request(messages, tools, settings):
            yield event
            await asyncio.sleep(0.05)


async def test_a_session_retracts_what_a_failed_model_streamed() -> None:
    model = FallbackModel(Slow("first", shown=2), ScriptedModel([{"text": "ok"}]))
    agent = Agent(name="a", model=model, delta_window=DeltaWindow(ms=0))
    async with await Runtime.start(store=InMemorySessionStore(), agents={"a": agent}) as rt:
        h = await rt.create_session(agent="a")
        turn = await h.send("hi")
        await turn.result()
        events = [e async for e in _until_completed(h.events())]
        kinds = [
            (e.type, e.data.get("text"), e.data.get("message_ids"))
            for e in events
            if "delta" in e.type or "retracted" in e.type
        ]
        failed = events[[e.type for e in events].index("text.delta")].data["message_id"]
        assert kinds == [
            ("text.delta", "first-0 ", None),
            ("text.delta", "first-1 ", None),
            ("reply.retracted", None, [failed]),
            ("text.delta", "ok", None),
        ]
        thread = await rt.store.load_thread(h.id)
        assert thread is not None and thread.history_revision_id is not None
        history = await rt.store.load_history(thread.history_revision_id)
        assert history is not None and history.head is not None
        assert [e.data["message_id"] for e in events if e.type == "text.delta"][-1] == history.head.entry_id != failed


async def _until_completed(events: AsyncIterator[SessionEvent]) -> AsyncIterator[SessionEvent]:
    async for event in events:
        yield event
        if event.type == "turn.completed":
            return


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def recorded_run() -> list[ModelMessage]:
    """A stored conversation: a question, a tool call, its result, the answer."""
    store = InMemorySessionStore()
    model = ScriptedModel([{"reasoning": "sum it", "tool": "add", "args": {"a": 2, "b": 3}}, {"text": "5"}])
    r = await Session(store=store, agent=Agent(name="calc", model=model, tools=[add])).start("2+3?")
    history = await store.load_history(r.state.history_revision_id or "")
    await store.close()
    assert history is not None
    return history.messages


async def test_replay_follows_the_recording() -> None:
    messages = await recorded_run()
    replay = ReplayModel.from_history(messages)
    store = InMemorySessionStore()
    agent = Agent(name="calc", model=replay, instructions="Add.", tools=[add])  # instructions are skipped
    r = await Session(store=store, agent=agent).start("2+3?")
    assert r.text == "5" and replay.requests == 2
    history = await store.load_history(r.state.history_revision_id or "")
    assert history is not None
    assert [(m.role, m.parts) for m in history.messages] == [(m.role, m.parts) for m in messages]
    assert history.messages[1].model == "scripted"  # a replayed reply keeps who wrote it
    await store.close()


async def test_replay_names_the_first_differing_index() -> None:
    messages = await recorded_run()
    replay = ReplayModel(messages)
    assert replay.position(messages[:1]) == 1
    assert replay.position(messages[:3]) == 3
    changed = ModelMessage(role="tool", parts=[messages[2].parts[0].model_copy(update={"result": 6})])
    with pytest.raises(ModelError, match="recorded message 2: it sends tool message 'result of add'") as info:
        replay.position([*messages[:2], changed])
    assert info.value.index == 2  # type: ignore[attr-defined]
    with pytest.raises(ModelError, match="recorded message 0") as info:
        replay.position([ModelMessage.user("3+4?")])
    with pytest.raises(ModelError, match="recording ends at message 4; nothing recorded") as info:
        replay.position(messages)
    with pytest.raises(ModelError, match="recording ends at message 4: the request goes on"):
        replay.position([*messages, ModelMessage.user("more")])
    with pytest.raises(ModelError, match="asks for a reply where the recording has tool message"):
        replay.position(messages[:2])
    with pytest.raises(ValueError, match="no assistant message"):
        ReplayModel([ModelMessage.user("hi")])


async def test_replay_streams_the_recorded_text() -> None:
    replay = ReplayModel([ModelMessage.user("hi"), ModelMessage.assistant("hello")])
    events, response = await collect(replay)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hello"]
    assert response.message.text == "hello" and response.usage.requests == 1
