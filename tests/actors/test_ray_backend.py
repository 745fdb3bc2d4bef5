"""The Ray backend: the handle API across processes, dedicated placement, failover, stream cleanup.

Tools and models here are defined inside the tests, so Ray ships them to the hosts by value; what
they record goes to files under ``tmp_path`` (they run in other processes).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel

from repertory import Agent, RunState, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel


def _echo_agent(name: str = "a") -> Agent:
    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        return {"text": f"{os.getpid()}:{messages[-1].text}"}

    return Agent(name=name, model=ScriptedModel(step))


async def _wait_for(predicate: Any, within: float = 30.0) -> None:
    # Polling: the condition lives in a file another process writes; there is nothing to await.
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_handles_work_across_processes(ray_runtime: Any) -> None:
    rt = await ray_runtime({"a": _echo_agent()})
    root = await rt.create_session(agent="a", title="root")
    result = await root.run("hello")
    pid, text = result.text.split(":", 1)
    assert text == "hello" and int(pid) != os.getpid()  # the session ran in a host process
    child = await root.spawn(title="kid")
    fork = await root.fork()
    assert [c.id for c in await root.children()] == [child.id, fork.id]
    assert (await fork.run("again")).text.endswith("again")
    assert (await root.metadata()).status == "idle"
    seen = []
    async for event in root.events():
        seen.append(event.seq)
        if event.type == "turn.completed":
            break
    assert seen == list(range(1, len(seen) + 1))
    assert (await root.usage(tree=True)).requests == 2  # root and fork ran once each; the child never ran


async def test_approvals_over_ray(ray_runtime: Any, tmp_path: Path) -> None:
    log = tmp_path / "ran.log"

    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        with open(log, "a") as fh:
            fh.write(f"{amount}\n")
        return "sent"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "wire", "args": {"amount": 5}}
        return {"text": "ok"}

    rt = await ray_runtime({"a": Agent(name="a", model=ScriptedModel(step), tools=[wire])})
    h = await rt.create_session(agent="a")
    assert (await h.run("pay")).status == "suspended"
    [pending] = await h.pending_approvals()
    assert (await h.approve(pending.token, args={"amount": 7})).status == "done"
    assert log.read_text() == "7\n"


async def test_a_dedicated_session_runs_in_its_own_process(ray_runtime: Any, tmp_path: Path) -> None:
    rt = await ray_runtime({"a": _echo_agent()})
    shared = await rt.create_session(agent="a")
    dedicated = await rt.create_session(agent="a", placement="dedicated", cwd=str(tmp_path / "own"))
    shared_pid = int((await shared.run("x")).text.split(":")[0])
    own_pid = int((await dedicated.run("y")).text.split(":")[0])
    assert own_pid != shared_pid and own_pid != os.getpid()
    facts = await rt.host.ping()
    own = [f for f in facts if f["dedicated"] == dedicated.id]
    assert own and own[0]["pid"] == own_pid and own[0]["cwd"] == str(tmp_path / "own")


async def test_a_host_killed_mid_turn_is_restarted_and_the_run_finishes(ray_runtime: Any, tmp_path: Path) -> None:
    log = tmp_path / "charge.log"

    @tool  # not idempotent: after the crash it must get "outcome unknown", never a second run
    def charge(card: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {card}\n")
        time.sleep(30)  # the host is killed while we are here
        return "charged"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "charge", "args": {"card": "c1"}}
        return {"text": "finished: " + str(messages[-1].parts[0].model_dump().get("result"))}

    rt = await ray_runtime({"a": Agent(name="a", model=ScriptedModel(step), tools=[charge])})
    h = await rt.create_session(agent="a")
    turn = await h.send("charge it")
    await _wait_for(lambda: log.exists() and "start" in log.read_text())
    [host] = rt.host.hosts
    before = await host.ping.remote()
    ray.kill(host, no_restart=False)
    result = await asyncio.wait_for(turn.result(), 60)
    assert result.status == "done"
    assert "outcome unknown" in result.text
    assert log.read_text().count("start") == 1
    after = await host.ping.remote()
    assert after["pid"] != before["pid"]
    run: RunState | None = await rt.store.load_run(result.run_id)
    assert run is not None and run.status == "done"


async def test_runs_waiting_on_a_host_that_dies_get_their_results_after_the_restart(
    ray_runtime: Any, tmp_path: Path
) -> None:
    # Concurrent run()s are queued in one batch and wait for results on the client's channel; the
    # host dies, the channel with it, and each run() falls back to waiting for its durable turn.
    log = tmp_path / "charge.log"

    @tool
    def charge(card: str) -> str:
        with open(log, "a") as fh:
            fh.write(f"start {card}\n")
        time.sleep(30)
        return "charged"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "charge", "args": {"card": messages[-1].text}}
        return {"text": "finished: " + str(messages[-1].parts[0].model_dump().get("result"))}

    rt = await ray_runtime({"a": Agent(name="a", model=ScriptedModel(step), tools=[charge])})
    handles = await rt.create_sessions("a", 3)
    runs = [asyncio.ensure_future(h.run(f"card-{i}")) for i, h in enumerate(handles)]
    await _wait_for(lambda: log.exists() and log.read_text().count("start") == 3)
    [host] = rt.host.hosts
    ray.kill(host, no_restart=False)
    results = await asyncio.wait_for(asyncio.gather(*runs), 60)
    assert [r.status for r in results] == ["done"] * 3
    assert all("outcome unknown" in r.text for r in results)
    assert sorted(log.read_text().split()) == sorted(["start"] * 3 + [f"card-{i}" for i in range(3)])


async def test_killing_the_supervisor_loses_nothing(ray_runtime: Any) -> None:
    rt = await ray_runtime({"a": _echo_agent()})
    first = await rt.create_session(agent="a")
    await first.run("one")
    ray.kill(rt.host.supervisor, no_restart=False)
    second = await rt.create_session(agent="a")  # retried until the supervisor is back
    assert (await second.run("two")).text.endswith("two")
    assert (await first.run("three")).text.endswith("three")


async def test_a_reader_that_goes_away_leaves_nothing_behind(ray_runtime: Any) -> None:
    rt = await ray_runtime({"a": _echo_agent()})
    h = await rt.create_session(agent="a")
    await h.run("hello")
    readers = [h.events() for _ in range(3)]
    for stream in readers:
        async for event in stream:
            if event.type == "turn.completed":
                break
    [host] = rt.host.hosts
    facts = await host.ping.remote()
    assert (facts["streams"], facts["subscriptions"]) == (1, 3)  # one stream per client, not per reader
    for stream in readers:
        await stream.aclose()
    facts = await host.ping.remote()
    assert facts["subscriptions"] == 0  # a closed reader is dropped before aclose() returns
    await rt.host.close_feeds()  # the client goes away: its stream is cancelled and the host reaps it
    deadline = time.monotonic() + 20
    while (await host.ping.remote())["streams"] != 0:
        assert time.monotonic() < deadline, "the host still runs a stream nobody reads"
        await asyncio.sleep(0.1)


async def test_a_fresh_runtime_recovers_sessions_created_by_another(ray_runtime: Any, tmp_path: Path) -> None:
    from repertory import Runtime

    path = tmp_path / "shared.db"
    first = await Runtime.start(
        store=f"sqlite:///{path}", backend="ray", agents={"a": _echo_agent()}, hosts=1, keep_hosts=True
    )
    h = await first.create_session(agent="a")
    await h.run("before")
    await first.close()
    second = await Runtime.start(
        store=f"sqlite:///{path}", backend="ray", agents={"a": _echo_agent()}, hosts=1, keep_hosts=False
    )
    try:
        again = await second.session(h.id)
        text = (await again.run("after")).text
        assert text is not None and text.endswith("after")
    finally:
        await second.close()


class City(BaseModel):
    """A structured reply validated in the host, returned through Ray."""

    name: str
    population: int


async def test_run_with_an_output_type_in_one_call(ray_runtime: Any) -> None:
    model = ScriptedModel([{"text": "not json"}, {"json": {"name": "Oslo", "population": 709000}}])
    rt = await ray_runtime({"a": Agent(name="a", model=model)})
    h = await rt.create_session(agent="a")
    city = await h.run("which city?", output=City)
    assert city == City(name="Oslo", population=709000)  # one retry with the validation error, then valid


async def test_a_live_reader_gets_events_as_they_happen(ray_runtime: Any) -> None:
    rt = await ray_runtime({"a": _echo_agent()})
    h = await rt.create_session(agent="a")
    got: list[str] = []

    async def read() -> None:
        async for event in h.events():
            got.append(event.type)
            if event.type == "turn.completed":
                return

    reader = asyncio.create_task(read())
    [host] = rt.host.hosts
    deadline = time.monotonic() + 20
    while (await host.ping.remote())["subscriptions"] == 0:  # subscribed before anything happens: all live
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await h.run("live")
    await asyncio.wait_for(reader, 20)
    assert got[0] == "turn.started" and got[-1] == "turn.completed" and "checkpoint" in got
