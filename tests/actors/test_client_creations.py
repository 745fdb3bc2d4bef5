"""How the Ray client tells its own retried creation from a taken id, with hosts that die on cue.

A host can die after committing a creation and before replying; the client then retries on the
restarted host, which finds the row. That row is the client's own only if it is exactly what the
client asked for; an id somebody else holds is ``SessionExists``, retried or not. No Ray cluster is
needed: the client talks to fake host handles whose ``create_sessions.remote`` runs a ``LocalHost``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from ray.exceptions import ActorDiedError

from repertory import Agent, InMemorySessionStore
from repertory.actors.client import RayHostClient
from repertory.core.tree import NewSession, SessionRecord
from repertory.errors import SessionExists
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel


class _Remote:
    def __init__(self, fn: Callable[..., Awaitable[Any]]) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Awaitable[Any]:
        return self._fn(*args)


class _DyingHost:
    """A shared host whose next ``deaths`` bulk creations die: after committing (``after_commit``) or before."""

    def __init__(self, host: LocalHost, deaths: int, after_commit: bool) -> None:
        self.host = host
        self.deaths = deaths
        self.after_commit = after_commit
        self.calls = 0
        self.create_sessions = _Remote(self._create_sessions)

    async def _create_sessions(self, specs: list[NewSession]) -> list[SessionRecord | SessionExists]:
        self.calls += 1
        dying = self.deaths > 0
        self.deaths -= 1
        if dying and not self.after_commit:
            raise ActorDiedError()
        outcomes: list[SessionRecord | SessionExists] = []
        for spec in specs:
            try:
                outcomes.append(await self.host.create_session(spec))
            except SessionExists as exc:
                outcomes.append(exc)
        if dying:
            raise ActorDiedError()  # committed, and the reply is lost
        return outcomes


def _client(store: InMemorySessionStore, deaths: int, after_commit: bool) -> tuple[RayHostClient, _DyingHost]:
    agents = {"a": Agent(name="a", model=ScriptedModel([{"text": "hi"}]))}
    fake = _DyingHost(LocalHost(store, agents), deaths, after_commit)
    client = RayHostClient(
        store=store,
        agents=agents,
        namespace="test",
        prefix="test",
        hosts=[fake],
        supervisor=None,
        owns_ray=False,
        max_in_flight=8,
        call_timeout=5.0,
        keep_hosts=True,
    )
    return client, fake


async def test_a_creation_whose_reply_was_lost_takes_its_own_row() -> None:
    store = InMemorySessionStore()
    client, fake = _client(store, deaths=1, after_commit=True)
    spec = NewSession(agent="a", session_id="mine", title="t", metadata={"k": 1})
    record = await client.create_session(spec)
    assert fake.calls == 2 and record == await store.load_session("mine")
    assert (record.title, record.metadata) == ("t", {"k": 1})


async def test_bulk_creations_whose_reply_was_lost_create_each_session_once() -> None:
    store = InMemorySessionStore()
    client, fake = _client(store, deaths=1, after_commit=True)
    specs = [NewSession(agent="a") for _ in range(5)]
    records = await client.create_sessions(specs)
    assert fake.calls == 2 and [r.session_id for r in records] == [s.session_id for s in specs]
    assert len(await store.list_sessions()) == 5


async def test_a_taken_id_is_session_exists_even_after_a_retry() -> None:
    store = InMemorySessionStore()
    client, fake = _client(store, deaths=0, after_commit=False)
    await client.create_session(NewSession(agent="a", session_id="taken", title="theirs"))
    with pytest.raises(SessionExists):  # no retry: a plain duplicate
        await client.create_session(NewSession(agent="a", session_id="taken", title="theirs"))
    fake.deaths = 1  # the host dies before writing anything; the retry finds somebody else's row
    with pytest.raises(SessionExists):
        await client.create_session(NewSession(agent="a", session_id="taken", title="mine"))
    with pytest.raises(SessionExists):
        await client.create_sessions([NewSession(agent="a", session_id="taken", title="mine")])
    stored = await store.load_session("taken")
    assert stored is not None and stored.title == "theirs" and len(await store.list_sessions()) == 1


async def test_bad_specs_are_refused_by_the_client_before_any_call() -> None:
    store = InMemorySessionStore()
    client, fake = _client(store, deaths=0, after_commit=False)
    with pytest.raises(ValueError, match="id cannot"):
        await client.create_session(NewSession(agent="a", session_id=""))
    with pytest.raises(ValueError, match="shared sessions"):
        await client.create_sessions([NewSession(agent="a", placement="dedicated")])
    assert fake.calls == 0 and await store.list_sessions() == []
