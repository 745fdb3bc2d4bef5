"""OpenAIChatModel over the loopback server: replies, deltas, tool calls, usage, cost, request bodies."""

from __future__ import annotations

import json

import pytest

from repertory import ModelMessage, ModelSettings, ReasoningPart, TextPart, ToolCallPart, Usage
from repertory.models import PRICES, ModelPrice

from .conftest import ModelFactory
from .helpers import LOOKUP, collect, deltas
from .server import FakeOpenAI, JSONReply, SSEReply, chunk, completion, tool_piece


async def test_plain_json_reply(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(JSONReply(completion("Hello there.", reasoning="greet", usage={"prompt": 7, "completion": 3})))
    model = make_model(stream=False)
    events, response = await collect(model)
    assert deltas(events) == [("reasoning", "greet"), ("text", "Hello there.")]
    assert response.message.role == "assistant"
    assert response.message.parts == [ReasoningPart(text="greet"), TextPart(text="Hello there.")]
    assert response.usage == Usage(input_tokens=7, output_tokens=3, total_tokens=10, requests=1)
    body = fake.requests[0].body
    assert body["stream"] is False and "stream_options" not in body
    assert fake.requests[0].path == "/v1/chat/completions"
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_plain_json_tool_calls(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]
    fake.add(JSONReply(completion(None, tool_calls=calls)))
    _, response = await collect(make_model(stream=False), tools=[LOOKUP])
    assert response.message.parts == [ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "x"})]
    assert response.usage == Usage(requests=1)  # the server sent none: one request, no tokens known


async def test_streamed_text_deltas(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(SSEReply([chunk("Hel"), chunk("lo, "), chunk("world"), chunk(finish="stop")]))
    events, response = await collect(make_model())
    assert deltas(events) == [("text", "Hel"), ("text", "lo, "), ("text", "world")]
    assert response.message.parts == [TextPart(text="Hello, world")]
    body = fake.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "tools" not in body and "response_format" not in body


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas(fake: FakeOpenAI, make_model: ModelFactory, field: str) -> None:
    fake.add(
        SSEReply(
            [
                chunk(reasoning="Let me ", reasoning_field=field),
                chunk(reasoning="think.", reasoning_field=field),
                chunk("Answer: 4"),
                chunk(finish="stop"),
            ]
        )
    )
    events, response = await collect(make_model())
    assert deltas(events) == [("reasoning", "Let me "), ("reasoning", "think."), ("text", "Answer: 4")]
    assert response.message.parts == [ReasoningPart(text="Let me think."), TextPart(text="Answer: 4")]
    assert response.message.text == "Answer: 4"


async def test_parallel_tool_calls_streamed_in_pieces(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(
        SSEReply(
            [
                chunk("Checking both."),
                chunk(tool_calls=[tool_piece(0, id="call_a", name="lookup", args="")]),
                chunk(tool_calls=[tool_piece(0, args='{"q": ')]),
                chunk(tool_calls=[tool_piece(1, id="call_b", name="lookup", args='{"q"')]),
                chunk(tool_calls=[tool_piece(0, args='"alpha"}')]),
                chunk(tool_calls=[tool_piece(1, args=': "beta"}')]),
                chunk(finish="tool_calls"),
            ]
        )
    )
    events, response = await collect(make_model(), tools=[LOOKUP])
    assert deltas(events) == [("text", "Checking both.")]
    assert response.message.parts == [
        TextPart(text="Checking both."),
        ToolCallPart(tool_call_id="call_a", tool_name="lookup", args={"q": "alpha"}),
        ToolCallPart(tool_call_id="call_b", tool_name="lookup", args={"q": "beta"}),
    ]
    tools = fake.requests[0].body["tools"]
    assert tools == [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Look something up.", "parameters": LOOKUP.parameters},
        }
    ]


async def test_tool_calls_without_index_or_id(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    """Some servers omit the index, or the id: calls still come apart, and get ids of their own."""
    no_index = [
        {"id": "x1", "function": {"name": "lookup", "arguments": '{"q": "1"}'}},
        {"id": "x2", "function": {"name": "lookup", "arguments": '{"q": "2"}'}},
    ]
    fake.add(
        SSEReply([chunk(tool_calls=no_index), chunk(finish="tool_calls")]),
        SSEReply(
            [
                chunk(tool_calls=[{"index": 0, "function": {"name": "lookup", "arguments": ""}}]),
                chunk(finish="tool_calls"),
            ]
        ),
    )
    model = make_model()
    _, first = await collect(model, tools=[LOOKUP])
    assert [(c.tool_call_id, c.args) for c in first.message.tool_calls] == [("x1", {"q": "1"}), ("x2", {"q": "2"})]
    _, second = await collect(model, tools=[LOOKUP])
    (call,) = second.message.tool_calls
    assert call.tool_call_id.startswith("call_") and call.args == {}  # empty arguments: no arguments


@pytest.mark.parametrize("raw", ['{"q": "unterminated', "[1, 2]", '"just a string"'])
async def test_arguments_that_are_not_a_json_object(fake: FakeOpenAI, make_model: ModelFactory, raw: str) -> None:
    fake.add(SSEReply([chunk(tool_calls=[tool_piece(0, id="c", name="lookup", args=raw)]), chunk(finish="length")]))
    _, response = await collect(make_model(), tools=[LOOKUP])
    assert response.message.tool_calls == [ToolCallPart(tool_call_id="c", tool_name="lookup", invalid_args=raw)]


async def test_usage_in_the_final_chunk(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    fake.add(
        SSEReply([chunk("ok"), chunk(finish="stop"), chunk(no_choices=True, usage={"prompt": 12, "completion": 5})])
    )
    _, response = await collect(make_model())
    assert response.usage == Usage(input_tokens=12, output_tokens=5, total_tokens=17, requests=1)
    assert response.cost is None  # "test-model" has no price: unknown, not free


async def test_cached_prompt_tokens_and_the_model_that_answered(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    """OpenAI counts cached prompt tokens inside prompt_tokens: they are Usage.cache_read_tokens, at the cached rate."""
    final = chunk(no_choices=True, usage={"prompt": 1_000_000, "completion": 0}, model="gpt-4o-mini-2024-07-18")
    final["usage"]["prompt_tokens_details"] = {"cached_tokens": 800_000}
    fake.add(SSEReply([chunk("ok"), chunk(finish="stop"), final]))
    _, response = await collect(make_model("gpt-4o-mini"))
    assert response.usage == Usage(
        input_tokens=1_000_000, output_tokens=0, total_tokens=1_000_000, requests=1, cache_read_tokens=800_000
    )
    price = PRICES["gpt-4o-mini"]
    assert response.cost == pytest.approx(0.2 * price.input_per_million + 0.8 * (price.cache_read_per_million or 0))
    assert response.message.model == "gpt-4o-mini-2024-07-18"  # the name the server answered with
    fake.add(SSEReply([chunk("ok", finish="stop", model="")]))
    assert (await collect(make_model("asked-for")))[1].message.model == "asked-for"  # none reported: the asked name


async def test_cost_from_the_default_table(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    usage = {"prompt": 1_000_000, "completion": 2_000_000}
    fake.add(SSEReply([chunk("ok", finish="stop", usage=usage, model="gpt-4o-mini-2024-07-18")]))
    _, response = await collect(make_model("gpt-4o-mini"))
    price = PRICES["gpt-4o-mini"]
    assert response.cost == pytest.approx(price.input_per_million + 2 * price.output_per_million)


async def test_cost_from_pricing_argument_and_extended_table(
    fake: FakeOpenAI, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = {"prompt": 500_000, "completion": 100_000}
    for _ in range(3):
        fake.add(SSEReply([chunk("ok", finish="stop", usage=usage, model="served-alias")]))
    own = make_model("my-llama", pricing=ModelPrice(input_per_million=2.0, output_per_million=10.0))
    assert (await collect(own))[1].cost == pytest.approx(1.0 + 1.0)
    # A mapping is consulted by the asked-for name first, then by the name the server reported.
    by_alias = make_model("other", pricing={"served-alias": ModelPrice(input_per_million=4.0, output_per_million=0)})
    assert (await collect(by_alias))[1].cost == pytest.approx(2.0)
    monkeypatch.setitem(PRICES, "house-model", ModelPrice(input_per_million=1.0, output_per_million=1.0))
    assert (await collect(make_model("house-model")))[1].cost == pytest.approx(0.6)


async def test_structured_output_request(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    schema = {"title": "Weather report", "type": "object", "properties": {"temp": {"type": "number"}}}
    fake.add(SSEReply([chunk('{"temp": 21.5}', finish="stop")]), SSEReply([chunk("{}", finish="stop")]))
    settings = ModelSettings(output_schema=schema, temperature=0.2, max_tokens=64, extra={"seed": 7, "top_p": 0.9})
    _, response = await collect(make_model(), settings=settings)
    assert json.loads(response.message.text) == {"temp": 21.5}
    body = fake.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather_report", "schema": schema, "strict": False},
    }
    assert (body["temperature"], body["max_tokens"], body["seed"], body["top_p"]) == (0.2, 64, 7, 0.9)
    await collect(make_model(structured_output=False), settings=settings)
    assert "response_format" not in fake.requests[1].body


async def test_history_is_sent_in_wire_format(fake: FakeOpenAI, make_model: ModelFactory) -> None:
    """Every role crosses the wire; a tool message with two results becomes two wire messages."""
    from repertory import ToolResultPart

    history = [
        ModelMessage.system("Be brief."),
        ModelMessage.user("Look up a and b."),
        ModelMessage(
            role="assistant",
            parts=[
                ReasoningPart(text="private thoughts"),
                ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
                ToolCallPart(tool_call_id="c2", tool_name="lookup", args={"q": "b"}),
            ],
        ),
        ModelMessage(
            role="tool",
            parts=[
                ToolResultPart(tool_call_id="c1", tool_name="lookup", result={"found": [1, 2]}),
                ToolResultPart(tool_call_id="c2", tool_name="lookup", result="no such thing", is_error=True),
            ],
        ),
    ]
    fake.add(SSEReply([chunk("done", finish="stop")]))
    await collect(make_model(), history, tools=[LOOKUP])
    assert fake.requests[0].body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Look up a and b."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "b"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"found": [1, 2]}'},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such thing"},
    ]
