"""The pieces without a server: model strings, argument parsing, retry timing, prices, one model on two loops."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from repertory import ModelMessage, ReasoningPart, ToolCallPart, Usage
from repertory.models import PRICES, ModelPrice, OpenAIChatModel, cost_of, infer_model, price_for
from repertory.models._convert import response_format, to_openai_messages
from repertory.models._retry import backoff, retry_after, retryable_status

from .helpers import collect
from .server import FakeOpenAI, SSEReply, chunk


def test_infer_model() -> None:
    model = infer_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:1/v1", timeout=5.0)
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.base_url, model.timeout) == ("gpt-4o-mini", "http://127.0.0.1:1/v1", 5.0)
    assert infer_model("openai:org/llama-3:8b").model == "org/llama-3:8b"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="provider:model"):
        infer_model("gpt-4o-mini")
    with pytest.raises(ValueError, match=r"unknown model provider 'gemini'.*providers: anthropic, google, openai"):
        infer_model("gemini:pro")
    with pytest.raises(ValueError, match="known providers: anthropic, google, openai"):
        infer_model("anthropic:")


def test_environment_and_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    model = OpenAIChatModel("m")
    assert model.base_url == "http://127.0.0.1:8000/v1"
    assert "sk-secret" not in repr(model) and "sk-secret" not in str(vars(model).get("base_url"))
    assert OpenAIChatModel("m", base_url="http://other/v1").base_url == "http://other/v1"


def test_arguments_text_becomes_args_or_invalid_args() -> None:
    def part(text: str) -> ToolCallPart:
        return ToolCallPart.from_arguments_text(tool_call_id="c", tool_name="t", arguments=text)

    assert part('{"a": [1, {"b": null}]}').args == {"a": [1, {"b": None}]}
    assert part("  ") == ToolCallPart(tool_call_id="c", tool_name="t")  # servers send "" for no arguments
    for bad in ("{'a': 1}", "null", "[1]", '"text"', '{"a": 1'):
        assert part(bad) == ToolCallPart(tool_call_id="c", tool_name="t", invalid_args=bad)


def test_a_call_whose_arguments_never_parsed_goes_back_as_an_empty_object() -> None:
    broken = ToolCallPart(tool_call_id="c", tool_name="t", invalid_args="{oops")
    good = ToolCallPart(tool_call_id="d", tool_name="t", args={"q": 1})
    (wire,) = to_openai_messages([ModelMessage(role="assistant", parts=[broken, good])])
    assert [c["function"]["arguments"] for c in wire["tool_calls"]] == ["{}", '{"q": 1}']


def test_wire_messages_edge_cases() -> None:
    only_reasoning = ModelMessage(role="assistant", parts=[ReasoningPart(text="...")])
    assert to_openai_messages([only_reasoning, ModelMessage.assistant("hi")]) == [
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "hi"},
    ]
    assert response_format({"type": "object"})["json_schema"]["name"] == "output"
    assert response_format({"title": "é" * 100})["json_schema"]["name"] == "_" * 64


def test_retry_timing() -> None:
    statuses = (400, 401, 404, 408, 409, 422, 429, 500, 503)
    assert [s for s in statuses if retryable_status(s)] == [408, 409, 429, 500, 503]
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None and retry_after(None) is None
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    wait = retry_after({"retry-after": in_ten})
    assert wait is not None and 5 < wait <= 10
    assert retry_after({"retry-after": email.utils.formatdate(0, usegmt=True)}) == 0.0  # a past date: go now
    for attempt, ceiling in ((0, 1.0), (1, 2.0), (2, 4.0), (10, 5.0), (10_000, 5.0)):
        assert 0.75 * ceiling <= backoff(attempt, 1.0, 5.0) <= ceiling


def test_prices() -> None:
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert cost_of(None, usage) is None
    assert cost_of(ModelPrice(input_per_million=1.5, output_per_million=3.0), usage) == pytest.approx(6.0)
    mine = ModelPrice(input_per_million=9.0, output_per_million=9.0)
    assert price_for(["gpt-4o", "x"], {"gpt-4o": mine}) is mine  # the argument beats the table
    assert price_for(["unknown", "gpt-4o"]) is PRICES["gpt-4o"]
    assert price_for(["unknown"]) is None
    with pytest.raises(ValueError):
        ModelPrice(input_per_million=-1.0, output_per_million=0.0)


def test_one_model_on_two_event_loops() -> None:
    """A model kept across asyncio.run() calls opens a client per loop instead of reusing a dead pool."""
    port = 0
    clients: list[object] = []
    model = OpenAIChatModel("m", api_key="sk-test", timeout=10.0)

    async def once(close: bool) -> str:
        nonlocal port
        server = await FakeOpenAI().start(port)  # the same port both times, so the model stays as it is
        port = int(server.url.split(":")[2].split("/")[0])
        model.base_url = server.url
        server.add(SSEReply([chunk("hi", finish="stop")]))
        try:
            text = (await collect(model))[1].message.text
            clients.append(model.client)
            return text
        finally:
            if close:
                await model.aclose()
            await server.close()

    assert asyncio.run(once(close=False)) == "hi"
    assert asyncio.run(once(close=True)) == "hi"
    assert clients[0] is not None and clients[1] is not None and clients[0] is not clients[1]
