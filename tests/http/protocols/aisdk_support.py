"""What the AI SDK tests share: the node project (``js/``, installed from its lockfile) and a served runtime.

The node project pins ``ai``, ``@ai-sdk/react``, ``react``, ``react-dom`` and ``esbuild`` in a
committed ``package-lock.json``; ``npm ci`` installs it when ``node_modules`` is missing or older
than the lock. A machine without node skips the node tests, saying why.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import Runtime
from repertory.http import create_app
from tests.http.conftest import ALICE, BOB, KEYS
from tests.http.protocols.aisdk_agents import make_agents
from tests.http.ui.conftest import UiServer, serving

__all__ = ["ALICE", "BOB", "JS", "node", "served", "stored_reply"]

JS = Path(__file__).parent / "js"
_INSTALLED = JS / "node_modules" / ".package-lock.json"


def node() -> str:
    """The node binary, after making sure the project's packages are installed from the lockfile."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed: the AI SDK client tests need node and npm (.ci/run installs them)")
    lock = JS / "package-lock.json"
    if not (_INSTALLED.exists() and _INSTALLED.stat().st_mtime >= lock.stat().st_mtime):
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("node is installed but npm is not: install npm (apt-get install npm) to fetch the clients")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return found


@contextlib.asynccontextmanager
async def served(store: str, **app_options: object) -> AsyncIterator[UiServer]:
    """``create_app`` over a runtime of the AI SDK test agents, with alice's and bob's keys, on loopback."""
    runtime = await Runtime.start(store=store, agents=make_agents())
    async with serving(create_app(runtime, KEYS, **app_options), runtime) as server:  # type: ignore[arg-type]
        yield server


async def stored_reply(runtime: Runtime, chat_id: str) -> str:
    """The text of the chat's last assistant message, as the store holds it."""
    thread = await runtime.store.load_thread(chat_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await runtime.store.load_history(thread.history_revision_id)
    assert history is not None
    return next(m.text for m in reversed(history.messages) if m.role == "assistant" and m.text)
