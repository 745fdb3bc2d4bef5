"""A streamed A2A task outlives the process serving it: ``repertory serve`` SIGKILLed mid-reply, another answers.

The first server (a real ``repertory serve`` process on a SQLite file) takes a
``SendStreamingMessage`` from the official client and is killed (``SIGKILL``: nothing flushed,
nothing said) while the reply streams. A second process on the same file re-drives the open turn
as it starts, and the client resubscribes there (``SubscribeToTask``) with the task id the first
gave: the replay from the durable log holds the killed attempt's text, then starts the reply over,
and ends with the reply the store holds, which is not the killed attempt's. ``GetTask`` agrees.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
from a2a.types import GetTaskRequest, StreamResponse, SubscribeToTaskRequest, TaskState

from tests.http.a2a.conftest import a2a_client, artifact_text, request, user
from tests.http.test_serve import _serve as serve

AGENTS = "tests.http.protocols.aisdk_agents:make_agents"
KEY = "carol-a2a-key-0123456789"
WORDS = 200


def _applied(events: list[StreamResponse]) -> str:
    """The reply artifact's text once every chunk is applied as A2A says (append, or start over)."""
    text = ""
    for event in events:
        if event.HasField("artifact_update"):
            chunk = event.artifact_update.artifact.parts[0].text
            text = text + chunk if event.artifact_update.append else chunk
    return text


async def test_a_resubscribe_to_a_second_process_misses_nothing_after_the_first_was_killed(tmp_path: Path) -> None:
    options = ("--store", f"sqlite:///{tmp_path / 'killed.db'}", "--api-key", f"carol={KEY}")
    env = {"REPERTORY_TEST_WORD_DELAY": "0.05"}
    proc, url = await serve(*options, env=env, agents=AGENTS)
    try:
        async with a2a_client(url, KEY, "chat") as client:
            stream = client.send_message(request(user(f"slow {WORDS}")))
            assert isinstance(stream, AsyncGenerator)
            first = await anext(stream)
            task_id = first.task.id
            while not (chunk := await anext(stream)).HasField("artifact_update"):
                pass
            abandoned = chunk.artifact_update.artifact.parts[0].text.split(" ")[0]  # the killed attempt's nonce
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            await stream.aclose()

        proc, url = await serve(*options, env=env, agents=AGENTS)
        async with a2a_client(url, KEY, "chat") as client:
            with anyio.fail_after(120):
                events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
            read = await client.get_task(GetTaskRequest(id=task_id))
        assert events[0].task.id == task_id and events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert chunks[0].artifact.parts[0].text.startswith(abandoned)  # the log kept what the killed process sent
        restarted = [i for i, c in enumerate(chunks) if i > 0 and not c.append]
        assert restarted, "the re-driven reply starts the artifact over"
        text = _applied(events)
        assert text.endswith(" ".join(f"w{i}" for i in range(WORDS))) and not text.startswith(abandoned)
        assert read.status.state == TaskState.TASK_STATE_COMPLETED and artifact_text(read) == text
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 60)
