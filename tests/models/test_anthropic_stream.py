"""AnthropicModel over the loopback Messages API server, through the real SDK: streams, tools, thinking,
caching, structured output, request bodies, token counting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from repertory import ModelMessage, ModelSettings, Origin, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, Usage
from repertory.core.model import TokenCounter
from repertory.errors import ModelError
from repertory.models import PRICES, AnthropicModel, ModelPrice, OpenAIChatModel, cost_of, infer_model
from repertory.models._anthropic_wire import model_family

from .anthropic_server import (
    MODEL,
    FakeAnthropic,
    JSONReply,
    SSEReply,
    api_error,
    message_delta,
    message_start,
    ping,
    redacted_block,
    reply,
    text_block,
    thinking_block,
    tool_block,
)
from .conftest import AnthropicFactory
from .helpers import LOOKUP, collect, deltas

EPHEMERAL = {"type": "ephemeral"}


async def test_streamed_text(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(reply(text_block(0, "Hel", "lo, ", "world"), input_tokens=12, output_tokens=4))
    events, response = await collect(make_anthropic())
    assert deltas(events) == [("text", "Hel"), ("text", "lo, "), ("text", "world")]
    assert response.message == ModelMessage(role="assistant", parts=[TextPart(text="Hello, world")], model=MODEL)
    assert response.usage == Usage(input_tokens=12, output_tokens=4, total_tokens=16, requests=1)
    request = fake_anthropic.requests[0]
    assert request.path == "/v1/messages"
    assert "sk-ant-test" in (request.headers.get("x-api-key", "") + request.headers.get("authorization", ""))
    assert "anthropic-version" in request.headers
    body = request.body
    assert body["model"] == "claude-test-4-5" and body["stream"] is True and body["max_tokens"] == 4096
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    assert "system" not in body and "tools" not in body and "thinking" not in body


async def test_parallel_tool_use_streamed_in_pieces(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(
        reply(
            text_block(0, "Looking both up."),
            tool_block(1, "toolu_a", "lookup", '{"q"', ': "al', 'pha"}'),
            tool_block(2, "toolu_b", "lookup", "", '{"q": "beta"}'),
            tool_block(3, "toolu_c", "lookup"),  # a parameterless call streams no JSON at all
            stop_reason="tool_use",
        )
    )
    events, response = await collect(make_anthropic(), tools=[LOOKUP])
    assert deltas(events) == [("text", "Looking both up.")]  # argument JSON is not text
    assert response.message.parts == [
        TextPart(text="Looking both up."),
        ToolCallPart(tool_call_id="toolu_a", tool_name="lookup", args={"q": "alpha"}),
        ToolCallPart(tool_call_id="toolu_b", tool_name="lookup", args={"q": "beta"}),
        ToolCallPart(tool_call_id="toolu_c", tool_name="lookup", args={}),
    ]
    tools = fake_anthropic.requests[0].body["tools"]
    assert tools == [
        {
            "name": "lookup",
            "description": "Look something up.",
            "input_schema": LOOKUP.parameters,
            "cache_control": EPHEMERAL,
        }
    ]


async def test_thinking_is_streamed_and_kept_with_its_signature(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(
        reply(
            thinking_block(0, "The user wants ", "a lookup.", signature="EqQBCgIYAhIM"),
            redacted_block(1, "ENCRYPTED=="),
            tool_block(2, "toolu_1", "lookup", '{"q": "x"}'),
            stop_reason="tool_use",
        )
    )
    model = make_anthropic(max_tokens=8000, thinking_budget=2048)
    events, response = await collect(model, tools=[LOOKUP])
    assert deltas(events) == [("reasoning", "The user wants "), ("reasoning", "a lookup.")]
    assert response.message.parts == [
        ReasoningPart(text="The user wants a lookup.", signature="EqQBCgIYAhIM"),
        ReasoningPart(text="", signature="ENCRYPTED==", redacted=True),
        ToolCallPart(tool_call_id="toolu_1", tool_name="lookup", args={"q": "x"}),
    ]
    assert response.message.text == ""
    body = fake_anthropic.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048} and body["max_tokens"] == 8000
    # The stored message goes through JSON (as a store keeps it) and replays exactly as the API demands.
    stored = ModelMessage.model_validate_json(response.message.model_dump_json())
    assert stored == response.message
    result = ModelMessage(role="tool", parts=[ToolResultPart(tool_call_id="toolu_1", tool_name="lookup", result="42")])
    fake_anthropic.add(reply(text_block(0, "It is 42.")))
    _, final = await collect(model, [ModelMessage.user("look x up"), stored, result], tools=[LOOKUP])
    assert final.message.text == "It is 42."
    turns = fake_anthropic.requests[1].body["messages"]
    assert turns[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants a lookup.", "signature": "EqQBCgIYAhIM"},
            {"type": "redacted_thinking", "data": "ENCRYPTED=="},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
        ],
    }
    assert turns[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42", "cache_control": EPHEMERAL}],
    }


async def test_interleaved_blocks_keep_their_order(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """Thinking between tool calls (interleaved thinking) goes back in the order it was written."""
    fake_anthropic.add(
        reply(
            thinking_block(0, "first", signature="s1"),
            tool_block(1, "toolu_1", "lookup", '{"q": "a"}'),
            thinking_block(2, "second", signature="s2"),
            tool_block(3, "toolu_2", "lookup", '{"q": "b"}'),
            stop_reason="tool_use",
        )
    )
    _, response = await collect(make_anthropic(), tools=[LOOKUP])
    kinds = [(p.type, getattr(p, "signature", None)) for p in response.message.parts]
    assert kinds == [("reasoning", "s1"), ("tool-call", None), ("reasoning", "s2"), ("tool-call", None)]


async def test_cache_tokens_in_usage_and_cost(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    """Anthropic reports uncached input apart from cache reads and writes; Usage counts them all as input."""
    fake_anthropic.add(
        SSEReply(
            [
                message_start(input_tokens=50, cache_read=10_000, cache_write=2_000),
                ping(),
                *text_block(0, "cached"),
                message_delta("end_turn", 300, input_tokens=50, cache_read_input_tokens=10_000),
                {"type": "message_stop"},
            ]
        )
    )
    price = ModelPrice(
        input_per_million=3.0, output_per_million=15.0, cache_read_per_million=0.3, cache_write_per_million=3.75
    )
    _, response = await collect(make_anthropic(pricing=price))
    assert response.usage == Usage(
        input_tokens=12_050,
        output_tokens=300,
        total_tokens=12_350,
        requests=1,
        cache_read_tokens=10_000,
        cache_write_tokens=2_000,  # message_delta left it out: message_start's count stands
    )
    assert response.cost == pytest.approx((50 * 3.0 + 10_000 * 0.3 + 2_000 * 3.75 + 300 * 15.0) / 1e6)
    uncached = (12_050 * 3.0 + 300 * 15.0) / 1e6
    assert response.cost is not None and response.cost < uncached  # what caching saved


def test_usage_adds_cache_tokens() -> None:
    a = Usage(input_tokens=10, output_tokens=1, total_tokens=11, requests=1, cache_read_tokens=6, cache_write_tokens=2)
    b = Usage(input_tokens=5, requests=1, cache_read_tokens=4)
    assert a + b == Usage(
        input_tokens=15, output_tokens=1, total_tokens=11, requests=2, cache_read_tokens=10, cache_write_tokens=2
    )
    assert Usage.model_validate({"input_tokens": 3}).cache_read_tokens == 0  # records from before the fields


def test_cost_with_and_without_cache_rates() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=600_000, cache_write_tokens=100_000)
    plain = ModelPrice(input_per_million=2.0, output_per_million=8.0)
    assert cost_of(plain, usage) == pytest.approx(2.0)  # no cache rates: every input token at the input rate
    openai = PRICES["gpt-4o-mini"]
    assert openai.cache_read_per_million == pytest.approx(0.075) and openai.cache_write_per_million is None
    claude = PRICES["claude-sonnet-4-5"]
    assert claude == PRICES["claude-sonnet-4-5-20250929"]
    assert cost_of(claude, usage) == pytest.approx(0.3 * 3.0 + 0.6 * 0.3 + 0.1 * 3.75)


async def test_priced_from_the_table_by_the_served_name(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(reply(text_block(0, "hi"), input_tokens=1_000_000, output_tokens=0, model="claude-haiku-4-5"))
    _, response = await collect(make_anthropic("my-haiku-alias"))
    assert response.message.model == "claude-haiku-4-5"
    assert response.cost == pytest.approx(PRICES["claude-haiku-4-5"].input_per_million)


async def test_request_body_from_a_conversation(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """System messages, merged turns, tool results first, empty replies dropped, breakpoints on the prefix."""
    call = ToolCallPart(tool_call_id="toolu_1", tool_name="lookup", args={"q": "x"})
    conversation = [
        ModelMessage.system("You operate accounts.", origin=Origin(kind="system")),
        ModelMessage.system("Be brief."),
        ModelMessage.user("first"),
        ModelMessage(role="assistant", parts=[TextPart(text="")]),  # an empty reply: nothing to replay
        ModelMessage.user("second"),
        ModelMessage(role="assistant", parts=[ReasoningPart(text="unsigned"), TextPart(text="Sure."), call]),
        ModelMessage(
            role="tool",
            parts=[ToolResultPart(tool_call_id="toolu_1", tool_name="lookup", result={"n": 1}, is_error=True)],
        ),
        ModelMessage.user("and now?"),
        ModelMessage.system("Notification: the account moved."),
    ]
    fake_anthropic.add(reply(text_block(0, "ok")))
    await collect(make_anthropic(), conversation, tools=[LOOKUP], settings=ModelSettings(temperature=0.2))
    body = fake_anthropic.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "You operate accounts."},
        {"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL},
    ]
    assert body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
        {
            "role": "assistant",
            "content": [  # reasoning without a signature cannot be verified: left out
                {"type": "text", "text": "Sure."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"n": 1}', "is_error": True},
                {"type": "text", "text": "and now?"},
                {"type": "text", "text": "Notification: the account moved.", "cache_control": EPHEMERAL},
            ],
        },
    ]


async def test_tool_results_open_their_turn(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    call = ToolCallPart(tool_call_id="toolu_1", tool_name="lookup", args={})
    result = ToolResultPart(tool_call_id="toolu_1", tool_name="lookup", result="")
    conversation = [
        ModelMessage.user("go"),
        ModelMessage(role="assistant", parts=[call]),
        ModelMessage.user("(said while the call ran)"),
        ModelMessage(role="tool", parts=[result]),
    ]
    fake_anthropic.add(reply(text_block(0, "ok")))
    await collect(make_anthropic(cache=False), conversation, tools=[LOOKUP])
    body = fake_anthropic.requests[0].body
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1"},
            {"type": "text", "text": "(said while the call ran)"},
        ],
    }
    assert "cache_control" not in json.dumps(body)  # cache=False: no breakpoint anywhere


async def test_thinking_of_another_model_is_not_replayed(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """Signatures bind thinking to the model that wrote it; the dated id and the alias are one model."""
    signed = [ReasoningPart(text="mine", signature="s"), TextPart(text="reply")]
    ours = ModelMessage(role="assistant", parts=signed, model="claude-test-4-5-20250101")
    theirs = ModelMessage(role="assistant", parts=signed, model="claude-other-1")
    legacy = ModelMessage(role="assistant", parts=signed)
    fake_anthropic.add(reply(text_block(0, "ok")))
    conversation = [ModelMessage.user("a"), ours, ModelMessage.user("b"), theirs, ModelMessage.user("c"), legacy]
    conversation.append(ModelMessage.user("d"))
    await collect(make_anthropic("claude-test-4-5"), conversation)
    assistant = [t["content"] for t in fake_anthropic.requests[0].body["messages"] if t["role"] == "assistant"]
    thinking = {"type": "thinking", "thinking": "mine", "signature": "s"}
    assert assistant[0] == [thinking, {"type": "text", "text": "reply"}]
    assert assistant[1] == [{"type": "text", "text": "reply"}]
    assert assistant[2] == [thinking, {"type": "text", "text": "reply"}]  # written before models were recorded


def test_model_family() -> None:
    assert model_family("claude-sonnet-4-5-20250929") == model_family("claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert model_family("claude-sonnet-4-20250514") == model_family("claude-sonnet-4-0") == "claude-sonnet-4"
    assert model_family("claude-3-7-sonnet-latest") == model_family("claude-3-7-sonnet-20250219")
    assert model_family("claude-opus-4-1") != model_family("claude-opus-4")


VERDICT: dict[str, Any] = {
    "title": "Verdict",
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved", "reason"],
}


async def test_output_schema_as_structured_output(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    fake_anthropic.add(reply(text_block(0, '{"approved": true, ', '"reason": "fine"}')))
    _, response = await collect(make_anthropic(), settings=ModelSettings(output_schema=VERDICT))
    assert json.loads(response.message.text) == {"approved": True, "reason": "fine"}
    fmt = fake_anthropic.requests[0].body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False  # structured outputs want closed objects
    assert set(fmt["schema"]["properties"]) == {"approved", "reason"}


async def test_output_schema_through_a_forced_tool(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    model = make_anthropic(output_mode="tool")
    fake_anthropic.add(reply(tool_block(0, "toolu_o", "final_output", '{"approved": false,', ' "reason": "no"}')))
    events, response = await collect(model, settings=ModelSettings(output_schema=VERDICT))
    assert response.message.parts == [TextPart(text='{"approved": false, "reason": "no"}')]
    assert "".join(t for _, t in deltas(events)) == response.message.text  # the answer streams as text
    body = fake_anthropic.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "final_output"}
    assert body["tools"][-1]["name"] == "final_output" and body["tools"][-1]["input_schema"] == VERDICT
    assert "output_config" not in body
    # With the agent's own tools beside it, the model may call those first: "any" tool, not this one.
    fake_anthropic.add(reply(tool_block(0, "toolu_l", "lookup", '{"q": "x"}'), stop_reason="tool_use"))
    _, response = await collect(model, tools=[LOOKUP], settings=ModelSettings(output_schema=VERDICT))
    assert response.message.tool_calls[0].tool_name == "lookup"
    assert fake_anthropic.requests[1].body["tool_choice"] == {"type": "any"}


async def test_forced_tool_and_thinking_do_not_mix(make_anthropic: AnthropicFactory) -> None:
    model = make_anthropic(output_mode="tool", thinking_budget=1024)
    with pytest.raises(ModelError, match="json_schema"):
        await collect(model, settings=ModelSettings(output_schema=VERDICT))


async def test_extra_settings_reach_the_body(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(reply(thinking_block(0, "adaptive"), text_block(1, "ok")))
    settings = ModelSettings(max_tokens=100, extra={"thinking": {"type": "adaptive"}, "top_k": 5})
    _, response = await collect(make_anthropic(), settings=settings)
    assert response.message.parts[0] == ReasoningPart(text="adaptive", signature="sig-1")
    body = fake_anthropic.requests[0].body
    assert body["thinking"] == {"type": "adaptive"} and body["top_k"] == 5 and body["max_tokens"] == 100


async def test_unknown_events_and_blocks_are_skipped(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    """Anthropic may add event and block types; a client skips what it does not know."""
    fake_anthropic.add(
        SSEReply(
            [
                message_start(),
                {"type": "brand_new_event", "whatever": 1},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "s"}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}},
                {"type": "content_block_stop", "index": 0},
                *text_block(1, "fine")[:-1],
                {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {}}},
                {"type": "content_block_stop", "index": 1},
                ping(),
                message_delta(),
                {"type": "message_stop"},
            ]
        )
    )
    _, response = await collect(make_anthropic())
    assert response.message.parts == [TextPart(text="fine")]


async def test_empty_reply_is_still_a_reply(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    fake_anthropic.add(reply())
    _, response = await collect(make_anthropic())
    assert response.message.parts == [TextPart(text="")]


async def test_count_tokens(fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory) -> None:
    model = make_anthropic(thinking_budget=1024)
    assert isinstance(model, TokenCounter)
    assert not isinstance(OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1"), TokenCounter)
    fake_anthropic.add(JSONReply({"input_tokens": 1234}))
    conversation = [ModelMessage.system("Be brief."), ModelMessage.user("how many?")]
    settings = ModelSettings(temperature=0.5, extra={"top_k": 3})
    assert await model.count_tokens(conversation, [LOOKUP], settings) == 1234
    request = fake_anthropic.requests[0]
    assert request.path == "/v1/messages/count_tokens"
    body = request.body
    assert set(body) == {"model", "messages", "system", "tools", "thinking"}  # nothing a count does not take
    assert body["system"][0]["text"] == "Be brief." and body["tools"][0]["name"] == "lookup"
    fake_anthropic.add(JSONReply({"input_tokens": 1300}))
    with_schema = ModelSettings(output_schema=VERDICT, extra={"thinking": {"type": "adaptive"}})
    assert await make_anthropic().count_tokens(conversation, [], with_schema) == 1300
    body = fake_anthropic.requests[1].body
    assert body["output_config"]["format"]["type"] == "json_schema" and body["thinking"] == {"type": "adaptive"}


async def test_count_tokens_retries_and_fails_as_model_error(
    fake_anthropic: FakeAnthropic, make_anthropic: AnthropicFactory
) -> None:
    model = make_anthropic(max_retries=1)
    fake_anthropic.add(
        api_error(529, "overloaded_error", "Overloaded", retry_after="1"), JSONReply({"input_tokens": 7})
    )
    assert await model.count_tokens([ModelMessage.user("x")], [], ModelSettings()) == 7
    assert model.slept == [1.0]  # type: ignore[attr-defined]
    fake_anthropic.add(api_error(400, "invalid_request_error", "bad model"))
    with pytest.raises(ModelError, match="bad model") as info:
        await model.count_tokens([ModelMessage.user("x")], [], ModelSettings())
    assert info.value.status_code == 400  # type: ignore[attr-defined]
    fake_anthropic.add(JSONReply({"input_tokens": "lots"}))
    with pytest.raises(ModelError, match="malformed token count"):
        await model.count_tokens([ModelMessage.user("x")], [], ModelSettings())


def test_infer_model_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    model = infer_model("anthropic:claude-sonnet-4-5", max_tokens=2048, cache=False)
    assert isinstance(model, AnthropicModel)
    assert (model.model, model.base_url, model.max_tokens, model.cache) == (
        "claude-sonnet-4-5",
        "http://127.0.0.1:9/",
        2048,
        False,
    )
    assert "sk-ant-secret" not in repr(model)
    assert AnthropicModel("m", base_url="http://other").base_url == "http://other"


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="thinking_budget"):
        AnthropicModel("m", thinking_budget=512)
    with pytest.raises(ValueError, match="thinking_budget"):
        AnthropicModel("m", max_tokens=2000, thinking_budget=2000)
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicModel("m", max_tokens=0)
    with pytest.raises(ValueError, match="max_retries"):
        AnthropicModel("m", max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        AnthropicModel("m", timeout=0)
    with pytest.raises(ValueError, match="output_mode"):
        AnthropicModel("m", output_mode="prompt")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        AnthropicModel("")
