"""What a SQLite database holds on disk: the file, its write-ahead log, after a truncating checkpoint.

A WAL hides or inflates what data costs until it is checkpointed, so disk figures are read after
``PRAGMA wal_checkpoint(TRUNCATE)``; the ``-shm`` index is memory, not data, and reported apart.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DiskUsage", "disk_usage", "file_size", "remove_database", "scalar"]


def file_size(path: Path | str) -> int:
    """Bytes of a file, 0 when it does not exist."""
    try:
        return Path(path).stat().st_size
    except FileNotFoundError:
        return 0


@dataclass
class DiskUsage:
    """Bytes of a database and its WAL, before and after a TRUNCATE checkpoint on a fresh connection."""

    db_bytes_before_checkpoint: int
    wal_bytes_before_checkpoint: int
    checkpoint_busy: int
    db_bytes: int
    wal_bytes: int
    shm_bytes: int
    bytes_on_disk: int
    # What the writer of the database put in it (set by the caller that knows its tables).
    messages: int | None = None
    message_json_bytes: int | None = None
    run_state_json_bytes: int | None = None


def disk_usage(db: Path) -> DiskUsage:
    """Database + WAL bytes before and after ``wal_checkpoint(TRUNCATE)`` on a separate connection."""
    wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
    db_before, wal_before = file_size(db), file_size(wal)
    conn = sqlite3.connect(db)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    return DiskUsage(
        db_bytes_before_checkpoint=db_before,
        wal_bytes_before_checkpoint=wal_before,
        checkpoint_busy=int(busy),
        db_bytes=file_size(db),
        wal_bytes=file_size(wal),
        shm_bytes=file_size(shm),
        bytes_on_disk=file_size(db) + file_size(wal),
    )


def scalar(db: Path, sql: str) -> Any:
    """The first row of ``sql`` on a fresh connection to ``db``."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()
    finally:
        conn.close()


def remove_database(db: Path) -> None:
    """Delete a database file with its WAL and index."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
