"""Rendering of the store report: the machine it ran on and the tables printed after a run.

The JSON report holds every figure; these tables are the summary a reader checks first.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pydantic

from benchmarks._common import (
    MESSAGE_BYTES,
    TARGET_COMMITS_PER_S,
    TARGET_DISK_RATIO,
    TARGET_LOAD_MS_AT_10K,
    TARGET_RATIO,
)

__all__ = ["git_state", "machine_info", "percentile", "render"]


def machine_info() -> dict[str, Any]:
    """What the figures were measured on; the commit is read-only git, for telling runs apart."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "sqlite_version": sqlite3.sqlite_version,
        "pydantic_version": pydantic.VERSION,
        "psycopg_version": psycopg.__version__,
        "load_average_before": list(os.getloadavg()),
    }
    info.update(git_state())
    return info


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of ``values`` with linear interpolation; ``values`` need not be sorted."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def git_state() -> dict[str, Any]:
    """The commit measured and whether ``repertory/`` had uncommitted changes (benchmarks say so)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "repertory"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None}
    return {"git_commit": head, "repertory_tree_dirty": bool(dirty)}


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    # First column is a label (left), the rest are figures (right), so digits line up.
    out += [
        "  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]) for r in rows
    ]
    return "\n".join(out)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def render(report: dict[str, Any]) -> str:
    """The human-readable summary of a report: whichever of the SQLite and PostgreSQL parts it holds."""
    m = report["machine"]
    parts = [
        f"repertory store benchmark ({report['mode']}) - {m['platform']}, Python {m['python']}, "
        f"{m['cpu_count']} CPUs, SQLite {m['sqlite_version']}, psycopg {m.get('psycopg_version', '?')}; "
        f"message JSON {MESSAGE_BYTES} B; load average before/after "
        f"{m['load_average_before'][0]:.2f}/{m['load_average_after'][0]:.2f}"
    ]
    if "commit_throughput" in report:
        parts.append(_render_sqlite(report))
    if "postgres" in report:
        parts.append(_render_postgres(report["postgres"]))
    return "\n".join(parts)


def _render_sqlite(report: dict[str, Any]) -> str:
    parts: list[str] = []
    commits: list[dict[str, Any]] = report["commit_throughput"]
    first = commits[0]
    parts.append(
        _table(
            f"\n1. commit_session, one writer, one message per commit; median of {first['rounds']} rounds of "
            f"{first['commits_per_round']:,} (targets: >= {TARGET_COMMITS_PER_S:,}/s, ratio >= {TARGET_RATIO})",
            [
                "durability",
                "repertory/s",
                "(best)",
                "us/commit",
                "raw/s",
                "(best)",
                "us/commit",
                "raw+guards/s",
                "ratio",
                "targets met",
            ],
            [
                [
                    c["durability"],
                    f"{c['repertory_commits_per_s']:,.0f}",
                    f"{c['repertory_best_commits_per_s']:,.0f}",
                    f"{c['repertory_us_per_commit']:.1f}",
                    f"{c['raw_commits_per_s']:,.0f}",
                    f"{c['raw_best_commits_per_s']:,.0f}",
                    f"{c['raw_us_per_commit']:.1f}",
                    f"{c['raw_with_guard_reads_commits_per_s']:,.0f}",
                    f"{c['ratio']:.2f}",
                    f"{_yes(c['meets_throughput_target'])}/{_yes(c['meets_ratio_target'])}",
                ]
                for c in commits
            ],
        )
    )
    loads: list[dict[str, Any]] = report["load_history"]["results"]
    parts.append(
        _table(
            f"\n2. load_history, durability normal (target: <= {TARGET_LOAD_MS_AT_10K:.0f} ms at depth 10,000)",
            ["depth", "median ms", "min ms", "SQL ms", "decode ms", "GC off ms"],
            [
                [
                    f"{r['depth']:,}",
                    f"{r['median_ms']:.2f}",
                    f"{r['min_ms']:.2f}",
                    f"{r['query_median_ms']:.2f}",
                    f"{r['decode_median_ms']:.2f}",
                    f"{r['gc_off_median_ms']:.2f}",
                ]
                for r in loads
            ],
        )
    )
    disks: list[dict[str, Any]] = report["bytes_on_disk"]["results"]
    parts.append(
        _table(
            f"\n3. bytes on disk per appended message (target: flat, <= {TARGET_DISK_RATIO:.0f}x message JSON)",
            ["depth", "appends", "B/message", "x JSON", "WAL B/commit", "WAL pages/commit", "target met"],
            [
                [
                    f"{d['depth']:,}",
                    str(d["appends"]),
                    f"{d['bytes_per_message']:,.0f}",
                    f"{d['ratio_to_message_json']:.2f}",
                    f"{d['wal_bytes_per_commit']:,.0f}",
                    f"{d['wal_pages_per_commit']:.1f}",
                    _yes(d["meets_target"]),
                ]
                for d in disks
            ],
        )
    )
    costs: dict[str, float] = report["component_costs_us"]
    parts.append(
        _table(
            "\nPython pieces of one commit, timed alone", ["piece", "us"], [[k, f"{v:.2f}"] for k, v in costs.items()]
        )
    )
    prof = report["profile"]
    parts.append(
        _table(
            f"\ncProfile, {prof['commits']:,} commits (durability normal; profiler overhead included): "
            f"{prof['profiled_us_per_commit']:.1f} us/commit",
            ["function", "ncalls", "tottime s", "us/commit"],
            [
                [t["function"][:70], str(t["ncalls"]), f"{t['tottime_s']:.3f}", f"{t['tottime_us_per_commit']:.2f}"]
                for t in prof["top_by_tottime"]
            ],
        )
    )
    parts.append(
        _table(
            "\nProfiled time by group (cumulative)",
            ["group", "share", "us/commit"],
            [[k, f"{v['share']:.0%}", f"{v['us_per_commit']:.1f}"] for k, v in prof["groups"].items()],
        )
    )
    private = prof["pydantic_private_attr_reads"]
    parts.append(
        f"  across groups: pydantic private-attribute reads (BaseModel.__getattr__), "
        f"{private['calls_per_commit']:.0f} per commit, {private['share']:.0%} of profiled time, "
        f"{private['us_per_commit']:.1f} us/commit"
    )
    return "\n".join(parts)


_PG_LOOPS = ("repertory", "raw", "raw_pipelined", "raw_function", "raw_function_checked")


def _render_postgres(pg: dict[str, Any]) -> str:
    if "skipped" in pg:
        return f"\n4. PostgreSQL: NOT MEASURED: {pg['skipped']}"
    server = pg["server"]
    results: list[dict[str, Any]] = pg["results"]
    first = results[0]
    parts = [
        _table(
            f"\n4. PostgreSQL {server['server_version']}, commit_session, one message per commit, each writer its "
            f"own thread, pool of {pg['pool_size']}; median of {first['rounds']} rounds (target: ratio >= "
            f"{pg['target_ratio']})\n   durability: {pg['durability']}",
            ["writers", "commits/round", "repertory/s", "(best)", "raw/s", "(best)", "ratio", "target met",
             "raw pipelined/s", "ratio"],
            [
                [
                    str(r["writers"]),
                    f"{r['commits_per_round']:,}",
                    f"{r['variants']['repertory']['commits_per_s']:,.0f}",
                    f"{r['variants']['repertory']['best_commits_per_s']:,.0f}",
                    f"{r['variants']['raw']['commits_per_s']:,.0f}",
                    f"{r['variants']['raw']['best_commits_per_s']:,.0f}",
                    f"{r['ratio']:.2f}",
                    _yes(r["meets_ratio_target"]),
                    f"{r['variants']['raw_pipelined']['commits_per_s']:,.0f}",
                    f"{r['ratio_vs_raw_pipelined']:.2f}",
                ]
                for r in results
            ],
        )
    ]  # fmt: skip
    rows = []
    for r in results:
        for name in _PG_LOOPS:
            v = r["variants"][name]
            ratio = {
                "repertory": "",
                "raw": f"{r['ratio']:.2f}",
                "raw_pipelined": f"{r['ratio_vs_raw_pipelined']:.2f}",
                "raw_function": f"{r['ratio_vs_raw_function']:.2f}",
                "raw_function_checked": f"{r['ratio_vs_raw_function_checked']:.2f}",
            }[name]
            rows.append(
                [
                    f"{r['writers']} x {name}",
                    f"{v['commits_per_s']:,.0f}",
                    f"{v['best_commits_per_s']:,.0f}",
                    f"{v['us_per_commit']:.0f}",
                    f"{v['mean_latency_us']:.0f}",
                    f"{v['client_cpu_us_per_commit']:.0f}",
                    f"{v['client_cpu_cores']:.2f}",
                    ratio,
                ]
            )
    parts.append(
        _table(
            "\nPostgreSQL loops side by side (wall us/commit = 1e6 / aggregate rate; latency = writers x that; "
            "client CPU = this Python process, per commit and in cores busy)",
            [
                "writers x loop",
                "commits/s",
                "(best)",
                "us/commit",
                "latency us",
                "client CPU us",
                "client cores",
                "repertory/this",
            ],
            rows,
        )
    )
    parts += [f"  {name}: {text}" for name, text in pg["variants"].items()]
    return "\n".join(parts)
