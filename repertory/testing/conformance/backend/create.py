"""``create_session`` with what a server needs: metadata on the record and a client-chosen id.

A taken id is a ``SessionExists`` (a ``CommitConflict``) that changes nothing, on every backend: on
Ray the client must not mistake somebody else's session for its own retried creation.
"""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from repertory.errors import CommitConflict, SessionExists
from repertory.testing.conformance.backend.doubles import Script, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["CreateConformance"]


class CreateConformance(BackendSuite):
    """``create_session`` with metadata and a chosen id; a taken id is ``SessionExists`` and writes nothing."""

    async def test_a_chosen_id_and_metadata_are_kept_and_the_session_runs(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        meta: dict[str, JsonValue] = {"owner": "alice", "tags": ["x", "y"], "n": 3, "nested": {"ok": True}}
        h = await rt.create_session(agent="assistant", title="chosen", session_id="thread-alice-1", metadata=meta)
        assert h.id == "thread-alice-1" and h.record.metadata == meta and h.lineage.kind == "root"
        stored = await rt.store.load_session("thread-alice-1")
        assert stored is not None and stored.metadata == meta and stored.title == "chosen"
        assert stored.root_id == "thread-alice-1"
        assert (await within(h.run("hi"))).text == "re: hi"
        assert (await rt.session("thread-alice-1")).record.metadata == meta

    async def test_a_taken_id_raises_session_exists_and_changes_nothing(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        first = await rt.create_session(agent="assistant", title="first", session_id="taken", metadata={"v": 1})
        await within(first.run("hello"))
        with pytest.raises(SessionExists) as caught:
            await rt.create_session(agent="assistant", title="second", session_id="taken", metadata={"v": 2})
        assert caught.value.details == {"session_id": "taken"} and isinstance(caught.value, CommitConflict)
        # Identical arguments are a second creation too, not a retry of the first.
        with pytest.raises(SessionExists):
            await rt.create_session(agent="assistant", title="first", session_id="taken", metadata={"v": 1})
        stored = await rt.store.load_session("taken")
        assert stored is not None and (stored.title, stored.metadata) == ("first", {"v": 1})
        assert [s.session_id for s in await rt.store.list_sessions()] == ["taken"]
        assert (await within(first.run("again"))).text == "re: again"

    async def test_a_bad_chosen_id_is_refused_and_nothing_is_written(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        for bad in ("", "nul\x00inside"):
            with pytest.raises(ValueError, match="id cannot"):
                await rt.create_session(agent="assistant", session_id=bad)
        with pytest.raises(ValueError):
            await rt.create_session(agent="assistant", metadata={"not json": object()})  # type: ignore[dict-item]
        assert await rt.store.list_sessions() == []

    async def test_spawn_and_fork_take_their_own_metadata(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant", metadata={"who": "root"})
        await within(root.run("hi"))
        child = await root.spawn(metadata={"who": "child"})
        fork = await root.fork(title="copy", metadata={"who": "fork"})
        bare = await root.fork()
        assert child.record.metadata == {"who": "child"} and child.lineage.kind == "spawned"
        assert fork.record.metadata == {"who": "fork"} and fork.record.title == "copy"
        assert bare.record.metadata == {}  # nothing of the parent's is copied unless passed
        for h in (child, fork, bare):
            stored = await rt.store.load_session(h.id)
            assert stored is not None and stored.metadata == h.record.metadata and stored.root_id == root.id
