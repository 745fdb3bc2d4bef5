"""A2A server overhead: an agent's turn as a blocking ``SendMessage`` to ``repertory serve`` against ``handle.run()``.

Target: A2A adds at most 3 ms (p50) to a turn on loopback. One agent (``benchmarks.harness.echo``:
a zero-delay scripted model, no tools), two ways, each on its own fresh SQLite file (WAL, durability
normal), in interleaved blocks so a busy machine slows every kind alike:

- ``direct``: ``await handle.run("ping")`` in this process (local backend), through the session tree;
- ``a2a``: a send-and-wait round trip with ``a2a-sdk``'s client (not streaming, so ``SendMessage``
  blocks until the task rests) to ``repertory serve``'s ``/a2a/echo`` (JSON-RPC over HTTP on loopback,
  keyless), the completed task's ``reply`` artifact checked.

Each kind continues one session (the messages carry the first task's ``contextId``), so every call is
one turn of the same size as the direct run's, and one new task. The client resolves the agent card
once, before the clock starts. The figure against the target: ``p50(a2a) - p50(direct)``.

``python -m benchmarks.a2a_server [--quick]``.
"""

from __future__ import annotations

import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.echo import AGENTS, PROMPT, REPLY, agents, direct
from benchmarks.harness.echo import NAME as AGENT
from benchmarks.harness.figures import Figures, Target, percentile
from benchmarks.harness.interleaved import Call, interleaved
from benchmarks.harness.served import repertory_serve
from repertory import Runtime

SIZES = {"full": {"blocks": 20, "calls": 50, "warmup": 20}, "quick": {"blocks": 2, "calls": 10, "warmup": 3}}


async def _send(client: Any, context_id: str) -> str:
    """One blocking ``SendMessage`` of the prompt in ``context_id`` (new if empty); the task's context, checked."""
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    message = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=PROMPT)], context_id=context_id
    )
    answers = [r async for r in client.send_message(SendMessageRequest(message=message))]
    task = answers[0].task if len(answers) == 1 and answers[0].HasField("task") else None
    text = "".join(p.text for a in task.artifacts if a.artifact_id == "reply" for p in a.parts) if task else None
    if task is None or task.status.state != TaskState.TASK_STATE_COMPLETED or text != REPLY:
        raise RuntimeError(f"an A2A send did not end with the agent's reply: {answers}")
    context: str = task.context_id
    return context


async def _a2a_call(client: Any) -> Call:
    """A send to ``echo`` continuing one context (the session is made by the first send)."""
    context_id = await _send(client, "")

    async def call() -> None:
        await _send(client, context_id)

    return call


async def scenario(figures: Figures, options: Options) -> None:
    """The two kinds, warmed up, then timed in alternating blocks."""
    import httpx
    from a2a.client import ClientConfig, create_client

    size = SIZES[options.mode]
    with tempfile.TemporaryDirectory(prefix="repertory-a2a_server-") as tmp:
        folder = Path(tmp)
        rt = await Runtime.start(f"sqlite:///{folder / 'direct.db'}", agents=agents(), idle_timeout=3600)
        try:
            handle = await rt.create_session(agent=AGENT)
            async with (
                repertory_serve(f"sqlite:///{folder / 'a2a.db'}", AGENTS) as url,
                httpx.AsyncClient(timeout=60) as http,
            ):
                config = ClientConfig(streaming=False, httpx_client=http)
                client = await create_client(f"{url}/a2a/{AGENT}", client_config=config)
                try:
                    kinds = {"direct": direct(handle), "a2a": await _a2a_call(client)}
                    times = await interleaved(kinds, blocks=size["blocks"], calls=size["calls"], warmup=size["warmup"])
                finally:
                    await client.close()
        finally:
            await rt.close()
    figures.fact("store", "sqlite (WAL, durability normal), one file per kind")
    figures.fact("blocks x calls per block", f"{size['blocks']} x {size['calls']}")
    figures.time("handle.run() in process", times["direct"], note="one turn of the echo agent")
    figures.time("blocking SendMessage to /a2a/echo", times["a2a"])
    added = statistics.median(times["a2a"]) - statistics.median(times["direct"])
    figures.time("A2A server: added to a turn, p50", added, target=Target(0.003),
                 note="p50(SendMessage) - p50(handle.run())")  # fmt: skip
    figures.time("A2A server: added to a turn, p99", percentile(times["a2a"], 99) - percentile(times["direct"], 99))


if __name__ == "__main__":
    main("a2a_server", __doc__, scenario=scenario)
