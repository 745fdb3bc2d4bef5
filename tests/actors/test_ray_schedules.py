"""Schedules on the Ray backend: a session host fires a cron, and writes the firing's webhook row itself.

On Ray a schedule fires in the host that owns its session (that host's scheduler, on the wall
clock), not in the process that made it; the firing's completion webhook (``FiringWebhook``) is
therefore a row that host writes, for an HTTP server to find. Slow: a cron fires on a minute
boundary, so the test waits up to a minute for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.core.timing import FiringWebhook, TimedStore, firing_submission_id, firing_webhook_id
from repertory.testing import ScriptedModel


def _answer(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": f"done: {messages[-1].text}"}


@pytest.mark.slow
async def test_a_ray_host_fires_a_schedule_and_writes_its_webhook_row(ray_runtime: Any) -> None:
    rt = await ray_runtime({"a": Agent(name="a", model=ScriptedModel(_answer))})
    store = rt.store
    assert isinstance(store, TimedStore)
    h = await rt.create_session(agent="a")
    sched = await h.schedule("* * * * *", "tick")
    hook = FiringWebhook(url="http://127.0.0.1:9/hook", metadata={"assistant_id": "a"})
    await sched.update(webhook=hook)
    fire_at = sched.next_at
    assert fire_at is not None
    submission_id = firing_submission_id(sched.id, fire_at)
    deadline = time.monotonic() + 90
    while not (rows := await store.list_webhooks(submission_id=submission_id)):
        # Polling: the row is written by the host process on its own clock; nothing here can await it.
        assert time.monotonic() < deadline, "the host never fired the schedule"
        await asyncio.sleep(0.2)
    (row,) = rows
    turn = await store.load_turn(submission_id)
    assert turn is not None and turn.session_id == h.id
    assert (row.delivery_id, row.run_id, row.url, row.metadata) == (
        firing_webhook_id(sched.id, fire_at),
        turn.run_id,
        hook.url,
        hook.metadata,
    )
    assert [w.delivery_id for w in await store.list_webhooks(status="pending", firings=True)] == [row.delivery_id]
    await sched.cancel()
