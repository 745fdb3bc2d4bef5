"""Failures: retried statuses, bounded retries, timeouts, malformed and cut streams; all end as ModelError."""

from __future__ import annotations

import pickle
import socket

import pytest

from repertory.errors import ModelError, RepertoryError
from repertory.models import OpenAIChatModel

from .conftest import ModelFactory
from .helpers import collect
from .server import FakeOpenAI, JSONReply, SSEReply, Stall, chunk, completion

RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
BROKEN = {"error": {"message": "upstream exploded", "type": "server_error"}}


async def test_429_then_success_honours_retry_after(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(
        JSONReply(RATE_LIMITED, status=429, headers={"Retry-After": "3"}),
        JSONReply(RATE_LIMITED, status=429, headers={"retry-after-ms": "250"}),
        SSEReply([chunk("finally", finish="stop")]),
    )
    model = make_model(retry_delay=30.0)  # backoff alone would wait far longer than the server asked
    _, response = await collect(model)
    assert response.message.text == "finally"
    assert model.slept == [3.0, 0.25]  # type: ignore[attr-defined]
    assert len(fake.requests) == 3


async def test_5xx_backs_off_exponentially_with_jitter(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(*[JSONReply(BROKEN, status=s) for s in (500, 502, 503)], SSEReply([chunk("up", finish="stop")]))
    model = make_model(max_retries=3, retry_delay=1.0, max_retry_delay=3.0)
    _, response = await collect(model)
    assert response.message.text == "up"
    first, second, third = model.slept  # type: ignore[attr-defined]
    assert 0.75 <= first <= 1.0 and 1.5 <= second <= 2.0 and 2.25 <= third <= 3.0  # capped at max_retry_delay


async def test_500_exhausted_is_a_model_error(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(*[JSONReply(BROKEN, status=500) for _ in range(3)])
    model = make_model(max_retries=2)
    with pytest.raises(ModelError) as info:
        await collect(model)
    assert len(fake.requests) == 3 and len(model.slept) == 2  # type: ignore[attr-defined]
    err = info.value
    assert err.status_code == 500 and err.attempts == 3  # type: ignore[attr-defined]
    assert "500" in str(err) and "upstream exploded" in str(err)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is ModelError and isinstance(copy, RepertoryError)
    assert str(copy) == str(err) and copy.status_code == 500 and copy.attempts == 3  # type: ignore[attr-defined]


async def test_client_errors_are_not_retried(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(JSONReply({"error": {"message": "model not found"}}, status=404))
    model = make_model(max_retries=5)
    with pytest.raises(ModelError, match="model not found") as info:
        await collect(model)
    assert info.value.status_code == 404 and len(fake.requests) == 1  # type: ignore[attr-defined]


async def test_too_long_retry_after_fails_fast(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(JSONReply(RATE_LIMITED, status=429, headers={"Retry-After": "3600"}))
    model = make_model(max_retries=5)
    with pytest.raises(ModelError, match="asked to wait 3600 s"):
        await collect(model)
    assert model.slept == []  # type: ignore[attr-defined]


async def test_timeout_is_retried_then_a_model_error(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(Stall(), Stall())
    model = make_model(timeout=0.2, max_retries=1)
    with pytest.raises(ModelError, match="timeout") as info:
        await collect(model)
    assert info.value.attempts == 2 and len(fake.requests) == 2  # type: ignore[attr-defined]


async def test_unreachable_server(make_model: ModelFactory) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(ModelError, match="could not reach the server") as info:
        await collect(model)
    assert info.value.attempts == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("{not json", "malformed chunk"),
        ('{"choices": "nope"}', "choices is a str"),
        ('{"choices": [{"index": 0, "delta": {"content": 42}, "finish_reason": null}]}', "content is of type int"),
        (
            '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 1}}]}}]}',
            "arguments is of type int",
        ),
        ('{"usage": {"prompt_tokens": "many"}, "choices": []}', "malformed usage"),
        ('{"error": {"message": "overloaded mid-stream"}}', "reported an error in the stream: overloaded"),
    ],
)
async def test_malformed_chunk(fake: FakeOpenAI, make_model: ModelFactory, bad: str, says: str) -> None:
    fake.add(SSEReply([chunk("fine so far"), bad, chunk(" and more", finish="stop")]))
    with pytest.raises(ModelError, match=says) as info:
        await collect(make_model())
    assert str(info.value).startswith("model 'test-model': ")


async def test_tool_call_without_a_name(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(
        SSEReply(
            [chunk(tool_calls=[{"index": 0, "id": "c", "function": {"arguments": "{}"}}]), chunk(finish="tool_calls")]
        )
    )
    with pytest.raises(ModelError, match="no function name"):
        await collect(make_model())


async def test_json_reply_without_choices(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    body = completion("x")
    body["choices"] = []
    fake.add(JSONReply(body))
    with pytest.raises(ModelError, match="no choices"):
        await collect(make_model(stream=False))


async def test_no_api_key_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIChatModel("gpt-4o-mini")
    with pytest.raises(ModelError, match="no API key"):
        await collect(model)


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChatModel("m", max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        OpenAIChatModel("m", timeout=0)
