"""``repertory sessions show`` of a compacted session: the whole conversation, the summary marked in place."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from repertory import Runtime
from repertory.cli import app
from tests.runtime.compact_script import Conversation, compacting_agent, prompt


async def _compacted(url: str) -> str:
    async with await Runtime.start(store=url, agents={"compacting": compacting_agent(Conversation())}) as rt:
        root = await rt.create_session(agent="compacting")
        for i in range(20):
            await root.run(prompt(i))
        return root.id


def test_show_lists_every_message_and_marks_the_boundary(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'show.db'}"
    session_id = asyncio.run(_compacted(url))
    shown = CliRunner().invoke(app, ["sessions", "show", session_id, "--store", url], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert "[context boundary]" in shown.stdout
    for i in range(20):
        assert f"t{i} please" in shown.stdout
