"""``JsonGuard``: every JSON request body is checked before any route reads it (depth, finite numbers).

A route that parses a body itself (FastAPI's models, ``await request.json()`` in a protocol's
route, a JSON-RPC handler) reads whatever Python's ``json`` reads: ``NaN`` and ``Infinity``, and
nesting as deep as the interpreter recurses. A value past what the stores read back was stored
and then failed every listing it was in, and a ``NaN`` failed the answer after the thread, run or
cron was already created (a retry made a second one). So the check is not left to each route: it
is an ASGI middleware in front of the whole app, present routes and future ones alike, and it
answers before any of them runs.

A body is checked unless it is a form (``application/x-www-form-urlencoded``,
``multipart/form-data``: the web UI's), whatever content type it claims, because a route may parse
JSON it was sent as ``text/plain`` or with no type at all. Bytes are decoded as ``json.loads``
decodes them. A refused body is answered 422 in the shape of the app's other validation errors::

    {"detail": "body.metadata.a[3].b: nested deeper than 64 levels",
     "errors": [{"loc": ["body", "metadata", "a", 3, "b"], "msg": "nested deeper than 64 levels"}]}

A body that is no JSON at all is passed on untouched: the route says what it expected. The body is
read whole here, so this middleware belongs inside ``BodyLimit``, which bounds it first.
"""

from __future__ import annotations

import json
from typing import Any

from repertory.core.json_limits import DEFAULT_MAX_DEPTH, JsonRefused, parse_json

__all__ = ["JsonGuard", "refusal_body"]

_FORMS = (b"application/x-www-form-urlencoded", b"multipart/form-data")


def refusal_body(refused: JsonRefused) -> dict[str, Any]:
    """The 422 answer to a refused JSON value, shaped as the app's ``RequestValidationError`` answers."""
    return {"detail": str(refused), "errors": [{"loc": list(refused.loc), "msg": refused.reason}]}


class JsonGuard:
    """ASGI middleware: a JSON request body too deep or holding a non-finite number is answered 422 at once."""

    def __init__(self, app: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        if max_depth < 1:
            raise ValueError("max_depth must be >= 1")
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _is_form(scope):
            await self.app(scope, receive, send)
            return
        messages: list[dict[str, Any]] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body.strip():
            try:
                parse_json(body, max_depth=self.max_depth)
            except JsonRefused as refused:
                await _answer(send, 422, refusal_body(refused))
                return
            except ValueError:
                pass  # no JSON: the route decides what to say about it

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _is_form(scope: dict[str, Any]) -> bool:
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() in _FORMS
    return False


async def _answer(send: Any, status: int, content: dict[str, Any]) -> None:
    body = json.dumps(content, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
