"""A stateless cron's firing never lands in a session someone else made under its id.

Issue 39: a stateless cron fires into ``cron-<schedule>-<fire ms>``, and the firing sent into
whatever session had that id, so another tenant who created it first received the cron's message
and its reply. Here tenant B makes the id through the tree directly (no HTTP check in the way),
with and without the schedule's id forged into its metadata: the firing is refused there, the
schedule goes on, and its next firing runs in a session of its own. A firing retried after a crash
still finds, and uses, the session it made itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from repertory import InMemorySessionStore, Runtime
from repertory.core.timing import firing_session, firing_submission_id, is_reserved_session_id
from repertory.testing import ManualClock
from tests.runtime.time.helpers import nap_agent, quiet_after, until

AGENTS = {"napper": nap_agent()}


def ms(hour: int) -> int:
    return int(datetime(2026, 1, 1, hour, tzinfo=UTC).timestamp() * 1000)


async def _done(rt: Runtime, session_id: str) -> bool:
    turns = await rt.store.list_turns(session_id)
    return len(turns) == 1 and turns[0].status == "done"


@pytest.mark.parametrize("forged", [{}, {"schedule_id": "SCHEDULE"}], ids=["plain", "forged-metadata"])
async def test_a_session_another_owner_made_under_a_firing_id_gets_nothing(forged: dict[str, Any]) -> None:
    clock = ManualClock(ms(0))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        sched = await rt.create_schedule("0 * * * *", "alice's secret report", agent="napper", owner="alice")
        first = firing_submission_id(sched.id, ms(1))
        assert is_reserved_session_id(first)
        metadata = {k: sched.id if v == "SCHEDULE" else v for k, v in forged.items()}
        trap = await rt.create_session("napper", session_id=first, owner="bob", metadata=metadata)
        await quiet_after(rt, lambda: clock.set(ms(1)))
        assert await rt.store.list_turns(trap.id) == []  # nothing of alice's landed in bob's session
        assert (await rt.session(trap.id)).record.owner == "bob"
        assert (await rt.schedule(sched.id)).next_at == ms(2)  # the refused firing is passed, not retried
        clock.set(ms(2))
        second = firing_submission_id(sched.id, ms(2))
        await until(lambda: _done(rt, second))
        own = await rt.session(second)
        assert own.record.owner == "alice" and own.record.metadata == {"schedule_id": sched.id}


async def test_a_firing_retried_after_a_crash_uses_the_session_it_made() -> None:
    clock = ManualClock(ms(0))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        sched = await rt.create_schedule("0 * * * *", "tick", agent="napper", owner="alice")
        # What a crash after "create the firing's session" and before "queue its turn" leaves:
        made = await rt.host.create_session(firing_session(sched.record, ms(1)))
        clock.set(ms(1))
        await until(lambda: _done(rt, made.session_id))
        (turn,) = await rt.store.list_turns(made.session_id)
        assert turn.submission_id == firing_submission_id(sched.id, ms(1)) and turn.message.text == "tick"
