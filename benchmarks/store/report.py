"""The store benchmark's report: SQLite commit throughput, history loads, bytes on disk, where the time goes,
and the PostgreSQL commit loops (``postgres``)."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.commits import MESSAGE_BYTES
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Machine, Mode, Report, Row, row
from benchmarks.harness.tables import table, yes

__all__ = [
    "TARGET_COMMITS_PER_S",
    "TARGET_DISK_RATIO",
    "TARGET_LOAD_MS_AT_10K",
    "TARGET_PG_RATIO",
    "TARGET_RATIO",
    "BytesOnDisk",
    "CommitProfile",
    "CommitResult",
    "DiskResult",
    "LoadHistory",
    "LoadResult",
    "MeasuredOn",
    "PgCommitResult",
    "PgSection",
    "PgSkipped",
    "PgVariantResult",
    "StoreReport",
    "load_rows",
]

TARGET_COMMITS_PER_S = 10_000
TARGET_RATIO = 0.4
TARGET_PG_RATIO = 0.5
TARGET_LOAD_MS_AT_10K = 50.0
TARGET_DISK_RATIO = 2.0


class CommitResult(BenchModel):
    """Commits per second for repertory and the raw floor, one durability.

    Rates are medians over rounds, with the best round beside them (on a shared machine the best
    round is the least disturbed one). The ratio is the median of per-round ratios: a round of
    repertory and the raw round right after it share whatever load the machine had then.
    """

    durability: str
    commits_per_round: int
    rounds: int
    repertory_commits_per_s: float
    raw_commits_per_s: float
    raw_with_guard_reads_commits_per_s: float
    repertory_best_commits_per_s: float
    raw_best_commits_per_s: float
    ratio: float
    ratio_vs_raw_with_guard_reads: float
    repertory_us_per_commit: float
    raw_us_per_commit: float
    raw_with_guard_reads_us_per_commit: float
    overhead_us_per_commit: float
    repertory_rounds: list[float]
    raw_rounds: list[float]
    raw_with_guard_reads_rounds: list[float]
    meets_throughput_target: bool
    meets_ratio_target: bool


class LoadResult(BenchModel):
    """``load_history`` at one depth: warm and cold (``benchmarks.store.loads``), until used, the SQL alone.

    ``median_ms``/``min_ms`` are the call on a store whose history cache holds the lineage;
    ``used_median_ms`` adds reading ``messages`` and ``context_messages()``. The ``cold_`` figures
    empty the cache before each call, so the rows are read and decoded. ``decode_median_ms`` is the
    cold call less the SQL; ``gc_off_median_ms`` is the cold call with the GC paused (decoding a
    deep history makes hundreds of thousands of objects, which triggers full collections).
    Figures written before the cache existed have no ``used``/``cold`` fields: their ``median_ms``
    was a cold load.
    """

    depth: int
    runs: int
    median_ms: float
    min_ms: float
    used_median_ms: float | None = None
    cold_median_ms: float | None = None
    cold_min_ms: float | None = None
    cold_used_median_ms: float | None = None
    query_median_ms: float
    decode_median_ms: float
    gc_off_median_ms: float


class LoadHistory(BenchModel):
    """``load_history`` at each depth, against the target at depth 10,000.

    ``meets_target`` reads the warm load until its messages are used; ``meets_target_cold`` the
    cold one (the first load of a lineage in a process), which the cache does not help.
    """

    target_ms_at_10000: float = TARGET_LOAD_MS_AT_10K
    meets_target: bool
    meets_target_cold: bool | None = None
    results: list[LoadResult]


class DiskResult(BenchModel):
    """Disk growth and WAL bytes written per appended message, at one starting depth."""

    depth: int
    appends: int
    message_json_bytes: int
    page_size: int
    db_bytes_before: int
    db_bytes_after: int
    bytes_per_message: float
    ratio_to_message_json: float
    wal_bytes_per_commit: float
    wal_pages_per_commit: float
    meets_target: bool


class BytesOnDisk(BenchModel):
    """Bytes per appended message at a shallow and a deep history: flat, and at most 2x the JSON."""

    target_max_ratio: float = TARGET_DISK_RATIO
    flat: bool
    results: list[DiskResult]


class TopFunction(BenchModel):
    """One of the functions with the most own time in the profiled commits."""

    function: str
    ncalls: int
    tottime_s: float
    cumtime_s: float
    tottime_us_per_commit: float


class GroupTime(BenchModel):
    """Cumulative time of one group of functions of the commit path."""

    seconds: float
    share: float
    us_per_commit: float


class PrivateReads(BenchModel):
    """Pydantic private-attribute reads (``BaseModel.__getattr__``), across the groups."""

    calls_per_commit: float
    us_per_commit: float
    share: float


class CommitProfile(BenchModel):
    """cProfile over engine-style commits: top functions by own time, time by group."""

    commits: int
    durability: str
    profiled_total_s: float
    profiled_us_per_commit: float
    summary: str
    top_by_tottime: list[TopFunction]
    groups: dict[str, GroupTime]
    pydantic_private_attr_reads: PrivateReads


class PgVariantResult(BenchModel):
    """One PostgreSQL loop at one concurrency: median and best aggregate rate, wall and client CPU per commit.

    ``client_cpu_cores`` is the client process's CPU time over wall time (median of rounds); the
    server's 64 backends share the same cores, so near 1.0 on this 2-core machine the client is the
    bottleneck.
    """

    name: str
    description: str
    commits_per_s: float
    best_commits_per_s: float
    us_per_commit: float
    mean_latency_us: float
    client_cpu_us_per_commit: float
    client_cpu_cores: float
    rounds: list[float]
    client_cpu_rounds_us: list[float]


class PgCommitResult(BenchModel):
    """All loops at one concurrency, and repertory's ratio to each raw loop (median of per-round ratios)."""

    writers: int
    commits_per_writer_per_round: int
    commits_per_round: int
    rounds: int
    variants: dict[str, PgVariantResult]
    ratio: float
    ratio_vs_raw_pipelined: float
    ratio_vs_raw_function: float
    ratio_vs_raw_function_checked: float
    meets_ratio_target: bool


class PgSection(BenchModel):
    """The PostgreSQL part: the server's settings, the loops, their figures at 1 and 64 writers."""

    server: dict[str, str]
    durability: str
    client: dict[str, Any]
    pool_size: int
    target_ratio: float = TARGET_PG_RATIO
    variants: dict[str, str]
    results: list[PgCommitResult]
    mode: Mode
    load_average_before_after: list[float]
    seconds: float
    load_history: LoadHistory | None = None


class PgSkipped(BenchModel):
    """The PostgreSQL part was not measured (no server binaries), and why."""

    skipped: str


def load_rows(prefix: str, loads: LoadHistory | None) -> list[Row]:
    """Summary rows of the deepest load: warm until used (the target row) and cold until used."""
    results = loads.results if loads is not None else []
    if not results:
        return []
    deepest = results[-1]
    target = TARGET_LOAD_MS_AT_10K if deepest.depth == 10_000 else None
    if deepest.used_median_ms is None or deepest.cold_used_median_ms is None:
        note = ", ".join(f"{x.depth:,}: {x.median_ms:.2f} ms" for x in results)
        return [row(f"{prefix}load_history at depth {deepest.depth:,}", deepest.median_ms, "ms", target, note=note)]
    warm = ", ".join(f"{x.depth:,}: {x.used_median_ms or 0:.2f} ms" for x in results)
    cold = ", ".join(f"{x.depth:,}: {x.cold_used_median_ms or 0:.2f} ms" for x in results)
    return [
        row(
            f"{prefix}load_history at depth {deepest.depth:,}, cached, messages used",
            deepest.used_median_ms,
            "ms",
            target,
            note=f"{warm}; the call alone {deepest.median_ms:.2f} ms",
        ),
        row(
            f"{prefix}load_history at depth {deepest.depth:,}, first in the process, messages used",
            deepest.cold_used_median_ms,
            "ms",
            target,
            note=f"{cold}; the call alone {deepest.cold_median_ms or 0:.2f} ms",
        ),
    ]


class MeasuredOn(BenchModel):
    """When and where a part merged in from another run (``--only``) was measured."""

    mode: str | None = None
    created_at: str | None = None
    machine: Machine | None = None


class StoreReport(Report):
    """``benchmarks/results/store.json``: the SQLite part, the PostgreSQL part, or both."""

    workdir: str
    durability: dict[str, str | list[str] | None]
    message_json_bytes: int
    run_state_json_bytes: int
    commit_throughput: list[CommitResult] | None = None
    load_history: LoadHistory | None = None
    bytes_on_disk: BytesOnDisk | None = None
    component_costs_us: dict[str, float] | None = None
    profile: CommitProfile | None = None
    postgres: PgSection | PgSkipped | None = None
    postgres_measured_on: MeasuredOn | None = None

    def summarise(self) -> list[Row]:
        """Commits/s per durability; load_history at the deepest depth; bytes per message; PostgreSQL/s."""
        rows: list[Row] = []
        for c in self.commit_throughput or []:
            rows.append(
                row(
                    f"commit_session/s, 1 KB messages, one writer (SQLite {c.durability})",
                    c.repertory_commits_per_s,
                    "commits/s",
                    TARGET_COMMITS_PER_S if c.durability == "normal" else None,
                    at_most=False,
                    note=f"{c.ratio:.2f}x a raw sqlite3 loop doing the same inserts (target >= {TARGET_RATIO})",
                )
            )
        rows.extend(load_rows("", self.load_history))
        disks = self.bytes_on_disk.results if self.bytes_on_disk is not None else []
        if disks:
            d = disks[-1]
            rows.append(
                row(
                    f"bytes on disk per appended 1 KB message, depth {d.depth:,}",
                    d.ratio_to_message_json,
                    "x JSON",
                    TARGET_DISK_RATIO,
                    note=", ".join(f"depth {x.depth:,}: {x.bytes_per_message:,.0f} B" for x in disks),
                )
            )
        if isinstance(self.postgres, PgSection):
            for p in self.postgres.results:
                rows.append(
                    row(
                        f"PostgreSQL commit_session/s, {p.writers} writer(s)",
                        p.variants["repertory"].commits_per_s,
                        "commits/s",
                        note=f"{p.ratio:.2f}x a raw psycopg loop (target >= {self.postgres.target_ratio})",
                    )
                )
            rows.extend(load_rows("PostgreSQL ", self.postgres.load_history))
        return rows

    def render(self) -> str:
        """The tables printed after a run."""
        return _tables(self)


# The store report's tables, as printed after a run: whichever of the SQLite and PostgreSQL parts it holds.


PG_LOOPS = ("repertory", "raw", "raw_pipelined", "raw_function", "raw_function_checked")


def _tables(report: StoreReport) -> str:
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
