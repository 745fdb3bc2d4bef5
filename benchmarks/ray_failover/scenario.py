"""The node failover scenario on a fresh three-node cluster (see ``benchmarks.ray_failover``)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.local_ray import pickle_benchmarks_by_value
from benchmarks.harness.machine import git_state
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.ray_failover.report import TARGET_SECONDS, FailoverFigures, FailoverReport, HostFact
from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel

__all__ = ["HEALTH", "measure", "scenario"]

HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


def _agent(charges: Path) -> Agent:
    @tool
    def charge(card: str) -> str:
        """Charge a card (not idempotent: must never run twice)."""
        with open(charges, "a") as fh:
            fh.write(card + "\n")
        return f"charged {card}"

    async def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        last = messages[-1]
        if last.role == "user" and last.text.startswith("charge "):
            return {"tool": "charge", "args": {"card": last.text.split(" ", 1)[1]}}
        if last.role == "tool":
            await asyncio.sleep(3.0)  # the turn is running when the node dies
            return {"text": "charged and done"}
        return {"text": f"re: {last.text}"}

    return Agent(name="clerk", model=ScriptedModel(step), tools=[charge])


async def _until(predicate: Callable[[], Awaitable[bool]], within: float, every: float = 0.02) -> float:
    started = time.perf_counter()
    while not await predicate():  # polling: nodes and processes elsewhere, nothing here to await
        if time.perf_counter() - started > within:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(every)
    return time.perf_counter() - started


async def scenario(sessions: int, running: int, workdir: Path) -> FailoverFigures:
    """Run the scenario on a fresh three-node cluster; return figures and checks."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        raise SystemExit("Ray is already initialised in this process; this scenario starts its own cluster")
    cluster: Any = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH},
    )
    node_b = cluster.add_node(num_cpus=1, resources={"session_hosts": 100})
    cluster.wait_for_nodes()
    pickle_benchmarks_by_value()  # the hosts on other nodes need not import benchmarks
    ray.init(address=cluster.address, log_to_driver=False)
    charges = workdir / "charges.log"
    try:
        rt = await Runtime.start(
            store=f"sqlite:///{workdir / 'failover.db'}",
            backend="ray",
            agents={"clerk": _agent(charges)},
            hosts=2,
            keep_hosts=False,
            host_options={"resources": {"session_hosts": 1}},
        )
        cluster.add_node(num_cpus=1, resources={"session_hosts": 100})  # node C: where the hosts go next
        cluster.wait_for_nodes()
        try:
            return await _exercise(rt, cluster, node_b, sessions, running, charges)
        finally:
            await rt.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


async def _exercise(rt: Any, cluster: Any, node_b: Any, sessions: int, running: int, charges: Path) -> FailoverFigures:
    handles = list(await asyncio.gather(*(rt.create_session(agent="clerk") for _ in range(sessions))))
    replies = await asyncio.gather(*(h.run(f"hello {i}") for i, h in enumerate(handles)))
    assert all(r.status == "done" for r in replies)
    before = await rt.host.ping()
    turns = [await h.send(f"charge card-{i}") for i, h in enumerate(handles[:running])]

    async def all_charged() -> bool:
        return charges.exists() and len(charges.read_text().splitlines()) >= running

    await _until(all_charged, 60)
    killed_at = time.perf_counter()
    cluster.remove_node(node_b, allow_graceful=False)
    old = [f["pid"] for f in before]

    async def old_hosts_gone() -> bool:
        return not any(os.path.exists(f"/proc/{pid}") for pid in old)

    await _until(old_hosts_gone, 30)  # until then an old process may still answer
    gone = time.perf_counter() - killed_at
    await handles[-1].metadata()  # a session that was idle on node B, served again
    first_served = time.perf_counter() - killed_at
    await asyncio.gather(*(h.metadata() for h in handles))
    all_served = time.perf_counter() - killed_at
    results = await asyncio.gather(*(t.result() for t in turns))
    turns_done = time.perf_counter() - killed_at
    after = await rt.host.ping()
    again = await asyncio.gather(*(h.run("still there?") for h in handles))
    lines = charges.read_text().splitlines()
    return FailoverFigures(
        sessions=sessions,
        running_turns=running,
        nodes=3,
        health_checks=HEALTH,
        kill_to_old_host_processes_gone_s=round(gone, 3),
        kill_to_first_call_served_s=round(first_served, 3),
        kill_to_every_session_served_s=round(all_served, 3),
        kill_to_interrupted_turns_done_s=round(turns_done, 3),
        met=first_served <= TARGET_SECONDS,
        hosts_before=[HostFact(node_id=f["node_id"], pid=f["pid"]) for f in before],
        hosts_after=[HostFact(node_id=f["node_id"], pid=f["pid"]) for f in after],
        hosts_started_on_killed_node=all(f["node_id"] == node_b.node_id for f in before),
        hosts_moved=all(f["node_id"] != node_b.node_id for f in after),
        killed_node=node_b.node_id,
        interrupted_turns_done=all(r.status == "done" for r in results),
        charges_written=len(lines),
        charged_twice=sorted({c for c in lines if lines.count(c) > 1}),
        every_session_answers_after=all(r.status == "done" for r in again),
    )


def measure(quick: bool) -> FailoverReport:
    """The scenario (50 sessions and 4 running turns quick, else 1,000 and 20); the report."""
    sessions, running = (50, 4) if quick else (1_000, 20)
    clock = Clock.start("ray_failover", mode_of(quick))
    with tempfile.TemporaryDirectory(prefix="repertory-failover-") as folder:
        os.chmod(folder, 0o777)
        figures = asyncio.run(scenario(sessions, running, Path(folder)))
    report = FailoverReport(
        **clock.frame(),
        git=git_state(),
        durability="sqlite WAL, synchronous=NORMAL",
        figures=figures,
    )
    return finish(report, clock)
