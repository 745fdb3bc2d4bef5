"""A runtime on a SQLite file holding the stored world of ``world.py``, for every eval test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from repertory import Runtime

from .world import World, build_world, make_agents


@dataclass(frozen=True)
class Stored:
    """The runtime, the ids of its stored sessions, and the folder the tools log their invocations in."""

    rt: Runtime
    world: World
    folder: Path


@pytest.fixture
async def stored(tmp_path: Path) -> AsyncIterator[Stored]:
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'world.db'}", agents=make_agents(tmp_path)) as rt:
        yield Stored(rt, await build_world(rt), tmp_path)
