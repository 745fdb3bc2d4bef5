"""Delegation on Ray: hosts killed under a delegating tree, and a child's approval decided from another process.

A host that dies takes the drives it ran with it; Ray restarts it and it re-drives its open turns.
A parent re-driven that way runs its delegating calls again, which find the children the first
attempt made (their ids were committed with the calls): never a second child. What the tools
did goes to files under ``tmp_path`` (they run in host processes).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ray

from repertory import Agent, SessionHandle, agent_tool, tool
from repertory.actors import shared_host_index
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]

_DECIDER = """
import asyncio, sys
from repertory import Runtime

async def main() -> None:
    agents = {"boss": "tests.actors.agents:boss", "drafter": "tests.actors.agents:drafter"}
    async with await Runtime.start(store=sys.argv[2], backend="ray", address=sys.argv[1], agents=agents,
                                   hosts=2, keep_hosts=True) as rt:
        root = await rt.session(sys.argv[3])
        [pending] = await root.pending_approvals(tree=True)
        assert pending.session_id != root.id, pending
        result = await root.approve(pending.token)
        print(result.status, result.text, flush=True)

asyncio.run(main())
"""


async def _wait_for(predicate: Any, within: float = 60.0) -> None:
    # Polling: the condition lives in a file a host process writes; there is nothing to await.
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def _pending(root: SessionHandle) -> list[Any]:
    deadline = time.monotonic() + 60
    while not (pending := await root.pending_approvals(tree=True)):
        assert time.monotonic() < deadline, "no approval surfaced at the root"
        await asyncio.sleep(0.05)  # the child waiting is spawned by the model: there is no stream to await
    return pending


def _boss(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tools": [{"tool": "worker", "args": {"task": f"job {i}"}} for i in range(2)]}
    return {"text": "boss: " + " | ".join(str(p.result) for p in messages[-1].tool_results)}


async def _check_one_child_per_call(rt: Any, root: SessionHandle, run_id: str) -> list[SessionHandle]:
    children = await root.children()
    assert len(children) == 2
    run = await rt.store.load_run(run_id)
    assert run is not None and run.status == "done"
    assert {d.session_id for d in run.delegations} == {c.id for c in children}
    for child in children:
        assert [t.status for t in await rt.store.list_turns(child.id)] == ["done"]
    return children


async def test_a_host_killed_during_the_childrens_run_recovers_with_no_second_child(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log = tmp_path / "work.log"

    @tool  # not idempotent: after the crash its calls get "outcome unknown", never a second run
    def crunch(job: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {job}\n")
        time.sleep(60)  # the host is killed while we are here
        return "crunched"

    def worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "crunch", "args": {"job": messages[-1].text}}
        return {"text": f"worker: {messages[-1].tool_results[0].result}"}

    rt = await ray_runtime(
        {
            "boss": Agent(name="boss", model=ScriptedModel(_boss), tools=[agent_tool("worker")]),
            "worker": Agent(name="worker", model=ScriptedModel(worker), tools=[crunch]),
        }
    )
    root = await rt.create_session(agent="boss")
    turn = await root.send("go")
    await _wait_for(lambda: log.exists() and log.read_text().count("start") == 2)
    [host] = rt.host.hosts  # one host: the parent and both children die together
    ray.kill(host, no_restart=False)

    result = await asyncio.wait_for(turn.result(), 120)

    assert result.status == "done" and result.text is not None
    assert result.text.count("outcome unknown") == 2  # each child's own answer, after its restart
    await _check_one_child_per_call(rt, root, result.run_id)
    assert log.read_text().count("start") == 2


async def test_killing_the_parents_host_while_it_waits_finds_the_same_children(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log, release = tmp_path / "work.log", tmp_path / "release"

    @tool(idempotent=True)  # safe to run again: it only waits for the test to let it finish
    def wait_for_release(job: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {job}\n")
        while not release.exists():
            time.sleep(0.05)
        return f"{job} released"

    def worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "wait_for_release", "args": {"job": messages[-1].text}}
        return {"text": f"worker: {messages[-1].tool_results[0].result}"}

    rt = await ray_runtime(
        {
            "boss": Agent(name="boss", model=ScriptedModel(_boss), tools=[agent_tool("worker")]),
            "worker": Agent(name="worker", model=ScriptedModel(worker), tools=[wait_for_release]),
        },
        hosts=2,
    )
    root = await rt.create_session(agent="boss")
    turn = await root.send("go")
    await _wait_for(lambda: log.exists() and log.read_text().count("start") == 2)
    parents_host = rt.host.hosts[shared_host_index(root.id, 2)]
    before = await parents_host.ping.remote()
    ray.kill(parents_host, no_restart=False)  # the parent was waiting in its calls there
    release.write_text("go")

    result = await asyncio.wait_for(turn.result(), 120)

    assert result.text == "boss: worker: job 0 released | worker: job 1 released"
    await _check_one_child_per_call(rt, root, result.run_id)
    assert (await parents_host.ping.remote())["pid"] != before["pid"]


async def test_killing_the_childrens_host_leaves_the_waiting_parent_to_get_their_answers(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log, release = tmp_path / "work.log", tmp_path / "release"

    @tool(idempotent=True)
    def wait_for_release(job: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {job}\n")
        while not release.exists():
            time.sleep(0.05)
        return f"{job} released"

    def boss(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tools": [{"tool": "worker", "args": {"task": f"job {i}"}} for i in range(4)]}
        return {"text": "boss: " + " | ".join(str(p.result) for p in messages[-1].tool_results)}

    def worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "wait_for_release", "args": {"job": messages[-1].text}}
        return {"text": f"worker: {messages[-1].tool_results[0].result}"}

    rt = await ray_runtime(
        {
            "boss": Agent(name="boss", model=ScriptedModel(boss), tools=[agent_tool("worker")]),
            "worker": Agent(name="worker", model=ScriptedModel(worker), tools=[wait_for_release]),
        },
        hosts=2,
    )
    root = await rt.create_session(agent="boss")
    turn = await root.send("go")
    await _wait_for(lambda: log.exists() and log.read_text().count("start") == 4)
    other = rt.host.hosts[1 - shared_host_index(root.id, 2)]  # the parent keeps waiting on its own host
    ray.kill(other, no_restart=False)
    release.write_text("go")

    result = await asyncio.wait_for(turn.result(), 120)

    assert result.text == "boss: " + " | ".join(f"worker: job {i} released" for i in range(4))
    children = await root.children()
    assert len(children) == 4
    run = await rt.store.load_run(result.run_id)
    assert run is not None and {d.session_id for d in run.delegations} == {c.id for c in children}


async def test_a_childs_approval_is_decided_at_the_root_from_another_process(ray_runtime: Any, tmp_path: Path) -> None:
    rt = await ray_runtime({"boss": "tests.actors.agents:boss", "drafter": "tests.actors.agents:drafter"}, hosts=2)
    root = await rt.create_session(agent="boss")
    turn = await root.send("the report")
    [pending] = await _pending(root)
    [child] = await root.children()
    assert pending.session_id == child.id

    url = f"sqlite:///{tmp_path / 'ray-0.db'}"  # the store ray_runtime opened: the same hosts
    decided = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _DECIDER, ray.get_runtime_context().gcs_address, url, root.id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert decided.returncode == 0, decided.stderr
    assert decided.stdout.strip() == "done drafted (published draft the report)"

    result = await asyncio.wait_for(turn.result(), 60)
    assert result.text == "boss: drafted (published draft the report)"
    assert await root.pending_approvals(tree=True) == []
