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
caller sees everything (the open server of a single user).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from repertory.core.principal import Principal
from repertory.core.tree import SessionRecord
from repertory.http.errors import HttpError

__all__ = ["ApiKeys", "BodyLimit", "Caller", "StreamSlots", "owner_of", "parse_api_key"]

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
    """API key digests, the principal each one speaks for, and which of them are admin keys."""

    def __init__(
        self,
        keys: Mapping[str, Principal] | Iterable[str] | None,
        admin_keys: Mapping[str, Principal] | Iterable[str] | None = None,
    ) -> None:
        self._by_digest = {_digest(key): principal for key, principal in _pairs(keys)}
        admins = {_digest(key): principal for key, principal in _pairs(admin_keys)}
        # An admin key without a name speaks as the user "admin", not as a digest nobody can read.
        for digest, principal in admins.items():
            if principal.kind == "user" and (principal.id or "").startswith("key-"):
                admins[digest] = Principal.user("admin")
        self._admins = frozenset(admins)
        self._by_digest.update(admins)

    @property
    def enabled(self) -> bool:
        """True when keys are required."""
        return bool(self._by_digest)

    def principal(self, headers: Mapping[str, str]) -> tuple[Principal, str]:
        """The caller's principal and the name its stream limit is counted under."""
        caller = self.caller(headers)
        return caller.principal, caller.who

    def caller(self, headers: Mapping[str, str]) -> Caller:
        """The request's ``Caller``: principal, stream-limit name, owner and admin flag.

        A missing key is 401, an unknown one 403.
        """
        if not self.enabled:
            return Caller(Principal.user(), "anonymous")
        key = headers.get("x-api-key")
        if not key:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            key = token.strip() if scheme.lower() == "bearer" else None
        if not key:
            raise HttpError("an API key is required (x-api-key or Authorization: Bearer)", status=401)
        digest = _digest(key)
        principal = self._by_digest.get(digest)
        if principal is None:
            raise HttpError("the API key is not valid", status=403)
        return Caller(principal, digest[:16], owner=owner_of(principal), admin=digest in self._admins)


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
