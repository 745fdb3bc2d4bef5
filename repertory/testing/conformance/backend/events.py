"""The event stream: ``on_progress``, ``events(after_seq)``, gap-free seq, reconnects, no tokens."""

from __future__ import annotations

import asyncio
import contextlib
import json

from repertory.core.tree import SessionEvent
from repertory.errors import ModelError
from repertory.runtime.tools import ToolContext, suspend, tool
from repertory.testing.conformance.backend.doubles import Script, Sink, collect, completed, dumps, entries, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["EventsConformance"]


DELTAS = ("text.delta", "reasoning.delta")
DURABLE_TYPES = {
    "turn.started",
    "tool.call",
    "tool.result",
    "approval.requested",
    "approval.decided",
    "run.suspended",
    "checkpoint",
    "turn.completed",
    "notification",
    "error",
}


@tool(requires_approval=True)
def wire(ctx: ToolContext, amount: int) -> str:
    """Wire money (needs approval)."""
    return f"wired {amount}"


def ask_human(question: str) -> str:
    """Ask the person at the keyboard."""
    suspend(reason="need input", payload={"question": question})


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _script() -> Script:
    return Script(
        {
            "research": [
                {"tool": "lookup", "args": {"q": "a"}, "reasoning": "let me look"},
                {"tool": "lookup", "args": {"q": "b"}},
                {"text": "research done"},
            ],
            "wire": [{"tool": "wire", "args": {"amount": 5}}, {"text": "wired"}],
            "ask": [{"tool": "ask_human", "args": {"question": "which?"}}],
        }
    )


def _assert_gap_free(events: list[SessionEvent], start: int = 1) -> None:
    seqs = [e.seq for e in events if e.seq is not None]
    assert seqs == list(range(start, start + len(seqs))), seqs


class EventsConformance(BackendSuite):
    """The event stream: live and replayed, gap-free ``seq``, reconnects, and listeners in place at once."""

    async def test_on_progress_sees_deltas_and_lifecycle_and_nothing_after_dispose(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(_script().agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        seen: list[SessionEvent] = []
        disposable = h.on_progress(seen.append)

        await within(h.run("research"))
        types = [e.type for e in seen]
        assert types[0] == "turn.started" and types[-1] == "turn.completed"
        assert "text.delta" in types and "reasoning.delta" in types
        assert {"tool.call", "tool.result", "checkpoint"} <= set(types)
        deltas = [e for e in seen if e.type == "text.delta"]
        assert "".join(e.data["text"] for e in deltas) == "research done"
        assert all(e.session_id == h.id for e in seen)

        disposable.dispose()
        disposable.dispose()  # idempotent
        count = len(seen)
        await within(h.run("after dispose"))
        assert len(seen) == count

    async def test_on_progress_from_a_fresh_handle_on_a_passivated_session_misses_nothing(
        self,
        make_runtime: RuntimeFactory,
    ) -> None:
        rt = await make_runtime(_script().agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        await within(h.run("warm up"))
        rt.host.passivate_idle(0)
        seen: list[SessionEvent] = []
        disposable = h.on_progress(seen.append)
        await within(h.run("research"))
        disposable.dispose()
        types = [e.type for e in seen]
        assert types and types[0] == "turn.started" and types[-1] == "turn.completed"

    async def test_two_listeners_from_two_handles_each_get_everything_from_the_start(
        self, make_runtime: RuntimeFactory
    ) -> None:
        # on_progress() observes everything emitted after it returns, including the turn's start,
        # however long the session takes to activate.
        rt = await make_runtime(_script().agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        a: list[SessionEvent] = []
        b: list[SessionEvent] = []
        da = h.on_progress(a.append)
        db = (await rt.session(h.id)).on_progress(b.append)
        await within(h.run("research"))
        da.dispose()
        await within(h.run("more"))
        db.dispose()
        assert a[0].type == "turn.started" and [e.type for e in a].count("turn.completed") == 1
        assert b[0].type == "turn.started" and [e.type for e in b].count("turn.completed") == 2
        durable_a = [e for e in a if e.seq is not None]
        assert [e for e in b if e.seq is not None][: len(durable_a)] == durable_a

    async def test_deltas_are_stored_gap_free_and_name_the_reply_they_become(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(_script().agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        live: list[SessionEvent] = []
        disposable = h.on_progress(live.append)
        done = await within(h.run("research"))
        disposable.dispose()

        stored = await collect(h.events(), lambda e: e.type == "turn.completed")
        _assert_gap_free(stored)
        assert [e.seq for e in live] == [e.seq for e in stored]  # the live stream is the stored one
        assert {e.type for e in stored} <= DURABLE_TYPES | set(DELTAS)
        deltas = [e for e in stored if e.type in DELTAS]
        assert "".join(e.data["text"] for e in deltas if e.type == "text.delta") == "research done"
        assert "".join(e.data["text"] for e in deltas if e.type == "reasoning.delta") == "let me look"
        assert {e.data["run_id"] for e in deltas} == {done.run_id}
        # Each delta names the history entry its reply became: the reader can close the partial reply.
        replies = [(entry_id, m) for entry_id, m in await entries(rt, h) if m.role == "assistant"]
        [text_reply] = {e.data["message_id"] for e in deltas if e.type == "text.delta"}
        assert [i for i, m in replies if m.text == "research done"] == [text_reply]
        [reasoned] = {e.data["message_id"] for e in deltas if e.type == "reasoning.delta"}
        assert reasoned == replies[0][0]  # the first step's reply reasoned before its tool call

    async def test_a_reader_reconnecting_mid_reply_gets_exactly_the_text_it_has_not_seen(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script({"tell": [{"text": "one two three four five six seven eight"}]})
        gate = script.hold_midway("tell", chunks=8)
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("tell")
        await gate.reached()
        # The first half is in the log before the model says more: a reader sees it and goes away.
        first = await collect(h.events(), lambda e: e.type == "text.delta")
        last_seq = first[-1].seq
        assert last_seq is not None
        gate.release()
        rest = await collect(h.events(after_seq=last_seq), completed(turn.submission_id))
        text = "".join(e.data["text"] for e in first + rest if e.type == "text.delta")
        assert text == "one two three four five six seven eight"  # nothing lost, nothing twice
        _assert_gap_free(first + rest)

    async def test_deltas_without_a_window_are_live_only(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[lookup], delta_window=None))
        h = await rt.create_session(agent="assistant")
        live: list[SessionEvent] = []
        disposable = h.on_progress(live.append)
        await within(h.run("research"))
        last = await h.send("second")
        await within(last.result())
        disposable.dispose()

        stored = await collect(h.events(), completed(last.submission_id))
        _assert_gap_free(stored)
        assert all(e.type in DURABLE_TYPES for e in stored)  # replayed from the store: no deltas
        assert [e.seq for e in live if e.type not in ("text.delta", "reasoning.delta")] == [e.seq for e in stored]
        assert all(e.seq is None for e in live if e.type in ("text.delta", "reasoning.delta"))
        assert [e.type for e in stored].count("turn.completed") == 2
        assert all(e.session_id == h.id and isinstance(e.at, int) for e in stored)

    async def test_events_after_seq_replays_then_follows_live(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        first = await h.send("first")
        await within(first.result())
        stored = await collect(h.events(), completed(first.submission_id))
        n = stored[1].seq
        assert n == 2

        gate = script.hold("second")
        received = Sink()
        second = await h.send("second")
        await gate.reached()
        reader = asyncio.ensure_future(collect(h.events(after_seq=n), completed(second.submission_id), sink=received))
        # Once the reader has the stored part (up to the second turn's start), let the turn go on: the
        # rest can only reach the reader live.
        await received.wait_for(lambda e: e.type == "turn.started" and e.submission_id == second.submission_id)
        gate.release()
        await within(reader)

        everything = await collect(h.events(), completed(second.submission_id))
        durable = [e for e in received if e.seq is not None]
        assert durable[0].seq == n + 1
        _assert_gap_free(durable, start=n + 1)
        assert durable == [e for e in everything if e.seq is not None and e.seq > n]  # live == stored
        assert "text.delta" in [e.type for e in received]  # the live part arrived live
        assert durable[-1].type == "turn.completed" and durable[-1].submission_id == second.submission_id

    async def test_a_reader_that_reconnects_with_its_last_seq_loses_nothing(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        gate = script.hold("research", step=2)  # mid-turn: after two tool steps, before the reply
        rt = await make_runtime(script.agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        await within(h.run("warm up"))
        turn = await h.send("research")
        await gate.reached()

        # First connection: read until the second tool result, then disconnect.
        first = await collect(h.events(), lambda e: e.type == "tool.result" and e.data["result"] == "found b")
        last_seq = max(e.seq for e in first if e.seq is not None)
        # While nobody listens, the turn goes on and more events are stored.
        gate.release()
        await within(turn.result())
        follow = await h.send("follow")
        await within(follow.result())

        second = await collect(h.events(after_seq=last_seq), completed(follow.submission_id))
        everything = await collect(h.events(), completed(follow.submission_id))

        got = [e.seq for e in first + second if e.seq is not None]
        assert got == [e.seq for e in everything]  # nothing lost, nothing twice, in order
        _assert_gap_free(everything)

    async def test_reconnecting_in_the_middle_of_a_live_turn(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        gate_a = script.hold("research", step=1)
        gate_b = script.hold("research", step=2)
        rt = await make_runtime(script.agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("research")
        await gate_a.reached()
        part1 = await collect(h.events(), lambda e: e.type == "tool.result")
        last = max(e.seq for e in part1 if e.seq is not None)

        sink: list[SessionEvent] = []
        reader = asyncio.ensure_future(collect(h.events(after_seq=last), completed(turn.submission_id), sink=sink))
        gate_a.release()
        await gate_b.reached()
        gate_b.release()
        await within(reader)
        await within(turn.result())

        everything = await collect(h.events(), completed(turn.submission_id))
        assert [e.seq for e in part1 + sink if e.seq is not None] == [e.seq for e in everything]

    async def test_no_event_carries_a_resume_token(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[wire, ask_human]))
        h = await rt.create_session(agent="assistant")
        live: list[SessionEvent] = []
        disposable = h.on_progress(live.append)
        tokens: list[str] = []

        wire_turn = await h.send("wire")
        await within(wire_turn.result())
        [pending] = await h.pending_approvals()
        tokens.append(pending.token)
        await within(h.approve(pending.token))

        ask_turn = await h.send("ask")
        suspended = await within(ask_turn.result())
        assert suspended.state.suspended_on is not None
        tokens.append(suspended.state.suspended_on.token)
        last = await h.send("the answer")  # supersedes the suspended run
        await within(last.result())
        disposable.dispose()

        stored = await collect(h.events(), completed(last.submission_id))
        types = {e.type for e in stored}
        assert {"approval.requested", "run.suspended"} <= types
        for event in stored + live:
            text = dumps(event)
            for token in tokens:
                assert token not in text, f"{event.type} leaks a resume token"
        requested = next(e for e in stored if e.type == "approval.requested")
        assert json.dumps(requested.data)  # it says what waits for approval, without the token
        assert requested.data["tool_call_id"] == pending.tool_call_id
        # The decision is on record once, with who took it (the handle's principal, stamped by the host).
        [decided] = [e for e in stored if e.type == "approval.decided"]
        assert decided.submission_id == wire_turn.submission_id
        assert decided.data == {
            "tool_call_id": pending.tool_call_id,
            "decision": "approved",
            "decided_by": "user",
            "args_replaced": False,
        }
        kinds = [e.type for e in stored if e.submission_id == wire_turn.submission_id]
        assert kinds.index("approval.requested") < kinds.index("approval.decided") < kinds.index("turn.completed")

    async def test_turn_events_of_a_notification_and_an_error(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"bad": [ModelError("nope")]})
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        note = await h.notify(title="T", body="B")
        await within(note.result())
        bad = await h.send("bad")
        with contextlib.suppress(ModelError):
            await within(bad.result())
        note_types = [e.type async for e in note.events()]
        assert note_types[:2] == ["turn.started", "notification"] and note_types[-1] == "turn.completed"
        bad_events = [e async for e in bad.events()]
        assert "error" in [e.type for e in bad_events]
        assert bad_events[-1].type == "turn.completed" and bad_events[-1].data["status"] == "error"
        assert bad_events[-1].data["error"]["type"] == "ModelError"

    async def test_events_after_the_last_seq_yield_only_new_events(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent())
        h = await rt.create_session(agent="assistant")
        first = await h.send("one")
        await within(first.result())
        stored = await collect(h.events(), completed(first.submission_id))
        last = stored[-1].seq
        assert last is not None

        sink = Sink()
        reader = asyncio.ensure_future(
            collect(h.events(after_seq=last), lambda e: e.type == "turn.completed", sink=sink)
        )
        second = await h.send("two")
        await within(reader)
        durable = [e for e in sink if e.seq is not None]
        assert durable[0].seq == last + 1 and durable[0].type == "turn.started"
        assert {e.submission_id for e in sink} == {second.submission_id}

    async def test_a_failing_listener_does_not_break_the_session(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")

        def broken(event: SessionEvent) -> None:
            raise RuntimeError("listener bug")

        good: list[SessionEvent] = []
        bad = h.on_progress(broken)
        ok = h.on_progress(good.append)
        result = await within(h.run("research"), 3)
        bad.dispose()
        ok.dispose()
        assert (result.status, result.text) == ("done", "research done")
        assert [e.type for e in good][-1] == "turn.completed"

    async def test_every_event_names_its_turn_even_when_another_turn_is_cancelled_meanwhile(
        self,
        make_runtime: RuntimeFactory,
    ) -> None:
        script = _script()
        gate = script.hold("research", step=1)
        rt = await make_runtime(script.agent(tools=[lookup]))
        h = await rt.create_session(agent="assistant")
        running = await h.send("research")
        queued = await h.send("queued")
        await gate.reached()
        await within(queued.cancel())  # a queued turn's end is logged while the other one runs
        gate.release()
        await within(running.result())

        log = await collect(h.events(), completed(running.submission_id))
        assert all(e.submission_id in (running.submission_id, queued.submission_id) for e in log), [
            (e.seq, e.type, e.submission_id) for e in log
        ]
        mine = [e async for e in running.events()]
        assert [e.type for e in mine].count("tool.result") == 2
        assert [e.type for e in mine].count("checkpoint") == len([e for e in log if e.type == "checkpoint"])
