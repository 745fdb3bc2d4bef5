"""Who is calling, whose threads they may see, how much they may send, and how many streams they may hold open.

With API keys configured, every route but ``/info`` (and the OpenAPI document) needs a key, in
``x-api-key`` (what ``langgraph-sdk`` sends) or ``Authorization: Bearer``. A missing key is 401,
an unknown one 403. Each key maps to a ``Principal``; the handles the server drives speak for it,
so every message, resume value and approval over HTTP is stamped with who sent it. Keys are kept
only as SHA-256 digests and compared by digest, so a key never sits in memory or logs in clear
after start-up. Without keys the server is open and every caller is the anonymous user.

Tenancy: a key's owner is the name before ``=`` (``alice=KEY`` and ``user:alice=KEY``: ``alice``;
``mod:linter=KEY``: ``mod:linter``; a bare key: ``key-<digest>``), which is also its principal's
id. A thread belongs to the owner whose key created it (``SessionRecord.owner``; its children and
forks inherit it); another owner's key gets 404 for it and never sees it listed. An admin key
(``admin_keys``) sees and may act on every thread. Without keys nobody owns anything and every
caller sees everything (the open server of a single user). Keys are checked at start (see
``ApiKeys``): long enough, one owner per key, no owner both a tenant and an admin; an address that
sends too many wrong keys is answered 429 for the rest of its minute.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from repertory.core.principal import Principal
from repertory.core.tree import SessionRecord
from repertory.http.errors import HttpError
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits

__all__ = ["ApiKeys", "BodyLimit", "Caller", "FailedKeys", "StreamSlots", "owner_of", "parse_api_key"]

_NAME = re.compile(r"^(?:(user|mod|session):)?([\w.@+-]{1,128})$")
ASGIApp = Any


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def parse_api_key(spec: str) -> tuple[str, Principal]:
    """``KEY`` or ``NAME=KEY``, where NAME is ``alice``, ``user:alice``, ``mod:linter`` or ``session:<id>``.

    A bare key's principal is a user named after the key's digest (never the key itself). Only the
    first ``=`` separates, and only when what precedes it is a valid name and what follows is more
    than base64 padding.
    """
    name, sep, key = spec.partition("=")
    match = _NAME.match(name) if sep else None
    if match is None or not key.strip("="):  # "abc==" is a base64 key with padding, not a name
        key = spec
        if not key:
            raise ValueError("an API key cannot be empty")
        return key, Principal.user(f"key-{_digest(key)[:12]}")
    kind, ident = match[1] or "user", match[2]
    if kind == "mod":
        return key, Principal.mod(ident)
    if kind == "session":
        return key, Principal.session(ident)
    return key, Principal.user(ident)


def owner_of(principal: Principal) -> str:
    """The owner a key's principal stands for: a user's id, else ``kind:id`` (``mod:linter``)."""
    ident = principal.id or ""
    return ident if principal.kind == "user" else f"{principal.kind}:{ident}"


@dataclass(frozen=True)
class Caller:
    """One request's caller: its principal, the name its streams count under, its owner, whether it is an admin.

    ``owner`` is ``None`` on an open server (no keys): nobody owns a thread there.
    """

    principal: Principal
    who: str
    owner: str | None = None
    admin: bool = False

    def sees(self, record: SessionRecord) -> bool:
        """Whether this caller may see (and act on) a session: its owner's, or any for an admin or an open server."""
        return self.admin or self.owner is None or record.owner == self.owner


def _pairs(keys: Mapping[str, Principal] | Iterable[str] | None) -> Iterable[tuple[str, Principal]]:
    if keys is None:
        return ()
    if isinstance(keys, Mapping):
        return keys.items()
    return [parse_api_key(k) for k in keys]


class ApiKeys:
    """API key digests, the principal each one speaks for, and which of them are admin keys.

    The keys are checked whole at construction, so a server never starts with keys that would
    mix tenants up: a key shorter than ``limits.min_key_length``, one key given to two owners,
    or one owner name used by both a tenant key and an admin key (the tenant would own the
    admin's threads) is a ``ValueError`` that names the owner, never the key. One owner may hold
    several keys (a rotation). Wrong keys are counted per client address
    (``limits.failed_keys_per_minute``): past the bound the address is answered 429, whatever
    key it sends, until its minute has passed.
    """

    def __init__(
        self,
        keys: Mapping[str, Principal] | Iterable[str] | None,
        admin_keys: Mapping[str, Principal] | Iterable[str] | None = None,
        *,
        limits: ServerLimits = DEFAULT_LIMITS,
    ) -> None:
        tenants = _checked(_pairs(keys), limits.min_key_length, "--api-key")
        admins = _checked(_pairs(admin_keys), limits.min_key_length, "--admin-key")
        # An admin key without a name speaks as the user "admin", not as a digest nobody can read.
        for digest, principal in admins.items():
            if principal.kind == "user" and (principal.id or "").startswith("key-"):
                admins[digest] = Principal.user("admin")
        for digest in tenants.keys() & admins.keys():
            raise ValueError(f"the key of {owner_of(tenants[digest])!r} is also an admin key")
        both = {owner_of(p) for p in tenants.values()} & {owner_of(p) for p in admins.values()}
        if both:
            raise ValueError(
                f"owner {min(both)!r} is named by a tenant key and by an admin key: "
                "the tenant would own the admin's threads; give them different names"
            )
        self._by_digest = {**tenants, **admins}
        self._admins = frozenset(admins)
        self._failures = FailedKeys(limits.failed_keys_per_minute)

    @property
    def enabled(self) -> bool:
        """True when keys are required."""
        return bool(self._by_digest)

    def principal(self, headers: Mapping[str, str]) -> tuple[Principal, str]:
        """The caller's principal and the name its stream limit is counted under."""
        caller = self.caller(headers)
        return caller.principal, caller.who

    def caller(self, headers: Mapping[str, str], client: str | None = None) -> Caller:
        """The request's ``Caller``: principal, stream-limit name, owner and admin flag.

        A missing key is 401, an unknown one 403; ``client`` (the peer's address) is 429 while it
        has sent too many unknown keys, before its key is even looked at.
        """
        if not self.enabled:
            return Caller(Principal.user(), "anonymous")
        if client is not None:
            self._failures.check(client)
        key = headers.get("x-api-key")
        if not key:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            key = token.strip() if scheme.lower() == "bearer" else None
        if not key:
            raise HttpError("an API key is required (x-api-key or Authorization: Bearer)", status=401)
        digest = _digest(key)
        principal = self._by_digest.get(digest)
        if principal is None:
            if client is not None:
                self._failures.record(client)
            raise HttpError("the API key is not valid", status=403)
        return Caller(principal, digest[:16], owner=owner_of(principal), admin=digest in self._admins)


def _checked(pairs: Iterable[tuple[str, Principal]], min_length: int, option: str) -> dict[str, Principal]:
    """``{digest: principal}``, refusing short keys and a key given to two different principals."""
    found: dict[str, Principal] = {}
    for key, principal in pairs:
        if len(key) < min_length:
            raise ValueError(
                f"{option}: the key of {owner_of(principal)!r} has {len(key)} characters; "
                f"keys need at least {min_length} (make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
        digest = _digest(key)
        earlier = found.setdefault(digest, principal)
        if earlier != principal:
            raise ValueError(
                f"{option}: one key is given to two owners ({owner_of(earlier)!r} and {owner_of(principal)!r})"
            )
    return found


class FailedKeys:
    """Wrong API keys per client address in fixed one-minute windows, with a bounded memory.

    Behind a proxy every client shares the proxy's address, so one tenant guessing keys locks
    out the others for the rest of the minute: such deployments put the limit in the proxy.
    """

    WINDOW_S = 60.0
    MAX_ADDRESSES = 65_536

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._windows: dict[str, tuple[float, int]] = {}

    def check(self, client: str) -> None:
        """429 (with ``retry_after`` seconds) while ``client`` has used up its failures of this minute."""
        start, count = self._windows.get(client, (0.0, 0))
        left = start + self.WINDOW_S - self._clock()
        if count >= self.per_minute and left > 0:
            raise HttpError(
                f"too many wrong API keys from this address; try again in {math.ceil(left)} s",
                status=429,
                retry_after=math.ceil(left),
            )

    def record(self, client: str) -> None:
        """One more wrong key from ``client``."""
        now = self._clock()
        start, count = self._windows.get(client, (now, 0))
        if now - start >= self.WINDOW_S:
            start, count = now, 0
        if client not in self._windows and len(self._windows) >= self.MAX_ADDRESSES:
            self._forget_oldest(now)
        self._windows[client] = (start, count + 1)

    def _forget_oldest(self, now: float) -> None:
        expired = [c for c, (start, _) in self._windows.items() if now - start >= self.WINDOW_S]
        for client in expired or [next(iter(self._windows))]:
            del self._windows[client]


class StreamSlots:
    """At most ``limit`` open streams per caller; one more is 429 until one closes."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_streams_per_key must be >= 1")
        self.limit = limit
        self._open: dict[str, int] = {}

    def take(self, who: str) -> None:
        """Count one more open stream for ``who``; 429 when it would exceed the limit."""
        if self._open.get(who, 0) >= self.limit:
            raise HttpError(f"too many open streams for this key (at most {self.limit}); close one first", status=429)
        self._open[who] = self._open.get(who, 0) + 1

    def give_back(self, who: str) -> None:
        """One stream of ``who`` closed."""
        left = self._open.get(who, 0) - 1
        if left > 0:
            self._open[who] = left
        else:
            self._open.pop(who, None)

    @contextlib.contextmanager
    def hold(self, who: str) -> Iterator[None]:
        """Hold a slot for the duration of a ``with`` block."""
        self.take(who)
        try:
            yield
        finally:
            self.give_back(who)


class BodyLimit:
    """ASGI middleware: request bodies over ``max_bytes`` are answered 413 before the app reads them.

    A declared ``Content-Length`` is checked at once; a chunked body is read up to the limit and
    then handed to the app as it arrived.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _too_large(send, self.max_bytes)
            return
        messages: list[dict[str, Any]] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await _too_large(send, self.max_bytes)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Any, limit: int) -> None:
    body = f'{{"detail":"request body larger than {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
