"""Whole sessions with ``StoreMemory`` on every backend: what the model receives, what the history keeps.

The model is a ``ScriptedModel`` step function, so each test asserts on the exact request: the
recalled context is one system message (origin ``system``, the memory header) between the history
and the new input, and it never lands in the thread's history.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from repertory import Agent, MessageHistory, ModelMessage, Session, ToolSpec, tool
from repertory.core.memory import MEMORY_HEADER
from repertory.memory import StoreMemory
from repertory.testing import ScriptedModel

from .conftest import Backend


async def history(store: Any, thread_id: str) -> list[ModelMessage]:
    thread = await store.load_thread(thread_id)
    assert thread is not None and thread.history_revision_id is not None
    loaded: MessageHistory | None = await store.load_history(thread.history_revision_id)
    assert loaded is not None
    return loaded.messages


def is_memory(m: ModelMessage) -> bool:
    return MEMORY_HEADER in m.text


class Recorder:
    """A step function that records every request and answers from a list of replies."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[list[ModelMessage], list[ToolSpec]]] = []

    def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        self.requests.append((list(messages), list(tools)))
        reply = self.replies.pop(0)
        step: dict[str, Any] = reply(messages) if callable(reply) else reply
        return step


async def test_a_new_session_remembers_the_earlier_one_and_keeps_its_history_clean(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", last_messages=4, semantic_top_k=2)
    script = Recorder(
        {"text": "Noted: window seats."},
        {"text": "Booked, window seat."},
    )
    agent = Agent(name="travel", model=ScriptedModel(script), instructions="Be brief.")
    first = Session(store=store, agent=agent, memory=memory)
    await first.start("I always want a window seat on flights")
    messages, tools = script.requests[0]
    assert [m.role for m in messages] == ["system", "user"]  # nothing to recall yet
    assert [t.name for t in tools] == ["update_working_memory"]

    second = Session(store=store, agent=agent, memory=memory)
    await second.start("book my flight to Oslo")
    messages, _ = script.requests[1]
    assert [m.role for m in messages] == ["system", "system", "user"]
    assert messages[0].text == "Be brief."
    recalled = messages[1]
    assert recalled.origin is not None and recalled.origin.kind == "system"
    assert recalled.text.startswith(MEMORY_HEADER)
    assert "## Earlier messages\nuser: I always want a window seat on flights\nassistant: Noted: window seats." in (
        recalled.text
    )
    assert messages[2].text == "book my flight to Oslo"

    for thread in (first.thread_id, second.thread_id):
        kept = await history(store, thread)
        assert not any(is_memory(m) for m in kept)
        assert all(m.role in ("user", "assistant") for m in kept)
    assert [m.text for m in await history(store, second.thread_id)] == [
        "book my flight to Oslo",
        "Booked, window seat.",
    ]
    await memory.close()


async def test_another_resource_recalls_nothing(store: Any) -> None:
    script = Recorder({"text": "ok"}, {"text": "ok"})
    agent = Agent(name="a", model=ScriptedModel(script))
    ada = StoreMemory(store, resource="ada", min_score=0.0)
    bob = StoreMemory(store, resource="bob", min_score=0.0)
    await Session(store=store, agent=agent, memory=ada).start("my secret is the blue heron")
    await Session(store=store, agent=agent, memory=bob).start("what is the secret blue heron")
    messages, _ = script.requests[1]
    assert [m.role for m in messages] == ["user"]
    await ada.close()
    await bob.close()


async def test_semantic_hits_reach_the_model(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", last_messages=1, semantic_top_k=1, min_score=0.2)
    script = Recorder({"text": "ok"}, {"text": "ok"}, {"text": "ok"})
    agent = Agent(name="a", model=ScriptedModel(script))
    await Session(store=store, agent=agent, memory=memory).start("my dentist is Dr Olsen on Tuesdays")
    await Session(store=store, agent=agent, memory=memory).start("the weather is grey")
    await Session(store=store, agent=agent, memory=memory).start("when is the dentist appointment?")
    recalled = script.requests[2][0][0]
    assert is_memory(recalled)
    earlier, related = recalled.text.split("## Related past messages\n")
    assert "user: the weather is grey" not in related and "assistant: ok" in earlier
    assert related.strip() == "- user: my dentist is Dr Olsen on Tuesdays"
    await memory.close()


async def test_the_working_memory_tool_updates_and_persists_the_document(backend: Backend) -> None:
    store = backend.store
    memory = StoreMemory(store, resource="ada", last_messages=0, semantic_top_k=0)
    script = Recorder(
        {"tool": "update_working_memory", "args": {"document": {"name": "Ada", "seat": "window"}}},
        {"text": "Remembered."},
    )
    agent = Agent(name="a", model=ScriptedModel(script))
    sess = Session(store=store, agent=agent, memory=memory)
    result = await sess.start("call me Ada; I like window seats")
    assert result.status == "done"
    tool_message = script.requests[1][0][-1]
    assert tool_message.role == "tool"
    part = tool_message.tool_results[0]
    assert not part.is_error
    assert part.result == {"status": "saved", "document": {"name": "Ada", "seat": "window"}}
    kept = await history(store, sess.thread_id)
    assert [m.role for m in kept] == ["user", "assistant", "tool", "assistant"]
    assert kept[2].tool_results[0].result == part.result  # the tool's result is durable in the history
    await memory.close()

    store = await backend.reopen()
    later = StoreMemory(store, resource="ada", last_messages=0, semantic_top_k=0)
    assert await later.working_memory() == {"name": "Ada", "seat": "window"}
    script = Recorder({"text": "Hi Ada"})
    await Session(store=store, agent=Agent(name="a", model=ScriptedModel(script)), memory=later).start("hi")
    shown = script.requests[0][0][0]
    assert is_memory(shown)
    body = shown.text.split("## Working memory\n", 1)[1]
    assert json.loads(body) == {"name": "Ada", "seat": "window"}
    await later.close()


class Profile(BaseModel):
    name: str
    seat: str = Field(pattern="^(window|aisle)$")
    allergies: list[str] = []


async def test_schema_errors_come_back_to_the_model_and_change_nothing(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", working_memory_schema=Profile, last_messages=0, semantic_top_k=0)
    await memory.set_working_memory({"name": "Ada", "seat": "aisle"})
    script = Recorder(
        {"tool": "update_working_memory", "args": {"document": {"name": "Ada", "seat": "roof"}}},
        {
            "tool": "update_working_memory",
            "args": {"document": {"name": "Ada", "seat": "window", "allergies": ["nuts"]}},
        },
        {"text": "done"},
    )
    sess = Session(store=store, agent=Agent(name="a", model=ScriptedModel(script)), memory=memory)
    await sess.start("I prefer the window now, and I'm allergic to nuts")
    spec = next(t for t in script.requests[0][1] if t.name == "update_working_memory")
    assert "Profile" in json.dumps(spec.parameters) and "seat" in json.dumps(spec.parameters)
    assert "Profile" in spec.description
    bad = script.requests[1][0][-1].tool_results[0]
    assert bad.is_error and "seat" in str(bad.result)
    good = script.requests[2][0][-1].tool_results[0]
    assert not good.is_error
    assert await memory.working_memory() == {"name": "Ada", "seat": "window", "allergies": ["nuts"]}
    await memory.close()


async def test_a_document_that_is_too_large_is_refused(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", max_working_memory_chars=50, last_messages=0)
    script = Recorder({"tool": "update_working_memory", "args": {"document": {"notes": "x" * 100}}}, {"text": "ok"})
    await Session(store=store, agent=Agent(name="a", model=ScriptedModel(script)), memory=memory).start("go")
    result = script.requests[1][0][-1].tool_results[0]
    assert result.is_error and "limit is 50" in str(result.result)
    assert await memory.working_memory() is None
    await memory.close()


async def test_without_working_memory_no_tool_is_added(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", working_memory=False)
    script = Recorder({"text": "ok"})
    await Session(store=store, agent=Agent(name="a", model=ScriptedModel(script)), memory=memory).start("hi")
    assert script.requests[0][1] == []
    await memory.close()


async def test_an_agent_tool_with_the_same_name_is_refused(store: Any) -> None:
    @tool
    def update_working_memory(document: dict[str, Any]) -> str:
        return "mine"

    memory = StoreMemory(store, resource="ada")
    agent = Agent(name="a", model=ScriptedModel([{"text": "never"}]), tools=[update_working_memory])
    sess = Session(store=store, agent=agent, memory=memory)
    with pytest.raises(ValueError, match="update_working_memory"):
        await sess.start("hi")
    with pytest.raises(ValueError, match="update_working_memory"):  # the same again: not SessionBusy
        await sess.start("hi")
    other = Agent(name="a", model=ScriptedModel([{"text": "fine"}]))
    assert (await Session(store=store, agent=other, memory=memory, thread_id=sess.thread_id).start("hi")).text == "fine"
    await memory.close()


async def test_memory_tools_work_across_a_suspension_and_a_stateless_resume(store: Any) -> None:
    from repertory import suspend

    @tool
    def ask(question: str) -> str:
        suspend(reason=question)

    memory = StoreMemory(store, resource="ada", last_messages=0, semantic_top_k=0)
    script = Recorder(
        {"tool": "ask", "args": {"question": "which seat?"}},
        {"tool": "update_working_memory", "args": {"document": {"seat": "aisle"}}},
        {"text": "saved"},
    )
    agent = Agent(name="a", model=ScriptedModel(script), tools=[ask])
    run = await Session(store=store, agent=agent, memory=memory).start("remember my seat")
    assert run.status == "suspended" and run.state.suspended_on is not None
    done = await Session.resume_suspended(
        store=store,
        agent=agent,
        run_id=run.run_id,
        resume_token=run.state.suspended_on.token,
        value="aisle",
        memory=memory,
    )
    assert done.status == "done"
    assert await memory.working_memory() == {"seat": "aisle"}
    assert {t.name for t in script.requests[1][1]} == {"ask", "update_working_memory"}
    await memory.close()
