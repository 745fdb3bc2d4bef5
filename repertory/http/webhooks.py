"""Completion webhooks: ``webhook`` on a run request POSTs the run's final state to that URL when it ends.

A promise is a durable row (``repertory.core.timing.WebhookRecord``) written before the run's
response goes out, so a restarted server still keeps it: at start it follows every ``pending``
delivery again. When the run's turn rests (done, error, cancelled, or interrupted), the server
POSTs the LangGraph ``Run`` object with the thread's ``values`` to the URL:

- signed: ``X-Repertory-Signature: sha256=<hex>``, an HMAC-SHA256 with the server's secret over
  ``"<X-Repertory-Timestamp>.<body>"``, so a receiver checks both origin and freshness;
  ``X-Repertory-Delivery`` is the delivery's id (the same on every retry of it);
- retried with exponential backoff (``base_delay`` doubling, ``max_attempts`` tries) on a network
  error or a non-2xx answer; a 2xx answer ends it;
- at most once per run end, recorded durably: each attempt is taken with a compare-and-set on the
  row (``claim_webhook``), so two servers, or a server and its restarted self, never send the same
  attempt, and a ``delivered`` row is never sent again. (A crash after the receiver answered but
  before ``delivered`` was written makes the next attempt repeat it, under the same delivery id.)

Loopback URLs are allowed on purpose (the tests' receiver is on loopback); the server posts only
where its API callers ask it to, so keep an API key on any server reachable by strangers.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from repertory.core.ids import new_id, now_ms
from repertory.core.timing import FiringWebhook, TimedStore, WebhookRecord
from repertory.http.convert import iso
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.views import run_view
from repertory.tree.handle import TurnHandle

__all__ = ["SECRET_ENV", "WebhookSettings", "Webhooks", "check_webhook_url", "signature"]

SECRET_ENV = "REPERTORY_WEBHOOK_SECRET"
log = logging.getLogger("repertory.http.webhooks")


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Repertory-Signature`` value of a delivery: ``sha256=`` and the hex HMAC of ``timestamp.body``."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def check_webhook_url(url: str) -> str:
    """An absolute ``http(s)`` URL, or ``ValueError`` saying what is wrong with it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"webhook must be an absolute http(s) URL, not {url!r}")
    return url


@dataclass(frozen=True)
class WebhookSettings:
    """How a server delivers webhooks: its signing secret, retries and timeout.

    ``secret=None`` reads ``REPERTORY_WEBHOOK_SECRET``; without either, requests that ask for a
    webhook are refused (422), since an unsigned POST could come from anyone.
    """

    secret: str | bytes | None = None
    max_attempts: int = 6
    base_delay: float = 1.0
    timeout: float = 10.0
    lease: float = 60.0
    poll: float = 1.0
    """How often the server looks for deliveries it did not promise itself (a cron firing's, written
    by whichever host fired it)."""

    def key(self) -> bytes | None:
        """The secret as bytes, from the settings or the environment."""
        secret = self.secret if self.secret is not None else os.environ.get(SECRET_ENV)
        if secret is None or secret == "":
            return None
        return secret.encode() if isinstance(secret, str) else secret


class Webhooks:
    """Keeps the server's webhook promises: records them, follows their runs, delivers with retries."""

    def __init__(self, gw: Gateway, settings: WebhookSettings | None = None) -> None:
        self.gw = gw
        self.settings = settings or WebhookSettings()
        self._secret = self.settings.key()
        self._client: httpx.AsyncClient | None = None
        self._following: set[str] = set()  # delivery ids this server follows now

    def _store(self) -> TimedStore:
        store = self.gw.store
        if not isinstance(store, TimedStore):
            raise HttpError("this server's store keeps no webhook deliveries", status=422)
        return store

    async def start(self) -> None:
        """Follow every ``pending`` delivery: those a previous process left, then, every ``poll``, new ones.

        A run's webhook is promised here (``promise``); a cron firing's is written by the host that
        fired it (``FiringWebhook``), which may be another process, so the server looks for it.
        Two servers following one delivery send each attempt once (``claim_webhook``).
        """
        store = self.gw.store
        if isinstance(store, TimedStore):
            await self._follow_pending(store)
            if self._secret is not None:
                self.gw.spawn(self._poll(store))

    async def _follow_pending(self, store: TimedStore, *, firings: bool = False) -> None:
        for record in await store.list_webhooks(status="pending", firings=firings):
            if record.delivery_id not in self._following:
                self._follow(record, None)

    async def _poll(self, store: TimedStore) -> None:
        while True:
            await asyncio.sleep(self.settings.poll)
            try:
                await self._follow_pending(store, firings=True)  # runs' are promised here, or found at start
            except Exception:  # the store away for a moment: look again at the next poll
                log.warning("looking for pending webhook deliveries failed", exc_info=True)

    def _follow(self, record: WebhookRecord, wait: Any) -> None:
        self._following.add(record.delivery_id)
        self.gw.spawn(self._deliver(record, wait))

    def _require_secret(self) -> None:
        """422 unless the server can sign: an unsigned POST could come from anyone."""
        if self._secret is None:
            raise HttpError(
                f"this server has no webhook secret: start it with --webhook-secret or {SECRET_ENV}", status=422
            )

    def for_firings(self, url: str, *, assistant_id: str, metadata: dict[str, Any]) -> FiringWebhook:
        """The webhook every firing of a cron gets (``FiringWebhook``); 422 without a secret or for a bad URL."""
        self._require_secret()
        try:
            checked = check_webhook_url(url)
        except ValueError as exc:
            raise HttpError(str(exc), status=422) from None
        return FiringWebhook(url=checked, metadata={"assistant_id": assistant_id, "run_metadata": metadata})

    async def close(self) -> None:
        """Close the HTTP client (deliveries in flight are the gateway's tasks, cancelled by it)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def promise(self, url: str, *, thread_id: str, submission_id: str, run_id: str, assistant_id: str,
                      metadata: dict[str, Any], wait: Any = None) -> WebhookRecord:  # fmt: skip
        """Record that the run's end is POSTed to ``url`` and start following it; ``wait()`` rests it.

        Refused (422) when the server has no secret to sign with.
        """
        self._require_secret()
        record = WebhookRecord(
            delivery_id=new_id(),
            session_id=thread_id,
            submission_id=submission_id,
            run_id=run_id,
            url=check_webhook_url(url),
            metadata={"assistant_id": assistant_id, "run_metadata": metadata},
        )
        await self._store().add_webhook(record)
        self._follow(record, wait)
        return record

    async def _body(self, record: WebhookRecord) -> bytes:
        turn = await self.gw.store.load_turn(record.submission_id)
        if turn is None:
            raise HttpError(f"run {record.run_id!r} has no turn", status=404)
        assistant = record.metadata.get("assistant_id")
        run_meta = record.metadata.get("run_metadata")
        view = run_view(turn, str(assistant), run_meta if isinstance(run_meta, dict) else {})
        session = await self.gw.store.load_session(record.session_id)  # the server's own read: no caller
        if session is None:
            raise HttpError(f"no thread {record.session_id!r}", status=404)
        snap = await self.gw.snapshot(session)
        error = None if turn.error is None else {"error": turn.error.type, "message": turn.error.message}
        body = {**view, "values": self.gw.values(snap), "error": error, "webhook_sent_at": iso(now_ms())}
        return json.dumps(body, ensure_ascii=False).encode()

    async def _deliver(self, record: WebhookRecord, wait: Any) -> None:
        """Wait for the run to rest, then POST until delivered, failed, or taken by another server."""
        try:
            if wait is not None:
                await wait()
            else:
                await TurnHandle(self.gw.runtime, record.session_id, record.submission_id).wait()
            await self._attempts(record.delivery_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook delivery %s stopped", record.delivery_id)
        finally:
            self._following.discard(record.delivery_id)

    async def _attempts(self, delivery_id: str) -> None:
        store = self._store()
        settings = self.settings
        assert self._secret is not None
        while True:
            current = await store.load_webhook(delivery_id)
            if current is None or current.status != "pending":
                return
            now = now_ms()
            if current.due_at > now:
                await asyncio.sleep((current.due_at - now) / 1000)
                continue
            if not await store.claim_webhook(delivery_id, current.attempts, now, now + int(settings.lease * 1000)):
                return  # another server (or this one, elsewhere) took this attempt
            attempt = current.attempts + 1
            try:
                error = await self._post(current)
            except HttpError as exc:  # its run or thread was deleted: there is nothing to send, ever
                at = now_ms()
                await store.finish_webhook(delivery_id, "failed", at, str(exc), at)
                return
            at = now_ms()
            if error is None:
                await store.finish_webhook(delivery_id, "delivered", at, None, at)
                return
            if attempt >= settings.max_attempts:
                log.warning("webhook %s failed after %d attempts: %s", delivery_id, attempt, error)
                await store.finish_webhook(delivery_id, "failed", at, error, at)
                return
            delay = int(settings.base_delay * 1000 * 2 ** (attempt - 1))
            await store.finish_webhook(delivery_id, "pending", at + delay, error, at)

    async def _post(self, record: WebhookRecord) -> str | None:
        """One POST; ``None`` on a 2xx answer, else why it failed."""
        assert self._secret is not None
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.settings.timeout)
        body = await self._body(record)
        stamp = str(now_ms())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "repertory-webhooks",
            "X-Repertory-Delivery": record.delivery_id,
            "X-Repertory-Timestamp": stamp,
            "X-Repertory-Signature": signature(self._secret, stamp, body),
        }
        try:
            response = await self._client.post(record.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"
