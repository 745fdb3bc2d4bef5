"""The engine-style commit workload the store-level benchmarks share (store, latency, fork, group commit).

A commit is driven the way the engine drives one: one ``MessageHistory`` kept in memory, one
``append`` per step, the run and thread pointers moved to the new head, and ``commit_session`` with
the previous head as base. So a figure is what a session step pays, not a synthetic bulk insert.
Messages are exactly ``MESSAGE_BYTES`` of JSON, so disk figures compare to a known size.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage, Origin, TextPart
from repertory.core.state import RunState, ThreadState
from repertory.core.store import SessionStore

__all__ = ["MESSAGE_BYTES", "EngineSession", "make_message", "message_pool"]

MESSAGE_BYTES = 1024


def make_message(index: int, size: int = MESSAGE_BYTES) -> ModelMessage:
    """An assistant message whose JSON is exactly ``size`` bytes.

    The filler is random ASCII letters (nothing JSON must escape), seeded by ``index`` so runs repeat.
    """
    origin = Origin(kind="model")
    empty = ModelMessage(role="assistant", parts=[TextPart(text="")], origin=origin).model_dump_json()
    prefix = f"{index:08d} "
    rng = random.Random(index)
    filler = "".join(rng.choices(string.ascii_letters, k=size - len(empty) - len(prefix)))
    message = ModelMessage(role="assistant", parts=[TextPart(text=prefix + filler)], origin=origin)
    if len(message.model_dump_json()) != size:
        raise RuntimeError(f"message JSON is {len(message.model_dump_json())} bytes, wanted {size}")
    return message


def message_pool(count: int = 16) -> list[ModelMessage]:
    """A few distinct messages to cycle through (building one per commit would be timed with it)."""
    return [make_message(i) for i in range(count)]


@dataclass
class EngineSession:
    """One session as the engine holds it: history in memory, run and thread records, the stored head."""

    run: RunState
    thread: ThreadState
    history: MessageHistory = field(default_factory=MessageHistory)
    head: str | None = None

    @classmethod
    def new(cls) -> EngineSession:
        """A fresh session whose thread has no head yet."""
        thread_id = new_id()
        return cls(run=RunState(run_id=new_id(), thread_id=thread_id), thread=ThreadState(thread_id=thread_id))

    def point_at(self, revision_id: str | None) -> None:
        """Move the run and thread to ``revision_id`` and stamp them, as the engine does before a commit."""
        at = now_ms()
        self.run.history_revision_id = revision_id
        self.run.step_index += 1
        self.run.updated_at = at
        self.thread.history_revision_id = revision_id
        self.thread.updated_at = at

    async def step(self, store: SessionStore, message: ModelMessage) -> None:
        """Append one message and commit it with the previous head as base: one engine step."""
        revision = self.history.append(message)
        self.point_at(revision.id)
        await store.commit_session(run=self.run, thread=self.thread, history=self.history, base_revision_id=self.head)
        self.head = revision.id

    async def seed(self, store: SessionStore, messages: Sequence[ModelMessage]) -> None:
        """Bring the session to ``len(messages)`` depth in one commit: set-up, not a measured step."""
        self.history.extend(list(messages))
        self.point_at(self.history.revision_id)
        await store.commit_session(run=self.run, thread=self.thread, history=self.history, base_revision_id=self.head)
        self.head = self.history.revision_id
