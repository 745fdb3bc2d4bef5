"""One local Ray instance for the whole module set (small resources); each test gets its own hosts.

Every runtime a test starts uses its own SQLite file, so its hosts live in their own namespace, and
``keep_hosts=False`` kills them at close: nothing outlives a test but the shared Ray instance, which
this fixture stops (and only it: Ray is never stopped machine-wide).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from repertory import Agent, Runtime


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[None]:
    """A local Ray for the tests that need it, started once."""
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


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
