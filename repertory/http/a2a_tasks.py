"""A turn as an A2A task: its state, question, history and reply, read from the store on every request.

A task is a turn: its id is the turn's submission id and its ``contextId`` the turn's session. The
state is the stored turn's and its run's, never a copy kept by a process, so any server process
on the same store answers for any task, also after the one that started it died:

- ``submitted``: queued; ``working``: running, or asleep on a durable timer;
- ``input-required``: the run waits for an approval or a ``suspend()`` answer, or a delegated
  child of the turn does (``views.nested_wait``). The status message asks the question twice: as
  text for a person, and as a data part for a program (``question_data``);
- ``completed`` with one artifact, ``reply``, holding the final text; ``failed`` with the error's
  message as the status message; ``canceled``.

``history`` is the turn's messages (from its input to its latest checkpoint: the user's and the
agent's text; tool calls stay inside the session), cut to ``historyLength`` as A2A says.
``RepertoryTaskStore`` is the SDK's ``TaskStore`` over these reads: tasks are written by the
session tree (a turn's status has one writer), so its ``save`` and ``delete`` refuse.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    UnsupportedOperationError,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    apply_history_length,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
    validate_history_length,
    validate_page_size,
)
from google.protobuf import json_format, struct_pb2

from repertory.core.result import reply_text
from repertory.core.state import RunState
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.views import nested_wait
from repertory.runtime import Agent

__all__ = [
    "REPLY_ARTIFACT",
    "TERMINAL",
    "RepertoryTaskStore",
    "TaskRead",
    "question_data",
    "read_task",
    "reply_artifact",
    "reply_of",
    "task_of",
]

REPLY_ARTIFACT = "reply"
"""The id of a task's one artifact: the turn's final text."""
TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED})
_ASKING = ("approval", "suspend")


@dataclass(frozen=True)
class TaskRead:
    """One read of a turn as a task: the turn, its run, the A2A state, and who asks when it is ``input-required``.

    ``asking`` is the suspended run whose question the task shows: the turn's own, or a delegated
    child's (``asking.thread_id`` is then the child's session, where the answer goes).
    """

    turn: TurnRecord
    run: RunState | None
    state: TaskState
    asking: RunState | None = None
    agent: Agent | None = None

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or canceled)."""
        return self.state in TERMINAL


def _ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


async def read_task(gw: Gateway, turn: TurnRecord) -> TaskRead:
    """Where the turn stands now, as an A2A state (see the module docstring)."""
    run = await gw.store.load_run(turn.run_id)
    status = turn.status
    if status == "queued":
        return TaskRead(turn, run, TaskState.TASK_STATE_SUBMITTED)
    if status == "done":
        return TaskRead(turn, run, TaskState.TASK_STATE_COMPLETED)
    if status == "error":
        return TaskRead(turn, run, TaskState.TASK_STATE_FAILED)
    if status == "cancelled":
        return TaskRead(turn, run, TaskState.TASK_STATE_CANCELED)
    if status == "suspended" and run is not None and run.status == "suspended":
        on = run.suspended_on
        if on is not None and on.kind in _ASKING:
            agent = gw.agents.get(run.agent or "")
            return TaskRead(turn, run, TaskState.TASK_STATE_INPUT_REQUIRED, run, agent)
        return TaskRead(turn, run, TaskState.TASK_STATE_WORKING)
    nested = await nested_wait(gw.store, turn.session_id)
    if nested is not None:
        child_run, child = nested
        on = child_run.suspended_on
        if on is not None and on.kind in _ASKING:
            agent = gw.agents.get(child.agent or child_run.agent or "")
            return TaskRead(turn, run, TaskState.TASK_STATE_INPUT_REQUIRED, child_run, agent)
    return TaskRead(turn, run, TaskState.TASK_STATE_WORKING)


def question_data(run: RunState, agent: Agent | None) -> dict[str, Any]:
    """What a suspended run asks, as a program reads it (the ``input-required`` status message's data part).

    ``{"kind": "approval", "calls": [{"tool_call_id", "tool_name", "args", "description"}]}`` for
    tool calls waiting for approval (answered in order: approve, reject or edit each), or
    ``{"kind": "input", "reason", "payload"}`` for a ``suspend()`` (answered with text or data).
    """
    on = run.suspended_on
    assert on is not None
    if on.kind == "approval":
        calls = []
        for call in (p for p in run.pending if p.kind == "approval"):
            tool = agent.tools.get(call.tool_name) if agent is not None else None
            described = tool.description.strip().splitlines()[0] if tool is not None and tool.description else ""
            calls.append(
                {
                    "tool_call_id": call.tool_call_id,
                    "tool_name": call.tool_name,
                    "args": call.args,
                    "description": described,
                }
            )
        return {"kind": "approval", "calls": calls}
    return {"kind": "input", "reason": on.reason, "payload": on.payload}


def _question_text(data: dict[str, Any], agent: Agent | None) -> str:
    who = repr(agent.name) if agent is not None else "The agent"
    if data["kind"] == "approval":
        asked = "; ".join(
            f"{c['tool_name']}({json.dumps(c['args'], ensure_ascii=False, sort_keys=True)})" for c in data["calls"]
        )
        return (
            f"{who} wants to call {asked}. Answer with a data part "
            '{"decision": "approve" | "reject" | "edit", "reason"?: str, "args"?: {...}} '
            "(or a list of them, one per call)."
        )
    shown = "" if data["payload"] is None else ": " + json.dumps(data["payload"], ensure_ascii=False, sort_keys=True)
    return f"{who} asks ({data['reason'] or 'input needed'}){shown}. Answer with text (or a data part)."


def _token_digest(run: RunState) -> str:
    on = run.suspended_on
    token = on.token if on is not None else ""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def _status(read: TaskRead) -> TaskStatus:
    turn = read.turn
    status = TaskStatus(state=read.state, timestamp=_ms(turn.updated_at))

    def said(message_id: str, parts: list[Part]) -> Message:
        return Message(
            message_id=message_id,
            task_id=turn.submission_id,
            context_id=turn.session_id,
            role=Role.ROLE_AGENT,
            parts=parts,
        )

    if read.state == TaskState.TASK_STATE_INPUT_REQUIRED and read.asking is not None:
        data = question_data(read.asking, read.agent)
        # One id per question: a question asked again after an answer is another message.
        parts = [Part(text=_question_text(data, read.agent)), Part(data=_value(data))]
        status.message.CopyFrom(said(f"{turn.submission_id}-ask-{_token_digest(read.asking)}", parts))
    elif read.state == TaskState.TASK_STATE_FAILED:
        why = turn.error.message if turn.error is not None else "the turn failed"
        status.message.CopyFrom(said(f"{turn.submission_id}-failed", [Part(text=why)]))
    return status


def _value(data: Any) -> struct_pb2.Value:
    """``data`` as a ``google.protobuf.Value``, what a data ``Part`` holds."""
    value = struct_pb2.Value()
    json_format.ParseDict(data, value)
    return value


def reply_of(read: TaskRead) -> str | None:
    """The final text of a completed task (``None`` until then)."""
    if read.state != TaskState.TASK_STATE_COMPLETED or read.run is None:
        return None
    return reply_text(read.run) or ""


def reply_artifact(text: str) -> Artifact:
    """The task's ``reply`` artifact holding ``text``."""
    return Artifact(artifact_id=REPLY_ARTIFACT, name="reply", parts=[Part(text=text)])


async def _history(gw: Gateway, read: TaskRead) -> list[Message]:
    """The turn's text messages: its input, then what the agent wrote up to its latest checkpoint."""
    turn, run = read.turn, read.run
    first = Message(
        message_id=f"{turn.submission_id}-input",
        role=Role.ROLE_USER,
        parts=[Part(text=turn.message.text)],
        task_id=turn.submission_id,
        context_id=turn.session_id,
    )
    if run is None or run.history_revision_id is None or run.input_depth is None:
        return [first]
    if run.status == "done" and run.step_index == 1 and isinstance(run.result, str):
        # One model request, no tool: the input and the reply are the whole exchange. Said without
        # reading the history, whose lineage grows with the conversation (every earlier turn).
        reply = Message(
            message_id=f"{turn.submission_id}-reply",
            role=Role.ROLE_AGENT,
            parts=[Part(text=run.result)],
            task_id=turn.submission_id,
            context_id=turn.session_id,
        )
        return [first, reply] if run.result else [first]
    history = await gw.store.load_history(run.history_revision_id)
    if history is None:
        return [first]
    out: list[Message] = []
    for rev in history.lineage():
        if rev.depth <= run.input_depth:
            continue
        entry = history.entry(rev.entry_id)
        if entry is None or entry.message.role not in ("user", "assistant") or not entry.message.text:
            continue
        role = Role.ROLE_USER if entry.message.role == "user" else Role.ROLE_AGENT
        out.append(
            Message(
                message_id=entry.id,
                role=role,
                parts=[Part(text=entry.message.text)],
                task_id=turn.submission_id,
                context_id=turn.session_id,
            )
        )
    return out or [first]


async def task_of(gw: Gateway, read: TaskRead, *, history: bool = True, artifacts: bool = True) -> Task:
    """The ``Task`` of a read: status, the ``reply`` artifact once completed, and (``history``) its messages."""
    turn = read.turn
    task = Task(id=turn.submission_id, context_id=turn.session_id, status=_status(read))
    text = reply_of(read)
    if artifacts and text is not None:
        task.artifacts.append(reply_artifact(text))
    if history:
        task.history.extend(await _history(gw, read))
    return task


class RepertoryTaskStore(TaskStore):
    """The SDK's ``TaskStore`` over repertory's store: tasks the caller may see, of one served agent.

    Reads only: a task's state has one writer, the session tree, so ``save`` and ``delete`` refuse
    (``UnsupportedOperationError``); a task is deleted with its session. The caller travels in the
    ``ServerCallContext`` (``CALLER`` in its state, put there by the endpoint), so another owner's
    task is ``None``, exactly as a task that does not exist.
    """

    CALLER = "repertory_caller"
    """Where the endpoint leaves the request's ``Caller`` in ``ServerCallContext.state``."""

    def __init__(self, gw: Gateway, assistant_id: str) -> None:
        self._gw = gw
        self.assistant_id = assistant_id

    @classmethod
    def caller_of(cls, context: ServerCallContext) -> Caller:
        """The request's caller (every request comes through the endpoint, which puts it there)."""
        caller = context.state.get(cls.CALLER)
        if not isinstance(caller, Caller):  # pragma: no cover - only the endpoint builds contexts
            raise InvalidParamsError(message="no caller for this request")
        return caller

    async def session(self, session_id: str, caller: Caller) -> SessionRecord | None:
        """The caller's session of this agent, or ``None`` (missing, another owner's, or another agent's)."""
        try:
            record = await self._gw.record(session_id, caller)
        except HttpError:
            return None
        return record if record.agent == self.assistant_id else None

    async def read(self, task_id: str, context: ServerCallContext) -> TaskRead | None:
        """The task as it stands, or ``None`` when the caller may not see it (see the class docstring)."""
        turn = await self._gw.store.load_turn(task_id) if 0 < len(task_id) <= 256 else None
        if turn is None or await self.session(turn.session_id, self.caller_of(context)) is None:
            return None
        return await read_task(self._gw, turn)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task with its whole history, or ``None``."""
        read = await self.read(task_id, context)
        return None if read is None else await task_of(self._gw, read)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks of this agent, newest first, filtered and paged as ``ListTasks`` says."""
        validate_history_length(params)
        page_size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        validate_page_size(page_size)
        caller = self.caller_of(context)
        if params.context_id:
            record = await self.session(params.context_id, caller)
            records = [] if record is None else [record]
        else:
            records = [r for r in await self._gw.visible(caller) if r.agent == self.assistant_id]
        after_ns = params.status_timestamp_after.ToNanoseconds() if params.HasField("status_timestamp_after") else None
        reads: list[TaskRead] = []
        for record in records:
            for turn in await self._gw.store.list_turns(record.session_id):
                if after_ns is not None and turn.updated_at * 1_000_000 < after_ns:
                    continue
                read = await read_task(self._gw, turn)
                if params.status and read.state != params.status:
                    continue
                reads.append(read)
        reads.sort(key=lambda r: (r.turn.updated_at, r.turn.submission_id), reverse=True)
        total = len(reads)
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None or cursor.timestamp_ns is None:
                raise InvalidParamsError(message="page_token is not one this server gave")
            at = cursor.sort_key()[1:]
            reads = [r for r in reads if (r.turn.updated_at * 1_000_000, r.turn.submission_id) < at]
        page, rest = reads[:page_size], reads[page_size:]
        tasks = []
        for read in page:
            task = await task_of(self._gw, read, artifacts=params.include_artifacts)
            tasks.append(apply_history_length(task, params))
        token = ""
        if rest and page:
            last = page[-1].turn
            token = encode_list_tasks_cursor(ListTasksCursor(last.updated_at * 1_000_000, last.submission_id))
        return ListTasksResponse(tasks=tasks, next_page_token=token, page_size=page_size, total_size=total)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Refused: a task is a turn, written by the session tree."""
        raise UnsupportedOperationError(message="tasks are turns, written by the session tree")

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Refused: a task goes with its session."""
        raise UnsupportedOperationError(message="a task is deleted with its session (DELETE /threads/{id})")
