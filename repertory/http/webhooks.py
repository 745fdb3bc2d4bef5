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

Where a webhook may go is ``repertory.http.webhook_targets``'s: a well-formed ``http(s)`` URL (422
at the request otherwise) whose host resolves to public addresses only, checked at every delivery
and posted to the address that was checked, redirects not followed. A cron's webhook is checked at
the request too. Loopback and private hosts are refused unless the settings allow them
(``WebhookSettings.allow_hosts``, ``repertory serve --allow-webhook-host 127.0.0.1``: how tests and
development deliver to a local receiver). A refused delivery fails at once, its reason recorded
as ``last_error``.

Other kinds of delivery ride the same rows, signatures, retries and address checks: a row whose
``metadata["kind"]`` names a ``WebhookKind`` given to ``Webhooks(kinds=...)`` is due when that kind
says, and posts the body it builds (A2A push notifications, ``repertory.http.a2a_push``). On the
way a kind may spawn more deliveries (one per event it saw); each is stored once by its id, so two
servers following one row write it once, and then followed like every row.

One bad row never stops the others: a delivery whose URL, run or thread cannot be used, or that
meets any error, is logged and marked ``failed`` (so no row stays ``pending`` forever), and the
server's start never fails because of a row.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from repertory.core.ids import new_id, now_ms
from repertory.core.timing import FiringWebhook, TimedStore, WebhookRecord
from repertory.errors import CommitConflict
from repertory.http.convert import iso
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.views import run_view
from repertory.http.webhook_targets import (
    HostPolicy,
    Resolver,
    WebhookRefused,
    check_webhook_url,
    resolve_target,
    system_resolver,
)
from repertory.tree.handle import TurnHandle

__all__ = ["SECRET_ENV", "WebhookKind", "WebhookSettings", "Webhooks", "check_webhook_url", "signature"]

SECRET_ENV = "REPERTORY_WEBHOOK_SECRET"
log = logging.getLogger("repertory.http.webhooks")


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Repertory-Signature`` value of a delivery: ``sha256=`` and the hex HMAC of ``timestamp.body``."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class WebhookSettings:
    """How a server delivers webhooks: its signing secret, retries, timeout, and which private hosts it may reach.

    ``secret=None`` reads ``REPERTORY_WEBHOOK_SECRET``; without either, requests that ask for a
    webhook are refused (422), since an unsigned POST could come from anyone. ``allow_hosts``
    (host names, addresses or CIDRs) and ``allow_private`` (every non-public address) lift the
    public-address rule for tests and development (``repertory.http.webhook_targets``);
    ``resolver`` replaces the system's DNS lookup.
    """

    secret: str | bytes | None = None
    max_attempts: int = 6
    base_delay: float = 1.0
    timeout: float = 10.0
    lease: float = 60.0
    poll: float = 1.0
    """How often the server looks for deliveries it did not promise itself (a cron firing's, written
    by whichever host fired it)."""
    allow_hosts: tuple[str, ...] = ()
    allow_private: bool = False
    resolver: Resolver | None = None
    check_timeout: float = 2.0
    """How long a request waits to resolve a cron's webhook host; a lookup that takes longer (or
    fails) is left to the delivery, which checks again."""

    def __post_init__(self) -> None:
        self.policy()  # a bad allowed host fails when the settings are made, not at the first delivery

    def policy(self) -> HostPolicy:
        """The hosts allowed beyond public addresses (``ValueError`` for an entry that is none)."""
        return HostPolicy.parse(self.allow_hosts, allow_private=self.allow_private)

    def key(self) -> bytes | None:
        """The secret as bytes, from the settings or the environment."""
        secret = self.secret if self.secret is not None else os.environ.get(SECRET_ENV)
        if secret is None or secret == "":
            return None
        return secret.encode() if isinstance(secret, str) else secret


class WebhookKind(Protocol):
    """A kind of delivery beside a run's completion (``metadata["kind"]`` names it): when it is due, what it posts."""

    def due(self, record: WebhookRecord) -> AsyncIterator[WebhookRecord]:
        """Wait until ``record`` is due, yielding the deliveries it spawns on the way (``Webhooks`` stores them)."""
        ...

    async def body(self, record: WebhookRecord) -> tuple[bytes, dict[str, str]]:
        """The JSON body to POST for ``record`` and the headers it adds to the signed ones."""
        ...


class Webhooks:
    """Keeps the server's webhook promises: records them, follows their runs, delivers with retries."""

    def __init__(
        self, gw: Gateway, settings: WebhookSettings | None = None, kinds: Mapping[str, WebhookKind] | None = None
    ) -> None:
        self.gw = gw
        self.settings = settings or WebhookSettings()
        self._kinds = dict(kinds or {})
        self._secret = self.settings.key()
        self._policy = self.settings.policy()
        self._resolver = self.settings.resolver or system_resolver
        self._client: httpx.AsyncClient | None = None
        self._following: set[str] = set()  # delivery ids this server follows now
        self._broken: set[str] = set()  # rows that could not even be marked failed: never followed again

    def _store(self) -> TimedStore:
        store = self.gw.store
        if not isinstance(store, TimedStore):
            raise HttpError("this server's store keeps no webhook deliveries", status=422)
        return store

    async def start(self) -> None:
        """Follow every ``pending`` delivery: those a previous process left, then, every ``poll``, new ones.

        A run's webhook is promised here (``promise``); a cron firing's is written by the host that
        fired it (``FiringWebhook``), which may be another process, so the server looks for it.
        Two servers following one delivery send each attempt once (``claim_webhook``). Without a
        secret nothing is followed (the rows wait, pending, for a server that can sign), and no row
        and no store error makes the start fail: it is logged, and the poll looks again.
        """
        store = self.gw.store
        if not isinstance(store, TimedStore):
            return
        if self._secret is None:
            log.info("no webhook secret: pending webhook deliveries are left for a server that has one")
            return
        try:
            await self._follow_pending(store)
        except Exception:  # a store away for a moment, or a row it cannot read: the server starts anyway
            log.exception("looking for pending webhook deliveries at start failed; the poll looks again")
            self.gw.spawn(self._poll(store, firings=False))  # every pending delivery, once it can be listed
        self.gw.spawn(self._poll(store))

    async def _follow_pending(self, store: TimedStore, *, firings: bool = False) -> None:
        for record in await store.list_webhooks(status="pending", firings=firings):
            if record.delivery_id not in self._following and record.delivery_id not in self._broken:
                self._follow(record, None)

    async def _poll(self, store: TimedStore, *, firings: bool = True) -> None:
        """Every ``poll``, follow new pending firings' deliveries; ``firings=False``: every pending one, once."""
        while True:
            await asyncio.sleep(self.settings.poll)
            try:
                await self._follow_pending(store, firings=firings)  # runs' are promised here, or found at start
            except Exception:  # the store away for a moment: look again at the next poll
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from None  # a cancel the store turned into an error: stop
                log.warning("looking for pending webhook deliveries failed", exc_info=True)
                continue
            if not firings:
                return

    def _follow(self, record: WebhookRecord, wait: Any) -> None:
        self._following.add(record.delivery_id)
        self.gw.spawn(self._deliver(record, wait))

    def _require_secret(self) -> None:
        """422 unless the server can sign: an unsigned POST could come from anyone."""
        if self._secret is None:
            raise HttpError(
                f"this server has no webhook secret: start it with --webhook-secret or {SECRET_ENV}", status=422
            )

    async def check_target(self, url: str) -> str:
        """``url`` if a webhook may name it, else 422: its form, and where its host leads when that is quick to tell.

        The lookup is best effort (a host that does not resolve within ``check_timeout`` passes
        here); every delivery checks the addresses again and posts only to those it checked.
        """
        try:
            await resolve_target(url, self._policy, self._resolver, self.settings.check_timeout)
        except WebhookRefused as exc:
            raise HttpError(str(exc), status=422) from None
        except (OSError, TimeoutError):
            pass  # not resolvable now: the delivery decides
        return url

    async def check_promise(self, url: str) -> str:
        """What ``promise`` would refuse, refused before a run starts (422): no secret, a URL or host it may not use."""
        self._require_secret()
        return await self.check_target(url)

    async def for_firings(self, url: str, *, assistant_id: str, metadata: dict[str, Any]) -> FiringWebhook:
        """The webhook every firing of a cron gets (``FiringWebhook``); 422 without a secret or for a refused URL."""
        self._require_secret()
        checked = await self.check_target(url)
        return FiringWebhook(url=checked, metadata={"assistant_id": assistant_id, "run_metadata": metadata})

    async def close(self) -> None:
        """Close the HTTP client (deliveries in flight are the gateway's tasks, cancelled by it)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def promise(self, url: str, *, thread_id: str, submission_id: str, run_id: str, assistant_id: str,
                      metadata: dict[str, Any], wait: Any = None) -> WebhookRecord:  # fmt: skip
        """Record that the run's end is POSTed to ``url`` and start following it; ``wait()`` rests it.

        Refused (422) when the server has no secret to sign with or the URL is malformed; where
        its host leads is checked when it is delivered (a refused one is recorded ``failed``).
        """
        self._require_secret()
        try:
            checked = check_webhook_url(url)
        except WebhookRefused as exc:
            raise HttpError(str(exc), status=422) from None
        record = WebhookRecord(
            delivery_id=new_id(),
            session_id=thread_id,
            submission_id=submission_id,
            run_id=run_id,
            url=checked,
            metadata={"assistant_id": assistant_id, "run_metadata": metadata},
        )
        await self._store().add_webhook(record)
        self._follow(record, wait)
        return record

    async def add(self, record: WebhookRecord) -> WebhookRecord:
        """Store a delivery of one of the ``kinds`` and start following it (422 without a secret or for a bad URL).

        The row is written before this returns, so a restarted server keeps the promise.
        """
        self._require_secret()
        try:
            check_webhook_url(record.url)
        except WebhookRefused as exc:
            raise HttpError(str(exc), status=422) from None
        await self._store().add_webhook(record)
        self._follow(record, None)
        return record

    async def cancel(self, delivery_id: str, reason: str) -> None:
        """End a pending delivery ``failed`` with ``reason`` (a client took its request back); it is never sent."""
        at = now_ms()
        await self._store().finish_webhook(delivery_id, "failed", at, reason[:1000], at)

    def _kind(self, record: WebhookRecord) -> WebhookKind | None:
        kind = record.metadata.get("kind")
        return self._kinds.get(kind) if isinstance(kind, str) else None

    async def _spawned(self, record: WebhookRecord) -> None:
        """Store a delivery a kind spawned (once: a second writer of its id finds it there) and follow it."""
        try:
            await self._store().add_webhook(record)
        except CommitConflict:
            pass  # another server saw the same event first: its row, followed here too (claims decide who sends)
        if record.delivery_id not in self._following:
            self._follow(record, None)

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
        """Wait for the run to rest, then POST until delivered, failed, or taken by another server.

        Whatever goes wrong with this one delivery (its run gone, a row or body that cannot be
        read, a bug) is logged and ends it ``failed``; it never reaches the other deliveries.
        """
        try:
            kind = self._kind(record)
            if wait is not None:
                await wait()
            elif kind is not None:
                async for spawned in kind.due(record):
                    await self._spawned(spawned)
            else:
                await TurnHandle(self.gw.runtime, record.session_id, record.submission_id).wait()
            await self._attempts(record.delivery_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("webhook delivery %s failed", record.delivery_id)
            await self._give_up(record.delivery_id, f"delivery error: {type(exc).__name__}: {exc}")
        finally:
            self._following.discard(record.delivery_id)

    async def _give_up(self, delivery_id: str, reason: str) -> None:
        """Mark a delivery ``failed`` with ``reason``; a row that cannot even be written is not followed again."""
        at = now_ms()
        try:
            await self._store().finish_webhook(delivery_id, "failed", at, reason[:1000], at)
        except Exception:
            log.exception("webhook delivery %s could not be marked failed; this server leaves it", delivery_id)
            self._broken.add(delivery_id)

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
            except (HttpError, WebhookRefused) as exc:  # its run or thread gone, or a refused URL: never sendable
                log.warning("webhook %s failed: %s", delivery_id, exc)
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
        """One POST to the address its host was checked at; ``None`` on a 2xx answer, else why it failed.

        ``WebhookRefused`` when the URL may not be posted to; a lookup that fails is a failed
        attempt (retried). Each address found is tried in turn while none can be connected to.
        """
        assert self._secret is not None
        if self._client is None:
            # No redirects (a 3xx could lead anywhere), no proxies from the environment, and no
            # kept connections: one pinned to an address for one name must not carry another's.
            self._client = httpx.AsyncClient(
                timeout=self.settings.timeout,
                follow_redirects=False,
                trust_env=False,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
        try:
            target = await resolve_target(record.url, self._policy, self._resolver, self.settings.timeout)
        except (OSError, TimeoutError) as exc:
            return f"cannot resolve the webhook host: {type(exc).__name__}: {exc}"
        kind = self._kind(record)
        body, added = await kind.body(record) if kind is not None else (await self._body(record), {})
        stamp = str(now_ms())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "repertory-webhooks",
            "X-Repertory-Delivery": record.delivery_id,
            "X-Repertory-Timestamp": stamp,
            "X-Repertory-Signature": signature(self._secret, stamp, body),
        }
        headers = {**added, **headers}  # a kind's headers never replace the signed ones
        error = "no address"
        for address in target.addresses:
            url, pinned, extensions = target.pinned(address)
            try:
                response = await self._client.post(url, content=body, headers={**headers, **pinned},
                                                   extensions=extensions)  # fmt: skip
            except httpx.ConnectError as exc:  # the next address may answer
                error = f"{type(exc).__name__}: {exc}"
                continue
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {exc}"
            if 200 <= response.status_code < 300:
                return None
            return f"HTTP {response.status_code}"
        return error
