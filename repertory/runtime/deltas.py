"""A reply's text and reasoning deltas as durable events: coalesced, written by window, retracted when abandoned.

A model streams a reply as many small deltas. Publishing each one live and storing none (as
repertory did first) loses the partial text for any reader that reconnects, and for every
reader once the serving process dies. Storing each one costs a write per token. So the deltas
of one model request gather in a ``ReplyDeltas`` for a short window (``DeltaWindow``: time or
bytes, whichever fills first), then go into the session's log as one ``text.delta`` or
``reasoning.delta`` event per run of one kind, numbered like every other event and published
only once written. A reader that reconnects with its last seq, also after a restart, gets
exactly the text it has not seen. What is still gathering when the model's response arrives
rides the step's checkpoint, so a fast model adds no write at all.

Each delta names its ``run_id`` and the ``message_id`` the finished reply will have (the id of its
history entry), so a reader rebuilds the partial reply and then recognises it complete. A reply
that never completes (the process died, the run was cancelled or failed mid-stream, an output
guardrail refused it) is named by a ``reply.retracted`` event before anything newer, so no
reader keeps text the stored history lacks; a recovered run finds such replies with
``abandoned_replies``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from repertory.core.log_tail import newest_first
from repertory.core.store import TreeStore

__all__ = ["DEFAULT_WINDOW", "DELTA_EVENTS", "RETRACTED", "DeltaWindow", "ReplyDeltas", "abandoned_replies"]

DELTA_EVENTS = frozenset({"text.delta", "reasoning.delta"})
RETRACTED = "reply.retracted"
_SCAN_LIMIT = 100_000  # events read back at most, looking for a recovered run's last checkpoint


class DeltaWindow(BaseModel):
    """How long, and how much, a reply's deltas gather before they are written as one event.

    ``ms`` bounds what a reader waits for text beyond the model itself (the write comes on top);
    ``max_bytes`` bounds one event, so a fast model writes at that size. ``Agent(delta_window=None)``
    keeps deltas live-only: nothing stored, nothing replayed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    ms: int = Field(default=50, ge=0, le=60_000)
    max_bytes: int = Field(default=16_384, ge=1, le=1_048_576)


DEFAULT_WINDOW = DeltaWindow()
"""Every agent's window unless it says otherwise."""

Batch = list[tuple[str, dict[str, Any]]]


class ReplyDeltas:
    """The deltas of one model request, gathered and handed to ``write`` once per window.

    One write is in flight at a time; deltas that arrive meanwhile wait for the next. ``rest``
    ends the gathering and returns what no write took (the caller lets it ride its next commit);
    ``settle`` waits for the write in flight and raises what it raised.
    """

    def __init__(
        self, window: DeltaWindow, write: Callable[[Batch], Awaitable[None]], *, run_id: str, message_id: str
    ) -> None:
        self.window = window
        self.run_id = run_id
        self.message_id = message_id
        self.written = False  # some of this reply's deltas are in the log
        # The model call's latest position (``ModelCall``): stored with the deltas, so a re-attach
        # after a crash continues right after the last text the log holds.
        self.call: dict[str, Any] | None = None
        self._write = write
        self._kinds: list[str] = []
        self._texts: list[list[str]] = []
        self._bytes = 0
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, kind: str, text: str) -> None:
        """Gather one delta; the first one of a window starts the timer."""
        if not text:
            return
        if self._kinds and self._kinds[-1] == kind:
            self._texts[-1].append(text)
        else:
            self._kinds.append(kind)
            self._texts.append([text])
        self._bytes += len(text)
        if self._bytes >= self.window.max_bytes:
            self._full.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush_loop())

    def _take(self) -> Batch:
        base: dict[str, Any] = {"run_id": self.run_id, "message_id": self.message_id}
        if self.call is not None:
            base["call"] = self.call
        data = [(kind, {"text": "".join(texts), **base}) for kind, texts in zip(self._kinds, self._texts, strict=True)]
        self._kinds, self._texts, self._bytes = [], [], 0
        self._full.clear()
        return data

    async def _flush_loop(self) -> None:
        while self._kinds:
            if not self._full.is_set() and self.window.ms:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.window.ms / 1000)
            batch = self._take()
            if batch:
                await self._write(batch)
                self.written = True
        self._task = None

    def rest(self) -> Batch:
        """Stop gathering and return the deltas no write took (they come after any write in flight)."""
        batch = self._take()
        self._full.set()  # a flusher waiting out its window wakes to nothing and ends
        return batch

    async def settle(self) -> None:
        """Wait for the write in flight, if any, and raise what it raised."""
        task = self._task
        if task is not None:
            await task

    def abort(self) -> None:
        """Stop the flusher (the request failed or was cancelled); what it gathered is dropped."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self._take()


async def abandoned_replies(store: TreeStore, session_id: str, run_id: str) -> dict[str, dict[str, Any] | None]:
    """The replies of ``run_id`` whose deltas are in the log after its last checkpoint: none completed.

    Oldest first, each with the model call's position its last stored delta carries (``None``
    without one): a re-attached call goes on from there. Read back from the end of the session's
    log to the run's last checkpoint (or the last retraction of the run, which already named what
    came before it). Other turns' events may be interleaved (a follow-up accepted while the run
    streamed); only this run's deltas count.
    """
    found: dict[str, dict[str, Any] | None] = {}
    async for event in newest_first(store, session_id, limit=_SCAN_LIMIT):
        data = event.data
        if data.get("run_id") != run_id:
            continue
        if event.type in DELTA_EVENTS:
            message_id = data.get("message_id")
            if isinstance(message_id, str) and message_id not in found:
                call = data.get("call")
                found[message_id] = call if isinstance(call, dict) else None  # the newest delta's: the last position
        elif event.type in ("checkpoint", RETRACTED):
            break
    return dict(reversed(found.items()))
