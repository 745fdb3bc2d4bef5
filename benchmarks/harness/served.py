"""``repertory serve`` in a process of its own, for a benchmark that measures a face through a real server.

The server is started as a user starts it (``python -m repertory serve``, keyless, loopback, an
OS-chosen port), with the benchmarks folder on its path so ``--agents`` can name a benchmark's module.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchmarks.harness.versions import ROOT

__all__ = ["ENV", "repertory_serve"]

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
"""The environment of a child that imports ``benchmarks`` (the repository root on its path)."""


@asynccontextmanager
async def repertory_serve(store: str, agents: str, *extra: str) -> AsyncIterator[str]:
    """``repertory serve --store store --agents agents *extra``; yields its URL, read from its start-up line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "repertory", "serve", "--port", "0", "--agents", agents, "--store", store,
        "--log-level", "warning", *extra,
        cwd=ROOT, env=ENV, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 120)).decode()
            if not line:
                raise RuntimeError(f"repertory serve exited with {await proc.wait()} before it listened")
            if "listening on " in line:
                break
        drain = asyncio.create_task(_drain(proc.stderr))  # a full pipe would stall the server
        yield line.split("listening on ")[1].split()[0]
    finally:
        proc.terminate()
        await proc.wait()
        if drain is not None:
            await drain


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
