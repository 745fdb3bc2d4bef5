"""The export reader of ``InMemorySessionStore``: its ``snapshot()``, a copy taken in one synchronous step.

Positions: entries, revisions and events carry the number the store gave each when it wrote it
(``MemorySnapshot``), so a position is the highest number seen and a deletion, which leaves gaps,
never moves one; runs carry a write sequence number. Threads, sessions and turns have no change
marker in memory, so each scan reads them all and flags every row for re-reading: the exporter's
fingerprints then write only the rows that changed.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any

from pydantic import JsonValue

from repertory.storage.export._readers import Page, RawRow, RevisionRow, TableScan, reader_for
from repertory.storage.memory import InMemorySessionStore

__all__ = ["MemoryExportReader"]


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def _one(page: Page) -> AsyncIterator[Page]:
    if page.rows:
        yield page


def _top(numbers: list[int], position: int) -> int:
    """The position after a scan of ascending ``numbers``: the last of them, never below the one before."""
    return max(numbers[-1], position) if numbers else position


def _revision(raw: str) -> RevisionRow:
    r = json.loads(raw)
    return (r["id"], r["parent_id"], r["entry_id"], r["depth"], r["created_at"])


class MemoryExportReader:
    """Reads a snapshot of one in-memory store."""

    backend = "memory"

    def __init__(self, store: InMemorySessionStore) -> None:
        self._store = store
        self.source = f"memory:{id(store)}"

    async def __aenter__(self) -> MemoryExportReader:
        snap = self._store.snapshot()  # no await in there: the copy is one consistent moment of the store
        self._entries = snap.entries
        self._revisions = snap.revisions
        self._revision_index = dict(snap.revisions)
        self._entry_index = dict(snap.entries)
        self._runs = snap.runs
        self._threads = snap.threads
        self._sessions = snap.sessions
        self._turns = snap.turns
        self._events = snap.events
        self._entry_numbers = snap.entry_numbers
        self._revision_numbers = snap.revision_numbers
        self._event_numbers = snap.event_numbers
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def _depth(self, head: str | None) -> int:
        raw = None if head is None else self._revision_index.get(head)
        return 0 if raw is None else int(json.loads(raw)["depth"])

    async def scan(self, table: str, position: JsonValue) -> TableScan:
        """Rows past the position (entries, revisions, events, runs) or every row (the rest)."""
        after = position if isinstance(position, int) else 0
        if table == "entries":
            rows: list[RawRow] = []
            start = bisect.bisect_right(self._entry_numbers, after)
            for eid, raw in self._entries[start:]:
                entry = json.loads(raw)
                rows.append((eid, entry["created_at"], _dump(entry["message"])))
            return TableScan(_top(self._entry_numbers, after), _one(Page(rows)))
        if table == "revisions":
            start = bisect.bisect_right(self._revision_numbers, after)
            rows = [_revision(raw) for _, raw in self._revisions[start:]]
            return TableScan(_top(self._revision_numbers, after), _one(Page(rows)))
        if table == "events":
            rows = []
            top = after
            for sid, events in self._events.items():
                numbers = self._event_numbers[sid]
                for raw in events[bisect.bisect_right(numbers, after) :]:
                    e = json.loads(raw)
                    rows.append((sid, e["seq"], e["submission_id"], e["type"], e["at"], _dump(e["data"])))
                top = _top(numbers, top)
            return TableScan(top, _one(Page(rows)))
        if table == "runs":
            rows = [(rid, raw) for rid, seq, _, raw in self._runs if seq > after]
            top = max((seq for _, seq, _, _ in self._runs), default=after)
            return TableScan(max(top, after), _one(Page(rows)))
        if table == "threads":
            rows = []
            for tid, raw in self._threads:
                t = json.loads(raw)
                head = t["history_revision_id"]
                rows.append((tid, head, t["created_at"], t["updated_at"], self._depth(head)))
        else:
            rows = list(self._sessions if table == "sessions" else self._turns)
        return TableScan(None, _one(Page(rows, [True] * len(rows))))

    async def lineage(self, revision_id: str, stop: str | None) -> list[RevisionRow]:
        """Walk parent pointers from ``revision_id`` back to (not including) ``stop``."""
        out: list[RevisionRow] = []
        current: str | None = revision_id
        while current is not None and current != stop and current in self._revision_index:
            rev = _revision(self._revision_index[current])
            out.append(rev)
            current = rev[1]
        return out

    async def entries(self, entry_ids: Sequence[str]) -> list[tuple[str, int, str]]:
        """Entries by id."""
        out: list[tuple[str, int, str]] = []
        for eid in entry_ids:
            raw = self._entry_index.get(eid)
            if raw is not None:
                entry = json.loads(raw)
                out.append((eid, entry["created_at"], _dump(entry["message"])))
        return out


@reader_for.register
def _(store: InMemorySessionStore) -> MemoryExportReader:
    return MemoryExportReader(store)
