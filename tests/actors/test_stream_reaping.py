"""A process reading events dies without a word: the host ends its stream and drops its subscriptions.

Ray keeps an actor's generator running after the process reading it is gone, so the host does it:
a client that stops sending keepalives loses its channel (``_channels.SILENCE_SECONDS``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ray

ROOT = Path(__file__).resolve().parents[2]

_READER = """
import asyncio, sys
from repertory import Runtime

async def main() -> None:
    rt = await Runtime.start(store=sys.argv[2], backend="ray", address=sys.argv[1],
                             agents={"a": "tests.actors.agents:clerk"}, hosts=1, keep_hosts=True)
    h = await rt.session(sys.argv[3])
    async for event in h.events():
        print(event.type, flush=True)

asyncio.run(main())
"""


async def test_a_reader_process_killed_mid_stream_leaves_no_stream_behind(ray_runtime: Any, tmp_path: Path) -> None:
    rt = await ray_runtime({"a": "tests.actors.agents:clerk"})
    h = await rt.create_session(agent="a")
    await h.run("hello")
    [host] = rt.host.hosts
    before = await host.ping.remote()  # this client's own channel (run() results come back on it)
    url = f"sqlite:///{tmp_path / 'ray-0.db'}"  # the store ray_runtime opened: the same hosts
    child = subprocess.Popen(  # noqa: ASYNC220 - returns at once; the output is read in a thread
        [sys.executable, "-c", _READER, ray.get_runtime_context().gcs_address, url, h.id],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        seen = await asyncio.wait_for(asyncio.to_thread(_read_until, child.stdout, "turn.completed"), 60)
        assert seen[0] == "turn.started"
        facts = await host.ping.remote()
        assert (facts["streams"], facts["subscriptions"]) == (before["streams"] + 1, before["subscriptions"] + 1)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 30
    while ((facts := await host.ping.remote())["streams"], facts["subscriptions"]) != (
        before["streams"],
        before["subscriptions"],
    ):
        assert time.monotonic() < deadline, f"the host still serves a dead reader: {facts}"
        await asyncio.sleep(0.2)
    assert (await h.run("still fine")).text.endswith("still fine")


def _read_until(stream: Any, last: str) -> list[str]:
    lines: list[str] = []
    for line in stream:
        lines.append(line.strip())
        if lines[-1] == last:
            return lines
    raise AssertionError(f"the reader stopped early: {lines}")
