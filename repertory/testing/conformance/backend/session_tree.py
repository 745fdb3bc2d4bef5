"""The session tree: identity, lineage, resource URIs, spawn, fork, children and parent."""

from __future__ import annotations

import pytest

from repertory.core.tree import Lineage
from repertory.errors import RepertoryError, SessionNotFound
from repertory.testing.conformance.backend.doubles import Script, history, texts
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["SessionTreeConformance"]


class SessionTreeConformance(BackendSuite):
    """The session tree: identity, lineage, resource URIs, spawn, fork, children and parent."""

    async def test_a_root_session_has_identity_lineage_and_a_resource(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant", title="root")
        assert isinstance(root.id, str) and root.id
        assert root.lineage == Lineage(kind="root", parent_id=None, forked_at_revision_id=None)
        assert root.resource == f"repertory://sessions/{root.id}"
        assert await root.parent() is None
        assert await root.children() == []

        again = await rt.session(root.id)
        assert again.id == root.id
        assert again.lineage == root.lineage
        assert again.resource == root.resource
        other = await rt.create_session(agent="assistant")
        assert other.id != root.id

    async def test_an_unknown_session_is_session_not_found(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        with pytest.raises(SessionNotFound):
            await rt.session("no-such-session")
        with pytest.raises(RepertoryError):
            await rt.create_session(agent="no-such-agent")

    async def test_spawn_inherits_agent_model_and_cwd_and_starts_with_no_history(
        self, make_runtime: RuntimeFactory
    ) -> None:
        main, other = Script(), Script({"child task": [{"text": "other agent here"}]})
        rt = await make_runtime({"main": main.agent("main"), "other": other.agent("other")})
        root = await rt.create_session(agent="main", title="root", model="model-a", cwd="/work/a")
        await root.run("root secret")

        child = await root.spawn(title="kid")
        assert child.lineage == Lineage(kind="spawned", parent_id=root.id, forked_at_revision_id=None)
        meta = await child.metadata()
        assert (meta.title, meta.model, meta.cwd) == ("kid", "model-a", "/work/a")
        assert await history(rt, child) == []

        result = await child.run("child task")
        assert result.text == "re: child task"  # the inherited agent ("main") answered
        assert main.count("child task") == 1 and other.count("child task") == 0
        seen = texts(main.requests[-1])
        assert "root secret" not in seen and seen == ["child task"]

    async def test_spawn_overrides_agent_title_model_and_cwd(self, make_runtime: RuntimeFactory) -> None:
        main, other = Script(), Script({"child task": [{"text": "other agent here"}]})
        rt = await make_runtime({"main": main.agent("main"), "other": other.agent("other")})
        root = await rt.create_session(agent="main", model="model-a", cwd="/work/a")

        child = await root.spawn(agent="other", title="t", model="model-b", cwd="/work/b")
        meta = await child.metadata()
        assert (meta.title, meta.model, meta.cwd) == ("t", "model-b", "/work/b")
        assert (await child.run("child task")).text == "other agent here"
        assert other.count("child task") == 1 and main.count("child task") == 0

        grandchild = await child.spawn()  # inherits from its own parent, not from the root
        meta = await grandchild.metadata()
        assert (meta.model, meta.cwd) == ("model-b", "/work/b")
        assert (await grandchild.run("child task")).text == "other agent here"
        assert grandchild.lineage.parent_id == child.id

        with pytest.raises(RepertoryError):
            await root.spawn(agent="no-such-agent")

    async def test_children_and_parent_walk_the_tree(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        await root.run("hello")
        first = await root.spawn(title="first")
        second = await root.fork(title="second")
        third = await root.spawn(title="third")
        grandchild = await second.spawn()

        kinds = {c.id: c.lineage.kind for c in await root.children()}
        assert kinds == {first.id: "spawned", second.id: "forked", third.id: "spawned"}
        assert [c.id for c in await second.children()] == [grandchild.id]
        assert await first.children() == []

        parent = await grandchild.parent()
        assert parent is not None and parent.id == second.id and parent.lineage == second.lineage
        grandparent = await parent.parent()
        assert grandparent is not None and grandparent.id == root.id
        assert await grandparent.parent() is None

        reloaded = await rt.session(grandchild.id)
        assert reloaded.lineage == Lineage(kind="spawned", parent_id=second.id)

    async def test_children_are_listed_oldest_first(self, make_runtime: RuntimeFactory) -> None:
        # SessionHandle.children() promises "oldest first"; children created within one millisecond
        # must still come back in creation order.
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        made = [(await root.spawn(title=str(i))).id if i % 2 else (await root.fork(title=str(i))).id for i in range(8)]
        assert [c.id for c in await root.children()] == made

    async def test_fork_shares_the_history_up_to_now_without_copying(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        root = await rt.create_session(agent="assistant", model="m", cwd="/c")
        await root.run("one")
        await root.run("two")
        head = (await rt.store.load_thread(root.id)).history_revision_id  # type: ignore[union-attr]
        rows = await make_runtime.history_rows(rt)

        fork = await root.fork(title="alt")

        assert fork.lineage == Lineage(kind="forked", parent_id=root.id, forked_at_revision_id=head)
        assert head is not None
        forked_thread = await rt.store.load_thread(fork.id)
        assert forked_thread is not None and forked_thread.history_revision_id == head  # O(1): same head
        assert await make_runtime.history_rows(rt) == rows  # no history row was written by the fork
        assert texts(await history(rt, fork)) == ["one", "re: one", "two", "re: two"]
        meta = await fork.metadata()
        assert (meta.title, meta.model, meta.cwd, meta.status) == ("alt", "m", "/c", "idle")

    async def test_nothing_crosses_between_a_fork_and_its_parent_afterwards(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        root = await rt.create_session(agent="assistant")
        await root.run("shared")
        fork = await root.fork()

        await root.run("parent only")
        await fork.run("fork only")
        await root.run("parent again")

        assert texts(await history(rt, root)) == [
            "shared",
            "re: shared",
            "parent only",
            "re: parent only",
            "parent again",
            "re: parent again",
        ]
        assert texts(await history(rt, fork)) == ["shared", "re: shared", "fork only", "re: fork only"]
        # What each model request saw, too (not only what the store holds).
        fork_request = script.requests[script.prompts().index("fork only")]
        assert "parent only" not in texts(fork_request) and "shared" in texts(fork_request)
        parent_request = script.requests[script.prompts().index("parent again")]
        assert "fork only" not in texts(parent_request) and "re: fork only" not in texts(parent_request)

    async def test_a_fork_of_a_fork_keeps_its_own_branch(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        await root.run("a")
        fork = await root.fork()
        await fork.run("b")
        fork2 = await fork.fork()
        await fork2.run("c")
        assert fork2.lineage.parent_id == fork.id
        assert texts(await history(rt, fork2)) == ["a", "re: a", "b", "re: b", "c", "re: c"]
        assert texts(await history(rt, fork)) == ["a", "re: a", "b", "re: b"]
        assert texts(await history(rt, root)) == ["a", "re: a"]

    async def test_a_fork_of_an_empty_session_starts_empty(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        fork = await root.fork()
        assert fork.lineage == Lineage(kind="forked", parent_id=root.id, forked_at_revision_id=None)
        assert (await fork.run("first")).text == "re: first"
        assert texts(await history(rt, fork)) == ["first", "re: first"]
        assert await history(rt, root) == []
