"""Cron expressions in a named time zone: validation and the next fire time, over ``cronsim``.

A schedule's fire times are computed in its time zone's local time and stored as epoch
milliseconds, so "every day at 09:00 in Europe/Berlin" stays at 09:00 local across DST changes.
Where DST skips a local time (02:30 on the spring-forward night) the firing happens at the first
moment after the gap; where DST repeats an hour the firing happens once, the first time. That is
Debian cron's rule, which cronsim implements.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = ["next_fire", "zone"]


def zone(tz: str) -> ZoneInfo:
    """The IANA time zone called ``tz``; ``ValueError`` naming it if there is none."""
    if not isinstance(tz, str) or not tz:
        raise ValueError(f"a time zone is an IANA name such as 'UTC' or 'Europe/Berlin', not {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {tz!r} (an IANA name such as 'UTC' or 'Europe/Berlin')") from None


def next_fire(cron: str, tz: str, after_ms: int) -> int:
    """The first fire time of ``cron`` in ``tz`` strictly after ``after_ms``, in epoch milliseconds.

    A malformed expression or an unknown zone raises ``ValueError`` with cronsim's explanation;
    an expression that can never fire (``0 0 30 2 *``) raises ``ValueError`` too.
    """
    where = zone(tz)
    start = datetime.fromtimestamp(after_ms / 1000, where)
    try:
        it = CronSim(cron, start)
        fire = next(it)
    except CronSimError as exc:
        raise ValueError(f"invalid cron expression {cron!r}: {exc}") from None
    except StopIteration:
        raise ValueError(f"cron expression {cron!r} never fires") from None
    at = int(fire.timestamp() * 1000)
    # cronsim works at second precision from the start it is given; "strictly after" in ms.
    while at <= after_ms:
        at = int(next(it).timestamp() * 1000)
    return at
