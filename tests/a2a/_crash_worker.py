"""Child process for ``test_crash.py``: a runtime on a SQLite file whose calls go to the A2A peer.

``python -m tests.a2a._crash_worker DB PEER_URL CALLS``
    Starts a local ``Runtime`` on DB (which re-drives the turn a killed predecessor left open) and
    prints ``ready``; then, for each call k below CALLS in order, makes (once) the session ``call-k``
    with one turn, whose model calls the peer with ``slow 0.3 call_k``, waits for that turn and
    prints ``done k <its text>``. The test SIGKILLs it while the last call's remote task runs.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from repertory import Agent, ModelMessage, Runtime, ToolSpec
from repertory.a2a import a2a_agent
from repertory.testing import ScriptedModel

SLOW = 0.3


def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """One call of the peer naming this session's call, then a reply quoting its result."""
    if len(messages) == 1:
        return {"tool": "peer", "args": {"task": f"slow {SLOW} {messages[0].text}"}}
    [result] = messages[-1].tool_results
    return {"text": f"{'error' if result.is_error else 'ok'}: {result.result}"}


def agents(peer_url: str) -> dict[str, Agent]:
    """The caller the worker and the test (to read the results) both use."""
    return {"caller": Agent(name="caller", model=ScriptedModel(step), tools=[a2a_agent(peer_url, name="peer")])}


async def main(db: str, peer_url: str, calls: int) -> None:
    async with await Runtime.start(store=f"sqlite:///{db}", agents=agents(peer_url)) as rt:
        print("ready", flush=True)
        for k in range(calls):
            session_id = f"call-{k}"
            if await rt.store.load_session(session_id) is None:
                handle = await rt.create_session(agent="caller", session_id=session_id)
                turn = await handle.send(f"call_{k}")
            else:
                handle = await rt.session(session_id)
                [record] = await rt.store.list_turns(session_id)
                turn = handle.get_turn(record.submission_id)
            result = await turn.result()
            print(f"done {k} {result.text}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
