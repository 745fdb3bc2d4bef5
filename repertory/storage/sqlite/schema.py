"""SQLite schema, versioned migrations and the checks that make a bad file fail at open.

The store records its schema version in ``repertory_meta`` (not ``PRAGMA user_version``, which
other applications use too), so a SQLite file that belongs to another program is refused instead
of having our tables created inside it.
"""

from __future__ import annotations

import os
import sqlite3

from repertory.errors import StoreError

__all__ = ["ROWID_SCANNED", "ROWID_TOPS", "SCHEMA_VERSION", "ensure_schema", "check_file"]

SCHEMA_VERSION = 13

ROWID_SCANNED = ("events", "history_revisions", "history_entry_rows")
"""The tables an export reads by rowid, whose fallbacks ``rowid_fallbacks`` records (migration 8)."""
ROWID_TOPS = "SELECT " + ", ".join(f"(SELECT COALESCE(MAX(rowid), 0) FROM {t})" for t in ROWID_SCANNED)
"""One row: the largest rowid of each of ``ROWID_SCANNED``, in that order."""

# Entries carry whole messages (often KBs), so they live in a rowid table: WITHOUT ROWID tables
# spill rows over ~1 KB to overflow pages. Revisions, threads and runs are small and keyed by id.
_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE repertory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE history_entries (
               id TEXT PRIMARY KEY,
               created_at INTEGER NOT NULL,
               message TEXT NOT NULL)""",
        """CREATE TABLE history_revisions (
               id TEXT PRIMARY KEY,
               parent_id TEXT,
               entry_id TEXT NOT NULL,
               depth INTEGER NOT NULL,
               created_at INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE threads (
               thread_id TEXT PRIMARY KEY,
               head TEXT,
               created_at INTEGER NOT NULL,
               updated_at INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE runs (
               run_id TEXT PRIMARY KEY,
               thread_id TEXT NOT NULL,
               status TEXT NOT NULL,
               updated_at INTEGER NOT NULL,
               write_seq INTEGER NOT NULL,
               token TEXT,
               state TEXT NOT NULL)""",
        """CREATE INDEX runs_by_thread ON runs (thread_id)""",
    ],
    # The session tree: sessions, durable turns, and the per-session event log.
    2: [
        # A rowid table: the rowid is creation order, which lists children oldest first even when
        # several are created within one millisecond.
        """CREATE TABLE sessions (
               session_id TEXT PRIMARY KEY,
               parent_id TEXT,
               created_at INTEGER NOT NULL,
               record TEXT NOT NULL)""",
        """CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL""",
        """CREATE TABLE turns (
               submission_id TEXT PRIMARY KEY,
               session_id TEXT NOT NULL,
               seq INTEGER NOT NULL,
               status TEXT NOT NULL,
               record TEXT NOT NULL)""",
        """CREATE UNIQUE INDEX turns_by_session ON turns (session_id, seq)""",
        """CREATE INDEX turns_open ON turns (status) WHERE status IN ('queued', 'running')""",
        """CREATE TABLE events (
               session_id TEXT NOT NULL,
               seq INTEGER NOT NULL,
               submission_id TEXT,
               type TEXT NOT NULL,
               at INTEGER NOT NULL,
               data TEXT NOT NULL)""",
        """CREATE UNIQUE INDEX events_by_seq ON events (session_id, seq)""",
    ],
    # Long-term memory (``repertory.memory``): remembered messages with their embeddings, a seq
    # counter per resource, and one working-memory document per resource. Rows carry embeddings
    # (KBs), so they live in rowid tables like history entries.
    3: [
        """CREATE TABLE memory_resources (resource TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE memory_messages (
               resource TEXT NOT NULL,
               seq INTEGER NOT NULL,
               thread_id TEXT NOT NULL,
               role TEXT NOT NULL,
               text TEXT NOT NULL,
               created_at INTEGER NOT NULL,
               embedder TEXT,
               embedding BLOB,
               PRIMARY KEY (resource, seq))""",
        """CREATE TABLE working_memory (
               resource TEXT PRIMARY KEY,
               doc TEXT NOT NULL,
               updated_at INTEGER NOT NULL)""",
    ],
    # The web UI's session listing (``page_sessions``, ``session_counts``) asks which threads rest
    # suspended or failed. Partial: a run row is rewritten every step while ``running``, and those
    # writes never touch this index; only the rare moves into and out of these two statuses do.
    4: [
        """CREATE INDEX runs_resting ON runs (status, thread_id) WHERE status IN ('suspended', 'error')""",
    ],
    # Durable time (``repertory.core.timing``): armed timers, cron schedules, webhook deliveries.
    # Each is found by its due time through an index, so a scheduler asks for what is due now and
    # never reads the rest; the record itself is JSON like every other row.
    5: [
        """CREATE TABLE timers (
               run_id TEXT PRIMARY KEY,
               session_id TEXT NOT NULL,
               token TEXT NOT NULL,
               wake_at INTEGER NOT NULL,
               due_at INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE INDEX timers_due ON timers (due_at)""",
        # A rowid table: the rowid is creation order, which lists schedules oldest first.
        """CREATE TABLE schedules (
               schedule_id TEXT PRIMARY KEY,
               session_id TEXT,
               enabled INTEGER NOT NULL,
               next_at INTEGER,
               record TEXT NOT NULL)""",
        """CREATE INDEX schedules_due ON schedules (next_at) WHERE enabled = 1 AND next_at IS NOT NULL""",
        """CREATE INDEX schedules_by_session ON schedules (session_id)""",
        """CREATE TABLE webhooks (
               delivery_id TEXT PRIMARY KEY,
               submission_id TEXT NOT NULL,
               status TEXT NOT NULL,
               attempts INTEGER NOT NULL,
               due_at INTEGER NOT NULL,
               record TEXT NOT NULL)""",
        """CREATE INDEX webhooks_pending ON webhooks (due_at) WHERE status = 'pending'""",
        """CREATE INDEX webhooks_by_submission ON webhooks (submission_id)""",
    ],
    # Deleting sessions (``delete_sessions``, ``repertory.storage.history_gc``): which thread first
    # wrote each revision, where a thread's lineage joins history another thread wrote (a pin:
    # written when a thread is created on a revision, or a commit attaches to held ones), and
    # entries a second revision came to hold. Only pins and shared entries are indexed, and they
    # are written at forks, not at every step: a commit costs the same pages as before.
    6: [
        """ALTER TABLE history_revisions ADD COLUMN thread_id TEXT""",
        """CREATE TABLE history_pins (
               revision_id TEXT NOT NULL,
               thread_id TEXT NOT NULL,
               PRIMARY KEY (revision_id, thread_id)) WITHOUT ROWID""",
        """CREATE INDEX history_pins_by_thread ON history_pins (thread_id)""",
        """CREATE TABLE history_shared_entries (entry_id TEXT PRIMARY KEY) WITHOUT ROWID""",
        """CREATE INDEX memory_messages_by_thread ON memory_messages (thread_id)""",
    ],
    # A message lives in the row of the revision that first wrote it (issue 21): an ordinary step
    # writes one history row (and one index entry, the id's) instead of an entry row, its id index
    # and a revision row, and one statement less. ``history_entry_rows`` (the old
    # ``history_entries``) keeps the messages written before this version and those a second
    # revision came to name (a compaction re-adding the messages it keeps, a fork's first commit,
    # a head move), which are found by entry id; ``copy_of`` is then the rowid of the revision
    # holding the same message inline, so an export writes each entry once. ``history_entries``
    # becomes a view over both, one row per entry, for whoever reads the table by its old name.
    # Revisions become a rowid table (their rows now carry KBs) whose rowid is write order, which
    # an export scans by; the rowid every row migrated here stopped at is kept in
    # ``repertory_meta`` for positions an export took before the rebuild. Messages are not copied.
    7: [
        """ALTER TABLE history_entries RENAME TO history_entry_rows""",
        """ALTER TABLE history_entry_rows ADD COLUMN copy_of INTEGER""",
        """CREATE TABLE history_revisions_v7 (
               id TEXT PRIMARY KEY,
               parent_id TEXT,
               entry_id TEXT NOT NULL,
               depth INTEGER NOT NULL,
               created_at INTEGER NOT NULL,
               thread_id TEXT,
               entry_created_at INTEGER,
               message TEXT)""",
        """INSERT INTO history_revisions_v7 (id, parent_id, entry_id, depth, created_at, thread_id)
           SELECT r.id, r.parent_id, r.entry_id, r.depth, r.created_at, r.thread_id
           FROM history_revisions AS r LEFT JOIN history_entry_rows AS e ON e.id = r.entry_id
           ORDER BY e.rowid, r.depth""",
        """DROP TABLE history_revisions""",
        """ALTER TABLE history_revisions_v7 RENAME TO history_revisions""",
        """INSERT OR REPLACE INTO repertory_meta (key, value)
           SELECT 'revisions_migrated_v7', CAST(COALESCE(MAX(rowid), 0) AS TEXT) FROM history_revisions""",
        """CREATE VIEW history_entries (id, created_at, message) AS
           SELECT id, created_at, message FROM history_entry_rows WHERE copy_of IS NULL
           UNION ALL
           SELECT entry_id, entry_created_at, message FROM history_revisions WHERE message IS NOT NULL""",
    ],
    # SQLite gives a new row the rowid one above the table's largest, so a deletion that takes a
    # table's newest rows lets the next rows reuse rowids an export has already passed. Each such
    # deletion records here the rowid its table fell back to, numbered (``seq``, never deleted
    # from, so never reused); an export's position carries the last number it saw and resumes
    # from the lowest fallback recorded since (``repertory.storage.export._sqlite_reader``).
    8: [
        """CREATE TABLE rowid_fallbacks (
               seq INTEGER PRIMARY KEY,
               tbl TEXT NOT NULL,
               fell_to INTEGER NOT NULL)""",
    ],
    # An entry a compaction adds again (a kept message) was marked shared, and a shared entry is
    # never collected: deleting a compacted session left its kept messages behind. Now every
    # revision naming such an entry is recorded here (``repertory.storage.history_gc``), and a
    # deletion collects the entry with the last of them. Entries marked before stay marked.
    9: [
        """CREATE TABLE history_entry_namers (
               entry_id TEXT NOT NULL,
               revision_id TEXT NOT NULL,
               PRIMARY KEY (entry_id, revision_id)) WITHOUT ROWID""",
        """CREATE INDEX history_entry_namers_by_revision ON history_entry_namers (revision_id)""",
    ],
    # A tenant's sessions, newest first (``page_sessions(owner=)``: the HTTP server's searches and
    # its web UI under a key): the listing tested every session's JSON back to the oldest for a
    # tenant with few (63 ms a page at 100,000 sessions). The owner never changes, so it gets a
    # column written once at creation and an index (whose entries end in the rowid: a page is a
    # range read backwards in creation order), which the per-turn rewrite of ``record`` leaves
    # alone. The operator's sessions (no owner) are left out of it.
    10: [
        """ALTER TABLE sessions ADD COLUMN owner TEXT""",
        """UPDATE sessions SET owner = json_extract(record, '$.owner')
           WHERE json_extract(record, '$.owner') IS NOT NULL""",
        """CREATE INDEX sessions_by_owner ON sessions (owner) WHERE owner IS NOT NULL""",
    ],
    # A tenant's crons are bounded (the HTTP server's ``max_crons_per_owner``), and counting them
    # must not read every other tenant's schedules: the owner (fixed at creation) gets a column and
    # an index. A record too deep for ``json_extract`` keeps no owner rather than failing the upgrade.
    11: [
        """ALTER TABLE schedules ADD COLUMN owner TEXT""",
        """UPDATE schedules SET owner = CASE WHEN json_valid(record) THEN json_extract(record, '$.owner') END""",
        """CREATE INDEX schedules_by_owner ON schedules (owner)""",
    ],
    # The decision inbox (``repertory.core.inbox``): decisions taken in one process for a session
    # another drives, and the beats of the hosts that drive them. The pending index holds only
    # pending rows, in ``created_at`` order with the rowid (insertion order) after it, which is
    # the pending query's order: a bounded walk from its start, never a sort, and settled rows
    # (which stay until their session is deleted, through ``decision_requests_by_session``)
    # never enter it.
    12: [
        """CREATE TABLE decision_requests (
               request_id TEXT PRIMARY KEY,
               session_id TEXT NOT NULL,
               status TEXT NOT NULL,
               claims INTEGER NOT NULL,
               claimed_until INTEGER NOT NULL,
               created_at INTEGER NOT NULL,
               record TEXT NOT NULL)""",
        """CREATE INDEX decision_requests_pending ON decision_requests (created_at) WHERE status = 'pending'""",
        """CREATE INDEX decision_requests_by_session ON decision_requests (session_id)""",
        """CREATE TABLE host_beats (host_id TEXT PRIMARY KEY, seen_at INTEGER NOT NULL) WITHOUT ROWID""",
    ],
    # Budgets (``repertory.core.budget``): a ledger per scope (``tree:<root>``, ``owner:<owner>``),
    # its budget as JSON and the spend counted against it in columns, which a checkpoint adds to
    # in its own transaction. Small rows found by their scope alone: no rowid, no other index.
    13: [
        """CREATE TABLE ledgers (
               scope TEXT PRIMARY KEY,
               budget TEXT NOT NULL,
               cost REAL NOT NULL DEFAULT 0,
               tokens INTEGER NOT NULL DEFAULT 0,
               model_requests INTEGER NOT NULL DEFAULT 0,
               tool_calls INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID""",
    ],
}


def check_file(path: str) -> None:
    """Refuse a file that is not a SQLite database, or one cut short, before SQLite opens it.

    SQLite itself says "file is not a database" for a foreign header, but a truncated database
    opens fine and fails later, mid-run. The header records the page count; a file shorter than
    that (with no WAL that could hold the missing pages) is truncated.
    """
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read database file {path!r}: {exc.strerror}") from exc
    if size == 0:
        return
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise StoreError(f"cannot read database file {path!r}: {exc.strerror}") from exc
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise StoreError(f"{path!r} is not a SQLite database (bad header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(header[28:32], "big")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    wal = path + "-wal"
    wal_has_pages = os.path.exists(wal) and os.path.getsize(wal) > 32
    if valid_for == change_counter and not wal_has_pages and size < page_count * page_size:
        raise StoreError(
            f"{path!r} is truncated: its header records {page_count} pages of {page_size} bytes "
            f"but the file holds {size} bytes"
        )


def ensure_schema(conn: sqlite3.Connection, where: str) -> None:
    """Create or migrate the schema; refuse newer schemas and other applications' databases."""
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{where} is not a usable SQLite database: {exc}") from exc
    version = 0
    if "repertory_meta" in tables:
        row = conn.execute("SELECT value FROM repertory_meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
    elif tables:
        raise StoreError(
            f"{where} is a SQLite database of another application (tables: {', '.join(sorted(tables)[:5])}); "
            "refusing to add repertory's tables to it"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where} has repertory schema version {version}, newer than this repertory understands "
            f"({SCHEMA_VERSION}); upgrade repertory"
        )
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read inside the write lock: another process may have migrated meanwhile.
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "repertory_meta" in tables:
            row = conn.execute("SELECT value FROM repertory_meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[target]:
                conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO repertory_meta (key, value) VALUES ('schema_version', ?)",
                (str(target),),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
