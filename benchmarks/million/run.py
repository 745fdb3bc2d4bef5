"""The million benchmark's run: a server, the sessions in bulk, the two host children, the sizes, the report.

``python -m benchmarks.million --child SPEC --result PATH`` is one host child (``run_child``); the
parent (``measure``) starts the server, creates the sessions, and starts the untraced child and
then the traced one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from benchmarks.harness.children import ChildFailed, run_json
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.million.active import AGENT, active, agent
from benchmarks.million.database import creation, sizes
from benchmarks.million.report import ActivePart, Creation, MillionReport, NotFinished
from repertory.storage.postgres.connection import normalise_url
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.tree.runtime import Runtime

__all__ = ["ACTIVE_FRACTION", "measure", "run_child"]

ACTIVE_FRACTION = 0.01
API_SAMPLE = 2_000


def run_child(spec: dict[str, Any], result_path: str) -> None:
    """In the child: one host's measurement (``active``), written to ``result_path``."""
    part = asyncio.run(active(spec))
    with open(result_path, "w") as f:
        f.write(part.model_dump_json())


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _child(spec: dict[str, Any], timeout: float) -> ActivePart | NotFinished:
    try:
        data, seconds = run_json("benchmarks.million", ["--child", json.dumps(spec)], timeout)
    except ChildFailed as exc:
        return NotFinished(why=str(exc))
    part = ActivePart.model_validate(data)
    part.child_seconds = round(seconds, 1)
    return part


async def _api_sample(url: str, count: int) -> float:
    """Seconds ``rt.create_sessions`` takes for ``count`` sessions (the store's own path, one transaction each)."""
    async with await Runtime.start(store=url, agents={AGENT: agent()}) as rt:
        t0 = time.perf_counter()
        await rt.create_sessions(AGENT, count)
        return time.perf_counter() - t0


def measure(sessions: int, quick: bool = False, smoke: bool = False, samples: int | None = None) -> MillionReport:
    """Create ``sessions`` sessions, run both children, read the sizes; the report."""
    clock = Clock.start("million", mode_of(quick, smoke))
    active_n = max(2, int(sessions * ACTIVE_FRACTION))
    steps = [active_n // 2, active_n]
    samples = samples or (50 if smoke else 200 if quick else 1_000)
    api_n = min(API_SAMPLE, sessions // 10)
    pg = TemporaryPostgres().start()
    try:
        conninfo, _ = normalise_url(pg.url, 5.0)
        with open(os.path.join(pg.datadir, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        _say(f"1. {api_n:,} sessions through rt.create_sessions, then {sessions - api_n:,} by COPY")
        api_seconds = asyncio.run(_api_sample(pg.url, api_n))
        made: Creation = asyncio.run(creation(conninfo, sessions - api_n, AGENT, (api_n, api_seconds)))
        _say(f"   {made.per_second:,.0f} sessions/s by COPY ({made.seconds:.1f} s); API {made.api_per_second:,.0f}/s")
        asyncio.run(_analyze(conninfo))
        created = asyncio.run(sizes(conninfo))
        spec: dict[str, Any] = {"sessions": sessions, "steps": steps, "samples": samples, "url": pg.url,
                                "postmaster": postmaster, "seed": 21}  # fmt: skip
        _say(f"2. untraced host: {steps} active of {sessions:,}, {samples} cold samples each")
        untraced = _child({**spec, "traced": False}, 3600)
        _say(f"   {'done' if isinstance(untraced, ActivePart) else untraced.why[-300:]}")
        _say(f"3. traced host: {steps} active (another stripe)")
        traced = _child({**spec, "traced": True}, 3600)
        _say(f"   {'done' if isinstance(traced, ActivePart) else traced.why[-300:]}")
        after = asyncio.run(sizes(conninfo))
    finally:
        pg.cleanup()
    report = MillionReport(
        **clock.frame(),
        store="PostgreSQL 15 (TemporaryPostgres: loopback TCP, fsync on, synchronous_commit on, "
        "shared_buffers 128MB), on the same 2-core machine as the host",
        sessions=sessions,
        active_fraction=ACTIVE_FRACTION,
        creation=made,
        sizes_created=created,
        sizes_after_turns=after,
        untraced=untraced,
        traced=traced,
    )
    failed = {
        name: p.why[-500:] for name, p in (("untraced", untraced), ("traced", traced)) if isinstance(p, NotFinished)
    }
    report.failed = failed
    return finish(report, clock)


async def _analyze(conninfo: str) -> None:
    """``ANALYZE`` the schema after the bulk load, as one would after loading a table by COPY."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute("ANALYZE repertory.sessions")
        await conn.execute("ANALYZE repertory.threads")
