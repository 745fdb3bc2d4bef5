"""PostgreSQL-only behaviour: clear, bounded, redacted failures; restarts; racing processes.

The conformance suite already runs every store rule against PostgreSQL; these tests cover what only
a real server can do to a client: refuse it, vanish, come back, and be shared by several processes.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from repertory import CommitConflict, MessageHistory, ModelMessage, RunState, StoreError, ThreadState, open_store
from repertory.storage.postgres.store import PostgresSessionStore, redact
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg

BOUND_S = 15.0


async def _timed_open(url: str) -> tuple[StoreError, float]:
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        await open_store(url)
    return info.value, time.monotonic() - started


async def test_unreachable_server_is_a_clear_bounded_store_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    error, took = await _timed_open("postgresql://someone:s3cr3t-pw@127.0.0.1:1/db")
    assert "cannot connect" in str(error) and "s3cr3t-pw" not in str(error)
    assert took < BOUND_S
    assert "s3cr3t-pw" not in caplog.text


async def test_refused_login_names_the_cause_without_the_password(
    pg_server: TemporaryPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    error, took = await _timed_open(pg_server.url_for(password="wrong-Pa55word"))
    assert "password authentication failed" in str(error)
    assert "wrong-Pa55word" not in str(error) and "wrong-Pa55word" not in caplog.text
    assert took < BOUND_S


async def test_missing_database_is_named(pg_server: TemporaryPostgres) -> None:
    error, took = await _timed_open(pg_server.url_for(database="no_such_db"))
    assert 'database "no_such_db" does not exist' in str(error)
    assert pg_server.password not in str(error)
    assert took < BOUND_S


def test_redact_removes_passwords_in_urls_and_conninfo() -> None:
    assert redact("postgresql://u:hunter2@h/db failed") == "postgresql://u:***@h/db failed"
    assert redact("password=hunter2 host=x") == "password=*** host=x"
    assert redact("it was hunter2", "hunter2") == "it was ***"


async def test_the_reopen_url_opens_the_same_database_and_only_it_holds_the_password(
    pg_server: TemporaryPostgres,
) -> None:
    async with await PostgresSessionStore.open(pg_server.url) as store:
        assert pg_server.password and pg_server.password not in store.url
        assert pg_server.password in store.reopen_url
        await store.save(RunState(run_id="reopened", thread_id="t-reopened"))
        async with await PostgresSessionStore.open(store.reopen_url) as other:
            assert await other.load_run("reopened") is not None
            await other.delete_run("reopened")


async def test_a_statement_failing_in_a_connection_is_a_redacted_store_error(pg_server: TemporaryPostgres) -> None:
    async with await PostgresSessionStore.open(pg_server.url) as store:
        with pytest.raises(StoreError, match=r"^postgres: probe failed: .*no_such_table") as info:
            async with store.connection("probe") as conn:
                await conn.execute("SELECT * FROM no_such_table")
        assert pg_server.password not in str(info.value)


async def test_a_newer_schema_is_refused(pg_server: TemporaryPostgres) -> None:
    store = await PostgresSessionStore.open(pg_server.url)
    await store.close()
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        row = conn.execute("SELECT value FROM repertory.meta WHERE key = 'schema_version'").fetchone()
        assert row is not None
        original = row[0]
        conn.execute("UPDATE repertory.meta SET value = '99' WHERE key = 'schema_version'")
    try:
        with pytest.raises(StoreError, match="newer than this repertory understands"):
            await PostgresSessionStore.open(pg_server.url)
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute("UPDATE repertory.meta SET value = %s WHERE key = 'schema_version'", (original,))


async def test_opening_twice_concurrently_migrates_once(pg_server: TemporaryPostgres) -> None:
    stores = await asyncio.gather(*(PostgresSessionStore.open(pg_server.url) for _ in range(4)))
    for store in stores:
        await store.close()


def _step(history: MessageHistory, run: RunState, thread: ThreadState, text: str) -> str | None:
    base = history.revision_id
    history.append(ModelMessage.user(text))
    run.history_revision_id = thread.history_revision_id = history.revision_id
    return base


async def test_server_restart_mid_run_every_commit_lands_whole_or_raises() -> None:
    # A server of its own: stopping the shared one would disturb other tests.
    with TemporaryPostgres() as server:
        store = await PostgresSessionStore.open(server.url, pool_timeout=20.0)
        try:
            history = MessageHistory()
            run = RunState(run_id="r", thread_id="t")
            thread = ThreadState(thread_id="t")
            landed: list[str] = []
            failures = 0
            restarted = False
            for i in range(60):
                base = _step(history, run, thread, f"m{i}")
                try:
                    await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)
                    landed.append(f"m{i}")
                except StoreError:
                    failures += 1
                    # The commit may or may not have landed; the stored head says which.
                    stored = await _stored_head(store)
                    if stored != history.revision_id:
                        history = (await store.load_history(stored)) if stored else MessageHistory()  # type: ignore[assignment]
                        run.history_revision_id = thread.history_revision_id = history.revision_id
                    else:
                        landed.append(f"m{i}")
                if i == 20 and not restarted:
                    await asyncio.to_thread(server.restart)
                    restarted = True
            final = await store.load_history(history.revision_id)  # type: ignore[arg-type]
            assert final is not None
            assert [m.text for m in final.messages] == landed
            assert len(landed) >= 39  # every commit after the restart landed: the pool reconnected
        finally:
            await store.close()


async def _stored_head(store: PostgresSessionStore) -> str | None:
    for _ in range(100):
        try:
            thread = await store.load_thread("t")
            return None if thread is None else thread.history_revision_id
        except StoreError:
            await asyncio.sleep(0.1)
    raise AssertionError("the store never came back after the restart")


_RACER = textwrap.dedent(
    """
    import asyncio, sys
    from repertory import CommitConflict, MessageHistory, ModelMessage, RunState, ThreadState
    from repertory.storage.postgres.store import PostgresSessionStore

    async def main(url, name, rounds, barrier_dir):
        import os, time
        store = await PostgresSessionStore.open(url)
        wins = 0
        for r in range(rounds):
            thread = await store.load_thread("race")
            base = thread.history_revision_id
            history = await store.load_history(base)
            history.append(ModelMessage.user(f"{name} round {r}"))
            run = RunState(run_id=f"run-{name}", thread_id="race", history_revision_id=history.revision_id)
            new_thread = ThreadState(thread_id="race", history_revision_id=history.revision_id)
            # Both processes wait for a shared tick so they commit on the same base.
            flag = os.path.join(barrier_dir, f"{r}.{name}")
            open(flag, "w").close()
            while len([f for f in os.listdir(barrier_dir) if f.startswith(f"{r}.")]) < 2:
                time.sleep(0.002)
            try:
                await store.commit_session(run=run, thread=new_thread, history=history, base_revision_id=base)
                wins += 1
                print(f"WIN {r}", flush=True)
            except CommitConflict:
                print(f"LOSE {r}", flush=True)
            # Wait until both have finished this round before reading the next base.
            done = os.path.join(barrier_dir, f"done{r}.{name}")
            open(done, "w").close()
            while len([f for f in os.listdir(barrier_dir) if f.startswith(f"done{r}.")]) < 2:
                time.sleep(0.002)
        await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    """
)


async def test_two_processes_racing_on_one_thread_exactly_one_wins_each_round(
    pg_server: TemporaryPostgres, tmp_path: Path
) -> None:
    truncate_pg(pg_server.url)
    store = await PostgresSessionStore.open(pg_server.url)
    history = MessageHistory()
    history.append(ModelMessage.user("start"))
    seed = RunState(run_id="seed", thread_id="race", history_revision_id=history.revision_id)
    await store.commit_session(
        run=seed, thread=ThreadState(thread_id="race", history_revision_id=history.revision_id), history=history
    )
    rounds = 15
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 - started once, waited on in a thread below
            [sys.executable, "-c", _RACER, pg_server.url, name, str(rounds), str(barrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outputs = [await asyncio.to_thread(p.communicate, timeout=90) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    results: dict[int, list[str]] = {}
    for out, _ in outputs:
        for line in out.strip().splitlines():
            verdict, r = line.split()
            results.setdefault(int(r), []).append(verdict)
    assert sorted(results) == list(range(rounds))
    for round_, verdicts in results.items():
        assert sorted(verdicts) == ["LOSE", "WIN"], (round_, verdicts)
    final = await store.load_thread("race")
    assert final is not None
    stored = await store.load_history(final.history_revision_id)  # type: ignore[arg-type]
    assert stored is not None and len(stored.messages) == rounds + 1
    with pytest.raises(CommitConflict):
        await store.commit_session(
            run=seed, thread=ThreadState(thread_id="race", history_revision_id=history.revision_id), history=history
        )
    await store.close()
