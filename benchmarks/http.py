"""HTTP benchmark: ``repertory serve`` driven by LangGraph's own client, as agent-chat-ui would.

Run ``python -m benchmarks.http [--quick] [--no-ray] [--out PATH]``. It prints a table and writes
``benchmarks/results/http.json``. Nothing here asserts a speed (DESIGN.md, rule 8).

For each backend (local; Ray with one shared host unless ``--no-ray`` or ``--quick``) a real
``repertory serve`` process is started on a fresh SQLite file (WAL, durability normal) and a free
loopback port, serving ``agents()`` below: a zero-delay scripted model that answers every prompt
with one short reply, so the time is the server's and the runtime's. Through ``langgraph_sdk``:

1. ``threads.create`` then ``runs.wait``, one after another (N rounds after a warm-up): p50/p95;
2. ``threads.create`` then ``runs.stream(stream_mode="values")`` read to its end: p50/p95;
3. C clients at once, each creating a thread and waiting for a run, R times: runs per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._suite import RESULTS_DIR, dist_ms, finish, row, start_report, suite_entry, write_report
from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel

__all__ = ["agents", "main", "measure", "run_suite"]

NAME = "http"
ROOT = Path(__file__).resolve().parent.parent
SIZES = {
    "full": {"rounds": 300, "clients": 50, "per_client": 10},
    "quick": {"rounds": 20, "clients": 5, "per_client": 2},
}
_MESSAGE = {"messages": [{"role": "user", "content": "hello"}]}


def _reply(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": "ok"}


def agents() -> dict[str, Agent]:
    """What the benchmark's server serves (``--agents benchmarks.http:agents``)."""
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
        while True:
            try:
                if (await client.get(f"{url}/info")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"repertory serve did not answer on {url} within {within:.0f} s")
            await asyncio.sleep(0.2)


async def _measure_backend(backend: str, size: dict[str, int], folder: str) -> dict[str, Any]:
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
        "benchmarks.http:agents",
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
                await client.runs.wait(thread["thread_id"], "assistant", input=_MESSAGE)
                return time.perf_counter() - t0

            async def stream_once() -> float:
                t0 = time.perf_counter()
                thread = await client.threads.create()
                async for _ in client.runs.stream(
                    thread["thread_id"], "assistant", input=_MESSAGE, stream_mode="values"
                ):
                    pass
                return time.perf_counter() - t0

            for _ in range(20):
                await wait_once()
            waits = [await wait_once() for _ in range(size["rounds"])]
            streams = [await stream_once() for _ in range(size["rounds"])]

            async def one_client() -> None:
                for _ in range(size["per_client"]):
                    await wait_once()

            t0 = time.perf_counter()
            await asyncio.gather(*(one_client() for _ in range(size["clients"])))
            wall = time.perf_counter() - t0
        return {
            "backend": backend,
            "create_and_wait": dist_ms(waits),
            "create_and_stream_values": dist_ms(streams),
            "concurrent": {
                "clients": size["clients"],
                "runs_each": size["per_client"],
                "runs_per_s": round(size["clients"] * size["per_client"] / wall, 1),
            },
        }
    finally:
        server.terminate()
        try:
            await asyncio.wait_for(server.wait(), 30)
        except TimeoutError:
            server.kill()
            await server.wait()


def measure(quick: bool, ray: bool = True) -> dict[str, Any]:
    """Measure each backend through a real server; return the report with its summary rows."""
    mode = "quick" if quick else "full"
    size = SIZES[mode]
    started = time.perf_counter()
    report = start_report(NAME, mode, store="sqlite (WAL, durability normal)", model="zero-delay scripted", sizes=size)
    backends = ["local"] + (["ray"] if ray and not quick else [])
    summary = []
    with tempfile.TemporaryDirectory(prefix="repertory-http-bench-") as folder:
        for backend in backends:
            print(f"  http ({backend}) ...", flush=True)
            r = asyncio.run(_measure_backend(backend, size, folder))
            report[backend] = r
            wait, stream = r["create_and_wait"], r["create_and_stream_values"]
            summary += [
                row(
                    f"HTTP ({backend}): threads.create + runs.wait, p50",
                    round(wait["p50_ms"], 2),
                    "ms",
                    note=f"p90 {wait['p90_ms']:.1f} ms; n={size['rounds']}",
                ),
                row(
                    f"HTTP ({backend}): threads.create + runs.stream(values) to the end, p50",
                    round(stream["p50_ms"], 2),
                    "ms",
                    note=f"p90 {stream['p90_ms']:.1f} ms",
                ),
                row(
                    f"HTTP ({backend}): runs/s, {size['clients']} clients at once",
                    r["concurrent"]["runs_per_s"],
                    "runs/s",
                    note=f"{size['per_client']} create + wait each",
                ),
            ]
    report["summary"] = summary
    for line in summary:
        print(f"  {line['figure']:<72} {line['value']:>9} {line['unit']:<7} {line['note']}")
    return finish(report, started)


run_suite = suite_entry(NAME, measure)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 rounds, 5 clients, local only (seconds)")
    parser.add_argument("--no-ray", action="store_true", help="measure the local backend only")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{NAME}.json", help="JSON report path")
    args = parser.parse_args(argv)
    report = measure(args.quick, ray=not args.no_ray)
    print(f"wrote {write_report(report, args.out)}")


if __name__ == "__main__":
    main()
