"""AG-UI (``ag-ui-protocol`` 1.x) at ``POST /ag-ui/{assistant_id}``, and the stream again at ``GET``.

A ``RunAgentInput`` is one turn. ``threadId`` is the session id: created on first use for the
key's owner (an id another owner's thread has is refused as on every route that creates threads),
bound to the assistant of the URL. The input's new part (``repertory.http.agui_messages``) is
either a user message, sent as a turn, or answers: ``resume`` entries deciding the interrupts the
previous run finished with, and tool messages answering calls of tools the client runs
(``repertory.http.agui_resume``). The answer is an SSE stream of AG-UI events
(``repertory.http.agui_events``), from ``RUN_STARTED`` to ``RUN_FINISHED`` or ``RUN_ERROR``.
``RUN_STARTED.runId`` is the turn's run id (the id the LangGraph routes know it by; a resume
continues the same run, so it answers with the same id); the client's ``runId`` is echoed in the
event's ``metadata.clientRunId``.

Tools the client lists in ``RunAgentInput.tools`` are tools it runs (the turn's client tools,
``SessionHandle.send(client_tools=...)``): the model sees them beside the agent's own (a name the
agent already uses is a 422); a call suspends the run durably, the stream shows the call and
finishes with ``pendingToolCallIds``, and the next input's tool message answers it: its content
is the call's result. The run keeps the tools, so a reconnection and a restarted server know them.

Every SSE message carries the ``seq`` of the session event it came from as its id (on the last
message of those one event yields; live-only deltas carry none). ``GET
/ag-ui/{assistant_id}/threads/{thread_id}/stream`` streams the thread's latest turn (or the one
``?run_id=`` names) from its start, or, with ``Last-Event-ID`` (or ``?after_seq=``), only what
follows that event, preceded by ``RUN_STARTED`` and the openers of what was open there (a text
message the client has part of is reopened and continued, so nothing is repeated). It is what
``@ag-ui/client``'s ``connectAgent`` calls where an agent implements ``connect``; ``HttpAgent``
itself never reconnects. A thread with no turn yet answers 204.

Keys, tenancy, the JSON guard and the per-key stream slots apply as on every route.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Any

from ag_ui.core import BaseEvent, Message, RunAgentInput, RunErrorEvent, RunStartedEvent
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Header, Query, Response

from repertory.core.log_tail import turn_start
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import RunCancelled
from repertory.http.agui_events import AguiTranslator, Ending
from repertory.http.agui_messages import agui_messages, new_input
from repertory.http.agui_resume import Answers, decisions_for
from repertory.http.auth import Caller, StreamSlots
from repertory.http.errors import HttpError
from repertory.http.events import MAX_SEQ
from repertory.http.gateway import Gateway
from repertory.http.hitl import apply_decisions
from repertory.http.runbook import HttpRun, RunBook
from repertory.http.sse import HEARTBEAT_S, EventFeed, SlotStream
from repertory.http.views import nested_wait, thread_status

__all__ = ["agui_routes", "client_specs"]

_ENCODER = EventEncoder()
_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "AG-UI events over SSE; each id is the seq of the session event it came from.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
}


def _encode(events: list[BaseEvent], seq: int | None) -> bytes:
    """One session event's AG-UI events as SSE messages, the last one carrying the event's seq as its id."""
    out = []
    for i, event in enumerate(events):
        head = f"id: {seq}\n" if seq is not None and i == len(events) - 1 else ""
        out.append(head + _ENCODER.encode(event))
    return "".join(out).encode()


def _after(after_seq: int | None, last_event_id: str | None) -> int | None:
    if last_event_id:
        value = last_event_id.strip()
        if not value.isdigit() or len(value) > 18:
            raise HttpError(f"Last-Event-ID {last_event_id!r} is not an event seq of this stream", status=422)
        return int(value)
    return after_seq


def client_specs(body: RunAgentInput) -> list[ToolSpec]:
    """The tools an input says its client runs, as the model will see them; 422 naming the one that cannot be."""
    specs: list[ToolSpec] = []
    for i, tool in enumerate(body.tools or []):
        if not isinstance(tool.parameters, dict):
            raise HttpError(
                f"tools[{i}].parameters: a JSON schema object, not {type(tool.parameters).__name__}", status=422
            )
        specs.append(ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters))
    names = [t.name for t in specs]
    if len(set(names)) != len(names):
        raise HttpError("tools: two tools share a name", status=422)
    return specs


def agui_routes(gw: Gateway, runs: RunBook, slots: StreamSlots, auth: Callable[..., Awaitable[Caller]]) -> APIRouter:
    """The AG-UI routes, bound to one gateway."""
    router = APIRouter(tags=["ag-ui"])
    CallerDep = Annotated[Caller, Depends(auth)]

    async def thread_for(caller: Caller, thread_id: str, assistant_id: str) -> SessionRecord:
        try:
            record = await gw.record(thread_id, caller)
        except HttpError as exc:
            if exc.status != 404:
                raise
            record = await gw.create_thread(
                caller, thread_id=thread_id, metadata=None, if_exists="do_nothing", agent=assistant_id
            )
        record = await gw.bind(record, assistant_id, caller)
        if record.agent != assistant_id:
            raise HttpError(
                f"threadId {thread_id!r} runs assistant {record.agent!r}, not {assistant_id!r} "
                "(a repertory session has one agent)",
                status=409,
            )
        return record

    async def waiting_turn(record: SessionRecord, answers: Answers) -> tuple[TurnRecord, Any, Any]:
        """The turn the thread's interrupts hold, the suspended run to decide and that run's agent; 409 if none."""
        tid = record.session_id
        ids = ", ".join(repr(i) for i in [*answers.resume, *answers.tools])
        none_waiting = HttpError(
            f"resume: {ids} is not pending on this thread: it was already answered, or never asked", status=409
        )
        status, latest = await thread_status(gw.store, record)
        nested = await nested_wait(gw.store, tid) if status == "busy" else None
        agent = gw.agents.get(record.agent)
        if nested is not None:
            latest, agent = nested[0], gw.agents.get(nested[1].agent)
        if latest is None or latest.status != "suspended":
            raise none_waiting
        turns = await gw.store.list_turns(tid, ["running"] if nested is not None else ["suspended"])
        turn = next((t for t in turns if nested is not None or t.run_id == latest.run_id), None)
        if turn is None:
            raise none_waiting
        return turn, latest, agent

    async def stream(
        caller: Caller,
        record: SessionRecord,
        run: HttpRun,
        feed: EventFeed,
        client_tools: frozenset[str],
        *,
        client_run_id: str | None,
        resume_from: int | None,
        client_messages: Sequence[Message] = (),
    ) -> AsyncIterator[bytes]:
        stored = await gw.store.load_run(run.run_id)
        translator = AguiTranslator(
            gw.store,
            gw.agents,
            gw.agents.get(record.agent),
            thread_id=record.session_id,
            run_id=run.run_id,
            client_tools=client_tools,
            client_messages=client_messages,
            # A resume picks the run up where it stopped; a turn streamed from its start counts from 0.
            steps_done=stored.step_index if stored is not None and run.driver is not None else 0,
        )
        meta = {"clientRunId": client_run_id} if client_run_id else None
        started: list[BaseEvent] = [RunStartedEvent(thread_id=record.session_id, run_id=run.run_id, metadata=meta)]
        if resume_from is None and not client_messages and run.driver is None:
            started.append(await translator.opening())
        yield _encode(started, None)
        reopened = resume_from is None
        resting: asyncio.Task[Any] = asyncio.ensure_future(runs.wait_rest(run))
        getting: asyncio.Task[SessionEvent] | None = None
        last: int | None = None
        try:
            while last is None or feed.last_seq < last:
                if getting is None:
                    getting = asyncio.ensure_future(feed.get())
                waiting: set[asyncio.Future[Any]] = {getting} if last is not None else {getting, resting}
                done, _ = await asyncio.wait(waiting, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    yield b": heartbeat\n\n"
                    continue
                if last is None and resting.done():
                    last = await gw.store.last_event_seq(record.session_id)
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
                opening = [] if reopened or _seen(event, resume_from) else translator.reopen()
                events = await translator.translate(event)
                if _seen(event, resume_from):
                    continue  # the client had these before it reconnected
                reopened = True
                if opening or events:
                    yield _encode(opening + events, event.seq)
            opening = [] if reopened else translator.reopen()
            yield _encode(opening + await translator.ending(await ending_of(run)), None)
        except HttpError as exc:  # the thread went away under the stream
            yield _encode([RunErrorEvent(message=str(exc), code="HttpError")], None)
        finally:
            for task in (getting, resting):
                if task is not None and not task.done():
                    task.cancel()
            feed.close()

    async def ending_of(run: HttpRun) -> Ending:
        error = run.driver_error()
        if error is not None:
            return Ending("error", type(error).__name__, str(error))
        turn = await gw.store.load_turn(run.submission_id)
        if turn is None:
            raise HttpError(f"run {run.run_id!r} has no turn", status=404)
        return Ending(turn.status)

    def respond(caller: Caller, body: AsyncIterator[bytes], record: SessionRecord, run: HttpRun) -> Response:
        path = f"/ag-ui/{record.agent}/threads/{record.session_id}/stream?run_id={run.run_id}"
        return SlotStream(
            body, lambda: caller_release(caller), {"Content-Location": path}, media_type=_ENCODER.get_content_type()
        )

    def caller_release(caller: Caller) -> None:
        slots.give_back(caller.who)

    @router.post("/ag-ui/{assistant_id}", responses=_SSE_DOC, summary="Run a turn (AG-UI RunAgentInput), streamed")
    async def run_agent(assistant_id: str, body: RunAgentInput, caller: CallerDep) -> Response:
        gw.agent(assistant_id)
        try:
            found: SessionRecord | None = await gw.record(body.thread_id, caller)
        except HttpError as exc:
            if exc.status != 404:
                raise
            found = None
        head = await gw.head(found.session_id) if found is not None else None
        known = {m.id for m in agui_messages(await gw.store.load_history(head) if head else None)}
        # Read before the thread is made: a refused input leaves no thread behind.
        new = new_input(list(body.messages), known)
        answers = Answers(
            resume={e.interrupt_id: (i, e) for i, e in enumerate(body.resume or [])}, tools=new.tool_answers
        )
        if answers and new.text is not None:
            raise HttpError(
                "messages: an input either answers the thread's interrupts (resume, tool messages) "
                "or adds a user message, not both",
                status=422,
            )
        if not answers and new.text is None:
            raise HttpError("messages: the input adds no user message, tool result or resume entry", status=422)
        record = await thread_for(caller, body.thread_id, assistant_id)
        tid = record.session_id
        specs = client_specs(body)
        client_tools = frozenset(t.name for t in specs)
        handle = await gw.runtime.session(tid, caller.principal)
        slots.take(caller.who)
        feed: EventFeed | None = None
        try:
            if answers:
                turn, waiting, agent = await waiting_turn(record, answers)
                client_tools = frozenset(t.name for t in waiting.client_tools)
                decisions, cancels = decisions_for(
                    waiting.pending, answers, agent, caller.principal.model_dump(mode="json")
                )
                feed = await EventFeed(handle, gw.store, await gw.store.last_event_seq(tid)).open()
                run = HttpRun(turn.run_id, tid, turn.submission_id, record.agent, feed.last_seq)
                run.driver = gw.spawn(decide(handle, waiting.run_id, decisions, turn.submission_id, cancels))
            else:
                assert new.text is not None
                feed = await EventFeed(handle, gw.store, await gw.store.last_event_seq(tid)).open()
                try:
                    sent = await handle.send(new.text, client_tools=specs)
                except ValueError as exc:  # a client tool named like one of the agent's
                    raise HttpError(f"tools: {exc}", status=422) from None
                queued = await gw.store.load_turn(sent.submission_id)
                assert queued is not None
                run = HttpRun(queued.run_id, tid, queued.submission_id, record.agent, feed.last_seq)
        except BaseException:
            if feed is not None:
                feed.close()
            slots.give_back(caller.who)
            raise
        body_bytes = stream(
            caller,
            record,
            run,
            feed,
            client_tools,
            client_run_id=body.run_id,
            resume_from=None,
            client_messages=list(body.messages),
        )
        return respond(caller, body_bytes, record, run)

    async def decide(handle: Any, run_id: str, decisions: list[Any], submission_id: str, cancels: bool) -> None:
        try:
            if decisions:
                await apply_decisions(handle, gw.store, run_id, decisions)
        except RunCancelled:
            return
        if cancels:
            await handle.get_turn(submission_id).cancel()

    @router.get(
        "/ag-ui/{assistant_id}/threads/{thread_id}/stream",
        responses=_SSE_DOC,
        summary="A turn's AG-UI stream again: from its start, or after Last-Event-ID",
    )
    async def join_stream(
        assistant_id: str,
        thread_id: str,
        caller: CallerDep,
        run_id: Annotated[str | None, Query(max_length=128)] = None,
        after_seq: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> Response:
        resume_from = _after(after_seq, last_event_id)
        gw.agent(assistant_id)
        record = await gw.record(thread_id, caller)
        if record.agent != assistant_id:
            raise HttpError(f"no thread {thread_id!r} of assistant {assistant_id!r}", status=404)
        turns = await gw.store.list_turns(record.session_id)
        if run_id is not None:
            turns = [t for t in turns if t.run_id == run_id]
            if not turns:
                raise HttpError(f"thread {thread_id!r} has no run {run_id!r}", status=404)
        if not turns:
            return Response(status_code=204)
        turn = turns[-1]
        start = await first_seq(record.session_id, turn.submission_id)
        handle = await gw.runtime.session(record.session_id, caller.principal)
        slots.take(caller.who)
        try:
            feed = await EventFeed(handle, gw.store, start).open()
        except BaseException:
            slots.give_back(caller.who)
            raise
        run = HttpRun(turn.run_id, record.session_id, turn.submission_id, record.agent, start)
        stored = await gw.store.load_run(turn.run_id)
        client_tools = frozenset(t.name for t in stored.client_tools) if stored is not None else frozenset()
        if stored is None:  # the turn's run is not written yet: its tools are still on the turn
            client_tools = frozenset(t.name for t in turn.client_tools)
        body_bytes = stream(caller, record, run, feed, client_tools, client_run_id=None, resume_from=resume_from)
        return respond(caller, body_bytes, record, run)

    async def first_seq(session_id: str, submission_id: str) -> int:
        """The seq just before the turn's ``turn.started`` (the log's end when it has not started yet)."""
        started = await turn_start(gw.store, session_id, submission_id)
        return await gw.store.last_event_seq(session_id) if started is None else started

    return router


def _seen(event: SessionEvent, resume_from: int | None) -> bool:
    """Whether a client resuming after ``resume_from`` had this event (live deltas are always new)."""
    return resume_from is not None and event.seq is not None and event.seq <= resume_from
