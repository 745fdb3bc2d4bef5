"""``InboxConformance``: the ``DecisionInbox`` contract (decision requests, host beats) as a test class.

A decision taken in one process for a session another drives is a row
(``repertory.core.inbox``); the rules that let it be applied exactly once are the store's:

- a request reads back as written (every kind of decision, its principal), and a known id conflicts;
- the pending query returns pending requests whose claim ended, oldest first (``created_at``,
  then the order they were added), bounded; a claimed request is not pending until its lease
  ends, a settled one never again;
- a claim is a compare-and-set on (pending, claims): of several racing claims exactly one wins;
- a request is settled once (``applied`` or ``refused``), never as ``pending``;
- host beats: ``live_hosts(since)`` holds the hosts beating at or after ``since``, a beat moves
  its host's time, ``forget_host`` removes it;
- deleting a session (``TreeStore.delete_sessions``) removes its requests;
- a request that cannot be read back is skipped by the pending query, which still fills its
  bound with the others (needs a probe that writes rows by hand), and goes with its session.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from repertory.core.decisions import Approve, Reject, Resume
from repertory.core.inbox import DecisionInbox, DecisionOutcome, DecisionRequest
from repertory.core.principal import Principal
from repertory.core.protocols import protocol_gap
from repertory.errors import CommitConflict, RecordUnreadable
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.readback import BROKEN, READ_BACK_DEPTH, nested
from repertory.testing.conformance.tree_records import session_record

__all__ = ["InboxConformance", "decision_request"]


def decision_request(
    request_id: str,
    created_at: int = 1_000,
    session_id: str = "s1",
    decision: Approve | Reject | Resume | None = None,
    principal: Principal | None = None,
) -> DecisionRequest:
    """A pending request (an approval by a user unless told otherwise)."""
    return DecisionRequest(
        request_id=request_id,
        session_id=session_id,
        decision=decision or Approve(token=f"tok-{request_id}"),
        principal=principal or Principal.user("alice"),
        created_at=created_at,
    )


async def _ids(inbox: DecisionInbox, now: int, limit: int = 100) -> list[str]:
    return [r.request_id for r in await inbox.pending_decision_requests(now, limit)]


class InboxConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``TreeStore`` and ``DecisionInbox``) and maybe a ``probe``."""

    async def test_every_store_is_a_decision_inbox(self, store: Any) -> None:
        assert isinstance(store, DecisionInbox), protocol_gap(store, DecisionInbox)

    # -- requests -----------------------------------------------------------------------------------

    async def test_requests_of_every_kind_round_trip(self, store: DecisionInbox) -> None:
        written = [
            decision_request(
                "approve",
                decision=Approve(token="t1", approval={"ok": True}, args={"path": "/tmp/x", "n": [1, 2]}),
                principal=Principal.mod("reviewer"),
            ),
            decision_request(
                "reject", decision=Reject(token="t2", reason="not today"), principal=Principal.session("parent")
            ),
            decision_request(
                "resume",
                decision=Resume(token="t3", value={"answer": "yes \x00 with a NUL", "deep": [[{"k": None}]]}),
                principal=Principal.user(),
            ),
            decision_request("system", decision=Resume(token="t4"), principal=Principal.system()),
        ]
        for request in written:
            await store.add_decision_request(request)
        for request in written:
            assert await store.load_decision_request(request.request_id) == request
        assert await store.load_decision_request("missing") is None
        loaded = await store.load_decision_request("approve")
        assert loaded is not None and loaded.status == "pending" and loaded.claims == 0 and loaded.outcome is None
        loaded.claims = 9  # a copy: the store's row is untouched
        again = await store.load_decision_request("approve")
        assert again is not None and again.claims == 0

    async def test_a_known_request_id_conflicts(self, store: DecisionInbox) -> None:
        first = decision_request("r", decision=Reject(token="first"))
        await store.add_decision_request(first)
        with pytest.raises(CommitConflict):
            await store.add_decision_request(decision_request("r", decision=Approve(token="second")))
        assert await store.load_decision_request("r") == first

    async def test_pending_requests_come_oldest_first_and_bounded(self, store: DecisionInbox) -> None:
        for request_id, created_at in (("c", 300), ("a", 100), ("b", 200), ("a2", 100), ("z", 100)):
            await store.add_decision_request(decision_request(request_id, created_at))
        # By created_at; among equal times, in the order they were added (not by id).
        assert await _ids(store, 10_000) == ["a", "a2", "z", "b", "c"]
        assert await _ids(store, 10_000, limit=2) == ["a", "a2"]
        assert await _ids(store, 10_000, limit=4) == ["a", "a2", "z", "b"]
        assert await _ids(store, 10_000, limit=0) == []
        assert await _ids(store, 0) == ["a", "a2", "z", "b", "c"]  # an unclaimed request waits for nobody

    async def test_an_empty_inbox_has_nothing_pending(self, store: DecisionInbox) -> None:
        assert await store.pending_decision_requests(10**15, 10) == []

    # -- claims -------------------------------------------------------------------------------------

    async def test_a_claim_is_a_compare_and_set_and_a_lease(self, store: DecisionInbox) -> None:
        await store.add_decision_request(decision_request("r", 100))
        await store.add_decision_request(decision_request("other", 200))
        assert await store.claim_decision_request("r", 0, 5_000)
        taken = await store.load_decision_request("r")
        assert taken is not None and (taken.claims, taken.claimed_until, taken.status) == (1, 5_000, "pending")
        assert not await store.claim_decision_request("r", 0, 9_000)  # seen with 0 claims: stale
        assert await _ids(store, 4_999) == ["other"]  # claimed: not pending while the lease lasts
        assert await _ids(store, 5_000) == ["r", "other"]  # the lease ended: pending again, in its place
        assert await store.claim_decision_request("r", 1, 8_000)  # taken again by whoever saw 1 claim
        again = await store.load_decision_request("r")
        assert again is not None and (again.claims, again.claimed_until) == (2, 8_000)
        assert not await store.claim_decision_request("missing", 0, 1)

    async def test_of_racing_claims_exactly_one_wins(self, store: DecisionInbox) -> None:
        await store.add_decision_request(decision_request("r"))
        wins = await asyncio.gather(*(store.claim_decision_request("r", 0, 1_000 + i) for i in range(8)))
        assert sum(wins) == 1
        taken = await store.load_decision_request("r")
        assert taken is not None and taken.claims == 1
        assert taken.claimed_until == 1_000 + wins.index(True)

    # -- settling -----------------------------------------------------------------------------------

    async def test_a_request_is_settled_once(self, store: DecisionInbox) -> None:
        await store.add_decision_request(decision_request("r"))
        await store.add_decision_request(decision_request("claimed"))
        assert await store.claim_decision_request("claimed", 0, 5_000)
        applied = DecisionOutcome(run_id="run-1", status="done", text="finished")
        assert await store.settle_decision_request("r", "applied", applied, 2_000)
        refused = DecisionOutcome(error_type="CommitConflict", error="token already redeemed")
        assert not await store.settle_decision_request("r", "refused", refused, 3_000)
        settled = await store.load_decision_request("r")
        assert settled is not None
        assert (settled.status, settled.outcome, settled.settled_at) == ("applied", applied, 2_000)
        # A claimed request is settled by its claimant while the lease lasts.
        assert await store.settle_decision_request("claimed", "refused", refused, 2_500)
        done = await store.load_decision_request("claimed")
        assert done is not None and (done.status, done.outcome, done.claims) == ("refused", refused, 1)
        assert await _ids(store, 10**15) == []  # settled: never pending again
        assert not await store.claim_decision_request("r", 0, 9_000)
        assert not await store.claim_decision_request("claimed", 1, 9_000)
        assert not await store.settle_decision_request("missing", "applied", applied, 1)

    async def test_of_racing_settlements_exactly_one_lands(self, store: DecisionInbox) -> None:
        await store.add_decision_request(decision_request("r"))
        outcomes = [DecisionOutcome(run_id=f"run-{i}", status="done") for i in range(8)]
        landed = await asyncio.gather(
            *(store.settle_decision_request("r", "applied", o, 1_000 + i) for i, o in enumerate(outcomes))
        )
        assert sum(landed) == 1
        settled = await store.load_decision_request("r")
        assert settled is not None and settled.outcome == outcomes[landed.index(True)]

    async def test_pending_is_no_settled_status(self, store: DecisionInbox) -> None:
        await store.add_decision_request(decision_request("r"))
        with pytest.raises(ValueError):
            await store.settle_decision_request("r", "pending", DecisionOutcome(), 1_000)
        assert await _ids(store, 1_000) == ["r"]

    # -- host beats ---------------------------------------------------------------------------------

    async def test_host_beats_say_who_is_alive(self, store: DecisionInbox) -> None:
        assert await store.live_hosts(0) == []
        await store.beat_host("host-b", 2_000)
        await store.beat_host("host-a", 1_000)
        assert await store.live_hosts(1_000) == ["host-a", "host-b"]  # at ``since`` counts
        assert await store.live_hosts(1_001) == ["host-b"]
        assert await store.live_hosts(2_001) == []
        await store.beat_host("host-a", 3_000)  # a second beat moves the time, adds no host
        assert await store.live_hosts(2_001) == ["host-a"]
        assert await store.live_hosts(0) == ["host-a", "host-b"]
        await store.forget_host("host-a")
        assert await store.live_hosts(0) == ["host-b"]
        await store.forget_host("host-a")  # forgetting twice, or a host never seen, is harmless
        await store.forget_host("never")
        assert await store.live_hosts(0) == ["host-b"]

    # -- deletion and rows that cannot be read ------------------------------------------------------

    async def test_deleting_a_session_removes_its_requests(self, store: Any) -> None:
        for sid in ("s1", "s2"):
            await store.create_session(session_record(sid))
        await store.add_decision_request(decision_request("r1", 100, session_id="s1"))
        await store.add_decision_request(decision_request("r1b", 150, session_id="s1"))
        await store.add_decision_request(decision_request("r2", 200, session_id="s2"))
        assert await store.settle_decision_request("r1b", "applied", DecisionOutcome(status="done"), 300)
        await store.delete_sessions(["s1"])
        assert await store.load_decision_request("r1") is None
        assert await store.load_decision_request("r1b") is None
        assert await _ids(store, 10_000) == ["r2"]
        await store.add_decision_request(decision_request("r1", 400, session_id="s2"))  # the id is free again
        assert await _ids(store, 10_000) == ["r2", "r1"]

    async def test_a_request_that_cannot_be_read_is_skipped_and_goes_with_its_session(
        self, store: Any, looks: Looks
    ) -> None:
        await store.create_session(session_record("s1"))
        await store.create_session(session_record("s2"))
        await store.add_decision_request(decision_request("broken", 100, session_id="s1"))
        await store.add_decision_request(decision_request("broken2", 150, session_id="s1"))
        await store.add_decision_request(decision_request("deep", 200, session_id="s2"))
        await store.add_decision_request(decision_request("late", 300, session_id="s2"))
        await looks.overwrite_record("decision_requests", "broken", BROKEN)
        await looks.overwrite_record("decision_requests", "broken2", BROKEN)
        deep = decision_request("deep", 200, session_id="s2", decision=Resume(token="t", value=nested(READ_BACK_DEPTH)))
        await looks.overwrite_record("decision_requests", "deep", json.dumps(deep.model_dump(mode="json")))
        # The two oldest cannot be read: a bounded query still fills its bound with the others.
        assert await _ids(store, 10_000, limit=1) == ["deep"]
        assert await _ids(store, 10_000, limit=10) == ["deep", "late"]
        assert await _ids(store, 10_000, limit=2) == ["deep", "late"]
        with pytest.raises(RecordUnreadable):
            await store.load_decision_request("broken")
        assert await store.load_decision_request("deep") == deep  # too deep for the fast parser: read whole
        await store.delete_sessions(["s1"])
        assert await store.load_decision_request("broken") is None
        assert await store.load_decision_request("broken2") is None
        assert await _ids(store, 10_000) == ["deep", "late"]
