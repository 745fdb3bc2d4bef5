"""Child process for ``test_compaction_crash.py``: a conversation on a SQLite file, SIGKILLed mid-compaction.

``python -m tests.runtime._compaction_crash_worker DB STAGE``
    Opens the store and drives turns of the scripted conversation (``compact_script``) on one
    thread until its first compaction. ``STAGE`` says where it then stops, printing a line and
    waiting to be killed: ``during`` while the summary request is in flight (nothing of the
    compaction is committed yet), ``after`` at the first request after the boundary was committed.
    Before that it prints ``thread <id>``.
"""

from __future__ import annotations

import asyncio
import sys

from repertory import ModelMessage, Session, SqliteSessionStore, ToolSpec
from tests.runtime.compact_script import Conversation, compacting_agent, prompt

FOREVER = 3600.0


class Stopping(Conversation):
    """Stops for the kill at the chosen stage."""

    def __init__(self, stage: str) -> None:
        super().__init__(on_summary=self._summarizing)
        self.stage = stage

    async def _summarizing(self) -> None:
        if self.stage == "during":
            print("summarizing", flush=True)
            await asyncio.sleep(FOREVER)

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, object]:
        if self.stage == "after" and len(messages) > 1 and messages[1].boundary:
            print("compacted", flush=True)
            await asyncio.sleep(FOREVER)
        return await super().__call__(messages, tools)


async def main(db: str, stage: str) -> None:
    store = await SqliteSessionStore.open(db)
    sess = Session(store=store, agent=compacting_agent(Stopping(stage)))
    print(f"thread {sess.thread_id}", flush=True)
    for i in range(1000):
        await sess.start(prompt(i))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
