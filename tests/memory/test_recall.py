"""``StoreMemory.recall`` on every backend: across the threads of one resource, never across resources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from repertory import ModelMessage, Origin, StoreError, TextPart, ToolCallPart, ToolResultPart
from repertory.core.store import MemoryRecord
from repertory.memory import HashingEmbedder, StoreMemory
from repertory.storage import InMemorySessionStore

from .conftest import Backend


async def say(memory: StoreMemory, thread: str, *texts: str, role: str = "user") -> None:
    await memory.append(thread_id=thread, messages=[ModelMessage(role=role, parts=[TextPart(text=t)]) for t in texts])


def q(text: str) -> list[ModelMessage]:
    return [ModelMessage.user(text)]


def texts(messages: Sequence[ModelMessage | MemoryRecord]) -> list[str]:
    return [m.text for m in messages]


async def test_prior_messages_come_from_the_resources_other_threads(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", last_messages=3, semantic_top_k=0)
    await say(memory, "t1", "I live in Oslo", "I have a cat called Bit")
    await say(memory, "t2", "Book me a table for two")
    await say(memory, "t3", "this thread is the one asking")
    recalled = await memory.recall(thread_id="t3", query=q("hello again"))
    assert texts(recalled.messages) == ["I live in Oslo", "I have a cat called Bit", "Book me a table for two"]
    assert [m.role for m in recalled.messages] == ["user"] * 3
    recalled = await memory.recall(thread_id="t1", query=q("hello again"))
    assert texts(recalled.messages) == ["Book me a table for two", "this thread is the one asking"]
    await memory.close()


async def test_recall_never_crosses_resources(store: Any) -> None:
    ada = StoreMemory(store, resource="ada", semantic_top_k=5, min_score=0.0)
    bob = StoreMemory(store, resource="bob", semantic_top_k=5, min_score=0.0)
    await say(ada, "ada-1", "my password hint is the blue heron")
    await ada.set_working_memory({"secret": "ada's"})
    # Bob shares a thread id and the vocabulary: neither may leak.
    await say(bob, "ada-1", "what is the password hint of the blue heron")
    recalled = await bob.recall(thread_id="bob-2", query=q("password hint blue heron"))
    assert texts(recalled.messages) == ["what is the password hint of the blue heron"]
    assert texts(recalled.semantic) == []  # the only candidate is already among the prior messages
    assert recalled.working_memory is None
    hits = await bob.search("password hint blue heron", 10)
    assert [r.text for r, _ in hits] == ["what is the password hint of the blue heron"]
    # A fresh resource sees nothing at all.
    eve = StoreMemory(store, resource="eve", min_score=-1.0)
    assert (await eve.recall(thread_id="x", query=q("password hint blue heron"))).empty
    await ada.close()
    await bob.close()


async def test_another_memory_object_on_the_same_resource_sees_the_same_data(backend: Backend) -> None:
    first = StoreMemory(backend.store, resource="ada", semantic_top_k=2)
    await say(first, "t1", "my favourite colour is teal", "the cat is called Bit")
    await first.set_working_memory({"colour": "teal"})
    await first.close()
    store = await backend.reopen()
    second = StoreMemory(store, resource="ada", last_messages=0, semantic_top_k=2)
    recalled = await second.recall(thread_id="t2", query=q("which colour do I like? teal?"))
    assert texts(recalled.semantic) == ["my favourite colour is teal"]
    assert recalled.working_memory == {"colour": "teal"}
    await second.close()


async def test_semantic_hits_skip_the_current_thread_and_the_prior_messages(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", last_messages=1, semantic_top_k=5, min_score=0.1)
    await say(memory, "old", "the boat trip to Bergen was lovely")
    await say(memory, "older", "unrelated chatter about lunch", "Bergen boat tickets are booked")
    await say(memory, "now", "Bergen boat again")
    recalled = await memory.recall(thread_id="now", query=q("Bergen boat"))
    assert texts(recalled.messages) == ["Bergen boat tickets are booked"]
    assert texts(recalled.semantic) == ["the boat trip to Bergen was lovely"]
    await memory.close()


async def test_only_what_a_user_or_the_model_said_is_remembered(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", semantic_top_k=0)
    await memory.append(
        thread_id="t1",
        messages=[
            ModelMessage.system("You are terse."),
            ModelMessage.user("real question", origin=Origin(kind="user")),
            ModelMessage(role="assistant", parts=[ToolCallPart(tool_call_id="c1", tool_name="f", args={})]),
            ModelMessage(role="tool", parts=[ToolResultPart(tool_call_id="c1", tool_name="f", result="r")]),
            ModelMessage.user("schema feedback", origin=Origin(kind="system", id="output-validation")),
            ModelMessage.user("   "),
            ModelMessage.assistant("real answer", origin=Origin(kind="model")),
            ModelMessage.user("nul \x00 inside"),
        ],
    )
    recalled = await memory.recall(thread_id="t2", query=q("x"))
    assert texts(recalled.messages) == ["real question", "real answer", "nul \ufffd inside"]
    with_tools = StoreMemory(store, resource="ada2", roles=("user", "assistant", "tool"), semantic_top_k=0)
    await with_tools.append(
        thread_id="t1", messages=[ModelMessage(role="tool", parts=[TextPart(text="tool said this")])]
    )
    assert texts((await with_tools.recall(thread_id="t2", query=q("x"))).messages) == ["tool said this"]
    await memory.close()
    await with_tools.close()


async def test_long_texts_are_cut_when_recalled(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", semantic_top_k=0, max_recall_chars=10)
    await say(memory, "t1", "x" * 50)
    recalled = await memory.recall(thread_id="t2", query=q("x"))
    assert texts(recalled.messages) == ["x" * 10 + " [...]"]
    await memory.close()


async def test_append_returns_before_anything_is_stored_and_flush_stores_it(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", batch_size=2)
    await say(memory, "t1", "a", "b", "c", "d", "e")
    await memory.flush()
    assert texts(await store.recent_memory("ada", limit=10)) == ["a", "b", "c", "d", "e"]
    vectors = await store.memory_vectors("ada", embedder=memory.embedder.name)
    assert vectors.seqs == [1, 2, 3, 4, 5]
    await memory.flush()  # nothing queued: returns at once
    await memory.close()


class FlakyStore(InMemorySessionStore):
    """Fails the next ``failures`` memory appends."""

    failures = 0

    async def append_memory(self, resource: str, records: Any) -> list[int]:
        if self.failures:
            self.failures -= 1
            raise StoreError("disk on fire")
        return await super().append_memory(resource, records)


async def test_a_failed_batch_stays_queued_and_flush_reports_then_retries_it() -> None:
    store = FlakyStore()
    store.failures = 1
    memory = StoreMemory(store, resource="ada")
    await say(memory, "t1", "kept despite the failure")
    with pytest.raises(StoreError, match="disk on fire"):
        await memory.flush()
    await memory.flush()
    assert texts(await store.recent_memory("ada", limit=10)) == ["kept despite the failure"]
    await memory.close()


class BrokenEmbedder:
    name = "broken"

    async def embed(self, texts: Sequence[str]) -> Any:
        raise RuntimeError("no embeddings today")


async def test_without_embeddings_messages_are_still_remembered_and_recall_still_works(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", embedder=BrokenEmbedder())
    await say(memory, "t1", "remembered anyway")
    recalled = await memory.recall(thread_id="t2", query=q("remembered"))
    assert texts(recalled.messages) == ["remembered anyway"]
    assert recalled.semantic == []
    assert isinstance(memory.last_error, RuntimeError)
    assert (await store.memory_vectors("ada", embedder="broken")).seqs == []
    await memory.close()


class FixedEmbedder:
    """Vectors chosen by the test: a text's vector is looked up by its first word."""

    def __init__(self, name: str, table: dict[str, list[float]]) -> None:
        self.name = name
        self.table = table

    async def embed(self, texts: Sequence[str]) -> Any:
        return np.asarray([self.table[t.split()[0]] for t in texts], dtype=np.float32)


async def test_vectors_of_another_embedder_are_never_compared(store: Any) -> None:
    old = StoreMemory(store, resource="ada", embedder=FixedEmbedder("old", {"north": [1, 0], "east": [0, 1]}))
    await say(old, "t1", "north old", "east old")
    await old.close()
    new = StoreMemory(
        store,
        resource="ada",
        last_messages=0,
        min_score=0.5,
        embedder=FixedEmbedder("new", {"north": [1, 0, 0], "up": [0, 0, 1]}),
    )
    await say(new, "t2", "up new", "north new")
    hits = await new.search("north query", 5)
    assert [(r.text, round(s, 3)) for r, s in hits] == [("north new", 1.0)]
    await new.close()


async def test_min_score_and_top_k(store: Any) -> None:
    table: dict[str, list[float]] = {"a": [1, 0], "b": [0.8, 0.6], "c": [0.6, 0.8], "d": [0, 1], "q": [1, 0]}
    memory = StoreMemory(store, resource="ada", last_messages=0, embedder=FixedEmbedder("f", table))
    await say(memory, "t1", "d", "c", "b", "a")
    hits = await memory.search("q", 3)
    assert [(r.text, round(s, 2)) for r, s in hits] == [("a", 1.0), ("b", 0.8), ("c", 0.6)]
    memory.min_score = 0.7
    assert [r.text for r, _ in await memory.search("q", 10)] == ["a", "b"]
    assert await memory.search("q", 0) == []
    await memory.close()


async def test_forget_removes_everything_of_the_resource(store: Any) -> None:
    memory = StoreMemory(store, resource="ada", min_score=0.0)
    other = StoreMemory(store, resource="bob", min_score=0.0)
    await say(memory, "t1", "forget this please")
    await say(other, "t1", "forget this please")
    await memory.set_working_memory({"k": 1})
    assert await memory.search("forget this", 5)
    await memory.forget()
    assert (await memory.recall(thread_id="t2", query=q("forget this please"))).empty
    assert [r.text for r, _ in await other.search("forget this", 5)] == ["forget this please"]
    await memory.close()
    await other.close()


def test_bad_arguments_are_refused() -> None:
    store = InMemorySessionStore()
    with pytest.raises(ValueError, match="resource"):
        StoreMemory(store, resource="")
    with pytest.raises(ValueError, match="resource"):
        StoreMemory(store, resource="a\x00b")
    with pytest.raises(ValueError, match="last_messages"):
        StoreMemory(store, resource="a", last_messages=-1)
    with pytest.raises(TypeError, match="not a MemoryStore"):
        StoreMemory(object(), resource="a")
    assert StoreMemory(store, resource="a").embedder.name == HashingEmbedder().name


async def test_while_the_store_refuses_the_queue_keeps_only_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    import repertory.memory.store_memory as module

    monkeypatch.setattr(module, "_MAX_PENDING", 3)
    store = FlakyStore()
    store.failures = 100
    memory = StoreMemory(store, resource="ada", batch_size=2)
    for i in range(6):
        await say(memory, "t1", f"m{i}")
    with pytest.raises(StoreError):
        await memory.flush()
    store.failures = 0
    await memory.flush()
    assert texts(await store.recent_memory("ada", limit=10)) == ["m3", "m4", "m5"]
    await memory.close()
