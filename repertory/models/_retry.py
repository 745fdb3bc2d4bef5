"""When to retry a failed request, and how long to wait first.

Retries are ours, not the SDK's (it is given ``max_retries=0``): the policy is then the same on
every SDK version, bounded by the model's ``max_retries``, testable, and its last failure becomes a
``ModelError`` that names the status and the number of attempts.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

__all__ = ["RETRY_STATUSES", "backoff", "retry_after", "retryable_status"]

RETRY_STATUSES = frozenset({408, 409, 429})
"""Statuses worth another try besides 5xx: request timeout, lock conflict, rate limit."""


def retryable_status(status: int) -> bool:
    """Whether a response with this status may succeed if sent again."""
    return status in RETRY_STATUSES or status >= 500


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, then ``Retry-After``), or ``None``.

    ``Retry-After`` may be seconds or an HTTP date; a value that parses as neither is ignored.
    """
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            if name == "retry-after-ms":
                continue
            parsed = email.utils.parsedate_to_datetime(value) if _is_date(value) else None
            if parsed is None:
                return None
            seconds = parsed.timestamp() - time.time()
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _is_date(value: str) -> bool:
    return email.utils.parsedate_tz(value) is not None


def backoff(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff for retry number ``attempt`` (0 first), capped, minus up to 25% jitter.

    Jitter spreads out clients that failed together (one rate limit hits every session at once),
    so they do not all come back in the same instant.
    """
    delay = min(base * 2.0 ** min(attempt, 32), cap)
    return delay * (1.0 - 0.25 * random.random())
