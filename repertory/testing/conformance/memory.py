"""``MemoryConformance``: the ``MemoryStore`` contract (the long-term memory tables) as a test class.

Per-resource gap-free order, the recent tail, loads by seq, embeddings filtered by the space that
made them, working memory replaced whole, forgetting one resource without reusing its seqs, and
resources that never see each other's rows (isolation is a security property here).
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from repertory.core.messages import Role
from repertory.core.protocols import protocol_gap
from repertory.core.store import MemoryRecord, MemoryStore
from repertory.errors import StoreError
from repertory.testing.conformance._looks import Conformance, Looks

__all__ = ["MemoryConformance", "memory_record"]


def memory_record(
    thread: str, text: str, role: Role = "user", *, vec: list[float] | None = None, embedder: str = "e"
) -> MemoryRecord:
    """A record to append; ``vec`` becomes float32 bytes in the ``embedder`` space (none without it)."""
    blob = None if vec is None else array("f", vec).tobytes()
    return MemoryRecord(
        thread_id=thread,
        role=role,
        text=text,
        created_at=1,
        embedder=None if vec is None else embedder,
        embedding=blob,
    )


def _texts(records: list[MemoryRecord]) -> list[str]:
    return [r.text for r in records]


def _floats(blobs: list[bytes]) -> list[float]:
    out = array("f")
    for blob in blobs:
        out.frombytes(blob)
    return out.tolist()


_rec = memory_record


class MemoryConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``MemoryStore``) and optionally a ``probe``.

    Only the reopen test uses the probe (``reopen``).
    """

    async def test_every_store_is_a_memory_store(self, store: Any) -> None:
        assert isinstance(store, MemoryStore), protocol_gap(store, MemoryStore)

    async def test_append_numbers_records_in_order_per_resource(self, store: MemoryStore) -> None:
        assert await store.append_memory("u1", [_rec("t1", "a"), _rec("t1", "b")]) == [1, 2]
        assert await store.append_memory("u2", [_rec("t9", "x")]) == [1]
        assert await store.append_memory("u1", [_rec("t2", "c")]) == [3]
        assert await store.append_memory("u1", []) == []
        assert _texts(await store.recent_memory("u1", limit=10)) == ["a", "b", "c"]
        assert [r.seq for r in await store.recent_memory("u1", limit=10)] == [1, 2, 3]

    async def test_recent_memory_is_the_tail_oldest_first_and_skips_a_thread(self, store: MemoryStore) -> None:
        await store.append_memory("u1", [_rec("t1", "one"), _rec("t2", "two"), _rec("t1", "three"), _rec("t3", "four")])
        assert _texts(await store.recent_memory("u1", limit=2)) == ["three", "four"]
        assert _texts(await store.recent_memory("u1", limit=2, exclude_thread="t1")) == ["two", "four"]
        assert _texts(await store.recent_memory("u1", limit=10, exclude_thread="t3")) == ["one", "two", "three"]
        assert await store.recent_memory("u1", limit=0) == []
        got = (await store.recent_memory("u1", limit=1))[0]
        assert (got.thread_id, got.role, got.created_at, got.embedding) == ("t3", "user", 1, None)

    async def test_load_memory_by_seq(self, store: MemoryStore) -> None:
        await store.append_memory("u1", [_rec("t1", f"m{i}", "assistant") for i in range(1, 6)])
        assert _texts(await store.load_memory("u1", [4, 2, 99, 2])) == ["m2", "m4"]
        assert await store.load_memory("u1", []) == []
        assert await store.load_memory("u2", [1, 2]) == []

    async def test_memory_vectors_are_ranged_and_filtered_by_embedder(self, store: MemoryStore) -> None:
        await store.append_memory(
            "u1",
            [
                _rec("t1", "a", vec=[1, 0]),
                _rec("t1", "no vector"),
                _rec("t2", "b", vec=[0, 1]),
                _rec("t2", "other space", vec=[1, 1, 1], embedder="other"),
                _rec("t3", "c", vec=[0.5, 0.5]),
            ],
        )
        found = await store.memory_vectors("u1", embedder="e")
        assert (found.seqs, found.thread_ids) == ([1, 3, 5], ["t1", "t2", "t3"])
        assert _floats(found.embeddings) == [1, 0, 0, 1, 0.5, 0.5]
        assert [len(blob) for blob in found.embeddings] == [8, 8, 8]
        later = await store.memory_vectors("u1", embedder="e", after_seq=3)
        assert later.seqs == [5]
        assert (await store.memory_vectors("u1", embedder="other")).seqs == [4]
        assert (await store.memory_vectors("u2", embedder="e")).seqs == []

    async def test_texts_keep_unicode_and_quotes(self, store: MemoryStore) -> None:
        text = "ünïcödé 🎉 'quotes' \"double\" \\ back; DROP TABLE memory_messages; --"
        await store.append_memory("u1", [_rec("t1", text)])
        assert _texts(await store.recent_memory("u1", limit=1)) == [text]

    async def test_working_memory_is_replaced_whole_and_kept_per_resource(self, store: MemoryStore) -> None:
        assert await store.load_working_memory("u1") is None
        await store.save_working_memory("u1", {"name": "Ada", "tags": ["a", 1, None, 2.5]}, 10)
        await store.save_working_memory("u2", {"name": "Bob"}, 11)
        got = await store.load_working_memory("u1")
        assert got is not None and got.document == {"name": "Ada", "tags": ["a", 1, None, 2.5]}
        assert got.updated_at == 10
        await store.save_working_memory("u1", {"nul": "a\x00b", "ü": "🎉"}, 12)
        got = await store.load_working_memory("u1")
        assert got is not None and got.document == {"nul": "a\x00b", "ü": "🎉"} and got.updated_at == 12
        other = await store.load_working_memory("u2")
        assert other is not None and other.document == {"name": "Bob"}

    async def test_forget_drops_one_resource_and_seqs_never_repeat(self, store: MemoryStore) -> None:
        await store.append_memory("u1", [_rec("t1", "a", vec=[1.0]), _rec("t1", "b", vec=[1.0])])
        await store.append_memory("u2", [_rec("t2", "keep", vec=[1.0])])
        await store.save_working_memory("u1", {"k": 1}, 1)
        await store.save_working_memory("u2", {"k": 2}, 1)
        await store.forget_memory("u1")
        assert await store.recent_memory("u1", limit=10) == []
        assert (await store.memory_vectors("u1", embedder="e")).seqs == []
        assert await store.load_working_memory("u1") is None
        assert _texts(await store.recent_memory("u2", limit=10)) == ["keep"]
        assert (await store.load_working_memory("u2")) is not None
        # A reader that held seqs 1 and 2 must still see what comes next.
        assert await store.append_memory("u1", [_rec("t1", "c")]) == [3]

    async def test_resources_never_see_each_other(self, store: MemoryStore) -> None:
        # Names chosen to trip naive prefix or LIKE matching.
        for resource in ["u", "u1", "u%", "U1"]:
            await store.append_memory(resource, [_rec("shared-thread", f"secret of {resource}", vec=[1.0, 0.0])])
            await store.save_working_memory(resource, {"owner": resource}, 1)
        for resource in ["u", "u1", "u%", "U1"]:
            assert _texts(await store.recent_memory(resource, limit=10)) == [f"secret of {resource}"]
            assert _texts(await store.load_memory(resource, [1, 2, 3, 4])) == [f"secret of {resource}"]
            assert (await store.memory_vectors(resource, embedder="e")).seqs == [1]
            doc = await store.load_working_memory(resource)
            assert doc is not None and doc.document == {"owner": resource}

    async def test_memory_survives_a_reopen(self, store: Any, looks: Looks) -> None:
        await store.append_memory("u1", [_rec("t1", "remember me", vec=[0.0, 1.0])])
        await store.save_working_memory("u1", {"k": "v"}, 5)
        await store.close()
        again = await looks.reopen()
        assert isinstance(again, MemoryStore)
        try:
            assert _texts(await again.recent_memory("u1", limit=5)) == ["remember me"]
            assert (await again.memory_vectors("u1", embedder="e")).seqs == [1]
            doc = await again.load_working_memory("u1")
            assert doc is not None and doc.document == {"k": "v"}
            assert await again.append_memory("u1", [_rec("t1", "next")]) == [2]
        finally:
            await again.close()

    async def test_a_closed_store_refuses_memory_calls(self, store: Any) -> None:
        await store.close()
        with pytest.raises(StoreError):
            await store.append_memory("u1", [_rec("t1", "a")])
        with pytest.raises(StoreError):
            await store.recent_memory("u1", limit=1)
        with pytest.raises(StoreError):
            await store.load_working_memory("u1")
