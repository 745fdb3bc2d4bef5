"""SSE readers: 1,000 readers of ``GET /threads/{id}/events`` on one server following 100 streaming sessions.

Target: delivery latency p99 at most 250 ms. One ``repertory serve`` (local backend, a fresh SQLite file,
WAL, durability normal) serves ``benchmarks.sse_readers:agents``: a scripted model that streams each reply
as 50 text deltas 60 ms apart (a 3 s reply), with durable deltas on (the default ``DeltaWindow``), so the
stream carries the stored, coalesced delta events. The server runs with ``--max-streams`` raised to the
readers' count plus a margin: its default per-key bound exists to stop one tenant holding a server's
streams, and here one key holds them all on purpose.

A separate client process (``follow``: raw asyncio streams, so the client costs little beside the
server) opens 10 readers per session, all from seq 0, and says when all have their response headers.
Then every session runs 3 turns back to back (``POST /threads/{id}/runs/wait``). Each reader ends after
the last turn's ``turn.completed``. For every delta event a reader receives: delivery latency = receive
time (epoch) minus the event's ``at`` (stamped when the server emitted it, on the same machine's clock;
the window's gathering before it, at most 50 ms, is not in it). The server's CPU seconds over the window
from the first turn to the last reader's end, and events delivered per second.
``--quick``: 5 sessions x 4 readers, one turn of 50 deltas 20 ms apart.

``python -m benchmarks.sse_readers [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev extra yet

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target, percentile
from benchmarks.harness.served import ENV, repertory_serve
from benchmarks.harness.versions import ROOT
from repertory import Agent, ModelMessage
from repertory.testing import ScriptedModel

CHUNKS = 50
TEXT = "".join(f"token{i:03d}" for i in range(CHUNKS))
# sessions, readers per session, turns each, the assistant (its pace) per mode.
SIZES = {"full": (100, 10, 3, "streamer"), "quick": (5, 4, 1, "streamer-quick")}
PACE_S = {"streamer": 0.06, "streamer-quick": 0.02}
STREAM_MARGIN = 16  # open streams beyond the readers (a run's own, a look from elsewhere)


def agents() -> dict[str, Agent]:
    """What the server serves (``--agents benchmarks.sse_readers:agents``): one reply, 50 deltas."""

    def streamer(pace: float) -> Agent:
        def reply(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
            return {"text": TEXT, "chunks": CHUNKS, "chunk_delay": pace, "usage": {}}

        return Agent(name="streamer", model=ScriptedModel(reply))

    return {name: streamer(pace) for name, pace in PACE_S.items()}


class Tally:
    """What every reader received: delta latencies (seconds), events, the last receive time."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.events = 0
        self.last_at = 0.0


async def _read(url: str, thread_id: str, turns: int, connected: Callable[[], None], tally: Tally) -> None:
    """Follow one thread's event stream until ``turns`` turns have completed."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET /threads/{thread_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())  # fmt: skip
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
            raise RuntimeError(f"the event stream of {thread_id} answered {head[:200]!r}")
        connected()
        buffer, completed = b"", 0
        while completed < turns:
            size = int((await reader.readline()).split(b";")[0], 16)  # HTTP/1.1 chunked body
            if size == 0:
                raise RuntimeError(f"the server ended the event stream of {thread_id}")
            buffer += (await reader.readexactly(size + 2))[:-2]
            now = time.time()
            *messages, buffer = buffer.split(b"\n\n")
            for message in messages:
                if message.startswith(b":"):  # a heartbeat comment
                    continue
                tally.events += 1
                tally.last_at = now
                if message.startswith(b"event: text.delta\n"):
                    data = message.split(b"\ndata: ", 1)[1].split(b"\n", 1)[0]
                    tally.latencies.append(now - json.loads(data)["at"] / 1000)
                elif message.startswith(b"event: turn.completed\n"):
                    completed += 1
    finally:
        writer.close()


async def _follow(url: str, per: int, turns: int, threads: list[str]) -> dict[str, Any]:
    tally, opened, everyone = Tally(), 0, asyncio.Event()

    def connected() -> None:
        nonlocal opened
        opened += 1
        if opened == len(threads) * per:
            everyone.set()

    readers = [asyncio.ensure_future(_read(url, t, turns, connected, tally)) for t in threads for _ in range(per)]
    waiting = asyncio.ensure_future(everyone.wait())
    await asyncio.wait([waiting, *readers], return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # a reader failed before all were connected
        waiting.cancel()
        await asyncio.gather(*readers)
    print("ready", flush=True)
    cpu = time.process_time()
    await asyncio.gather(*readers)
    return {"latencies": tally.latencies, "events": tally.events, "last_at": tally.last_at,
            "cpu_s": time.process_time() - cpu}  # fmt: skip


def follow(argv: list[str]) -> None:
    """The readers' process: ``URL PER TURNS RESULT THREAD_ID...``; prints ``ready``, writes JSON to RESULT."""
    url, per, turns, result, *threads = argv
    Path(result).write_text(json.dumps(asyncio.run(_follow(url, int(per), int(turns), threads))))


async def scenario(figures: Figures, options: Options) -> None:
    """One server, its sessions' turns and the readers' process."""
    import httpx

    sessions, per, turns, assistant = SIZES[options.mode]
    streams = sessions * per + STREAM_MARGIN
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=sessions)
    with tempfile.TemporaryDirectory(prefix="repertory-sse-bench-") as folder:
        async with (
            repertory_serve(f"sqlite:///{folder}/sse.db", "benchmarks.sse_readers:agents",
                            "--max-streams", str(streams)) as url,
            httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client,
        ):  # fmt: skip
            [server] = [p for p in psutil.Process().children() if "serve" in p.cmdline()]
            created = [(await client.post("/threads", json={"metadata": {"assistant_id": assistant}})).json()
                       for _ in range(sessions)]  # fmt: skip
            threads = [t["thread_id"] for t in created]
            result = Path(folder) / "readers.json"
            code = "import sys; from benchmarks.sse_readers import follow; follow(sys.argv[1:])"
            readers = await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, url, str(per), str(turns), str(result), *threads,
                cwd=ROOT, env=ENV, stdout=asyncio.subprocess.PIPE)  # fmt: skip
            try:
                assert readers.stdout is not None
                line = await asyncio.wait_for(readers.stdout.readline(), 120)
                if line != b"ready\n":
                    raise RuntimeError(f"the readers' process did not get ready: {line!r}")
                print(f"  {sessions * per:,} readers connected; {sessions} sessions x {turns} turns ...", flush=True)
                body = {"assistant_id": assistant, "input": {"messages": [{"role": "user", "content": "go"}]}}

                async def session(thread_id: str) -> None:
                    for _ in range(turns):
                        (await client.post(f"/threads/{thread_id}/runs/wait", json=body)).raise_for_status()

                started, cpu = time.time(), sum(server.cpu_times()[:2])
                await asyncio.gather(*(session(t) for t in threads))
                if await asyncio.wait_for(readers.wait(), 300) != 0:
                    raise RuntimeError("the readers' process failed (its stderr is above)")
                server_cpu = sum(server.cpu_times()[:2]) - cpu
            finally:
                if readers.returncode is None:
                    readers.terminate()
                    await readers.wait()
        got = json.loads(result.read_text())
    window, lat, readers_n = got["last_at"] - started, sorted(got["latencies"]), sessions * per
    figures.fact("store", "sqlite (WAL, durability normal)")
    figures.fact("workload", f"{sessions} sessions x {per} readers, {turns} turns each, {CHUNKS} deltas a reply "
                             f"{PACE_S[assistant] * 1000:g} ms apart; --max-streams {streams}")  # fmt: skip
    figures.time(f"SSE delivery latency, {readers_n:,} readers of {sessions} streaming sessions", lat,
                 note="receive time - event at")  # fmt: skip
    figures.time("SSE delivery latency p99", percentile(lat, 99), target=Target(0.25))
    figures.time("SSE delivery latency max", lat[-1])
    figures.count("delta events received", len(lat))
    figures.count("events received", got["events"])
    figures.time("window: first turn to the last event", window)
    figures.value(f"SSE events delivered/s, {readers_n:,} readers", got["events"] / window, "events/s")
    figures.time("server CPU over the window", server_cpu)
    figures.value("server cores busy over the window", server_cpu / window, "cores")
    figures.time("readers' process CPU", got["cpu_s"])


if __name__ == "__main__":
    main("sse_readers", __doc__, scenario=scenario)
