"""Child process for ``test_timers.py``: a runtime on a SQLite file whose session sleeps, then waits to be killed.

``python -m tests.runtime.time._sleep_worker DB MS``
    Starts a runtime (wall clock) on DB, creates a session, sends ``nap`` with a timer of MS
    milliseconds, prints ``suspended SESSION_ID`` once the run sleeps, then waits forever on stdin
    (the parent SIGKILLs it before the timer is due).
"""

from __future__ import annotations

import asyncio
import sys

from repertory import Runtime
from tests.runtime.time.helpers import nap_agent


async def main(db: str, ms: int) -> None:
    rt = await Runtime.start(store=f"sqlite:///{db}", agents={"napper": nap_agent(seconds=ms / 1000)})
    handle = await rt.create_session("napper")
    result = await handle.run("nap")
    assert result.status == "suspended", result
    print(f"suspended {handle.id}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
