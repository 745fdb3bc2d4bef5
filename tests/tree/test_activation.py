"""Activation on the local host: concurrent first calls share one activation, cancellation harms no one.

An actor activates in the task of the first caller that needs it (no task of its own); these tests
hold that activation inside the store, where a slow database would hold it, to see what waiting and
cancelled callers get.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory import Agent
from repertory.core.tree import NewSession, SessionRecord
from repertory.errors import SessionNotFound
from repertory.runtime.host import LocalHost
from repertory.storage.memory.store import InMemorySessionStore
from repertory.testing import ScriptedModel
from repertory.testing.conformance.backend.doubles import within


class _HeldStore(InMemorySessionStore):
    """Holds every ``load_session`` until the test opens ``gate``; counts the loads."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.loads = 0

    async def load_session(self, session_id: str) -> SessionRecord | None:
        self.loads += 1
        self.entered.set()
        await self.gate.wait()
        return await super().load_session(session_id)


async def _host() -> tuple[LocalHost, _HeldStore, str]:
    store = _HeldStore()
    host = LocalHost(store, {"a": Agent(name="a", model=ScriptedModel([{"text": "hi"}]))})
    record = await host.create_session(NewSession(agent="a", title="t"))
    return host, store, record.session_id


async def test_concurrent_first_calls_share_one_activation() -> None:
    host, store, sid = await _host()
    first = asyncio.create_task(host.actor(sid))
    await within(store.entered.wait())
    others = [asyncio.create_task(host.actor(sid)) for _ in range(3)]
    await asyncio.sleep(0)  # let them reach the activation in flight
    store.gate.set()
    actors = await within(asyncio.gather(first, *others))
    assert all(a is actors[0] for a in actors)
    assert (host.activations, store.loads, host.resident) == (1, 1, 1)


async def test_a_cancelled_first_caller_leaves_the_waiters_an_activation() -> None:
    host, store, sid = await _host()
    first = asyncio.create_task(host.actor(sid))
    await within(store.entered.wait())
    waiter = asyncio.create_task(host.actor(sid))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    store.gate.set()
    actor = await within(waiter)  # it activated the session itself
    assert actor.id == sid and host.resident == 1 and await host.actor(sid) is actor


async def test_a_cancelled_waiter_does_not_stop_the_activation() -> None:
    host, store, sid = await _host()
    first = asyncio.create_task(host.actor(sid))
    await within(store.entered.wait())
    waiter = asyncio.create_task(host.actor(sid))
    await asyncio.sleep(0)
    waiter.cancel()
    store.gate.set()
    assert (await within(first)).id == sid
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (host.activations, store.loads) == (1, 1)


async def test_every_waiter_gets_the_activation_error() -> None:
    host, store, _ = await _host()
    first = asyncio.create_task(host.actor("nope"))
    await within(store.entered.wait())
    waiter = asyncio.create_task(host.actor("nope"))
    await asyncio.sleep(0)
    store.gate.set()
    for task in (first, waiter):
        with pytest.raises(SessionNotFound):
            await within(task)
    assert host.resident == 0
    store.gate.clear()
    store.entered.clear()
    again = asyncio.create_task(host.actor("nope"))  # nothing is left behind: a later call tries afresh
    await within(store.entered.wait())
    store.gate.set()
    with pytest.raises(SessionNotFound):
        await within(again)
