"""``delete_sessions`` against random session trees: nothing a remaining session reads is lost, nothing is left.

Each round builds sessions at random: roots, steps, compactions (a summary inserted before the
last messages, which are added again on top of it), head moves to an earlier checkpoint, and
forks at any head a session has had (its current one or one it left). Sessions are deleted in a
random order; after every deletion each remaining session must still load every head it has had,
message for message, and once all are deleted the store holds no history row. A side-branch
data loss (a fork at the head a compaction left lost messages once its parent and its sibling
were deleted) and the rows a deleted compacted session left behind were found by scenarios of
this kind.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repertory import MessageHistory, ModelMessage
from repertory.storage import TreeStore
from repertory.testing.conformance.tree_records import session_record
from tests.conftest import empty_store
from tests.records import commit, history_of
from tests.testing.conformance.probes import history_row_counts

ROUNDS = {"memory": 12, "sqlite": 6, "postgres": 3}
OPERATIONS = 40


@pytest.fixture(params=tuple(ROUNDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    """An empty store of each backend (PostgreSQL: the session's server, truncated)."""
    async with empty_store(request.param, request, tmp_path / "s.db") as opened:
        yield opened


@dataclass
class _Session:
    history: MessageHistory
    heads: list[str] = field(default_factory=list)  # every head it has had, the current one last
    commits: int = 0


class _World:
    """The sessions of one round, what each has said, and the store they are in."""

    def __init__(self, store: TreeStore, rng: random.Random) -> None:
        self.store, self.rng = store, rng
        self.sessions: dict[str, _Session] = {}
        self.made = 0

    async def _commit(self, sid: str, base: str | None) -> None:
        session = self.sessions[sid]
        session.commits += 1
        await commit(self.store, session.history, thread_id=sid, run_id=f"run-{sid}-{session.commits}", base=base)
        session.heads.append(session.history.revision_id or "")

    def _words(self) -> str:
        self.made += 1
        return f"message {self.made}"

    async def root(self) -> None:
        sid = f"s{len(self.sessions)}"
        self.sessions[sid] = _Session(history_of(*(self._words() for _ in range(self.rng.randint(1, 3)))))
        await self.store.create_session(session_record(sid))
        await self._commit(sid, None)

    async def step(self, sid: str) -> None:
        session = self.sessions[sid]
        base = session.history.revision_id
        session.history.append(ModelMessage.user(self._words()))
        await self._commit(sid, base)

    async def compact(self, sid: str) -> None:
        session = self.sessions[sid]
        lineage = session.history.lineage()
        if len(lineage) < 2:
            return await self.step(sid)
        base = session.history.revision_id
        after = self.rng.choice(lineage[:-1])
        session.history.insert(ModelMessage.user(f"summary {self._words()}"), after=after.id)
        await self._commit(sid, base)
        return None

    async def move_back(self, sid: str) -> None:
        session = self.sessions[sid]
        lineage = session.history.lineage()
        if len(lineage) < 2:
            return await self.step(sid)
        base = session.history.revision_id
        session.history = session.history.branch(self.rng.choice(lineage[:-1]).id)
        await self.store.move_head(sid, history=session.history, base_revision_id=base)
        session.heads.append(session.history.revision_id or "")
        if self.rng.random() < 0.7:
            await self.step(sid)
        return None

    async def fork(self, parent: str) -> None:
        at = self.rng.choice(self.sessions[parent].heads)
        sid = f"s{len(self.sessions)}"
        history = self.sessions[parent].history.branch(at)
        self.sessions[sid] = _Session(history, heads=[at])
        await self.store.create_session(session_record(sid, parent=parent, kind="forked", forked_at=at), head=at)
        if self.rng.random() < 0.6:
            await self.step(sid)

    async def check(self, alive: list[str]) -> None:
        for sid in alive:
            session = self.sessions[sid]
            for head in session.heads:
                loaded = await self.store.load_history(head)
                expected = [m.text for m in session.history.branch(head).messages]
                assert loaded is not None, f"{sid} lost its head {head}"
                assert [m.text for m in loaded.messages] == expected, f"{sid}'s head {head} reads differently"


async def _round(store: TreeStore, seed: int) -> None:
    rng = random.Random(seed)
    world = _World(store, rng)
    await world.root()
    for _ in range(OPERATIONS):
        kind = rng.choices(["root", "step", "compact", "move", "fork"], weights=[1, 4, 2, 1, 3])[0]
        sid = rng.choice(list(world.sessions))
        if kind == "root":
            await world.root()
        elif kind == "step":
            await world.step(sid)
        elif kind == "compact":
            await world.compact(sid)
        elif kind == "move":
            await world.move_back(sid)
        else:
            await world.fork(sid)
    alive = list(world.sessions)
    rng.shuffle(alive)
    while alive:
        doomed = [alive.pop() for _ in range(min(len(alive), rng.choice([1, 1, 1, 2])))]
        await store.delete_sessions(doomed)
        await world.check(alive)
    assert await history_row_counts(store) == (0, 0), f"seed {seed}: history rows left after deleting every session"


async def test_random_trees_lose_nothing_and_leave_nothing(store: TreeStore, request: pytest.FixtureRequest) -> None:
    backend = request.node.callspec.params["store"]
    for seed in range(ROUNDS[backend]):
        await store.delete_sessions([])
        await _round(store, seed)
