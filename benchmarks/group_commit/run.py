"""The group commit run: each workload on and off in alternating rounds, lone figures, a profile, PostgreSQL."""

from __future__ import annotations

import asyncio
import cProfile
import statistics
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psycopg

from benchmarks.group_commit.report import (
    Category,
    GroupCommitReport,
    Lone,
    LoneRounds,
    LoneSide,
    PlanFigures,
    Profile,
    SessionsRound,
    Side,
    Skipped,
    VariantResult,
)
from benchmarks.group_commit.workload import alternate, lone_commits, lone_session, sessions_round
from benchmarks.harness.profiling import Key, by_category, stats_of
from benchmarks.harness.report import Clock, finish, mode_of
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["FULL", "HEADLINE", "QUICK", "VARIANTS", "Plan", "Variant", "measure"]

PG_TABLES = "repertory.runs, repertory.threads, repertory.history_entries, repertory.history_revisions"


@dataclass(frozen=True)
class Variant:
    """One session workload on one backend."""

    label: str
    backend: str  # "sqlite" or "postgres"
    durability: Durability
    idempotent: bool
    yields: bool = False  # the model hands the loop over once per request, as a real client does
    gc_off: bool = False  # the cyclic garbage collector disabled while timed (an application's choice)
    gc_tuned: bool = False  # the process calls repertory's tune_gc() (rarer collections)


HEADLINE = Variant("SQLite, @tool (2 commits/step)", "sqlite", "normal", False)
VARIANTS = (
    HEADLINE,
    Variant("SQLite, @tool(idempotent=True) (1 commit/step)", "sqlite", "normal", True),
    Variant("SQLite, @tool, model yields once per request", "sqlite", "normal", False, yields=True),
    Variant("SQLite, @tool, cyclic GC disabled while timed", "sqlite", "normal", False, gc_off=True),
    Variant("SQLite, @tool, the process calls tune_gc()", "sqlite", "normal", False, gc_tuned=True),
    Variant("SQLite durability=full, @tool (2 commits/step)", "sqlite", "full", False),
)
PG_VARIANT = Variant("PostgreSQL, @tool (2 commits/step)", "postgres", "normal", False)


@dataclass(frozen=True)
class Plan:
    """Sizes of one mode."""

    sessions: int = 1_000
    steps: int = 10
    rounds: int = 3
    variants: tuple[Variant, ...] = VARIANTS
    lone_commits: int = 3_000
    lone_steps: int = 500
    lone_rounds: int = 6
    postgres: bool = True
    pg_rounds: int = 3
    profile: bool = True


FULL = Plan()
QUICK = Plan(
    sessions=200, steps=4, rounds=1, variants=(HEADLINE,), lone_commits=300, lone_steps=40, lone_rounds=2,
    postgres=False, profile=False,
)  # fmt: skip


class Stores:
    """Fresh stores for each round: a new SQLite file, or an emptied PostgreSQL database."""

    def __init__(self, folder: Path, pg_url: str | None) -> None:
        self.folder = folder
        self.pg_url = pg_url

    async def open(self, variant: Variant, group_commit: bool) -> SessionStore:
        """A fresh, empty store for ``variant`` with group commit ``group_commit``."""
        if variant.backend == "postgres":
            assert self.pg_url is not None
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                if conn.execute("SELECT to_regclass('repertory.runs') IS NOT NULL").fetchone() == (True,):
                    conn.execute(f"TRUNCATE {PG_TABLES}")
            return await PostgresSessionStore.open(self.pg_url, group_commit=group_commit)
        path = self.folder / f"{uuid.uuid4().hex[:10]}.db"
        return await SqliteSessionStore.open(path, durability=variant.durability, group_commit=group_commit)

    def clean(self) -> None:
        """Delete the SQLite files of finished rounds (a 1,000-session round leaves ~20 MB)."""
        for path in self.folder.glob("*.db*"):
            path.unlink(missing_ok=True)


def _side(rounds: list[SessionsRound]) -> Side:
    steps_per_s = float(statistics.median(r.steps_per_s for r in rounds))
    batches = [r.mean_batch for r in rounds if r.mean_batch is not None]
    return Side(
        steps_per_s=steps_per_s,
        cpu_us_per_step=float(statistics.median(r.cpu_us_per_step for r in rounds)),
        wall_us_per_step=1e6 / steps_per_s,
        gc_share_of_wall=statistics.median(r.gc_seconds / r.seconds for r in rounds),
        mean_batch=statistics.median(batches) if batches else None,
        rounds=rounds,
    )


async def _variant(stores: Stores, plan: Plan, variant: Variant, rounds: int) -> VariantResult:
    async def work(store: SessionStore, on: bool) -> SessionsRound:
        return await sessions_round(
            store,
            on,
            plan.sessions,
            plan.steps,
            variant.idempotent,
            yields=variant.yields,
            gc_off=variant.gc_off,
            gc_tuned=variant.gc_tuned,
        )

    # An untimed warm-up of each side (imports, validators, statement caches).
    await alternate(1, lambda on: stores.open(variant, on), lambda s, on: sessions_round(s, on, 20, 2, False))
    found = await alternate(rounds, lambda on: stores.open(variant, on), work)
    stores.clean()
    on, off = _side(found[True]), _side(found[False])
    return VariantResult(
        variant=variant.label,
        backend=variant.backend,
        durability=variant.durability,
        idempotent_tool=variant.idempotent,
        model_yields=variant.yields,
        gc_disabled_while_timed=variant.gc_off,
        tune_gc=variant.gc_tuned,
        sessions=plan.sessions,
        tool_steps_per_run=plan.steps,
        model_steps_per_run=plan.steps + 1,
        on=on,
        off=off,
        ratio_on_over_off=on.steps_per_s / off.steps_per_s,
        cpu_ratio_off_over_on=off.cpu_us_per_step / on.cpu_us_per_step,
    )


async def _lone(stores: Stores, plan: Plan) -> Lone:
    variant = replace(HEADLINE, label="SQLite, one writer")
    commits = await alternate(
        plan.lone_rounds, lambda on: stores.open(variant, on), lambda s, on: lone_commits(s, plan.lone_commits)
    )
    runs = await alternate(
        plan.lone_rounds,
        lambda on: stores.open(variant, on),
        lambda s, on: lone_session(s, on, plan.lone_steps, False),
    )
    stores.clean()

    def side(on: bool) -> LoneSide:
        c = commits[on]
        return LoneSide(
            p50_us=statistics.median(x.p50_us for x in c),
            p90_us=statistics.median(x.p90_us for x in c),
            p99_us=statistics.median(x.p99_us for x in c),
            mean_us=statistics.median(x.mean_us for x in c),
            commits_per_s=statistics.median(x.commits_per_s for x in c),
            session_steps_per_s=statistics.median(x.steps_per_s for x in runs[on]),
            rounds=LoneRounds(commits=c, session=runs[on]),
        )

    on, off = side(True), side(False)
    return Lone(
        commit_message_bytes=1024,
        commits_per_round=plan.lone_commits,
        on=on,
        off=off,
        p50_on_minus_off_us=on.p50_us - off.p50_us,
    )


# Categories of self time, the first that matches a function wins; the rest is stdlib and builtins.
CATEGORIES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("sqlite3 (C: statements, COMMIT, WAL writes)", lambda f, n: f == "~" and "sqlite3.Connection" in n),
    ("psycopg / network", lambda f, n: "psycopg" in f),
    ("repertory.storage (Python)", lambda f, n: "/repertory/storage/" in f),
    ("repertory.runtime: the step loop and tools", lambda f, n: "/repertory/runtime/" in f or "/repertory/core/" in f),
    ("ScriptedModel", lambda f, n: "/repertory/testing" in f),
    ("pydantic (validation, JSON)", lambda f, n: "pydantic" in f or (f == "~" and "pydantic_core" in n)),
    ("asyncio event loop", lambda f, n: "/asyncio/" in f or (f == "~" and "select" in n)),
]


def _category(key: Key) -> str:
    filename, _, name = key
    return next((cat for cat, match in CATEGORIES if match(filename, name)), "other (stdlib, builtins)")


def profile_categories(profile: cProfile.Profile, model_steps: int, wall_us_per_step: float) -> Profile:
    """Self time per category (cProfile), as a share and as microseconds per model step.

    cProfile slows Python calls, not the C inside sqlite3, so the profiled microseconds are given
    as measured and the shares are what to read; garbage collection is timed apart (``GcTimer``),
    since cProfile bills it to whichever function was running.
    """
    totals = by_category(stats_of(profile), _category)
    total = sum(totals.values()) or 1.0
    return Profile(
        profiled_us_per_step=total / model_steps * 1e6,
        unprofiled_us_per_step=wall_us_per_step,
        categories={
            k: Category(share=v / total, profiled_us_per_step=v / model_steps * 1e6) for k, v in totals.items()
        },
    )


async def _profile(stores: Stores, plan: Plan, walls: dict[bool, float]) -> dict[str, Profile]:
    out: dict[str, Profile] = {}
    for on in (True, False):
        profile = cProfile.Profile()
        store = await stores.open(HEADLINE, on)
        try:
            # The collector off: cProfile would bill its pauses to whichever function allocated last;
            # its share is measured apart, on the timed rounds (``gc_share_of_wall``).
            result = await sessions_round(
                store, on, plan.sessions, plan.steps, HEADLINE.idempotent, profile, gc_off=True
            )
        finally:
            await store.close()
        out["on" if on else "off"] = profile_categories(profile, result.model_steps, walls[on])
    stores.clean()
    return out


@dataclass
class Found:
    """What ``_measure`` found, before it becomes the report."""

    sqlite: list[VariantResult]
    lone: Lone
    profile: dict[str, Profile] | None
    postgres: VariantResult | Skipped | None


async def _measure(plan: Plan) -> Found:
    sqlite: list[VariantResult] = []
    profile: dict[str, Profile] | None = None
    postgres: VariantResult | Skipped | None = None
    with tempfile.TemporaryDirectory(prefix="repertory-group-commit-") as folder:
        stores = Stores(Path(folder), None)
        for variant in plan.variants:
            sqlite.append(await _variant(stores, plan, variant, plan.rounds))
        lone = await _lone(stores, plan)
        if plan.profile:
            head = sqlite[0]
            walls = {True: head.on.wall_us_per_step, False: head.off.wall_us_per_step}
            profile = await _profile(stores, plan, walls)
        if plan.postgres:
            try:
                server = TemporaryPostgres()
            except StoreError as exc:
                postgres = Skipped(skipped=str(exc))
            else:
                with server:
                    pg = Stores(Path(folder), server.url)
                    postgres = await _variant(pg, plan, PG_VARIANT, plan.pg_rounds)
    return Found(sqlite, lone, profile, postgres)


def measure(quick: bool, *, postgres: bool = True, plan: Plan | None = None) -> GroupCommitReport:
    """Every series of the plan (quick's or full's unless given); the report with its summary."""
    chosen = plan or (QUICK if quick else FULL)
    if not postgres:
        chosen = replace(chosen, postgres=False)
    clock = Clock.start("group_commit", mode_of(quick))
    found = asyncio.run(_measure(chosen))
    report = GroupCommitReport(
        **clock.frame(),
        durability="SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
        "PostgreSQL synchronous_commit=on",
        plan=PlanFigures(**{k: v for k, v in asdict(chosen).items() if k != "variants"}),
        sqlite=found.sqlite,
        postgres=found.postgres,
        lone=found.lone,
        profile=found.profile,
    )
    return finish(report, clock)
