"""The demo's remote agent: a reviewer served over A2A by ``a2a-sdk``'s own server, on a loopback port.

The demo's first orchestrator asks it for a second opinion through ``repertory.a2a.a2a_agent``:
a sub-task that leaves repertory over A2A and comes back as the remote task's artifact. It is
written with the SDK alone (its request handler, in-memory task store, JSON-RPC and agent card
routes), as any other stack's A2A agent would be, and served in the demo's own process
(``serve_reviewer``). Its answer is deterministic, so the demo needs no network and no keys.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

__all__ = ["PATH", "ReviewerExecutor", "reviewer_app", "serve_reviewer"]

PATH = "/agents/reviewer"
"""Where the reviewer lives on its server: its card under ``PATH/.well-known/agent-card.json``."""


class ReviewerExecutor(AgentExecutor):
    """Reviews the task it is sent: one working update, then the opinion as the task's artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer the task with a deterministic second opinion."""
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))  # the task first
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.start_work()
        task = context.get_user_input()
        await updater.add_artifact([Part(text=f"second opinion on {task}: sound, one risk to watch")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task (it never runs long enough to need it)."""
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def reviewer_app(base_url: str) -> Starlette:
    """The reviewer as an ASGI app whose card says it lives at ``base_url`` + ``PATH``."""
    card = AgentCard(
        name="reviewer",
        description="Gives a second opinion on a piece of work.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=f"{base_url}{PATH}", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="review", name="review", description="a second opinion", tags=["review"])],
    )
    handler = DefaultRequestHandler(agent_executor=ReviewerExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card, card_url=f"{PATH}/.well-known/agent-card.json")
    routes += create_jsonrpc_routes(handler, rpc_url=PATH)
    return Starlette(routes=routes)


@asynccontextmanager
async def serve_reviewer() -> AsyncIterator[str]:
    """Serve the reviewer on a free loopback port for the length of the block; yields its agent URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    base = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(reviewer_app(base), log_level="warning", lifespan="off"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # uvicorn says so by a flag, with no event to await
            if task.done():
                await task  # it failed to start: raise its error
            await asyncio.sleep(0.01)
        yield base + PATH
    finally:
        server.should_exit = True
        await task
        sock.close()
