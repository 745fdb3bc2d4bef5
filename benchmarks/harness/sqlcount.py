"""SQL statements and write transactions counted from SQLite trace callbacks on a store's connections."""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["SqlCounter"]

VERB = re.compile(r"^\s*(\w+)")
TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)


class SqlCounter:
    """Counts statements by verb and table, and write transactions, from SQLite trace callbacks."""

    def __init__(self) -> None:
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions = 0
        self.autocommit_writes = 0
        self.in_transaction: dict[int, bool] = {}
        self.lock = threading.Lock()

    def callback(self, conn_id: int) -> Callable[[str], None]:
        """The trace callback for the connection ``conn_id`` (readers run on worker threads)."""

        def trace(sql: str) -> None:
            first = VERB.match(sql)
            verb = first.group(1).upper() if first else "?"
            table = TABLE.search(sql)
            with self.lock:
                self.statements[f"{verb} {table.group(1) if table else ''}".strip()] += 1
                if verb == "BEGIN":
                    self.in_transaction[conn_id] = True
                    self.transactions += 1
                elif verb in ("COMMIT", "ROLLBACK", "END"):
                    self.in_transaction[conn_id] = False
                elif verb in ("INSERT", "UPDATE", "DELETE") and not self.in_transaction.get(conn_id):
                    self.autocommit_writes += 1

        return trace

    def per_turn(self, turns: int) -> tuple[dict[str, float], float]:
        """Statements by kind and write transactions, per turn."""
        return {k: v / turns for k, v in self.statements.most_common()}, (
            self.transactions + self.autocommit_writes
        ) / turns

    @contextmanager
    def tracing(self, store: SqliteSessionStore) -> Iterator[int]:
        """Trace every connection the store has open now (the writer and its readers); yields how many readers."""
        conns = store.connections
        for conn in conns:
            conn.set_trace_callback(self.callback(id(conn)))
        try:
            yield len(conns) - 1
        finally:
            for conn in conns:
                conn.set_trace_callback(None)
