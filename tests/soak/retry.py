"""Retrying through faults: what the driver and the approver do when the store or a host is away.

A fault makes calls fail for a while (PostgreSQL stopped, a SQLite write lock held, a Ray host
restarting): the caller backs off and tries again, and notes each failure in ``retries.jsonl``
so the report can say what the faults cost. Only errors a fault can cause are retried:
the store's ``StoreError``, OS and connection errors, and Ray's
own errors (which this module cannot import, so they are recognised by their module). Any other
``RepertoryError`` is an answer, not a fault: ``approve()`` raising the run's ``ModelError`` says
the decision landed and the run it drove ended in error, so trying again would only find the
token used.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from repertory.errors import InvalidResumeToken, NotSuspended, StoreError, WrongSuspensionKind
from tests.soak.records import append_line, now_ms

__all__ = ["retrying", "transient"]

T = TypeVar("T")


def transient(exc: BaseException) -> bool:
    """Whether a fault could have caused ``exc`` (so trying again later may work).

    A used or unknown token is final: the decision was made (here or by a recovered run that
    asked again with a new token), so it is never retried.
    """
    if isinstance(exc, InvalidResumeToken | NotSuspended | WrongSuspensionKind):
        return False
    if isinstance(exc, StoreError | OSError | ConnectionError | TimeoutError):
        return True
    return type(exc).__module__.startswith("ray")


async def retrying(
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    journal: Path,
    who: str,
    attempts: int = 40,
    first_delay: float = 0.1,
    max_delay: float = 2.0,
) -> T:
    """``await call()``, again with jittered backoff while it fails transiently (at most ``attempts`` times)."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not transient(exc) or attempt == attempts:
                raise
            append_line(
                journal,
                {"who": who, "what": what, "error": f"{type(exc).__name__}: {exc}"[:300], "at_ms": now_ms()},
            )
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, max_delay)
    raise AssertionError("unreachable")
