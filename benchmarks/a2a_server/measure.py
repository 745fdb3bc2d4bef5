"""The measurement of ``benchmarks.a2a_server`` (see its docstring): two kinds of one turn, interleaved."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from benchmarks.a2a_server import NAME, A2aServerReport
from benchmarks.harness.cli import in_temp_folder
from benchmarks.harness.echo import AGENTS, PROMPT, REPLY, agents, direct
from benchmarks.harness.echo import NAME as AGENT
from benchmarks.harness.interleaved import Call, interleaved
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.served import repertory_serve
from benchmarks.harness.stats import dist_ms
from repertory import Runtime

__all__ = ["SIZES", "measure"]

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


async def measure_async(quick: bool, folder: Path) -> A2aServerReport:
    """The two kinds, warmed up, then timed in alternating blocks."""
    import httpx
    from a2a.client import ClientConfig, create_client

    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    size = SIZES[mode]
    rt = await Runtime.start(f"sqlite:///{folder / 'direct.db'}", agents=agents(), idle_timeout=3600)
    try:
        handle = await rt.create_session(agent=AGENT)
        async with (
            repertory_serve(f"sqlite:///{folder / 'a2a.db'}", AGENTS) as url,
            httpx.AsyncClient(timeout=60) as http,
        ):
            client = await create_client(
                f"{url}/a2a/{AGENT}", client_config=ClientConfig(streaming=False, httpx_client=http)
            )
            try:
                kinds: dict[str, Call] = {"direct": direct(handle), "a2a": await _a2a_call(client)}
                times = await interleaved(kinds, blocks=size["blocks"], calls=size["calls"], warmup=size["warmup"])
            finally:
                await client.close()
    finally:
        await rt.close()
    d, a = dist_ms(times["direct"]), dist_ms(times["a2a"])
    report = A2aServerReport(
        **clock.frame(), store="sqlite (WAL, durability normal), one file per kind", blocks=size["blocks"],
        calls_per_block=size["calls"], direct=d, a2a=a, a2a_added_p50_ms=round(a.p50_ms - d.p50_ms, 3),
        a2a_added_p99_ms=round(a.p99_ms - d.p99_ms, 3),
    )  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> A2aServerReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)
