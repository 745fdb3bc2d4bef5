"""Memory: recalled context folded into requests ahead of the input, never stored; append() sees all."""

from __future__ import annotations

import json
from typing import Any

from repertory import Agent, Memory, ModelMessage, RecalledContext, Session, suspend, tool
from repertory.core.memory import MEMORY_HEADER
from repertory.storage import SessionStore

from .helpers import CheckedModel, call, thread_history


class FakeMemory:
    """A memory that recalls a fixed context and remembers everything appended to it."""

    def __init__(self, recalled: RecalledContext | None = None) -> None:
        self.recalled = recalled or RecalledContext(
            messages=[ModelMessage.user("my name is Ada"), ModelMessage.assistant("hello Ada")],
            semantic=[ModelMessage.user("I prefer window seats")],
            working_memory={"home": "Oslo", "tier": "gold"},
        )
        self.recalls: list[tuple[str, list[ModelMessage]]] = []
        self.appended: list[tuple[str, list[ModelMessage]]] = []

    async def recall(self, *, thread_id: str, query: list[ModelMessage]) -> RecalledContext:
        self.recalls.append((thread_id, list(query)))
        return self.recalled

    async def append(self, *, thread_id: str, messages: list[ModelMessage]) -> None:
        self.appended.append((thread_id, list(messages)))

    def all_appended(self, thread_id: str) -> list[ModelMessage]:
        return [m for t, ms in self.appended if t == thread_id for m in ms]


@tool
def lookup(q: str) -> str:
    return f"result {q}"


@tool
def ask(question: str) -> str:
    suspend(reason="need input")


def make_agent(model: Any, **kw: Any) -> Agent:
    return Agent(name="rememberer", model=model, tools=[lookup, ask], **kw)


def is_memory(m: ModelMessage) -> bool:
    return MEMORY_HEADER in m.text


def test_fake_memory_satisfies_the_protocol() -> None:
    assert isinstance(FakeMemory(), Memory)


async def test_recalled_context_is_folded_in_ahead_of_the_input(store: SessionStore) -> None:
    def first(messages: list[ModelMessage]) -> dict[str, Any]:
        assert [m.role for m in messages] == ["system", "system", "user"]
        assert messages[0].text == "Be brief."
        mem = messages[1]
        assert is_memory(mem)
        for piece in ["my name is Ada", "hello Ada", "I prefer window seats", '"home": "Oslo"']:
            assert piece in mem.text
        assert messages[2].text == "book a flight"
        return call("lookup", q="flights")

    def second(messages: list[ModelMessage]) -> dict[str, Any]:
        # Still ahead of the input on later steps of the same run.
        assert [m.role for m in messages] == ["system", "system", "user", "assistant", "tool"]
        assert is_memory(messages[1])
        return {"text": "booked"}

    memory = FakeMemory()
    model = CheckedModel([first, second])
    sess = Session(store=store, agent=make_agent(model, instructions="Be brief."), memory=memory)
    r = await sess.start("book a flight")
    assert r.status == "done" and model.requests == 2
    assert [(t, [m.text for m in q]) for t, q in memory.recalls] == [(sess.thread_id, ["book a flight"])]
    history = await thread_history(store, sess.thread_id)
    assert not any(is_memory(m) for m in history)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]


async def test_on_a_continued_thread_the_context_goes_between_history_and_input(store: SessionStore) -> None:
    def later(messages: list[ModelMessage]) -> dict[str, Any]:
        assert [m.text for m in messages if not is_memory(m)] == ["one", "first", "two"]
        assert is_memory(messages[2]), [m.text[:20] for m in messages]
        return {"text": "second"}

    memory = FakeMemory()
    model = CheckedModel([{"text": "first"}, later])
    sess = Session(store=store, agent=make_agent(model), memory=memory)
    await sess.start("one")
    await Session(store=store, agent=make_agent(model), memory=memory, thread_id=sess.thread_id).start("two")
    assert model.requests == 2
    assert not any(is_memory(m) for m in await thread_history(store, sess.thread_id))


async def test_append_receives_every_new_message_once_in_order(store: SessionStore) -> None:
    memory = FakeMemory()
    model = CheckedModel([call("lookup", q="a"), {"text": "one done"}, call("lookup", q="b"), {"text": "two done"}])
    sess = Session(store=store, agent=make_agent(model), memory=memory)
    await sess.start("one")
    history = await thread_history(store, sess.thread_id)
    assert memory.all_appended(sess.thread_id) == history
    count = len(history)
    await sess.start("two")
    history = await thread_history(store, sess.thread_id)
    assert memory.all_appended(sess.thread_id) == history
    assert history[count].text == "two"
    assert all(not is_memory(m) for _, ms in memory.appended for m in ms)


async def test_the_context_survives_a_suspension_and_a_stateless_resume(store: SessionStore) -> None:
    def after_resume(messages: list[ModelMessage]) -> dict[str, Any]:
        assert is_memory(messages[0])
        assert [m.role for m in messages[1:]] == ["user", "assistant", "tool", "user"]
        return {"text": "ok"}

    memory = FakeMemory()
    model = CheckedModel([call("ask", question="q"), after_resume])
    r = await Session(store=store, agent=make_agent(model), memory=memory).start("go")
    assert r.status == "suspended"
    done = await Session.resume_suspended(
        store=store,
        agent=make_agent(model),
        run_id=r.run_id,
        resume_token=r.state.suspended_on.token,  # type: ignore[union-attr]
        value="answer",
        memory=memory,
    )
    assert done.status == "done"
    assert len(memory.recalls) == 1  # recalled once, at start
    history = await thread_history(store, r.state.thread_id)
    assert memory.all_appended(r.state.thread_id) == history


async def test_an_empty_recall_adds_nothing(store: SessionStore) -> None:
    def check(messages: list[ModelMessage]) -> dict[str, Any]:
        assert [m.role for m in messages] == ["user"]
        return {"text": "ok"}

    memory = FakeMemory(RecalledContext())
    await Session(store=store, agent=make_agent(CheckedModel([check])), memory=memory).start("hi")


async def test_working_memory_alone_is_folded_in(store: SessionStore) -> None:
    def check(messages: list[ModelMessage]) -> dict[str, Any]:
        assert is_memory(messages[0])
        body = messages[0].text.split("## Working memory\n", 1)[1]
        assert json.loads(body) == {"k": [1, 2]}
        return {"text": "ok"}

    memory = FakeMemory(RecalledContext(working_memory={"k": [1, 2]}))
    await Session(store=store, agent=make_agent(CheckedModel([check])), memory=memory).start("hi")


@tool(requires_approval=True)
def wipe(disk: str) -> str:
    return "wiped"


async def test_memory_sees_the_results_a_cancellation_adds(store: SessionStore) -> None:
    memory = FakeMemory(RecalledContext())
    model = CheckedModel([call("wipe", disk="d1"), {"text": "never"}])
    sess = Session(store=store, agent=Agent(name="m", model=model, tools=[wipe]), memory=memory)
    r = await sess.start("wipe d1")
    assert r.status == "suspended"
    await sess.cancel()
    history = await thread_history(store, sess.thread_id)
    assert history[-1].role == "tool"  # the cancellation answered the pending call
    assert memory.all_appended(sess.thread_id) == history


async def test_memory_sees_the_results_a_superseding_run_adds(store: SessionStore) -> None:
    memory = FakeMemory(RecalledContext())
    model = CheckedModel([call("wipe", disk="d1"), {"text": "moved on"}])
    sess = Session(store=store, agent=Agent(name="m", model=model, tools=[wipe]), memory=memory)
    await sess.start("wipe d1")
    await sess.start("never mind")
    history = await thread_history(store, sess.thread_id)
    assert memory.all_appended(sess.thread_id) == history
