"""``@ag-ui/client``'s ``HttpAgent`` (``js/agui_client.mjs``) against the AG-UI route, under node.

The client comes from npm at the versions ``js/package-lock.json`` pins (``npm ci`` when
``node_modules`` is missing or older than the lock). The script chats (streamed text, a second
turn), runs tools, approves one call and rejects another through ``resume``, sends the same
resume again (refused), answers a tool the client runs with its next input, reloads a thread
through ``connectAgent`` (a GET of the stream), and is refused a bad input and another owner's
thread; it throws on the first expectation that fails. Skipped, saying why, only without node.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tests import npm
from tests.http.conftest import ALICE, BOB, ServerThread

JS = Path(__file__).parent / "js"


async def test_http_agent_chats_decides_and_reconnects(sqlite_server: ServerThread) -> None:
    node = npm.node("the AG-UI client test")
    npm.installed(JS)
    proc = await asyncio.create_subprocess_exec(
        node,
        str(JS / "agui_client.mjs"),
        sqlite_server.url,
        ALICE,
        BOB,
        cwd=JS,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, f"the AG-UI client's run failed:\n{err.decode()}\n{out.decode()}"
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary == {
        "chat": 4,
        "tools": ["facts about owls", "facts about owls again"],
        "again": 409,
        "rejected": "finished: not today (error)",
        "clientTool": "painted green",
        "reload": 7,
        "badInput": 422,
        "otherOwner": 422,
    }
