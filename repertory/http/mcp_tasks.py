"""The MCP tasks extension (``io.modelcontextprotocol/tasks``): a tool call as a durable turn any process answers for.

A client that declares the extension on its ``tools/call`` (the 2026-07-28 per-request
capabilities) gets a task instead of waiting: the task id is the turn's submission id, returned
as soon as the turn is durable (``SessionHandle.send`` returns then), so a ``tasks/get`` for it
resolves at once, on this process or any other on the same store. Nothing about a task lives in a
process's memory: ``tasks/get`` reads the stored turn and its run (``repertory.http.mcp_turns``),
so after the process that started it dies, the process that serves the session re-drives the
turn (as it does for every open turn) and any process answers for it.

- ``tasks/get``: ``working`` (queued, running, or asleep on a timer), ``input_required`` with the
  turn's questions as ``inputRequests`` (``repertory.http.mcp_input``: its pending approvals or
  its ``suspend()``), ``completed`` with the tool result inlined (a failed turn is ``completed``
  with ``isError``: the extension keeps ``failed`` for JSON-RPC errors, and a turn never ends in
  one), or ``cancelled``.
- ``tasks/update``: answers the questions through the run's single-use tokens, exactly once. An
  update none of whose keys is live is refused with invalid params ("already answered"), though
  the extension says a server SHOULD ignore it: the issue's exactly-once is the stronger promise,
  and a client told "ignored" could not tell a lost answer from a late one. The ack comes once
  the answer is accepted; the turn goes on in the background.
- ``tasks/cancel``: cancels the turn through the tree; an ack for a finished task too.
- ``subscriptions/listen`` with ``notifications.taskIds``: ``notifications/tasks`` carrying what
  ``tasks/get`` would say, once for each task when the stream opens and again at every change the
  session's event log shows, until every task on the stream has ended (then the stream closes).

Every task method needs the 2026-07-28 era (else method not found) and the extension on the
request (else -32021); over HTTP its ``Mcp-Name`` header must be the task id (else -32020). A
task is its session's: another owner's task id is "not found", the same answer as an unknown one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from typing import Any, Literal, cast

import mcp_types as t
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from repertory.core.tree import SessionEvent, TurnRecord
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.mcp_input import InputRefused, answer
from repertory.http.mcp_server import CallerOf, Ctx
from repertory.http.mcp_turns import McpCallError, StartedTurn, TurnOutcome, turn_outcome

__all__ = ["POLL_INTERVAL_MS", "TASKS", "McpTasks", "TaskStatus", "UpdateTaskParams", "detailed_task"]

TASKS = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised in ``server/discover`` and declared by a client per request."""
POLL_INTERVAL_MS = 1000
"""How often a client should poll ``tasks/get`` (a turn is a model's work: seconds, not milliseconds)."""

TaskStatus = Literal["working", "input_required", "completed", "cancelled", "failed"]

_STATUS: dict[str, TaskStatus] = {
    "running": "working",
    "needs_input": "input_required",
    "done": "completed",
    "error": "completed",  # the agent failed: a tool result with isError, not a JSON-RPC error
    "cancelled": "cancelled",
}
_TERMINAL = frozenset({"completed", "cancelled", "failed"})


class UpdateTaskParams(t.RequestParams):
    """``tasks/update``'s params: the task and the answers to its ``inputRequests``, keyed as they were."""

    task_id: str
    input_responses: t.InputResponses


class _TaskNotification(t.Notification[dict[str, Any], Literal["notifications/tasks"]]):
    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _task_fields(turn: TurnRecord, status: TaskStatus, poll_interval_ms: int) -> dict[str, Any]:
    """The ``Task`` fields every task shape carries. ``ttlMs`` is null: a task lives as long as its session."""
    return {
        "taskId": turn.submission_id,
        "status": status,
        "createdAt": _iso(turn.created_at),
        "lastUpdatedAt": _iso(turn.updated_at),
        "ttlMs": None,
        "pollIntervalMs": poll_interval_ms,
    }


def detailed_task(outcome: TurnOutcome, poll_interval_ms: int = POLL_INTERVAL_MS) -> dict[str, Any]:
    """The ``DetailedTask`` of a turn's outcome: what ``tasks/get`` returns and ``notifications/tasks`` carries.

    A dict, not a model: the SDK dumps models without their ``None`` fields, and ``ttlMs: null``
    is required.
    """
    assert outcome.turn is not None
    status = _STATUS[outcome.state]
    task = _task_fields(outcome.turn, status, poll_interval_ms)
    if status == "input_required":
        task["statusMessage"] = "the agent waits for an answer (tasks/update)"
        task["inputRequests"] = {
            key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, request in outcome.input_requests.items()
        }
    elif status == "completed":
        assert outcome.result is not None
        task["result"] = outcome.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if outcome.state == "error":
            task["statusMessage"] = "the turn failed; the result says why"
    elif status == "cancelled":
        task["statusMessage"] = "the turn was cancelled"
    return task


def _declares(ctx: Ctx) -> bool:
    """Whether this request is of the 2026-07-28 era and declares the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and TASKS in (capabilities.extensions or {})


def _not_found(task_id: str) -> MCPError:
    return MCPError(INVALID_PARAMS, "Task not found", data={"taskId": task_id})


class McpTasks:
    """The tasks extension for ``repertory.http.mcp_server.build_server`` (its ``TaskHooks``).

    Built whole from the gateway and how a request names its caller (the same ``caller_of`` the
    server's other handlers use); ``register`` adds the methods and the advertisement.
    """

    def __init__(self, gw: Gateway, *, caller_of: CallerOf, poll_interval_ms: int = POLL_INTERVAL_MS) -> None:
        self._gw = gw
        self._caller_of = caller_of
        self._poll_ms = poll_interval_ms

    def register(self, server: Server[Any]) -> None:
        """Advertise the extension and serve ``tasks/get|update|cancel`` and task ``subscriptions/listen``.

        ``tasks/result`` and ``tasks/list`` (the extension's first draft) stay unserved: method not found.
        """
        server.extensions[TASKS] = {}
        server.add_request_handler("tasks/get", t.GetTaskRequestParams, self._get)
        server.add_request_handler("tasks/update", UpdateTaskParams, self._update)
        server.add_request_handler("tasks/cancel", t.CancelTaskRequestParams, self._cancel)
        server.add_request_handler("subscriptions/listen", t.SubscriptionsListenRequestParams, self._listen)

    async def maybe_task(self, ctx: Ctx, started: StartedTurn) -> dict[str, Any] | None:
        """The ``CreateTaskResult`` for a just-started, durable turn when the request declares the extension.

        Every turn of a declaring client is a task: a turn may take minutes, and the client said it
        can poll. ``None`` (answer the call now) otherwise: a task never goes to a client that did
        not ask for one.
        """
        if not _declares(ctx):
            return None
        turn = await self._gw.store.load_turn(started.submission_id)
        if turn is None:  # pragma: no cover - start_turn returns once the turn is stored
            raise MCPError(INVALID_PARAMS, "the turn was not stored")
        return {"resultType": "task", **_task_fields(turn, "working", self._poll_ms)}

    # -- the methods ----------------------------------------------------------------------------

    async def _task(self, ctx: Ctx, task_id: str) -> tuple[Caller, TurnRecord]:
        """The caller and the stored turn a task method names, after every check the module docstring lists."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(METHOD_NOT_FOUND, "Method not found")
        require_client_extension(ctx, TASKS)
        request = ctx.request
        if request is not None and getattr(request, "headers", None) is not None:
            named = request.headers.get("mcp-name")
            if named != task_id:
                raise MCPError(HEADER_MISMATCH, "The Mcp-Name header must be the taskId", data={"header": "Mcp-Name"})
        caller = self._caller_of(ctx)
        turn = await self._gw.store.load_turn(task_id)
        if turn is None:
            raise _not_found(task_id)
        try:
            await self._gw.record(turn.session_id, caller)
        except HttpError:
            raise _not_found(task_id) from None  # another owner's task reads as no task at all
        return caller, turn

    async def _outcome(self, caller: Caller, turn: TurnRecord) -> TurnOutcome:
        try:
            return await turn_outcome(self._gw, caller, turn.session_id, turn.submission_id, wait=False, checked=True)
        except McpCallError:
            raise _not_found(turn.submission_id) from None

    async def _get(self, ctx: Ctx, params: t.GetTaskRequestParams) -> dict[str, Any]:
        caller, turn = await self._task(ctx, params.task_id)
        return detailed_task(await self._outcome(caller, turn), self._poll_ms)

    async def _update(self, ctx: Ctx, params: UpdateTaskParams) -> dict[str, Any]:
        caller, turn = await self._task(ctx, params.task_id)
        # The questions are the turn's own, or those of a delegated child it waits for: answered there.
        asks = (await self._outcome(caller, turn)).asks or (turn.session_id, turn.run_id)
        try:
            await answer(self._gw, caller, *asks, params.input_responses, wait=False)
        except InputRefused as exc:
            raise MCPError(INVALID_PARAMS, "already answered" if exc.already_answered else str(exc)) from None
        return {}

    async def _cancel(self, ctx: Ctx, params: t.CancelTaskRequestParams) -> dict[str, Any]:
        caller, turn = await self._task(ctx, params.task_id)
        if turn.status not in ("done", "error", "cancelled"):
            handle = await self._gw.runtime.session(turn.session_id, caller.principal)
            await handle.get_turn(turn.submission_id).cancel()
        return {}

    # -- status notifications ---------------------------------------------------------------------

    async def _listen(self, ctx: Ctx, params: t.SubscriptionsListenRequestParams) -> t.SubscriptionsListenResult:
        """One listen stream of ``notifications/tasks`` for the requested tasks the caller may see.

        The acknowledgement names the tasks honoured (unknown and other owners' ids are left out,
        and so is every other kind of notification: the server publishes none). Each honoured
        task's current state follows at once, then each change, read again from the store at every
        event of its session's log; the stream ends when every honoured task has ended.
        """
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(METHOD_NOT_FOUND, "Method not found")
        if ctx.request_id is None:
            raise MCPError(INVALID_PARAMS, "subscriptions/listen needs a request id")
        requested = (params.notifications.model_extra or {}).get("taskIds") or []
        if requested:
            require_client_extension(ctx, TASKS)
        if not isinstance(requested, list) or not all(isinstance(i, str) for i in requested):
            raise MCPError(INVALID_PARAMS, "notifications.taskIds is a list of task ids")
        caller = self._caller_of(ctx)
        turns: dict[str, TurnRecord] = {}
        for task_id in dict.fromkeys(cast(list[str], requested)):
            turn = await self._gw.store.load_turn(task_id)
            if turn is None:
                continue
            try:
                await self._gw.record(turn.session_id, caller)
            except HttpError:
                continue  # another owner's task: not honoured, as an unknown one
            turns[task_id] = turn
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        honored = t.SubscriptionFilter.model_validate({"taskIds": list(turns)})
        await ctx.session.send_notification(
            t.SubscriptionsAcknowledgedNotification(
                params=t.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            ),
            related_request_id=ctx.request_id,
        )
        await self._follow(ctx, caller, turns, meta)
        return t.SubscriptionsListenResult.model_validate({"_meta": meta})

    async def _follow(self, ctx: Ctx, caller: Caller, turns: dict[str, TurnRecord], meta: dict[str, Any]) -> None:
        """Send each task's state, then its changes, until all have ended."""
        sessions = {turn.session_id for turn in turns.values()}
        marks = {sid: await self._gw.store.last_event_seq(sid) for sid in sessions}  # before the first read
        last: dict[str, tuple[Any, ...]] = {}
        open_ids = set(turns)

        async def send(task_id: str) -> None:
            turn = await self._gw.store.load_turn(task_id)
            if turn is None:
                open_ids.discard(task_id)
                return
            task = detailed_task(await self._outcome(caller, turn), self._poll_ms)
            seen = (task["status"], tuple(task.get("inputRequests", ())))
            if last.get(task_id) != seen:
                last[task_id] = seen
                note = _TaskNotification(params={**task, "_meta": meta})
                await ctx.session.send_notification(cast(t.ServerNotification, note), related_request_id=ctx.request_id)
            if task["status"] in _TERMINAL:
                open_ids.discard(task_id)

        for task_id in turns:
            await send(task_id)
        if not open_ids:
            return
        events: asyncio.Queue[SessionEvent] = asyncio.Queue()
        readers = [asyncio.create_task(self._read(sid, marks[sid], caller, events)) for sid in sessions]
        try:
            while open_ids:
                event = await events.get()
                if event.submission_id in open_ids:
                    await send(event.submission_id)
        finally:
            for reader in readers:
                reader.cancel()
            for reader in readers:
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

    async def _read(self, session_id: str, after: int, caller: Caller, into: asyncio.Queue[SessionEvent]) -> None:
        handle = await self._gw.runtime.session(session_id, caller.principal)
        events: AsyncIterator[SessionEvent] = handle.events(after)
        try:
            async for event in events:
                if event.seq is not None:  # stored events only: a live delta changes no task's status
                    into.put_nowait(event)
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()
