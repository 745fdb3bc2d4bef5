"""How ``SqliteSessionStore`` writes a commit's history: a message in the row of the revision that wrote it.

A step appends messages it just said, so each of its revisions carries its own message
(``entry_created_at``, ``message``): one row and one statement for the step's history, where an
entry row, its id index and a revision row cost three B-tree inserts and two statements
(``tests/runtime/test_turn_cost.py`` counts them). An entry a second revision may name (a
compaction re-adding the messages it keeps, a fork, a hand-built history) must be found by its id,
and the revisions table has no index on entry ids (one more page per step), so every commit that
does not grow from its base keeps its entries in ``history_entry_rows`` and its revisions without
a message of their own. When a revision holds such a message inline, its row is copied there first
(``copy_of`` = that revision's rowid, which tells an export the entry was written already); those
commits are rare, so they can afford ``entry_holders`` (one pass over the history in memory).

Sharing bookkeeping (``repertory.storage.history_gc``): an entry row a commit found already stored
is marked shared, unless the base's lineage names it (a compaction's kept messages): then every
revision naming it goes into ``history_entry_namers`` (schema version 9), and a deletion collects
it with the last of them. A revision found already stored is pinned by the writer.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from repertory.core.history import MessageHistory
from repertory.storage.commit_plan import CommitDelta, entry_holders
from repertory.storage.history_gc import base_namers
from repertory.storage.sqlite._tree_tables import insert_rows

__all__ = ["INSERT_REVISIONS", "HistoryRows", "history_rows", "write_history"]

_INLINE_HEAD = (
    "INSERT OR IGNORE INTO history_revisions "
    "(id, parent_id, entry_id, depth, created_at, thread_id, entry_created_at, message)"
)
_PLAIN_HEAD = "INSERT OR IGNORE INTO history_revisions (id, parent_id, entry_id, depth, created_at, thread_id)"
_ENTRY_ROWS_HEAD = "INSERT OR IGNORE INTO history_entry_rows (id, created_at, message)"
_SHARE_ENTRY_HEAD = "INSERT OR IGNORE INTO history_shared_entries (entry_id)"
_PIN_HEAD = "INSERT OR IGNORE INTO history_pins (revision_id, thread_id)"
_NAMERS_HEAD = "INSERT OR IGNORE INTO history_entry_namers (entry_id, revision_id)"
_COPY_HELD = (
    "INSERT OR IGNORE INTO history_entry_rows (id, created_at, message, copy_of) "
    "SELECT entry_id, entry_created_at, message, rowid FROM history_revisions "
    "WHERE id IN (SELECT value FROM json_each(?)) AND message IS NOT NULL"
)

INSERT_REVISIONS = _INLINE_HEAD + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
"""One step's revision with its message, as the store writes it (public for ``benchmarks.store``'s raw loop)."""


@dataclass(frozen=True, slots=True)
class HistoryRows:
    """A commit's history rows, serialised before the write lock is taken."""

    inline: Sequence[tuple[Any, ...]]
    """Revisions that carry their message (every revision of a step)."""
    plain: Sequence[tuple[Any, ...]]
    """Revisions of a commit that does not grow from its base: their messages are in ``entries``."""
    entries: Sequence[tuple[str, int, str]]
    """``history_entry_rows`` rows for ``plain``'s entries; one found stored already is marked shared."""
    known: Sequence[tuple[str, int, str]]
    """Rows for ``plain``'s entries that the base's lineage names (a compaction's kept messages): never marked."""
    namers: Sequence[tuple[str, str]]
    """``history_entry_namers`` rows: every revision naming a ``known`` entry (``history_gc.base_namers``)."""
    holders: Sequence[str]
    """Revisions that may hold ``entries``' messages inline, copied before ``entries`` go in."""


def history_rows(history: MessageHistory, delta: CommitDelta, writer: str | None, base: str | None) -> HistoryRows:
    """Split ``delta`` into revisions that carry their message and revisions whose entry has a row of its own.

    Only a delta that grows from its base (a step) is inline: its entries were minted with their
    revisions. Any other commit (a thread's first, a fork's, a compaction's, a head move) may name
    entries stored already, which only ``history_entry_rows`` can find by id, so it writes them
    there as every commit did before version 7; an entry the history shows another revision
    naming may be inline there, so that row is copied first (``COPY_HELD``). An entry a step names
    twice is inline in its first revision and copied for the second. An entry ``base``'s lineage
    names (a compaction's kept message) is stored already, by design: it is not marked shared.
    """
    holders = {} if delta.grows else entry_holders(history, delta)
    again = {} if delta.grows else base_namers(history, base, [entry.id for entry in delta.entries])
    inline: list[tuple[Any, ...]] = []
    plain: list[tuple[Any, ...]] = []
    entries: list[tuple[str, int, str]] = []
    known: list[tuple[str, int, str]] = []
    for rev, entry in zip(delta.revisions, delta.entries, strict=True):
        row = (rev.id, rev.parent_id, rev.entry_id, rev.depth, rev.created_at, writer)
        if not delta.grows or entry.id in holders:
            plain.append(row)
            kept = known if entry.id in again else entries
            kept.append((entry.id, entry.created_at, entry.message.model_dump_json()))
        else:
            inline.append((*row, entry.created_at, entry.message.model_dump_json()))
            holders[entry.id] = rev.id
    if not plain:  # a step: nothing below applies
        # Empty tuples, not the empty lists: a commit's rows wait in the group-commit queue long
        # enough for the collector to promote every list they hold (issue 21), and a step has five.
        return HistoryRows(inline, (), (), (), (), ())
    held = sorted({holders[entry[0]] for entry in entries + known if entry[0] in holders})
    namers = [(eid, rid) for eid, rids in again.items() for rid in rids]
    if again:
        namers += [(rev.entry_id, rev.id) for rev in delta.revisions if rev.entry_id in again]
    return HistoryRows(inline, plain, entries, known, namers, held)


def write_history(conn: sqlite3.Connection, rows: HistoryRows, pin_for: str | None) -> None:
    """Write ``rows`` in the caller's transaction; ``pin_for`` pins revisions found stored already to that thread."""
    if rows.inline and insert_rows(conn, _INLINE_HEAD, 8, rows.inline) < len(rows.inline) and pin_for is not None:
        insert_rows(conn, _PIN_HEAD, 2, [(row[0], pin_for) for row in rows.inline])
    if not rows.plain:
        return
    if rows.holders:
        conn.execute(_COPY_HELD, (json.dumps(rows.holders),))
    if rows.known:
        insert_rows(conn, _ENTRY_ROWS_HEAD, 3, rows.known)
        insert_rows(conn, _NAMERS_HEAD, 2, rows.namers)
    if rows.entries and insert_rows(conn, _ENTRY_ROWS_HEAD, 3, rows.entries) < len(rows.entries):
        insert_rows(conn, _SHARE_ENTRY_HEAD, 1, [(row[0],) for row in rows.entries])
    if insert_rows(conn, _PLAIN_HEAD, 6, rows.plain) < len(rows.plain) and pin_for is not None:
        insert_rows(conn, _PIN_HEAD, 2, [(row[0], pin_for) for row in rows.plain])
