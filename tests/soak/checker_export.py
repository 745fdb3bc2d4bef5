"""The chaos checker's export rules: the Parquet export equals the store, and usage rolls up.

Export: each base table holds exactly the store's rows (by id), with the same values in the
columns that identify and describe them and the same message content (a hash of the canonical
JSON); ``messages`` follows each thread's lineage and ``tool_calls`` has each call on the thread
that made it. Usage: each exported run's usage is the store's, and each tree's total, from the
export's rows and from ``repertory.analytics``' ``tree_usage`` macro, is the sum of its runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.soak.checker_evidence import Evidence, LineageBroken, canonical

__all__ = ["check_export", "check_usage"]


def check_usage(ev: Evidence) -> None:
    if ev.export is None:
        return
    fields = (
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "requests",
        "cache_read_tokens",
        "cache_write_tokens",
    )
    store_usage = {rid: _usage(run.state, fields) for rid, run in ev.t.runs.items()}
    exported = {str(r["run_id"]): r for r in ev.export.get("runs", [])}
    for rid, usage in store_usage.items():
        row = exported.get(rid)
        if row is None:
            continue  # reported as export_missing_row
        got = tuple(int(row.get(f) or 0) for f in fields)
        if got != usage:
            ev.add("usage_export_run", f"export usage {got} != store {usage}", run_id=rid)
    roots: dict[str, list[str]] = defaultdict(list)
    for sid, record in ev.t.sessions.items():
        roots[str(record.get("root_id"))].append(sid)
    runs_by_thread: dict[str, list[str]] = defaultdict(list)
    for rid, run in ev.t.runs.items():
        runs_by_thread[run.thread_id].append(rid)
    export_roots: dict[str, list[str]] = defaultdict(list)
    for row in ev.export.get("sessions", []):
        export_roots[str(row.get("root_id"))].append(str(row["session_id"]))
    export_runs_by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ev.export.get("runs", []):
        export_runs_by_thread[str(row.get("thread_id"))].append(row)
    macro = _tree_usage_macro(ev, sorted(roots), fields)
    for root, members in roots.items():
        want = tuple(sum(store_usage[r][i] for s in members for r in runs_by_thread[s]) for i in range(len(fields)))
        got = tuple(
            sum(int(row.get(f) or 0) for s in export_roots.get(root, []) for row in export_runs_by_thread[s])
            for f in fields
        )
        if got != want:
            ev.add("usage_tree_export", f"export's tree total {got} != sum of the store's runs {want}", root_id=root)
        if macro is not None and macro.get(root) != want:
            ev.add("usage_tree_macro", f"tree_usage() says {macro.get(root)}, the runs sum to {want}", root_id=root)


def _tree_usage_macro(ev: Evidence, roots: list[str], fields: tuple[str, ...]) -> dict[str, tuple[int, ...]] | None:
    """The product's own roll-up (``repertory.analytics.tree_usage``) for each root, over the export."""
    try:
        from repertory.analytics import connect
    except ImportError:
        return None
    con = connect(ev.export_dir)
    try:
        out = {}
        cols = ", ".join(fields)
        for root in roots:
            row = con.execute(f"SELECT {cols} FROM tree_usage(?)", [root]).fetchone()
            out[root] = tuple(int(v or 0) for v in row) if row else tuple(0 for _ in fields)
        return out
    finally:
        con.close()


# -- export ----------------------------------------------------------------------------------------


def check_export(ev: Evidence) -> None:
    if ev.export is None:
        ev.add("export_missing", f"no export at {ev.export_dir}")
        return
    t = ev.t
    ex = ev.export
    ev.report.export_rows = sum(len(rows) for rows in ex.values())
    store_rows: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {
        "sessions": {
            (s,): (t.session_parents[s], r.get("root_id"), (r.get("lineage") or {}).get("kind", "root"))
            for s, r in t.sessions.items()
        },
        "threads": {(tid,): (head,) for tid, head in t.threads.items()},
        "runs": {
            (rid,): (r.thread_id, r.status, r.state.get("history_revision_id"), r.state.get("step_index"))
            for rid, r in t.runs.items()
        },
        "entries": {(eid,): (canonical(m),) for eid, m in t.entries.items()},
        "revisions": {(rid,): (r.parent_id, r.entry_id, r.depth) for rid, r in t.revisions.items()},
        "turns": {(sub,): (tr.session_id, tr.seq, tr.status, tr.record.get("run_id")) for sub, tr in t.turns.items()},
        "events": {(sid, seq): (sub, typ, at, canonical(data)) for sid, seq, sub, typ, at, data in t.events},
    }
    columns: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {
        "sessions": lambda r: (r["parent_id"], r["root_id"], r["lineage_kind"]),
        "threads": lambda r: (r["head_revision_id"],),
        "runs": lambda r: (r["thread_id"], r["status"], r["history_revision_id"], r["step_index"]),
        "entries": lambda r: (canonical(r["message"]),),
        "revisions": lambda r: (r["parent_id"], r["entry_id"], r["depth"]),
        "turns": lambda r: (r["session_id"], r["seq"], r["status"], r["run_id"]),
        "events": lambda r: (r["submission_id"], r["type"], r["at"], canonical(r["data"])),
    }
    keys = {"events": ("session_id", "seq")}
    first_col = {
        "sessions": "session_id",
        "threads": "thread_id",
        "runs": "run_id",
        "entries": "entry_id",
        "revisions": "revision_id",
        "turns": "submission_id",
    }
    for table, held in store_rows.items():
        key_cols = keys.get(table, (first_col.get(table, ""),))
        got = {tuple(r[c] for c in key_cols): columns[table](r) for r in ex.get(table, [])}
        for key in held.keys() - got.keys():
            ev.add("export_missing_row", f"{table} row not in the export", table=table, key="/".join(map(str, key)))
        for key in got.keys() - held.keys():
            ev.add("export_extra_row", f"{table} row the store does not hold", table=table, key="/".join(map(str, key)))
        for key in held.keys() & got.keys():
            if held[key] != got[key]:
                kind = "export_message_mismatch" if table == "entries" else "export_value_mismatch"
                ev.add(
                    kind,
                    f"{table}: store {held[key]} != export {got[key]}",
                    table=table,
                    key="/".join(map(str, key)),
                )
    _check_derived(ev, ex)


def _check_derived(ev: Evidence, ex: dict[str, list[dict[str, Any]]]) -> None:
    """``messages`` and ``tool_calls`` follow each thread's lineage as the store holds it."""
    by_thread: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for row in ex.get("messages", []):
        by_thread[str(row["thread_id"])].append((int(row["position"]), str(row["entry_id"])))
    calls_by_thread: dict[str, set[str]] = defaultdict(set)
    for row in ex.get("tool_calls", []):
        calls_by_thread[str(row["thread_id"])].add(str(row["tool_call_id"]))
    everywhere: set[str] = set()
    for tid, head in ev.t.threads.items():
        want: list[str] = []
        own_calls: set[str] = set()  # made in a revision this thread wrote: it must have the row
        lineage_calls: set[str] = set()  # on its lineage: it may have the row (a call it answered)
        if head is not None:
            try:
                lineage = ev.lineage(head)
            except LineageBroken:
                continue
            for rid in lineage:
                rev = ev.t.revisions[rid]
                want.append(rev.entry_id)
                raw = ev.t.entries.get(rev.entry_id)
                for p in (json.loads(raw).get("parts") or []) if raw else []:
                    if isinstance(p, dict) and p.get("type") == "tool-call":
                        cid = str(p.get("tool_call_id"))
                        lineage_calls.add(cid)
                        if rev.thread_id in (tid, None):
                            own_calls.add(cid)
        everywhere |= lineage_calls
        got = [e for _, e in sorted(by_thread.get(tid, []))]
        if got != want:
            ev.add(
                "export_thread_messages",
                f"export's messages ({len(got)}) do not follow the thread's lineage ({len(want)})",
                thread_id=tid,
            )
        exported = calls_by_thread.get(tid, set())
        for cid in sorted(own_calls - exported):
            ev.add("export_tool_calls", "a call the thread made is not in tool_calls", thread_id=tid, tool_call_id=cid)
        for cid in sorted(exported - lineage_calls):
            ev.add(
                "export_tool_calls",
                "tool_calls row for a call not on the thread's lineage",
                thread_id=tid,
                tool_call_id=cid,
            )
    ev.report.tool_calls = len(everywhere)
    for cid in sorted(everywhere - {c for calls in calls_by_thread.values() for c in calls}):
        ev.add("export_tool_calls", "a stored call has no tool_calls row on any thread", tool_call_id=cid)


def _usage(state: dict[str, Any], fields: tuple[str, ...]) -> tuple[int, ...]:
    usage = state.get("usage") or {}
    return tuple(int(usage.get(f) or 0) for f in fields)
