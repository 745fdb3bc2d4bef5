"""``GroupCommitConformance``: concurrent commits keep their own guards and errors, grouped or not.

A store may coalesce concurrent writes into one transaction (group commit: the SQLite and
PostgreSQL stores do by default, a savepoint per commit). Whether or not it does, each commit must
be decided as if it ran alone, in some order: a stale head, a failing statement or a used-up token
fails that commit only, with its own error, and nothing of it is written, while every other commit
launched with it lands and is readable. A store that does not group passes these trivially, which
is the point: a grouped store must be indistinguishable from it.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.state import SuspendReason
from repertory.core.store import SessionStore
from repertory.errors import CommitConflict
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.probe import INJECTED_FAILURE
from repertory.testing.conformance.records import commit, history_of, pointers

__all__ = ["GroupCommitConformance"]

N = 40


async def _seed(store: SessionStore, n: int = N) -> list[MessageHistory]:
    """``n`` threads ``t{i}`` with a run ``r{i}`` each, one message deep."""
    histories = [history_of(f"q{i}") for i in range(n)]
    await asyncio.gather(*(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(histories)))
    return histories


def _step(history: MessageHistory, text: str) -> MessageHistory:
    """A branch of ``history`` one assistant message further (the base is ``history``'s head)."""
    branch = history.branch()
    branch.append(ModelMessage.assistant(text))
    return branch


async def _texts(store: SessionStore, revision_id: str | None) -> list[str]:
    assert revision_id is not None
    loaded = await store.load_history(revision_id)
    assert loaded is not None
    return [m.text for m in loaded.messages]


class GroupCommitConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``SessionStore``) and optionally a ``probe``.

    The failure-injection tests need the probe's ``fail_commits(run_id)`` and ``fail_at_commit()``.
    """

    async def test_stale_commits_fail_alone_with_their_own_conflict(self, store: SessionStore, looks: Looks) -> None:
        histories = await _seed(store)
        # Every fourth thread gets two commits on the same base: only one of them can land.
        calls = [(i, _step(h, f"a{i}-{k}")) for i, h in enumerate(histories) for k in range(2 if i % 4 == 0 else 1)]
        outcomes = await asyncio.gather(
            *(commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id) for i, b in calls),
            return_exceptions=True,
        )
        winners: dict[int, MessageHistory] = {}
        for (i, branch), outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, CommitConflict), outcome
                assert repr(f"t{i}") in str(outcome)  # its own error, naming its own thread
                await looks.expect_held([branch.entries[-1].id], held=False)
            else:
                assert i not in winners
                winners[i] = branch
        assert sorted(winners) == list(range(N))
        for i, branch in winners.items():
            thread = await store.load_thread(f"t{i}")
            assert thread is not None and thread.history_revision_id == branch.revision_id
            run = await store.load_run(f"r{i}")
            assert run is not None and run.history_revision_id == branch.revision_id
            assert await _texts(store, branch.revision_id) == [f"q{i}", branch.messages[-1].text]

    async def test_a_commit_that_fails_midway_does_not_take_the_others_down(
        self, store: SessionStore, looks: Looks
    ) -> None:
        histories = await _seed(store, 20)
        branches = [_step(h, f"a{i}") for i, h in enumerate(histories)]
        async with looks.commit_failure("r7") as expected:
            outcomes = await asyncio.gather(
                *(
                    commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id)
                    for i, b in enumerate(branches)
                ),
                return_exceptions=True,
            )
        for i, outcome in enumerate(outcomes):
            if i == 7:
                assert isinstance(outcome, expected) and INJECTED_FAILURE in str(outcome)
            else:
                assert not isinstance(outcome, BaseException), outcome
        for i, branch in enumerate(branches):
            thread = await store.load_thread(f"t{i}")
            run = await store.load_run(f"r{i}")
            landed = i != 7
            head = branch.revision_id if landed else histories[i].revision_id
            assert thread is not None and thread.history_revision_id == head
            assert run is not None and run.history_revision_id == head
            await looks.expect_held([branch.entries[-1].id], held=landed)
            if landed:
                assert await _texts(store, head) == [f"q{i}", f"a{i}"]
        # The failed one goes through once the failure is gone.
        await commit(store, branches[7], thread_id="t7", run_id="r7", base=histories[7].revision_id)
        assert await _texts(store, branches[7].revision_id) == ["q7", "a7"]

    async def test_a_token_redeemed_twice_at_once_is_redeemed_once(self, store: SessionStore, looks: Looks) -> None:
        neighbours = await _seed(store, 10)  # other sessions committing in the same moment
        history = history_of("a")
        live = SuspendReason(token="tok-live", kind="approval")
        await commit(store, history, thread_id="thread-of-r", status="suspended", suspended_on=live)
        base = history.revision_id
        first, second = _step(history, "approved"), _step(history, "rejected")

        async def redeem(branch: MessageHistory) -> None:
            run, thread = pointers(branch, status="running", thread_id="thread-of-r")
            await store.commit_session(
                run=run, thread=thread, history=branch, base_revision_id=base, redeem_token="tok-live"
            )

        others = [
            commit(store, _step(h, f"a{i}"), thread_id=f"t{i}", run_id=f"r{i}", base=h.revision_id)
            for i, h in enumerate(neighbours)
        ]
        outcomes = await asyncio.gather(redeem(first), *others, redeem(second), return_exceptions=True)
        assert not any(isinstance(o, BaseException) for o in outcomes[1:-1])
        redemptions = [outcomes[0], outcomes[-1]]
        failed = [o for o in redemptions if isinstance(o, BaseException)]
        assert len(failed) == 1 and isinstance(failed[0], CommitConflict)
        winner = first if not isinstance(outcomes[0], BaseException) else second
        loser = second if winner is first else first
        run = await store.load_run("r")
        assert run is not None and run.status == "running" and run.suspended_on is None
        assert run.history_revision_id == winner.revision_id
        assert await _texts(store, winner.revision_id) == ["a", winner.messages[-1].text]
        await looks.expect_held([loser.entries[-1].id], held=False)

    async def test_a_transaction_that_fails_at_commit_fails_every_commit_in_it(
        self, store: SessionStore, looks: Looks
    ) -> None:
        histories = await _seed(store, 10)
        branches = [_step(h, f"a{i}") for i, h in enumerate(histories)]

        async def land_all() -> list[object]:
            return await asyncio.gather(
                *(
                    commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id)
                    for i, b in enumerate(branches)
                ),
                return_exceptions=True,
            )

        async with looks.commit_time_failure() as expected:
            outcomes = await land_all()
        assert all(isinstance(o, expected) for o in outcomes), outcomes
        for i, branch in enumerate(branches):  # acknowledged only once committed: none was
            thread = await store.load_thread(f"t{i}")
            assert thread is not None and thread.history_revision_id == histories[i].revision_id
            await looks.expect_held([branch.entries[-1].id], held=False)
        assert not any(isinstance(o, BaseException) for o in await land_all())
        for i, branch in enumerate(branches):
            assert await _texts(store, branch.revision_id) == [f"q{i}", f"a{i}"]

    async def test_commits_saves_and_deletes_launched_together_all_take_effect(self, store: SessionStore) -> None:
        histories = await _seed(store, 12)
        branches = [_step(h, f"a{i}") for i, h in enumerate(histories)]
        extra = [pointers(history_of("x"), thread_id="elsewhere", run_id=f"saved{i}")[0] for i in range(6)]
        await asyncio.gather(
            *(
                commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id)
                for i, b in enumerate(branches)
                if i % 3
            ),
            *(store.save(run) for run in extra),
            *(store.delete_run(f"r{i}") for i in range(0, 12, 3)),
        )
        for i, branch in enumerate(branches):
            run = await store.load_run(f"r{i}")
            if i % 3:
                assert run is not None and run.history_revision_id == branch.revision_id
            else:
                assert run is None
        for run in extra:
            assert await store.load_run(run.run_id) == run

    @pytest.mark.parametrize("n", [1, 300])
    async def test_any_number_of_concurrent_commits_lands(self, store: SessionStore, n: int) -> None:
        # 300 is more than one batch holds, so several transactions share the queue.
        histories = await _seed(store, n)
        branches = [_step(h, f"a{i}") for i, h in enumerate(histories)]
        await asyncio.gather(
            *(
                commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id)
                for i, b in enumerate(branches)
            )
        )
        for i, branch in enumerate(branches):
            thread = await store.load_thread(f"t{i}")
            assert thread is not None and thread.history_revision_id == branch.revision_id
