"""The store report's tables, as printed after a run: whichever of the SQLite and PostgreSQL parts it holds."""

from __future__ import annotations

from benchmarks.harness.commits import MESSAGE_BYTES
from benchmarks.harness.tables import table, yes
from benchmarks.store.report import (
    TARGET_COMMITS_PER_S,
    TARGET_DISK_RATIO,
    TARGET_LOAD_MS_AT_10K,
    TARGET_RATIO,
    LoadHistory,
    PgSection,
    PgSkipped,
    StoreReport,
)

__all__ = ["render"]

PG_LOOPS = ("repertory", "raw", "raw_pipelined", "raw_function", "raw_function_checked")


def render(report: StoreReport) -> str:
    """The human-readable summary of a report."""
    m = report.machine
    before, after = (m.load_average_before or [0.0])[0], (m.load_average_after or [0.0])[0]
    parts = [
        f"repertory store benchmark ({report.mode}) - {m.platform}, Python {m.python}, "
        f"{m.cpu_count} CPUs, SQLite {m.sqlite_version}, psycopg {m.psycopg_version or '?'}; "
        f"message JSON {MESSAGE_BYTES} B; load average before/after {before:.2f}/{after:.2f}"
    ]
    if report.commit_throughput is not None:
        parts.append(_sqlite(report))
    if isinstance(report.postgres, PgSkipped):
        parts.append(f"\n4. PostgreSQL: NOT MEASURED: {report.postgres.skipped}")
    elif isinstance(report.postgres, PgSection):
        parts.append(_postgres(report.postgres))
    return "\n".join(parts)


def _sqlite(report: StoreReport) -> str:
    assert report.commit_throughput is not None and report.load_history is not None
    assert report.bytes_on_disk is not None and report.profile is not None
    parts: list[str] = []
    commits = report.commit_throughput
    first = commits[0]
    parts.append(
        table(
            f"\n1. commit_session, one writer, one message per commit; median of {first.rounds} rounds of "
            f"{first.commits_per_round:,} (targets: >= {TARGET_COMMITS_PER_S:,}/s, ratio >= {TARGET_RATIO})",
            ["durability", "repertory/s", "(best)", "us/commit", "raw/s", "(best)", "us/commit", "raw+guards/s",
             "ratio", "targets met"],
            [
                [
                    c.durability,
                    f"{c.repertory_commits_per_s:,.0f}",
                    f"{c.repertory_best_commits_per_s:,.0f}",
                    f"{c.repertory_us_per_commit:.1f}",
                    f"{c.raw_commits_per_s:,.0f}",
                    f"{c.raw_best_commits_per_s:,.0f}",
                    f"{c.raw_us_per_commit:.1f}",
                    f"{c.raw_with_guard_reads_commits_per_s:,.0f}",
                    f"{c.ratio:.2f}",
                    f"{yes(c.meets_throughput_target)}/{yes(c.meets_ratio_target)}",
                ]
                for c in commits
            ],
        )
    )  # fmt: skip
    parts.append(_loads("\n2. load_history, durability normal", report.load_history))
    parts.append(
        table(
            f"\n3. bytes on disk per appended message (target: flat, <= {TARGET_DISK_RATIO:.0f}x message JSON)",
            ["depth", "appends", "B/message", "x JSON", "WAL B/commit", "WAL pages/commit", "target met"],
            [
                [f"{d.depth:,}", str(d.appends), f"{d.bytes_per_message:,.0f}", f"{d.ratio_to_message_json:.2f}",
                 f"{d.wal_bytes_per_commit:,.0f}", f"{d.wal_pages_per_commit:.1f}", yes(d.meets_target)]
                for d in report.bytes_on_disk.results
            ],
        )
    )  # fmt: skip
    costs = report.component_costs_us or {}
    parts.append(
        table(
            "\nPython pieces of one commit, timed alone", ["piece", "us"], [[k, f"{v:.2f}"] for k, v in costs.items()]
        )
    )
    prof = report.profile
    parts.append(
        table(
            f"\ncProfile, {prof.commits:,} commits (durability normal; profiler overhead included): "
            f"{prof.profiled_us_per_commit:.1f} us/commit",
            ["function", "ncalls", "tottime s", "us/commit"],
            [
                [t.function[:70], str(t.ncalls), f"{t.tottime_s:.3f}", f"{t.tottime_us_per_commit:.2f}"]
                for t in prof.top_by_tottime
            ],
        )
    )
    parts.append(
        table(
            "\nProfiled time by group (cumulative)",
            ["group", "share", "us/commit"],
            [[k, f"{v.share:.0%}", f"{v.us_per_commit:.1f}"] for k, v in prof.groups.items()],
        )
    )
    private = prof.pydantic_private_attr_reads
    parts.append(
        f"  across groups: pydantic private-attribute reads (BaseModel.__getattr__), "
        f"{private.calls_per_commit:.0f} per commit, {private.share:.0%} of profiled time, "
        f"{private.us_per_commit:.1f} us/commit"
    )
    return "\n".join(parts)


def _postgres(pg: PgSection) -> str:
    server = pg.server
    results = pg.results
    first = results[0]
    parts = [
        table(
            f"\n4. PostgreSQL {server['server_version']}, commit_session, one message per commit, each writer its "
            f"own thread, pool of {pg.pool_size}; median of {first.rounds} rounds (target: ratio >= "
            f"{pg.target_ratio})\n   durability: {pg.durability}",
            ["writers", "commits/round", "repertory/s", "(best)", "raw/s", "(best)", "ratio", "target met",
             "raw pipelined/s", "ratio"],
            [
                [
                    str(r.writers),
                    f"{r.commits_per_round:,}",
                    f"{r.variants['repertory'].commits_per_s:,.0f}",
                    f"{r.variants['repertory'].best_commits_per_s:,.0f}",
                    f"{r.variants['raw'].commits_per_s:,.0f}",
                    f"{r.variants['raw'].best_commits_per_s:,.0f}",
                    f"{r.ratio:.2f}",
                    yes(r.meets_ratio_target),
                    f"{r.variants['raw_pipelined'].commits_per_s:,.0f}",
                    f"{r.ratio_vs_raw_pipelined:.2f}",
                ]
                for r in results
            ],
        )
    ]  # fmt: skip
    rows = []
    for r in results:
        ratios = {
            "repertory": "",
            "raw": f"{r.ratio:.2f}",
            "raw_pipelined": f"{r.ratio_vs_raw_pipelined:.2f}",
            "raw_function": f"{r.ratio_vs_raw_function:.2f}",
            "raw_function_checked": f"{r.ratio_vs_raw_function_checked:.2f}",
        }
        for name in PG_LOOPS:
            v = r.variants[name]
            rows.append(
                [
                    f"{r.writers} x {name}",
                    f"{v.commits_per_s:,.0f}",
                    f"{v.best_commits_per_s:,.0f}",
                    f"{v.us_per_commit:.0f}",
                    f"{v.mean_latency_us:.0f}",
                    f"{v.client_cpu_us_per_commit:.0f}",
                    f"{v.client_cpu_cores:.2f}",
                    ratios[name],
                ]
            )
    parts.append(
        table(
            "\nPostgreSQL loops side by side (wall us/commit = 1e6 / aggregate rate; latency = writers x that; "
            "client CPU = this Python process, per commit and in cores busy)",
            ["writers x loop", "commits/s", "(best)", "us/commit", "latency us", "client CPU us", "client cores",
             "repertory/this"],
            rows,
        )
    )  # fmt: skip
    parts += [f"  {name}: {text}" for name, text in pg.variants.items()]
    if pg.load_history is not None:
        parts.append(_loads("\nPostgreSQL load_history", pg.load_history))
    return "\n".join(parts)


def _loads(title: str, loads: LoadHistory) -> str:
    """Warm (cached) and cold (decoded from the rows) loads, each alone and until the messages are used."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return table(
        f"{title} (target: <= {TARGET_LOAD_MS_AT_10K:.0f} ms at depth 10,000; cached until used: "
        f"{yes(loads.meets_target)}, first in the process until used: "
        f"{'-' if loads.meets_target_cold is None else yes(loads.meets_target_cold)})",
        ["depth", "cached ms", "(min)", "+ used ms", "first ms", "(min)", "+ used ms", "SQL ms", "decode ms",
         "first, GC off ms"],
        [
            [f"{r.depth:,}", ms(r.median_ms), ms(r.min_ms), ms(r.used_median_ms), ms(r.cold_median_ms),
             ms(r.cold_min_ms), ms(r.cold_used_median_ms), ms(r.query_median_ms), ms(r.decode_median_ms),
             ms(r.gc_off_median_ms)]
            for r in loads.results
        ],
    )  # fmt: skip
