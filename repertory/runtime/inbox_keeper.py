"""``InboxKeeper``: a serving host's side of ``repertory.core.inbox``: it beats, and applies decisions taken elsewhere.

A host that drives sessions (one that keeps time on the store) runs one keeper. Beats and claims
are wall-clock times, whatever clock the host's timers run on: other processes read them. The keeper writes
the host's beat every ``HOST_BEAT_MS``, so a decider in another process knows someone drives the
store's sessions, and every ``poll_interval`` it takes the pending decision requests of the
sessions this host owns and applies each through ``decide``: the host's own mailbox path, the one
its HTTP routes and handles take, which ends the run and its turn together and records who
decided. The outcome is written on the request for the decider to read.

A request is taken with a compare-and-set claim (a lease), and renewed while its decision runs
(a decision drives the run on until it rests again, which may take a model's while): a second
host takes it only after this one stopped beating and renewing. Whoever takes it, the decision
redeems its single-use token in the transaction that records it, so it is applied once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from repertory.core.decisions import Decision
from repertory.core.ids import now_ms
from repertory.core.inbox import HOST_BEAT_MS, DecisionInbox, DecisionOutcome, DecisionRequest, DecisionRequestStatus
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.errors import RepertoryError

__all__ = ["DecideFor", "InboxKeeper", "outcome_of"]

log = logging.getLogger("repertory.inbox")

DecideFor = Callable[[str, Decision, Principal], Awaitable[RunResult]]
"""``(session_id, decision, principal)``: apply the decision in the session's mailbox (``LocalHost.decide``)."""


def outcome_of(result: RunResult | RepertoryError) -> DecisionOutcome:
    """What a request records: the run's status and final text, or the error that refused the decision."""
    if isinstance(result, RepertoryError):
        return DecisionOutcome(
            run_id=result.details.get("run_id"), error_type=type(result).__name__, error=str(result) or None
        )
    return DecisionOutcome(run_id=result.run_id, status=result.status, text=result.text)


class InboxKeeper:
    """Beats for its host and applies the pending decision requests of the sessions the host owns."""

    def __init__(
        self,
        store: DecisionInbox,
        *,
        host_id: str,
        decide: DecideFor,
        poll_interval: float = 0.25,
        lease: float = 30.0,
        batch: int = 64,
    ) -> None:
        if poll_interval <= 0 or lease <= 0:
            raise ValueError("poll_interval and lease must be > 0 seconds")
        self.store = store
        self.host_id = host_id
        self._decide = decide
        self.poll_s = poll_interval
        self.lease_ms = max(1, int(lease * 1000))
        self.batch = batch
        self._owns: Callable[[str], bool] | None = None
        self._task: asyncio.Task[None] | None = None
        self._applying: dict[str, asyncio.Task[None]] = {}
        self._beaten_at: int | None = None
        self.applied = 0  # requests this keeper settled (tests wait for it)

    def start(self, owns: Callable[[str], bool] | None = None) -> None:
        """Start beating and applying; ``owns`` limits it to the sessions placed on this host."""
        self._owns = owns
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="repertory-inbox")

    async def close(self) -> None:
        """Stop, and remove this host's beat so deciders stop waiting for it at once.

        A decision in flight is cancelled with the host's actors; its claim simply runs out and
        its decider (or another host) takes the request again.
        """
        tasks = [t for t in (self._task, *self._applying.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        if self._beaten_at is not None:
            with contextlib.suppress(Exception):
                await self.store.forget_host(self.host_id)

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store hiccup: try again at the next poll, never stop applying
                log.exception("the decision inbox's pass failed; retrying at the next poll")
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # ``close`` cancelled the pass inside a store call that turned the cancel into an
                # error or swallowed it (a PostgreSQL pool does): stop as asked, not at a sleep nobody ends.
                raise asyncio.CancelledError
            await asyncio.sleep(self.poll_s)

    async def tick(self) -> int:
        """One pass: beat when due, then start applying each pending request this host owns; how many it took."""
        now = now_ms()
        if self._beaten_at is None or now - self._beaten_at >= HOST_BEAT_MS:
            await self.store.beat_host(self.host_id, now)
            self._beaten_at = now
        taken = 0
        for request in await self.store.pending_decision_requests(now, self.batch):
            if request.request_id in self._applying:
                continue
            if self._owns is not None and not self._owns(request.session_id):
                continue
            if not await self.store.claim_decision_request(request.request_id, request.claims, now + self.lease_ms):
                continue  # another host (or the decider itself) took it
            taken += 1
            held = request.model_copy(update={"claims": request.claims + 1})
            task = asyncio.get_running_loop().create_task(self._apply(held))
            self._applying[request.request_id] = task
            task.add_done_callback(functools.partial(self._done, request.request_id))
        return taken

    def _done(self, request_id: str, _: asyncio.Task[None]) -> None:
        self._applying.pop(request_id, None)

    async def _apply(self, request: DecisionRequest) -> None:
        renewing = asyncio.get_running_loop().create_task(self._renew(request))
        try:
            try:
                result: RunResult | RepertoryError = await self._decide(
                    request.session_id, request.decision, request.principal
                )
            except RepertoryError as exc:
                result = exc
        except asyncio.CancelledError:
            raise
        except Exception:
            # Not an answer about the decision (a bug, a store that went away): the claim runs out
            # and the request is tried again, where the token tells whether it took.
            log.exception("applying decision request %s failed", request.request_id)
            return
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        status: DecisionRequestStatus = "refused" if isinstance(result, RepertoryError) else "applied"
        await self.store.settle_decision_request(request.request_id, status, outcome_of(result), now_ms())
        self.applied += 1

    async def _renew(self, request: DecisionRequest) -> None:
        """Keep the claim while the decision runs (its run may drive on for a while)."""
        claims = request.claims
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            if not await self.store.claim_decision_request(request.request_id, claims, now_ms() + self.lease_ms):
                return  # settled, or taken by a decider that saw this host as gone
            claims += 1
