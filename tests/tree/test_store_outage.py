"""A write that fails on the store (locked, stopped) never leaves a turn open with nothing driving it.

Found by the chaos soak (issue 26). On Ray + SQLite, seed 9, a worker session delegated by an
orchestrator had its ``charge`` approved; the commit after the tool ran met "database is locked"
(the soak holds SQLite's write lock past the busy timeout). The decision's drive raised, the turn
and its run stayed ``running`` in a live host, and only a restart re-drives open turns: the
worker never ended, nor did the orchestrator's turn waiting on it. The same failure in a turn's
own drive ended the turn ``error`` with its run still ``running`` (seed 13, the checker's
``turn_run_status``). A store failure is not an outcome: the actor drives the turn on from its
last commit, as a restarted host would.

The store here fails chosen writes with ``StoreError`` at the moment they happen (the write after a
redemption, a turn's start, any commit while "down"), so every test hits its window exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from repertory import Agent, RunResult, Runtime, StoreError, ToolContext, agent_tool, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import InvalidResumeToken, ModelError, RunCancelled
from repertory.runtime.host import LocalHost
from repertory.storage.memory.store import InMemorySessionStore
from repertory.testing import ScriptedModel

_GUARD_S = 30.0
"""A hang guard, not a timing: before the fix these turns never end."""


class _FailingStore(InMemorySessionStore):
    """Fails the writes ``fails(method, kwargs)`` picks, as a store that is locked or away would."""

    def __init__(self) -> None:
        super().__init__()
        self.fails: Callable[[str, dict[str, Any]], bool] = lambda method, kwargs: False
        self.failed = asyncio.Event()
        self.suspended = asyncio.Event()  # a run's suspension landed (a child's approval request, say)
        self.redeemed = 0

    def _maybe_fail(self, method: str, kwargs: dict[str, Any]) -> None:
        if self.fails(method, kwargs):
            self.failed.set()
            raise StoreError(f"sqlite: {method} failed: database is locked")

    async def commit_session(self, **kwargs: Any) -> None:
        self._maybe_fail("commit_session", kwargs)
        await super().commit_session(**kwargs)
        if kwargs.get("redeem_token") is not None:
            self.redeemed += 1
        if kwargs["run"].status == "suspended":
            self.suspended.set()

    async def update_turn(self, turn: TurnRecord, *, events: Any = ()) -> None:
        self._maybe_fail("update_turn", {"turn": turn, "events": events})
        await super().update_turn(turn, events=events)

    async def load_session(self, session_id: str) -> SessionRecord | None:
        self._maybe_fail("load_session", {"session_id": session_id})
        return await super().load_session(session_id)


def _fail_once(pick: Callable[[str, dict[str, Any]], bool]) -> Callable[[str, dict[str, Any]], bool]:
    """``pick``, true at most once."""
    spent = [False]

    def fails(method: str, kwargs: dict[str, Any]) -> bool:
        if spent[0] or not pick(method, kwargs):
            return False
        spent[0] = True
        return True

    return fails


def _after_redemption(store: _FailingStore) -> Callable[[str, dict[str, Any]], bool]:
    """The first commit after a token's redemption landed: the one carrying the approved tool's result."""
    return _fail_once(lambda method, kwargs: method == "commit_session" and store.redeemed > 0)


def _worker(ran: list[int]) -> Agent:
    @tool(requires_approval=True)
    def charge(amount: int) -> str:
        """Charge a card (a payment: only once approved, never twice)."""
        ran.append(amount)
        return f"charged {amount}"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "charge", "args": {"amount": 7}}
        return {"text": f"paid: {messages[-1].tool_results[0].result}"}

    return Agent(name="worker", model=ScriptedModel(step), tools=[charge])


def _orchestrator() -> Agent:
    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "worker", "args": {"task": "pay invoice 7"}}
        return {"text": f"planned: {messages[-1].tool_results[0].result}"}

    return Agent(name="orchestrator", model=ScriptedModel(step), tools=[agent_tool("worker")])


def _ends(events: list[SessionEvent], submission_id: str, kind: str) -> int:
    return sum(1 for e in events if e.type == kind and e.submission_id == submission_id)


async def _settled(
    store: _FailingStore, session_id: str, submission_id: str, *, starts: int = 1
) -> tuple[TurnRecord, str]:
    """The stored turn and its run's status; the turn's log holds ``starts`` starts and one end, gap-free."""
    turn = await store.load_turn(submission_id)
    assert turn is not None
    run = await store.load_run(turn.run_id)
    assert run is not None
    events = await store.load_events(session_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert _ends(events, submission_id, "turn.started") == starts
    assert _ends(events, submission_id, "turn.completed") == 1
    return turn, run.status


async def test_a_delegated_worker_approved_and_then_failing_on_the_store_still_ends_and_so_does_its_parent() -> None:
    # The soak's lost turn, step for step: orchestrator -> worker, the approval decided at the root,
    # the worker's next commit after the redemption fails on the store.
    store = _FailingStore()
    ran: list[int] = []
    agents = {"orchestrator": _orchestrator(), "worker": _worker(ran)}
    async with await Runtime.start(store=store, agents=agents) as rt:
        root = await rt.create_session(agent="orchestrator")
        plan = await root.send("plan project 7")
        async with asyncio.timeout(_GUARD_S):
            await store.suspended.wait()  # the worker asked for its approval
        [pending] = await root.pending_approvals(tree=True)
        store.fails = _after_redemption(store)
        async with asyncio.timeout(_GUARD_S):
            approved = await root.approve(pending.token)  # the worker's run, driven on past the failure
            result = await plan.result()
        [child] = await root.children()
        [child_turn] = await store.list_turns(child.id)
        worker_turn, worker_run = await _settled(store, child.id, child_turn.submission_id)
        parent_turn, parent_run = await _settled(store, root.id, plan.submission_id)
    assert store.failed.is_set()
    assert ran == [7]  # it ran once; driven on, its unrecorded outcome is never run again
    assert (worker_turn.status, worker_run) == ("done", "done")
    assert (approved.status, approved.run_id) == ("done", worker_turn.run_id)
    assert (parent_turn.status, parent_run) == ("done", "done")
    assert "outcome unknown" in (result.text or "")


async def test_a_decision_whose_next_commit_fails_drives_its_run_on_and_returns_its_result() -> None:
    # The decision landed before the failure (its token is spent): the approver hears how the run
    # ended once it is driven on, not a StoreError about a decision that took, which a retry would
    # only answer with InvalidResumeToken.
    store = _FailingStore()
    ran: list[int] = []
    async with await Runtime.start(store=store, agents={"worker": _worker(ran)}) as rt:
        handle = await rt.create_session(agent="worker")
        turn = await handle.send("pay invoice 7")
        assert (await turn.result()).status == "suspended"
        [pending] = await handle.pending_approvals()
        store.fails = _after_redemption(store)
        async with asyncio.timeout(_GUARD_S):
            approved = await handle.approve(pending.token)
            assert (await turn.result()).status == "done"
        stored, run = await _settled(store, handle.id, turn.submission_id)
        assert await handle.pending_approvals() == []
        with pytest.raises(InvalidResumeToken):
            await handle.approve(pending.token)  # spent once, by the decision that landed
    assert store.failed.is_set()
    # The charge ran before the failed commit could record it: driven on, it is not run again.
    assert (approved.status, approved.run_id) == ("done", stored.run_id)
    assert "outcome unknown" in (approved.text or "")
    assert (stored.status, run, ran) == ("done", "done", [7])


async def test_a_resume_whose_next_commit_fails_returns_the_run_it_drove_on() -> None:
    store = _FailingStore()

    @tool
    def ask(question: str) -> str:
        """Ask a human."""
        suspend(reason="needs an answer", payload={"question": question})
        return "unreachable"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if not any(m.role == "assistant" for m in messages):
            return {"tool": "ask", "args": {"question": "go?"}}
        return {"text": f"told: {messages[-1].text}"}  # the answer arrives as the decider's message

    agent = Agent(name="asker", model=ScriptedModel(step), tools=[ask])
    async with await Runtime.start(store=store, agents={"asker": agent}) as rt:
        handle = await rt.create_session(agent="asker")
        suspended = await handle.run("start")
        assert suspended.status == "suspended" and suspended.state.suspended_on is not None
        store.fails = _after_redemption(store)
        async with asyncio.timeout(_GUARD_S):
            resumed = await handle.resume(suspended.state.suspended_on.token, "yes")
    assert store.failed.is_set()
    assert (resumed.status, resumed.text) == ("done", "told: yes")


async def test_a_turn_whose_commit_fails_is_driven_again_not_ended_in_error() -> None:
    store = _FailingStore()
    store.fails = _fail_once(lambda method, kwargs: method == "commit_session")
    result, stored, run = await _one_turn(store, Agent(name="a", model=ScriptedModel(lambda m, t: {"text": "hi"})))
    assert store.failed.is_set()
    assert (result.status, result.text) == ("done", "hi")
    assert (stored.status, run) == ("done", "done")


async def _one_turn(store: _FailingStore, agent: Agent) -> tuple[RunResult, TurnRecord, str]:
    """One turn of ``agent`` sent on a new session: its result, its stored turn and its run's status."""
    async with await Runtime.start(store=store, agents={agent.name: agent}) as rt:
        handle = await rt.create_session(agent=agent.name)
        turn = await handle.send("hello")
        async with asyncio.timeout(_GUARD_S):
            result = await turn.result()
        stored, run = await _settled(store, handle.id, turn.submission_id)
    return result, stored, run


async def test_a_queued_turn_whose_start_fails_to_write_runs_once_with_one_start() -> None:
    store = _FailingStore()
    release = asyncio.Event()

    @tool
    async def hold() -> str:
        """Keep the first turn running until the test lets it go."""
        await release.wait()
        return "held"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user" and messages[-1].text == "first":
            return {"tool": "hold", "args": {}}
        return {"text": f"answered {messages[-1].text}"}

    agent = Agent(name="a", model=ScriptedModel(step), tools=[hold])
    async with await Runtime.start(store=store, agents={"a": agent}) as rt:
        handle = await rt.create_session(agent="a")
        first = await handle.send("first")
        second = await handle.send("second")  # queued behind: its start is a write of its own
        store.fails = _fail_once(
            lambda method, kwargs: method == "update_turn" and kwargs["turn"].submission_id == second.submission_id
        )
        release.set()
        async with asyncio.timeout(_GUARD_S):
            assert (await first.result()).status == "done"
            assert (await second.result()).text == "answered second"
        stored, run = await _settled(store, handle.id, second.submission_id)
    assert store.failed.is_set()
    assert (stored.status, run) == ("done", "done")


async def test_a_turn_cancelled_while_the_store_is_away_ends_cancelled_with_its_run() -> None:
    store = _FailingStore()
    down = [False]
    store.fails = lambda method, kwargs: down[0]
    entered, release = asyncio.Event(), asyncio.Event()

    @tool  # not idempotent: the step holding its call is committed before it runs
    async def hold() -> str:
        """Run until the test lets go (the store goes away meanwhile)."""
        entered.set()
        await release.wait()
        return "held"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "hold", "args": {}}
        return {"text": "done"}

    agent = Agent(name="a", model=ScriptedModel(step), tools=[hold])
    async with await Runtime.start(store=store, agents={"a": agent}) as rt:
        handle = await rt.create_session(agent="a")
        turn = await handle.send("go")
        async with asyncio.timeout(_GUARD_S):
            await entered.wait()
        down[0] = True
        release.set()
        async with asyncio.timeout(_GUARD_S):
            await store.failed.wait()  # the step's commit failed: the turn waits to be driven again
        await turn.cancel()
        down[0] = False
        async with asyncio.timeout(_GUARD_S):
            with pytest.raises(RunCancelled):
                await turn.result()
        stored, run = await _settled(store, handle.id, turn.submission_id)
    assert (stored.status, run) == ("cancelled", "cancelled")


async def test_a_recovery_run_again_after_failing_half_way_drives_each_open_turn_once() -> None:
    # A Ray host whose boot failed on the store runs LocalHost.start again; the sessions the first
    # attempt already resumed must not get their turns queued a second time.
    store = _FailingStore()
    entered: list[str] = []
    arrived, release = asyncio.Event(), asyncio.Event()

    @tool(idempotent=True)  # run again after the restart, where it waits until the test lets go
    async def wait_here(ctx: ToolContext) -> str:
        """Wait for the test."""
        entered.append(ctx.thread_id)
        arrived.set()
        await release.wait()
        return "waited"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "wait_here", "args": {}}
        return {"text": "finished"}

    agents = {"a": Agent(name="a", model=ScriptedModel(step), tools=[wait_here])}
    first = await Runtime.start(store=store, agents=agents)
    sessions = sorted([(await first.create_session(agent="a")).id for _ in range(2)])
    turns = {}
    for session_id in sessions:
        arrived.clear()
        turns[session_id] = (await (await first.session(session_id)).send("go")).submission_id
        await asyncio.wait_for(arrived.wait(), _GUARD_S)
    await first.close()  # detaches: both turns stay running, as after a crash
    entered.clear()
    arrived.clear()

    host = LocalHost(store, agents)
    store.fails = _fail_once(lambda method, kwargs: method == "load_session" and kwargs["session_id"] == sessions[1])
    with pytest.raises(StoreError):
        await host.start()  # resumed the first session, then failed activating the second
    await asyncio.wait_for(arrived.wait(), _GUARD_S)  # the first session's turn is being driven
    await host.start()
    release.set()
    try:
        for session_id, submission_id in turns.items():
            await asyncio.wait_for(host.wait_turn(session_id, submission_id), _GUARD_S)
            # Started once by each process (a restart writes its start again), ended once.
            stored, run = await _settled(store, session_id, submission_id, starts=2)
            assert (stored.status, run) == ("done", "done")
    finally:
        await host.close()
    assert sorted(entered) == sessions  # each open turn was driven once


async def test_a_model_error_whose_error_commit_fails_is_driven_again_not_left_running() -> None:
    # The model fails and so does the commit that would record it: the store holds the run as its
    # last commit left it (running), as a crash would. Ending the turn ``error`` over a ``running``
    # run left a run nothing would ever drive; the turn goes back to the mailbox instead, and its
    # run goes on from that commit (the model asked again).
    store = _FailingStore()
    calls = [0]

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        calls[0] += 1
        if calls[0] == 1:
            raise ModelError("the provider timed out")
        return {"text": "answered"}

    store.fails = _fail_once(lambda method, kwargs: method == "commit_session" and kwargs["run"].status == "error")
    result, stored, run = await _one_turn(store, Agent(name="a", model=ScriptedModel(step)))
    assert store.failed.is_set()
    assert (result.status, result.text, calls[0]) == ("done", "answered", 2)
    assert (stored.status, run) == ("done", "done")
