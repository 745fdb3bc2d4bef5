"""What the A2A client tests share: the ``a2a-sdk`` peer in its own process, and what it logged."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ROOT", "Peer", "peer_process", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], bool], within: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` (it reads a file or a port another process writes: nothing to await)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within} s")
        time.sleep(0.02)


class Peer:
    """The peer agent (``tests/a2a/peer.py``) serving on a loopback port, and its log of tasks and messages."""

    def __init__(self, log: Path) -> None:
        self.log = log
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/agents/peer"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.a2a.peer", str(self.port), str(log)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_until(self._accepts, what=f"the A2A peer on port {self.port}")

    def _accepts(self) -> bool:
        if self.proc.poll() is not None:
            assert self.proc.stderr is not None
            raise AssertionError(f"the A2A peer exited: {self.proc.stderr.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def lines(self, kind: str) -> list[list[str]]:
        """The logged lines of ``kind`` (``task`` or ``message``), split into words, oldest first."""
        text = self.log.read_text() if self.log.exists() else ""
        return [line.split(" ") for line in text.splitlines() if line.startswith(kind + " ")]

    def stop(self) -> None:
        """SIGKILL the peer and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate()


@contextmanager
def peer_process(log: Path) -> Iterator[Peer]:
    """A running peer for the length of the block."""
    peer = Peer(log)
    try:
        yield peer
    finally:
        peer.stop()
