"""What the store benchmarks share: the message workload, the engine-style session, targets, timing.

Both ``benchmarks.store`` (SQLite) and ``benchmarks.store_pg`` (PostgreSQL) drive commits through
``EngineSession``, so the two backends are measured on the same steps with the same message sizes.
"""

from __future__ import annotations

import gc
import random
import string
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage, Origin, TextPart
from repertory.core.state import RunState, ThreadState
from repertory.core.store import SessionStore

__all__ = [
    "MESSAGE_BYTES",
    "RESULTS",
    "TARGET_COMMITS_PER_S",
    "TARGET_DISK_RATIO",
    "TARGET_LOAD_MS_AT_10K",
    "TARGET_PG_RATIO",
    "TARGET_RATIO",
    "EngineSession",
    "make_message",
    "timed",
]

MESSAGE_BYTES = 1024
TARGET_COMMITS_PER_S = 10_000
TARGET_RATIO = 0.4
TARGET_PG_RATIO = 0.5
TARGET_LOAD_MS_AT_10K = 50.0
TARGET_DISK_RATIO = 2.0
RESULTS = Path(__file__).resolve().parent / "results" / "store.json"


def make_message(index: int, size: int = MESSAGE_BYTES) -> ModelMessage:
    """An assistant message whose JSON is exactly ``size`` bytes, so disk figures compare to a known size.

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

    def _point_at(self, revision_id: str | None) -> None:
        at = now_ms()
        self.run.history_revision_id = revision_id
        self.run.step_index += 1
        self.run.updated_at = at
        self.thread.history_revision_id = revision_id
        self.thread.updated_at = at

    async def step(self, store: SessionStore, message: ModelMessage) -> None:
        """Append one message and commit it with the previous head as base: one engine step."""
        revision = self.history.append(message)
        self._point_at(revision.id)
        await store.commit_session(run=self.run, thread=self.thread, history=self.history, base_revision_id=self.head)
        self.head = revision.id

    async def seed(self, store: SessionStore, messages: Sequence[ModelMessage]) -> None:
        """Bring the session to ``len(messages)`` depth in one commit: set-up, not a measured step."""
        self.history.extend(list(messages))
        self._point_at(self.history.revision_id)
        await store.commit_session(run=self.run, thread=self.thread, history=self.history, base_revision_id=self.head)
        self.head = self.history.revision_id


async def timed(work: Callable[[], Awaitable[None]]) -> float:
    """Seconds ``work`` takes, after a collection so an earlier phase's garbage is not billed to it."""
    gc.collect()
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start
