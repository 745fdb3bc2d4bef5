"""The client process: many SSE readers of ``GET /threads/{id}/events``, kept cheap (raw asyncio streams).

``python -m benchmarks.sse_readers.readers URL PER TURNS THREAD_ID... --result PATH`` opens ``PER``
readers per thread from seq 0, prints ``ready`` once every one has its response headers (the
server has subscribed it), and ends when every reader has seen ``TURNS`` ``turn.completed``
events. For each ``text.delta`` event it keeps the receive time (epoch ms) minus the event's
``at``; it writes their distribution, the events counted, when the last event came and its own
CPU seconds from ``ready`` to the end as JSON to ``PATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from benchmarks.harness.stats import dist_ms

__all__ = ["Tally", "main", "read_events"]


class Tally:
    """What every reader received: delta latencies (seconds), events, the last receive time."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.events = 0
        self.last_at = 0.0


async def read_events(url: str, thread_id: str, turns: int, connected: Callable[[], None], tally: Tally) -> None:
    """Follow one thread's event stream until ``turns`` turns have completed."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    try:
        request = (
            f"GET /threads/{thread_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n"
        )
        writer.write(request.encode())
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


async def _follow(url: str, threads: list[str], per: int, turns: int) -> dict[str, object]:
    tally, opened, everyone = Tally(), 0, asyncio.Event()
    total = len(threads) * per

    def connected() -> None:
        nonlocal opened
        opened += 1
        if opened == total:
            everyone.set()

    readers = [asyncio.ensure_future(read_events(url, t, turns, connected, tally)) for t in threads for _ in range(per)]
    waiting = asyncio.ensure_future(everyone.wait())
    await asyncio.wait([waiting, *readers], return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # a reader failed before all were connected
        waiting.cancel()
        await asyncio.gather(*readers)
    print("ready", flush=True)
    cpu = time.process_time()
    await asyncio.gather(*readers)
    return {
        "latency": dist_ms(tally.latencies).model_dump(),
        "delta_events": len(tally.latencies),
        "events": tally.events,
        "last_at": tally.last_at,
        "cpu_s": time.process_time() - cpu,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, follow the threads, write the result."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.sse_readers.readers")
    p.add_argument("url")
    p.add_argument("per", type=int)
    p.add_argument("turns", type=int)
    p.add_argument("threads", nargs="+")
    p.add_argument("--result", required=True)
    args = p.parse_args(argv)
    result = asyncio.run(_follow(args.url, args.threads, args.per, args.turns))
    with open(args.result, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
