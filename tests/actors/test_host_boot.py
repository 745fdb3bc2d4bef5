"""A session host whose store cannot be opened when it (re)starts keeps trying, and serves once it can.

A Ray host boots on its own: nothing awaits its boot but its calls. A boot that failed once on the
store (a restart after a node loss meeting a PostgreSQL that is restarting, or a SQLite write lock
held past the busy timeout) used to fail every call of that process for good, and the open turns
it was to re-drive stayed open. Here the store's folder does not exist yet, a real ``StoreError``
at open, until the test makes it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import ray

from repertory import StoreError
from repertory.actors.host import host_actor_class


async def test_a_host_that_could_not_open_its_store_serves_once_the_store_is_there(
    ray_instance: None, tmp_path: Path
) -> None:
    folder = tmp_path / "not-yet"
    host: Any = (
        host_actor_class()
        .options(num_cpus=0, max_restarts=0)
        .remote(f"sqlite:///{folder}/store.db", {}, index=0, hosts=1, idle_timeout=60.0)
    )
    try:
        with pytest.raises(StoreError, match="does not exist"):  # a call hears why the host cannot serve
            await host.ping.remote()
        folder.mkdir()
        deadline = time.monotonic() + 60
        while True:
            try:
                facts = await host.ping.remote()
                break
            except StoreError:
                # The next attempt comes after a pause the host chooses; nothing here to await.
                assert time.monotonic() < deadline, "the host never opened its store"
                await asyncio.sleep(0.1)
        assert facts["resident"] == 0 and facts["index"] == 0
        assert (folder / "store.db").exists()
    finally:
        ray.kill(host)
