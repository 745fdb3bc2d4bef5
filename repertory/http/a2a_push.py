"""A2A push notifications on the durable webhooks: a task's config is a delivery row, each event it sees another.

A ``TaskPushNotificationConfig`` (``CreateTaskPushNotificationConfig``, or the configuration of a
``SendMessage``) is stored as a webhook row of kind ``a2a`` for the task's turn
(``repertory.http.webhooks``: the server's signature, retries with backoff, the address rules that
keep a tenant's URL off the server's own network, and a claim per attempt so two servers never
send one). Its config (id, token, authentication) rides in the row's metadata. The row is due when
the task ends, and POSTs the final ``Task``; on the way, each question the task asks
(``input-required``, one per live token) spawns a row of kind ``a2a-event`` carrying the ``Task``
as it was at that moment, under an id made of the config's row and the question, so the event is
sent at most once whichever server saw it, and then retried like any row. A restarted server
follows every pending row again, so a config outlives the process that took it.

Each POST is the A2A ``StreamResponse`` JSON (``{"task": {...}}``) with the config's
``X-A2A-Notification-Token`` and, when the config has credentials, ``Authorization: <scheme>
<credentials>``, beside repertory's ``X-Repertory-Signature`` headers.

``DeleteTaskPushNotificationConfig`` ends the config's row (``failed``, "deleted by the client"),
so it sends nothing more, and it is no longer listed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from a2a.types import StreamResponse, TaskPushNotificationConfig, TaskState
from google.protobuf.json_format import MessageToDict

from repertory.core.ids import new_id
from repertory.core.principal import Principal
from repertory.core.timing import TimedStore, WebhookRecord
from repertory.core.tree import SessionEvent, TurnRecord
from repertory.http.a2a_tasks import TaskRead, read_task, task_of
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.sse import EventFeed

__all__ = ["CONFIG_KIND", "DELETED", "EVENT_KIND", "A2aConfigs", "A2aEvents", "config_of"]

CONFIG_KIND = "a2a"
"""The webhook kind of a task's push config (due when the task ends)."""
EVENT_KIND = "a2a-event"
"""The webhook kind of one event a config saw (due at once; its body was taken when it was seen)."""
DELETED = "deleted by the client"
"""The ``last_error`` of a config its client deleted."""
_QUIET_MAX_S = 1.0


def config_of(record: WebhookRecord) -> TaskPushNotificationConfig:
    """The A2A config a row of kind ``a2a`` keeps."""
    meta = record.metadata
    config = TaskPushNotificationConfig(
        id=str(meta.get("config_id") or record.delivery_id), task_id=record.submission_id, url=record.url
    )
    token = meta.get("token")
    if isinstance(token, str) and token:
        config.token = token
    scheme, credentials = meta.get("scheme"), meta.get("credentials")
    if isinstance(scheme, str) and scheme:
        config.authentication.scheme = scheme
        if isinstance(credentials, str):
            config.authentication.credentials = credentials
    return config


def _headers(record: WebhookRecord) -> dict[str, str]:
    meta = record.metadata
    headers: dict[str, str] = {}
    token, scheme, credentials = meta.get("token"), meta.get("scheme"), meta.get("credentials")
    if isinstance(token, str) and token:
        headers["X-A2A-Notification-Token"] = token
    if isinstance(scheme, str) and scheme and isinstance(credentials, str) and credentials:
        headers["Authorization"] = f"{scheme} {credentials}"
    return headers


async def _payload(gw: Gateway, read: TaskRead) -> dict[str, Any]:
    task = await task_of(gw, read, history=False)
    payload: dict[str, Any] = MessageToDict(StreamResponse(task=task))
    return payload


class A2aEvents:
    """The ``a2a-event`` kind: due at once, posting the ``Task`` taken when the event was seen."""

    async def due(self, record: WebhookRecord) -> AsyncIterator[WebhookRecord]:
        """Due at once; spawns nothing."""
        return
        yield  # pragma: no cover - makes this an async generator

    async def body(self, record: WebhookRecord) -> tuple[bytes, dict[str, str]]:
        """The stored ``StreamResponse`` and the config's headers."""
        payload = record.metadata.get("payload")
        return json.dumps(payload, ensure_ascii=False).encode(), _headers(record)


class A2aConfigs:
    """The ``a2a`` kind (due when the task ends, spawning an ``a2a-event`` per question), and reading configs."""

    def __init__(self, gw: Gateway) -> None:
        self._gw = gw

    def _store(self) -> TimedStore:
        store = self._gw.store
        if not isinstance(store, TimedStore):
            raise HttpError("this server's store keeps no webhook deliveries", status=422)
        return store

    @staticmethod
    def record(turn: TurnRecord, config: TaskPushNotificationConfig, owner: str | None) -> WebhookRecord:
        """The row that keeps ``config`` for the task of ``turn`` (not stored yet)."""
        delivery_id = new_id()
        metadata: dict[str, Any] = {
            "kind": CONFIG_KIND,
            "config_id": config.id or delivery_id,
            "owner": owner,
            "token": config.token,
        }
        if config.HasField("authentication"):
            metadata["scheme"] = config.authentication.scheme
            metadata["credentials"] = config.authentication.credentials
        return WebhookRecord(
            delivery_id=delivery_id,
            session_id=turn.session_id,
            submission_id=turn.submission_id,
            run_id=turn.run_id,
            url=config.url,
            metadata=metadata,
        )

    async def configs(self, task_id: str) -> list[WebhookRecord]:
        """The task's configs that were not deleted, oldest first."""
        rows = await self._store().list_webhooks(submission_id=task_id)
        return [r for r in rows if r.metadata.get("kind") == CONFIG_KIND and r.last_error != DELETED]

    async def find(self, task_id: str, config_id: str) -> WebhookRecord | None:
        """The task's config ``config_id`` (the newest of that id), or ``None``."""
        found = [r for r in await self.configs(task_id) if r.metadata.get("config_id") == config_id]
        return found[-1] if found else None

    async def pending_events(self, config: WebhookRecord) -> list[WebhookRecord]:
        """The events ``config`` spawned that are not sent yet."""
        rows = await self._store().list_webhooks(status="pending", submission_id=config.submission_id)
        return [r for r in rows if r.delivery_id.startswith(config.delivery_id + ".")]

    # -- the webhook kind ---------------------------------------------------------------------------

    async def due(self, record: WebhookRecord) -> AsyncIterator[WebhookRecord]:
        """Follow the task until it ends, spawning one ``a2a-event`` row per question it asks."""
        turn = await self._gw.store.load_turn(record.submission_id)
        if turn is None:
            return  # its session was deleted: the final POST finds no task and fails the row
        handle = await self._gw.runtime.session(turn.session_id, Principal.user())  # a reader: it sends nothing
        mark = await self._gw.store.last_event_seq(turn.session_id)
        feed = await EventFeed(handle, self._gw.store, mark).open()
        quiet = 0.05
        seen: set[str] = set()
        try:
            while True:
                fresh = await self._gw.store.load_turn(record.submission_id)
                if fresh is None:
                    return
                read = await read_task(self._gw, fresh)
                if read.terminal:
                    return
                if read.state == TaskState.TASK_STATE_INPUT_REQUIRED and read.asking is not None:
                    on = read.asking.suspended_on
                    token = on.token if on is not None else ""
                    digest = hashlib.sha256(token.encode()).hexdigest()[:24]
                    if digest in seen:
                        quiet = await _next_stored(feed, fresh.submission_id, quiet)
                        continue
                    seen.add(digest)
                    yield WebhookRecord(
                        delivery_id=f"{record.delivery_id}.{digest}",
                        session_id=record.session_id,
                        submission_id=record.submission_id,
                        run_id=record.run_id,
                        url=record.url,
                        metadata={**record.metadata, "kind": EVENT_KIND, "payload": await _payload(self._gw, read)},
                    )
                quiet = await _next_stored(feed, fresh.submission_id, quiet)
        finally:
            feed.close()

    async def body(self, record: WebhookRecord) -> tuple[bytes, dict[str, str]]:
        """The final ``Task`` as a ``StreamResponse``, and the config's headers."""
        turn = await self._gw.store.load_turn(record.submission_id)
        if turn is None:
            raise HttpError(f"task {record.submission_id!r} is gone", status=404)
        payload = await _payload(self._gw, await read_task(self._gw, turn))
        return json.dumps(payload, ensure_ascii=False).encode(), _headers(record)


async def _next_stored(feed: EventFeed, submission_id: str, quiet: float) -> float:
    """Return at the turn's next stored event (the next wait starts short), or after ``quiet`` seconds (longer next)."""
    try:
        async with asyncio.timeout(quiet):
            while True:
                event: SessionEvent = await feed.get()
                if event.seq is not None and event.submission_id == submission_id:
                    return 0.05
    except TimeoutError:
        return min(quiet * 2, _QUIET_MAX_S)
