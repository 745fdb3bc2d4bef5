"""Summary rows for the reports written before the suite existed (store, steps, sessions, export, memory).

Newer reports carry their own ``summary`` (``benchmarks._suite.row``); these functions read the
same kind of rows out of the older reports' JSON, so ``RESULTS.md`` shows every benchmark in one
table without changing what those reports hold. Every value comes from the JSON; a part a report
does not hold (a smoke run, a skipped backend) gives no row rather than a made-up one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks._suite import row

__all__ = ["SUMMARIES", "summary_rows"]

Rows = list[dict[str, Any]]


def _store(r: dict[str, Any]) -> Rows:
    rows: Rows = []
    for c in r.get("commit_throughput", []):
        rows.append(
            row(
                f"commit_session/s, 1 KB messages, one writer (SQLite {c['durability']})",
                c["repertory_commits_per_s"],
                "commits/s",
                10_000 if c["durability"] == "normal" else None,
                at_most=False,
                note=f"{c['ratio']:.2f}x a raw sqlite3 loop doing the same inserts (target >= 0.4)",
            )
        )
    loads = r.get("load_history", {}).get("results", [])
    if loads:
        deepest = loads[-1]
        rows.append(
            row(
                f"load_history at depth {deepest['depth']:,}",
                deepest["median_ms"],
                "ms",
                50.0 if deepest["depth"] == 10_000 else None,
                note=", ".join(f"{x['depth']:,}: {x['median_ms']:.2f} ms" for x in loads),
            )
        )
    disks = r.get("bytes_on_disk", {}).get("results", [])
    if disks:
        d = disks[-1]
        rows.append(
            row(
                f"bytes on disk per appended 1 KB message, depth {d['depth']:,}",
                d["ratio_to_message_json"],
                "x JSON",
                2.0,
                note=", ".join(f"depth {x['depth']:,}: {x['bytes_per_message']:,.0f} B" for x in disks),
            )
        )
    pg = r.get("postgres", {})
    for p in pg.get("results", []):
        rows.append(
            row(
                f"PostgreSQL commit_session/s, {p['writers']} writer(s)",
                p["variants"]["repertory"]["commits_per_s"],
                "commits/s",
                note=f"{p['ratio']:.2f}x a raw psycopg loop (target >= {pg.get('target_ratio', 0.5)})",
            )
        )
    return rows


def _steps(r: dict[str, Any]) -> Rows:
    rows: Rows = []
    steps = r["steps"]
    for s in r["repertory"]["summary"]:
        if s["script"] == "list" and not s["idempotent"]:
            rows.append(row(f"model steps/s, one session, {steps:,} tool steps (SQLite {s['durability']})",
                            s["steps_per_s"], "steps/s"))  # fmt: skip
    ratios = r.get("ratios") or {}
    for x in ratios.get("rows", []):
        if x["target"] is not None:
            rows.append(
                row(
                    f"steps/s against LangGraph ({x['dur']}, {ratios['langgraph_reference']})",
                    x["ratio"],
                    "x",
                    x["target"],
                    at_most=False,
                    note=f"LangGraph {ratios['langgraph_steps_per_s']:,.1f} steps/s",
                )
            )
    disk = r.get("disk", {})
    if disk.get("ratio") is not None:
        rows.append(row(f"bytes on disk after a {steps:,}-step run, repertory / LangGraph", disk["ratio"] * 100, "%",
                        disk["target_max_ratio"] * 100))  # fmt: skip
    for x in (r.get("bytes_by_run_length") or {}).get("rows", [])[-1:]:
        note = f"LangGraph {x['langgraph_bytes_per_step']:,.0f} B/step" if "langgraph_bytes_per_step" in x else ""
        rows.append(row(f"bytes on disk per step, {x['steps']:,}-step run", x["repertory_bytes_per_step"], "B",
                        note=note))  # fmt: skip
    if r.get("peers", {}).get("langgraph", "measured") != "measured":
        rows.append(row("LangGraph comparison", None, "", note=f"not measured: {r['peers']['langgraph']}"))
    return rows


def _sessions(r: dict[str, Any]) -> Rows:
    rows: Rows = []
    traced, rss = r.get("memory_traced", {}), r.get("memory_rss", {})
    if traced.get("finished"):
        states = traced["states"]
        rows.append(
            row(
                f"memory per idle resident session, history cache aside ({traced['sessions']:,} sessions)",
                states["resident_history_cleared"]["traced_bytes_per_session"] / 1024,
                "KB",
                10.0,
                note=f"cache kept {states['resident_history_kept']['traced_bytes_per_session'] / 1024:.1f} KB; "
                f"passivated {states['passivated']['traced_bytes_per_session'] / 1024:.2f} KB (tracemalloc)",
            )
        )
    elif rss.get("finished"):
        rows.append(row(f"RSS growth per idle resident session ({rss['sessions']:,} sessions)",
                        rss["states"]["resident_history_cleared"]["rss_delta_bytes_per_session"] / 1024, "KB",
                        note="tracemalloc part not run"))  # fmt: skip
    creation = r.get("creation", {})
    if creation.get("finished"):
        rows.append(row("sessions created per second (SQLite)", creation["normal"]["runtime_loop"]["median_per_s"],
                        "/s", 2_000, at_most=False))  # fmt: skip
    for c in r.get("concurrency", {}).get("runs", []):
        if c.get("finished"):
            o = c["per_turn_overhead"]
            rows.append(
                row(
                    f"{c['sessions']:,} sessions x {c['turns_per_session']} turns, "
                    f"{c['model_delay_ms']:.0f} ms model, one process",
                    c["turns_per_s"],
                    "turns/s",
                    note=f"wall {c['wall_seconds']:.1f} s; overhead p50 {o['p50_ms']:,.0f} / p99 {o['p99_ms']:,.0f} ms",
                )
            )
    return rows


def _export(r: dict[str, Any]) -> Rows:
    f, t = r["first_export"], r["tree_usage"]
    return [
        row(f"Parquet export, first, {r['store']['entries']:,} history entries", f["rows_per_s"], "rows/s", 300_000,
            at_most=False, note=f"{f['rows']:,} rows in {f['elapsed_s']:.2f} s"),
        row("tree_usage(root) over that export, cold", t["cold_s"] * 1e3, "ms", 1_000.0,
            note=f"warm {t['warm_s'] * 1e3:.0f} ms"),
    ]  # fmt: skip


def _memory(r: dict[str, Any]) -> Rows:
    rows: Rows = []
    largest = max((x["messages"] for x in r["results"]), default=0)
    for x in r["results"]:
        if x["messages"] == largest:
            rows.append(
                row(
                    f"memory recall p50, {x['messages']:,} messages of one resource ({x['backend']})",
                    x["recall"]["p50_ms"],
                    "ms",
                    50.0 if x["messages"] == 100_000 else None,
                    note=f"p95 {x['recall']['p95_ms']:.1f} ms; search alone {x['search']['p50_ms']:.1f} ms",
                )
            )
    return rows


SUMMARIES: dict[str, Callable[[dict[str, Any]], Rows]] = {
    "store": _store,
    "steps": _steps,
    "sessions": _sessions,
    "export": _export,
    "memory": _memory,
}


def summary_rows(report: dict[str, Any]) -> Rows:
    """The report's own ``summary`` if it has one, else the rows read out of it here."""
    if isinstance(report.get("summary"), list):
        return list(report["summary"])
    extract = SUMMARIES.get(str(report.get("benchmark")))
    return extract(report) if extract is not None else []
