"""``Logins``: the web UI's server-side sessions, so its cookie holds a random id, never an API key.

A login checks the key once and opens a session: a random id (256 bits) mapped to the key's
``Caller`` and to a CSRF token of its own. The browser's cookie holds only the id; a copied cookie
is worth that session and nothing more, and logging out closes the session here, so the copy stops
working at once. A session closes after ``idle_s`` without a request, and at most ``capacity`` are
kept: past it the least recently used is closed (logged out), so logins cannot grow the server's
memory without bound. Ids are kept only as SHA-256 digests, like the API keys.

Sessions live in this process's memory: a restart logs everybody out (they log in again), and two
server processes behind one address do not share them (a sticky balancer, or one UI process).
"""

from __future__ import annotations

import collections
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from repertory.http.auth import Caller

__all__ = ["Login", "Logins"]


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass
class Login:
    """One logged-in browser: whose key it logged in with, its forms' token, and when it was last used."""

    caller: Caller
    csrf: str
    last_used: float


class Logins:
    """The open UI sessions, least recently used first."""

    def __init__(self, idle_s: float, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        if idle_s <= 0 or capacity < 1:
            raise ValueError("a UI session needs a positive lifetime and room for at least one")
        self.idle_s = idle_s
        self.capacity = capacity
        self._clock = clock
        self._open: collections.OrderedDict[str, Login] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, caller: Caller) -> str:
        """A new session for ``caller``; returns its id (the cookie's value), closing the oldest past capacity."""
        now = self._clock()
        self._expire(now)
        while len(self._open) >= self.capacity:
            self._open.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        self._open[_digest(session_id)] = Login(caller, secrets.token_urlsafe(32), now)
        return session_id

    def find(self, session_id: str) -> Login | None:
        """The open session ``session_id`` names (now used again), or ``None`` (unknown, closed or expired)."""
        if not session_id:
            return None
        digest = _digest(session_id)
        login = self._open.get(digest)
        if login is None:
            return None
        now = self._clock()
        if now - login.last_used > self.idle_s:
            del self._open[digest]
            return None
        login.last_used = now
        self._open.move_to_end(digest)
        return login

    def close(self, session_id: str) -> bool:
        """Close (log out) ``session_id``; returns whether it was open."""
        return self._open.pop(_digest(session_id), None) is not None

    def _expire(self, now: float) -> None:
        """Drop the sessions idle past their lifetime (the least recently used come first)."""
        while self._open:
            oldest = next(iter(self._open.values()))
            if now - oldest.last_used <= self.idle_s:
                break
            self._open.popitem(last=False)
