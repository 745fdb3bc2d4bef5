"""The HTTP workload: a real ``repertory serve`` per backend, driven through ``langgraph_sdk``."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.machine import ROOT
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import dist_ms
from benchmarks.http.report import Backend, Concurrent, HttpReport, Sizes
from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel

__all__ = ["SIZES", "agents", "measure"]

SIZES = {
    "full": Sizes(rounds=300, clients=50, per_client=10),
    "quick": Sizes(rounds=20, clients=5, per_client=2),
}
MESSAGE: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}


def _reply(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": "ok"}


def agents() -> dict[str, Agent]:
    """What the benchmark's server serves (``--agents benchmarks.http.server:agents``)."""
    return {"assistant": Agent(name="assistant", model=ScriptedModel(_reply))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _serving(url: str, within: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + within
    async with httpx.AsyncClient() as client:
        while True:  # polling: the server is another process, nothing here to await
            try:
                if (await client.get(f"{url}/info")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"repertory serve did not answer on {url} within {within:.0f} s")
            await asyncio.sleep(0.2)


async def _measure_backend(backend: str, size: Sizes, folder: str) -> Backend:
    from langgraph_sdk import get_client

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{folder}/{backend}.db"
    command = [
        str(Path(sys.executable).parent / "repertory"),
        "serve",
        "--store",
        store,
        "--agents",
        "benchmarks.http.server:agents",
        "--backend",
        backend,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    server = await asyncio.create_subprocess_exec(*command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        await _serving(url)
        async with get_client(url=url, api_key=None) as client:

            async def wait_once() -> float:
                t0 = time.perf_counter()
                thread = await client.threads.create()
                await client.runs.wait(thread["thread_id"], "assistant", input=MESSAGE)
                return time.perf_counter() - t0

            async def stream_once() -> float:
                t0 = time.perf_counter()
                thread = await client.threads.create()
                async for _ in client.runs.stream(
                    thread["thread_id"], "assistant", input=MESSAGE, stream_mode="values"
                ):
                    pass
                return time.perf_counter() - t0

            for _ in range(20):
                await wait_once()
            waits = [await wait_once() for _ in range(size.rounds)]
            streams = [await stream_once() for _ in range(size.rounds)]

            async def one_client() -> None:
                for _ in range(size.per_client):
                    await wait_once()

            t0 = time.perf_counter()
            await asyncio.gather(*(one_client() for _ in range(size.clients)))
            wall = time.perf_counter() - t0
        return Backend(
            backend=backend,
            create_and_wait=dist_ms(waits),
            create_and_stream_values=dist_ms(streams),
            concurrent=Concurrent(
                clients=size.clients,
                runs_each=size.per_client,
                runs_per_s=round(size.clients * size.per_client / wall, 1),
            ),
        )
    finally:
        server.terminate()
        try:
            await asyncio.wait_for(server.wait(), 30)
        except TimeoutError:
            server.kill()
            await server.wait()


def measure(quick: bool, ray: bool = True) -> HttpReport:
    """Each backend through a real server (Ray unless quick or ``ray=False``); the report with its summary."""
    mode = mode_of(quick)
    size = SIZES[mode]
    clock = Clock.start("http", mode)
    measured: dict[str, Backend] = {}
    with tempfile.TemporaryDirectory(prefix="repertory-http-bench-") as folder:
        for backend in ["local"] + (["ray"] if ray and not quick else []):
            print(f"  http ({backend}) ...", flush=True)
            measured[backend] = asyncio.run(_measure_backend(backend, size, folder))
    report = HttpReport(
        **clock.frame(),
        store="sqlite (WAL, durability normal)",
        model="zero-delay scripted",
        sizes=size,
        local=measured["local"],
        ray=measured.get("ray"),
    )
    return finish(report, clock)
