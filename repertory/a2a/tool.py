"""``a2a_agent``: a remote A2A agent as a tool; each call is one remote task, never sent twice.

The model calls the tool with ``{"task": str}``; the call sends the task to the remote agent as
one A2A message and returns the text the remote task ends with. Exactly once across crashes
without trusting the remote to deduplicate: the message id and the context id of a call are
derived from the run id and the call id, both durable before the tool runs (the tool
``reattaches``: its call is committed first and, after a crash, run again). A call therefore first
asks the remote for the task its context already holds (``ListTasks`` by context id) and follows
that one to its end (``SubscribeToTask``/``GetTask``); it sends only when there is none. The message
id is the A2A idempotency key too, for a remote that deduplicates on it: that closes the one window
left, a send still in flight when the caller died.

A remote task that asks for input (``input-required``, or ``auth-required``) suspends the calling
run (``suspend(rerun=True)``: the payload carries the remote question), which therefore shows where
every suspension shows: the run's own session, and every ancestor's ``pending_approvals(tree=True)``
when the caller is a delegated child. The run records the waiting remote task in its scratch; the
value a human resumes the run with runs the same call again (``ctx.answer``), which sends it to
that remote task as its next message (once: its message id is derived from the call and the
round) and follows the task on: as text, and as a data part too when the answer is a JSON object
or array (what a program asking wants: a remote repertory agent's approval is answered with
``{"decision": "approve"}``). The call's result is what the remote task ends with. A remote task
that fails, is rejected or cancelled is an error result the model reads. A run cancelled while it
waits for such an answer (``cancel(tree=True)`` included) cancels that remote task (``abandon``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx
from a2a.types import AgentCard, Message, Part, Role, Task, TaskState
from a2a.utils.errors import A2AError, MethodNotFoundError, UnsupportedOperationError
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.a2a._remote import WAITING, Remote, answer_parts, connect, parts_text, state_name, task_text
from repertory.errors import ToolError
from repertory.runtime.tools import Tool, ToolContext, suspend

__all__ = ["SCRATCH_KEY", "A2AAgentTool", "WaitingTask", "a2a_agent", "call_ids"]

_log = logging.getLogger("repertory.a2a")

SCRATCH_KEY = "a2a"
"""The key of the run's scratch under which remote tasks waiting for input are kept, by call id."""
_IDS = uuid.UUID("4d1c9a7e-2b86-5f0a-9c3e-a2a0a2a0a2a0")
"""The namespace of the ids a call derives (uuid5): a fixed value, so every process derives the same."""
_TASK = Field(description="The task, stated fully: the remote agent sees nothing else of this conversation.")
_MAX_QUESTION = 2000


class WaitingTask(BaseModel):
    """A remote task that waits for its caller's answer, as the calling run's scratch keeps it."""

    model_config = ConfigDict(extra="ignore")

    task_id: str
    context_id: str
    state: str
    round: int = 1  # how many times this call's task has asked: each answer gets its own message id


def call_ids(ctx: ToolContext) -> tuple[str, str]:
    """The context id and message id of a call: the same in every attempt of the call, in any process."""
    seed = f"{ctx.run_id}/{ctx.call_id}"
    return str(uuid.uuid5(_IDS, seed + "/context")), str(uuid.uuid5(_IDS, seed + "/message"))


class A2AAgentTool(Tool):
    """The tool ``a2a_agent`` returns: each call is one task of the A2A agent at ``url``."""

    reattaches = True

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        description: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"a2a_agent needs the http(s) URL of an A2A agent, not {url!r}")
        if not timeout > 0:
            raise ValueError(f"a2a_agent's timeout must be a positive number of seconds, not {timeout!r}")
        name = name or _name_from(url)
        if description is None:
            description = (
                f"Send a task to the remote agent {name!r} (over A2A) and return its answer; it sees "
                "nothing of this conversation but the task. If it asks for input, this run waits for "
                "a human's answer, which goes to the remote agent."
            )
        super().__init__(self.send_task, name=name, description=description)
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self._card: AgentCard | None = None  # read once, on the first call

    async def send_task(self, ctx: ToolContext, task: str = _TASK) -> JsonValue:
        """Send ``task`` (or answer this tool's waiting remote task with it) and return the remote's final text."""
        waiting = _waiting(ctx.scratch, ctx.call_id)
        context_id, message_id = call_ids(ctx)
        task_id: str | None = None
        try:
            async with connect(self.url, self.headers, self.timeout, self._card) as remote:
                self._card = remote.card
                try:
                    if waiting is None:
                        found = await self._start(remote, context_id, message_id, task)
                    else:  # run again with the human's answer to the remote question
                        answer = ctx.answer if isinstance(ctx.answer, str) else json.dumps(ctx.answer)
                        round_id = str(uuid.uuid5(_IDS, f"{message_id}/answer/{waiting.round}"))
                        found = await self._answer(remote, waiting, round_id, answer)
                    if isinstance(found, Message):  # an agent that answers at once, without a task
                        return parts_text(list(found.parts))
                    task_id = found
                    done = await remote.follow(task_id)
                except asyncio.CancelledError:
                    if task_id is not None and not ctx.detaching():
                        await _cancel(remote, task_id)
                    raise
        except (A2AError, httpx.HTTPError) as exc:
            raise ToolError(f"the remote agent {self.name!r} at {self.url} failed to answer: {exc}") from exc
        return self._outcome(ctx, done)

    async def _start(self, remote: Remote, context_id: str, message_id: str, text: str) -> str | Message:
        """The task a first attempt of this call opened, or a new one: sent only when there is none."""
        found = await _find(remote, context_id, message_id)
        if found is not None:
            return found.id
        message = Message(message_id=message_id, context_id=context_id, role=Role.ROLE_USER, parts=[Part(text=text)])
        try:
            return await remote.send(message)
        except A2AError:
            # It may have arrived before the connection broke: then the task is there to follow.
            found = await _find(remote, context_id, message_id)
            if found is None:
                raise
            return found.id

    async def _answer(self, remote: Remote, waiting: WaitingTask, message_id: str, text: str) -> str | Message:
        """Send ``text`` as the next message of the waiting task, unless this call sent it already."""
        current = await remote.get(waiting.task_id)
        sent = any(m.message_id == message_id for m in current.history)
        if sent or current.status.state not in WAITING:
            return current.id  # a first attempt sent it, or the task moved on without it
        message = Message(
            message_id=message_id,
            context_id=current.context_id,
            task_id=current.id,
            role=Role.ROLE_USER,
            parts=answer_parts(text),
        )
        return await remote.send(message)

    async def abandon(self, run_id: str, call_id: str, scratch: Mapping[str, JsonValue]) -> None:
        """The run waiting for this call's remote question was cancelled: cancel the remote task too."""
        waiting = _waiting(scratch, call_id)
        if waiting is None:
            return
        async with connect(self.url, self.headers, self.timeout, self._card) as remote:
            await remote.cancel(waiting.task_id)

    def _outcome(self, ctx: ToolContext, done: Task) -> JsonValue:
        """The call's result from the task it rests on; a task waiting for input suspends the run."""
        state = done.status.state
        bag = ctx.scratch.get(SCRATCH_KEY)
        held = dict(bag) if isinstance(bag, dict) else {}
        said = parts_text(list(done.status.message.parts))
        if state in WAITING:
            before = _waiting(ctx.scratch, ctx.call_id)
            record = WaitingTask(
                task_id=done.id,
                context_id=done.context_id,
                state=state_name(state),
                round=1 if before is None else before.round + 1,
            )
            held[ctx.call_id] = record.model_dump()
            ctx.scratch[SCRATCH_KEY] = held
            question = said or f"the remote task is {state_name(state)}"
            suspend(
                reason=f"the remote agent {self.name!r} asks: {question[:_MAX_QUESTION]}",
                payload={
                    "a2a": {"agent": self.name, "url": self.url, **record.model_dump()},
                    "question": question,
                },
                rerun=True,
            )
        if ctx.call_id in held:
            del held[ctx.call_id]
            ctx.scratch[SCRATCH_KEY] = held
        if state == TaskState.TASK_STATE_COMPLETED:
            return task_text(done)
        verb = {
            TaskState.TASK_STATE_FAILED: "failed",
            TaskState.TASK_STATE_REJECTED: "rejected the task",
            TaskState.TASK_STATE_CANCELED: "cancelled the task",
        }.get(state, f"ended the task as {state_name(state)}")
        raise ToolError(f"the remote agent {self.name!r} {verb}" + (f": {said}" if said else ""))


def a2a_agent(
    url: str,
    name: str | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    description: str | None = None,
    timeout: float = 30.0,
) -> Tool:
    """A tool that sends its ``{"task": str}`` to the A2A agent at ``url`` and returns the task's final text.

    ``url`` is the agent's base URL: its card is read from ``url/.well-known/agent-card.json`` on
    the first call (``repertory serve`` serves one at ``/a2a/{assistant_id}``). ``name`` defaults to
    the URL's last path segment; ``headers`` go with every request (``{"Authorization": "Bearer ..."}``);
    ``timeout`` bounds each request but the streams a task's progress arrives on.

    Each call is one remote task, sent once: its message id is derived from the run and the call,
    committed before the send, so after a crash the call finds the same remote task instead of
    sending again. A remote ``input-required`` suspends the calling run (so it shows at the root,
    like a delegated child's suspension); the value the run is resumed with goes to that remote
    task, and the call goes on with it. A remote failure is an error result the model reads.
    """
    return A2AAgentTool(url, name=name, headers=headers, description=description, timeout=timeout)


def _name_from(url: str) -> str:
    """A tool name from an agent URL: its last path segment, else its host, in the characters models accept."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    raw = segments[-1] if segments else (parts.hostname or "remote_agent")
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:64] or "remote_agent"


def _waiting(scratch: Mapping[str, JsonValue], call_id: str) -> WaitingTask | None:
    """The remote task of this call that waits for an answer, as the run's scratch recorded it."""
    bag = scratch.get(SCRATCH_KEY)
    entry = bag.get(call_id) if isinstance(bag, dict) else None
    return WaitingTask.model_validate(entry) if isinstance(entry, dict) else None


async def _find(remote: Remote, context_id: str, message_id: str) -> Task | None:
    """The task the context holds; ``None`` also where the remote cannot list tasks (then nothing can be found)."""
    try:
        return await remote.find(context_id, message_id)
    except (MethodNotFoundError, UnsupportedOperationError):
        _log.warning(
            "the A2A agent cannot list tasks: a call recovered after a crash sends again "
            "(with the same message id, which the remote may deduplicate on)"
        )
        return None


async def _cancel(remote: Remote, task_id: str) -> None:
    """Cancel the remote task of a call whose run is cancelled, even while this task is being cancelled."""
    with contextlib.suppress(A2AError, httpx.HTTPError):
        await asyncio.shield(remote.cancel(task_id))
