"""The SSE readers workload: one ``repertory serve``, its sessions' turns, and the readers' process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.children import python_m
from benchmarks.harness.machine import ROOT
from benchmarks.harness.procfs import cpu_seconds
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import Dist
from benchmarks.sse_readers import NAME, SseReadersReport
from repertory import Agent, ModelMessage
from repertory.testing import ScriptedModel

__all__ = ["SIZES", "agents", "measure"]

CHUNKS = 50
TEXT = "".join(f"token{i:03d}" for i in range(CHUNKS))
# sessions, readers per session, turns each, the assistant (its pace) per mode.
SIZES = {"full": (100, 10, 3, "streamer"), "quick": (5, 4, 1, "streamer-quick")}
PACE_S = {"streamer": 0.06, "streamer-quick": 0.02}
STREAM_MARGIN = 16  # open streams beyond the readers (a run's own, a look from elsewhere)


def agents() -> dict[str, Agent]:
    """What the server serves (``--agents benchmarks.sse_readers.serve:agents``): one reply, 50 deltas."""

    def streamer(pace: float) -> Agent:
        def reply(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
            return {"text": TEXT, "chunks": CHUNKS, "chunk_delay": pace, "usage": {}}

        return Agent(name="streamer", model=ScriptedModel(reply))

    return {name: streamer(pace) for name, pace in PACE_S.items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _serving(client: Any, within: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + within
    while True:  # polling: the server is another process, nothing here to await
        try:
            if (await client.get("/info")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"repertory serve did not answer within {within:.0f} s")
        await asyncio.sleep(0.2)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _measure(mode: str, folder: str) -> dict[str, Any]:
    import httpx

    sessions, per, turns, assistant = SIZES[mode]
    port, streams = _free_port(), sessions * per + STREAM_MARGIN
    url = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).parent / "repertory"), "serve", "--store", f"sqlite:///{folder}/sse.db",
               "--agents", "benchmarks.sse_readers.serve:agents", "--port", str(port),
               "--max-streams", str(streams), "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = await asyncio.create_subprocess_exec(*command, cwd=ROOT, env=env)
    readers: asyncio.subprocess.Process | None = None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=sessions)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
            await _serving(client)
            created = [(await client.post("/threads", json={"metadata": {"assistant_id": assistant}})).json()
                       for _ in range(sessions)]  # fmt: skip
            threads = [t["thread_id"] for t in created]
            result = Path(folder) / "readers.json"
            readers = await asyncio.create_subprocess_exec(
                *python_m("benchmarks.sse_readers.readers", url, str(per), str(turns), *threads,
                          "--result", str(result)), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE)  # fmt: skip
            assert readers.stdout is not None
            line = await asyncio.wait_for(readers.stdout.readline(), 120)
            if line != b"ready\n":
                raise RuntimeError(f"the readers' process did not get ready: {line!r}")
            print(f"  {sessions * per:,} readers connected; {sessions} sessions x {turns} turns ...", flush=True)
            body = {"assistant_id": assistant, "input": {"messages": [{"role": "user", "content": "go"}]}}

            async def session(thread_id: str) -> None:
                for _ in range(turns):
                    (await client.post(f"/threads/{thread_id}/runs/wait", json=body)).raise_for_status()

            started, cpu = time.time(), cpu_seconds(server.pid)
            await asyncio.gather(*(session(t) for t in threads))
            if await asyncio.wait_for(readers.wait(), 300) != 0:
                raise RuntimeError("the readers' process failed (its stderr is above)")
            server_cpu = cpu_seconds(server.pid) - cpu
        figures = json.loads(result.read_text())
    finally:
        if readers is not None:
            await _stop(readers)
        await _stop(server)
    window = figures["last_at"] - started
    return {"sessions": sessions, "readers_per_session": per, "turns_each": turns, "deltas_per_reply": CHUNKS,
            "chunk_delay_ms": PACE_S[assistant] * 1000, "max_streams": streams,
            "latency": Dist.model_validate(figures["latency"]), "delta_events": figures["delta_events"],
            "events": figures["events"], "window_s": round(window, 3),
            "events_per_s": round(figures["events"] / window, 1), "server_cpu_s": round(server_cpu, 3),
            "client_cpu_s": round(figures["cpu_s"], 3)}  # fmt: skip


def measure(quick: bool) -> SseReadersReport:
    """One server, its sessions' turns and the readers' process; the report with its summary."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    with tempfile.TemporaryDirectory(prefix="repertory-sse-bench-") as folder:
        figures = asyncio.run(_measure(mode, folder))
    report = SseReadersReport(**clock.frame(), store="sqlite (WAL, durability normal)", **figures)
    return finish(report, clock)
