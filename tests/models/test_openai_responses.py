"""OpenAIResponsesModel over loopback Responses API servers, through the official SDK: streams, reasoning
items and their encrypted content, tools, structured output, usage and cost, typed failures, retries,
token counting, and background responses (announced, re-attached, read on after a break, cancelled)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from repertory import (
    Agent,
    InMemorySessionStore,
    ModelMessage,
    ModelSettings,
    ReasoningPart,
    Runtime,
    SessionEvent,
    TextPart,
    Usage,
    tool,
)
from repertory.core.model import CallCanceller, ModelCall, ModelEvent, StreamRestart, TokenCounter
from repertory.errors import ModelError
from repertory.models import ModelPrice, OpenAIResponsesModel, infer_model

from .conftest import ResponsesFactory
from .helpers import LOOKUP, WAIT, collect, deltas
from .responses_server import (
    MODEL,
    BackgroundResponses,
    FakeResponses,
    Item,
    JSONReply,
    Request,
    SSEReply,
    api_error,
    call,
    events,
    message,
    reasoning,
    refusal,
    reply,
    usage,
)


def _input(request: Request) -> list[dict[str, Any]]:
    value = request.body["input"]
    assert isinstance(value, list)
    return value


async def test_text_and_reasoning_summaries_stream_and_the_item_is_stored_for_replay(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    fake_responses.add(
        reply(reasoning(["Think", "ing"], ["More"], encrypted="ENC"), message("Hel", "lo"), usage_=usage(12, 8))
    )
    events_, response = await collect(make_responses(reasoning_effort="low"))
    assert deltas(events_) == [
        ("reasoning", "Think"),
        ("reasoning", "ing"),
        ("reasoning", "More"),
        ("text", "Hel"),
        ("text", "lo"),
    ]
    assert not [e for e in events_ if isinstance(e, ModelCall)]  # not a background response: nothing to find again
    reasoning_parts = [p for p in response.message.parts if isinstance(p, ReasoningPart)]
    assert [p.text for p in reasoning_parts] == ["Thinking", "More"]
    assert reasoning_parts[0].signature is None and reasoning_parts[1].signature is not None
    assert "ENC" in reasoning_parts[1].signature
    assert response.message.text == "Hello" and response.message.model == MODEL
    body = fake_responses.requests[0].body
    assert fake_responses.requests[0].path == "/v1/responses"
    assert body["model"] == "gpt-test" and body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert "background" not in body and "tools" not in body and "text" not in body


async def test_reasoning_and_calls_go_back_in_place_with_their_encrypted_content(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    """A reasoned tool call, run by the engine: the next request carries the reasoning item before its call."""

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    fake_responses.add(
        reply(reasoning(["Need data"], encrypted="ENC-1", id="rs_a"), call("c1", "lookup", {"q": "x"})),
        reply(message("It is x.")),
    )
    agent = Agent(name="a", model=make_responses(), tools=[lookup])
    async with await Runtime.start(store=InMemorySessionStore(), agents={"a": agent}) as rt:
        result = await (await rt.create_session(agent="a")).run("what is x?")
    assert result.text == "It is x."
    second = _input(fake_responses.requests[1])
    assert second[0]["role"] == "user"
    assert second[1:] == [
        {
            "type": "reasoning",
            "id": "rs_a",
            "summary": [{"type": "summary_text", "text": "Need data"}],
            "encrypted_content": "ENC-1",
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found x"},
    ]
    tools = fake_responses.requests[0].body["tools"]
    assert [{k: v for k, v in t.items() if k != "parameters"} for t in tools] == [
        {"type": "function", "name": "lookup", "description": "Look something up.", "strict": False}
    ]
    assert tools[0]["parameters"]["required"] == ["q"]


async def test_reasoning_only_goes_back_to_its_own_model_and_only_when_it_can_be_read(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    sealed = reasoning(encrypted="ENC", id="rs_1")
    unsealed = reasoning(["plain"], encrypted=None, id="rs_2")
    fake_responses.add(reply(sealed, unsealed, message("first")), reply(message("ok")))
    model = make_responses()
    _, first = await collect(model)
    [sealed_part, unsealed_part, _] = first.message.parts
    assert isinstance(sealed_part, ReasoningPart) and sealed_part.redacted and sealed_part.text == ""
    assert isinstance(unsealed_part, ReasoningPart) and unsealed_part.text == "plain"
    theirs = first.message.model_copy(update={"model": "claude-test"})
    other_adapter = ModelMessage(
        role="assistant", parts=[ReasoningPart(text="hmm", signature="sig"), TextPart(text="b")]
    )
    history = [ModelMessage.user("a"), first.message, ModelMessage.user("b"), theirs, other_adapter]
    await collect(model, history)
    sent = _input(fake_responses.requests[1])
    # Ours (a dated name of the same model): the sealed item goes back, the unsealed one cannot be found.
    assert sent[1] == {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}
    assert sent[2] == {"role": "assistant", "content": "first"}
    assert sent[3:] == [
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "first"},
        {"role": "assistant", "content": "b"},
    ]


async def test_structured_output_bounds_temperature_and_extra(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    fake_responses.add(reply(message('{"n": 1}')), reply(message("x")))
    schema = {"title": "Out put", "type": "object", "properties": {"n": {"type": "integer"}}}
    settings = ModelSettings(output_schema=schema, max_tokens=64, temperature=0.2, extra={"top_p": 0.5})
    _, response = await collect(make_responses(max_output_tokens=999), settings=settings)
    assert response.message.text == '{"n": 1}'
    body = fake_responses.requests[0].body
    assert body["text"] == {"format": {"type": "json_schema", "name": "Out_put", "schema": schema, "strict": False}}
    assert body["max_output_tokens"] == 64 and body["temperature"] == 0.2 and body["top_p"] == 0.5
    await collect(make_responses(max_output_tokens=999, structured_output=False), settings=ModelSettings())
    body = fake_responses.requests[1].body
    assert body["max_output_tokens"] == 999 and "text" not in body


async def test_usage_counts_cached_input_and_the_price_charges_it(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    fake_responses.add(reply(message("hi"), usage_=usage(1000, 500, cached=600, reasoning_tokens=200)))
    price = ModelPrice(input_per_million=2.0, output_per_million=8.0, cache_read_per_million=0.5)
    _, response = await collect(make_responses(pricing={MODEL: price}))
    # Reasoning tokens are part of the output, as OpenAI counts and bills them, and said apart too.
    assert response.usage == Usage(
        input_tokens=1000,
        output_tokens=500,
        total_tokens=1500,
        requests=1,
        cache_read_tokens=600,
        reasoning_tokens=200,
    )
    assert response.cost == pytest.approx((400 * 2.0 + 600 * 0.5 + 500 * 8.0) / 1e6)


@pytest.mark.parametrize(
    ("script", "stop", "match"),
    [
        (reply(refusal("I can't help with that.")), "refusal", "refused to answer: I can't help with that."),
        (
            reply(message("cut sh"), status="incomplete", incomplete="max_output_tokens"),
            "max_output_tokens",
            "max_output_tokens",
        ),
        (reply(message("bad"), status="incomplete", incomplete="content_filter"), "content_filter", "content filter"),
    ],
)
async def test_refusals_and_incomplete_replies_are_typed_model_errors(
    fake_responses: FakeResponses, make_responses: ResponsesFactory, script: SSEReply, stop: str, match: str
) -> None:
    fake_responses.add(script)
    with pytest.raises(ModelError, match=match) as info:
        await collect(make_responses(max_retries=3))
    assert info.value.stop_reason == stop  # type: ignore[attr-defined]
    assert len(fake_responses.requests) == 1


async def test_a_failed_response_and_an_error_event_are_model_errors(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    failed = events([message("x")], status="failed")
    failed[-1]["response"]["error"] = {"code": "server_error", "message": "boom"}
    failed[-1]["response"]["output"] = []
    error_event = {"type": "error", "sequence_number": 2, "code": "rate_limit_exceeded", "message": "slow down"}
    fake_responses.add(SSEReply(list(failed), done=False), SSEReply([*events([], terminal=False), error_event]))
    model = make_responses(max_retries=3)
    with pytest.raises(ModelError, match=r"failed \(server_error\): boom") as info:
        await collect(model)
    assert info.value.stop_reason == "failed" and info.value.code == "server_error"  # type: ignore[attr-defined]
    with pytest.raises(ModelError, match="rate_limit_exceeded") as info:
        await collect(model)
    assert info.value.stop_reason == "error"  # type: ignore[attr-defined]
    assert len(fake_responses.requests) == 2


async def test_retries_follow_the_servers_advice_and_give_up_on_what_will_not_pass(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    fake_responses.add(api_error(429, "slow down", retry_after="2"), api_error(503, "busy"), reply(message("ok")))
    model = make_responses(max_retries=2, retry_delay=0.25)
    _, response = await collect(model)
    assert response.message.text == "ok"
    assert model.slept[0] == 2.0 and 0.75 * 0.5 <= model.slept[1] <= 0.5  # type: ignore[attr-defined]
    fake_responses.add(api_error(400, "bad input"))
    with pytest.raises(ModelError, match=r"refused the request \(400\).*bad input") as info:
        await collect(model)
    assert info.value.status_code == 400 and info.value.attempts == 1  # type: ignore[attr-defined]
    fake_responses.add(api_error(429, "quota", retry_after="3600"))
    with pytest.raises(ModelError, match="asked to wait 3600 s"):
        await collect(model)
    assert len(fake_responses.requests) == 5


async def test_count_tokens_asks_the_input_tokens_endpoint(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    fake_responses.add(JSONReply({"object": "response.input_tokens", "input_tokens": 42}))
    model = make_responses(reasoning_effort="high")
    assert isinstance(model, TokenCounter)
    n = await model.count_tokens([ModelMessage.system("be brief"), ModelMessage.user("hi")], [LOOKUP], ModelSettings())
    assert n == 42
    request = fake_responses.requests[0]
    assert request.path == "/v1/responses/input_tokens"
    assert set(request.body) == {"model", "input", "tools", "reasoning"}
    assert request.body["input"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_infer_model_knows_openai_responses() -> None:
    model = infer_model("openai-responses:gpt-5", base_url="http://127.0.0.1:9/v1", background=True)
    assert isinstance(model, OpenAIResponsesModel) and model.model == "gpt-5" and model.background
    assert isinstance(model, CallCanceller)
    assert "background=True" in repr(model)


# -- background responses ---------------------------------------------------------------------------


def _story(body: dict[str, Any], response_id: str) -> list[Item]:
    return [reasoning(["hm"], encrypted=f"enc-{response_id}", id=f"rs_{response_id}"), message("a ", "b ", "c ", "d")]


@pytest.fixture
async def background() -> AsyncIterator[BackgroundResponses]:
    server = await BackgroundResponses(_story).start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


def _bg_model(server: BackgroundResponses, **options: Any) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", api_key="sk", base_url=server.url, background=True, **options)


async def test_a_background_response_is_announced_before_its_reply_and_after_every_delta(
    background: BackgroundResponses,
) -> None:
    model = _bg_model(background)
    try:
        events_, response = await collect(model)
    finally:
        await model.aclose()
    body = background.posts[0]
    assert body["background"] is True and body["store"] is True and "include" not in body
    kinds = ["call" if isinstance(e, ModelCall) else type(e).__name__ for e in events_]
    assert kinds[0] == "call"  # the id, before any delta
    assert all(kinds[i + 1] == "call" for i, k in enumerate(kinds) if k != "call")  # a position after every delta
    calls = [e.state for e in events_ if isinstance(e, ModelCall)]
    assert calls[0] == {"response_id": "resp_1", "sequence_number": 0}
    shown = ("response.reasoning_summary_text.delta", "response.output_text.delta")
    deltas_at = [e["sequence_number"] for e in background.responses["resp_1"].planned if e["type"] in shown]
    assert [c["sequence_number"] for c in calls[1:]] == deltas_at  # each covers its own delta, no further
    assert response.message.text == "a b c d" and response.usage.cache_read_tokens == 4


async def test_a_recovered_call_reattaches_after_its_last_position_and_asks_nothing_again(
    background: BackgroundResponses,
) -> None:
    first = _bg_model(background)
    seen: list[ModelEvent] = []
    try:
        async for event in first.request([ModelMessage.user("hi")], [], ModelSettings()):
            seen.append(event)
            if isinstance(event, ModelCall) and len([e for e in seen if isinstance(e, ModelCall)]) == 4:
                break  # the drive dies here: two deltas shown, their position known
    finally:
        await first.aclose()
    last = [e for e in seen if isinstance(e, ModelCall)][-1].state
    second = _bg_model(background)
    try:
        events_, response = await collect(second, settings=ModelSettings(attach=last))
    finally:
        await second.aclose()
    assert len(background.posts) == 1  # one response, whatever happened to its reader
    assert background.reads == [("resp_1", last["sequence_number"])]
    shown = deltas(seen) + deltas(events_)
    assert "".join(t for k, t in shown if k == "text") == "a b c d"  # nothing lost, nothing twice
    assert not [e for e in events_ if isinstance(e, (StreamRestart,))]
    assert response.message.text == "a b c d"
    [part, _] = response.message.parts  # the reasoning item too, though its events came before the re-attach
    assert isinstance(part, ReasoningPart) and "enc-resp_1" in (part.signature or "")


async def test_a_response_that_can_no_longer_be_found_starts_over(background: BackgroundResponses) -> None:
    model = _bg_model(background)
    try:
        events_, response = await collect(
            model, settings=ModelSettings(attach={"response_id": "resp_gone", "sequence_number": 5})
        )
    finally:
        await model.aclose()
    assert isinstance(events_[0], StreamRestart) and "resp_gone" in events_[0].reason
    assert isinstance(events_[1], ModelCall) and events_[1].state["response_id"] == "resp_1"
    assert response.message.text == "a b c d" and len(background.posts) == 1


async def test_a_background_stream_that_breaks_is_read_on_not_asked_again(
    fake_responses: FakeResponses, make_responses: ResponsesFactory
) -> None:
    made = events([message("one ", "two ", "three")], response_id="resp_9")
    cut_at = next(i for i, e in enumerate(made) if e.get("delta") == "two ")
    fake_responses.add(SSEReply(list(made[: cut_at + 1]), cut=True))

    def rest(request: Request) -> SSEReply:
        assert request.method == "GET" and request.path.startswith("/v1/responses/resp_9?")
        assert f"starting_after={cut_at}" in request.path and "stream=true" in request.path
        return SSEReply(list(made[cut_at + 1 :]))

    fake_responses.add(rest)
    model = make_responses(background=True, max_retries=1)
    events_, response = await collect(model)
    assert "".join(t for _, t in deltas(events_)) == "one two three" and response.message.text == "one two three"
    assert len(model.slept) == 1  # type: ignore[attr-defined]


async def test_a_cancelled_run_cancels_its_background_response(background: BackgroundResponses) -> None:
    background.pace = 0.05  # slow enough that the run is cancelled mid-reply
    streamed = asyncio.Event()

    def seen(event: SessionEvent) -> None:
        if event.type == "text.delta":
            streamed.set()

    model = _bg_model(background)
    async with await Runtime.start(store=InMemorySessionStore(), agents={"a": Agent(name="a", model=model)}) as rt:
        handle = await rt.create_session(agent="a")
        listener = handle.on_progress(seen)
        turn = await handle.send("hi")
        await asyncio.wait_for(streamed.wait(), WAIT)
        await turn.cancel()
        await asyncio.wait_for(background.cancel_seen.wait(), WAIT)
        listener.dispose()
        assert await turn.status() == "cancelled"
    await model.aclose()
    assert background.cancelled == ["resp_1"] and background.responses["resp_1"].status == "cancelled"


async def test_cancel_call_is_best_effort(background: BackgroundResponses) -> None:
    model = _bg_model(background)
    try:
        await model.cancel_call({"response_id": "resp_unknown"})  # a 404: logged, not raised
        await model.cancel_call({})
    finally:
        await model.aclose()
    assert background.cancelled == []
    assert [(r.method, r.path) for r in background.requests] == [("POST", "/v1/responses/resp_unknown/cancel")]
