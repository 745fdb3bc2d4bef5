"""Deleting sessions (``Runtime.delete_session``), amending them (``SessionHandle.amend``), owners, and retention."""

from __future__ import annotations

import pytest

from repertory.errors import RepertoryError, SessionNotFound
from repertory.runtime.tools import ToolContext, tool
from repertory.testing.conformance.backend.doubles import Recorder, Script, history, texts, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.tree.retention import delete_idle_trees, idle_trees

__all__ = ["DeleteConformance"]


RAN = Recorder("delete.ran")


@tool(requires_approval=True)
def wipe(ctx: ToolContext, what: str) -> str:
    """Wipe something (needs approval)."""
    RAN.append(what)
    return f"wiped {what}"


class DeleteConformance(BackendSuite):
    """Deleting and amending sessions, owners, and retention over idle trees."""

    async def test_a_session_goes_with_its_spawned_descendants_and_its_fork_survives(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant", owner="alice")
        await within(root.run("root says"))
        child = await root.spawn()
        await within(child.run("child says"))
        grandchild = await child.spawn()
        await within(grandchild.run("grandchild says"))
        fork = await root.fork(title="the fork")
        await within(fork.run("fork says"))
        fork_child = await fork.spawn()
        await within(fork_child.run("fork child says"))
        before = await history(rt, fork)

        deleted = await within(rt.delete_session(root.id))

        assert deleted.sessions == 3 and deleted.runs == 3 and deleted.turns == 3
        for gone in (root, child, grandchild):
            with pytest.raises(SessionNotFound):
                await rt.session(gone.id)
            assert await rt.store.list_runs(gone.id) == [] and await rt.store.load_events(gone.id) == []
        # The fork is whole: its history (the shared prefix too), its own child, and it goes on.
        assert await history(rt, fork) == before
        assert texts(before, "user") == ["root says", "fork says"]
        again = await rt.session(fork.id)
        assert again.record.owner == "alice" and again.record.title == "the fork"
        assert [c.id for c in await again.children()] == [fork_child.id]
        assert (await within(again.run("fork goes on"))).text == "re: fork goes on"
        with pytest.raises(SessionNotFound):
            await again.parent()

    async def test_deleting_a_running_session_cancels_its_turn_first(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"long": [{"text": "never said"}]})
        gate = script.hold("long")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("long")
        queued = await h.send("after")
        await gate.reached()

        await within(rt.delete_session(h.id))
        gate.release()

        with pytest.raises(SessionNotFound):
            await rt.session(h.id)
        assert await rt.store.list_runs(h.id) == [] and await rt.store.list_turns(h.id) == []
        assert await rt.store.load_turn(turn.submission_id) is None
        assert await rt.store.load_turn(queued.submission_id) is None
        assert script.count("after") == 0
        assert await rt.store.list_open_turns() == []  # nothing left for a restart to re-drive
        with pytest.raises(SessionNotFound):
            await h.send("too late")

    async def test_a_pending_approval_dies_with_its_session(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"wipe": [{"tool": "wipe", "args": {"what": "disk"}}, {"text": "wiped"}]})
        rt = await make_runtime(script.agent(tools=[wipe]))
        h = await rt.create_session(agent="assistant")
        assert (await within(h.run("wipe"))).status == "suspended"
        [pending] = await h.pending_approvals()

        await within(rt.delete_session(h.id))

        with pytest.raises(SessionNotFound):
            await h.approve(pending.token)
        assert RAN == []

    async def test_forks_true_deletes_the_forks_too(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        await within(root.run("hi"))
        fork = await root.fork()
        await within(fork.run("fork hi"))

        deleted = await within(rt.delete_session(root.id, forks=True))

        assert deleted.sessions == 2
        for gone in (root, fork):
            with pytest.raises(SessionNotFound):
                await rt.session(gone.id)
        with pytest.raises(SessionNotFound):
            await rt.delete_session(root.id)

    async def test_amend_rebinds_the_agent_only_before_the_first_turn(self, make_runtime: RuntimeFactory) -> None:
        first, second = Script(), Script({"who": [{"text": "second here"}]})
        rt = await make_runtime({"first": first.agent("first"), "second": second.agent("second")})
        h = await rt.create_session(agent="first", metadata={"a": 1})
        await h.metadata()  # the session is in memory: the rebinding must reach its actor too

        record = await h.amend(agent="second", metadata={"graph_id": "second"})

        assert (record.agent, record.metadata) == ("second", {"graph_id": "second"})
        assert (await rt.session(h.id)).record.agent == "second"
        assert (await within(h.run("who"))).text == "second here"
        assert first.count("who") == 0
        with pytest.raises(ValueError, match="fixed"):
            await h.amend(agent="first")
        kept = await h.amend(agent="second", metadata={"b": 2})  # the same agent and new metadata: fine
        assert (kept.agent, kept.metadata) == ("second", {"b": 2})
        with pytest.raises(RepertoryError, match="no agent named"):
            await h.amend(agent="nobody")

    async def test_children_and_forks_inherit_the_owner(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant", owner="bob")
        assert root.record.owner == "bob"
        assert (await root.spawn()).record.owner == "bob"
        assert (await root.fork()).record.owner == "bob"
        assert (await rt.create_session(agent="assistant")).record.owner is None

    async def test_retention_finds_idle_trees_and_deletes_them_whole(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"busy": [{"text": "done at last"}]})
        gate = script.hold("busy")
        rt = await make_runtime(script.agent())
        idle = await rt.create_session(agent="assistant")
        await within(idle.run("old news"))
        fork = await idle.fork()
        working = await rt.create_session(agent="assistant")
        await working.send("busy")
        await gate.reached()
        later = 10**15  # far in the future: everything that is not working is idle by then

        assert await idle_trees(rt, idle_days=1) == []  # nothing is a day old yet
        found = await idle_trees(rt, idle_days=1, now=later)

        assert [t.root_id for t in found] == [idle.id]
        assert found[0].session_ids == [idle.id, fork.id] and found[0].root_exists
        deleted = await within(delete_idle_trees(rt, found))
        assert deleted.sessions == 2
        assert [r.session_id for r in await rt.store.list_sessions()] == [working.id]
        gate.release()

    async def test_retention_finds_a_tree_whose_root_is_gone(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        await within(root.run("hi"))
        fork = await root.fork()
        await within(rt.delete_session(root.id))

        [tree] = await idle_trees(rt, idle_days=0, now=10**15)

        assert (tree.root_id, tree.session_ids, tree.root_exists) == (root.id, [fork.id], False)
        assert (await within(delete_idle_trees(rt, [tree]))).sessions == 1
        assert await rt.store.list_sessions() == []
