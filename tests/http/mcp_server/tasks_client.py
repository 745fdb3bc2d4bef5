"""The tasks extension as a client speaks it, on the official ``mcp`` client (which has no task helper of its own).

``Tasks`` is a ``ClientExtension``: a client built with ``extensions=[Tasks()]`` declares
``io.modelcontextprotocol/tasks`` on every request, and its ``call_tool`` claims a
``resultType: "task"`` answer and polls ``tasks/get`` until the task ends (answering nothing:
a task that asks for input fails the poll). ``get``, ``update`` and ``cancel`` send the three
methods with ``Mcp-Name`` set to the task id (the request's ``name_param``), as the extension
requires over HTTP.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import anyio
import mcp_types as t
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
POLL_S = 0.05
"""The tests poll faster than the server's suggested interval (a scripted turn takes milliseconds)."""


class CreateTaskResult(t.Result):
    """``tools/call``'s answer when the server made a task: flat task fields, no result yet."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskParams(t.RequestParams):
    task_id: str


class UpdateParams(t.RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class GetTaskRequest(t.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param: ClassVar[str] = "taskId"


class UpdateTaskRequest(t.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param: ClassVar[str] = "taskId"


class CancelTaskRequest(t.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param: ClassVar[str] = "taskId"


class DetailedTask(t.Result):
    """``tasks/get``'s answer: the task's fields and, by status, its result, error or input requests."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class Ack(t.Result):
    model_config = ConfigDict(extra="allow")


async def get(session: ClientSession, task_id: str) -> DetailedTask:
    """``tasks/get``."""
    return await session.send_request(GetTaskRequest(params=TaskParams(task_id=task_id)), DetailedTask)


async def update(session: ClientSession, task_id: str, responses: dict[str, t.ElicitResult]) -> Ack:
    """``tasks/update`` with elicitation results keyed as the task's ``inputRequests``."""
    dumped = {k: v.model_dump(by_alias=True, mode="json", exclude_none=True) for k, v in responses.items()}
    return await session.send_request(
        UpdateTaskRequest(params=UpdateParams(task_id=task_id, input_responses=dumped)), Ack
    )


async def cancel(session: ClientSession, task_id: str) -> Ack:
    """``tasks/cancel``."""
    return await session.send_request(CancelTaskRequest(params=TaskParams(task_id=task_id)), Ack)


async def until(session: ClientSession, task_id: str, *statuses: str) -> DetailedTask:
    """Poll ``tasks/get`` until the task is in one of ``statuses`` (a terminal status other than those fails)."""
    with anyio.fail_after(60):
        while True:
            task = await get(session, task_id)
            if task.status in statuses:
                return task
            assert task.status not in ("completed", "cancelled", "failed"), task
            await anyio.sleep(POLL_S)


async def start(client: Client, tool: str, arguments: dict[str, Any]) -> CreateTaskResult:
    """A ``tools/call`` answered with a task (the raw claim, not polled)."""
    created = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(created, CreateTaskResult), created
    return created


async def _resolve(created: CreateTaskResult, cc: ClaimContext) -> t.CallToolResult:
    task = await until(cc.session, created.task_id, "completed")
    return t.CallToolResult.model_validate(task.result)


class Tasks(ClientExtension):
    """Declares the tasks extension and resolves a task answer by polling it to its result."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        """``resultType: "task"`` answers are this extension's."""
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolve)]
