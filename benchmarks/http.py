"""HTTP: ``repertory serve`` driven by LangGraph's own client, as agent-chat-ui would.

For each backend (local; Ray with one shared host unless ``--no-ray`` or ``--quick``) a real
``repertory serve`` process on a fresh SQLite file (WAL, durability normal) and a loopback port serves
``benchmarks.harness.echo``: a zero-delay scripted model that answers every prompt with one short reply,
so the time is the server's and the runtime's. Through ``langgraph_sdk``:

1. ``threads.create`` then ``runs.wait``, one after another (N rounds after a warm-up);
2. ``threads.create`` then ``runs.stream(stream_mode="values")`` read to its end;
3. C clients at once, each creating a thread and waiting for a run, R times: runs per second.

``python -m benchmarks.http [--quick] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.echo import AGENTS
from benchmarks.harness.echo import NAME as AGENT
from benchmarks.harness.figures import Figures
from benchmarks.harness.served import repertory_serve

# rounds of each sequential figure; clients at once and runs each
SIZES = {"full": (300, 50, 10), "quick": (20, 5, 2)}
MESSAGE: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}


async def _backend(figures: Figures, backend: str, size: tuple[int, int, int], folder: str) -> None:
    from langgraph_sdk import get_client

    rounds, clients, per_client = size
    async with (
        repertory_serve(f"sqlite:///{folder}/{backend}.db", AGENTS, "--backend", backend) as url,
        get_client(url=url, api_key=None) as client,
    ):

        async def wait_once() -> float:
            t0 = time.perf_counter()
            thread = await client.threads.create()
            await client.runs.wait(thread["thread_id"], AGENT, input=MESSAGE)
            return time.perf_counter() - t0

        async def stream_once() -> float:
            t0 = time.perf_counter()
            thread = await client.threads.create()
            async for _ in client.runs.stream(thread["thread_id"], AGENT, input=MESSAGE, stream_mode="values"):
                pass
            return time.perf_counter() - t0

        async def one_client() -> None:
            for _ in range(per_client):
                await wait_once()

        for _ in range(20):
            await wait_once()
        waits = [await wait_once() for _ in range(rounds)]
        streams = [await stream_once() for _ in range(rounds)]
        t0 = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - t0
    figures.time(f"HTTP ({backend}): threads.create + runs.wait", waits)
    figures.time(f"HTTP ({backend}): threads.create + runs.stream(values) to the end", streams)
    figures.value(f"HTTP ({backend}): runs/s, {clients} clients at once", clients * per_client / wall, "runs/s",
                  note=f"{per_client} create + wait each")  # fmt: skip


async def scenario(figures: Figures, options: Options) -> None:
    """Each backend through a real server (Ray unless quick or ``--no-ray``)."""
    figures.fact("store", "sqlite (WAL, durability normal)")
    figures.fact("model", "zero-delay scripted")
    with tempfile.TemporaryDirectory(prefix="repertory-http-bench-") as folder:
        for backend in ["local"] + (["ray"] if not (options.args.no_ray or options.quick) else []):
            print(f"  http ({backend}) ...", flush=True)
            await _backend(figures, backend, SIZES[options.mode], folder)


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-ray", action="store_true", help="measure the local backend only")


if __name__ == "__main__":
    main("http", __doc__, scenario=scenario, add_args=_args)
