"""A remote A2A agent written with ``a2a-sdk``'s own server side: ``python -m tests.a2a.peer PORT LOG``.

It serves one agent ("peer") on loopback: its card at ``/agents/peer/.well-known/agent-card.json``,
JSON-RPC at ``/agents/peer`` (the layout ``repertory serve`` uses for ``/a2a/{assistant_id}``), on the
SDK's ``DefaultRequestHandler`` and in-memory task store. What the agent does depends on the text it
gets:

- ``ask ...``: asks a question (``input-required``); the next message on the task completes it
  with ``answered <its text>`` (and `` with data <JSON>`` when it carries a data part);
- ``fail ...``: fails the task with a message saying why;
- ``slow <seconds> ...``: works that long, then completes like any other task;
- anything else: completes with the artifact ``echo: <text>``.

Every new task is logged to LOG (``task <task id> <context id> <its text, spaces as _>``) and every message received
(``message <message id> <task id>``), one ``write`` on an ``O_APPEND`` file each, the moment the
executor sees it: a test counts the tasks the remote saw, whatever process died meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import uvicorn
from a2a.helpers import get_data_parts, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, TaskState
from starlette.applications import Starlette

PATH = "/agents/peer"


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class PeerExecutor(AgentExecutor):
    """The peer's behaviour, by the first word of the text it gets (see the module docstring)."""

    def __init__(self, log: str) -> None:
        self.log = log

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        message = context.message
        current = context.current_task
        if current is None:
            _append(self.log, f"task {task_id} {context_id} {context.get_user_input().replace(' ', '_')}")
        _append(self.log, f"message {message.message_id if message else '-'} {task_id}")
        text = context.get_user_input()
        if current is None and message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(message))  # a task before its updates
        updater = TaskUpdater(event_queue, task_id, context_id)

        def says(words: str) -> Message:
            return new_text_message(words, context_id=context_id, task_id=task_id)

        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            data = get_data_parts(list(message.parts)) if message is not None else []
            said = f"answered {text}" + (f" with data {json.dumps(data[0], sort_keys=True)}" if data else "")
            await updater.add_artifact([Part(text=said)])
            await updater.complete()
            return
        await updater.start_work()
        word, _, rest = text.partition(" ")
        if word == "ask":
            await updater.requires_input(says(f"which colour for {rest}?"))
            return
        if word == "fail":
            await updater.failed(says(f"cannot do {rest}"))
            return
        if word == "slow":
            seconds, _, rest = rest.partition(" ")
            await asyncio.sleep(float(seconds))
        await updater.add_artifact([Part(text=f"echo: {text}")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        _append(self.log, f"cancel {context.task_id}")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(port: int) -> AgentCard:
    """The peer's agent card: JSON-RPC on loopback, streaming."""
    return AgentCard(
        name="peer",
        description="A test agent that echoes, asks, fails or works slowly.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=f"http://127.0.0.1:{port}{PATH}", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes its task", tags=["test"])],
    )


def app(port: int, log: str) -> Starlette:
    """The peer as an ASGI app."""
    agent_card = card(port)
    handler = DefaultRequestHandler(
        agent_executor=PeerExecutor(log), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = create_agent_card_routes(agent_card, card_url=f"{PATH}/.well-known/agent-card.json")
    routes += create_jsonrpc_routes(handler, rpc_url=PATH)
    return Starlette(routes=routes)


if __name__ == "__main__":
    port, log = int(sys.argv[1]), sys.argv[2]
    uvicorn.run(app(port, log), host="127.0.0.1", port=port, log_level="warning")
