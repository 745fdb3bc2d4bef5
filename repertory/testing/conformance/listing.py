"""``SessionListingConformance``: the session listing of a ``TreeStore`` (``page_sessions``, ``session_counts``).

The web UI's sessions page pages through every session newest first by keyset (never OFFSET over
the whole table) and shows how many sessions are running, suspended and failed. A session's status
for the listing: running while a turn is queued or running; otherwise suspended or error when the
latest run of its thread is; otherwise idle. Both take an ``owner`` (the HTTP server's tenancy: the
UI shows a key only its owner's sessions), filtered in the query itself. Part of ``TreeConformance``,
kept apart because it is one query surface of its own.
"""

from __future__ import annotations

from typing import Any

from repertory.core.state import RunState
from repertory.core.store import TreeStore
from repertory.testing.conformance._looks import Conformance
from repertory.testing.conformance.tree_records import session_record, turn_record

__all__ = ["SessionListingConformance"]


async def _listing_fixture(store: TreeStore) -> None:
    """Six sessions of every status: r1 idle, r2 suspended, c1 (child of r1) error, r3 running, r4 idle
    after an error, r5 suspended but running a new turn."""
    await store.create_session(session_record("r1", title="Alpha report", agent="writer"))
    await store.create_session(session_record("r2", title="beta"))
    await store.create_session(session_record("c1", parent="r1", kind="spawned", title="alpha child"))
    await store.create_session(session_record("r3", agent="writer"))
    await store.create_session(session_record("r4"))
    await store.create_session(session_record("r5"))

    async def run(run_id: str, thread: str, status: Any, at: int) -> None:
        await store.save(RunState(run_id=run_id, thread_id=thread, status=status, created_at=at, updated_at=at))

    await run("a", "r1", "done", 10)
    await run("b", "r2", "suspended", 10)
    await run("c", "c1", "error", 10)
    await run("d", "r4", "error", 10)
    await run("e", "r4", "done", 20)  # a later run: r4 is idle again
    await run("f", "r5", "suspended", 10)
    await run("g", "no-session", "error", 10)  # a bare Session's thread: not a session, never counted
    await store.add_turn(turn_record("r3", "t3"))
    await store.add_turn(turn_record("r5", "t5", status="running"))


async def _page_ids(store: TreeStore, **query: Any) -> list[str]:
    return [s.session_id for s in await store.page_sessions(**query)]


class SessionListingConformance(Conformance):
    """The listing tests; ``TreeConformance`` includes them (subclass that, not this)."""

    async def test_page_sessions_walks_newest_first_by_keyset(self, store: TreeStore) -> None:
        await _listing_fixture(store)
        assert await _page_ids(store) == ["r5", "r4", "r3", "c1", "r2", "r1"]
        first = await _page_ids(store, limit=4)
        assert first == ["r5", "r4", "r3", "c1"]
        assert await _page_ids(store, limit=4, before=first[-1]) == ["r2", "r1"]
        assert await _page_ids(store, before="r1") == []
        assert await _page_ids(store, before="unknown") == []
        # A session created between two pages shows up on the first page, not as a repeat on the next.
        await store.create_session(session_record("r6"))
        assert await _page_ids(store, limit=4, before="c1") == ["r2", "r1"]

    async def test_page_sessions_filters_combine(self, store: TreeStore) -> None:
        await _listing_fixture(store)
        assert await _page_ids(store, roots_only=True) == ["r5", "r4", "r3", "r2", "r1"]
        assert await _page_ids(store, agent="writer") == ["r3", "r1"]
        assert await _page_ids(store, search="ALPHA") == ["c1", "r1"]  # a title substring, any case
        assert await _page_ids(store, search="r") == ["r5", "r4", "r3", "r2", "r1"]  # an id prefix
        assert await _page_ids(store, search="100%_") == []  # LIKE's wildcards are plain characters
        assert await _page_ids(store, status="running") == ["r5", "r3"]
        assert await _page_ids(store, status="suspended") == ["r2"]
        assert await _page_ids(store, status="error") == ["c1"]
        assert await _page_ids(store, status="idle") == ["r4", "r1"]
        assert await _page_ids(store, status="error", roots_only=True) == []
        assert await _page_ids(store, status="running", agent="writer", search="r3") == ["r3"]
        assert await _page_ids(store, status="idle", limit=1, before="r4") == ["r1"]

    async def test_session_counts_follow_the_listing_rule(self, store: TreeStore) -> None:
        assert await store.session_counts() == {"running": 0, "suspended": 0, "error": 0}
        await _listing_fixture(store)
        assert await store.session_counts() == {"running": 2, "suspended": 1, "error": 1}

    async def test_page_sessions_search_finds_titles_json_escapes(self, store: TreeStore) -> None:
        await store.create_session(session_record("q1", title='say "hi" \\ there'))
        await store.create_session(session_record("q2", title="naïve café"))
        assert await _page_ids(store, search='"HI" \\') == ["q1"]
        assert await _page_ids(store, search="CAFÉ") == ["q2"]

    async def test_page_sessions_and_counts_filter_by_owner(self, store: TreeStore) -> None:
        await _listing_fixture(store)  # sessions of nobody in particular (the operator's)
        await store.create_session(session_record("a1", owner="alice", title="mine"))
        await store.create_session(session_record("b1", owner="bob", title="mine too"))
        await store.create_session(session_record("a2", owner="alice", metadata={"owner": "bob"}))
        await store.create_session(session_record("a3", parent="a1", kind="spawned", owner="alice"))
        await store.create_session(session_record("e1", owner="élan:x"))  # non-ASCII owners too
        await store.create_session(session_record("b2", owner="bob", metadata={"note": '"owner":"alice"'}))
        assert await _page_ids(store, owner="alice") == ["a3", "a2", "a1"]
        assert await _page_ids(store, owner="bob") == ["b2", "b1"]  # a nested "owner" key is not the owner
        assert await _page_ids(store, owner="élan:x") == ["e1"]
        assert await _page_ids(store, owner="nobody") == []
        assert await _page_ids(store, owner="alice", limit=1, before="a3") == ["a2"]
        assert await _page_ids(store, owner="alice", roots_only=True, search="MIN") == ["a1"]
        assert len(await _page_ids(store)) == 12  # no owner: every session
        assert await store.session_counts(owner="alice") == {"running": 0, "suspended": 0, "error": 0}

        async def run(run_id: str, thread: str, status: Any) -> None:
            await store.save(RunState(run_id=run_id, thread_id=thread, status=status, created_at=30, updated_at=30))

        await run("x1", "a1", "suspended")
        await run("x2", "a3", "error")
        await run("x3", "b1", "suspended")
        await store.add_turn(turn_record("a2", "ta2"))
        assert await store.session_counts(owner="alice") == {"running": 1, "suspended": 1, "error": 1}
        assert await store.session_counts(owner="bob") == {"running": 0, "suspended": 1, "error": 0}
        assert await store.session_counts() == {"running": 3, "suspended": 3, "error": 2}
        assert await _page_ids(store, owner="alice", status="suspended") == ["a1"]
        assert await _page_ids(store, owner="bob", status="idle") == ["b2"]
