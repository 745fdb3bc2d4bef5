"""The local backend's approver decides through the driver's web UI, so the decision runs in the driver's process.

Found by the chaos soak (issue 26): the approver had a local runtime of its own on the driver's
store, and a decision made there drove the run on in the approver's process while the driver
still held the session in memory (its event numbering, its queue): ``CommitConflict`` on event
seqs, and approvals left undecided after a driver restart. Here the driver's runtime serves HTTP
(``tests.soak.driver.serve_http``) and the approver's ``UiApprover`` reads the inbox and
posts each card's form: every decision is recorded once, in the driver's runtime, with the
session's log gap-free, and the approver's evidence line names the token it redeemed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, ModelMessage, Runtime, tool
from repertory.core.model import ToolSpec
from repertory.core.store import TreeStore
from repertory.testing import ScriptedModel
from tests.soak.approver import UiApprover, draw, edited_args, inbox_cards
from tests.soak.driver import serve_http, url_file
from tests.soak.records import RunPaths, read_lines

PAID: list[int] = []


@tool(requires_approval=True)
def charge(amount: int) -> str:
    """Charge a card (asks a human first)."""
    PAID.append(amount)
    return f"charged {amount}"


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "charge", "args": {"amount": 40}}
    return {"text": f"after: {messages[-1].tool_results[0].result}"}


async def _decide_until_idle(approver: UiApprover, rt: Runtime, ids: list[str]) -> None:
    async with asyncio.timeout(60):
        while True:
            await approver.look()
            await asyncio.gather(*approver.deciding.values())
            pending = [p for sid in ids for p in await (await rt.session(sid)).pending_approvals()]
            if not pending:
                return
            await asyncio.sleep(0.05)


def test_inbox_cards_reads_the_forms_of_live_cards_only() -> None:
    page = """<div id="inbox"><section class="card"><form method="post" action="/ui/decide">
      <input type="hidden" name="csrf" value="tok&amp;1"><input type="hidden" name="session_id" value="s1">
      <input type="hidden" name="run_id" value="r1"><input type="hidden" name="tool_call_id" value="c1">
      <textarea name="args">{"amount": 1}</textarea></form></section>
      <section class="card queued"><pre class="args">{}</pre></section>
      <form method="post" action="/ui/logout"><input type="hidden" name="csrf" value="x"></form></div>"""
    [card] = inbox_cards(page)
    assert (card.session_id, card.run_id, card.tool_call_id, card.csrf) == ("s1", "r1", "c1", "tok&1")


@pytest.mark.timeout(120)
async def test_the_approver_decides_every_approval_through_the_driver_web_ui(tmp_path: Path) -> None:
    PAID.clear()
    paths = RunPaths(tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    agents = {"payer": Agent(name="payer", model=ScriptedModel(_step), tools=[charge])}
    async with await Runtime.start(store=url, agents=agents) as rt:
        task, server = await serve_http(rt, paths)
        try:
            assert url_file(paths).read_text().startswith("http://127.0.0.1:")
            sessions = [await rt.create_session(agent="payer") for _ in range(6)]
            turns = [await s.send("pay") for s in sessions]
            for turn in turns:
                assert (await turn.result()).status == "suspended"
            tokens = {s.id: (await s.pending_approvals())[0].token for s in sessions}
            approver_store = await _open(url)  # the approver's own connection: it reads, never drives
            try:
                approver = UiApprover(approver_store, paths, seed=7, incarnation=1)
                await _decide_until_idle(approver, rt, [s.id for s in sessions])
                await approver.client.aclose()
            finally:
                await approver_store.close()
            for turn in turns:  # the decisions drove the runs on in this (the driver's) process
                assert (await turn.result()).status == "done"
            lines = read_lines(paths.decisions)
            assert sorted(line["session_id"] for line in lines) == sorted(tokens)
            for line in lines:
                assert line["token"] == tokens[line["session_id"]] and line["via"] == "ui"
                assert line["decision"] == draw(7, line["token"])
            wanted = sorted(
                edited_args("charge", {"amount": 40})["amount"] if line["decision"] == "edit" else 40
                for line in lines
                if line["decision"] != "reject"
            )
            assert sorted(PAID) == wanted  # each approved call ran once, with the arguments decided
            for s in sessions:
                events = await rt.store.load_events(s.id)
                assert [e.seq for e in events] == list(range(1, len(events) + 1))
                assert [e.type for e in events].count("turn.completed") == 1
        finally:
            server.should_exit = True
            await task


async def _open(url: str) -> TreeStore:
    from repertory.storage.url import open_store

    store = await open_store(url)
    assert isinstance(store, TreeStore)
    return store
