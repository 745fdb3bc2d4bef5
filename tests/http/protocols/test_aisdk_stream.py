"""The AI SDK UI message stream read by the ``ai`` package itself, under node (``js/aisdk_stream.mjs``).

``DefaultChatTransport`` (what ``useChat`` sends and how it parses: every chunk checked against the
package's ``uiMessageChunkSchema``) and ``readUIMessageStream`` (how ``useChat`` builds the message)
drive a server on loopback: a chat, a tool call with reasoning, an approval approved (and the same
answer again, refused) and one rejected, a ``suspend()`` answered with the call's output, a POST
dropped mid-reply and resumed with the transport's reconnect (durable deltas and live-only ones), 204
when nothing runs, the stop route, another owner's key and bad input. Here the results are held
against the store.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx

from tests.http.protocols.aisdk_agents import DELETED
from tests.http.protocols.aisdk_support import ALICE, BOB, JS, node, served, stored_reply


async def test_the_ai_packages_reader_against_the_routes(tmp_path: Path) -> None:
    binary = node()
    async with served(f"sqlite:///{tmp_path / 'aisdk.db'}") as server:
        proc = await asyncio.create_subprocess_exec(
            binary,
            str(JS / "aisdk_stream.mjs"),
            server.url,
            ALICE,
            BOB,
            cwd=JS,
            env={**os.environ, "NODE_NO_WARNINGS": "1"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 100)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, f"the ai package's run failed:\n{err.decode()}\n{out.decode()}"
        seen = json.loads(out.decode().strip().splitlines()[-1])
        runtime = server.runtime

        assert seen["wire"][:2] == ["start", "data-repertory-run"] and "text-delta" in seen["wire"]
        assert seen["chat"]["replies"][-1] == await stored_reply(runtime, seen["chat"]["chatId"])
        # Approved: the tool ran exactly once, though the answer came twice; rejected: it never ran.
        assert DELETED["a1"] == 1 and DELETED["a2"] == 0
        assert "already answered" in seen["approvals"]["refused"]
        # Stored deltas replay as they streamed; live-only ones are gone, so the reply comes whole.
        assert seen["resume"]["replayedDeltas"] > 1 and seen["resumeLive"]["replayedDeltas"] == 1
        for resumed in (seen["resume"], seen["resumeLive"]):
            assert resumed["text"] == await stored_reply(runtime, resumed["chatId"])
            turns = await runtime.store.list_turns(resumed["chatId"])
            assert [t.run_id for t in turns] == [resumed["messageId"]]
        assert seen["suspended"]["text"] == await stored_reply(runtime, seen["suspended"]["chatId"])
        stopped = await runtime.store.list_turns(seen["stop"]["chatId"])
        assert [t.status for t in stopped] == ["cancelled"]
        assert "messages" in seen["badInput"] and "messages.0.parts.0" in seen["fileInput"]


async def test_every_open_stream_holds_a_slot_of_its_key(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 'slots.db'}", max_streams_per_key=1) as server:
        api = f"{server.url}/ai-sdk/chat/chat"
        body = {
            "id": "slots-1",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "slow 40"}]}],
        }
        async with httpx.AsyncClient(headers={"x-api-key": ALICE}, timeout=30) as alice:
            async with alice.stream("POST", api, json=body) as held:
                assert held.headers["x-vercel-ai-ui-message-stream"] == "v1"
                resumed = await alice.get(f"{api}/slots-1/stream")
                assert resumed.status_code == 429  # the POST's stream holds alice's one slot
                async with httpx.AsyncClient(headers={"x-api-key": BOB}) as bob:  # another key has its own
                    assert (await bob.get(f"{api}/slots-1/stream")).status_code == 204
                async for _ in held.aiter_lines():
                    pass
            assert (await alice.get(f"{api}/slots-1/stream")).status_code == 204  # the slot came back
