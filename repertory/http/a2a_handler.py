"""``A2aHandler``: the SDK's ``RequestHandler`` for one served agent, every method through the session tree.

The SDK's JSON-RPC dispatcher parses and answers the protocol; this handler decides. A task is a
turn and a ``contextId`` a session (``repertory.http.a2a_tasks``):

- ``SendMessage`` / ``SendStreamingMessage`` without a ``taskId`` queue the message's text as a
  turn (``SessionHandle.send``: durable before anything is answered) in the session ``contextId``
  names (created on first use for the caller's owner, of this agent; another owner's id is
  refused as every route that creates threads refuses it), or in a new session. With a
  ``taskId`` the message answers that task's question (``repertory.http.a2a_answers``: exactly
  once); a task that asks nothing takes no message (``UnsupportedOperationError``: an ended task
  is never restarted, and a working one is cancelled or waited for). A blocking send returns
  when the task rests (ends or asks); ``returnImmediately`` returns the task as it is (an answer
  still waits until it is taken, so a refused one is never acknowledged); the stream is
  ``repertory.http.a2a_stream``'s. A ``taskPushNotificationConfig`` is stored with the turn.
- ``SubscribeToTask`` replays the task's stream from its start, on any process.
- ``GetTask`` (``historyLength``), ``ListTasks`` (the caller's tasks of this agent), ``CancelTask``
  (through the tree; an ended task is ``TaskNotCancelableError``).
- Push notification configs: ``repertory.http.a2a_push`` on the server's durable webhooks.

A task the caller may not see (another owner's, or another agent's) is ``TaskNotFoundError``, the
answer an unknown id gets.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    ExtendedAgentCardNotConfiguredError,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from google.protobuf.json_format import MessageToDict

from repertory.core.tree import TurnRecord
from repertory.http.a2a_answers import AnswerRefused, decide, message_text
from repertory.http.a2a_push import DELETED, A2aConfigs, config_of
from repertory.http.a2a_stream import StreamEvent, follow, replay_start
from repertory.http.a2a_tasks import RepertoryTaskStore, TaskRead, read_task, task_of
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.views import until_rest
from repertory.http.webhooks import Webhooks

__all__ = ["A2aHandler"]


@contextmanager
def _as_a2a() -> Iterator[None]:
    """repertory's refusals as A2A errors: a missing thing is not found, anything else the client sent is invalid."""
    try:
        yield
    except AnswerRefused as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except HttpError as exc:
        if exc.status == 404:
            raise TaskNotFoundError(message=str(exc)) from None
        raise InvalidParamsError(message=str(exc)) from None


def _prompt(message: Message) -> str:
    """The text a message queues: its text parts, and its data parts as JSON after them."""
    texts = [message_text(message)] if message_text(message) else []
    for part in message.parts:
        if part.HasField("data"):
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False, sort_keys=True))
    return "\n\n".join(texts)


class A2aHandler(RequestHandler):
    """The A2A methods for one served agent (see the module docstring)."""

    def __init__(self, gw: Gateway, assistant_id: str, hooks: Webhooks, configs: A2aConfigs) -> None:
        self._gw = gw
        self.assistant_id = assistant_id
        self.tasks = RepertoryTaskStore(gw, assistant_id)
        self._hooks = hooks
        self._configs = configs

    async def _read(self, task_id: str, context: ServerCallContext) -> TaskRead:
        read = await self.tasks.read(task_id, context)
        if read is None:
            raise TaskNotFoundError(message=f"no task {task_id!r}")
        return read

    # -- sending ------------------------------------------------------------------------------------

    async def _start(self, params: SendMessageRequest, context: ServerCallContext) -> tuple[TurnRecord, Any, int]:
        """The turn a message starts or answers, the answer being applied (or ``None``), and the seq to stream after."""
        caller = RepertoryTaskStore.caller_of(context)
        message = params.message
        validate_history_length(params.configuration)
        if not message.parts:
            raise InvalidParamsError(message="the message has no parts")
        if message.task_id:
            read = await self._read(message.task_id, context)
            if message.context_id and message.context_id != read.turn.session_id:
                raise InvalidParamsError(message=f"task {message.task_id!r} is not in context {message.context_id!r}")
            if read.terminal:
                raise UnsupportedOperationError(
                    message=f"task {message.task_id!r} has ended; send a message without taskId to start another"
                )
            if read.state != TaskState.TASK_STATE_INPUT_REQUIRED or read.asking is None:
                raise UnsupportedOperationError(
                    message=f"task {message.task_id!r} asks nothing now; wait for it, or cancel it"
                )
            after = await self._gw.store.last_event_seq(read.turn.session_id)
            with _as_a2a():
                applying = await decide(self._gw, caller, read.asking, read.agent, message)
            return read.turn, applying, after
        text = _prompt(message)
        if not text:
            raise InvalidParamsError(message="the message has no text or data to send")
        push = params.configuration.task_push_notification_config
        has_push = params.configuration.HasField("task_push_notification_config")
        with _as_a2a():
            if has_push:
                await self._hooks.check_promise(push.url)
            session_id = await self._session(message.context_id, caller)
            after = await self._gw.store.last_event_seq(session_id)
            handle = await self._gw.runtime.session(session_id, caller.principal)
            sent = await handle.send(text)
            turn = await self._gw.store.load_turn(sent.submission_id)
            assert turn is not None  # send returns once the turn is stored
            if has_push:
                await self._hooks.add(A2aConfigs.record(turn, push, caller.owner))
        return turn, None, after

    async def _session(self, context_id: str, caller: Caller) -> str:
        """The session a new task runs in: ``context_id``'s (made for the caller on first use), or a new one."""
        if context_id:
            record = await self.tasks.session(context_id, caller)
            if record is not None:
                return record.session_id
        created = await self._gw.create_thread(
            caller, thread_id=context_id or None, metadata=None, if_exists=None, agent=self.assistant_id
        )
        return created.session_id

    async def _rested(self, turn: TurnRecord, caller: Caller, after: int, applying: Any) -> TaskRead | None:
        """Wait until the task rests (ends or asks); the read that saw it rest, when there was one.

        A new task waits on the turn itself (in memory, where it runs here) and reads the store once
        it rested; an answer being applied, or a turn that still works then (asleep on a timer), is
        followed through the same stream a client would read.
        """
        if applying is None:
            handle = await self._gw.runtime.session(turn.session_id, caller.principal)
            await until_rest(self._gw.store, turn.session_id, handle.get_turn(turn.submission_id).wait())
            fresh = await self._gw.store.load_turn(turn.submission_id)
            if fresh is not None:
                read = await read_task(self._gw, fresh)
                if read.terminal or read.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    return read
        with _as_a2a():
            stream = follow(self._gw, caller, turn, after_seq=after, applying=applying)
            try:
                async for _ in stream:
                    pass
            finally:
                await stream.aclose()
        return None

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        """``SendMessage``: start or answer a task; the task once it rests (at once with ``returnImmediately``)."""
        caller = RepertoryTaskStore.caller_of(context)
        turn, applying, after = await self._start(params, context)
        read = None
        if applying is not None or not params.configuration.return_immediately:
            read = await self._rested(turn, caller, after, applying)
        if read is None:
            fresh = await self._gw.store.load_turn(turn.submission_id)
            if fresh is None:
                raise TaskNotFoundError(message=f"task {turn.submission_id!r} was deleted")
            read = await read_task(self._gw, fresh)
        task = await task_of(self._gw, read)
        return apply_history_length(task, params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """``SendStreamingMessage``: start or answer a task, then its stream until it rests."""
        caller = RepertoryTaskStore.caller_of(context)
        turn, applying, after = await self._start(params, context)
        async for event in self._stream(follow(self._gw, caller, turn, after_seq=after, applying=applying)):
            yield event

    async def _stream(self, stream: AsyncGenerator[StreamEvent]) -> AsyncIterator[Event]:
        try:
            with _as_a2a():
                async for event in stream:
                    yield event
        finally:
            await stream.aclose()

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """``SubscribeToTask``: the task's stream replayed from its start, until it rests (see ``a2a_stream``)."""
        caller = RepertoryTaskStore.caller_of(context)
        read = await self._read(params.id, context)
        if read.terminal:
            raise UnsupportedOperationError(message=f"task {params.id!r} has ended; GetTask reads it")
        after = await replay_start(self._gw, read.turn)
        async for event in self._stream(follow(self._gw, caller, read.turn, after_seq=after)):
            yield event

    # -- reading and cancelling -----------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """``GetTask``: the task as the store has it, its history cut to ``historyLength``."""
        validate_history_length(params)
        task = await self.tasks.get(params.id, context)
        return None if task is None else apply_history_length(task, params)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """``ListTasks``: the caller's tasks of this agent (``RepertoryTaskStore.list``)."""
        return await self.tasks.list(params, context)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """``CancelTask``: cancel the turn through the tree; an ended task cannot be."""
        caller = RepertoryTaskStore.caller_of(context)
        read = await self._read(params.id, context)
        if read.terminal:
            raise TaskNotCancelableError(message=f"task {params.id!r} has already ended")
        handle = await self._gw.runtime.session(read.turn.session_id, caller.principal)
        await handle.get_turn(read.turn.submission_id).cancel()
        return await self.tasks.get(params.id, context)

    # -- push notification configs ------------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Store a push config for the task (its URL checked as every webhook's is)."""
        caller = RepertoryTaskStore.caller_of(context)
        read = await self._read(params.task_id, context)
        with _as_a2a():
            await self._hooks.check_promise(params.url)
            record = await self._hooks.add(A2aConfigs.record(read.turn, params, caller.owner))
        return config_of(record)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """One of the task's push configs."""
        await self._read(params.task_id, context)
        record = await self._configs.find(params.task_id, params.id)
        if record is None:
            raise TaskNotFoundError(message=f"task {params.task_id!r} has no push notification config {params.id!r}")
        return config_of(record)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """The task's push configs, oldest first."""
        await self._read(params.task_id, context)
        configs = [config_of(r) for r in await self._configs.configs(params.task_id)]
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Delete a push config: nothing more is sent for it (its events not yet delivered included)."""
        await self._read(params.task_id, context)
        record = await self._configs.find(params.task_id, params.id)
        if record is None:
            raise TaskNotFoundError(message=f"task {params.task_id!r} has no push notification config {params.id!r}")
        await self._hooks.cancel(record.delivery_id, DELETED)
        for row in await self._configs.pending_events(record):
            await self._hooks.cancel(row.delivery_id, DELETED)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """There is no extended card: the public one (behind the key) says everything."""
        raise ExtendedAgentCardNotConfiguredError(message="this agent has no extended card")
