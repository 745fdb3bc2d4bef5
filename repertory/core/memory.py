"""The ``Memory`` protocol and how recalled context is folded into a run.

A memory recalls three things for a new run: prior messages (from other conversations), semantic
hits (past messages similar to the input) and working memory (one JSON document). They are folded
into one system message placed ahead of the run's input in every model request. That message is
kept in the run's checkpoint, so a resumed or recovered run asks the model the same question, and
it is never written into the thread's history: nobody said it. Every message a run adds to the
history is appended to the memory after each commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field, JsonValue

from repertory.core.messages import ModelMessage, Origin, TextPart
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord

__all__ = ["Memory", "MemoryFactory", "RecalledContext", "fold_context", "MEMORY_HEADER"]

MEMORY_HEADER = "[Recalled from memory: context for this conversation, not said in it]"


class RecalledContext(BaseModel):
    """What a memory recalls for one run's input."""

    messages: list[ModelMessage] = Field(default_factory=list)
    semantic: list[ModelMessage] = Field(default_factory=list)
    working_memory: JsonValue | None = None

    @property
    def empty(self) -> bool:
        """True when there is nothing to fold in."""
        return not self.messages and not self.semantic and self.working_memory is None


@runtime_checkable
class Memory(Protocol):
    """Long-term memory a ``Session`` consults on ``start()`` and feeds after every commit.

    A memory may also contribute tools: an optional ``tools`` attribute (a sequence of ``Tool``)
    joins the agent's tools in every drive of a session given this memory, and the model sees
    them like the agent's own (``repertory.memory.StoreMemory`` adds ``update_working_memory``
    this way). A tool name the agent already has is a ``ValueError`` when the drive starts. The
    attribute is not part of the structural check, so a memory without tools stays a ``Memory``.
    """

    async def recall(self, *, thread_id: str, query: list[ModelMessage]) -> RecalledContext:
        """Context relevant to ``query`` (the new run's input) on ``thread_id``."""

    async def append(self, *, thread_id: str, messages: list[ModelMessage]) -> None:
        """Remember messages just committed to ``thread_id``, oldest first."""


MemoryFactory = Callable[[SessionRecord, TreeStore], Memory | None]
"""Gives a session its long-term memory when its host activates it (``Runtime.start(memory=...)``).

Called with the session's record and the host's store, on whichever host activates the session (on
a backend with several processes it travels to each of them, so it must pickle); ``None``: no memory.
"""


def _line(message: ModelMessage) -> str:
    text = message.text or " ".join(f"[{p.type}]" for p in message.parts)
    return f"{message.role}: {text}"


def fold_context(recalled: RecalledContext) -> list[ModelMessage]:
    """Render recalled context as one marked system message (or nothing when it is empty)."""
    if recalled.empty:
        return []
    sections = [MEMORY_HEADER]
    if recalled.messages:
        sections.append("## Earlier messages\n" + "\n".join(_line(m) for m in recalled.messages))
    if recalled.semantic:
        sections.append("## Related past messages\n" + "\n".join(f"- {_line(m)}" for m in recalled.semantic))
    if recalled.working_memory is not None:
        sections.append("## Working memory\n" + json.dumps(recalled.working_memory, ensure_ascii=False, indent=2))
    return [
        ModelMessage(
            role="system", parts=[TextPart(text="\n\n".join(sections))], origin=Origin(kind="system", id="memory")
        )
    ]
