"""A2A push notifications ride the durable webhooks: signed, with the config's token, once per event.

A listener on loopback (the server is told it may post there) gets the task when it asks
(``input-required``) and again when it ends; the rows in the store say each was sent once. A
deleted config sends nothing more; a URL on the server's own network is refused as every
webhook's is; another owner cannot touch a task's configs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskPushNotificationConfig,
)

from repertory.http.a2a_push import DELETED
from repertory.http.webhooks import signature
from repertory.storage import open_store
from tests.http.a2a.conftest import SECRET, a2a_client, artifact_text, send, user
from tests.http.agents import gate
from tests.http.conftest import ALICE, BOB, ServerThread
from tests.http.receiver import Delivery, Receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    listener = await Receiver().start()
    yield listener
    await listener.close()


def _checked(delivery: Delivery) -> dict[str, object]:
    """The delivery's body, after checking its signature and the config's headers."""
    stamp = delivery.headers["x-repertory-timestamp"]
    assert delivery.headers["x-repertory-signature"] == signature(SECRET.encode(), stamp, delivery.body)
    assert delivery.headers["x-a2a-notification-token"] == "tok-123"
    assert delivery.headers["authorization"] == "Bearer listener-secret"
    body = delivery.json()
    assert isinstance(body, dict)
    return body


async def test_a_listener_gets_the_question_and_the_end_once_each(a2a_server: ServerThread, receiver: Receiver) -> None:
    config = TaskPushNotificationConfig(
        url=receiver.url,
        token="tok-123",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="listener-secret"),
    )
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(
            client, user("delete acct-push"), return_immediately=True, task_push_notification_config=config
        )
        asked = _checked(await receiver.next(60))
        assert asked["task"]["id"] == task.id  # type: ignore[index]
        assert asked["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # type: ignore[index]
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        [kept] = listed.configs
        assert (kept.url, kept.token, kept.task_id) == (receiver.url, "tok-123", task.id)
        read = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=kept.id)
        )
        assert read == kept
        done = await send(client, user(task_id=task.id, data={"decision": "approve"}))
        assert artifact_text(done) == "finished: deleted acct-push (approved by alice)"
        ended = _checked(await receiver.next(60))
    assert ended["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
    assert ended["task"]["artifacts"][0]["parts"][0]["text"] == artifact_text(done)  # type: ignore[index]
    store = await open_store(a2a_server.store)
    try:
        rows = await store.list_webhooks(submission_id=task.id)  # type: ignore[attr-defined]
    finally:
        await store.close()
    assert [(r.status, r.attempts) for r in rows] == [("delivered", 1), ("delivered", 1)]
    assert len([d for d in receiver.got if d.json()["task"]["id"] == task.id]) == 2


async def test_a_deleted_config_sends_nothing_more(a2a_server: ServerThread, receiver: Receiver) -> None:
    name = f"a2a-push-{uuid.uuid4().hex}"
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user(f"block {name}"), return_immediately=True)
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=receiver.url, token="tok-123")
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == []
    async with a2a_client(a2a_server.url, ALICE) as client:
        async for _ in client.subscribe(SubscribeToTaskRequest(id=task.id)):
            gate(name).set()  # once subscribed: the stream then follows the task to its end
    store = await open_store(a2a_server.store)
    try:
        [row] = await store.list_webhooks(submission_id=task.id)  # type: ignore[attr-defined]
    finally:
        await store.close()
    assert (row.status, row.attempts, row.last_error) == ("failed", 0, DELETED)
    assert receiver.got == []


async def test_a_private_address_and_another_owner_are_refused(a2a_server: ServerThread, receiver: Receiver) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("delete acct-push-2"))
        for url in ("http://10.1.2.3/hook", "http://169.254.169.254/latest", "file:///etc/passwd"):
            with pytest.raises(InvalidParamsError):
                await client.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task.id, url=url))
        with pytest.raises(InvalidParamsError):  # the same check on a send that carries a config
            await send(
                client, user("hello"), task_push_notification_config=TaskPushNotificationConfig(url="http://10.0.0.1/")
            )
    async with a2a_client(a2a_server.url, BOB, streaming=False) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver.url)
            )
        with pytest.raises(TaskNotFoundError):
            await bob.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
