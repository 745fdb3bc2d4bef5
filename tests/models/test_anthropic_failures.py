"""AnthropicModel failures: 429/529 with retry-after, 5xx, error events, stalls, cuts, malformed events and
stop reasons; every one ends as a ModelError with nothing half-built returned."""

from __future__ import annotations

import pickle
import socket

import pytest

from repertory import ModelSettings
from repertory.core.model import ModelEvent
from repertory.errors import ModelError, RepertoryError
from repertory.models import AnthropicModel

from .anthropic_server import (
    FakeAnthropic,
    SSEReply,
    Stall,
    api_error,
    error_event,
    message_delta,
    message_start,
    ping,
    raw,
    reply,
    text_block,
    tool_block,
)
from .conftest import AnthropicFactory
from .helpers import collect


async def test_429_and_529_honour_retry_after(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(
        api_error(429, "rate_limit_error", "Rate limited", retry_after="3"),
        api_error(529, "overloaded_error", "Overloaded", retry_after="1"),
        reply(text_block(0, "finally")),
    )
    model = make_anthropic(retry_delay=30.0)  # backoff alone would wait far longer than the server asked
    _, response = await collect(model)
    assert response.message.text == "finally"
    assert model.slept == [3.0, 1.0]  # type: ignore[attr-defined]
    assert len(fake_anthropic.requests) == 3


async def test_overloaded_without_retry_after_backs_off(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(
        *[api_error(s, "api_error", "down") for s in (529, 500, 503)],
        reply(text_block(0, "up")),
    )
    model = make_anthropic(max_retries=3, retry_delay=1.0, max_retry_delay=3.0)
    _, response = await collect(model)
    assert response.message.text == "up"
    first, second, third = model.slept  # type: ignore[attr-defined]
    assert 0.75 <= first <= 1.0 and 1.5 <= second <= 2.0 and 2.25 <= third <= 3.0


async def test_overload_exhausted_is_a_model_error(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(*[api_error(529, "overloaded_error", "Overloaded") for _ in range(3)])
    model = make_anthropic(max_retries=2)
    with pytest.raises(ModelError) as info:
        await collect(model)
    err = info.value
    assert err.status_code == 529 and err.attempts == 3  # type: ignore[attr-defined]
    assert "529" in str(err) and "Overloaded" in str(err) and str(err).startswith("model 'claude-test-4-5': ")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is ModelError and isinstance(copy, RepertoryError)
    assert str(copy) == str(err) and copy.status_code == 529  # type: ignore[attr-defined]


async def test_client_errors_are_not_retried(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(api_error(400, "invalid_request_error", "messages: text content blocks must be non-empty"))
    model = make_anthropic(max_retries=5)
    with pytest.raises(ModelError, match="refused the request \\(400\\): messages: text content") as info:
        await collect(model)
    assert info.value.status_code == 400 and len(fake_anthropic.requests) == 1  # type: ignore[attr-defined]


async def test_too_long_retry_after_fails_fast(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(api_error(429, "rate_limit_error", "quota", retry_after="3600"))
    model = make_anthropic(max_retries=5)
    with pytest.raises(ModelError, match="asked to wait 3600 s"):
        await collect(model)
    assert model.slept == []  # type: ignore[attr-defined]


async def test_error_event_before_anything_was_shown_is_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """An overload can arrive as an `error` event after a 200; nothing was shown yet, so it is retried."""
    fake_anthropic.add(SSEReply([message_start(), ping(), error_event()]), reply(text_block(0, "second try")))
    model = make_anthropic(retry_delay=0.5)
    _, response = await collect(model)
    assert response.message.text == "second try" and len(model.slept) == 1  # type: ignore[attr-defined]


async def test_error_event_after_text_is_a_model_error(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(
        SSEReply([message_start(), *text_block(0, "Half of it")[:2], error_event("overloaded_error", "Overloaded")])
    )
    model = make_anthropic(max_retries=3)
    events: list[ModelEvent] = []
    with pytest.raises(ModelError, match="overloaded_error in the stream: Overloaded") as info:
        async for event in model.request([], [], ModelSettings()):
            events.append(event)
    assert [e.type for e in events] == ["text-delta"]  # shown, never answered: no ModelResponse
    assert info.value.status_code == 529 and len(fake_anthropic.requests) == 1  # type: ignore[attr-defined]


async def test_error_event_that_is_not_retryable(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(SSEReply([message_start(), error_event("invalid_request_error", "prompt is too long")]))
    with pytest.raises(ModelError, match="prompt is too long") as info:
        await collect(make_anthropic(max_retries=3))
    assert info.value.status_code == 400 and len(fake_anthropic.requests) == 1  # type: ignore[attr-defined]


async def test_timeout_is_retried_then_a_model_error(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(Stall(), Stall())
    model = make_anthropic(timeout=0.2, max_retries=1)
    with pytest.raises(ModelError, match="timeout") as info:
        await collect(model)
    assert info.value.attempts == 2 and len(fake_anthropic.requests) == 2  # type: ignore[attr-defined]


async def test_unreachable_server(make_anthropic: AnthropicFactory) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = make_anthropic(base_url=f"http://127.0.0.1:{port}", max_retries=1)
    with pytest.raises(ModelError, match="could not reach the server") as info:
        await collect(model)
    assert info.value.attempts == 2 and len(model.slept) == 1  # type: ignore[attr-defined]


START = message_start()
TEXT_START = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}


@pytest.mark.parametrize(
    ("events", "says"),
    [
        ([raw("message_start", "{not json")], "malformed event in the stream"),
        ([TEXT_START], "content_block_start before message_start"),
        ([START, START], "a second message_start"),
        (
            [START, {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}],
            "content block 3, which is not open",
        ),
        ([START, TEXT_START, TEXT_START], "content block 0 started twice"),
        ([START, {**TEXT_START, "index": "zero"}], "has index 'zero'"),
        (
            [
                START,
                TEXT_START,
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 7}},
            ],
            "text_delta.text is int",
        ),
        (
            [START, TEXT_START, {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta"}}],
            "a thinking_delta for a text block",
        ),
        (
            [START, {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t"}}],
            "tool_use name is NoneType",
        ),
        (
            [START, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": -1}}],
            "malformed usage",
        ),
        (
            [START, TEXT_START, message_delta(), {"type": "message_stop"}],
            "content block 0 was never stopped",
        ),
    ],
)
async def test_malformed_events(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, events: list[dict[str, object] | str], says: str
) -> None:
    tail: list[dict[str, object] | str] = [message_delta(), {"type": "message_stop"}]
    fake_anthropic.add(SSEReply([*events, *tail] if events[-1] != {"type": "message_stop"} else events))
    with pytest.raises(ModelError, match=says) as info:
        await collect(make_anthropic(max_retries=3))
    assert str(info.value).startswith("model 'claude-test-4-5': ") and len(fake_anthropic.requests) == 1


@pytest.mark.parametrize(
    ("stop_reason", "says"),
    [
        ("max_tokens", "reached max_tokens=4096 before it was finished"),
        ("refusal", "refused to answer"),
        ("model_context_window_exceeded", "no longer fits the model's context window"),
        ("pause_turn", "pause_turn"),
        (None, "without a stop_reason"),
        ("something_new", "'something_new'"),
    ],
)
async def test_stop_reasons_that_are_not_an_answer(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory, stop_reason: str | None, says: str
) -> None:
    fake_anthropic.add(reply(text_block(0, "I was say"), stop_reason=stop_reason))
    with pytest.raises(ModelError, match=says) as info:
        await collect(make_anthropic())
    assert info.value.stop_reason == stop_reason  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(info.value)).stop_reason == stop_reason


async def test_max_tokens_cutting_a_tool_call(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(reply(tool_block(0, "toolu_1", "lookup", '{"q": "unfin'), stop_reason="max_tokens"))
    with pytest.raises(ModelError, match="max_tokens=50"):
        await collect(make_anthropic(max_tokens=50))


async def test_no_api_key_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="no API key"):
        await collect(AnthropicModel("claude-sonnet-4-5"))


async def test_a_server_without_a_key(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    fake_anthropic.add(reply(text_block(0, "local")))
    async with AnthropicModel("local", base_url=fake_anthropic.url) as model:
        _, response = await collect(model)
    assert response.message.text == "local"


async def test_retries_before_and_inside_the_stream_share_one_budget(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """A 529, then an overload event inside the stream: with max_retries=1 the second failure is the last."""
    fake_anthropic.add(api_error(529, "overloaded_error", "Overloaded"), SSEReply([message_start(), error_event()]))
    model = make_anthropic(max_retries=1)
    with pytest.raises(ModelError, match="all 2 attempts") as info:
        await collect(model)
    assert info.value.attempts == 2 and len(fake_anthropic.requests) == 2  # type: ignore[attr-defined]
