"""Tracing on the Ray backend: session hosts export their spans over OTLP/HTTP; a run's trace survives a host kill.

Hosts are other processes, so spans reach the test the way they reach a collector in production:
each host configures an OTLP/HTTP exporter from the ``OTEL_EXPORTER_OTLP_*`` variables its
``runtime_env`` hands it (``repertory.tracing.configure_from_env`` in ``SessionHost``), and the
test runs a loopback collector (``tests.tracing.collector``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import ray

from repertory import Agent, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel
from repertory.tracing import parse_traceparent, under_traceparent
from tests.tracing.collector import Collector, GotSpan


def _step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    last = messages[-1]
    if last.role == "user":
        return {"tool": "charge" if last.text == "charge" else "wire", "args": {"card": "c1"}}
    return {"text": "finished: " + str(last.parts[0].model_dump().get("result"))}


async def test_host_spans_keep_one_trace_per_run_across_an_approval_and_a_host_kill(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log = tmp_path / "charge.log"

    @tool  # not idempotent: after the kill it gets "outcome unknown", never a second run
    def charge(card: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {card}\n")
        time.sleep(30)  # the host is killed while we are here
        return "charged"

    @tool(requires_approval=True)
    def wire(card: str) -> str:
        return "wired"

    agent = Agent(name="a", model=ScriptedModel(_step), tools=[charge, wire])
    async with Collector() as collector:
        rt = await ray_runtime({"a": agent}, host_options={"runtime_env": {"env_vars": collector.env()}})

        # An approval on a host: the decision's drive continues the run's trace.
        h = await rt.create_session(agent="a")
        assert (await h.run("wire")).status == "suspended"
        [pending] = await h.pending_approvals()
        approved = await h.approve(pending.token)
        assert approved.status == "done"
        spans = await collector.wait_for(lambda got: bool(_drives(got, approved.run_id, "approve")))
        run = _of_run(spans, approved.run_id)
        assert len({s.trace_id for s in run}) == 1
        [turn] = [s for s in run if s.name == "turn a"]
        [decision] = _drives(spans, approved.run_id, "approve")
        assert decision.parent_id == turn.span_id and any(s.name == "approval wire" for s in run)
        assert pending.token not in str([(s.attributes, s.events) for s in spans])

        # A host killed mid-tool: its restart re-drives the turn in the same trace.
        k = await rt.create_session(agent="a")
        turn_handle = await k.send("charge")
        await _file_says(log, "start")
        queued = await rt.store.load_turn(turn_handle.submission_id)
        assert queued is not None
        running = await rt.store.load_run(queued.run_id)
        anchor = parse_traceparent(running.traceparent if running else None)
        assert anchor is not None  # stored with the run row, before the first model request
        trace_id = format(anchor.trace_id, "032x")
        # The first model request ended before the tool started: the first host exports it now.
        before = await collector.wait_for(lambda got: any(s.trace_id == trace_id for s in got))
        [host] = rt.host._hosts
        ray.kill(host, no_restart=False)
        result = await asyncio.wait_for(turn_handle.result(), 90)
        assert result.status == "done" and "outcome unknown" in (result.text or "")
        spans = await collector.wait_for(lambda got: bool(_drives(got, result.run_id, "recover")))

    stored = await rt.store.load_run(result.run_id)
    assert stored is not None and running is not None and stored.traceparent == running.traceparent
    [first_chat] = [s for s in before if s.trace_id == trace_id]
    [redrive] = _drives(spans, result.run_id, "recover")
    [second_turn] = [s for s in spans if s.name == "turn a" and s.attributes["repertory.run_id"] == result.run_id]
    assert first_chat.name == "chat scripted"
    assert first_chat.resource["process.pid"] != redrive.resource["process.pid"]  # the restarted host
    assert {redrive.trace_id, second_turn.trace_id} == {trace_id}
    assert second_turn.parent_id == format(anchor.span_id, "016x")  # the killed host's turn span
    assert redrive.parent_id == second_turn.span_id
    assert log.read_text().count("start") == 1


_CALLERS = {
    name: f"00-{trace:032x}-{span:016x}-01"
    for name, trace, span in (
        ("run", 0xA1, 0xB1),
        ("queued", 0xA2, 0xB2),
        ("batched", 0xA3, 0xB3),
        ("send", 0xA4, 0xB4),
        ("approve", 0xA5, 0xB5),
    )
}
"""The spans a client's code is in when it calls (no SDK in this process: ``under_traceparent`` makes them current)."""


async def test_a_ray_clients_span_is_the_parent_of_the_turns_it_sends_and_a_link_of_its_decisions(
    ray_runtime: Any,
) -> None:
    # The span a client sends from lives in the client's process; the call carries its traceparent
    # and the host runs it under that span, as the local backend runs it in the caller's context.
    @tool(requires_approval=True)
    def wire(card: str) -> str:
        return "wired"

    agent = Agent(name="a", model=ScriptedModel(_step), tools=[wire])

    async def run_under(caller: str, handle: Any, prompt: str) -> Any:
        with under_traceparent(_CALLERS[caller]):
            return await handle.run(prompt)

    async with Collector() as collector:
        rt = await ray_runtime({"a": agent}, host_options={"runtime_env": {"env_vars": collector.env()}})
        alone, first, second, sent = [await rt.create_session(agent="a") for _ in range(4)]
        assert (await run_under("run", alone, "wire")).status == "suspended"  # one direct call
        # Two at once on one host: the second is queued in the batch call (``run_turns``).
        done = await asyncio.gather(run_under("queued", first, "wire"), run_under("batched", second, "wire"))
        assert [r.status for r in done] == ["suspended", "suspended"]
        with under_traceparent(_CALLERS["send"]):
            turn = await sent.send("wire")
        assert (await turn.result()).status == "suspended"
        [pending] = await alone.pending_approvals()
        with under_traceparent(_CALLERS["approve"]):
            approved = await alone.approve(pending.token)
        assert approved.status == "done"
        sessions = {"run": alone.id, "queued": first.id, "batched": second.id, "send": sent.id}

        def turns_of(got: list[GotSpan]) -> dict[str, GotSpan]:
            found = {}
            for s in got:
                for caller, session_id in sessions.items():
                    if s.name == "turn a" and s.attributes.get("repertory.session_id") == session_id:
                        found[caller] = s
            return found

        spans = await collector.wait_for(
            lambda got: len(turns_of(got)) == len(sessions) and bool(_drives(got, approved.run_id, "approve"))
        )
    for caller, span in turns_of(spans).items():
        expected = parse_traceparent(_CALLERS[caller])
        assert expected is not None
        assert (span.trace_id, span.parent_id) == (f"{expected.trace_id:032x}", f"{expected.span_id:016x}"), caller
    [decision] = _drives(spans, approved.run_id, "approve")
    approver = parse_traceparent(_CALLERS["approve"])
    assert approver is not None
    assert (f"{approver.trace_id:032x}", f"{approver.span_id:016x}") in [(t, s) for t, s, _ in decision.links]
    assert decision.trace_id == f"{parse_traceparent(_CALLERS['run']).trace_id:032x}"  # type: ignore[union-attr]


def _drives(spans: list[GotSpan], run_id: str, cause: str) -> list[GotSpan]:
    return [
        s
        for s in spans
        if s.name == "invoke_agent a"
        and s.attributes.get("repertory.run_id") == run_id
        and s.attributes.get("repertory.drive.cause") == cause
    ]


def _of_run(spans: list[GotSpan], run_id: str) -> list[GotSpan]:
    ids = {s.span_id for s in spans if s.attributes.get("repertory.run_id") == run_id}
    while more := {s.span_id for s in spans if s.parent_id in ids} - ids:
        ids |= more
    return [s for s in spans if s.span_id in ids]


async def _file_says(path: Path, text: str, within: float = 60.0) -> None:
    # Polling: the file is written by the host process; there is nothing to await across processes.
    deadline = time.monotonic() + within
    while not (path.exists() and text in path.read_text()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never said {text!r}")
        await asyncio.sleep(0.05)
