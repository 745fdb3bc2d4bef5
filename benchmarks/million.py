"""Million: 1,000,000 sessions in PostgreSQL, 1% active in one host process, the rest passivated.

What one node costs a shared PostgreSQL, measured on a ``TemporaryPostgres`` server (Debian
postgresql-15, loopback, fsync and synchronous_commit on) and the real store:

1. Creation: 2,000 sessions through ``rt.create_sessions`` (the store's own path, a transaction
   per session), then the rest in bulk by ``COPY`` into the store's tables, rows exactly as
   ``PgTreeTables.create_session`` writes them (the store has no batch creation), 50,000 a
   transaction, both tables in the same one: both rates, the WAL the bulk wrote; then ``ANALYZE``.
2. Sizes: every table (with its TOAST and indexes) and index of the ``repertory`` schema, and the
   database, over the sessions, after creation and again after the turns.
3. One host process (a child interpreter, ``Runtime.start(store="postgresql://...")``) activates 1%
   of the sessions, half then all, each by its first handle and one turn (each session its own
   client, 100 at once), reading its RSS after each step; per step the turns' rate, the host's
   and the server's CPU (psutil), the WAL written and the server's transactions, WAL records,
   full-page images and syncs per turn. A second child does the same on other sessions under
   tracemalloc (Python heap per session). Sessions are picked at random in disjoint stripes of
   their creation order (``ord % 4``), so no child runs a session another ran.
4. Cold activations (the untraced child), one at a time: activation alone (``host.actor`` of a
   never-run session), the two store reads it makes, first handle + first turn (with its WAL and
   server counters), and after ``passivate_idle(0)`` a session that ran a turn, activated again
   and run a second turn; a cProfile of 200 activations alone. Target: activation p50 <= 5 ms.
5. Sizing, worked out from this run's figures: a node is one core running one host; its first
   turns/s is 1 / the host CPU per turn, and 100 such nodes need that rate x the PostgreSQL CPU
   per turn of server cores, and that rate x the WAL per turn of WAL bandwidth; the database holds
   the bytes per passivated session x 1,000,000 or 100,000,000, and grows by its growth per turn.

``python -m benchmarks.million [--quick] [--sessions N] [--samples N]`` (quick: 20,000 sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs in the dev install
import psycopg

from benchmarks.harness.children import ChildFailed, run_json
from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.profiling import label, stats_of, top_by_tottime, total_tottime
from repertory import Agent
from repertory.core.ids import now_ms
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.tree import NewSession
from repertory.runtime.host import LocalHost
from repertory.storage.postgres.connection import normalise_url
from repertory.testing import ScriptedModel
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.tree.runtime import Runtime

AGENT = "assistant"
SESSIONS = {"full": 1_000_000, "quick": 20_000}
SAMPLES = {"full": 1_000, "quick": 50}
ACTIVE_FRACTION = 0.01
API_SAMPLE = 2_000
BATCH = 50_000
WARMUP = 20
SEND_BATCH = 100
NODES = 100
COUNTERS = {"transactions": "server transactions", "wal_records": "WAL records", "wal_fpi": "WAL full-page images",
            "wal_syncs": "WAL syncs"}  # fmt: skip
RELATIONS = """
SELECT c.relname, c.relkind,
       CASE WHEN c.relkind = 'r' THEN pg_total_relation_size(c.oid) ELSE pg_relation_size(c.oid) END
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'repertory' AND c.relkind IN ('r', 'i')
"""


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}  # usage given: no token-estimate memo


def _agents() -> dict[str, Agent]:
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(_reply), instructions="Answer in one word.")}


Conn = psycopg.AsyncConnection[Any]


async def _one(conn: Conn, sql: str, *args: Any) -> Any:
    row = await (await conn.execute(sql, args or None)).fetchone()
    assert row is not None
    return row[0]


async def _wal_bytes(conn: Conn, since: str) -> int:
    """WAL bytes written since the position ``since`` (``pg_current_wal_lsn``)."""
    return int(await _one(conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", since))


def _pg_cpu(postmaster: int) -> float:
    """User + system CPU of the server so far: the postmaster with the children it reaped, and its live children."""
    main_ = psutil.Process(postmaster)
    cpu = main_.cpu_times()
    total = float(cpu.user + cpu.system + cpu.children_user + cpu.children_system)
    for child in main_.children():
        try:
            c = child.cpu_times()
            total += float(c.user + c.system)
        except psutil.NoSuchProcess:
            continue  # exited meanwhile: its CPU is the postmaster's children's once reaped
    return total


async def _counters(conn: Conn) -> dict[str, int]:
    """The server's transactions committed and WAL records, full-page images and syncs so far.

    From ``pg_stat_database`` and ``pg_stat_wal``, read after the backends' once-a-second stats
    flush. Every autocommit statement is a transaction, so reads count too; a WAL sync is a flush
    to disk, shared by every transaction that committed behind it.
    """
    await asyncio.sleep(1.2)
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        "SELECT d.xact_commit, w.wal_records, w.wal_fpi, w.wal_sync FROM pg_stat_database AS d, pg_stat_wal AS w "
        "WHERE d.datname = current_database()"
    )
    row = await cur.fetchone()
    assert row is not None
    return dict(zip(COUNTERS, (int(x) for x in row), strict=True))


def _per(after: dict[str, int], before: dict[str, int], turns: int) -> dict[str, float]:
    # The two readings' own statements (two transactions) are taken off.
    return {k: (after[k] - before[k] - (2 if k == "transactions" else 0)) / max(1, turns) for k in after}


async def _bulk_create(conninfo: str, count: int) -> tuple[float, float, int]:
    """COPY ``count`` root sessions; (seconds building records, seconds in COPY, WAL bytes)."""
    build = copy = 0.0
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        start = str(await _one(conn, "SELECT pg_current_wal_lsn()::text"))
        for first in range(0, count, BATCH):
            t0 = time.perf_counter()
            records = [NewSession(agent=AGENT).record(now_ms()) for _ in range(min(BATCH, count - first))]
            rows = [(r.session_id, r.created_at, r.model_dump_json()) for r in records]
            t1 = time.perf_counter()
            async with conn.transaction(), conn.cursor() as cur:
                sql = "COPY repertory.sessions (session_id, parent_id, created_at, record) FROM STDIN"
                async with cur.copy(sql) as out:
                    for sid, at, text in rows:
                        await out.write_row((sid, None, at, text))
                sql = "COPY repertory.threads (thread_id, head, created_at, updated_at) FROM STDIN"
                async with cur.copy(sql) as out:
                    for sid, at, _ in rows:
                        await out.write_row((sid, None, at, at))
            build, copy = build + t1 - t0, copy + time.perf_counter() - t1
        await conn.execute("ANALYZE repertory.sessions")
        await conn.execute("ANALYZE repertory.threads")
        return build, copy, await _wal_bytes(conn, start)


async def _sizes(conninfo: str) -> dict[str, Any]:
    """Every table (with its indexes and TOAST) and index of the schema, the database, the sessions and runs."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        relations = await (await conn.execute(RELATIONS)).fetchall()
        return {
            "sessions": int(await _one(conn, "SELECT count(*) FROM repertory.sessions")),
            "turned": int(await _one(conn, "SELECT count(DISTINCT thread_id) FROM repertory.runs")),
            "runs": int(await _one(conn, "SELECT count(*) FROM repertory.runs")),
            "database": int(await _one(conn, "SELECT pg_database_size(current_database())")),
            "relations": [(name, "table" if kind == "r" else "index", int(size)) for name, kind, size in relations],
        }


# -- the host child ------------------------------------------------------------------------------


def _picks(total: int, stripe: int, count: int, seed: int) -> list[int]:
    """``count`` random ords ``o`` with ``o % 4 == stripe`` among ``1..total`` (never materialised)."""
    pool = range(stripe if stripe else 4, total + 1, 4)
    return random.Random(seed).sample(pool, min(count, len(pool)))


async def _ids(conn: Conn, ords: list[int]) -> list[str]:
    cur = await conn.execute("SELECT session_id FROM repertory.sessions WHERE ord = ANY(%s)", (ords,))
    return [r[0] for r in await cur.fetchall()]


async def _run_turns(rt: Runtime, ids: list[str]) -> None:
    async def one(session_id: str) -> None:
        await (await (await rt.session(session_id)).send("hi")).wait()

    for first in range(0, len(ids), SEND_BATCH):  # each session its own client, SEND_BATCH at a time
        await asyncio.gather(*(one(sid) for sid in ids[first : first + SEND_BATCH]))


async def _timed(items: list[str], call: Callable[[str], Awaitable[Any]]) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        await call(item)
        out.append(time.perf_counter() - t0)
    return out


async def _host(spec: dict[str, Any]) -> dict[str, Any]:
    """One host process: the active fraction step by step, then (untraced) the cold samples."""
    total, traced, samples, seed = int(spec["sessions"]), bool(spec["traced"]), int(spec["samples"]), int(spec["seed"])
    conninfo, _ = normalise_url(spec["url"], 5.0)
    out: dict[str, Any] = {"memory": [], "phases": []}
    async with (
        await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn,
        await Runtime.start(store=spec["url"], agents=_agents(), idle_timeout=3600.0) as rt,
    ):
        host = rt.host
        assert isinstance(host, LocalHost)
        active = await _ids(conn, _picks(total, 2 if traced else 0, spec["steps"][-1], seed))
        cold = await _ids(conn, _picks(total, 1, 4 * samples + 200, seed + 1))
        await _run_turns(rt, await _ids(conn, _picks(total, 3, WARMUP, seed + 2)))  # imports, caches, the pool

        def reading(n: int) -> None:
            gc.collect()
            traced_bytes = tracemalloc.get_traced_memory()[0] if traced else 0
            rss = psutil.Process().memory_info().rss
            out["memory"].append({"active": n, "resident": host.resident, "rss": rss, "traced": traced_bytes})

        if traced:
            tracemalloc.start()
        reading(0)
        done = 0
        for upto in spec["steps"]:
            counters = await _counters(conn)
            lsn = str(await _one(conn, "SELECT pg_current_wal_lsn()::text"))
            cpu, pg_cpu, t0 = time.process_time(), _pg_cpu(spec["postmaster"]), time.perf_counter()
            await _run_turns(rt, active[done:upto])
            out["phases"].append({
                "turns": upto - done, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu,
                "pg_cpu": _pg_cpu(spec["postmaster"]) - pg_cpu, "wal": await _wal_bytes(conn, lsn),
                "per_turn": _per(await _counters(conn), counters, upto - done),
            })  # fmt: skip
            done = upto
            reading(done)
        tracemalloc.stop()
        if not traced:
            out["cold"] = await _cold(rt, host, conn, cold, active, samples, seed)
    return out


async def _cold(
    rt: Runtime, host: LocalHost, conn: Conn, cold: list[str], warm: list[str], samples: int, seed: int
) -> dict[str, Any]:
    """Cold samples, one at a time on an otherwise idle loop."""
    alone, reads, turned = cold[:samples], cold[samples : 2 * samples], cold[2 * samples : 3 * samples]
    got: dict[str, Any] = {"activation alone": await _timed(alone, host.actor)}
    got["its store read: load_session"] = await _timed(reads, rt.store.load_session)
    got["its store read: list_runs(limit=1)"] = await _timed(reads, lambda sid: rt.store.list_runs(sid, limit=1))
    handle_s, total_s = [], []
    lsn, counters = str(await _one(conn, "SELECT pg_current_wal_lsn()::text")), await _counters(conn)
    for sid in turned:
        t0 = time.perf_counter()
        handle = await rt.session(sid)
        t1 = time.perf_counter()
        await handle.run("hi")
        total_s.append(time.perf_counter() - t0)
        handle_s.append(t1 - t0)
    got["wal"] = await _wal_bytes(conn, lsn) / max(1, len(turned))
    got["per_turn"] = _per(await _counters(conn), counters, len(turned))
    got["first handle alone"], got["first handle + first turn"] = handle_s, total_s
    profile = cProfile.Profile()
    profile.enable()
    for sid in cold[3 * samples : 3 * samples + 200]:
        await host.actor(sid)
    profile.disable()
    stats = stats_of(profile)
    got["profile"] = (total_tottime(stats), "; ".join(f"{label(k)} {v[2]:.3f} s ({v[1]:,} calls)"
                                                      for k, v in top_by_tottime(stats, 10)))  # fmt: skip
    host.passivate_idle(0)
    again = random.Random(seed + 3).sample(warm, min(samples, len(warm)))
    got["activation of a passivated session that ran a turn"] = await _timed(again, host.actor)
    second = []
    for sid in again:
        handle = await rt.session(sid)
        t0 = time.perf_counter()
        await handle.run("again")
        second.append(time.perf_counter() - t0)
    got["second turn after that activation"] = second
    return got


# -- the parent ----------------------------------------------------------------------------------


def _host_figures(figures: Figures, run: str, sessions: int, got: dict[str, Any]) -> None:
    memory = got["memory"]
    for m in memory:
        figures.size(f"host RSS, {m['active']:,} active ({run})", m["rss"], note=f"{m['resident']:,} resident")
    name, key = ("host RSS", "rss") if run == "untraced" else ("Python heap (tracemalloc)", "traced")
    for a, b in itertools.pairwise(memory):
        figures.size(f"{name} per active session, {a['active']:,} -> {b['active']:,} active",
                     (b[key] - a[key]) / (b["active"] - a["active"]))  # fmt: skip
    first, last = memory[0], memory[-1]
    figures.size(f"{name} per active session ({last['active']:,} active of {sessions:,})",
                 (last[key] - first[key]) / max(1, last["active"] - first["active"]))  # fmt: skip
    done = 0
    for p in got["phases"]:
        at = f"first turns {done:,} -> {done + p['turns']:,} ({run})"
        done += p["turns"]
        figures.value(f"{at}: turns/s", p["turns"] / p["seconds"], "turns/s", note=f"{SEND_BATCH} clients at once")
        figures.time(f"{at}: host CPU", p["cpu"])
        figures.time(f"{at}: PostgreSQL CPU", p["pg_cpu"])
        figures.size(f"{at}: WAL", p["wal"])
        figures.size(f"{at}: WAL per turn", p["wal"] / p["turns"])
        for key, what in COUNTERS.items():
            figures.value(f"{at}: {what} per turn", p["per_turn"][key], "per turn")
    cold = got.get("cold")
    if cold is None:
        return
    for name in ("activation alone", "its store read: load_session", "its store read: list_runs(limit=1)",
                 "first handle alone", "first handle + first turn",
                 "activation of a passivated session that ran a turn",
                 "second turn after that activation"):  # fmt: skip
        target = Target(0.005) if name == "activation alone" else None
        figures.time(f"cold session, one at a time: {name}", cold[name], target=target,
                     note="never-run session, not resident" if target else "")  # fmt: skip
    figures.size("cold session, one at a time: WAL per first turn", cold["wal"])
    for key, what in COUNTERS.items():
        figures.value(f"cold session, one at a time: {what} per first turn", cold["per_turn"][key], "per turn")
    seconds, top = cold["profile"]
    figures.time("200 cold activations under cProfile", seconds, note="this process's own time, profiler included")
    figures.fact("where 200 cold activations spend their time (cProfile, self time)", top)


def _size_figures(figures: Figures, when: str, sizes: dict[str, Any]) -> None:
    n = max(1, sizes["sessions"])
    figures.size(f"database, {when}", sizes["database"], note=f"{sizes['sessions']:,} sessions")
    figures.size(
        f"tables with their indexes per session, {when}", sum(b for _, k, b in sizes["relations"] if k == "table") / n
    )
    figures.count(f"sessions with a turn, {when}", sizes["turned"])
    for name, kind, nbytes in sorted(sizes["relations"], key=lambda r: -r[2]):
        if nbytes > 4 * 8192:  # the rest are empty tables' first pages
            figures.size(f"{name} ({kind}) per session, {when}", nbytes / n)


def _sizing(figures: Figures, created: dict[str, Any], after: dict[str, Any], got: dict[str, Any]) -> None:
    """100 single-core nodes on one PostgreSQL, from this run's figures (see the docstring, part 5)."""
    phases = got["phases"]
    turns = sum(p["turns"] for p in phases)
    host_cpu = sum(p["cpu"] for p in phases) / turns
    pg_cpu = sum(p["pg_cpu"] for p in phases) / turns
    wal = sum(p["wal"] for p in phases) / turns
    per_session = created["database"] / created["sessions"]
    rate = NODES / host_cpu
    note = f"from the untraced host's {turns:,} first turns"
    figures.time("sizing: host CPU per first turn", host_cpu, note=note)
    figures.value("sizing: first turns/s per core", 1 / host_cpu, "turns/s", note="1 / host CPU per first turn")
    figures.value(f"sizing: first turns/s of {NODES} single-core nodes", rate, "turns/s")
    figures.time("sizing: PostgreSQL CPU per turn", pg_cpu, note=note)
    figures.value(f"sizing: PostgreSQL cores for {NODES} single-core nodes", rate * pg_cpu, "cores",
                  note="their turns/s x PostgreSQL CPU per turn")  # fmt: skip
    figures.size("database bytes per passivated session", per_session, note=f"{created['sessions']:,} sessions")
    figures.size("sizing: database of 1,000,000 passivated sessions", per_session * 1_000_000)
    figures.size("sizing: database of 100,000,000 passivated sessions", per_session * 100_000_000)
    grown = after["runs"] - created["runs"]
    figures.size("sizing: database growth per turn", (after["database"] - created["database"]) / max(1, grown),
                 note=f"{grown:,} turns in the run, every kind")  # fmt: skip
    figures.size("WAL bytes per turn (first turn of a session)", wal, note=note)
    figures.value(f"sizing: WAL MB/s of {NODES} single-core nodes", rate * wal / 1e6, "MB/s",
                  note="their turns/s x WAL per turn")  # fmt: skip


def _child(spec: dict[str, Any]) -> dict[str, Any] | str:
    print(f"  host child, traced={spec['traced']}", file=sys.stderr, flush=True)
    try:
        got, _ = run_json("benchmarks.million", ["--child", json.dumps(spec)], 3600)
    except ChildFailed as exc:
        return str(exc)
    return dict(got)


async def scenario(figures: Figures, options: Options) -> None:
    """A server, the sessions (a sample by the API, the rest in bulk), the two host children, the sizes."""
    sessions = options.args.sessions or SESSIONS[options.mode]
    samples = options.args.samples or SAMPLES[options.mode]
    active_n = max(2, int(sessions * ACTIVE_FRACTION))
    api_n = min(API_SAMPLE, sessions // 10)
    figures.fact("store", "PostgreSQL 15 (TemporaryPostgres: loopback TCP, fsync on, synchronous_commit on, "
                 "shared_buffers 128MB), on the same machine as the host")  # fmt: skip
    with TemporaryPostgres() as pg:
        conninfo, _ = normalise_url(pg.url, 5.0)
        postmaster = int((Path(pg.datadir) / "postmaster.pid").read_text().splitlines()[0])
        async with await Runtime.start(store=pg.url, agents=_agents()) as rt:
            t0 = time.perf_counter()
            await rt.create_sessions(AGENT, api_n)
            rate = api_n / (time.perf_counter() - t0)
        figures.value(f"sessions created per second through rt.create_sessions ({api_n:,})", rate, "sessions/s",
                      note="a transaction per session")  # fmt: skip
        build, copy, wal = await _bulk_create(conninfo, sessions - api_n)
        bulk = sessions - api_n
        figures.value(f"sessions created per second in bulk ({bulk:,})", bulk / (build + copy), "sessions/s",
                      note=f"COPY, rows as create_session writes them, {BATCH:,} a transaction")  # fmt: skip
        figures.time("bulk creation: building the records", build)
        figures.time("bulk creation: COPY", copy)
        figures.size("bulk creation: WAL", wal)
        figures.size("bulk creation: WAL per session", wal / bulk)
        created = await _sizes(conninfo)
        spec = {"sessions": sessions, "steps": [active_n // 2, active_n], "samples": samples, "url": pg.url,
                "postmaster": postmaster, "seed": 21}  # fmt: skip
        hosts = {run: _child({**spec, "traced": run == "tracemalloc"}) for run in ("untraced", "tracemalloc")}
        after = await _sizes(conninfo)
    _size_figures(figures, "after creation", created)
    _size_figures(figures, "after the turns", after)
    for run, got in hosts.items():
        if isinstance(got, dict):
            _host_figures(figures, run, sessions, got)
    untraced = hosts["untraced"]
    if isinstance(untraced, dict):
        _sizing(figures, created, after, untraced)
    failed = [f"{run}: {got[-500:]}" for run, got in hosts.items() if isinstance(got, str)]
    if failed:
        raise RuntimeError(f"host child(ren) did not finish: {'; '.join(failed)}")


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions", type=int, help="sessions in the database (default 1,000,000; --quick 20,000)")
    parser.add_argument("--samples", type=int, help="cold activations timed per kind (default 1,000; --quick 50)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # --child SPEC --result PATH
        result = asyncio.run(_host(json.loads(sys.argv[2])))
        Path(sys.argv[4]).write_text(json.dumps(result))
    else:
        main("million", __doc__, scenario=scenario, add_args=_args)
