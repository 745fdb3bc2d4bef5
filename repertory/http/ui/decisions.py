"""Approve, reject and resume from a page: checked first, decided once, answered as soon as it is recorded.

A form names a call by run id and tool call id; the token is read from the store here and never
leaves the server. Before anything is decided the call must still be the run's live one and
edited arguments must validate against the tool, so a bad edit is an error in the page and the
run stays as it was. Then:

- a decision already in flight in this process for the same call is refused at once (a double
  click, two people on one server), and the store's single-use token settles races between
  processes: the loser's ``InvalidResumeToken`` is reported as a lost race;
- the page does not wait for the run to finish (after an approval the model may work for
  minutes): it waits until the decision is committed (the run's next checkpoint, which consumes
  the token) or the decision fails, whichever comes first.

Who decided is recorded with an approval (``{"type": ..., "principal": ..., "via": "ui"}``), the
shape the HTTP API records too; a resume value is stamped with the decider's origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from repertory.core.json_limits import DEFAULT_MAX_DEPTH, JsonRefused, parse_json
from repertory.core.result import RunResult
from repertory.core.state import RunState
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.errors import InvalidResumeToken, RepertoryError, ToolError
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["RECORD_WAIT_S", "Action", "Decider", "Outcome"]

Action = Literal["approve", "reject", "resume"]
_log = logging.getLogger("repertory.http.ui")
RECORD_WAIT_S = 10.0
"""How long a page waits for a decision to be committed before it answers anyway."""
_GONE = "This call was already decided elsewhere; the list now shows what still waits."


@dataclass(frozen=True)
class Outcome:
    """How a decision went: ``ok`` (recorded), ``invalid`` (fix the form), or ``raced`` (decided elsewhere)."""

    kind: Literal["ok", "invalid", "raced"]
    message: str


def _recorded(run: RunState, tool_call_id: str, field: str, expected: str) -> bool:
    """True when the run's approval record of the call holds this decision (by its nonce or reason)."""
    for record in run.approvals:
        if record.tool_call_id == tool_call_id:
            got = record.approval.get(field) if field == "nonce" and isinstance(record.approval, dict) else None
            return bool(got == expected if field == "nonce" else record.reason == expected)
    return False


def _json_object(text: str, max_depth: int) -> dict[str, Any]:
    try:
        value = parse_json(text, max_depth=max_depth, root="arguments")
    except json.JSONDecodeError as exc:
        raise ToolError(f"the arguments are not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except JsonRefused as exc:  # too deep to store and read back, or NaN/Infinity
        raise ToolError(str(exc)) from None
    if not isinstance(value, dict):
        raise ToolError("the arguments must be a JSON object ({...})")
    return value


class Decider:
    """Decisions made from the UI; one in flight per call in this process.

    Edited arguments are JSON no deeper than ``max_depth`` with finite numbers only
    (``repertory.core.json_limits``), like every body the HTTP API takes.
    """

    def __init__(self, runtime: Runtime, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.runtime = runtime
        self.max_depth = max_depth
        self._claimed: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def store(self) -> TreeStore:
        """The runtime's store."""
        return self.runtime.store

    async def decide(
        self,
        handle: SessionHandle,
        run_id: str,
        tool_call_id: str,
        action: Action,
        *,
        args_text: str | None = None,
        reason: str = "",
        value: Any = None,
    ) -> Outcome:
        """Decide the call ``tool_call_id`` of run ``run_id`` on ``handle``'s session (see the module docstring)."""
        key = (run_id, tool_call_id)
        if key in self._claimed:
            # Only a call of this session is said to be in flight: another session's (another
            # owner's, maybe) answers like any call that is not this session's to decide.
            run = await self.store.load_run(run_id)
            if run is None or run.thread_id != handle.id:
                return Outcome("raced", _GONE)
            return Outcome("raced", "Someone else is deciding this call right now; the page shows what they decided.")
        # Claimed before the first await, so a second request for the call cannot slip in between.
        self._claimed.add(key)
        started = False
        try:
            prepared = await self._prepare(handle, run_id, tool_call_id, action, args_text, reason, value)
            if isinstance(prepared, Outcome):
                return prepared
            call, check = prepared
            started = True
            return await self._run(handle, key, call, action, check)
        finally:
            if not started:
                self._claimed.discard(key)

    async def _prepare(
        self,
        handle: SessionHandle,
        run_id: str,
        tool_call_id: str,
        action: Action,
        args_text: str | None,
        reason: str,
        value: Any,
    ) -> Outcome | tuple[Coroutine[Any, Any, RunResult], Callable[[RunState], bool]]:
        """The decision's call and a test that the stored run records it, or why there is none."""
        run = await self.store.load_run(run_id)
        on = run.suspended_on if run is not None and run.status == "suspended" else None
        if run is None or run.thread_id != handle.id or on is None or on.tool_call_id != tool_call_id:
            return Outcome("raced", _GONE)
        wanted = "suspend" if action == "resume" else "approval"
        if on.kind != wanted:
            return Outcome("invalid", f"This call waits for {'an answer' if on.kind == 'suspend' else 'approval'}.")
        pending = run.pending[0] if run.pending else None
        nonce = secrets.token_hex(8)  # tells this decision from any other of the same call
        approval = {"type": "approve", "principal": handle.principal.model_dump(mode="json"), "via": "ui"}
        args: dict[str, Any] | None = None
        if action == "approve" and args_text is not None and args_text.strip():
            try:
                args = _json_object(args_text, self.max_depth)
                if pending is not None and args == pending.args:
                    args = None  # unchanged: a plain approval
                elif pending is not None:
                    agent = self.runtime.agents.get(run.agent or "")
                    found = agent.tools.get(pending.tool_name) if agent is not None else None
                    if found is not None:
                        found.validate(args)
                    approval["type"] = "edit"
            except ToolError as exc:
                name = pending.tool_name if pending is not None else "the tool"
                return Outcome("invalid", f"The edited arguments do not fit {name}: {exc}")
        if action == "approve":
            approval["nonce"] = nonce
            return handle.approve(on.token, approval, args), lambda r: _recorded(r, tool_call_id, "nonce", nonce)
        if action == "reject":
            text = reason.strip() or "rejected in the web UI"
            return handle.reject(on.token, text), lambda r: _recorded(r, tool_call_id, "reason", text)
        # A resume leaves no record of its own: the run having left this suspension is the sign.
        return handle.resume(
            on.token, value
        ), lambda r: not (r.suspended_on is not None and r.suspended_on.token == on.token)

    async def _run(
        self,
        handle: SessionHandle,
        key: tuple[str, str],
        call: Coroutine[Any, Any, RunResult],
        action: Action,
        check: Callable[[RunState], bool],
    ) -> Outcome:
        run_id = key[0]
        recorded = asyncio.Event()

        def listen(event: SessionEvent) -> None:
            if event.type == "checkpoint" and event.data.get("run_id") == run_id:
                recorded.set()

        listener = handle.on_progress(listen)
        task = asyncio.get_running_loop().create_task(call)
        self._tasks.add(task)

        def finished(done: asyncio.Task[Any]) -> None:
            self._tasks.discard(done)
            self._claimed.discard(key)
            if not done.cancelled() and done.exception() is not None:
                error = done.exception()
                if not isinstance(error, (InvalidResumeToken, ToolError)):
                    _log.warning("a decision from the web UI failed: %s: %s", type(error).__name__, error)

        task.add_done_callback(finished)
        waiter = asyncio.ensure_future(recorded.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=RECORD_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            listener.dispose()
        # Recorded first means decided, whatever the run does next (a model error after an approval
        # is the run's failure, shown on its page, not the decision's); but the checkpoint may be
        # another decision's (an API call in this process): the stored run says whose it was.
        if recorded.is_set():
            stored = await self.store.load_run(run_id)
            if stored is not None and not check(stored):
                return Outcome("raced", "This call was decided elsewhere first; nothing was decided twice.")
        elif task.done() and not task.cancelled() and task.exception() is not None:
            error = task.exception()
            if isinstance(error, InvalidResumeToken):
                return Outcome("raced", "This call was decided elsewhere first; nothing was decided twice.")
            if isinstance(error, ToolError):
                return Outcome("invalid", str(error))
            if isinstance(error, RepertoryError):
                return Outcome("invalid", f"{type(error).__name__}: {error}")
            raise error  # type: ignore[misc]
        done = {"approve": "Approved", "reject": "Rejected", "resume": "Resumed"}[action]
        return Outcome("ok", f"{done}; the run goes on.")

    async def settle(self) -> None:
        """Wait until the decisions in flight have finished their drives (bound it with ``asyncio.timeout``)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Give decisions in flight a moment to finish, then stop waiting on them.

        Stopping only ends this waiter: a decision already in the session's mailbox goes on there.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await self.settle()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
