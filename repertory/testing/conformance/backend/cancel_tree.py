"""The kill switch: ``handle.cancel(tree=True)`` stops a whole session tree, on every backend.

A tree three levels deep, delegating in parallel at each level, is cancelled from its root while
its leaves stream a reply, run a tool, wait for an approval and wait for their model: afterwards
every turn of the tree is cancelled, and for a second after the call returns no model request and
no tool call of the tree starts, even with every gate the leaves were held at opened.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory.core.tree import TurnStatus
from repertory.errors import RunCancelled
from repertory.runtime.tools import ToolContext, tool
from repertory.testing.conformance.backend.doubles import Gate, Recorder, Script, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.tree.delegation import agent_tool
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["CancelTreeConformance"]

QUIET = 1.0
"""Seconds the tree is watched after the cancel returns: nothing of it may start meanwhile."""


async def _tree(root: SessionHandle) -> list[SessionHandle]:
    """The root and its descendants, breadth-first."""
    found, frontier = [root], [root]
    while frontier:
        frontier = [c for h in frontier for c in await h.children()]
        found.extend(frontier)
    return found


async def _statuses(rt: Runtime, root: SessionHandle) -> dict[str, list[TurnStatus]]:
    """Each session's agent and title, with the status of each of its turns."""
    out: dict[str, list[TurnStatus]] = {}
    for h in await _tree(root):
        out[f"{h.record.agent}:{h.record.title}"] = [t.status for t in await rt.store.list_turns(h.id)]
    return out


async def _until_pending(root: SessionHandle) -> None:
    """Wait until an approval waits somewhere in the tree (in a child the model spawned: no stream to await)."""
    async with asyncio.timeout(10):
        while True:
            if await root.pending_approvals(tree=True):
                return
            await asyncio.sleep(0.02)


class CancelTreeConformance(BackendSuite):
    """``cancel(tree=True)``: every turn of a session and its descendants cancelled, nothing starts afterwards."""

    async def test_a_tree_cancelled_while_its_leaves_stream_and_run_tools_starts_nothing_afterwards(
        self, make_runtime: RuntimeFactory
    ) -> None:
        dug = Recorder()
        dig_gate = Gate()

        @tool
        async def dig(ctx: ToolContext, depth: int) -> str:
            """Dig slowly."""
            dug.append(f"started {depth}")
            await dig_gate.pass_through()
            dug.append(f"finished {depth}")
            return f"dug {depth}"

        @tool(requires_approval=True)
        def launch(target: str) -> str:
            """Launch something (needs approval)."""
            dug.append(f"launched {target}")
            return f"launched {target}"

        boss = Script({"go": [{"tools": [{"tool": "lead", "args": {"task": t}} for t in ("l1", "l2")]}]})
        lead = Script(
            {
                "l1": [{"tools": [{"tool": "worker", "args": {"task": t}} for t in ("stream", "dig")]}],
                "l2": [{"tools": [{"tool": "worker", "args": {"task": t}} for t in ("ask", "wait")]}],
            }
        )
        worker = Script(
            {
                "stream": [{"text": "a long reply, streamed in many small pieces"}],
                "dig": [{"tool": "dig", "args": {"depth": 3}}, {"text": "dug"}],
                "ask": [{"tool": "launch", "args": {"target": "moon"}}, {"text": "launched"}],
            }
        )
        streaming = worker.hold_midway("stream", chunks=8)
        waiting = worker.hold("wait")
        gates = (streaming, waiting, dig_gate)
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("lead")]),
            "lead": lead.agent("lead", tools=[agent_tool("worker")]),
            "worker": worker.agent("worker", tools=[dig, launch]),
        }
        rt = await make_runtime(agents)
        root = await rt.create_session(agent="boss", title="root")
        turn = await root.send("go")
        for gate in gates:
            await gate.reached()
        await _until_pending(root)

        await within(root.cancel(tree=True))

        requests = (len(boss.log), len(lead.log), len(worker.log))
        tools = dug.items()
        for gate in gates:
            gate.release()  # a drive that survived the cancel would now go on
        await asyncio.sleep(QUIET)  # watching for something that must not happen: nothing to await
        assert (len(boss.log), len(lead.log), len(worker.log)) == requests == (1, 2, 4)
        assert dug.items() == tools == ["started 3"]
        with pytest.raises(RunCancelled):
            await within(turn.result())
        statuses = await _statuses(rt, root)
        assert len(statuses) == 7, statuses
        assert all(s == ["cancelled"] for s in statuses.values()), statuses
        assert await root.pending_approvals(tree=True) == []

    async def test_running_and_queued_turns_of_spawned_descendants_are_cancelled(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        gates = [script.hold("c-busy"), script.hold("g-busy")]
        rt = await make_runtime(script.agent())
        root = await rt.create_session(agent="assistant", title="root")
        child = await root.spawn(title="child")
        grandchild = await child.spawn(title="grandchild")
        turns = [await child.send("c-busy"), await grandchild.send("g-busy")]
        turns += [await child.send("c-later"), await grandchild.send("g-later")]
        for gate in gates:
            await gate.reached()

        await within(root.cancel(tree=True))

        for gate in gates:
            gate.release()
        await asyncio.sleep(QUIET)  # watching for something that must not happen: nothing to await
        assert sorted(script.prompts()) == ["c-busy", "g-busy"]
        assert [await t.status() for t in turns] == ["cancelled"] * 4
        # The cancel stopped turns, not sessions: the tree takes new work afterwards.
        other = await root.spawn(title="sibling")
        assert (await within(other.run("after"))).text == "re: after"
