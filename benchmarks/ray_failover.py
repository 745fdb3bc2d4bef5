"""Ray failover: a node of a three-node Ray cluster dies hard; its sessions are served by the others.

A session host is a Ray actor on some node; when that node dies, its sessions must come back on
another one, the turns it was running must finish there, and no tool may run twice. This starts its
own three-node cluster on this machine (``ray.cluster_utils.Cluster``: a head node and two worker
nodes, one CPU each, health checks ``HEALTH`` tuned so a dead node is noticed in about two seconds;
``tests/soak`` uses them too) and stops it at the end; nothing else of Ray is touched.

The runtime's two shared hosts ask for a custom resource (``session_hosts``) that only the worker
nodes have; node B joins first, so they start there, then node C joins. The store is a SQLite file
every node can open (one machine). N sessions (1,000; ``--quick`` 50) are created and answer a turn;
then R of them (20; 4) start a turn that charges a card (a non-idempotent tool, recorded in a file)
and waits in the model. While those turns run, node B is killed hard
(``remove_node(allow_graceful=False)``: raylet and workers die at once). Timed from the kill: until
B's host processes are gone; the first call served on one of B's sessions after that
(``metadata()``, through the client's own retries; before that an old process may still answer;
target at most 5 s); every session answering; every interrupted turn done. Counted, each with its
target: hosts left on the dead node, interrupted turns not done, cards charged twice, sessions not
answering afterwards (``tests/actors/test_node_failover.py`` runs the quick version and checks them).

``python -m benchmarks.ray_failover [--quick]``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.local_ray import pickle_benchmarks_by_value
from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel

__all__ = ["HEALTH", "scenario"]

HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}
"""Ray's health checks, tuned so a dead node is noticed in about two seconds."""
SIZES = {"full": (1_000, 20), "quick": (50, 4)}
"""Sessions, and the running turns among them when the node dies."""
NONE = Target(0)


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


async def _until(predicate: Callable[[], Awaitable[bool]], within: float, every: float = 0.02) -> None:
    started = time.perf_counter()
    while not await predicate():  # polling: nodes and processes elsewhere, nothing here to await
        if time.perf_counter() - started > within:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(every)


async def _exercise(figures: Figures, rt: Any, cluster: Any, node_b: Any, sessions: int, running: int,
                    charges: Path) -> None:  # fmt: skip
    handles = list(await asyncio.gather(*(rt.create_session(agent="clerk") for _ in range(sessions))))
    replies = await asyncio.gather(*(h.run(f"hello {i}") for i, h in enumerate(handles)))
    if any(r.status != "done" for r in replies):
        raise RuntimeError("a first turn did not end done")
    before = await rt.host.ping()
    turns = [await h.send(f"charge card-{i}") for i, h in enumerate(handles[:running])]

    async def all_charged() -> bool:
        return charges.exists() and len(charges.read_text().splitlines()) >= running

    await _until(all_charged, 60)
    killed_at = time.perf_counter()
    cluster.remove_node(node_b, allow_graceful=False)

    async def old_hosts_gone() -> bool:
        return not any(os.path.exists(f"/proc/{f['pid']}") for f in before)

    await _until(old_hosts_gone, 30)  # until then an old process may still answer
    gone = time.perf_counter() - killed_at
    await handles[-1].metadata()  # a session that was idle on node B, served again
    first = time.perf_counter() - killed_at
    await asyncio.gather(*(h.metadata() for h in handles))
    every = time.perf_counter() - killed_at
    results = await asyncio.gather(*(t.result() for t in turns))
    done = time.perf_counter() - killed_at
    after = await rt.host.ping()
    again = await asyncio.gather(*(h.run("still there?") for h in handles))
    lines = charges.read_text().splitlines()
    figures.time("node hard failure -> first call served elsewhere", first, target=Target(5.0),
                 note=f"{sessions} sessions on 2 hosts, {running} turns running")  # fmt: skip
    figures.time("node hard failure -> its host processes gone", gone)
    figures.time("node hard failure -> every session served", every)
    figures.time("node hard failure -> interrupted turns done", done)
    figures.count("hosts that started on the killed node", sum(f["node_id"] == node_b.node_id for f in before))
    figures.count("hosts on the killed node after", sum(f["node_id"] == node_b.node_id for f in after), target=NONE)
    figures.count("interrupted turns not done", sum(r.status != "done" for r in results), target=NONE)
    figures.count("charges written", len(lines), target=Target(running))
    figures.count("cards charged twice", len({c for c in lines if lines.count(c) > 1}), target=NONE)
    figures.count("sessions not answering after", sum(r.status != "done" for r in again), target=NONE)
    figures.fact("hosts", "before: " + ", ".join(f"{f['node_id'][:8]} pid {f['pid']}" for f in before) +
                 "; after: " + ", ".join(f"{f['node_id'][:8]} pid {f['pid']}" for f in after))  # fmt: skip
    figures.fact("killed node", node_b.node_id)


async def scenario(figures: Figures, options: Options) -> None:
    """The scenario on a fresh three-node cluster, stopped at the end."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        raise RuntimeError("Ray is already initialised in this process; this scenario starts its own cluster")
    sessions, running = SIZES[options.mode]
    figures.fact("cluster", f"3 nodes, one CPU each; health checks {HEALTH}")
    figures.fact("store", "sqlite WAL, synchronous=NORMAL")
    head = {"num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH}
    cluster: Any = Cluster(initialize_head=True, head_node_args=head)
    with tempfile.TemporaryDirectory(prefix="repertory-failover-") as folder:
        os.chmod(folder, 0o777)
        workdir = Path(folder)
        try:
            node_b = cluster.add_node(num_cpus=1, resources={"session_hosts": 100})
            cluster.wait_for_nodes()
            pickle_benchmarks_by_value()  # the hosts on other nodes need not import benchmarks
            ray.init(address=cluster.address, log_to_driver=False)
            rt = await Runtime.start(store=f"sqlite:///{workdir / 'failover.db'}", backend="ray",
                                     agents={"clerk": _agent(workdir / "charges.log")}, hosts=2, keep_hosts=False,
                                     host_options={"resources": {"session_hosts": 1}})  # fmt: skip
            cluster.add_node(num_cpus=1, resources={"session_hosts": 100})  # node C: where the hosts go next
            cluster.wait_for_nodes()
            try:
                await _exercise(figures, rt, cluster, node_b, sessions, running, workdir / "charges.log")
            finally:
                await rt.close()
        finally:
            ray.shutdown()
            cluster.shutdown()


if __name__ == "__main__":
    main("ray_failover", __doc__, scenario=scenario)
