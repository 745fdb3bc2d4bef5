"""agent-chat-ui's requests, sent by LangGraph's JavaScript client (``tests/http/js``) under node.

``js/agent_chat_ui.mjs`` replays what agent-chat-ui's ``useStream`` sends (a thread created with
no metadata, streams with ``["values", "messages-tuple", "custom"]``, approvals as ``input: {}``
beside a ``command``, reject, edit, "Mark as Resolved", a non-first assistant, reload and the
sidebar's search, states at a checkpoint) and checks another owner's key and a delete with a fork
alive; it throws on the first expectation that fails. The client comes from npm at the version
agent-chat-ui's lockfile pins, installed with ``npm ci`` from the committed ``package-lock.json``
(``.ci/run`` does it; so does this module when ``node_modules`` is missing or older than the lock).
The test skips, saying why, only where node is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tests import npm
from tests.http.conftest import ALICE, BOB, ServerThread

JS = Path(__file__).parent / "js"
SCRIPT = JS / "agent_chat_ui.mjs"


async def test_agent_chat_ui_requests_through_the_js_client(sqlite_server: ServerThread) -> None:
    node = npm.node("the JavaScript client test")
    npm.installed(JS)
    proc = await asyncio.create_subprocess_exec(
        node,
        str(SCRIPT),
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
    assert proc.returncode == 0, f"the JS client's run failed:\n{err.decode()}\n{out.decode()}"
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary["streamModes"] == ["values,messages-tuple,custom", "messages-tuple,values,custom"]
    assert summary["runs"] == 10 and summary["tenancy"] == "404"  # six messages, three decisions, one goto
    assert summary["deleted"] == summary["threadId"] != summary["copy"]
