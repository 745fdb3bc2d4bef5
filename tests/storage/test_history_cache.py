"""The SQL stores' history cache (``repertory.storage.history_cache``): its budget, its order, its use by loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from repertory.core.history import HistoryRevision, MessageHistory
from repertory.storage import SqliteSessionStore
from repertory.storage.history_cache import HistoryCache
from repertory.testing.conformance.records import commit, history_of


def _lineage(n: int) -> MessageHistory:
    return history_of(*(f"m{i:03d}" for i in range(n)))  # one JSON length for all


def _fill(cache: HistoryCache, history: MessageHistory) -> list[HistoryRevision]:
    lineage = history.lineage()
    for rev in lineage:
        entry = history.entry(rev.entry_id)
        assert entry is not None
        cache.add(rev, entry, len(entry.message.model_dump_json()))
    return lineage


def test_a_walk_returns_the_cached_top_and_the_first_revision_it_lacks() -> None:
    history = _lineage(5)
    cache = HistoryCache()
    lineage = _fill(cache, history)
    whole = cache.walk(lineage[-1].id)
    assert whole.missing is None
    assert whole.history(lineage[-1].id).messages == history.messages

    partial = HistoryCache()
    for rev in lineage[2:]:
        entry = history.entry(rev.entry_id)
        assert entry is not None
        partial.add(rev, entry, 10)
    top = partial.walk(lineage[-1].id)
    assert top.missing == lineage[1].id
    assert [r.id for r in top.revisions] == [r.id for r in reversed(lineage[2:])]
    assert partial.walk("not-cached").missing == "not-cached"


def test_the_budget_holds_and_the_least_recently_used_go_first() -> None:
    history = _lineage(10)
    lineage = history.lineage()
    json_bytes = len(history.messages[0].model_dump_json())
    per_record = json_bytes + 256
    cache = HistoryCache(max_bytes=per_record * 4)
    _fill(cache, history)
    assert len(cache) == 4 and cache.held_bytes <= cache.max_bytes
    # The last four survive; walking the oldest of them makes it the most recently used, so the
    # next record in pushes out the one after it instead.
    assert [r.id for r in cache.walk(lineage[6].id).revisions] == [lineage[6].id]
    assert cache.walk(lineage[6].id).missing == lineage[5].id
    _fill(cache, _lineage(1))
    assert cache.walk(lineage[9].id).missing == lineage[7].id
    assert cache.walk(lineage[6].id).revisions[0].id == lineage[6].id
    assert len(cache) == 4 and cache.held_bytes <= cache.max_bytes


def test_a_zero_budget_keeps_nothing_and_a_negative_one_is_refused() -> None:
    cache = HistoryCache(max_bytes=0)
    _fill(cache, _lineage(3))
    assert len(cache) == 0 and cache.held_bytes == 0
    with pytest.raises(ValueError, match=">= 0"):
        HistoryCache(max_bytes=-1)


async def test_a_store_decodes_a_lineage_once_and_not_at_all_with_the_cache_off(tmp_path: Path) -> None:
    history = _lineage(50)
    head = history.revision_id or ""
    async with await SqliteSessionStore.open(tmp_path / "on.db") as store:
        await commit(store, history)
        first, second = await store.load_history(head), await store.load_history(head)
        assert first is not None and second is not None
        assert second.messages == first.messages == history.messages
        assert all(a is b for a, b in zip(first.entries, second.entries, strict=True))
        assert first.entries is not second.entries  # containers are the caller's own
    async with await SqliteSessionStore.open(tmp_path / "off.db", history_cache_bytes=0) as store:
        await commit(store, history)
        first, second = await store.load_history(head), await store.load_history(head)
        assert first is not None and second is not None
        assert second.messages == first.messages == history.messages
        assert not any(a is b for a, b in zip(first.entries, second.entries, strict=True))
        assert len(store.history_cache) == 0


async def test_a_cache_smaller_than_the_lineage_reads_only_below_what_it_holds(tmp_path: Path) -> None:
    history = _lineage(40)
    lineage = history.lineage()
    statements: list[str] = []
    budget = 10 * (len(history.messages[0].model_dump_json()) + 256)
    async with await SqliteSessionStore.open(tmp_path / "small.db", history_cache_bytes=budget) as store:
        await commit(store, history)
        assert len(store.history_cache) == 0  # a commit adds nothing: its writer holds what it wrote
        for rev in (lineage[-1], lineage[20], lineage[-1], lineage[3]):
            loaded = await store.load_history(rev.id)
            assert loaded is not None
            assert loaded.revisions == lineage[: rev.depth]
            assert [e.id for e in loaded.entries] == [r.entry_id for r in lineage[: rev.depth]]
            assert loaded.messages == history.messages[: rev.depth]
            assert len(store.history_cache) <= 10
        store.trace_writes(statements.append)
        assert (await store.load_history(lineage[3].id)) is not None  # all cached now: one existence check
        assert len(statements) == 1 and statements[0].startswith("SELECT 1 FROM history_revisions WHERE id")
