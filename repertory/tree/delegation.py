"""Delegation: ``agent_tool`` makes an agent a tool, whose every call runs a turn in a child session.

A model delegates by calling the tool with ``{"task": ...}``. The call spawns one child session
(lineage ``spawned``, parent the caller), sends the task as the child's one turn (origin
``session``: the parent speaks) and returns the child's final text, or its validated output as JSON
where the child's agent has an ``output_type``. The child is a session like any other: its own
history, events, usage and approvals, all durable, all visible in the tree.

Durability comes from the engine's rule for delegating tools (``Tool.delegates_to``): the step loop
mints the child's session id and submission id when the model makes the call and commits them with
the call, before the tool runs (``RunState.delegations``). The tool then creates the child with
that id and sends the turn with that submission id, both idempotent, so a call run again after a
crash of either process finds the same child and waits for the same turn: a child is spawned once.

``TreeServices`` is the ``repertory.runtime.services.SessionServices`` a host hands its tools: the
session tree over ``ChildSessions``, the part of a ``SessionBackend`` delegation uses, so it works
wherever the parent runs (the local host itself, or a Ray host that serves the children it owns
itself and reaches the other hosts through a client of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field, JsonValue

from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal, to_model_message
from repertory.core.state import Delegation
from repertory.core.store import TreeStore
from repertory.core.tree import (
    IfBusy,
    Lineage,
    NewSession,
    SessionEvent,
    SessionRecord,
    TurnKind,
    TurnRecord,
    TurnStatus,
)
from repertory.errors import RepertoryError, SessionExists, ToolError
from repertory.runtime.output import parse_output
from repertory.runtime.tools import Tool, ToolContext
from repertory.tree.cancel import cancel_subtree

__all__ = ["AgentTool", "ChildSessions", "TreeServices", "agent_tool"]

_log = logging.getLogger("repertory.delegation")
_ENDED: tuple[TurnStatus, ...] = ("done", "error", "cancelled")
_RECHECK_S = 5.0
"""How long a wait on a suspended child trusts its events alone before reading the store again.

A decision on the child wakes the wait through the child's events at once; the re-read covers what
no event announces: a decision made outside the runtime (``Session.approve_suspended``, the CLI)
and an event lost to a host that died between a turn's last write and its ``turn.completed``.
"""

_TASK = Field(description="The task, stated fully: the agent sees nothing else of this conversation.")


class AgentTool(Tool):
    """The tool ``agent_tool`` returns: each call delegates one task to a child session running ``delegates_to``."""

    def __init__(self, agent_name: str, *, name: str | None = None, description: str | None = None) -> None:
        if not isinstance(agent_name, str) or not agent_name:
            raise ValueError(f"agent_tool needs the name of a registered agent, not {agent_name!r}")
        if description is None:
            description = (
                f"Delegate a task to the {agent_name!r} agent. It works on it in a session of its own, "
                "with its own tools, and returns its final answer. Calls made together run concurrently."
            )
        super().__init__(self.delegate, name=name or agent_name, description=description)
        self.delegates_to = agent_name

    async def delegate(self, ctx: ToolContext, task: str = _TASK) -> JsonValue:
        """Run ``task`` in this call's child session and return the child's answer."""
        if ctx.services is None:
            raise ValueError(
                f"tool {self.name!r} delegates to agent {self.delegates_to!r}, which needs a Runtime "
                "(a bare Session has no session tree to spawn a child in)"
            )
        return await ctx.services.delegate(ctx, task)


def agent_tool(agent_name: str, name: str | None = None, description: str | None = None) -> Tool:
    """A tool that delegates to the agent registered as ``agent_name``: one child session per call.

    The model calls it with ``{"task": str}``; the call spawns a child session (lineage ``spawned``,
    parent the caller, origin ``session``, owner the caller's) running ``agent_name``, runs one turn
    there and returns the child's final text (its output as JSON where that agent has an ``output_type``). A child that
    fails or is cancelled gives the model an error result. Parallel calls in one step run their
    children concurrently. After a crash the call waits for the same child turn: a child is
    spawned once. Approvals inside the child surface at every ancestor
    (``pending_approvals(tree=True)``) and are decided there; cancelling the caller's turn cancels
    the child's. It needs a ``Runtime``: in a bare ``Session`` a call raises ``ValueError``.
    ``name`` defaults to ``agent_name``; ``description`` to a sentence naming the agent.
    """
    return AgentTool(agent_name, name=name, description=description)


class ChildSessions(Protocol):
    """The part of a ``SessionBackend`` a delegation uses (every ``SessionBackend`` is one)."""

    async def create_session(self, spec: NewSession) -> SessionRecord:
        """Persist a new session; ``SessionExists`` if the id is taken."""
        ...

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
    ) -> TurnRecord:
        """Queue a turn durably (idempotent by ``submission_id``)."""
        ...

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn rests."""
        ...

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel one turn."""
        ...

    async def cancel(self, session_id: str) -> None:
        """Cancel every turn of the session (running, queued, suspended); return once its drive ended."""
        ...

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with the session's events from now on; returns the remover."""
        ...

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type of a turn, else its agent's."""
        ...


class TreeServices:
    """The session tree as a host's tools reach it: spawns, sends, waits and cancels through ``backend()``.

    ``backend`` is a function, not a backend, because a Ray host builds the client it reaches the
    other hosts with on first use (they may not all exist yet while it boots).
    """

    def __init__(
        self, store: TreeStore, backend: Callable[[], ChildSessions], *, recheck_seconds: float = _RECHECK_S
    ) -> None:
        self.store = store
        self._backend = backend
        self.recheck_seconds = recheck_seconds
        self._cancelling: set[asyncio.Task[None]] = set()  # tree cancels under way (held, not collected)

    async def delegate(self, ctx: ToolContext, task: str) -> JsonValue:
        """Spawn (once) the child ``ctx.delegation`` names, run ``task`` there to the end, return its answer."""
        delegation = ctx.delegation
        if delegation is None:
            raise ToolError(
                f"tool {ctx.tool_name!r} was called without the child session ids the step loop commits "
                "with a delegating call; it did not run"
            )
        backend = self._backend()
        try:
            await self._spawn(backend, ctx.thread_id, delegation, task)
            message, kind = to_model_message(task, Principal.session(ctx.thread_id))
            await self._queue(backend, delegation, message, kind)
            turn = await self._wait(backend, delegation)
        except asyncio.CancelledError:
            if not ctx.detaching():
                await self._cancel(backend, delegation)
            raise
        except RepertoryError as exc:
            if isinstance(exc, ToolError):
                raise
            raise ToolError(f"delegating to {delegation.agent!r} failed: {type(exc).__name__}: {exc}") from exc
        return await self._answer(backend, delegation, turn)

    def cancel_tree(self, session_id: str) -> None:
        """Cancel the whole tree of ``session_id`` from its root, in the background (``SessionServices``)."""
        task = asyncio.get_running_loop().create_task(self._cancel_tree(session_id))
        self._cancelling.add(task)
        task.add_done_callback(self._cancelled_tree)

    async def _cancel_tree(self, session_id: str) -> None:
        record = await self.store.load_session(session_id)
        root = session_id if record is None else record.root_id
        await cancel_subtree(self.store, self._backend(), root)

    def _cancelled_tree(self, task: asyncio.Task[None]) -> None:
        self._cancelling.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("cancelling a session tree failed", exc_info=task.exception())

    async def _spawn(self, backend: ChildSessions, parent_id: str, delegation: Delegation, task: str) -> None:
        parent = await self.store.load_session(parent_id)
        if parent is None:
            raise ToolError(f"the calling session {parent_id!r} is not in the session tree, so it cannot delegate")
        spec = NewSession(
            session_id=delegation.session_id,
            agent=delegation.agent,
            lineage=Lineage(kind="spawned", parent_id=parent_id),
            root_id=parent.root_id,
            title=task if len(task) <= 80 else task[:79] + "…",
            model=parent.model,
            cwd=parent.cwd,
            owner=parent.owner,  # a tenant's delegated children are theirs, as spawned ones are
        )
        try:
            await backend.create_session(spec)
        except SessionExists:
            # The first attempt of this call made it (a recovery), unless the id is someone else's.
            existing = await self.store.load_session(delegation.session_id)
            if existing is None or existing.lineage.parent_id != parent_id or existing.agent != delegation.agent:
                raise ToolError(f"session id {delegation.session_id!r} belongs to another session") from None

    async def _queue(
        self, backend: ChildSessions, delegation: Delegation, message: ModelMessage, kind: TurnKind
    ) -> None:
        """Queue the child's turn, to the end even while the caller is being cancelled.

        A send cut short after the store accepted the turn but before the child's host took it up
        would leave a turn that the cancel which follows cannot find, and that a later recovery
        would run: so a cancelled caller lets the send land first, and the cancel then finds it.
        """
        sending = asyncio.ensure_future(
            backend.send(delegation.session_id, message, kind, "enqueue", None, delegation.submission_id)
        )
        try:
            await asyncio.shield(sending)
        except asyncio.CancelledError:
            await asyncio.wait([sending])  # a second cancel here leaves the send alone too
            if not sending.cancelled():
                sending.exception()  # read: the caller is cancelled, a failed send has nobody to tell
            raise

    async def _wait(self, backend: ChildSessions, delegation: Delegation) -> TurnRecord:
        """The child's turn once it ended: done, error or cancelled (suspensions are waited through)."""
        child, submission = delegation.session_id, delegation.submission_id
        changed = asyncio.Event()

        def heard(event: SessionEvent) -> None:
            if event.submission_id == submission:
                changed.set()

        remove = backend.listen(child, heard)
        try:
            while True:
                changed.clear()  # before reading, so an event after the read still wakes the wait below
                try:
                    await backend.wait_turn(child, submission)
                except RepertoryError:
                    raise
                except Exception:
                    # The child's host died under a long wait (a Ray host, restarting): its turn is
                    # durable and will be re-driven there, so this wait goes on from the store.
                    _log.info("waiting for child turn %s: its host failed; waiting on", submission, exc_info=True)
                turn = await self.store.load_turn(submission)
                if turn is None:
                    raise ToolError(f"the turn sent to session {child!r} is gone")
                if turn.status in _ENDED:
                    return turn
                if turn.status == "suspended":
                    run = await self.store.load_run(turn.run_id)
                    if run is not None and run.status in _ENDED:
                        return turn  # decided outside the runtime: the run ended, its turn was not told
                # Waiting for a human (or for a host that restarts): the child's next event wakes us.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.recheck_seconds):
                        await changed.wait()
        finally:
            remove()

    async def _answer(self, backend: ChildSessions, delegation: Delegation, turn: TurnRecord) -> JsonValue:
        run = await self.store.load_run(turn.run_id)
        status = run.status if run is not None and turn.status == "suspended" else turn.status
        who = f"the {delegation.agent!r} session {delegation.session_id}"
        if status == "error":
            info = turn.error or (run.error if run is not None else None)
            detail = f"{info.type}: {info.message}" if info is not None else "unknown error"
            raise ToolError(f"{who} failed: {detail}")
        if status == "cancelled" or run is None or run.status == "cancelled":
            raise ToolError(f"{who} was cancelled before it answered")
        text = run.result if isinstance(run.result, str) else ""
        kind = backend.output_type_for(turn.output_type, delegation.agent)
        if kind is None:
            return text
        output = parse_output(kind, text)
        dumped: JsonValue = output.model_dump(mode="json")
        return dumped

    async def _cancel(self, backend: ChildSessions, delegation: Delegation) -> None:
        """Cancel the child's turn, to the end, even while the caller is being cancelled."""
        try:
            await asyncio.shield(backend.cancel_turn(delegation.session_id, delegation.submission_id))
        except asyncio.CancelledError:
            raise
        except Exception:  # the child may not exist yet (cancelled mid-spawn): nothing to stop then
            _log.warning("could not cancel the child turn %s", delegation.submission_id, exc_info=True)
