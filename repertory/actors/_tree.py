"""``HostTree``: the sessions a Ray host's delegations reach, its own in process and the rest through a client.

A delegating tool runs in the host of its parent session; the child it spawns lives on the host its
id hashes to, often this very one. Those children are served by the host's ``LocalHost`` directly:
no Ray hop, and no event channel from the host to itself (a client in the host reading its own
host's stream saw barriers delayed by seconds). Children of other hosts go through a
``RayHostClient`` that the host makes on first need (``remote``), as any client reaches them.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from repertory.core.messages import ModelMessage
from repertory.core.tree import IfBusy, NewSession, SessionEvent, SessionRecord, TurnKind, TurnRecord
from repertory.runtime.host import LocalHost
from repertory.tree.delegation import ChildSessions

__all__ = ["HostTree"]


class HostTree:
    """``ChildSessions`` for the tools of one host: ``owns(session_id)`` says which are served in process."""

    def __init__(self, local: LocalHost, owns: Callable[[str], bool], remote: Callable[[], ChildSessions]) -> None:
        self.local = local
        self.owns = owns
        self._remote = remote

    def _for(self, session_id: str) -> ChildSessions:
        return self.local if self.owns(session_id) else self._remote()

    async def create_session(self, spec: NewSession) -> SessionRecord:
        """Create the child where it belongs (a shared session's host is a stable hash of its id)."""
        if spec.placement == "shared" and self.owns(spec.session_id):
            return await self.local.create_session(spec)
        return await self._remote().create_session(spec)

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
    ) -> TurnRecord:
        """Queue the child's turn on its host (idempotent by ``submission_id``)."""
        return await self._for(session_id).send(session_id, message, kind, if_busy, output_type, submission_id)

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the child's turn rests."""
        await self._for(session_id).wait_turn(session_id, submission_id)

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel the child's turn."""
        await self._for(session_id).cancel_turn(session_id, submission_id)

    async def cancel(self, session_id: str) -> None:
        """Cancel every turn of the session on its host."""
        await self._for(session_id).cancel(session_id)

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Hear the child's events from now on."""
        return self._for(session_id).listen(session_id, listener)

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type of a turn, else its agent's (the same on every host)."""
        return self.local.output_type_for(path, agent)
