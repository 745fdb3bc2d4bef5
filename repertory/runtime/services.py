"""``SessionServices``: what the host of a session offers the tools of its drives, typed for the engine.

A tool runs inside a drive, deep in the engine, but some tools act on the session tree above it:
a delegation spawns a child session and waits for its turn. The engine must not import the tree
(``repertory.tree`` sits above it), so the seam is this protocol: the engine defines it and
hands whatever the host supplies to every tool as ``ToolContext.services``; ``repertory.tree``
implements it over its ``SessionBackend``. A bare ``Session`` has no host, so its tools see
``None``, and a tool that needs the tree says so with a clear error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pydantic import JsonValue

if TYPE_CHECKING:
    from repertory.runtime.tools import ToolContext

__all__ = ["SessionServices"]


class SessionServices(Protocol):
    """The session tree as a running tool reaches it (implemented by ``repertory.tree.delegation``)."""

    async def delegate(self, ctx: ToolContext, task: str) -> JsonValue:
        """Run ``task`` as one turn of the child session ``ctx.delegation`` names and return its answer.

        The child is created once (a call run again after a crash finds the child and the turn its
        first attempt made) and its turn is awaited to the end, through approvals and suspensions
        decided anywhere. A child that failed or was cancelled raises ``ToolError``; cancelling the
        caller cancels the child's turn, unless the host is detaching (``ctx.detaching()``).
        """
        ...

    def cancel_tree(self, session_id: str) -> None:
        """Begin cancelling the whole tree ``session_id`` belongs to, from its root, in the background.

        What a run that crossed a budget with ``on_exceed="cancel_tree"`` asks for once its turn
        has ended: every queued, running or suspended turn of the tree is cancelled, as
        ``SessionHandle.cancel(tree=True)`` on the root does. Returns at once (the cancel waits for
        every drive of the tree to end, the caller's session's worker among them).
        """
        ...
