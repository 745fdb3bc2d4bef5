"""A task outlives the process that started it: ``repertory serve`` SIGKILLed mid-turn, a new process answers for it.

The first server (a real ``repertory serve`` process on a SQLite file) takes a ``tools/call`` as a
task from the official client and is killed (``SIGKILL``: nothing is flushed, nothing says
goodbye) while the model streams its reply. A new process on the same file re-drives the open
turn when it starts, as it does every open turn, and answers ``tasks/get`` for the task id the
first one gave: completed, with the reply the store holds, which is not the killed attempt's.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import anyio
import mcp_types as t

from tests.http.conftest import sse_events
from tests.http.mcp_server import tasks_client as tc
from tests.http.mcp_server.conftest import connect
from tests.http.test_serve import _serve as serve

AGENTS = "tests.http.protocols.aisdk_agents:make_agents"
KEY = "carol-mcp-key-0123456789"
WORDS = 40


async def test_a_new_process_answers_tasks_get_after_the_first_was_killed(tmp_path: Path) -> None:
    options = ("--store", f"sqlite:///{tmp_path / 'killed.db'}", "--api-key", f"carol={KEY}")
    env = {"REPERTORY_TEST_WORD_DELAY": "0.05"}
    proc, url = await serve(*options, env=env, agents=AGENTS)
    try:
        async with connect(url, KEY, extensions=[tc.Tasks()]) as client:
            created = await tc.start(client, "chat", {"task": f"slow {WORDS}"})
            listed = await client.call_tool("sessions_list", {})
        assert listed.structured_content is not None
        [session] = listed.structured_content["sessions"]
        session_id = session["session_id"]
        # Wait until the reply is streaming (a stored text delta), then kill the server in the middle of it.
        streamed = await sse_events(url, f"/threads/{session_id}/events", KEY, "text.delta")
        abandoned = streamed[-1][2]["data"]["text"].split(" ")[0]  # the killed attempt's nonce
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

        proc, url = await serve(*options, env=env, agents=AGENTS)
        async with connect(url, KEY, extensions=[tc.Tasks()]) as client:
            with anyio.fail_after(60):
                done = await tc.until(client.session, created.task_id, "completed")
            read = await client.read_resource(f"repertory://sessions/{session_id}")
        assert done.task_id == created.task_id and done.result is not None
        text = done.result["structuredContent"]["text"]
        assert done.result["structuredContent"]["session_id"] == session_id
        assert text.endswith(" ".join(f"w{i}" for i in range(WORDS)))
        assert not text.startswith(abandoned)  # the new process's reply, not the killed one's
        conversation = read.contents[0]
        assert isinstance(conversation, t.TextResourceContents)
        assert text in conversation.text  # the reply the task returns is the one the session holds
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 60)
