"""Child process for ``test_delegation_crash.py``: a runtime on a SQLite file whose boss delegates twice.

``python -m tests.runtime._delegation_worker DB DIR KILL_AT``
    Starts a local ``Runtime`` on DB (which re-drives whatever a killed predecessor left open),
    prints ``ready``, sends the root its one turn if it has none yet, and prints ``done <text>`` when
    that turn ends. ``KILL_AT`` arms one real crash, a SIGKILL of this very process, at most once per
    test (a marker file in DIR remembers it fired):

    - ``child_run``: inside a child's first model request (the parent waits in its calls);
    - ``before_result_commit`` / ``after_result_commit``: around the parent's commit that carries
      its delegations' results (the children are done, their answers not yet durable / just durable);
    - ``parent_wait``: nothing is killed here: a child asks for an approval, and once the root lists
      it the process prints ``waiting`` and waits for the test to kill it.

Every model request of a child appends ``request <task> <n>`` to DIR/requests.log, so the test
counts how often each child's model was asked.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repertory import Agent, RunState, Runtime, SessionEvent, SqliteSessionStore, ThreadState, agent_tool, tool
from repertory.core.budget import SpendDelta
from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.testing import ScriptedModel

TASKS = ("sum the column", "check the total")


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _fire_once(folder: Path, point: str) -> None:
    """SIGKILL this process the first time ``point`` is reached in this test (never again after)."""
    marker = folder / f"fired-{point}"
    if marker.exists():
        return
    marker.write_text("fired")
    os.kill(os.getpid(), signal.SIGKILL)


@tool(requires_approval=True)
def publish(report: str) -> str:
    """Publish a report (needs approval)."""
    return f"published {report}"


def make_agents(folder: Path, kill_at: str) -> dict[str, Agent]:
    """The boss (two parallel delegations, then a reply) and the worker (one answer, or an approval first)."""

    def boss(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tools": [{"tool": "worker", "args": {"task": t}} for t in TASKS]}
        results = [p.result for p in messages[-1].tool_results]
        return {"text": "boss: " + " | ".join(str(r) for r in results)}

    def worker(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        task = messages[0].text
        asked = sum(1 for m in messages if m.role == "assistant")
        _append(folder / "requests.log", f"request {task.replace(' ', '_')} {asked}")
        if kill_at == "child_run":
            _fire_once(folder, "child_run")
        if kill_at == "parent_wait" and asked == 0 and task == TASKS[0]:
            return {"tool": "publish", "args": {"report": task}}
        return {"text": f"did {task}"}

    return {
        "boss": Agent(name="boss", model=ScriptedModel(boss), tools=[agent_tool("worker")]),
        "worker": Agent(name="worker", model=ScriptedModel(worker, delay=0.01), tools=[publish]),
    }


class KillingStore(SqliteSessionStore):
    """A SQLite store that kills its process around the commit of the boss's delegation results."""

    folder: Path
    kill_at: str = ""

    async def commit_session(
        self,
        *,
        run: RunState,
        thread: ThreadState,
        history: MessageHistory,
        base_revision_id: str | None = None,
        redeem_token: str | None = None,
        events: Sequence[SessionEvent] = (),
        turn: TurnRecord | None = None,
        session: SessionRecord | None = None,
        spend: SpendDelta | None = None,
    ) -> None:
        armed = self.kill_at in ("before_result_commit", "after_result_commit") and _carries_results(
            history, base_revision_id
        )
        if armed and self.kill_at == "before_result_commit":
            _fire_once(self.folder, self.kill_at)
        await super().commit_session(
            run=run,
            thread=thread,
            history=history,
            base_revision_id=base_revision_id,
            redeem_token=redeem_token,
            events=events,
            turn=turn,
            session=session,
            spend=spend,
        )
        if armed and self.kill_at == "after_result_commit":
            _fire_once(self.folder, self.kill_at)


def _carries_results(history: MessageHistory, base: str | None) -> bool:
    for revision in history.walk_back(base):
        entry = history.entry(revision.entry_id)
        if entry is not None and any(p.tool_name == "worker" for p in entry.message.tool_results):
            return True
    return False


async def _one_waits_one_done(rt: Runtime, root_id: str) -> bool:
    """One child of the root waits for an approval and every other child's turn is done."""
    children = await rt.store.list_children(root_id)
    if len(children) < len(TASKS):
        return False
    waiting = done = 0
    for child in children:
        statuses = [t.status for t in await rt.store.list_turns(child.session_id)]
        waiting += bool(await rt.store.list_runs(child.session_id, statuses=["suspended"]))
        done += statuses == ["done"]
    return waiting == 1 and done == len(TASKS) - 1


async def main(db: str, folder: str, kill_at: str) -> None:
    where = Path(folder)
    store = await KillingStore.open(db)
    assert isinstance(store, KillingStore)
    store.folder, store.kill_at = where, kill_at
    async with await Runtime.start(store=store, agents=make_agents(where, kill_at)) as rt:
        print("ready", flush=True)
        roots = await rt.store.list_sessions(roots_only=True)
        if roots:
            handle = await rt.session(roots[0].session_id)
        else:
            handle = await rt.create_session(agent="boss", title="crash root")
        turns = await rt.store.list_turns(handle.id)
        turn = handle.get_turn(turns[0].submission_id) if turns else await handle.send("go")
        if kill_at == "parent_wait":
            # Polling the store: the children are spawned by the model, there is nothing to await. The
            # kill comes once one child waits for its approval and its sibling has finished (so the
            # test knows which child a recovery asks again).
            while not await _one_waits_one_done(rt, handle.id):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            print("waiting", flush=True)
            await asyncio.Event().wait()  # the test kills us here
        result = await turn.result()
        print(f"done {result.text}", flush=True)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
