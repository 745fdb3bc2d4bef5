"""A task's stream from the session's durable event log: what ``SendStreamingMessage`` and ``SubscribeToTask`` send.

The stream opens with the ``Task`` as it stands, then follows the session's events
(``repertory.http.sse.EventFeed``: stored, then live, no gap, no repeat) for this turn only:

- the reply's text deltas become ``TaskArtifactUpdateEvent``s of the ``reply`` artifact, appended
  while one message is written; a new message (the model wrote text before a tool call, then
  more), or a reply the log retracts (the process died mid-reply, the run was cancelled), starts
  the artifact over (``append: false``), so a client holds exactly what the log holds;
- every change of the task's state (read again from the store at each stored event of the turn)
  is a ``TaskStatusUpdateEvent``;
- at rest the stream ends: ``input-required`` (with its question) or an end; a completed task
  first gets its whole ``reply`` artifact (``append: false``, ``lastChunk: true``), so what a
  client ends with is the stored reply, whatever deltas it saw.

``SubscribeToTask`` replays the turn's events from its start (``core.log_tail.turn_start``), so a
subscriber that reconnects, to this process or another one after this one died, misses nothing:
the store holds every event the first stream had sent and every one the re-driven turn writes.

A turn waiting for a delegated child's question shows no event in its own log; while the log is
quiet the state is read again, more and more rarely (at most every second), as the HTTP runs'
waits do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from a2a.types import Task as A2aTask
from a2a.types import TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent

from repertory.core.log_tail import turn_start
from repertory.core.tree import SessionEvent, TurnRecord
from repertory.http.a2a_tasks import TaskRead, read_task, reply_artifact, reply_of, task_of
from repertory.http.auth import Caller
from repertory.http.gateway import Gateway
from repertory.http.sse import EventFeed

__all__ = ["StreamEvent", "follow", "replay_start"]

StreamEvent = A2aTask | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
_QUIET_MIN_S = 0.05
_QUIET_MAX_S = 1.0


async def replay_start(gw: Gateway, turn: TurnRecord) -> int:
    """The seq a replay of the whole turn starts after (the log's end while the turn has not started)."""
    start = await turn_start(gw.store, turn.session_id, turn.submission_id)
    return start if start is not None else await gw.store.last_event_seq(turn.session_id)


def _rests(read: TaskRead) -> bool:
    return read.terminal or read.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def follow(
    gw: Gateway,
    caller: Caller,
    turn: TurnRecord,
    *,
    after_seq: int,
    applying: asyncio.Task[None] | None = None,
) -> AsyncGenerator[StreamEvent]:
    """The task's events after ``after_seq`` until it rests (see the module docstring).

    ``applying`` is an answer being applied (``repertory.http.a2a_answers.decide``): the task's
    question is then not a rest until the answer has been taken, and its failure ends the stream
    with that error.
    """
    handle = await gw.runtime.session(turn.session_id, caller.principal)
    feed = await EventFeed(handle, gw.store, after_seq).open()
    try:
        read = await read_task(gw, turn)
        yield await task_of(gw, read)
        asked = _question(read)
        if read.terminal or (read.state == TaskState.TASK_STATE_INPUT_REQUIRED and applying is None):
            return
        state = read.state
        writing: str | None = None  # the message id the reply artifact holds now
        quiet = _QUIET_MIN_S
        getting: asyncio.Task[SessionEvent] | None = None
        try:
            while True:
                if getting is None:
                    getting = asyncio.ensure_future(feed.get())
                waits: set[asyncio.Future[object]] = {getting}  # type: ignore[arg-type]
                if applying is not None and not applying.done():
                    waits.add(applying)  # type: ignore[arg-type]
                done, _ = await asyncio.wait(waits, timeout=quiet, return_when=asyncio.FIRST_COMPLETED)
                if applying is not None and applying in done:
                    applying.result()  # an answer refused after all: its error ends the stream
                event: SessionEvent | None = None
                if getting in done:
                    event, getting = getting.result(), None
                    quiet = _QUIET_MIN_S
                else:
                    quiet = min(quiet * 2, _QUIET_MAX_S)
                if event is not None and event.submission_id != turn.submission_id:
                    continue
                if event is not None and event.type == "text.delta":
                    message_id = event.data.get("message_id")
                    text = event.data.get("text")
                    if isinstance(text, str) and text:
                        yield TaskArtifactUpdateEvent(
                            task_id=turn.submission_id,
                            context_id=turn.session_id,
                            artifact=reply_artifact(text),
                            append=writing is not None and writing == message_id,
                        )
                        writing = message_id if isinstance(message_id, str) else None
                    continue
                if event is not None and event.type == "reply.retracted":
                    writing = None
                    continue
                if event is not None and event.seq is None:
                    continue  # a live-only event changes no state
                fresh = await gw.store.load_turn(turn.submission_id)
                if fresh is None:
                    return  # the session was deleted under the stream
                read = await read_task(gw, fresh)
                question = _question(read)
                if read.state == state and question == asked:
                    continue
                if read.state == TaskState.TASK_STATE_INPUT_REQUIRED and applying is not None and not applying.done():
                    continue  # a question seen before the answer was taken: read again once it is
                state, asked = read.state, question
                if _rests(read) and applying is not None:
                    await applying  # the answer's own outcome: refused, if another request's answer won
                text = reply_of(read)
                if text is not None:
                    yield TaskArtifactUpdateEvent(
                        task_id=turn.submission_id,
                        context_id=turn.session_id,
                        artifact=reply_artifact(text),
                        append=False,
                        last_chunk=True,
                    )
                status = (await task_of(gw, read, history=False, artifacts=False)).status
                yield TaskStatusUpdateEvent(task_id=turn.submission_id, context_id=turn.session_id, status=status)
                if _rests(read):
                    return
        finally:
            if getting is not None:
                getting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await getting
    finally:
        feed.close()


def _question(read: TaskRead) -> str | None:
    """What identifies the question a read asks (its run's live token), so a new question is a new state."""
    if read.state != TaskState.TASK_STATE_INPUT_REQUIRED or read.asking is None:
        return None
    on = read.asking.suspended_on
    return None if on is None else on.token
