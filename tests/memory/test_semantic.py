"""Semantic ranking with the lexical ``HashingEmbedder`` on a small hand-made corpus, and the index itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from repertory import ModelMessage
from repertory.memory import Embedder, HashingEmbedder, StoreMemory
from repertory.memory._index import ResourceIndex, normalise
from repertory.storage import InMemorySessionStore

CORPUS = [
    "My daughter Mia starts school in September",
    "I am allergic to peanuts and shellfish",
    "Our flight to Tokyo leaves on the 14th from Heathrow",
    "The quarterly tax return is due at the end of April",
    "I prefer aisle seats on long flights",
    "The garden needs watering twice a week in summer",
    "Mia's school is called Northfield Primary",
    "Please book restaurants without shellfish on the menu",
    "My bank is Nordea and my account manager is Lars",
    "Remind me to renew the car insurance in March",
    "The wifi password at the cabin is on the fridge",
    "We are planning a summer holiday in Tokyo and Kyoto",
]

QUERIES = [
    (
        "which school does Mia go to?",
        {"Mia's school is called Northfield Primary", "My daughter Mia starts school in September"},
    ),
    (
        "any allergies? shellfish?",
        {"I am allergic to peanuts and shellfish", "Please book restaurants without shellfish on the menu"},
    ),
    ("when does the Tokyo flight leave?", {"Our flight to Tokyo leaves on the 14th from Heathrow"}),
    ("car insurance renewal", {"Remind me to renew the car insurance in March"}),
    ("what is the cabin wifi password", {"The wifi password at the cabin is on the fridge"}),
    ("tax return deadline", {"The quarterly tax return is due at the end of April"}),
]


@pytest.fixture
async def corpus_memory() -> StoreMemory:
    memory = StoreMemory(InMemorySessionStore(), resource="ada", semantic_top_k=2)  # the default min_score
    for i, text in enumerate(CORPUS):
        await memory.append(thread_id=f"t{i % 3}", messages=[ModelMessage.user(text)])
    await memory.flush()
    return memory


@pytest.mark.parametrize(("query", "expected"), QUERIES)
async def test_the_best_hits_are_the_messages_that_share_the_words(
    corpus_memory: StoreMemory, query: str, expected: set[str]
) -> None:
    hits = await corpus_memory.search(query, len(expected))
    assert {r.text for r, _ in hits} == expected
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


async def test_nothing_unrelated_passes_the_minimum_score(corpus_memory: StoreMemory) -> None:
    assert await corpus_memory.search("quantum chromodynamics lecture notes", 5) == []
    # Stop words alone match nothing: they are not features.
    assert await corpus_memory.search("what is the and of", 5) == []


async def test_lexical_means_lexical(corpus_memory: StoreMemory) -> None:
    # Honest about its limits: a paraphrase with no shared word is not found.
    assert await corpus_memory.search("nut intolerance", 3) == []


async def test_the_embedder_is_deterministic_and_describes_itself() -> None:
    e = HashingEmbedder()
    assert isinstance(e, Embedder)
    assert e.name == "hashing-lexical-v1-512"
    assert HashingEmbedder(64, bigrams=False).name == "hashing-lexical-v1-64-uni"
    a = await e.embed(["Flights to Oslo", "", "flight oslo"])
    assert a.shape == (3, 512) and a.dtype == np.float32
    assert not a[1].any()
    unit = normalise(a)
    assert float(unit[0] @ unit[2]) > 0.6  # plural and case fold together
    assert np.array_equal(a, await HashingEmbedder().embed(["Flights to Oslo", "", "flight oslo"]))
    assert e.features("the flights, the flights!") == {"flight": 2, "flight flight": 1}
    with pytest.raises(ValueError):
        HashingEmbedder(8)


async def test_big_batches_hash_in_a_thread_and_give_the_same_vectors() -> None:
    e = HashingEmbedder()
    texts = [" ".join(CORPUS)] * 40
    assert sum(map(len, texts)) > 20_000  # over the size a batch is hashed inline at; one text alone is under it
    one = await e.embed(texts[:1])
    assert np.array_equal(await e.embed(texts), np.repeat(one, len(texts), axis=0))


def test_vectors_are_the_same_in_another_process() -> None:
    # Python's hash() is salted per process; the embedder must not depend on it.
    code = (
        "import asyncio; from repertory.memory import HashingEmbedder; "
        "v = asyncio.run(HashingEmbedder().embed(['stable across processes'])); print(v.tobytes().hex())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"}
    ).stdout.strip()
    mine = asyncio.run(HashingEmbedder().embed(["stable across processes"]))
    assert out == mine.tobytes().hex()


async def test_the_index_refreshes_incrementally_and_grows() -> None:
    store = InMemorySessionStore()
    from repertory.core.store import MemoryRecord

    def rec(thread: str, vec: list[float]) -> MemoryRecord:
        v = normalise(np.asarray([vec], dtype=np.float32))[0]
        return MemoryRecord(thread_id=thread, role="user", text="x", created_at=0, embedder="e", embedding=v.tobytes())

    index = ResourceIndex(store, "ada", "e")
    await index.refresh()
    assert index.size == 0
    assert await index.search(np.asarray([1, 0], dtype=np.float32), 3, 0.0) == []
    await store.append_memory("ada", [rec("t1", [1, 0]), rec("t2", [0, 1])])
    await index.refresh()
    assert (index.size, index.last_seq) == (2, 2)
    # 3,000 more rows in batches: the matrix grows past its first capacity (1,024).
    rng = np.random.default_rng(7)
    for _ in range(3):
        await store.append_memory("ada", [rec("t3", list(rng.normal(size=2))) for _ in range(1000)])
    await store.append_memory("ada", [rec("t4", [0.6, 0.8])])
    await index.refresh()
    assert (index.size, index.last_seq) == (3003, 3003)
    q = np.asarray([0.6, 0.8], dtype=np.float32)
    top = await index.search(q, 1, 0.999, exclude_thread="t3")
    assert [h.seq for h in top] == [3003]
    assert [h.seq for h in await index.search(q, 1, 0.999, exclude_thread="t3", exclude_seqs={3003})] == []
    assert [h.seq for h in await index.search(np.asarray([1, 0], dtype=np.float32), 1, 0.99, exclude_thread="t3")] == [
        1
    ]


async def test_a_large_index_searches_off_the_event_loop_with_the_same_answer() -> None:
    store = InMemorySessionStore()
    index = ResourceIndex(store, "ada", "e")
    rng = np.random.default_rng(1)
    matrix = normalise(rng.normal(size=(25_000, 8)).astype(np.float32))
    index.add(list(range(1, 25_001)), [f"t{i % 7}" for i in range(25_000)], matrix.tobytes())
    q = matrix[123]
    hits = await index.search(q, 5, -1.0, exclude_seqs={1, 2})
    expected = np.argsort(-(matrix @ q), kind="stable")[:5] + 1
    assert [h.seq for h in hits] == expected.tolist()
    assert hits[0].seq == 124 and hits[0].score == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dimensions"):
        index.add([25_001], ["t"], np.zeros(3, dtype=np.float32).tobytes())
