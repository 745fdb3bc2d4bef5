"""``POST /ai-sdk/{assistant_id}/chat/{id}/stop?tree=true``: the kill switch from an AI SDK front end.

A chat whose own turn streams a long reply and whose spawned child streams one too, with another
turn queued behind it: a plain stop ends the chat's turn only, the child's go on; another owner's
key is 404 and stops nothing; ``tree=true`` cancels every open turn of the child as well and
answers once none is left, naming the runs that were running.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from repertory import Runtime
from tests.http.protocols.aisdk_support import ALICE, BOB, served


async def _statuses(runtime: Runtime, *session_ids: str) -> list[list[str]]:
    return [[t.status for t in await runtime.store.list_turns(sid)] for sid in session_ids]


async def _running(runtime: Runtime, *session_ids: str) -> None:
    """Wait until each session's first turn runs (its model is streaming)."""
    async with asyncio.timeout(10):
        while True:  # the models stream with no event to await from here
            if [turns[:1] for turns in await _statuses(runtime, *session_ids)] == [["running"]] * len(session_ids):
                return
            await asyncio.sleep(0.02)


async def test_stop_with_tree_cancels_the_chats_descendants_too(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 'stop-tree.db'}") as server:
        rt = server.runtime
        chat = await rt.create_session(agent="chat", title="chat", owner="alice")
        child = await chat.spawn(title="helper")
        chats = await chat.send("slow 5000")
        childs = await child.send("slow 5000")
        behind = await child.send("hello after")
        await _running(rt, chat.id, child.id)
        stop = f"{server.url}/ai-sdk/chat/chat/{chat.id}/stop"

        async with httpx.AsyncClient(timeout=30) as http:
            first = await rt.store.load_turn(chats.submission_id)
            assert first is not None
            alone = await http.post(stop, headers={"x-api-key": ALICE})
            assert alone.status_code == 200, alone.text
            assert alone.json() == {"stopped": [first.run_id]}
            assert await _statuses(rt, chat.id, child.id) == [["cancelled"], ["running", "queued"]]

            refused = await http.post(stop, params={"tree": "true"}, headers={"x-api-key": BOB})
            assert refused.status_code == 404  # another owner's chat is one that does not exist
            assert await _statuses(rt, child.id) == [["running", "queued"]]

            running = await rt.store.load_turn(childs.submission_id)
            assert running is not None
            tree = await http.post(stop, params={"tree": "true"}, headers={"x-api-key": ALICE})
            assert tree.status_code == 200, tree.text
            assert tree.json() == {"stopped": [running.run_id]}
            assert await _statuses(rt, chat.id, child.id) == [["cancelled"], ["cancelled", "cancelled"]]
            assert await behind.status() == "cancelled"

            again = await http.post(stop, params={"tree": "true"}, headers={"x-api-key": ALICE})
            assert again.status_code == 200 and again.json() == {"stopped": []}  # nothing left to stop
