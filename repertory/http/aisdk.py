"""The Vercel AI SDK's UI message stream (v1): what ``useChat`` with ``DefaultChatTransport`` calls.

- ``POST /ai-sdk/{assistant_id}/chat``: the transport's body (``repertory.http.aisdk_messages``);
  ``id`` is the session id, made on first use for the key's owner. One turn per request: a user
  message starts one (queued behind a running one), an assistant message answers the run's
  approvals (or a ``suspend()``'s value) and continues that run. The answer is the turn's UI
  message stream (``repertory.http.aisdk_parts``) until the run rests, then ``data: [DONE]``.
- ``GET /ai-sdk/{assistant_id}/chat/{id}/stream``: ``useChat({resume: true})``'s reconnect. It
  replays the session's active turn from its ``turn.started`` out of the durable event log (the
  transport's default ``resumeStreamIsReplay``: ``useChat`` rebuilds the message from the first
  ``start``), then follows it live; 204 when no turn is running (also for a chat this key cannot
  see, or that does not exist yet: a new chat's page load asks too).
- ``POST /ai-sdk/{assistant_id}/chat/{id}/stop``: cancels the session's running turn (and a
  decision being applied) through the session tree. ``useChat``'s ``stop()`` only aborts the
  fetch, and a dropped connection never stops a turn (that is what lets a reload resume it), so
  a UI's stop button calls both. ``?tree=true`` is the kill switch: every queued, running and
  waiting turn of the session and of every descendant (the children its agent delegated to) is
  cancelled (``SessionHandle.cancel(tree=True)``), and the answer comes once none is left.
- ``GET /ai-sdk/{assistant_id}/chat/{id}/messages``: the stored conversation as ``useChat``'s
  initial ``messages`` (ids line up with the streams', so a resumed stream replaces its message).

Every route takes the API key like the rest of the server (``x-api-key`` or a bearer token: a
transport's ``headers``), sees only its owner's sessions, and every open stream holds one of the
key's stream slots. Answers to approvals go through the run's single-use tokens exactly as
LangGraph's ``command.resume`` does (``repertory.http.hitl``), so an approval is decided once: a
second answer is 409.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse

from repertory.core.log_tail import turn_start
from repertory.core.tree import OPEN_TURN_STATUSES, SessionEvent, SessionRecord
from repertory.http.aisdk_messages import ChatAnswers, ChatRequest, approval_decisions, ui_messages, user_text
from repertory.http.aisdk_parts import Chunk, UIStreamParts
from repertory.http.auth import Caller, StreamSlots
from repertory.http.docs import ERRORS
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.runbook import HttpRun, RunBook
from repertory.http.schemas import RunCreate
from repertory.http.sse import HEARTBEAT_S, EventFeed, SlotStream
from repertory.tree.cancel import subtree

__all__ = ["STREAM_HEADERS", "aisdk_routes"]

STREAM_HEADERS = {"Cache-Control": "no-cache", "x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}
"""The ``ai`` package's ``UI_MESSAGE_STREAM_HEADERS`` (but ``connection``, which the ASGI server owns)."""
_DONE = b"data: [DONE]\n\n"
_UI_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The AI SDK UI message stream (SSE, header x-vercel-ai-ui-message-stream: v1)",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    429: {"description": "Too many open streams for this key"},
    **ERRORS,
}


def _sse(chunk: Chunk) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n\n"


def aisdk_routes(gw: Gateway, runs: RunBook, slots: StreamSlots, auth: Callable[..., Awaitable[Caller]]) -> APIRouter:
    """The AI SDK routes, bound to one gateway and the server's run book and stream slots."""
    router = APIRouter(tags=["ai-sdk"])
    CallerDep = Annotated[Caller, Depends(auth)]
    store = gw.store

    async def follow(feed: EventFeed, parts: UIStreamParts, run: HttpRun) -> AsyncIterator[bytes]:
        """The run's chunks from the feed's position until it rests, then its ending and ``[DONE]``."""
        resting: asyncio.Task[Any] = asyncio.ensure_future(runs.wait_rest(run))
        getting: asyncio.Task[SessionEvent] | None = None
        last: int | None = None
        try:
            for chunk in parts.begin():
                yield _sse(chunk)
            while last is None or feed.last_seq < last:
                if getting is None:
                    getting = asyncio.ensure_future(feed.get())
                waiting: set[asyncio.Future[Any]] = {getting} if last is not None else {getting, resting}
                done, _ = await asyncio.wait(waiting, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    yield b": heartbeat\n\n"
                    continue
                if last is None and resting.done():
                    last = await store.last_event_seq(run.thread_id)
                    await feed.catch_up()  # everything up to ``last`` is stored: read it from there
                    if not getting.done():
                        getting.cancel()
                        getting = None
                        continue
                if not getting.done():
                    continue
                event, getting = getting.result(), None
                if event.submission_id != run.submission_id:
                    continue
                for chunk in await parts.convert(event):
                    yield _sse(chunk)
            failed = run.driver_error() or (None if resting.cancelled() else resting.exception())
            turn = await store.load_turn(run.submission_id)
            status = None if turn is None else turn.status
            error = None if failed is None else str(failed) or type(failed).__name__
            if error is None and turn is not None and turn.error is not None:
                error = f"{turn.error.type}: {turn.error.message}"
            for chunk in parts.end(status, error):
                yield _sse(chunk)
            yield _DONE
        finally:
            # Not awaited: this may run inside a cancellation, which awaiting here could swallow.
            for task in (getting, resting):
                if task is not None and not task.done():
                    task.cancel()
            feed.close()

    async def stream_run(caller: Caller, record: SessionRecord, body: RunCreate) -> Response:
        """Start (or continue) the turn and answer with its stream, from the event after the last stored one."""
        slots.take(caller.who)
        feed: EventFeed | None = None
        try:
            handle = await gw.runtime.session(record.session_id, caller.principal)
            feed = await EventFeed(handle, store, await store.last_event_seq(record.session_id)).open()
            run = await runs.start(caller, record, body, start_seq=feed.last_seq)
        except BaseException:
            if feed is not None:
                feed.close()
            slots.give_back(caller.who)
            raise
        parts = UIStreamParts(store, session_id=run.thread_id, run_id=run.run_id, live_deltas=True)
        return SlotStream(follow(feed, parts, run), lambda: slots.give_back(caller.who), STREAM_HEADERS)

    async def visible(chat_id: str, caller: Caller) -> SessionRecord | None:
        try:
            return await gw.record(chat_id, caller)
        except HttpError as exc:
            if exc.status == 404:
                return None
            raise

    @router.post(
        "/ai-sdk/{assistant_id}/chat",
        responses=_UI_STREAM,
        summary="useChat's request: a user message starts a turn, answered approvals continue it",
    )
    async def chat(assistant_id: str, body: ChatRequest, caller: CallerDep) -> Response:
        gw.agent(assistant_id)
        if body.trigger != "submit-message":
            raise HttpError(
                "trigger: 'regenerate-message' is not supported here; regenerate through the LangGraph routes "
                "(a run from a checkpoint)",
                status=422,
            )
        last = body.messages[-1]
        if last.role == "user":
            text = user_text(body)
            run_body = RunCreate(
                assistant_id=assistant_id,
                input={"messages": [{"role": "user", "content": text}]},
                if_not_exists="create",
            )
            record = await runs.thread_for(caller, body.id, run_body)
            snap = await gw.snapshot(record)
            if snap.status == "interrupted":
                raise HttpError(
                    f"chat {body.id!r} waits for an answer to its tool call's approval; answer it (or stop the chat) "
                    "before sending a message",
                    status=409,
                )
            return await stream_run(caller, record, run_body)
        if last.role != "assistant":
            raise HttpError(
                f"messages.{len(body.messages) - 1}.role: the last message is the user's new message, or the "
                "assistant message holding answers to its approvals",
                status=422,
            )
        answers = ChatAnswers.of(body)
        record = await gw.record(body.id, caller)
        snap = await gw.snapshot(record)
        run, _ = gw.interrupt_source(snap)
        on = None if run is None else run.suspended_on
        if snap.status != "interrupted" or run is None or on is None:
            if answers.approvals:
                raise HttpError("no approval of this chat waits for an answer (it was already answered)", status=409)
            raise HttpError(f"chat {body.id!r} waits for no answer: send a user message", status=409)
        if on.kind == "approval":
            resume: Any = {"decisions": approval_decisions(answers, run)}
        elif on.tool_call_id is not None and on.tool_call_id in answers.outputs:
            resume = answers.outputs[on.tool_call_id]
        else:
            raise HttpError(
                f"chat {body.id!r} waits for tool call {on.tool_call_id!r}'s output (addToolOutput) ", status=409
            )
        command = RunCreate.model_validate({"assistant_id": assistant_id, "command": {"resume": resume}})
        return await stream_run(caller, record, command)

    @router.get(
        "/ai-sdk/{assistant_id}/chat/{chat_id}/stream",
        responses={**_UI_STREAM, 204: {"description": "No turn of this chat is running"}},
        summary="Resume the chat's running turn (replayed from its start, then live); 204 when none runs",
    )
    async def resume_stream(assistant_id: str, chat_id: str, caller: CallerDep) -> Response:
        gw.agent(assistant_id)
        record = await visible(chat_id, caller)
        if record is None:
            return Response(status_code=204)
        sid = record.session_id
        turns = await store.list_turns(sid, list(OPEN_TURN_STATUSES))
        turns.sort(key=lambda t: (t.status != "running", t.seq, t.created_at))
        active = turns[0] if turns else None
        deciding = runs.driving(sid)
        if active is None and not deciding:
            return Response(status_code=204)
        run = await runs.locate(caller, sid, active.run_id) if active is not None else deciding[0]
        slots.take(caller.who)
        feed: EventFeed | None = None
        try:
            queued = active is not None and active.status == "queued"
            started = None if queued else await turn_start(store, sid, run.submission_id)
            after = await store.last_event_seq(sid) if queued else started or 0
            handle = await gw.runtime.session(sid, caller.principal)
            feed = await EventFeed(handle, store, after).open()
        except BaseException:
            if feed is not None:
                feed.close()
            slots.give_back(caller.who)
            raise
        parts = UIStreamParts(store, session_id=sid, run_id=run.run_id, live_deltas=False)
        return SlotStream(follow(feed, parts, run), lambda: slots.give_back(caller.who), STREAM_HEADERS)

    @router.post(
        "/ai-sdk/{assistant_id}/chat/{chat_id}/stop",
        responses=ERRORS,
        summary="Stop the chat's running turn (tree=true: every turn of its subtree); useChat's stop() only aborts",
    )
    async def stop(
        assistant_id: str, chat_id: str, caller: CallerDep, tree: Annotated[bool, Query()] = False
    ) -> JSONResponse:
        gw.agent(assistant_id)
        record = await gw.record(chat_id, caller)
        handle = await gw.runtime.session(record.session_id, caller.principal)
        stopped: list[str] = []
        if tree:
            # The runs running as the kill switch is pulled; every open turn of the subtree is cancelled,
            # queued and waiting ones too. Descendants share the chat's owner.
            for session_id in await subtree(store, record.session_id):
                stopped.extend(turn.run_id for turn in await store.list_turns(session_id, ["running"]))
            await handle.cancel(tree=True)
            return JSONResponse({"stopped": stopped})
        for turn in await store.list_turns(record.session_id, ["running"]):
            await handle.get_turn(turn.submission_id).cancel()
            stopped.append(turn.run_id)
        for deciding in runs.driving(record.session_id):
            await handle.get_turn(deciding.submission_id).cancel()
            if deciding.run_id not in stopped:
                stopped.append(deciding.run_id)
        return JSONResponse({"stopped": stopped})

    @router.get(
        "/ai-sdk/{assistant_id}/chat/{chat_id}/messages",
        responses=ERRORS,
        summary="The chat's stored conversation as useChat's initial messages (UIMessage[])",
    )
    async def messages(assistant_id: str, chat_id: str, caller: CallerDep) -> JSONResponse:
        gw.agent(assistant_id)
        record = await gw.record(chat_id, caller)
        head = await gw.head(record.session_id)
        history = await store.load_history(head) if head is not None else None
        return JSONResponse(await ui_messages(store, record.session_id, history))

    return router
