"""What the MCP tests share: the test servers as ``MCPServer``s, their call logs, an HTTP server process.

The servers (``tests/mcp/servers``) are real MCP servers written with the ``mcp`` SDK, started as
child processes (stdio) or as a separate process serving streamable HTTP on loopback. Each logs
every call it receives, so a test counts what reached the server, whatever process died.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from repertory import MessageHistory, ModelMessage, ToolResultPart
from repertory.mcp import MCPServer
from repertory.storage import SessionStore
from tests.mcp.servers import _log

__all__ = [
    "ROOT",
    "HttpServer",
    "calls",
    "died",
    "http_server",
    "paged_server",
    "process_alive",
    "result_parts",
    "run_messages",
    "tools_server",
    "wait_until",
]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def tools_server(log: str | Path | None = None, *extra: str, **options: Any) -> MCPServer:
    """The SDK ``MCPServer`` test server over stdio (``tests/mcp/servers/tools_server.py``)."""
    args = ["-m", "tests.mcp.servers.tools_server", *extra]
    if log is not None:
        args += ["--log", str(log)]
    options.setdefault("name", "tools")
    return MCPServer.stdio(PYTHON, args, cwd=str(ROOT), **options)


def paged_server(log: str | Path | None = None, *, tools: int = 5, page: int = 2, **options: Any) -> MCPServer:
    """The 2025-era low-level test server over stdio: ``tools`` tools, ``page`` to a page."""
    args = ["-m", "tests.mcp.servers.paged_server", "--tools", str(tools), "--page", str(page)]
    if log is not None:
        args += ["--log", str(log)]
    options.setdefault("name", "paged")
    return MCPServer.stdio(PYTHON, args, cwd=str(ROOT), **options)


def calls(log: Path, tool: str | None = None, event: str = "call") -> list[dict[str, Any]]:
    """The events of ``event`` kind the server logged (for ``tool`` only, if given), oldest first."""
    return [e for e in _log.read(log) if e["event"] == event and (tool is None or e.get("tool") == tool)]


def wait_until(predicate: Any, within: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` (it reads a file or a port another process writes: nothing to await)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within} s")
        time.sleep(0.02)


async def died(pid: int, within: float = 30.0) -> None:
    """Wait, with the event loop running, until a killed process is gone.

    The loop keeps turning meanwhile, so a connection to that process sees its end (the stdout
    EOF) as it would in a running program, instead of after the test's next call is already out.
    """
    deadline = time.monotonic() + within
    for _ in range(1_000_000):  # polling another process's state: there is nothing to await
        if not process_alive(pid):
            await asyncio.sleep(0.05)  # and the loop reads the end of its stream
            return
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    raise AssertionError(f"process {pid} still runs after {within} s")


def process_alive(pid: int) -> bool:
    """Whether a process exists (and is not a zombie we could still see)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def run_messages(store: SessionStore, run_id: str) -> list[ModelMessage]:
    """The stored history of a run, oldest message first."""
    run = await store.load_run(run_id)
    assert run is not None and run.history_revision_id is not None
    history = await store.load_history(run.history_revision_id)
    assert isinstance(history, MessageHistory)
    return history.messages


def result_parts(messages: list[ModelMessage]) -> list[ToolResultPart]:
    """Every tool result in a conversation, in order."""
    return [p for m in messages for p in m.tool_results]


class HttpServer:
    """The test server serving streamable HTTP on a loopback port, in its own process."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start (or restart) the server and wait until it accepts connections."""
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "tests.mcp.servers.tools_server", "--http", str(self.port), "--log", str(self.log)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._accepts, what=f"the MCP HTTP server on port {self.port}")

    def _accepts(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the MCP HTTP server exited with {self.proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def server(self, **options: Any) -> MCPServer:
        """An ``MCPServer`` for this endpoint."""
        options.setdefault("name", "tools")
        return MCPServer.http(self.url, **options)


@contextmanager
def http_server(log: Path) -> Iterator[HttpServer]:
    """A running HTTP test server for the length of the block."""
    server = HttpServer(log)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
