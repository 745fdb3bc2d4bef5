"""Decoded history records a SQL store keeps, so one lineage is decoded once per process, not per load.

Decoding is most of ``load_history``: at depth 10,000, pydantic builds some 50,000 objects from
10 MB of JSON (about 45 ms here, with the SQL another 30 ms), and doing it faster is not possible
with the records being pydantic models. But revisions and entries are immutable and their ids are
minted once, so a record decoded (or written) once is the right answer for that id for as long
as the store holds the row. The cache keeps such records, least recently used first out, within
a budget of message JSON bytes. ``load_history`` walks the cached part of a lineage from its head,
asks the database only for the lineage below the first revision it lacks (nothing, when it holds
the whole lineage), and always asks whether the head still exists: a deletion collects a
revision's row (``history_gc``), and a revision the store no longer holds must load as ``None``
even while its record sits here. A revision that exists keeps its whole lineage (a deletion
collects only what no remaining lineage reaches), so that one check covers every cached ancestor.

What a commit writes is added as it commits, as the JSON it wrote: the committer's own message
objects are not kept, because a message built in Python (arguments replaced at an approval, a
float that JSON cannot hold) need not equal what its JSON reads back as, and a load must return
what the store holds. The first load that reaches such records decodes them all in one call and
keeps the result, so a session's history, a fork of it or an HTTP view of it is decoded at most
once in this process and never fetched again. Records are shared between the loads that return
them, as ``MessageHistory.branch`` shares them between views: nobody may change a record in place
(they are frozen; their lists are a promise).
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from pydantic import TypeAdapter

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.messages import ModelMessage

__all__ = ["DEFAULT_HISTORY_CACHE_BYTES", "CachedLineage", "HistoryCache", "decode_messages"]

DEFAULT_HISTORY_CACHE_BYTES = 32 * 1024 * 1024
"""The default budget: 32 MiB of message JSON (about 32,000 messages of 1 KB)."""

_RECORD_OVERHEAD = 256
"""Bytes counted per cached record beyond its message JSON: the ids, numbers and objects around it."""

_MESSAGES = TypeAdapter(list[ModelMessage])


def decode_messages(jsons: Sequence[str]) -> list[ModelMessage]:
    """Messages from their stored JSON, in one ``validate_json`` over one array, the cyclic GC paused.

    One call rather than one per message, and no collection while tens of thousands of objects
    are made (each full collection would walk all of them again).
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _MESSAGES.validate_json("[" + ",".join(jsons) + "]")
    finally:
        if gc_was_enabled:
            gc.enable()


_Written = tuple[int, str]
"""A committed entry not decoded yet: its creation time and the JSON the commit wrote (a plain
tuple: a commit makes one per new revision, on the hot path)."""


@dataclass(slots=True)
class CachedLineage:
    """The cached top of a lineage: ``revisions``/``entries`` newest first, and where the cache ran out.

    ``missing`` is the first revision (walking down from the head) the cache does not hold, the
    root's parent ``None`` when it holds the whole lineage.
    """

    missing: str | None
    revisions: list[HistoryRevision] = field(default_factory=list)
    entries: list[HistoryEntry] = field(default_factory=list)

    def history(
        self, revision_id: str, older: tuple[list[HistoryRevision], list[HistoryEntry]] = ([], [])
    ) -> MessageHistory:
        """The history headed at ``revision_id``: ``older`` (root first, read from the rows) under this part."""
        revisions, entries = list(older[0]), list(older[1])
        revisions.extend(reversed(self.revisions))
        entries.extend(reversed(self.entries))
        return MessageHistory(revision_id=revision_id, entries=entries, revisions=revisions)


class HistoryCache:
    """Revision id -> (revision, its entry), least recently used first out, within ``max_bytes``.

    ``max_bytes`` 0 turns it off: every load then decodes its whole lineage from the rows.
    """

    def __init__(self, max_bytes: int = DEFAULT_HISTORY_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"history cache budget must be >= 0 bytes, not {max_bytes}")
        self.max_bytes = max_bytes
        self._records: OrderedDict[str, tuple[HistoryRevision, HistoryEntry | _Written, int]] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """The bytes counted for what is cached now (message JSON plus a fixed overhead per record)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._records)

    def add(self, revision: HistoryRevision, entry: HistoryEntry, json_bytes: int) -> None:
        """Keep ``revision`` with its decoded ``entry`` (whose message JSON is ``json_bytes`` long)."""
        if self.max_bytes == 0:
            return
        records = self._records
        if revision.id in records:
            records.move_to_end(revision.id)
            return
        size = json_bytes + _RECORD_OVERHEAD
        records[revision.id] = (revision, entry, size)
        self._bytes += size
        if self._bytes > self.max_bytes:
            self._evict()

    def add_commit(
        self, revisions: Sequence[HistoryRevision], entries: Sequence[HistoryEntry], message_jsons: Sequence[str]
    ) -> None:
        """Keep what one commit wrote: its new revisions, each with its entry's message as written.

        Its entries are decoded at the first load that reaches them. Inlined rather than calling
        ``add`` per revision: it runs after every commit.
        """
        if self.max_bytes == 0:
            return
        records = self._records
        added = 0
        for revision, entry, message_json in zip(revisions, entries, message_jsons, strict=True):
            if revision.id not in records:
                size = len(message_json) + _RECORD_OVERHEAD
                records[revision.id] = (revision, (entry.created_at, message_json), size)
                added += size
        self._bytes += added
        if self._bytes > self.max_bytes:
            self._evict()

    def _evict(self) -> None:
        records = self._records
        while self._bytes > self.max_bytes and records:
            _, (_, _, dropped) = records.popitem(last=False)
            self._bytes -= dropped

    def walk(self, revision_id: str) -> CachedLineage:
        """The cached part of ``revision_id``'s lineage from the head down; each record found is used again."""
        revisions: list[HistoryRevision] = []
        entries: list[HistoryEntry | _Written] = []
        written: list[int] = []
        records = self._records
        current: str | None = revision_id
        while current is not None:
            found = records.get(current)
            if found is None:
                break
            records.move_to_end(current)
            revision, entry, _ = found
            if isinstance(entry, tuple):
                written.append(len(entries))
            revisions.append(revision)
            entries.append(entry)
            current = revision.parent_id
        if written:
            self._decode_written(revisions, entries, written)
        # Every _Written in ``entries`` was replaced by its decoded entry just above.
        return CachedLineage(missing=current, revisions=revisions, entries=cast(list[HistoryEntry], entries))

    def _decode_written(
        self, revisions: list[HistoryRevision], entries: list[HistoryEntry | _Written], written: list[int]
    ) -> None:
        pending = [entries[i] for i in written]
        messages = decode_messages([p[1] for p in pending if isinstance(p, tuple)])
        records = self._records
        for i, was, message in zip(written, pending, messages, strict=True):
            revision = revisions[i]
            assert isinstance(was, tuple)
            entry = HistoryEntry(id=revision.entry_id, created_at=was[0], message=message)
            entries[i] = entry
            if revision.id in records:  # assigning an existing key keeps its place in the order
                records[revision.id] = (revision, entry, records[revision.id][2])

    def clear(self) -> None:
        """Forget every record (a benchmark's cold load; memory back at once)."""
        self._records.clear()
        self._bytes = 0
