"""Spans in one process, with the SDK's in-memory exporter: names, attributes, shape, content, tokens.

Every test sets a real provider (the ``spans`` fixture) after ``repertory`` was imported, as user
code does, and reads the finished spans back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from repertory import Agent, InMemorySessionStore, Runtime, Session, SqliteSessionStore, ToolContext, suspend, tool
from repertory.core.messages import ModelMessage, TextPart
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.core.state import Usage
from repertory.errors import ModelError, ToolError
from repertory.testing import ScriptedModel
from repertory.tracing import capture_content, format_traceparent, parse_traceparent
from tests.tracing.conftest import Spans, reset_trace_globals

USAGE = {"input_tokens": 7, "output_tokens": 3}


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def every_text(spans: list[ReadableSpan]) -> str:
    """Every name, attribute, event, link and status of ``spans``, as one string to search."""
    out: list[str] = []
    for s in spans:
        out.append(s.name)
        out.append(json.dumps(attrs(s), default=str))
        out.append(str(s.status.description))
        out.extend(e.name + json.dumps(dict(e.attributes or {}), default=str) for e in s.events)
        out.extend(json.dumps(dict(lk.attributes or {}), default=str) for lk in s.links)
    return "\n".join(out)


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money (needs approval)."""
    return f"sent {amount}"


@tool
async def ask(question: str) -> str:
    """Ask the human."""
    suspend(reason="need input", payload={"question": question})


class PricedModel:
    """A model that prices its replies, so cost shows on the spans."""

    model = "priced-1"

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        yield ModelResponse(
            message=ModelMessage(role="assistant", parts=[TextPart(text="hi")], model="priced-1-2025"),
            usage=Usage(input_tokens=11, output_tokens=2, cache_read_tokens=5),
            cost=0.25,
        )


# -- shape and attributes -------------------------------------------------------------------------------


async def test_a_drive_is_invoke_agent_with_chat_and_execute_tool_children(spans: Spans) -> None:
    model = ScriptedModel([{"tool": "lookup", "args": {"q": "x"}, "usage": USAGE}, {"text": "done", "usage": USAGE}])
    agent = Agent(name="clerk", model=model, tools=[lookup])
    store = InMemorySessionStore()
    with spans.tracer.start_as_current_span("request") as request:
        result = await Session(store=store, agent=agent).start("look x up")
    assert result.status == "done" and result.state.history_revision_id is not None
    history = await store.load_history(result.state.history_revision_id)
    assert history is not None

    drive = spans.one("invoke_agent")
    assert drive.name == "invoke_agent clerk"
    a = attrs(drive)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "clerk"
    assert a["gen_ai.conversation.id"] == result.state.thread_id
    assert a["repertory.run_id"] == result.run_id
    assert a["repertory.session_id"] == result.state.thread_id
    assert a["repertory.drive.cause"] == "start"
    assert a["repertory.run.status"] == "done" and a["repertory.run.step_index"] == 2
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (14, 6)
    assert parent_of(drive) == request.get_span_context().span_id

    chats = spans.named("chat")
    assert [c.name for c in chats] == ["chat scripted", "chat scripted"]
    for chat in chats:
        c = attrs(chat)
        assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.request.model"] == "scripted"
        assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (7, 3)
        assert parent_of(chat) == drive.context.span_id
    assert [attrs(c)["gen_ai.response.finish_reasons"] for c in chats] == [("tool_call",), ("stop",)]

    call = spans.one("execute_tool")
    assert call.name == "execute_tool lookup" and parent_of(call) == drive.context.span_id
    [part] = [p for m in history.messages for p in m.tool_calls]
    assert attrs(call)["gen_ai.tool.name"] == "lookup"
    assert attrs(call)["gen_ai.tool.call.id"] == part.tool_call_id
    assert attrs(call)["gen_ai.operation.name"] == "execute_tool"
    assert call.status.status_code == StatusCode.UNSET

    assert {s.context.trace_id for s in spans.all} == {request.get_span_context().trace_id}
    # The run row keeps the anchor every later drive continues: here, the drive's own span.
    anchor = parse_traceparent(result.state.traceparent)
    assert anchor is not None and anchor.span_id == drive.context.span_id


async def test_usage_cost_and_the_serving_model_are_on_the_chat_span(spans: Spans) -> None:
    result = await Session(store=InMemorySessionStore(), agent=Agent(name="p", model=PricedModel())).start("hi")
    chat = spans.one("chat")
    c = attrs(chat)
    assert chat.name == "chat priced-1"
    assert c["gen_ai.request.model"] == "priced-1" and c["gen_ai.response.model"] == "priced-1-2025"
    assert c["gen_ai.usage.cache_read.input_tokens"] == 5
    assert c["repertory.cost"] == 0.25
    assert chat.kind == trace.SpanKind.CLIENT
    assert attrs(spans.one("invoke_agent"))["repertory.cost"] == 0.25
    assert result.state.cost == 0.25


async def test_the_tracer_is_looked_up_when_a_drive_starts_not_at_import(spans: Spans, tmp_path: Path) -> None:
    reset_trace_globals()  # no provider: as before the user's program set one
    store = await SqliteSessionStore.open(tmp_path / "runs.db")
    try:
        agent = Agent(name="a", model=ScriptedModel([{"text": "one"}, {"text": "two"}] * 2))
        untraced = await Session(store=store, agent=agent).start("first")
        assert untraced.state.traceparent is None
        trace.set_tracer_provider(spans.provider)  # the program sets its provider later
        traced = await Session(store=store, agent=agent).start("second")
    finally:
        await store.close()
    assert [s.name for s in spans.all] == ["chat scripted", "invoke_agent a"]
    assert traced.state.traceparent is not None
    with contextlib.closing(sqlite3.connect(tmp_path / "runs.db")) as conn:
        rows = dict(conn.execute("SELECT run_id, state FROM runs").fetchall())
    assert "traceparent" not in rows[untraced.run_id]  # an untraced run is stored as it always was
    assert json.loads(rows[traced.run_id])["traceparent"] == traced.state.traceparent


# -- one trace per run ----------------------------------------------------------------------------------


async def test_an_approval_continues_the_run_trace_and_links_the_approver(spans: Spans) -> None:
    agent = Agent(
        name="a", model=ScriptedModel([{"tool": "wire", "args": {"amount": 5}}, {"text": "ok"}]), tools=[wire]
    )
    store = InMemorySessionStore()
    with spans.tracer.start_as_current_span("asked"):
        r = await Session(store=store, agent=agent).start("pay")
    assert r.status == "suspended" and r.state.suspended_on is not None
    token = r.state.suspended_on.token
    with spans.tracer.start_as_current_span("approver") as approver:  # another trace, another "process"
        done = await Session.approve_suspended(store=store, agent=agent, run_id=r.run_id, resume_token=token)
    assert done.status == "done"

    first, second = spans.named("invoke_agent")
    assert attrs(first)["repertory.run.status"] == "suspended"
    [(event_name, event)] = [(e.name, dict(e.attributes or {})) for e in first.events]
    assert event_name == "approval.requested" and event["gen_ai.tool.name"] == "wire"
    assert attrs(second)["repertory.drive.cause"] == "approve"
    assert second.context.trace_id == first.context.trace_id != approver.get_span_context().trace_id
    assert parent_of(second) == first.context.span_id
    assert [lk.context.span_id for lk in second.links] == [approver.get_span_context().span_id]
    wait = spans.one("approval")
    assert wait.name == "approval wire" and parent_of(wait) == first.context.span_id
    assert attrs(wait)["repertory.approval.decision"] == "approved"
    assert wait.start_time is not None and wait.end_time is not None and wait.start_time <= wait.end_time
    assert spans.one("execute_tool").context.trace_id == first.context.trace_id
    assert token not in every_text(spans.all)


async def test_reject_and_resume_continue_the_trace_and_no_token_is_recorded(spans: Spans) -> None:
    steps: list[dict[str, Any]] = [
        {"tool": "wire", "args": {"amount": 1}},
        {"tool": "ask", "args": {"question": "why?"}},
        {"text": "fine"},
    ]
    agent = Agent(name="a", model=ScriptedModel(steps), tools=[wire, ask])
    sess = Session(store=InMemorySessionStore(), agent=agent)
    tokens = []
    r = await sess.start("pay")
    assert r.state.suspended_on is not None
    tokens.append(r.state.suspended_on.token)
    r = await sess.reject_tool(tokens[-1], reason="no")
    assert r.status == "suspended" and r.state.suspended_on is not None
    tokens.append(r.state.suspended_on.token)
    r = await sess.resume(tokens[-1], "because")
    assert r.status == "done"

    drives = spans.named("invoke_agent")
    assert [attrs(d)["repertory.drive.cause"] for d in drives] == ["start", "reject", "resume"]
    assert len({d.context.trace_id for d in spans.all}) == 1
    assert [parent_of(d) for d in drives[1:]] == [drives[0].context.span_id] * 2
    assert attrs(spans.one("approval"))["repertory.approval.decision"] == "rejected"
    assert [e.name for e in drives[1].events] == ["run.suspended"]
    text = every_text(spans.all)
    assert all(t not in text for t in tokens)


# -- content --------------------------------------------------------------------------------------------


async def test_content_is_recorded_only_after_capture_content(spans: Spans) -> None:
    @tool
    async def echo(ctx: ToolContext, words: str) -> str:
        if words == "boom secret":
            raise ValueError("secret failure")
        return f"secret result for {words}"

    script: list[dict[str, Any]] = [
        {"tool": "echo", "args": {"words": "secret arg"}},
        {"tool": "echo", "args": {"words": "boom secret"}},
        {"text": "secret reply"},
    ]
    agent = Agent(name="a", model=ScriptedModel(script), tools=[echo], instructions="secret instructions")
    await Session(store=InMemorySessionStore(), agent=agent).start("secret prompt")
    assert "secret" not in every_text(spans.all)
    failed = spans.named("execute_tool")[1]
    assert failed.status.status_code == StatusCode.ERROR and attrs(failed)["error.type"] == "ValueError"

    spans.exporter.clear()
    capture_content(True)
    await Session(store=InMemorySessionStore(), agent=agent).start("secret prompt")
    first_chat = spans.named("chat")[0]
    sent = json.loads(attrs(first_chat)["gen_ai.input.messages"])
    assert sent[0] == {"role": "system", "parts": [{"type": "text", "content": "secret instructions"}]}
    assert sent[1] == {"role": "user", "parts": [{"type": "text", "content": "secret prompt"}]}
    [reply] = json.loads(attrs(spans.named("chat")[-1])["gen_ai.output.messages"])
    assert reply["parts"] == [{"type": "text", "content": "secret reply"}] and reply["finish_reason"] == "stop"
    ok, bad = spans.named("execute_tool")
    assert json.loads(attrs(ok)["gen_ai.tool.call.arguments"]) == {"words": "secret arg"}
    assert json.loads(attrs(ok)["gen_ai.tool.call.result"]) == "secret result for secret arg"
    assert "secret failure" in json.loads(attrs(bad)["gen_ai.tool.call.result"])


# -- errors ---------------------------------------------------------------------------------------------


async def test_a_failing_model_fails_chat_and_invoke_agent_with_its_type(spans: Spans) -> None:
    def down(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        raise ModelError("the secret model is down")

    with pytest.raises(ModelError):
        await Session(store=InMemorySessionStore(), agent=Agent(name="a", model=ScriptedModel(down))).start("hi")
    for span in (spans.one("chat"), spans.one("invoke_agent")):
        assert span.status.status_code == StatusCode.ERROR
        assert attrs(span)["error.type"] == "ModelError"
        [event] = span.events
        assert event.name == "exception" and dict(event.attributes or {}) == {
            "exception.type": "repertory.errors.ModelError"
        }
    assert attrs(spans.one("invoke_agent"))["repertory.run.status"] == "error"
    assert "secret" not in every_text(spans.all)  # the message is content: not without capture_content

    spans.exporter.clear()
    capture_content(True)
    with pytest.raises(ModelError):
        await Session(store=InMemorySessionStore(), agent=Agent(name="a", model=ScriptedModel(down))).start("hi")
    [event] = spans.one("chat").events
    assert "the secret model is down" in str(dict(event.attributes or {})["exception.message"])


async def test_a_tool_error_fails_only_its_span(spans: Spans) -> None:
    @tool
    def refuse(n: int) -> str:
        raise ToolError("not today")

    model = ScriptedModel([{"tool": "refuse", "args": {"n": 1}}, {"text": "ok"}])
    r = await Session(store=InMemorySessionStore(), agent=Agent(name="a", model=model, tools=[refuse])).start("go")
    assert r.status == "done"
    call = spans.one("execute_tool")
    assert call.status.status_code == StatusCode.ERROR and attrs(call)["error.type"] == "ToolError"
    assert spans.one("invoke_agent").status.status_code == StatusCode.UNSET


# -- the session tree -----------------------------------------------------------------------------------


async def test_turns_parent_their_runs_and_a_decision_continues_the_turn(spans: Spans, tmp_path: Path) -> None:
    agent = Agent(
        name="a", model=ScriptedModel([{"tool": "wire", "args": {"amount": 5}}, {"text": "ok"}]), tools=[wire]
    )
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'rt.db'}", agents={"a": agent}) as rt:
        h = await rt.create_session(agent="a")
        with spans.tracer.start_as_current_span("sender") as sender:
            turn = await h.send("pay")
        assert (await turn.result()).status == "suspended"
        [pending] = await h.pending_approvals()
        with spans.tracer.start_as_current_span("approver") as approver:
            assert (await h.approve(pending.token)).status == "done"
        run = await rt.store.load_run((await rt.store.load_turn(turn.submission_id)).run_id)  # type: ignore[union-attr]

    t = spans.one("turn")
    assert t.name == "turn a" and parent_of(t) == sender.get_span_context().span_id
    a = attrs(t)
    assert a["repertory.session_id"] == h.id and a["repertory.submission_id"] == turn.submission_id
    assert a["repertory.turn.status"] == "suspended" and a["repertory.lineage"] == "root"
    first, second = spans.named("invoke_agent")
    assert parent_of(first) == t.context.span_id
    # A decision is a drive of the same run: under the turn, in its trace, linked to the approver.
    assert parent_of(second) == t.context.span_id
    assert second.context.trace_id == sender.get_span_context().trace_id
    assert [lk.context.span_id for lk in second.links] == [approver.get_span_context().span_id]
    assert parent_of(spans.one("approval")) == t.context.span_id
    assert run is not None and run.traceparent == format_traceparent(t.context)
    assert pending.token not in every_text(spans.all)


async def test_a_spawned_session_turn_is_its_own_trace_linked_to_the_parent_span(spans: Spans, tmp_path: Path) -> None:
    runtime: list[Runtime] = []

    @tool
    async def delegate(ctx: ToolContext, task: str) -> str:
        parent = await runtime[0].session(ctx.thread_id)
        child = await parent.spawn(agent="worker")
        return (await child.run(task)).text or ""

    script: list[dict[str, Any]] = [{"tool": "delegate", "args": {"task": "t"}}, {"text": "ok"}]
    boss = Agent(name="boss", model=ScriptedModel(script), tools=[delegate])
    worker = Agent(name="worker", model=ScriptedModel([{"text": "did it"}]))
    async with await Runtime.start(
        store=f"sqlite:///{tmp_path / 'rt.db'}", agents={"boss": boss, "worker": worker}
    ) as rt:
        runtime.append(rt)
        root = await rt.create_session(agent="boss")
        assert (await root.run("go")).status == "done"

    parent_turn, child_turn = sorted(spans.named("turn"), key=lambda s: s.start_time or 0)
    call = spans.one("execute_tool")
    assert child_turn.name == "turn worker" and child_turn.parent is None
    assert child_turn.context.trace_id != parent_turn.context.trace_id == call.context.trace_id
    assert [(lk.context.span_id, dict(lk.attributes or {})) for lk in child_turn.links] == [
        (call.context.span_id, {"repertory.link": "parent_session"})
    ]
    assert attrs(child_turn)["repertory.parent_session_id"] == root.id
    assert attrs(child_turn)["repertory.lineage"] == "spawned"
    [child_drive] = [d for d in spans.named("invoke_agent") if attrs(d)["gen_ai.agent.name"] == "worker"]
    assert parent_of(child_drive) == child_turn.context.span_id


async def test_a_turn_recovered_by_a_new_runtime_continues_its_trace(spans: Spans, tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool
    async def slow(ctx: ToolContext, n: int) -> str:
        started.set()
        await asyncio.Event().wait()  # the runtime closes while this waits
        return "never"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        last = messages[-1]
        return {"tool": "slow", "args": {"n": 1}} if last.role == "user" else {"text": f"after: {last.text}"}

    agents = {"a": Agent(name="a", model=ScriptedModel(step), tools=[slow])}
    url = f"sqlite:///{tmp_path / 'rt.db'}"
    rt1 = await Runtime.start(store=url, agents=agents)
    h = await rt1.create_session(agent="a")
    turn = await h.send("go")
    await asyncio.wait_for(started.wait(), 30)
    await rt1.close()  # like a crash: the run stays running, the turn open
    async with await Runtime.start(store=url, agents=agents) as rt2:
        result = await (await rt2.session(h.id)).get_turn(turn.submission_id).result()
    assert result.status == "done"

    first_turn, second_turn = sorted(spans.named("turn"), key=lambda s: s.start_time or 0)
    first_drive, second_drive = sorted(spans.named("invoke_agent"), key=lambda s: s.start_time or 0)
    assert attrs(first_turn)["repertory.turn.status"] == "running"  # closed under it
    assert len({s.context.trace_id for s in spans.all}) == 1
    assert parent_of(second_turn) == first_turn.context.span_id  # the run's anchor
    assert parent_of(second_drive) == second_turn.context.span_id
    assert attrs(second_drive)["repertory.drive.cause"] == "recover"
    assert first_drive.status.status_code == StatusCode.UNSET  # a detach is no error


# -- HTTP -----------------------------------------------------------------------------------------------


async def test_the_server_continues_an_incoming_traceparent(spans: Spans, tmp_path: Path) -> None:
    import httpx

    from repertory.http import create_app

    agent = Agent(
        name="a", model=ScriptedModel([{"tool": "wire", "args": {"amount": 5}}, {"text": "ok"}]), tools=[wire]
    )
    caller_a = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    caller_b = "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'rt.db'}", agents={"a": agent}) as rt:
        app = create_app(rt)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            tid = (await client.post("/threads", json={})).json()["thread_id"]
            body = {"assistant_id": "a", "input": {"messages": [{"role": "human", "content": "pay"}]}}
            got = await client.post(f"/threads/{tid}/runs/wait", json=body, headers={"traceparent": caller_a})
            assert got.status_code == 200, got.text
            resume = {"assistant_id": "a", "command": {"resume": {"decisions": [{"type": "approve"}]}}}
            got = await client.post(f"/threads/{tid}/runs/wait", json=resume, headers={"traceparent": caller_b})
            assert got.status_code == 200, got.text

    by_id = {s.context.span_id: s for s in spans.all}

    def ancestors(span: ReadableSpan) -> list[ReadableSpan]:
        chain = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            chain.append(span)
        return chain

    # One server span per request (FastAPI's own where it traces requests, else TraceRequests).
    servers = [s for s in spans.all if s.kind == trace.SpanKind.SERVER and s.name.endswith("/runs/wait")]
    assert [s.name for s in servers] == ["POST /threads/{thread_id}/runs/wait"] * 2
    first, second = sorted(servers, key=lambda s: s.start_time or 0)
    assert format(first.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert parent_of(first) == 0xB7AD6B7169203331
    assert attrs(first)["http.route"] == "/threads/{thread_id}/runs/wait"
    assert attrs(first)["http.response.status_code"] == 200
    t = spans.one("turn")
    assert first in ancestors(t)
    drives = spans.named("invoke_agent")
    assert len(drives) == 2 and {d.context.trace_id for d in drives} == {first.context.trace_id}
    # The approval came in on another trace: the run's trace goes on, linked to that request.
    decision = max(drives, key=lambda d: d.start_time or 0)
    assert attrs(decision)["repertory.drive.cause"] == "approve" and parent_of(decision) == t.context.span_id
    [link] = decision.links
    linked = by_id[link.context.span_id]
    assert linked is second or second in ancestors(linked)


async def test_trace_requests_makes_one_server_span_per_request_with_the_caller_as_parent(spans: Spans) -> None:
    from repertory.tracing import TraceRequests

    seen: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(trace.get_current_span().get_span_context().span_id)
        scope["route"] = type("Route", (), {"path": "/things/{thing_id}"})()
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    headers = [
        (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        (b"x-api-key", b"s3cret-key-0123"),
    ]
    scope = {"type": "http", "method": "GET", "path": "/things/7", "scheme": "http", "headers": headers}
    await TraceRequests(app)(scope, receive, send)
    server = spans.one("GET")
    assert server.name == "GET /things/{thing_id}" and server.kind == trace.SpanKind.SERVER
    assert parent_of(server) == 0xB7AD6B7169203331 and seen == [server.context.span_id]
    a = attrs(server)
    assert a["http.route"] == "/things/{thing_id}" and a["url.path"] == "/things/7"
    assert a["http.response.status_code"] == 503 and server.status.status_code == StatusCode.ERROR
    assert "s3cret" not in json.dumps(a) and [m["status"] for m in sent if "status" in m] == [503]
