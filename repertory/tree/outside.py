"""Deciding from outside the process that drives a session: through the store's decision inbox.

``decide_on_store`` is the front door of a process that holds no runtime of its own, such as
``repertory approvals approve`` or ``repertory resume``: it writes the decision as a request
(``repertory.core.inbox``) and waits for its outcome. While a host beats on the store (a
``repertory serve`` is running), that host applies it through the session's mailbox; when none
does, the decider claims the request and applies it itself, through a runtime of its own on the
same store, which for that moment is the session's one driver. Either way the decision goes
through the session tree, so the run and its turn end together, ``approval.decided`` and
``turn.completed`` are written once, and the single-use token makes it happen at most once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from repertory.core.decisions import Decision
from repertory.core.ids import new_id, now_ms
from repertory.core.inbox import HOST_ALIVE_MS, DecisionInbox, DecisionOutcome, DecisionRequest
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import ErrorInfo
from repertory.core.store import TreeStore
from repertory.errors import RepertoryError, RunNotFound, StoreError
from repertory.runtime.inbox_keeper import outcome_of
from repertory.runtime.results import raise_turn_error
from repertory.tree.agent_specs import AgentSpec
from repertory.tree.runtime import Runtime

__all__ = ["DEFAULT_WAIT_S", "DecisionPending", "decide_on_store", "live_hosts"]

DEFAULT_WAIT_S = 120.0
"""How long a decider waits for a live host to apply its request before it says the request is still pending."""
_POLL_S = 0.1
_SELF_LEASE_MS = 10 * 60_000  # the decider holds its own claim for as long as a run may drive on here


class DecisionPending(RepertoryError):
    """A live host has not applied the request in time; it stays pending and will be applied there."""


async def live_hosts(store: DecisionInbox) -> list[str]:
    """The hosts that beat on ``store`` within ``HOST_ALIVE_MS``: the processes that drive its sessions."""
    return await store.live_hosts(now_ms() - HOST_ALIVE_MS)


async def decide_on_store(
    store: TreeStore,
    agents: Mapping[str, AgentSpec],
    session_id: str,
    decision: Decision,
    principal: Principal,
    *,
    wait: float = DEFAULT_WAIT_S,
) -> RunResult:
    """Apply ``decision`` to the session's suspended run, wherever that session is driven; the run's result.

    Raises what the decision raised where it was applied (``InvalidResumeToken`` for a token
    already used, ``WrongSuspensionKind``, ...), and ``DecisionPending`` when a live host did not
    apply it within ``wait`` seconds (it stays queued for that host).
    """
    if not isinstance(store, DecisionInbox):
        raise StoreError(f"{type(store).__name__} keeps no decision inbox, so it cannot take a decision from outside")
    request = DecisionRequest(
        request_id=new_id(), session_id=session_id, decision=decision, principal=principal, created_at=now_ms()
    )
    await store.add_decision_request(request)
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        current = await store.load_decision_request(request.request_id)
        if current is None:
            raise StoreError(f"decision request {request.request_id!r} vanished (was its session deleted?)")
        if current.outcome is not None:
            return await _answer(store, current.outcome)
        if not await live_hosts(store):
            # Nothing drives the store (or the host that took the request died): apply it here.
            if await store.claim_decision_request(request.request_id, current.claims, now_ms() + _SELF_LEASE_MS):
                return await _answer(store, await _apply_here(store, agents, request))
        elif asyncio.get_running_loop().time() >= deadline:
            raise DecisionPending(
                f"the process serving this store has not applied the decision in {wait:g} s; it stays queued "
                f"(request {request.request_id}) and is applied when that process gets to it",
                request_id=request.request_id,
            )
        await asyncio.sleep(_POLL_S)


async def _apply_here(store: TreeStore, agents: Mapping[str, AgentSpec], request: DecisionRequest) -> DecisionOutcome:
    """Apply a claimed request through a runtime of this process, and record its outcome on the request."""
    assert isinstance(store, DecisionInbox)
    # recover=False: this process drives only the session it decides for, never the store's open turns.
    runtime = await Runtime.start(store=store, agents=agents, recover=False)
    try:
        try:
            # The path a serving host applies a request by (``InboxKeeper``): the session's mailbox.
            result: RunResult | RepertoryError = await runtime.host.decide(
                request.session_id, request.decision, request.principal
            )
        except RepertoryError as exc:
            result = exc
    finally:
        await runtime.close()
    outcome = outcome_of(result)
    await store.settle_decision_request(
        request.request_id, "refused" if isinstance(result, RepertoryError) else "applied", outcome, now_ms()
    )
    return outcome


async def _answer(store: TreeStore, outcome: DecisionOutcome) -> RunResult:
    """The run's result a request recorded (its state read back), or its error raised again as the class it was."""
    if outcome.error_type is not None:
        raise_turn_error(ErrorInfo(type=outcome.error_type, message=outcome.error or ""), outcome.run_id or "")
    if outcome.run_id is None or outcome.status is None:
        raise StoreError(f"a decision's outcome names no run: {outcome!r}")
    state = await store.load_run(outcome.run_id)
    if state is None:
        raise RunNotFound(f"run {outcome.run_id!r} was deleted after the decision", run_id=outcome.run_id)
    return RunResult.of(state)
