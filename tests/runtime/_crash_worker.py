"""Child process for ``test_crash.py``: drives sessions on a SQLite file until it is SIGKILLed.

``python -m tests.runtime._crash_worker loop DB LOG COMMITS``
    Opens the store, prints ``ready``, recovers every run a previous incarnation left ``running``
    (or ``error``), then starts new runs, three at a time, forever. Tools append a line to LOG
    *before* returning (``charge`` is not idempotent, ``fetch`` is); every checkpoint appends
    ``run_id revision_id`` to COMMITS after its commit returned.

``python -m tests.runtime._crash_worker race DB LOG RUN_ID TOKEN``
    Opens the store, prints ``ready``, waits for a line on stdin, then redeems the approval token
    and prints ``ok``, ``invalid`` or ``error <repr>``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from repertory import Agent, RunState, Session, SqliteSessionStore, ToolContext, tool
from repertory.errors import InvalidResumeToken
from repertory.testing import ScriptedModel

SCRIPT: list[dict[str, Any]] = [
    {"tools": [{"tool": "charge", "args": {"amount": 1}}, {"tool": "fetch", "args": {"url": "a"}}]},
    {"tool": "charge", "args": {"amount": 2}},
    {"tools": [{"tool": "fetch", "args": {"url": "b"}}, {"tool": "fetch", "args": {"url": "c"}}]},
    {"text": "done"},
]
STEPS = len(SCRIPT)


def append_line(path: str, line: str) -> None:
    """One ``write`` on an O_APPEND file: a SIGKILL either lands before it or after the whole line."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def build_agent(log_path: str) -> Agent:
    """The agent both the child and the parent (for final recovery) use."""

    @tool
    async def charge(ctx: ToolContext, amount: int) -> str:
        """Not idempotent: running it twice for one call would charge twice."""
        await asyncio.sleep(0.002)  # simulated work, so kills land inside tools too
        append_line(log_path, f"charge {ctx.call_id} {ctx.run_id}")
        await asyncio.sleep(0.002)
        return f"charged {amount}"

    @tool(idempotent=True)
    async def fetch(ctx: ToolContext, url: str) -> str:
        await asyncio.sleep(0.002)
        append_line(log_path, f"fetch {ctx.call_id} {ctx.run_id}")
        return f"page {url}"

    @tool(requires_approval=True)
    async def release_funds(ctx: ToolContext, amount: int) -> str:
        append_line(log_path, f"release {ctx.call_id} {ctx.run_id}")
        return f"released {amount}"

    return Agent(name="crashy", model=ScriptedModel(SCRIPT, delay=0.001), tools=[charge, fetch, release_funds])


def race_agent(log_path: str) -> Agent:
    agent = build_agent(log_path)
    agent.model = ScriptedModel([{"tool": "release_funds", "args": {"amount": 5}}, {"text": "released"}])
    return agent


async def loop(db: str, log: str, commits: str) -> None:
    store = await SqliteSessionStore.open(db)
    print("ready", flush=True)
    agent = build_agent(log)

    def on_checkpoint(state: RunState) -> None:
        append_line(commits, f"{state.run_id} {state.history_revision_id}")

    leftovers = [r for r in await store.list_runs() if r.status in ("running", "error")]
    await asyncio.gather(
        *(Session.recover(store=store, agent=agent, run_id=r.run_id, on_checkpoint=on_checkpoint) for r in leftovers)
    )
    while True:
        await asyncio.gather(
            *(Session(store=store, agent=agent, on_checkpoint=on_checkpoint).start("go") for _ in range(3))
        )


async def race(db: str, log: str, run_id: str, token: str) -> None:
    store = await SqliteSessionStore.open(db)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    try:
        await Session.approve_suspended(store=store, agent=race_agent(log), run_id=run_id, resume_token=token)
    except InvalidResumeToken:
        print("invalid", flush=True)
    except Exception as exc:
        print(f"error {exc!r}", flush=True)
    else:
        print("ok", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "loop":
        asyncio.run(loop(*rest))
    elif mode == "race":
        asyncio.run(race(*rest))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
