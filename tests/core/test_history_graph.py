"""Properties of the immutable history graph, in memory and through the stores' round trips.

Hypothesis drives random sequences of appends and branches over several heads. A plain-Python
model tracks what each head should hold: the messages appended along its branch, each tagged with
the number of the operation that appended it, so two heads must share exactly the revisions of
the operations they both descend from.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from repertory import InMemorySessionStore, MessageHistory, ModelMessage, Origin, SqliteSessionStore, TextPart
from repertory.storage import SessionStore
from tests.records import commit
from tests.testing.conformance.probes import history_row_counts, history_writes

PROPERTY_SETTINGS = settings(deadline=None, max_examples=50)

Op = tuple[str, int, int | str]

_texts = st.text(st.characters(codec="utf-8"), max_size=20)
_append = st.tuples(st.just("append"), st.integers(0, 1_000), _texts)
_branch = st.tuples(st.just("branch"), st.integers(0, 1_000), st.integers(0, 1_000))
operations = st.lists(st.one_of(_append, _append, _branch), min_size=1, max_size=40)


@dataclass(eq=False)
class Head:
    """A head under test and what the model says it holds: (operation number, message), oldest first."""

    history: MessageHistory
    expected: list[tuple[int, ModelMessage]] = field(default_factory=list)

    def lineage_ids(self) -> list[str]:
        return [rev.id for rev in self.history.lineage()]

    def check(self) -> None:
        lineage = self.history.lineage()
        assert self.history.depth == len(lineage) == len(self.expected)
        assert self.history.messages == [m for _, m in self.expected]
        assert [rev.depth for rev in lineage] == list(range(1, len(lineage) + 1))
        assert [rev.parent_id for rev in lineage] == [None, *(rev.id for rev in lineage)][: len(lineage)]
        assert self.history.revision_id == (lineage[-1].id if lineage else None)


def steps(ops: list[Op], heads: list[Head]) -> Iterator[Head]:
    """Apply the operations one by one to ``heads``, checking invariants; yields the head just touched."""
    heads.append(Head(MessageHistory()))
    for number, (kind, which, arg) in enumerate(ops):
        head = heads[which % len(heads)]
        before = {id(h): (h.lineage_ids(), len(h.history.revisions), len(h.history.entries)) for h in heads}
        if kind == "append":
            message = ModelMessage(
                role="user" if number % 2 else "assistant",
                parts=[TextPart(text=str(arg))],
                origin=Origin(kind="user", id=str(number)),
            )
            rev = head.history.append(message)
            head.expected.append((number, message))
            assert rev.id == head.history.revision_id
            entry = head.history.entry(rev.entry_id)
            assert entry is not None and entry.message == message
            touched = head
        else:
            assert isinstance(arg, int)
            lineage = head.history.lineage()
            if lineage:
                keep = arg % len(lineage) + 1
                touched = Head(head.history.branch(lineage[keep - 1].id), head.expected[:keep])
            else:
                touched = Head(head.history.branch())
            heads.append(touched)
        # An operation changes at most the head it touched: records are shared, containers are not.
        for other in heads:
            if other is not touched:
                assert (other.lineage_ids(), len(other.history.revisions), len(other.history.entries)) == before[
                    id(other)
                ]
            other.check()
        yield touched


def apply(ops: list[Op]) -> list[Head]:
    heads: list[Head] = []
    for _ in steps(ops, heads):
        pass
    return heads


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@PROPERTY_SETTINGS
@given(operations)
def test_history_graph_invariants(ops: list[Op]) -> None:
    heads = apply(ops)
    # Two heads share exactly the revisions of the operations both descend from, and nothing after.
    for a in heads:
        for b in heads:
            shared = common_prefix([n for n, _ in a.expected], [n for n, _ in b.expected])
            ids_a, ids_b = a.lineage_ids(), b.lineage_ids()
            assert ids_a[:shared] == ids_b[:shared]
            assert set(ids_a[shared:]).isdisjoint(ids_b)
    # Ids are minted once per append: unique across the revisions and entries of every head.
    revisions = {rev.id: rev for h in heads for rev in h.history.revisions}
    entries = {e.id: e for h in heads for e in h.history.entries}
    appends = sum(kind == "append" for kind, _, _ in ops)
    assert len(revisions) == len(entries) == appends
    assert revisions.keys().isdisjoint(entries.keys())
    assert sorted(rev.entry_id for rev in revisions.values()) == sorted(entries)


async def open_stores(stack: contextlib.AsyncExitStack) -> list[SessionStore]:
    """A memory store and a SQLite one, both closed when ``stack`` exits."""
    memory = await stack.enter_async_context(InMemorySessionStore())
    sqlite = await stack.enter_async_context(await SqliteSessionStore.open(":memory:"))
    return [memory, sqlite]


async def check_store(store: SessionStore, heads: list[Head]) -> None:
    for head in heads:
        if head.history.revision_id is None:
            continue
        loaded = await store.load_history(head.history.revision_id)
        assert loaded is not None
        assert loaded.messages == [m for _, m in head.expected]
        assert loaded.revisions == head.history.lineage()
    # Every message some head reaches is stored, and stored exactly once.
    reached = {rev.id: rev.entry_id for h in heads for rev in h.history.lineage()}
    assert await history_row_counts(store) == (len(set(reached.values())), len(reached))


@PROPERTY_SETTINGS
@given(operations, st.randoms(use_true_random=False))
def test_committing_whole_heads_in_any_order(ops: list[Op], rnd: random.Random) -> None:
    """Each head becomes a thread in one commit (a fork's first commit), the threads in a random order."""
    heads = apply(ops)
    order = list(range(len(heads)))
    rnd.shuffle(order)

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for store in await open_stores(stack):
                stored: set[str] = set()
                for i in order:
                    new = {rev.id for rev in heads[i].history.lineage()} - stored
                    async with history_writes(store) as writes:
                        await commit(store, heads[i].history, thread_id=f"thread-{i}", run_id=f"run-{i}")
                    # Only what the store did not hold yet is written: a shared prefix never twice.
                    assert (writes.entries, writes.revisions) == (len(new), len(new))
                    stored |= new
                await check_store(store, heads)

    asyncio.run(run())


@PROPERTY_SETTINGS
@given(operations)
def test_committing_after_every_operation(ops: list[Op]) -> None:
    """Each head is a thread, committed after every change on top of the head it committed last."""

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            await drive(await open_stores(stack))

    async def drive(stores: list[SessionStore]) -> None:
        bases: dict[int, str | None] = {}  # id(head) -> its thread's stored head
        threads: dict[int, int] = {}  # id(head) -> thread number
        stored: set[str] = set()  # revision ids committed so far
        heads: list[Head] = []
        for touched in steps(ops, heads):
            key = id(touched)
            number = threads.setdefault(key, len(threads))
            new = {rev.id for rev in touched.history.lineage()} - stored
            # A branch (a new thread on a stored revision) writes no history; an append writes its message.
            assert len(new) <= 1
            for store in stores:
                async with history_writes(store) as writes:
                    await commit(
                        store,
                        touched.history,
                        thread_id=f"thread-{number}",
                        run_id=f"run-{number}",
                        base=bases.get(key),
                    )
                assert (writes.entries, writes.revisions) == (len(new), len(new))
            stored |= new
            bases[key] = touched.history.revision_id
        for store in stores:
            await check_store(store, heads)
            for head in heads:
                if id(head) not in threads:  # the first head, never touched: no thread
                    assert head.history.revision_id is None
                    continue
                thread = await store.load_thread(f"thread-{threads[id(head)]}")
                assert thread is not None and thread.history_revision_id == head.history.revision_id

    asyncio.run(run())
