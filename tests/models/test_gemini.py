"""GeminiModel against a loopback server speaking the Gemini REST format, driven through the official SDK.

What is Gemini's own: thought summaries and signatures (kept on their parts, sent back only to the
model that wrote them), the request body (system instruction, function declarations, function
responses, thinking config, JSON response schema), usage with cached and thought tokens, safety
blocks and finish reasons, and retries that follow the RetryInfo a 429 carries. What every adapter
shares (streaming order, tool calls, usage, cut streams) is in ``test_conformance.py``.
"""

from __future__ import annotations

import base64
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, ModelMessage, ModelSettings, Session, SqliteSessionStore, TextPart, ToolCallPart, tool
from repertory.core.messages import ReasoningPart, ToolResultPart
from repertory.errors import ModelError
from repertory.models import GeminiModel, ModelPrice, infer_model
from repertory.models.gemini import model_family

from .conftest import GeminiFactory
from .gemini_server import (
    MODEL_VERSION,
    FakeGemini,
    Request,
    SSEReply,
    api_error,
    call,
    chunk,
    reply,
    sig,
    text,
    thought,
    usage,
)
from .helpers import LOOKUP, collect, deltas

STREAM_PATH = "/v1/models/gemini-test:streamGenerateContent?alt=sse"


def camel(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with snake_case keys in lowerCamelCase: proto JSON's two spellings of one field."""
    return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): v for k, v in fields.items()}


async def test_thoughts_stream_and_keep_their_signatures(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(
        SSEReply(
            [
                chunk(thought("Let me ", signature=sig("t"))),
                chunk(thought("think.")),
                chunk(call("lookup", {"q": "a"}, id="c1", signature=sig("c1")), call("lookup", {"q": "b"}, id="c2")),
                chunk(text(""), finish="STOP", usage_metadata=usage(12, 7, thoughts=30)),
            ]
        )
    )
    events, response = await collect(make_gemini(), tools=[LOOKUP])
    assert deltas(events) == [("reasoning", "Let me "), ("reasoning", "think.")]
    assert fake_gemini.requests[0].path == STREAM_PATH
    assert fake_gemini.requests[0].headers["x-goog-api-key"] == "gm-test"
    parts = response.message.parts
    assert parts == [
        ReasoningPart(text="Let me think.", signature=sig("t")),
        ReasoningPart(text="", signature=sig("c1"), redacted=True),
        ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
        ToolCallPart(tool_call_id="c2", tool_name="lookup", args={"q": "b"}),
    ]
    assert response.message.model == MODEL_VERSION
    # Thought tokens are output: they are billed as such.
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (12, 37, 49)


async def test_signatures_go_back_on_their_parts(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    """Gemini 3 refuses a function-call turn without its signature: the replay puts each one back where it was."""
    fake_gemini.add(
        reply(thought("Plan.", signature=sig("t")), call("lookup", {"q": "a"}, id="c1", signature=sig("c1"))),
        reply(text("Found it.", signature=sig("final"))),
        reply(text("Bye.")),
    )
    model = make_gemini(thinking_budget=1024)
    history = [ModelMessage.system("Be brief."), ModelMessage.user("find a")]
    _, first = await collect(model, history, [LOOKUP])
    result = ModelMessage(
        role="tool", parts=[ToolResultPart(tool_call_id="c1", tool_name="lookup", result={"hits": 1})]
    )
    history += [first.message, result]
    _, second = await collect(model, history, [LOOKUP])
    assert second.message.parts == [
        ReasoningPart(text="", signature=sig("final"), redacted=True),
        TextPart(text="Found it."),
    ]
    history += [second.message, ModelMessage.user("thanks")]
    await collect(model, history, [LOOKUP])

    body = fake_gemini.requests[1].body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    # Proto JSON takes either spelling of a field, and the SDK sends this one's in snake case.
    assert camel(body["generationConfig"]["thinkingConfig"]) == {"includeThoughts": True, "thinkingBudget": 1024}
    [declaration] = body["tools"][0]["functionDeclarations"]
    assert camel(declaration) == {
        "name": "lookup",
        "description": "Look something up.",
        "parametersJsonSchema": LOOKUP.parameters,
    }
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "find a"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Plan.", "thought": True, "thoughtSignature": sig("t")},
                {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "a"}}, "thoughtSignature": sig("c1")},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "c1", "name": "lookup", "response": {"output": {"hits": 1}}}}],
        },
    ]
    assert fake_gemini.requests[2].body["contents"][3] == {
        "role": "model",
        "parts": [{"text": "Found it.", "thoughtSignature": sig("final")}],
    }


async def test_a_signature_on_the_closing_empty_part_goes_back(
    fake_gemini: FakeGemini, make_gemini: GeminiFactory
) -> None:
    """Streamed, a signature may come alone on a closing empty part: after text it joins that text's part,
    after a call it goes back alone, as it came."""
    fake_gemini.add(
        SSEReply([chunk(text("Done.")), chunk(text("", signature=sig("end")), finish="STOP", usage_metadata=usage())]),
        SSEReply([chunk(call("lookup", {"q": "a"}, id="c1")), chunk(text("", signature=sig("c")), finish="STOP")]),
        reply(text("ok")),
    )
    model = make_gemini()
    _, first = await collect(model)
    assert first.message.parts == [ReasoningPart(text="", signature=sig("end"), redacted=True), TextPart(text="Done.")]
    _, second = await collect(model, tools=[LOOKUP])
    assert second.message.parts == [
        ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
        ReasoningPart(text="", signature=sig("c"), redacted=True),
    ]
    result = ModelMessage(role="tool", parts=[ToolResultPart(tool_call_id="c1", tool_name="lookup", result="x")])
    history = [ModelMessage.user("hi"), first.message, ModelMessage.user("look"), second.message, result]
    await collect(model, history, [LOOKUP])
    contents = fake_gemini.requests[2].body["contents"]
    assert contents[1]["parts"] == [{"text": "Done.", "thoughtSignature": sig("end")}]
    assert contents[3]["parts"] == [
        {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "a"}}},
        {"text": "", "thoughtSignature": sig("c")},
    ]


async def test_signatures_of_another_model_are_not_sent(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(reply(text("ok")))
    foreign = ModelMessage(
        role="assistant",
        parts=[
            ReasoningPart(text="mine", signature=sig("x")),
            ReasoningPart(text="", signature=sig("y"), redacted=True),
            ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
        ],
        model="claude-sonnet-4-5",
    )
    result = ModelMessage(
        role="tool", parts=[ToolResultPart(tool_call_id="c1", tool_name="lookup", result="no", is_error=True)]
    )
    await collect(make_gemini(), [ModelMessage.user("hi"), foreign, result], [LOOKUP])
    contents = fake_gemini.requests[0].body["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "a"}}}],
    }
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"error": "no"}


async def test_structured_output_and_settings(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(reply(text('{"n": 1}')))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    settings = ModelSettings(temperature=0.2, max_tokens=50, output_schema=schema, extra={"top_p": 0.5})
    _, response = await collect(make_gemini(include_thoughts=False), settings=settings)
    assert response.message.text == '{"n": 1}'
    config = fake_gemini.requests[0].body["generationConfig"]
    assert config == {
        "temperature": 0.2,
        "topP": 0.5,
        "maxOutputTokens": 50,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


async def test_cached_and_thought_tokens_priced(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(reply(text("hi"), usage_metadata=usage(1_000_000, 500_000, thoughts=500_000, cached=600_000)))
    price = ModelPrice(input_per_million=1.0, output_per_million=10.0, cache_read_per_million=0.1)
    _, response = await collect(make_gemini(pricing=price))
    assert response.usage.cache_read_tokens == 600_000
    assert response.usage.output_tokens == 1_000_000
    assert response.usage.reasoning_tokens == 500_000  # part of the output, said apart
    # 400k uncached input at 1.0, 600k cached at 0.1, 1M output (thoughts included) at 10.0.
    assert response.cost == pytest.approx(0.4 + 0.06 + 10.0)


async def test_the_served_version_is_priced_from_the_table(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(reply(text("hi"), usage_metadata=usage(1_000_000, 0)))
    _, response = await collect(make_gemini("gemini-2.5-flash"))
    assert response.cost is not None and response.cost > 0


async def test_a_blocked_prompt_is_a_typed_model_error(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    feedback = {
        "promptFeedback": {
            "blockReason": "SAFETY",
            "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}],
        },
        "usageMetadata": usage(5, 0),
        "modelVersion": MODEL_VERSION,
    }
    fake_gemini.add(SSEReply([feedback]))
    with pytest.raises(ModelError, match="blocked the prompt") as info:
        await collect(make_gemini())
    assert info.value.details["stop_reason"] == "prompt:SAFETY"
    assert info.value.details["blocked_categories"] == ["HARM_CATEGORY_DANGEROUS_CONTENT"]
    assert pickle.loads(pickle.dumps(info.value)).details["stop_reason"] == "prompt:SAFETY"


@pytest.mark.parametrize(
    ("finish", "says"),
    [
        ("SAFETY", "a filter stopped the reply"),
        ("RECITATION", "a filter stopped the reply"),
        ("PROHIBITED_CONTENT", "a filter stopped the reply"),
        ("MAX_TOKENS", "max_output_tokens"),
        ("MALFORMED_FUNCTION_CALL", "function call could not be used"),
        ("MISSING_THOUGHT_SIGNATURE", "thought signature"),
        ("OTHER", "does not take as an answer"),
    ],
)
async def test_finish_reasons_that_are_not_an_answer(
    fake_gemini: FakeGemini, make_gemini: GeminiFactory, finish: str, says: str
) -> None:
    rating = [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}]
    fake_gemini.add(
        SSEReply(
            [
                chunk(text("Part")),
                chunk(finish=finish, safety=rating if finish == "SAFETY" else None, usage_metadata=usage()),
            ]
        )
    )
    with pytest.raises(ModelError, match=says) as info:
        await collect(make_gemini())
    assert info.value.details["stop_reason"] == finish
    if finish == "SAFETY":
        assert "HARM_CATEGORY_HARASSMENT" in str(info.value)


async def test_429_waits_what_its_retry_info_says(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(
        api_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", retry_delay="7s"),
        api_error(503, "UNAVAILABLE", "overloaded", retry_after="2"),
        reply(text("ok")),
    )
    model = make_gemini()
    _, response = await collect(model)
    assert response.message.text == "ok"
    assert model.slept == [7.0, 2.0]  # type: ignore[attr-defined]
    assert len(fake_gemini.requests) == 3


async def test_a_spent_quota_is_not_waited_for(fake_gemini: FakeGemini, make_gemini: GeminiFactory) -> None:
    fake_gemini.add(api_error(429, "RESOURCE_EXHAUSTED", "Daily quota exceeded", retry_delay="3600s"))
    with pytest.raises(ModelError, match="asked to wait 3600 s") as info:
        await collect(make_gemini())
    assert info.value.details["status_code"] == 429
    assert len(fake_gemini.requests) == 1


async def test_errors_back_off_then_fail_and_client_errors_do_not_retry(
    fake_gemini: FakeGemini, make_gemini: GeminiFactory
) -> None:
    fake_gemini.add(*[api_error(500, "INTERNAL", "boom")] * 3, api_error(400, "INVALID_ARGUMENT", "bad schema"))
    model = make_gemini(retry_delay=0.5, max_retry_delay=8.0)
    with pytest.raises(ModelError, match="all 3 attempts") as info:
        await collect(model)
    assert (info.value.details["status_code"], info.value.details["attempts"]) == (500, 3)
    assert len(model.slept) == 2 and 0.375 <= model.slept[0] <= 0.5  # type: ignore[attr-defined]
    with pytest.raises(ModelError, match=r"refused the request \(400\): INVALID_ARGUMENT: bad schema"):
        await collect(model)
    assert len(fake_gemini.requests) == 4


async def test_an_error_in_the_stream_before_anything_showed_is_retried(
    fake_gemini: FakeGemini, make_gemini: GeminiFactory
) -> None:
    overloaded = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    fake_gemini.add(SSEReply([overloaded]), reply(text("ok")))
    _, response = await collect(make_gemini())
    assert response.message.text == "ok"
    fake_gemini.add(SSEReply([chunk(text("Half")), overloaded]))
    with pytest.raises(ModelError, match="error in the stream"):
        await collect(make_gemini())


async def test_the_request_names_the_model_and_the_key(
    fake_gemini: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_gemini.url)
    model = infer_model("google:gemini-test")
    assert isinstance(model, GeminiModel) and repr(model) == f"GeminiModel('gemini-test', base_url={fake_gemini.url!r})"

    def answer(request: Request) -> SSEReply:
        return reply(text(f"key {request.headers['x-goog-api-key']}"))

    fake_gemini.add(answer)
    async with model:
        _, response = await collect(model)
    assert response.message.text == "key from-env"


async def test_no_key_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelError, match="no API key"):
        await collect(GeminiModel("gemini-2.5-flash"))


async def test_a_conversation_of_instructions_alone_is_refused(make_gemini: GeminiFactory) -> None:
    with pytest.raises(ModelError, match="needs a user turn"):
        await collect(make_gemini(), [ModelMessage.system("Be brief.")])


def test_constructor_checks() -> None:
    for bad in ({"model": ""}, {"thinking_budget": -2}, {"max_retries": -1}, {"timeout": 0}, {"max_output_tokens": 0}):
        with pytest.raises(ValueError):
            GeminiModel(**{"model": "gemini-x", **bad})  # type: ignore[arg-type]


def test_model_family() -> None:
    assert model_family("models/gemini-2.5-flash-001") == "gemini-2.5-flash"
    assert model_family("gemini-2.5-flash-preview-09-2025") == "gemini-2.5-flash"
    assert model_family("gemini-3-pro-preview") == "gemini-3-pro"
    assert model_family("gemini-2.5-flash-lite") == "gemini-2.5-flash-lite"


def test_signatures_are_stored_as_the_base64_the_api_sent() -> None:
    raw = base64.b64decode(sig("c1"))
    assert raw == b"signature:c1"


async def test_signatures_survive_the_store_and_a_new_process(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    """A tool turn stored in SQLite, read back by a fresh session on the reopened file (a restart),
    goes to the model with each signature on its part."""

    @tool(idempotent=True)
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    def answer(request: Request) -> SSEReply:
        model_turn = request.body["contents"][1]
        assert model_turn["parts"] == [
            {"text": "Plan.", "thought": True, "thoughtSignature": sig("t")},
            {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "a"}}, "thoughtSignature": sig("c1")},
        ]
        return reply(text("Found."))

    fake_gemini.add(
        reply(thought("Plan.", signature=sig("t")), call("lookup", {"q": "a"}, id="c1", signature=sig("c1"))),
        answer,
        answer,
    )
    thread_id = None
    for prompt in ("find a", "and again?"):
        store = await SqliteSessionStore.open(tmp_path / "runs.db")
        model = GeminiModel("gemini-test", base_url=fake_gemini.url, api_key="gm-test")
        try:
            session = Session(store=store, agent=Agent(name="a", model=model, tools=[lookup]), thread_id=thread_id)
            r = await session.start(prompt)
            assert r.status == "done" and r.text == "Found."
            assert session.state is not None
            thread_id = session.state.thread_id
        finally:
            await model.aclose()
            await store.close()
    assert len(fake_gemini.requests) == 3
