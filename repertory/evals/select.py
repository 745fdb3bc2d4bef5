"""``SessionSelect``: which stored sessions a dataset is built from.

Filters combine (all must hold): an agent, an owner, a creation-time range, metadata equality.
The candidates are every session of the store, or, when given, the explicit ``session_ids`` and
the ids a DuckDB query over the Parquet export returns (``sql`` over ``repertory.analytics.connect
(export_dir)``: its first column), together. The forks an eval made are left out unless
``include_evals``: a dataset is built from what production did, not from earlier evals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord
from repertory.errors import SessionNotFound

__all__ = ["EVAL_TAG", "SessionSelect", "select_sessions"]

EVAL_TAG = "eval"
"""The metadata key that marks a session an eval made (its value: the eval's name)."""

_PAGE = 500


class SessionSelect(BaseModel):
    """A selection of stored sessions, and which of their user turns become cases.

    ``created_after``/``created_before`` are epoch milliseconds (after: inclusive, before:
    exclusive). ``metadata`` keeps sessions whose metadata has each of these keys with this value.
    ``turns="each"`` makes a case of every user turn (each cut just before a user message);
    ``"last"`` of the last one only. ``limit`` caps the sessions, oldest first.
    """

    model_config = ConfigDict(extra="forbid")
    agent: str | None = None
    owner: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    session_ids: list[str] | None = None
    sql: str | None = None
    export_dir: str | None = None
    turns: Literal["each", "last"] = "each"
    include_evals: bool = False
    limit: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _sql_needs_export(self) -> SessionSelect:
        if self.sql is not None and self.export_dir is None:
            raise ValueError("a sql selection reads the Parquet export: give export_dir too")
        return self

    def keeps(self, record: SessionRecord) -> bool:
        """Whether ``record`` passes every filter (the candidates' source aside)."""
        if self.agent is not None and record.agent != self.agent:
            return False
        if self.owner is not None and record.owner != self.owner:
            return False
        if self.created_after is not None and record.created_at < self.created_after:
            return False
        if self.created_before is not None and record.created_at >= self.created_before:
            return False
        if not self.include_evals and EVAL_TAG in record.metadata:
            return False
        return all(k in record.metadata and record.metadata[k] == v for k, v in self.metadata.items())


def _ids_from_sql(sql: str, export_dir: str) -> list[str]:
    """The first column of ``sql`` run over the export in ``export_dir``, as session ids, in order."""
    from repertory.analytics import connect

    con = connect(Path(export_dir))
    try:
        rows = con.execute(sql).fetchall()
    finally:
        con.close()
    return [str(row[0]) for row in rows if row and row[0] is not None]


async def select_sessions(store: TreeStore, select: SessionSelect) -> list[SessionRecord]:
    """The sessions ``select`` keeps, oldest first (``SessionNotFound`` for an explicit id the store lacks)."""
    found: list[SessionRecord] = []
    if select.session_ids is not None or select.sql is not None:
        ids = list(select.session_ids or [])
        if select.sql is not None and select.export_dir is not None:
            ids += _ids_from_sql(select.sql, select.export_dir)
        explicit = set(select.session_ids or [])
        for session_id in dict.fromkeys(ids):
            record = await store.load_session(session_id)
            if record is None:
                if session_id in explicit:
                    raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
                continue  # the export may hold sessions deleted since
            found.append(record)
    else:
        before: str | None = None
        while True:
            page = await store.page_sessions(before=before, limit=_PAGE, agent=select.agent, owner=select.owner)
            found.extend(page)
            if len(page) < _PAGE:
                break
            before = page[-1].session_id
    kept = sorted((r for r in found if select.keeps(r)), key=lambda r: (r.created_at, r.session_id))
    return kept if select.limit is None else kept[: select.limit]
