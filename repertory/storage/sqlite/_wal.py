"""Keeping a shared SQLite file's write-ahead log bounded when several processes use it.

SQLite checkpoints the log by itself (every 1,000 pages, ``PASSIVE``), but a passive checkpoint can
only start the log over when no reader is still using it; with readers in several processes (Ray
hosts, a client, the CLI) one of them nearly always is, and the log grew with every write
(measured: 101-139 MB of log for 100 MB of data in 25 s, two writer and two reader processes; with
this keeper at a 16 MB limit the log peaked at 63 MB and was emptied as it went). So a
store looks at the log's size at most once a second after a write, and when it is past
``WAL_LIMIT_BYTES`` runs a ``TRUNCATE`` checkpoint on a connection of its own, on a worker thread:
it waits (up to ``CHECKPOINT_BUSY_MS``) for the readers of the moment to finish, copies the log
into the database and empties it. If it cannot get its turn it tries again a second later.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time

__all__ = ["CHECKPOINT_BUSY_MS", "WAL_LIMIT_BYTES", "WalKeeper"]

WAL_LIMIT_BYTES = 64 * 1024 * 1024
CHECKPOINT_BUSY_MS = 2_000
_EVERY_SECONDS = 1.0


class WalKeeper:
    """Watches one database file's ``-wal`` and checkpoints it when it grows past the limit."""

    def __init__(self, path: str, limit: int = WAL_LIMIT_BYTES) -> None:
        self._wal = f"{path}-wal"
        self._path = path
        self.limit = limit
        """The log size in bytes past which a checkpoint runs."""
        self.every_seconds = _EVERY_SECONDS
        """How long after one size check the next may happen (a check is a ``stat`` of the log)."""
        self._looked = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self.checkpoints = 0

    def after_write(self) -> None:
        """Called after a write: at most once a second, a size check; past the limit, a checkpoint."""
        now = time.monotonic()
        if now - self._looked < self.every_seconds or (self._task is not None and not self._task.done()):
            return
        self._looked = now
        try:
            size = os.path.getsize(self._wal)
        except OSError:
            return
        if size > self.limit:
            self._task = asyncio.get_running_loop().create_task(asyncio.to_thread(self._checkpoint))

    async def settle(self) -> bool:
        """Wait for the checkpoint under way, if one is; True if one was started since the keeper began."""
        if self._task is None:
            return False
        with contextlib.suppress(Exception):
            await self._task
        return True

    def _checkpoint(self) -> None:
        conn = sqlite3.connect(self._path, timeout=CHECKPOINT_BUSY_MS / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_MS}")
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                self.checkpoints += 1
        except sqlite3.Error:
            pass  # busy or locked: the next look, a second later, tries again
        finally:
            conn.close()

    async def close(self) -> None:
        """Wait for a checkpoint under way (it holds a connection to the file)."""
        await self.settle()
