"""One call's conversation with a remote A2A agent, on the ``a2a-sdk`` client: find, send, follow, cancel.

``Remote`` wraps the SDK's ``Client`` for one tool call (one ``httpx`` client carrying the caller's
headers) and offers the few operations the exactly-once flow of ``repertory.a2a.tool`` is made of:
look for the task a context already holds (``ListTasks``), read a task (``GetTask``), send one
message, follow a task until it rests (``SubscribeToTask``, else ``GetTask`` polling) and cancel
it. A task *rests* when it waits for its caller (input or authorization required) or has ended.

Every request that is not a stream gets ``request_timeout`` seconds; a stream is read without one, since a
remote agent may work for as long as it needs and says so by streaming nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import cast

import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_data_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

__all__ = ["ENDED", "RESTING", "WAITING", "Remote", "answer_parts", "connect", "parts_text", "state_name", "task_text"]

_log = logging.getLogger("repertory.a2a")

ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""The states a task never leaves."""
WAITING = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
"""The states in which a task waits for its caller's next message."""
RESTING = ENDED | WAITING
"""The states a call stops following a task at."""
_POLL_S = 0.5
"""How often a task is read again where it cannot be streamed (the remote does not stream, a stream broke)."""


def state_name(state: TaskState) -> str:
    """A task state as A2A's JSON names it: ``input-required``, ``completed``, ..."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def parts_text(parts: list[Part]) -> str:
    """The text of message or artifact parts, one per line; their data parts as JSON where they have no text.

    An agent that says a thing twice, as text for a person and as data for a program (repertory's
    own questions do), is read as its text.
    """
    texts = [t for t in get_text_parts(parts) if t]
    if not texts:
        texts = [json.dumps(data, sort_keys=True) for data in get_data_parts(parts)]
    return "\n".join(texts)


def answer_parts(text: str) -> list[Part]:
    """The parts of an answer to a remote question: its text, and the JSON it holds as a data part, if it is JSON.

    A remote that asks a program (repertory's approvals want ``{"decision": "approve"}`` as data)
    reads the data part; one that asks a person reads the text.
    """
    parts = [Part(text=text)]
    try:
        value = json.loads(text)
    except ValueError:
        return parts
    if isinstance(value, dict | list):
        parts.append(new_data_part(value))
    return parts


def task_text(task: Task) -> str:
    """What a task answered: its artifacts' text, else the text of its last status message."""
    answer = "\n".join(t for t in (parts_text(list(a.parts)) for a in task.artifacts) if t)
    return answer or parts_text(list(task.status.message.parts))


@dataclass(frozen=True, slots=True)
class Remote:
    """The SDK client of one call, with the card it was made from and the timeout of its requests."""

    client: Client
    card: AgentCard
    timeout: float

    @property
    def streams(self) -> bool:
        """Whether the remote agent streams (its card says so): following a task then needs no polling."""
        return bool(self.card.capabilities.streaming)

    def _unary(self) -> ClientCallContext:
        return ClientCallContext(timeout=self.timeout)

    async def find(self, context_id: str, message_id: str) -> Task | None:
        """The task ``context_id`` holds (the one a message with ``message_id`` opened, if it says), or ``None``."""
        listed = await self.client.list_tasks(ListTasksRequest(context_id=context_id), context=self._unary())
        tasks: list[Task] = [t for t in listed.tasks if t.context_id == context_id]
        for task in tasks:
            if any(m.message_id == message_id for m in task.history):
                return task
        first: Task | None = tasks[0] if tasks else None
        return first

    async def get(self, task_id: str) -> Task:
        """The task as the remote holds it now, with its whole history."""
        return await self.client.get_task(GetTaskRequest(id=task_id), context=self._unary())

    async def send(self, message: Message) -> str | Message:
        """Send ``message``; the id of the task it went to, or the remote's direct answer (a message, no task).

        The stream of a streaming remote is read until the task rests, so a short task needs no
        second request; ``follow`` reads its end either way.
        """
        request = SendMessageRequest(message=message)
        task_id = message.task_id
        # A stream is read without a timeout; a non-streaming send returns at once (the client polls).
        context = None if self.streams else self._unary()
        async with aclosing(_generator(self.client.send_message(request, context=context))) as events:
            async for event in events:
                if event.HasField("message"):
                    return event.message
                task_id = _event_task_id(event) or task_id
                if _event_state(event) in RESTING:
                    break
        if not task_id:
            raise A2AError("the remote agent answered the message with neither a task nor a message")
        return task_id

    async def follow(self, task_id: str) -> Task:
        """The task once it rests: streamed where the remote streams, read again every half second otherwise."""
        while True:
            task = await self.get(task_id)
            if task.status.state in RESTING:
                return task
            if not await self._watch(task_id):
                await asyncio.sleep(_POLL_S)

    async def _watch(self, task_id: str) -> bool:
        """Listen until the task rests; False when it could not (no streaming, the stream ended or broke)."""
        if not self.streams:
            return False
        try:
            stream = self.client.subscribe(SubscribeToTaskRequest(id=task_id))
            async with aclosing(_generator(stream)) as events:
                async for event in events:
                    if _event_state(event) in RESTING:
                        return True
        except A2AError as exc:
            # A task that ended between the read and the subscription is refused a subscription.
            _log.debug("subscribing to remote task %s: %s; reading it again", task_id, exc)
        return False

    async def cancel(self, task_id: str) -> None:
        """Ask the remote agent to cancel the task."""
        await self.client.cancel_task(CancelTaskRequest(id=task_id), context=self._unary())


def _generator(stream: AsyncIterator[StreamResponse]) -> AsyncGenerator[StreamResponse, None]:
    """The SDK's event streams are async generators typed as iterators: closed early, they must be closed."""
    return cast(AsyncGenerator[StreamResponse, None], stream)


def _event_task_id(event: StreamResponse) -> str:
    kind = event.WhichOneof("payload")
    if kind == "task":
        return event.task.id
    if kind == "status_update":
        return event.status_update.task_id
    if kind == "artifact_update":
        return event.artifact_update.task_id
    return ""


def _event_state(event: StreamResponse) -> TaskState | None:
    kind = event.WhichOneof("payload")
    if kind == "task":
        return event.task.status.state
    if kind == "status_update":
        return event.status_update.status.state
    return None


@asynccontextmanager
async def connect(
    url: str, headers: Mapping[str, str], request_timeout: float, card: AgentCard | None = None
) -> AsyncIterator[Remote]:
    """A ``Remote`` for the agent at ``url`` (its card read from ``url``'s well-known path unless given).

    The ``httpx`` client is this call's: it carries ``headers`` (an API key, say) on every request,
    the card's included, and is closed when the block ends.
    """
    limits = httpx.Timeout(request_timeout, read=None)  # unary requests pass their own timeout; streams have none
    async with httpx.AsyncClient(headers=dict(headers), timeout=limits) as http:
        if card is None:
            card = await A2ACardResolver(http, url).get_agent_card(http_kwargs={"timeout": request_timeout})
        config = ClientConfig(streaming=True, polling=True, httpx_client=http)
        client = ClientFactory(config).create(card)
        try:
            yield Remote(client=client, card=card, timeout=request_timeout)
        finally:
            await client.close()
