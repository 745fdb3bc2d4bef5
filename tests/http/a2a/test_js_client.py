"""The A2A JavaScript SDK's client (``@a2a-js/sdk`` 1.3.0, from the committed lockfile) sends and streams to repertory.

``js/a2a_client.mjs`` resolves the agent card, picks the JSON-RPC interface it names and sends one
message, blocking or streamed, printing what it got as JSON lines. A machine without node skips.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.http.conftest import ALICE, ServerThread

JS = Path(__file__).parent / "js"
_INSTALLED = JS / "node_modules" / ".package-lock.json"


async def _node(*args: str) -> list[dict[str, Any]]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the @a2a-js/sdk tests need them (scripts/system-deps)")
    lock = JS / "package-lock.json"
    if not _INSTALLED.exists() or _INSTALLED.stat().st_mtime < lock.stat().st_mtime:
        ci = await asyncio.create_subprocess_exec(
            npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", cwd=JS, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(ci.communicate(), 600)
        assert ci.returncode == 0, f"npm ci failed:\n{out.decode()}"
    proc = await asyncio.create_subprocess_exec(
        node, str(JS / "a2a_client.mjs"), *args, cwd=JS, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


async def test_the_js_client_sends_and_gets_the_completed_task(a2a_server: ServerThread) -> None:
    [task] = await _node(f"{a2a_server.url}/a2a/assistant", ALICE, "send", "hello from js")
    assert task["kind"] == "task" and task["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"] == [{"id": "reply", "text": "Hello! How can I help?"}]


async def test_the_js_client_streams_the_task_to_its_end(a2a_server: ServerThread) -> None:
    events = await _node(f"{a2a_server.url}/a2a/assistant", ALICE, "stream", "research js")
    assert events[0]["kind"] == "task"
    assert events[-1] == {"kind": "status", "taskId": events[0]["id"], "state": "TASK_STATE_COMPLETED"}
    final = [e for e in events if e["kind"] == "artifact"][-1]
    assert final == {
        "kind": "artifact",
        "taskId": events[0]["id"],
        "id": "reply",
        "text": "research done",
        "append": False,
        "lastChunk": True,
    }
