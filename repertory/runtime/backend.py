"""``SessionBackend``: the one typed seam between the session tree and whatever hosts its sessions.

``Runtime``, ``SessionHandle`` and ``TurnHandle`` (``repertory.tree``) read the store themselves
and send everything that changes a session through this protocol, and only through it: these
methods are all they call, so a backend that implements them runs the whole handle API.

It lives in the engine, beside its reference implementation: ``repertory.runtime.host.LocalHost``
(the actors live in this process) subclasses it, so mypy checks every method's signature where the
implementation is written, and the Ray backend's ``RayHostClient`` (the actors live in Ray
``SessionHost`` processes) conforms to it structurally. The tree names it; it never imports a
backend: a backend is found by name through ``repertory.tree.backends``.

Rules every backend keeps (``repertory.testing.conformance.BackendConformance`` checks them; the
built-in backends run it in ``tests/tree``):

- ``send`` returns once the turn is durable; a caller-chosen ``submission_id`` makes it idempotent.
- ``create_session`` writes ``spec.session_id`` or raises ``SessionExists``; it never returns
  another session that happened to hold the id.
- ``decide`` runs in the session's mailbox order and is never retried (tokens are single-use).
- ``events`` replays stored events after ``after_seq`` then follows live ones until the caller
  stops; ``listen`` is synchronous, so the listener is in place before the caller's next call.
- ``close`` stops work without changing anything durable: open turns resume at the next start.
- ``delete_sessions`` stops each session's actor where it lives (cancelling its running turn
  first) and refuses to activate it again before the store deletes its rows in one transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

from pydantic import BaseModel, JsonValue

from repertory.core.decisions import Decision
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import DeletedRows
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import (
    IfBusy,
    NewSession,
    SessionEvent,
    SessionMetadata,
    SessionRecord,
    TurnKind,
    TurnRecord,
)
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import CompactionResult

__all__ = ["SessionBackend", "Submission"]

Submission = tuple[str, ModelMessage, TurnKind, str]
"""One turn of ``send_many``: ``(session_id, message, kind, submission_id)``."""


class SessionBackend(Protocol):
    """Hosts session actors: creates sessions, queues and drives their turns, and streams their events."""

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents this backend runs, by name."""
        ...

    # -- sessions -----------------------------------------------------------------------------------

    async def create_session(self, spec: NewSession) -> SessionRecord:
        """Persist a new session (its thread at ``spec.head``); ``SessionExists`` if the id is taken."""
        ...

    async def create_sessions(self, specs: list[NewSession]) -> list[SessionRecord]:
        """Persist many new sessions, in bulk where the backend can; records in ``specs`` order."""
        ...

    async def metadata(self, session_id: str) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        ...

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rebind the agent (``ValueError`` once a turn was queued) and/or replace the metadata; the new row."""
        ...

    async def delete_sessions(self, session_ids: list[str]) -> DeletedRows:
        """Stop the sessions' actors (cancelling their work, in the order given), then delete their rows."""
        ...

    # -- turns --------------------------------------------------------------------------------------

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        """Queue a turn durably; ``if_busy`` says what happens while another runs or waits.

        ``client_tools`` are tools the sender runs itself: the turn's run suspends on a call to one,
        and the value it is resumed with is the call's result (``Session.start``).
        """
        ...

    async def send_many(self, batch: list[Submission]) -> list[TurnRecord]:
        """Queue many turns, each behind any running one, in bulk where the backend can."""
        ...

    async def run_turn(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """Queue a turn, wait until it rests and return its result (``handle.run()``, in as few hops as may be)."""
        ...

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn rests: done, error, cancelled or suspended."""
        ...

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel one turn: queued, it never runs; running, it stops; suspended, it is closed."""
        ...

    async def cancel(self, session_id: str) -> None:
        """Cancel every turn of the session and its suspended run."""
        ...

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type a turn asked for (by ``module:qualname``), else its agent's ``output_type``."""
        ...

    # -- decisions ----------------------------------------------------------------------------------

    async def pending_approvals(self, session_id: str) -> list[SuspendReason]:
        """The live approval request of the session, if any (with its token)."""
        ...

    async def decide(self, session_id: str, decision: Decision, principal: Principal) -> RunResult:
        """Approve, reject or resume the session's suspended run on behalf of ``principal``."""
        ...

    async def recover(self, session_id: str) -> list[str]:
        """Drive again the session's turns left ``queued`` or ``running`` that nothing drives here; their ids.

        What a host's start does for every session, for one: a turn whose process died (and that
        no process has taken up since) goes on from its last checkpoint, its run and turn together.
        A turn already queued or driven here is not queued twice.
        """
        ...

    async def compact(self, session_id: str) -> CompactionResult | None:
        """Compact the session's context now, in its mailbox order (``None``: nothing to compact)."""
        ...

    # -- events -------------------------------------------------------------------------------------

    def events(self, session_id: str, after_seq: int = 0) -> AsyncIterator[SessionEvent]:
        """Stored events with ``seq > after_seq``, then live ones, until the caller stops."""
        ...

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event of the session from now on; returns the remover."""
        ...

    # -- time ---------------------------------------------------------------------------------------

    def nudge_timers(self, session_id: str | None) -> None:
        """A schedule of ``session_id`` (``None``: one of no session) was added or removed: look again now.

        Fire and forget: a host that misses it still sees the change at its next poll.
        """
        ...

    # -- administration -----------------------------------------------------------------------------

    def passivate_idle(self, older_than: float) -> int:
        """Drop sessions idle for ``older_than`` seconds from memory now; returns how many left."""
        ...

    @property
    def resident(self) -> int:
        """How many sessions are in memory now."""
        ...

    async def close(self) -> None:
        """Stop working without changing anything durable."""
        ...
