"""Reading a stored record back, however it was written: one bad row never fails a listing or a start.

Every store keeps its records (sessions, schedules, webhook deliveries, runs, turns) as JSON text
and reads them with pydantic's JSON parser, which stops at about 200 levels of nesting, while
pydantic itself validates (and so wrote) records nested up to about 254. A record in between
(a thread's metadata, sent before the HTTP server bounded JSON depth) was stored and then failed
every read of every listing it was in: thread search for every tenant, the cron loop, the
webhook follower at start. So a read here goes in up to three steps:

1. pydantic's JSON parser, the fast path every healthy row takes;
2. on failure, Python's ``json`` (which reads far deeper) and pydantic's validation of the
   value: a record too deep for the first step comes back whole, nothing lost;
3. on failure again, and only for the fields a caller names as droppable (a free-form
   ``metadata`` with a default), the record without them, logged as a warning: the row stays
   readable, listable and deletable, and what could not be read is said in the log.

A row that fails all three (its text is no JSON, a required field is broken) is
``RecordUnreadable`` when read by its id; a listing skips it and logs a warning naming the row and
the error (``read_records``). One failure is not absorbed: a record whose ``schema_version`` is
newer than this repertory's raises its validation error wherever it is read, as ``core.state``
promises (a store written by a newer version is not read on by an older one, even in part).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from repertory.errors import RecordUnreadable

__all__ = ["read_record", "read_records", "sort_records"]

log = logging.getLogger("repertory.storage")

M = TypeVar("M", bound=BaseModel)


def read_record(model: type[M], raw: str | bytes, *, what: str, row_id: str, droppable: Sequence[str] = ()) -> M:
    """The ``model`` record stored as ``raw`` (see the module docstring); ``RecordUnreadable`` if it cannot be read.

    ``what`` names the table (``session``) and ``row_id`` the row, for the error and the log;
    ``droppable`` are fields that may be left at their defaults rather than fail the read.
    """
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first: Exception = exc
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # not JSON, or deeper than even ``json`` reads
        raise _unreadable(what, row_id, exc) from None
    try:
        return model.model_validate(value)
    except (ValidationError, RecursionError) as exc:
        first = exc
    failed = _failed_fields(first)
    if failed == {"schema_version"}:
        raise first  # written by a newer repertory: fail fast, never half-understood (``core.state``)
    if isinstance(value, dict) and droppable and failed and failed <= set(droppable):
        try:
            record = model.model_validate({k: v for k, v in value.items() if k not in failed})
        except (ValidationError, RecursionError):
            pass
        else:
            log.warning(
                "%s %r: %s could not be read back and %s left out: %s",
                what,
                row_id,
                ", ".join(sorted(failed)),
                "is" if len(failed) == 1 else "are",
                _short(first),
            )
            return record
    raise _unreadable(what, row_id, first)


def read_records(
    model: type[M], rows: Iterable[tuple[str, str | bytes]], *, what: str, droppable: Sequence[str] = ()
) -> list[M]:
    """The records of ``(row id, raw)`` rows, in order; a row ``read_record`` cannot read is skipped and logged."""
    return sort_records(model, rows, what=what, droppable=droppable)[0]


def sort_records(
    model: type[M], rows: Iterable[tuple[str, str | bytes]], *, what: str, droppable: Sequence[str] = ()
) -> tuple[list[M], list[str]]:
    """The records of the rows ``read_record`` can read, in order, and the ids of those it cannot (each logged).

    For a store that must do something about the rows it cannot read (take them off a due index,
    so they stop crowding a bounded query): it decides what, with the ids this returns.
    """
    records: list[M] = []
    unreadable: list[str] = []
    for row_id, raw in rows:
        try:
            records.append(read_record(model, raw, what=what, row_id=row_id, droppable=droppable))
        except RecordUnreadable as exc:
            log.warning("skipping %s %r, which cannot be read back: %s", what, row_id, exc.reason)
            unreadable.append(row_id)
    return records, unreadable


def _failed_fields(error: Exception) -> set[str]:
    """The top-level fields a validation error is about (empty when it names none: the whole value)."""
    if not isinstance(error, ValidationError):
        return set()
    fields: set[str] = set()
    for problem in error.errors():
        loc = problem.get("loc", ())
        if not loc or not isinstance(loc[0], str):
            return set()
        fields.add(loc[0])
    return fields


def _short(error: Exception) -> str:
    """What went wrong, in one short line: a nested value's validation error repeats its path hundreds of times."""
    if isinstance(error, ValidationError) and error.errors():
        problem = error.errors()[0]
        where = ".".join(str(p) for p in problem.get("loc", ())[:3])
        return f"{where}: {problem.get('msg', 'invalid')}"[:300]
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:300]


def _unreadable(what: str, row_id: str, error: Exception) -> RecordUnreadable:
    reason = _short(error)
    return RecordUnreadable(f"the stored {what} {row_id!r} cannot be read back: {reason}", row_id=row_id, reason=reason)
