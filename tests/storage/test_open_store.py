"""``open_store`` URL rules and refusing files that are not (our) databases, at open time."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from repertory import InMemorySessionStore, RunState, SqliteSessionStore, StoreError, ThreadState
from repertory.core.state import SCHEMA_VERSION
from repertory.storage import SessionStore, open_store
from repertory.storage.sqlite.schema import SCHEMA_VERSION as DB_SCHEMA_VERSION
from tests.records import commit, history_of

PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06" + bytes(200)


def pragma(store: SessionStore, name: str) -> object:
    assert isinstance(store, SqliteSessionStore)
    return store.pragma(name)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def same_file(a: str | Path, b: str | Path) -> bool:
    return os.path.samefile(a, b)


def drop_wal_files(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def write_some(store: SessionStore) -> None:
    history = history_of(*(f"message {i} " + "x" * 2000 for i in range(40)))
    await commit(store, history)


# -- URL rules --------------------------------------------------------------------------------------


async def test_memory_url() -> None:
    async with await open_store("memory://") as store:
        assert isinstance(store, InMemorySessionStore)
        await store.save(RunState(run_id="r", thread_id="t"))
        assert await store.load_run("r") is not None


async def test_sqlite_relative_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with await open_store("sqlite:///relative.db") as store:
        assert isinstance(store, SqliteSessionStore)
        await store.save(RunState(run_id="r", thread_id="t"))
        assert (tmp_path / "relative.db").is_file()
        assert same_file(store.path, tmp_path / "relative.db")
        assert pragma(store, "journal_mode") == "wal"


async def test_sqlite_relative_url_in_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    async with await open_store("sqlite:///data/runs.db") as store:
        await store.save(RunState(run_id="r", thread_id="t"))
    assert (tmp_path / "data" / "runs.db").is_file()


async def test_a_relative_path_still_names_the_same_file_after_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    async with await open_store("sqlite:///relative.db") as store:
        history = history_of("a", "b")
        await commit(store, history)
        monkeypatch.chdir(elsewhere)
        # list_runs and load_history read on connections opened later, after the chdir.
        assert [r.run_id for r in await store.list_runs()] == ["r"]
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None and [m.text for m in loaded.messages] == ["a", "b"]
    assert listing(elsewhere) == []


async def test_sqlite_absolute_url(tmp_path: Path) -> None:
    path = tmp_path / "abs.db"
    assert str(path).startswith("/")
    async with await open_store(f"sqlite:///{path}") as store:
        assert isinstance(store, SqliteSessionStore)
        assert store.path == str(path)
        await store.save(RunState(run_id="r", thread_id="t"))
    assert path.is_file()


@pytest.mark.parametrize("as_pathlike", [False, True], ids=["str", "PathLike"])
async def test_plain_path(tmp_path: Path, as_pathlike: bool) -> None:
    path = tmp_path / "runs.db"
    async with await open_store(path if as_pathlike else str(path)) as store:
        assert isinstance(store, SqliteSessionStore)
        assert store.durability == "normal"
        await store.save(RunState(run_id="r", thread_id="t"))
    assert path.is_file()


@pytest.mark.parametrize("url", [":memory:", "sqlite://:memory:", "sqlite:///:memory:"])
async def test_sqlite_in_memory(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with await open_store(url) as store:
        assert isinstance(store, SqliteSessionStore)
        assert store.path == ":memory:"
        await store.save(RunState(run_id="r", thread_id="t"))
        assert [r.run_id for r in await store.list_runs()] == ["r"]
    assert listing(tmp_path) == []


@pytest.mark.parametrize(("query", "durability", "synchronous"), [("", "normal", 1), ("?durability=full", "full", 2)])
async def test_durability_option(tmp_path: Path, query: str, durability: str, synchronous: int) -> None:
    async with await open_store(f"sqlite:///{tmp_path / 'runs.db'}{query}") as store:
        assert isinstance(store, SqliteSessionStore)
        assert store.durability == durability
        assert pragma(store, "synchronous") == synchronous
        assert pragma(store, "journal_mode") == "wal"
    async with await open_store(f"sqlite://:memory:{query}") as store:
        assert isinstance(store, SqliteSessionStore) and store.durability == durability


async def test_sqlite_store_open_rejects_bad_durability(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="durability"):
        await SqliteSessionStore.open(tmp_path / "x.db", durability="extreme")  # type: ignore[arg-type]
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("sqlite:///runs.db?durability=extreme", "durability"),
        ("sqlite:///runs.db?durability=", "durability"),
        ("sqlite:///runs.db?timeout=5", "unknown option"),
        ("mysql://user@localhost/db", "unknown store scheme"),
        ("redis://localhost", "unknown store scheme"),
        ("sqlite://relative.db", "malformed"),
        ("sqlite://", "malformed"),
        ("sqlite:///", "malformed"),
        ("sqlite:relative.db", "malformed"),
        ("memory:", "malformed"),
        ("memory://something", "malformed"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
async def test_bad_urls_raise_store_error_and_create_nothing(
    url: str, match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=match):
        await open_store(url)
    assert listing(tmp_path) == []


async def test_postgres_that_cannot_be_reached_is_a_store_error() -> None:
    # Port 1 on loopback refuses at once; without the driver installed the error is StoreError too.
    with pytest.raises(StoreError):
        await open_store("postgresql://nobody@127.0.0.1:1/nothing")


async def test_not_a_string_is_a_store_error() -> None:
    with pytest.raises(StoreError):
        await open_store(42)  # type: ignore[arg-type]


# -- files that are not our database ----------------------------------------------------------------


@pytest.mark.parametrize("cut", ["half", "last-page"])
async def test_a_truncated_database_is_refused_at_open(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "runs.db"
    async with await open_store(path) as store:
        await write_some(store)
    drop_wal_files(path)
    size = path.stat().st_size
    assert size > 8 * 4096  # the data spans many pages, so either cut loses real pages
    os.truncate(path, size // 2 if cut == "half" else size - 4096)
    with pytest.raises(StoreError) as info:
        await open_store(path)
    assert str(path) in str(info.value)


async def test_an_intact_database_reopens(tmp_path: Path) -> None:
    # The control for the truncation test: the same steps without the cut open fine.
    path = tmp_path / "runs.db"
    async with await open_store(path) as store:
        await write_some(store)
    drop_wal_files(path)
    async with await open_store(path) as store:
        run = await store.load_run("r")
        assert run is not None
        loaded = await store.load_history(run.history_revision_id)  # type: ignore[arg-type]
        assert loaded is not None and len(loaded.messages) == 40


@pytest.mark.parametrize(
    "content",
    [b"just some text, not a database\n" * 20, PNG_BYTES, b"SQLite format 3", b"\x00" * 4096],
    ids=["text", "png", "short-header", "zeros"],
)
async def test_a_foreign_file_is_refused_and_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "not-a-db.db"
    path.write_bytes(content)
    with pytest.raises(StoreError):
        await open_store(path)
    assert path.read_bytes() == content
    assert listing(tmp_path) == ["not-a-db.db"]


def _other_application_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.execute("INSERT INTO invoices (amount) VALUES (12.5)")
    conn.commit()
    conn.close()


async def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    _other_application_db(path)
    with pytest.raises(StoreError, match="another application"):
        await open_store(path)
    conn = sqlite3.connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"invoices"}
        assert conn.execute("SELECT amount FROM invoices").fetchall() == [(12.5,)]
    finally:
        conn.close()


async def test_another_applications_database_keeps_its_journal_mode(tmp_path: Path) -> None:
    # Refusing a file must not change it: WAL mode is persistent and visible to its owner.
    path = tmp_path / "theirs.db"
    _other_application_db(path)
    with pytest.raises(StoreError):
        await open_store(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()
    assert listing(tmp_path) == ["theirs.db"]


async def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with await open_store(path) as store:
        await store.save(RunState(run_id="r", thread_id="t"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE repertory_meta SET value = ? WHERE key = 'schema_version'", (str(DB_SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        await open_store(path)


async def test_a_missing_parent_folder_is_a_store_error(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "folder"
    for url in (str(missing / "runs.db"), f"sqlite:///{missing / 'runs.db'}"):
        with pytest.raises(StoreError, match="does not exist"):
            await open_store(url)
    assert listing(tmp_path) == []


async def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        await open_store(tmp_path)


async def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    async with await open_store(path) as store:
        await store.save(RunState(run_id="r", thread_id="t"))
        assert await store.load_run("r") is not None


# -- record schema versions -------------------------------------------------------------------------


@pytest.mark.parametrize("model", [RunState, ThreadState], ids=lambda m: m.__name__)
def test_a_record_from_a_newer_repertory_fails_clearly(model: type[RunState] | type[ThreadState]) -> None:
    record = RunState(run_id="r", thread_id="t") if model is RunState else ThreadState(thread_id="t")
    data: dict[str, Any] = record.model_dump(mode="json")
    assert model.model_validate(data).schema_version == SCHEMA_VERSION
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValidationError, match="newer than this repertory understands") as info:
        model.model_validate(data)
    assert "upgrade repertory" in str(info.value)
    data["schema_version"] = 0
    with pytest.raises(ValidationError, match="schema_version"):
        model.model_validate(data)


async def test_a_stored_run_from_a_newer_repertory_fails_clearly_on_load(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with await open_store(path) as store:
        await store.save(RunState(run_id="r", thread_id="t"))
    newer = RunState(run_id="r", thread_id="t").model_dump(mode="json")
    newer["schema_version"] = SCHEMA_VERSION + 1
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET state = ? WHERE run_id = 'r'", (json.dumps(newer),))
    conn.commit()
    conn.close()
    async with await open_store(path) as store:
        with pytest.raises(ValueError, match="newer than this repertory understands"):
            await store.load_run("r")
