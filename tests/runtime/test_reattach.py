"""Re-attach: a model call a dead drive started is continued by the recovered run, never asked again.

``Server`` plays the provider: it keeps each call's reply and hands it out from any position, as a
background response does (``GET /responses/{id}?starting_after=n``). ``Attachable`` is the adapter:
it yields a ``ModelCall`` once the call exists and after every delta, and continues a call when the
session hands one back (``ModelSettings.attach``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from repertory import Agent, DeltaWindow, ModelMessage, ModelResponse, ModelSettings, Runtime, TextDelta, ToolSpec
from repertory.core.model import ModelCall, ModelEvent
from repertory.core.tree import SessionEvent

REPLY = "one two three four five six seven eight"


class Server:
    """The provider's side: every call made, where it is read from, which were cancelled."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.reads: list[tuple[str, int]] = []  # (call id, first position read)
        self.cancelled: list[str] = []
        self.hold = asyncio.Event()  # set: a reader may read past the middle
        self.held = asyncio.Event()  # a reader waits at the middle
        self.stopped = asyncio.Event()  # a call was cancelled


class Attachable:
    """An adapter over ``Server``: chunked replies, a call id and a position after each delta."""

    model = "attachable"

    def __init__(self, server: Server, *, stop_midway: bool) -> None:
        self.server = server
        self.stop_midway = stop_midway

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        chunks = [w + " " for w in REPLY.split(" ")]
        chunks[-1] = chunks[-1].strip()
        if settings.attach is not None:
            call, start = str(settings.attach["id"]), int(settings.attach["pos"])
        else:
            call, start = f"call-{len(self.server.created)}", 0
            self.server.created.append(call)
            yield ModelCall(state={"id": call, "pos": 0})
        self.server.reads.append((call, start))
        for i in range(start, len(chunks)):
            if self.stop_midway and i == len(chunks) // 2:
                self.server.held.set()
                await self.server.hold.wait()
            await asyncio.sleep(0.002)  # the provider's pace: the window's writes happen in between
            yield TextDelta(text=chunks[i])
            yield ModelCall(state={"id": call, "pos": i + 1})  # covers every delta before it
        yield ModelResponse(message=ModelMessage.assistant(REPLY))

    async def cancel_call(self, state: dict[str, Any]) -> None:
        self.server.cancelled.append(str(state["id"]))
        self.server.stopped.set()


def _agent(server: Server, *, stop_midway: bool) -> Agent:
    return Agent(name="a", model=Attachable(server, stop_midway=stop_midway), delta_window=DeltaWindow(ms=0))


async def _log(rt: Runtime, session_id: str) -> list[SessionEvent]:
    return await rt.store.load_events(session_id)


async def test_a_run_recovered_mid_reply_reattaches_and_the_reply_is_whole_once(tmp_path: Path) -> None:
    server, url = Server(), f"sqlite:///{tmp_path / 'runs.db'}"
    rt1 = await Runtime.start(store=url, agents={"a": _agent(server, stop_midway=True)})
    h = await rt1.create_session(agent="a")
    turn = await h.send("tell")
    await server.held.wait()
    async for event in h.events():  # the first half is in the log (written as it came: ms=0)
        if event.type == "text.delta" and event.data["text"] == "four ":
            break
    await rt1.close()  # lets go, as a crash would: the call stays where it was

    server.hold.set()
    async with await Runtime.start(store=url, agents={"a": _agent(server, stop_midway=False)}) as rt2:
        result = await (await rt2.session(h.id)).get_turn(turn.submission_id).result()
        log = await _log(rt2, h.id)
        thread = await rt2.store.load_thread(h.id)
        assert thread is not None and thread.history_revision_id is not None
        history = await rt2.store.load_history(thread.history_revision_id)
    assert result.text == REPLY
    assert server.created == ["call-0"]  # one call, whatever crashed
    [(first, at_start), (again, resumed_at)] = server.reads
    assert (first, at_start, again) == ("call-0", 0, "call-0") and 0 < resumed_at < 8
    deltas = [e for e in log if e.type == "text.delta"]
    assert "".join(e.data["text"] for e in deltas) == REPLY  # nothing lost, nothing twice
    assert not [e for e in log if e.type == "reply.retracted"]
    assert history is not None and history.head is not None
    assert {e.data["message_id"] for e in deltas} == {history.head.entry_id}  # one reply, the stored one


async def test_a_cancelled_run_stops_its_call_and_a_finished_one_forgets_it(tmp_path: Path) -> None:
    server = Server()
    async with await Runtime.start(
        store=f"sqlite:///{tmp_path / 'c.db'}", agents={"a": _agent(server, stop_midway=True)}
    ) as rt:
        h = await rt.create_session(agent="a")
        turn = await h.send("tell")
        await server.held.wait()
        await turn.cancel()
        await asyncio.wait_for(server.stopped.wait(), 10)
        assert server.cancelled == ["call-0"]
        server.hold.set()
        done = await (await rt.create_session(agent="a")).run("again")
        assert done.text == REPLY and done.state.model_call is None  # answered: nothing left to re-attach
