"""Decoded history records a SQL store keeps, so one lineage is decoded once per process, not per load.

Decoding is most of ``load_history``: at depth 10,000, pydantic builds some 50,000 objects from
10 MB of JSON (about 45 ms here, with the SQL another 30 ms), and doing it faster is not possible
with the records being pydantic models. But revisions and entries are immutable and their ids are
minted once, so a record decoded once is the right answer for that id for as long
as the store holds the row. The cache keeps such records, least recently used first out, within
a budget of message JSON bytes. ``load_history`` walks the cached part of a lineage from its head,
asks the database only for the lineage below the first revision it lacks (nothing, when it holds
the whole lineage), and always asks whether the head still exists: a deletion collects a
revision's row (``history_gc``), and a revision the store no longer holds must load as ``None``
even while its record sits here. A revision that exists keeps its whole lineage (a deletion
collects only what no remaining lineage reaches), so that one check covers every cached ancestor.

Only loads fill it, not commits: the committer holds what it wrote already (a session keeps its
history between steps), and records kept for every commit would stay with every session a host
has passivated or whose history it dropped (``Session.drop_cached_history``), until the budget
pushed them out, which is memory per idle session that ``benchmarks.sessions`` counts. Records
are shared between the loads that return them, as ``MessageHistory.branch`` shares them between
views: nobody may change a record in place (they are frozen; their lists are a promise).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory

__all__ = ["DEFAULT_HISTORY_CACHE_BYTES", "CachedLineage", "HistoryCache"]

DEFAULT_HISTORY_CACHE_BYTES = 32 * 1024 * 1024
"""The default budget: 32 MiB of message JSON (about 32,000 messages of 1 KB)."""

_RECORD_OVERHEAD = 256
"""Bytes counted per cached record beyond its message JSON: the ids, numbers and objects around it."""


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
        return MessageHistory.of_lineage(revision_id, revisions, entries)


class HistoryCache:
    """Revision id -> (revision, its entry), least recently used first out, within ``max_bytes``.

    ``max_bytes`` 0 turns it off: every load then decodes its whole lineage from the rows.
    """

    def __init__(self, max_bytes: int = DEFAULT_HISTORY_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"history cache budget must be >= 0 bytes, not {max_bytes}")
        self.max_bytes = max_bytes
        self._records: OrderedDict[str, tuple[HistoryRevision, HistoryEntry, int]] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """The bytes counted for what is cached now (message JSON plus a fixed overhead per record)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._records)

    def add(self, revision: HistoryRevision, entry: HistoryEntry, json_bytes: int) -> None:
        """Keep ``revision`` with its ``entry`` (whose message JSON is ``json_bytes`` long)."""
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

    def _evict(self) -> None:
        records = self._records
        while self._bytes > self.max_bytes and records:
            _, (_, _, dropped) = records.popitem(last=False)
            self._bytes -= dropped

    def walk(self, revision_id: str) -> CachedLineage:
        """The cached part of ``revision_id``'s lineage from the head down; each record found is used again."""
        out = CachedLineage(missing=None)
        records = self._records
        current: str | None = revision_id
        while current is not None:
            found = records.get(current)
            if found is None:
                break
            records.move_to_end(current)
            revision, entry, _ = found
            out.revisions.append(revision)
            out.entries.append(entry)
            current = revision.parent_id
        out.missing = current
        return out

    def clear(self) -> None:
        """Forget every record (a benchmark's cold load; memory back at once)."""
        self._records.clear()
        self._bytes = 0
