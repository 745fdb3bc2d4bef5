"""Model-driven delegation (``agent_tool``): child sessions spawned by a model's calls, on every backend.

A "boss" agent's model calls the tool of a "worker" agent; each call spawns one child session,
runs one turn there and hands the child's answer back as the call's result. Approvals inside a
child surface at the root and are decided there; cancelling the parent's turn cancels the child's;
guardrails of both kinds end a run ``error`` with ``GuardrailTripped``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from repertory.core.messages import ToolResultPart
from repertory.errors import GuardrailTripped, ModelError, RunCancelled
from repertory.runtime.agent import Agent
from repertory.runtime.guardrails import GuardrailContext
from repertory.runtime.tools import suspend, tool
from repertory.testing.conformance.backend.doubles import Answer, Recorder, Script, collect, completed, history, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.tree.delegation import agent_tool
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["DelegationConformance"]


WROTE = Recorder("delegation.wrote")


@tool(requires_approval=True)
def write_file(path: str) -> str:
    """Write a file (needs approval)."""
    WROTE.append(path)
    return f"wrote {path}"


def ask_human(question: str) -> str:
    """Ask the person at the keyboard."""
    suspend(reason="need input", payload={"question": question})


def no_secrets(ctx: GuardrailContext, text: str) -> str | None:
    """An input guardrail: refuses any input that mentions a password."""
    return "inputs must not carry passwords" if "password" in text else None


async def no_shouting(ctx: GuardrailContext, text: str) -> str | None:
    """An async output guardrail: refuses a reply in capitals."""
    return "the reply shouts" if text.isupper() else None


def _results(messages: list[Any]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.tool_results]


def _agents(boss: Script, worker: Script, **worker_kw: Any) -> dict[str, Agent]:
    return {
        "boss": boss.agent("boss", tools=[agent_tool("worker")]),
        "worker": worker.agent("worker", tools=[write_file, ask_human], **worker_kw),
    }


async def _only_child(rt: Runtime, parent: SessionHandle) -> SessionHandle:
    [child] = await parent.children()
    return child


async def _wait_pending(root: SessionHandle) -> list[Any]:
    """The tree's pending approvals once there are some (the child gets there on its own time)."""
    async with asyncio.timeout(10):
        while True:
            pending = await root.pending_approvals(tree=True)
            if pending:
                return pending
            # Polling the store: the suspension happens in a child session this test holds no
            # handle to yet, so there is no stream to await (the child is spawned by the model).
            await asyncio.sleep(0.02)


class DelegationConformance(BackendSuite):
    """Model-driven delegation (``agent_tool``): children spawned, run, approved and answered through the tree."""

    async def test_a_call_spawns_one_child_runs_its_turn_and_returns_its_text(
        self, make_runtime: RuntimeFactory
    ) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "count the apples"}}, {"text": "boss done"}]})
        worker = Script({"count the apples": [{"text": "7 apples"}]})
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss", title="root")

        result = await within(root.run("go"))

        assert (result.status, result.text) == ("done", "boss done")
        child = await _only_child(rt, root)
        assert child.lineage.kind == "spawned" and child.lineage.parent_id == root.id
        assert child.record.agent == "worker" and child.record.root_id == root.id
        task, reply = await history(rt, child)
        assert reply.text == "7 apples"
        assert task.text == "count the apples" and task.role == "user"
        assert task.origin is not None and (task.origin.kind, task.origin.id) == ("session", root.id)
        [answer] = _results(await history(rt, root))
        assert (answer.result, answer.is_error) == ("7 apples", False)
        # The parent's run records which child and turn each delegating call ran.
        run = await rt.store.load_run(result.run_id)
        assert run is not None
        [delegation] = run.delegations
        assert (delegation.tool_call_id, delegation.session_id, delegation.agent) == (
            answer.tool_call_id,
            child.id,
            "worker",
        )
        turn = await rt.store.load_turn(delegation.submission_id)
        assert turn is not None and turn.session_id == child.id and turn.status == "done"
        # Usage rolls up: the boss asked twice, the worker once.
        assert (await root.usage()).requests == 2
        assert (await root.usage(tree=True)).requests == 3

    async def test_parallel_calls_run_their_children_concurrently(self, make_runtime: RuntimeFactory) -> None:
        tasks = ["task a", "task b", "task c"]
        boss = Script(
            {"go": [{"tools": [{"tool": "worker", "args": {"task": t}} for t in tasks]}, {"text": "all done"}]}
        )
        worker = Script()
        gates = [worker.hold(t) for t in tasks]
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss")

        turn = await root.send("go")
        for gate in gates:  # every child is held in its first request at once: they run side by side
            await gate.reached(30)  # generous: on Ray each child is spawned through another host's client
        for gate in gates:
            gate.release()
        assert (await within(turn.result())).text == "all done"

        children = await root.children()
        assert sorted(c.record.title or "" for c in children) == tasks
        results = _results(await history(rt, root))
        assert sorted(r.result for r in results) == [f"re: {t}" for t in tasks]  # type: ignore[type-var]

    async def test_delegation_three_levels_deep(self, make_runtime: RuntimeFactory) -> None:
        boss = Script({"go": [{"tool": "lead", "args": {"task": "plan it"}}, {"text": "boss done"}]})
        lead = Script({"plan it": [{"tool": "worker", "args": {"task": "do it"}}, {"text": "lead done"}]})
        worker = Script({"do it": [{"text": "worker done"}]})
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("lead")]),
            "lead": lead.agent("lead", tools=[agent_tool("worker", name="delegate_work")]),
            "worker": worker.agent("worker"),
        }
        # The lead's tool has its own name: the model calls "delegate_work", not "worker".
        lead.plans["plan it"][0] = {"tool": "delegate_work", "args": {"task": "do it"}}
        rt = await make_runtime(agents)
        root = await rt.create_session(agent="boss")

        assert (await within(root.run("go"))).text == "boss done"

        middle = await _only_child(rt, root)
        leaf = await _only_child(rt, middle)
        assert (middle.record.agent, leaf.record.agent) == ("lead", "worker")
        assert leaf.lineage.parent_id == middle.id and leaf.record.root_id == root.id
        assert [r.result for r in _results(await history(rt, middle))] == ["worker done"]
        assert [r.result for r in _results(await history(rt, root))] == ["lead done"]
        assert (await root.usage(tree=True)).requests == 2 + 2 + 1

    async def test_a_child_with_an_output_type_answers_with_its_validated_output(
        self, make_runtime: RuntimeFactory
    ) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "biggest city"}}, {"text": "ok"}]})
        worker = Script({"biggest city": [{"json": {"city": "Tokyo", "population": 37}}]})
        rt = await make_runtime(_agents(boss, worker, output_type=Answer))
        root = await rt.create_session(agent="boss")

        await within(root.run("go"))

        [answer] = _results(await history(rt, root))
        assert answer.result == {"city": "Tokyo", "population": 37}

    async def test_a_child_that_fails_gives_the_parent_an_error_result(self, make_runtime: RuntimeFactory) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "break"}}, {"text": "coped"}]})
        worker = Script({"break": [ModelError("the worker's model is down")]})
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss")

        assert (await within(root.run("go"))).text == "coped"  # the parent's run goes on

        [answer] = _results(await history(rt, root))
        assert answer.is_error
        assert "failed" in str(answer.result) and "ModelError" in str(answer.result)
        child = await _only_child(rt, root)
        assert (await child.metadata()).status == "error"

    async def test_a_childs_approval_surfaces_at_the_root_and_is_decided_there(
        self, make_runtime: RuntimeFactory
    ) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "draft"}}, {"text": "boss done"}]})
        worker = Script({"draft": [{"tool": "write_file", "args": {"path": "a.md"}}, {"text": "drafted"}]})
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")

        pending = await _wait_pending(root)
        child = await _only_child(rt, root)
        [approval] = pending
        assert (approval.kind, approval.session_id) == ("approval", child.id)
        assert await root.pending_approvals() == []  # the root itself waits for nothing
        [own] = await child.pending_approvals()
        assert own.token == approval.token and own.session_id is None
        assert (await root.metadata()).status == "running"  # the parent is waiting in its call
        assert WROTE == []

        decided = await within(root.approve(approval.token))  # the root's handle decides the child's call

        assert (decided.status, decided.text) == ("done", "drafted")  # the child's run went on
        assert (await within(turn.result())).text == "boss done"  # then the parent's
        assert WROTE == ["a.md"]
        assert await root.pending_approvals(tree=True) == []
        assert [r.result for r in _results(await history(rt, root))] == ["drafted"]

    async def test_a_childs_approval_rejected_at_the_root(self, make_runtime: RuntimeFactory) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "draft"}}, {"text": "boss done"}]})
        worker = Script({"draft": [{"tool": "write_file", "args": {"path": "a.md"}}, {"text": "not written"}]})
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")
        [approval] = await _wait_pending(root)

        await within(root.reject(approval.token, reason="not today"))

        assert (await within(turn.result())).text == "boss done"
        assert WROTE == []
        child = await _only_child(rt, root)
        [rejected] = _results(await history(rt, child))
        assert rejected.is_error and rejected.result == "not today"

    async def test_a_childs_suspension_is_resumed_from_the_root(self, make_runtime: RuntimeFactory) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "pick"}}, {"text": "boss done"}]})
        worker = Script(
            {"pick": [{"tool": "ask_human", "args": {"question": "colour?"}}], "blue": [{"text": "blue it is"}]}
        )
        rt = await make_runtime(_agents(boss, worker))
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")
        [asked] = await _wait_pending(root)
        assert asked.kind == "suspend" and asked.payload == {"question": "colour?"}

        await within(root.resume(asked.token, "blue"))

        assert (await within(turn.result())).text == "boss done"
        assert [r.result for r in _results(await history(rt, root))] == ["blue it is"]

    async def test_approvals_two_levels_down_surface_at_the_root(self, make_runtime: RuntimeFactory) -> None:
        boss = Script({"go": [{"tool": "lead", "args": {"task": "plan"}}, {"text": "boss done"}]})
        lead = Script({"plan": [{"tool": "worker", "args": {"task": "draft"}}, {"text": "lead done"}]})
        worker = Script({"draft": [{"tool": "write_file", "args": {"path": "deep.md"}}, {"text": "drafted"}]})
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("lead")]),
            "lead": lead.agent("lead", tools=[agent_tool("worker")]),
            "worker": worker.agent("worker", tools=[write_file]),
        }
        rt = await make_runtime(agents)
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")

        [approval] = await _wait_pending(root)
        middle = await _only_child(rt, root)
        leaf = await _only_child(rt, middle)
        assert approval.session_id == leaf.id
        assert [p.session_id for p in await middle.pending_approvals(tree=True)] == [leaf.id]

        await within(root.approve(approval.token))

        assert (await within(turn.result())).text == "boss done"
        assert WROTE == ["deep.md"]

    async def test_cancelling_the_parents_turn_cancels_the_child_turns_it_waits_for(
        self, make_runtime: RuntimeFactory
    ) -> None:
        boss = Script({"go": [{"tool": "lead", "args": {"task": "plan"}}]})
        lead = Script({"plan": [{"tools": [{"tool": "worker", "args": {"task": t}} for t in ("w1", "w2")]}]})
        worker = Script()
        gates = [worker.hold("w1"), worker.hold("w2")]
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("lead")]),
            "lead": lead.agent("lead", tools=[agent_tool("worker")]),
            "worker": worker.agent("worker"),
        }
        rt = await make_runtime(agents)
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")
        for gate in gates:
            await gate.reached()

        await within(turn.cancel())

        with pytest.raises(RunCancelled):
            await within(turn.result())
        middle = await _only_child(rt, root)
        leaves = await middle.children()
        assert len(leaves) == 2
        for session in (middle, *leaves):
            [child_turn] = await rt.store.list_turns(session.id)
            assert child_turn.status == "cancelled", session.record.agent
        for gate in gates:
            gate.release()  # nothing runs on: the cancelled drives are gone
        assert worker.count("w1") == worker.count("w2") == 1

    async def test_an_input_guardrail_ends_the_run_before_the_model_is_asked(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script({"hi": [{"text": "hello"}]})
        rt = await make_runtime(script.agent(input_guardrails=[no_secrets]))
        h = await rt.create_session(agent="assistant")
        assert (await within(h.run("hi"))).text == "hello"  # a passing guardrail changes nothing

        turn = await h.send("my password is hunter2")
        with pytest.raises(GuardrailTripped, match="must not carry passwords"):
            await within(turn.result())

        assert script.prompts() == ["hi"]  # the refused input cost no model request
        events = await collect(h.events(), completed(turn.submission_id))
        [tripped] = [e for e in events if e.type == "guardrail.tripped"]
        assert tripped.data["stage"] == "input" and tripped.data["guardrail"] == "no_secrets"
        assert tripped.data["message"] == "inputs must not carry passwords"
        runs = await rt.store.list_runs(h.id, limit=1)
        assert runs[0].status == "error" and runs[0].error is not None
        assert runs[0].error.type == "GuardrailTripped"
        assert (await h.metadata()).status == "error"

    async def test_an_output_guardrail_refuses_the_final_reply(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"hi": [{"text": "HELLO THERE"}], "calm": [{"text": "hello there"}]})
        rt = await make_runtime(script.agent(output_guardrails=[no_shouting]))
        h = await rt.create_session(agent="assistant")

        turn = await h.send("hi")
        with pytest.raises(GuardrailTripped, match="the reply shouts"):
            await within(turn.result())
        events = await collect(h.events(), completed(turn.submission_id))
        assert [e.data["stage"] for e in events if e.type == "guardrail.tripped"] == ["output"]
        assert (await within(h.run("calm"))).text == "hello there"

    async def test_a_childs_tripped_guardrail_is_an_error_result_for_the_parent(
        self, make_runtime: RuntimeFactory
    ) -> None:
        boss = Script({"go": [{"tool": "worker", "args": {"task": "use password 123"}}, {"text": "boss done"}]})
        worker = Script()
        rt = await make_runtime(_agents(boss, worker, input_guardrails=[no_secrets]))
        root = await rt.create_session(agent="boss")

        assert (await within(root.run("go"))).text == "boss done"

        [answer] = _results(await history(rt, root))
        assert answer.is_error and "GuardrailTripped" in str(answer.result)
        assert worker.prompts() == []
        # The child's refused task is not in the child's thread: nothing of it stays to be read or sent on.
        [child] = await root.children()
        assert all("password" not in m.text for m in await history(rt, child))

    async def test_a_restart_while_a_child_waits_for_approval_keeps_the_same_child(
        self, make_runtime: RuntimeFactory
    ) -> None:
        make_runtime.require_durable()
        boss = Script({"go": [{"tool": "worker", "args": {"task": "draft"}}, {"text": "boss done"}]})
        worker = Script({"draft": [{"tool": "write_file", "args": {"path": "r.md"}}, {"text": "drafted"}]})
        rt1 = await make_runtime(_agents(boss, worker))
        root = await rt1.create_session(agent="boss")
        turn = await root.send("go")
        [approval] = await _wait_pending(root)
        await rt1.close()  # the parent was waiting in its call: its turn stays open

        rt2 = await make_runtime(_agents(boss, worker))
        root2 = await rt2.session(root.id)
        [again] = await _wait_pending(root2)
        assert again.token == approval.token  # the same child, still waiting for the same decision
        await within(root2.approve(again.token))

        assert (await within(root2.get_turn(turn.submission_id).result())).text == "boss done"
        assert len(await root2.children()) == 1
        assert WROTE == ["r.md"]
        assert worker.count("draft") == 2  # one request before the approval, one after: never re-asked
        [answer] = _results(await history(rt2, root2))
        assert answer.result == "drafted"
