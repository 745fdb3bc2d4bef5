"""Decoding a lineage query's rows into a ``MessageHistory``, shared by the SQL backends.

Rows are ``(rev_id, parent_id, entry_id, depth, rev_created_at, entry_created_at, message_json)``
in any order. This is the expensive half of ``load_history`` (the SQL is the cheap half), so it
is written for speed: rows are sorted here on a small key rather than by the database (which would
sort rows that carry whole messages), every message is validated in one ``validate_json`` call
over one JSON array, and the cyclic GC is paused while tens of thousands of objects are made.
What it decodes goes into the store's ``HistoryCache`` (``repertory.storage.history_cache``), so
the next load of the same lineage decodes nothing; the rows may then be only the lineage below
the cached top of the history, which ``decode_lineage`` puts back on top.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from repertory.core.history import HistoryEntry, HistoryIntegrityError, HistoryRevision, MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.trusted import share_fields_sets
from repertory.storage.history_cache import CachedLineage, HistoryCache

__all__ = ["decode_lineage"]

_MESSAGES = TypeAdapter(list[ModelMessage])


def decode_lineage(
    revision_id: str,
    rows: Sequence[Sequence[Any]],
    cache: HistoryCache | None = None,
    cached: CachedLineage | None = None,
) -> MessageHistory:
    """Build the history headed at ``revision_id`` from lineage rows (root first once sorted).

    ``cached`` is the top of the lineage the cache already held: the rows are then the lineage of
    ``cached.missing``, and the history is those rows with ``cached`` on top of them. A lineage
    query follows parent ids, so its rows are one unbroken chain up to the first revision whose
    parent it did not find: a root with a parent is a lineage the store lost part of, and reading
    it raises ``HistoryIntegrityError`` (one comparison) rather than returning the messages below
    the gap as if they were all.
    """
    ordered = sorted(rows, key=lambda r: r[3])
    if ordered and ordered[0][1] is not None:
        raise HistoryIntegrityError(f"history does not hold revision {ordered[0][1]!r}")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        messages = _MESSAGES.validate_json("[" + ",".join(r[6] for r in ordered) + "]")
        revisions = [
            HistoryRevision(id=r[0], parent_id=r[1], entry_id=r[2], depth=r[3], created_at=r[4]) for r in ordered
        ]
        entries = [HistoryEntry(id=r[2], created_at=r[5], message=m) for r, m in zip(ordered, messages, strict=True)]
        # A session keeps its history in memory: a set per record was a third of what the collector
        # scans of it, and these records are frozen, so equal sets can be one (``share_fields_sets``).
        share_fields_sets(revisions)
        share_fields_sets(entries)
        share_fields_sets(messages)
        share_fields_sets([part for m in messages for part in m.parts])
        share_fields_sets([m.origin for m in messages if m.origin is not None])
        if cache is not None:
            for row, revision, entry in zip(ordered, revisions, entries, strict=True):
                cache.add(revision, entry, len(row[6]))
    finally:
        if gc_was_enabled:
            gc.enable()
    if cached is not None and cached.revisions:
        return cached.history(revision_id, (revisions, entries))
    return MessageHistory.of_lineage(revision_id, revisions, entries)
