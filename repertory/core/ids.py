"""Identifiers minted once at write time: time-ordered, unguessable, cheap.

An id is 26 characters of Crockford base32 (the ULID layout): 48 bits of milliseconds since the
epoch, then 80 random bits. Time order keeps B-tree inserts near the right edge of the index (ids
written in a burst are neighbours on disk), and 80 fresh random bits make an id useless to guess
even from its neighbours, which matters where an id acts as a capability (a session id in a URL).
That is why there is no ULID "monotonic mode" here: counting up within a millisecond would make the
next id predictable. Order within one millisecond is therefore arbitrary; nothing relies on it.

Resume tokens are not ids: they are pure randomness (192 bits) with no timestamp to leak.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["Id", "new_id", "new_token", "now_ms"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds, the unit of every timestamp in repertory."""
    return time.time_ns() // 1_000_000


# Two base32 characters per table entry: the 80 random bits are eight 10-bit lookups (2.4 us
# with base64.b32encode, which is pure Python on 3.11, against ~1 us here).
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_prefix_ms = -1
_prefix = ""


def _time_prefix(ms: int) -> str:
    global _prefix_ms, _prefix
    if ms != _prefix_ms:
        chars = [""] * 10
        value = ms
        for i in range(9, -1, -1):
            chars[i] = _ALPHABET[value & 31]
            value >>= 5
        _prefix_ms, _prefix = ms, "".join(chars)
    return _prefix


def new_id() -> str:
    """Return a fresh 26-character id, sortable by creation millisecond and unguessable."""
    r = int.from_bytes(os.urandom(10), "big")
    p = _PAIRS
    return (
        _time_prefix(now_ms())
        + p[r >> 70]
        + p[(r >> 60) & 1023]
        + p[(r >> 50) & 1023]
        + p[(r >> 40) & 1023]
        + p[(r >> 30) & 1023]
        + p[(r >> 20) & 1023]
        + p[(r >> 10) & 1023]
        + p[r & 1023]
    )


def new_token() -> str:
    """Return a single-use resume token: 192 random bits as 48 hex digits, no timestamp inside.

    Hex rather than URL-safe base64: a base64 token can begin with "-", which a command line
    (``repertory approvals approve TOKEN``) would read as an option.
    """
    return secrets.token_hex(24)


def _check_id(value: str) -> str:
    if "\x00" in value:
        raise ValueError("an id cannot contain a NUL character (PostgreSQL text cannot store it)")
    if not value:
        raise ValueError("an id cannot be empty")
    return value


Id = Annotated[str, AfterValidator(_check_id)]
"""A record id: any non-empty string without NUL, so every store backend can hold it unchanged."""
