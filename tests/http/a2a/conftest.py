"""A repertory server on loopback for the A2A tests, and the official ``a2a-sdk`` client that drives it.

The server is ``tests.http.conftest.ServerThread`` (uvicorn on its own thread and loop, SQLite,
alice's and bob's keys), with a webhook secret and loopback allowed as a webhook host so push
notifications reach a receiver the test owns. The served agents are ``tests.http.agents``': the
prompt's first word picks the plan (``hello``, ``delete X`` needs an approval, ``ask`` suspends,
``block NAME`` waits for the test to open a gate).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task
from google.protobuf import json_format, struct_pb2

from repertory.http.webhooks import WebhookSettings
from tests.http.conftest import ADMINS, KEYS, ServerThread

SECRET = "a2a-webhook-secret-0123456789"
MAX_STREAMS = 6


@pytest.fixture(scope="module")
def a2a_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The server the A2A tests share (each test makes its own tasks and sessions)."""
    path: Path = tmp_path_factory.mktemp("a2a") / "a2a.db"
    hooks = WebhookSettings(secret=SECRET, base_delay=0.01, max_attempts=3, poll=0.05, allow_hosts=("127.0.0.1",))
    server = ServerThread(
        f"sqlite:///{path}", api_keys=KEYS, admin_keys=ADMINS, max_streams_per_key=MAX_STREAMS, webhooks=hooks
    ).start()
    yield server
    server.stop()


@asynccontextmanager
async def a2a_client(
    base: str, key: str | None, agent: str = "assistant", *, streaming: bool = True
) -> AsyncIterator[Client]:
    """The SDK's client of ``agent``, its card resolved from the server, ``key`` on every request."""
    headers = {"x-api-key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(
            f"{base}/a2a/{agent}", client_config=ClientConfig(streaming=streaming, httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


def user(text: str = "", *, task_id: str = "", context_id: str = "", data: Any = None) -> Message:
    """A user message: text, or one data part (an answer)."""
    parts = []
    if text:
        parts.append(Part(text=text))
    if data is not None:
        value = struct_pb2.Value()
        json_format.ParseDict(data, value)
        parts.append(Part(data=value))
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts, task_id=task_id, context_id=context_id
    )


def request(message: Message, **configuration: Any) -> SendMessageRequest:
    """A ``SendMessageRequest`` for ``message`` with these configuration fields."""
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**configuration))


async def send(client: Client, message: Message, **configuration: Any) -> Task:
    """Send (the client must not stream) and return the task the answer holds."""
    out = [r async for r in client.send_message(request(message, **configuration))]
    assert len(out) == 1 and out[0].HasField("task"), out
    return out[0].task


async def stream(client: Client, message: Message, **configuration: Any) -> list[StreamResponse]:
    """Every event of a streamed send, to the end of the stream."""
    return [r async for r in client.send_message(request(message, **configuration))]


def data_of(message: Message) -> Any:
    """The first data part of a message, as JSON."""
    for part in message.parts:
        if part.HasField("data"):
            return json_format.MessageToDict(part.data)
    return None


def artifact_text(task: Task) -> str:
    """The text of the task's ``reply`` artifact."""
    [artifact] = [a for a in task.artifacts if a.artifact_id == "reply"]
    return "".join(p.text for p in artifact.parts)
