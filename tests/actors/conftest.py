"""Ray-backed runtimes on the suite's one local Ray (``ray_instance``); each test gets its own hosts.

Every runtime a test starts uses its own SQLite file, so its hosts live in their own namespace, and
``keep_hosts=False`` kills them at close: nothing outlives a test but the shared Ray instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, Runtime


@pytest.fixture
async def ray_runtime(ray_instance: None, tmp_path: Path) -> AsyncIterator[Any]:
    """A factory of Ray-backed runtimes on a fresh SQLite file; all are closed (hosts killed) after the test."""
    started: list[Runtime] = []

    async def start(agents: dict[str, Agent], **options: Any) -> Runtime:
        path = tmp_path / f"ray-{len(started)}.db"
        options.setdefault("hosts", 1)
        rt = await Runtime.start(store=f"sqlite:///{path}", backend="ray", agents=agents, keep_hosts=False, **options)
        started.append(rt)
        return rt

    yield start
    for rt in started:
        await rt.close()
