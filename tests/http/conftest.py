"""A repertory HTTP server on loopback, on its own thread and event loop, for the real ``langgraph-sdk``.

The server thread owns the runtime (a runtime lives on one loop); tests talk to it only over
HTTP, from their own loop, as a client process would. One server per store kind serves the whole
session: every test makes its own threads, and the scripted model answers by the prompt.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from repertory import Principal, Runtime
from repertory.http import create_app
from tests.http.agents import make_agents

ALICE = "alice-key-0123456789"
BOB = "bob-key-0123456789"
ADMIN = "admin-key-0123456789"
KEYS = {ALICE: Principal.user("alice"), BOB: Principal.user("bob")}
ADMINS = {ADMIN: Principal.user("root")}
MAX_STREAMS = 6


class ServerThread:
    """uvicorn serving ``create_app(runtime)`` on 127.0.0.1, on a thread with its own event loop."""

    def __init__(self, store: str, runtime_options: dict[str, Any] | None = None, **app_options: Any) -> None:
        self.store = store
        self.runtime_options = runtime_options or {}
        self.app_options = app_options
        self.url = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread = threading.Thread(target=self._run, name="repertory-http-test-server", daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the test server did not start within 60 s")
        if self._error is not None:
            raise self._error
        return self

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the server's event loop (a test moving the server's ``ManualClock``)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(setattr, self._server, "should_exit", True)
        self._thread.join(60)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        runtime = await Runtime.start(store=self.store, agents=make_agents(), **self.runtime_options)
        try:
            app = create_app(runtime, **self.app_options)
            # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
            # and without it every response waits ~40 ms for a delayed ACK.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.bind(("127.0.0.1", 0))
            sock.listen(256)  # clients queue here until uvicorn accepts: no wait for "started"
            self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            self._server = uvicorn.Server(
                uvicorn.Config(app, log_level="warning", ws="none", lifespan="on", timeout_graceful_shutdown=5)
            )
            self._ready.set()
            await self._server.serve(sockets=[sock])
        finally:
            await runtime.close()


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The main server: SQLite store, two owners' keys (alice, bob) and an admin's (root), a small stream limit."""
    path: Path = tmp_path_factory.mktemp("http") / "runs.db"
    server = ServerThread(
        f"sqlite:///{path}",
        api_keys=KEYS,
        admin_keys=ADMINS,
        max_streams_per_key=MAX_STREAMS,
        max_body_bytes=64 * 1024,
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def memory_server() -> Iterator[ServerThread]:
    """A keyless server on the memory store."""
    server = ServerThread("memory://").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ray_server(ray_instance: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A keyless server whose runtime runs on Ray (one shared host process), on SQLite."""
    path: Path = tmp_path_factory.mktemp("http-ray") / "runs.db"
    server = ServerThread(f"sqlite:///{path}", runtime_options={"backend": "ray", "hosts": 1, "keep_hosts": False})
    yield server.start()
    server.stop()


@pytest.fixture
async def ray_client(ray_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    """A ``langgraph-sdk`` client of the Ray-backed server."""
    async with get_client(url=ray_server.url, api_key=None) as c:
        yield c


@pytest.fixture
async def client(sqlite_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    """alice's ``langgraph-sdk`` client."""
    async with get_client(url=sqlite_server.url, api_key=ALICE) as c:
        yield c


@pytest.fixture
async def bob(sqlite_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    """bob's ``langgraph-sdk`` client (another owner than alice)."""
    async with get_client(url=sqlite_server.url, api_key=BOB) as c:
        yield c


@pytest.fixture
async def admin(sqlite_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    """The admin key's ``langgraph-sdk`` client (sees every owner's threads)."""
    async with get_client(url=sqlite_server.url, api_key=ADMIN) as c:
        yield c


async def sse_events(url: str, path: str, key: str | None, until: str, **headers: str) -> list[tuple[str, str, Any]]:
    """``(event, id, data)`` of an SSE route until an event named ``until`` (then the stream is dropped)."""
    out: list[tuple[str, str, Any]] = []
    sent = {**({"x-api-key": key} if key else {}), **headers}
    async with httpx.AsyncClient(base_url=url, timeout=30) as raw, raw.stream("GET", path, headers=sent) as response:
        response.raise_for_status()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue  # a heartbeat comment
            if line:
                key_, _, value = line.partition(": ")
                fields[key_] = value
                continue
            if "data" in fields:
                out.append((fields.get("event", ""), fields.get("id", ""), json.loads(fields["data"])))
                if fields.get("event") == until:
                    break
            fields = {}
    return out


@pytest.fixture
async def memory_client(memory_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    """A ``langgraph-sdk`` client of the keyless memory-store server."""
    async with get_client(url=memory_server.url, api_key=None) as c:
        yield c


def human(text: str) -> dict[str, Any]:
    """A run input holding one human message, as agent-chat-ui sends it (content blocks)."""
    return {"messages": [{"type": "human", "content": [{"type": "text", "text": text}]}]}


def obj(answer: object) -> dict[str, Any]:
    """A JSON object the server answered, typed as the tests read it (and checked to be one).

    langgraph-sdk types its answers for any graph: ``runs.wait`` as ``list | dict``, a thread's
    ``values`` and ``metadata`` as ``dict | None``, ``threads.copy`` as ``None``; this server
    answers objects there.
    """
    assert isinstance(answer, dict), answer
    return answer


async def close(stream: AsyncIterator[Any]) -> None:
    """Close a stream the SDK returned, which drops its connection.

    The SDK types its streams as iterators; they are async generators, and closing one is what a
    client that goes away does.
    """
    assert isinstance(stream, AsyncGenerator), stream
    await stream.aclose()


async def refused(awaitable: Awaitable[Any]) -> tuple[int, str]:
    """The status and ``detail`` of a request the server refuses (whichever error class the SDK raises).

    ``runs.wait`` and ``runs.join`` raise httpx's own ``HTTPStatusError``; other calls raise the
    SDK's typed subclasses of it.
    """
    try:
        await awaitable
    except httpx.HTTPStatusError as exc:
        try:
            detail = str(exc.response.json().get("detail", ""))
        except ValueError:
            detail = exc.response.text
        return exc.response.status_code, detail
    raise AssertionError("the request succeeded")
