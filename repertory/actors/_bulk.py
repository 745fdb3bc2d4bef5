"""Bulk calls of the Ray client: many creations or sends in one Ray call per host per chunk.

One call per session costs a Ray round trip each (~1 ms); a host creates ~19,000 sessions a second
when they arrive 100 or more per call. Bulk calls carry client-chosen ids (session ids, submission
ids), so a chunk retried after its host died creates or queues nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from repertory.actors.host import shared_host_index
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.tree import SessionRecord, TurnKind, TurnRecord

if TYPE_CHECKING:
    from repertory.actors.client import RayHostClient

__all__ = ["create_sessions", "retry_dead", "send_many"]

_T = TypeVar("_T")
_DEAD = (RayActorError, ActorDiedError, ActorUnavailableError)


async def create_sessions(client: RayHostClient, batch: list[dict[str, Any]]) -> list[SessionRecord]:
    """Create shared sessions in bulk: one call per host per 1,000 (ids are ours, so retries are safe)."""
    for kwargs in batch:
        client.agent(kwargs["agent"])
        kwargs.setdefault("session_id", new_id())
        kwargs["placement"] = "shared"
    records: dict[str, SessionRecord] = {}

    async def chunk(index: int, part: list[dict[str, Any]]) -> None:
        made: list[SessionRecord] = await retry_dead(client, lambda: client._hosts[index].create_sessions.remote(part))
        records.update((r.session_id, r) for r in made)

    await asyncio.gather(*(chunk(i, part) for i, part in _by_host(client, batch, lambda k: k["session_id"])))
    for session_id in records:
        client._placement[session_id] = "shared"
    return [records[k["session_id"]] for k in batch]


async def send_many(client: RayHostClient, batch: list[tuple[str, ModelMessage, TurnKind, str]]) -> list[TurnRecord]:
    """Queue turns on shared sessions in bulk (deduplicated by submission id when retried)."""
    turns: dict[str, TurnRecord] = {}

    async def chunk(index: int, part: list[tuple[str, ModelMessage, TurnKind, str]]) -> None:
        made: list[TurnRecord] = await retry_dead(client, lambda: client._hosts[index].send_many.remote(part))
        turns.update((t.submission_id, t) for t in made)

    for session_id in {item[0] for item in batch}:
        if await client._handle_for(session_id) not in client._hosts:
            raise ValueError(f"send_many is for shared sessions; {session_id!r} has a dedicated host")
    await asyncio.gather(*(chunk(i, part) for i, part in _by_host(client, batch, lambda item: item[0])))
    return [turns[item[3]] for item in batch]


def _by_host(
    client: RayHostClient, items: list[_T], session_of: Callable[[_T], str], size: int = 1_000
) -> list[tuple[int, list[_T]]]:
    """Items grouped by the shared host of their session, in chunks of ``size``."""
    groups: dict[int, list[_T]] = {}
    for item in items:
        groups.setdefault(shared_host_index(session_of(item), len(client._hosts)), []).append(item)
    return [(i, group[j : j + size]) for i, group in groups.items() for j in range(0, len(group), size)]


async def retry_dead(client: RayHostClient, call: Callable[[], Any]) -> Any:
    """Await ``call()`` under the in-flight bound, again while its host is down (idempotent calls only)."""
    deadline = time.monotonic() + client._call_timeout
    while True:
        try:
            async with client._slots:
                return await call()
        except _DEAD:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
