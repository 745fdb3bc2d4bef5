"""GeminiModel(background=True): background interactions of Google's Interactions API, through the official SDK.

``BackgroundInteractions`` plays the server for real: an interaction is generated server-side at its
own pace whoever reads it, can be read again after any event id, fetched whole, and cancelled. The
adapter announces its interaction before the reply and its position after every delta, re-attaches
from the last position a dead drive left (one ``interactions.create`` per model step), reads on after
a broken stream, and cancels the interaction of a cancelled run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, DeltaWindow, InMemorySessionStore, ModelMessage, ModelSettings, Runtime
from repertory.core.messages import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import ModelCall, ModelEvent, StreamRestart
from repertory.core.tree import SessionEvent
from repertory.models import GeminiModel

from .conftest import GeminiFactory
from .gemini_server import (
    MODEL_VERSION,
    BackgroundInteractions,
    FakeGemini,
    Request,
    SSEReply,
    Step,
    call_step,
    interaction_events,
    interaction_usage,
    output_step,
    sig,
    thought_step,
)
from .helpers import LOOKUP, WAIT, collect, deltas

WORDS = [f"w{n} " for n in range(40)]


def _story(body: dict[str, Any], interaction_id: str) -> list[Step]:
    return [thought_step("Let me ", "see.", signature=sig(interaction_id)), output_step("a ", "b ", "c ", "d")]


@pytest.fixture
async def background() -> AsyncIterator[BackgroundInteractions]:
    server = await BackgroundInteractions(_story).start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


def _bg_model(server: BackgroundInteractions, **options: Any) -> GeminiModel:
    options.setdefault("timeout", WAIT)
    return GeminiModel("gemini-test", api_key="gm-test", base_url=server.url, background=True, **options)


async def test_an_interaction_is_announced_before_its_reply_and_after_every_delta(
    background: BackgroundInteractions,
) -> None:
    model = _bg_model(background, thinking_level="low")
    try:
        events, response = await collect(
            model, [ModelMessage.system("Be brief."), ModelMessage.user("hi")], [LOOKUP], ModelSettings(temperature=0.5)
        )
    finally:
        await model.aclose()
    [body] = background.creates
    assert (body["background"], body["store"], body["stream"], body["model"]) == (True, True, True, "gemini-test")
    assert body["system_instruction"] == "Be brief."
    assert body["input"] == [{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"] == [
        {"type": "function", "name": "lookup", "description": "Look something up.", "parameters": LOOKUP.parameters}
    ]
    assert body["generation_config"] == {"temperature": 0.5, "thinking_summaries": "auto", "thinking_level": "low"}
    kinds = ["call" if isinstance(e, ModelCall) else type(e).__name__ for e in events]
    assert kinds[0] == "call"  # the id, before any delta
    assert all(kinds[i + 1] == "call" for i, k in enumerate(kinds) if k != "call")  # a position after every delta
    calls = [e.state for e in events if isinstance(e, ModelCall)]
    planned = background.interactions["v1_int1"].planned
    assert calls[0] == {"interaction_id": "v1_int1", "last_event_id": planned[0]["event_id"]}
    shown = [
        e["event_id"] for e in planned if e["event_type"] == "step.delta" and e["delta"]["type"] != "thought_signature"
    ]
    assert [c["last_event_id"] for c in calls[1:]] == shown  # each covers its own delta, no further
    assert deltas(events) == [
        ("reasoning", "Let me "),
        ("reasoning", "see."),
        ("text", "a "),
        ("text", "b "),
        ("text", "c "),
        ("text", "d"),
    ]
    assert response.message.parts == [
        ReasoningPart(text="Let me see.", signature=sig("v1_int1")),
        TextPart(text="a b c d"),
    ]
    assert response.message.model == MODEL_VERSION
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.total_tokens) == (20, 33, 4, 53)
    assert background.gets == []  # read from the start: the streamed steps are the reply


def _tools(body: dict[str, Any], interaction_id: str) -> list[Step]:
    if not any(s["type"] == "function_result" for s in body["input"]):
        return [thought_step("Plan.", signature=sig("plan")), call_step("c1", "lookup", {"q": "a"})]
    return [output_step("Found ", "it.")]


async def test_calls_and_their_signatures_go_back_as_steps() -> None:
    server = await BackgroundInteractions(_tools).start()
    model = _bg_model(server)
    try:
        history = [ModelMessage.user("find a")]
        _, first = await collect(model, history, [LOOKUP])
        assert first.message.parts == [
            ReasoningPart(text="Plan.", signature=sig("plan")),
            ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
        ]
        result = ToolResultPart(tool_call_id="c1", tool_name="lookup", result={"hits": 1})
        history += [first.message, ModelMessage(role="tool", parts=[result])]
        _, second = await collect(model, history, [LOOKUP])
    finally:
        await model.aclose()
        await server.close()
    assert not server.problems, server.problems
    assert second.message.text == "Found it."
    assert server.creates[1]["input"] == [
        {"type": "user_input", "content": [{"type": "text", "text": "find a"}]},
        {"type": "thought", "signature": sig("plan"), "summary": [{"type": "text", "text": "Plan."}]},
        {"type": "function_call", "id": "c1", "name": "lookup", "arguments": {"q": "a"}},
        {"type": "function_result", "call_id": "c1", "name": "lookup", "result": '{"hits": 1}', "is_error": False},
    ]


async def test_a_recovered_call_reattaches_after_its_last_event_and_asks_nothing_again(
    background: BackgroundInteractions,
) -> None:
    first = _bg_model(background)
    seen: list[ModelEvent] = []
    try:
        async for event in first.request([ModelMessage.user("hi")], [], ModelSettings()):
            seen.append(event)
            if isinstance(event, ModelCall) and len([e for e in seen if isinstance(e, ModelCall)]) == 4:
                break  # the drive dies here: the thought and one text delta shown, their position known
    finally:
        await first.aclose()
    last = [e for e in seen if isinstance(e, ModelCall)][-1].state
    second = _bg_model(background)
    try:
        events, response = await collect(second, settings=ModelSettings(attach=last))
    finally:
        await second.aclose()
    assert len(background.creates) == 1  # one interaction, whatever happened to its reader
    assert background.reads == [("v1_int1", last["last_event_id"])]
    shown = deltas(seen) + deltas(events)
    assert "".join(t for k, t in shown if k == "text") == "a b c d"  # nothing lost, nothing twice
    assert "".join(t for k, t in shown if k == "reasoning") == "Let me see."
    assert not [e for e in events if isinstance(e, StreamRestart)]
    # The re-attached reader never saw the thought's steps: the reply comes whole from the stored interaction.
    assert background.gets == ["v1_int1"]
    assert response.message.parts == [
        ReasoningPart(text="Let me see.", signature=sig("v1_int1")),
        TextPart(text="a b c d"),
    ]
    assert response.usage.cache_read_tokens == 4


async def test_an_interaction_that_can_no_longer_be_found_starts_over(background: BackgroundInteractions) -> None:
    model = _bg_model(background)
    try:
        events, response = await collect(
            model, settings=ModelSettings(attach={"interaction_id": "v1_gone", "last_event_id": "evt-x"})
        )
    finally:
        await model.aclose()
    assert isinstance(events[0], StreamRestart) and "v1_gone" in events[0].reason
    assert isinstance(events[1], ModelCall) and events[1].state["interaction_id"] == "v1_int1"
    assert response.message.text == "a b c d" and len(background.creates) == 1


async def test_a_broken_stream_is_read_on_from_its_last_event_not_asked_again(
    fake_gemini: FakeGemini, make_gemini: GeminiFactory
) -> None:
    made = interaction_events("v1_int9", [output_step("one ", "two ", "three")], interaction_usage())
    cut_at = next(i for i, e in enumerate(made) if e.get("delta", {}).get("text") == "two ")
    fake_gemini.add(SSEReply(list(made[: cut_at + 1]), cut=True))

    def rest(request: Request) -> SSEReply:
        assert request.method == "GET" and request.path.startswith("/v1/interactions/v1_int9?")
        assert f"last_event_id={made[cut_at]['event_id']}" in request.path and "stream=true" in request.path
        return SSEReply(list(made[cut_at + 1 :]))

    fake_gemini.add(rest)
    model = make_gemini(background=True, max_retries=1)
    events, response = await collect(model)
    assert "".join(t for _, t in deltas(events)) == "one two three" and response.message.text == "one two three"
    assert len(model.slept) == 1  # type: ignore[attr-defined]
    assert [r.method for r in fake_gemini.requests] == ["POST", "GET"]


async def test_a_cancelled_run_cancels_its_interaction(background: BackgroundInteractions) -> None:
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
    assert background.cancelled == ["v1_int1"] and background.interactions["v1_int1"].status == "cancelled"


async def test_cancel_call_is_best_effort(background: BackgroundInteractions, caplog: pytest.LogCaptureFixture) -> None:
    model = _bg_model(background)
    try:
        with caplog.at_level(logging.WARNING, logger="repertory.models"):
            await model.cancel_call({"interaction_id": "v1_unknown"})  # a 404: logged, not raised
        await model.cancel_call({})
    finally:
        await model.aclose()
    assert background.cancelled == [] and "v1_unknown" in caplog.text
    assert [r.method for r in background.requests] == ["POST"]
    assert background.requests[0].path.startswith("/v1/interactions/v1_unknown")


def test_background_takes_a_thinking_level_not_a_budget() -> None:
    with pytest.raises(ValueError, match="thinking_level"):
        GeminiModel("gemini-test", api_key="k", background=True, thinking_budget=128)
    assert "background=True" in repr(GeminiModel("gemini-test", api_key="k", background=True))


# -- end to end: a runtime dies mid-reply, another finishes it --------------------------------------------


def _long(body: dict[str, Any], interaction_id: str) -> list[Step]:
    return [output_step(f"[{interaction_id}] ", *WORDS)]


async def test_a_second_runtime_finishes_the_reply_of_a_closed_one_with_one_interaction(tmp_path: Path) -> None:
    server = await BackgroundInteractions(_long, pace=0.01).start()
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    def agent() -> Agent:
        return Agent(name="a", model=_bg_model(server), delta_window=DeltaWindow(ms=0))

    try:
        rt1 = await Runtime.start(store=url, agents={"a": agent()})
        h = await rt1.create_session(agent="a")
        turn = await h.send("tell")
        async for event in h.events():  # part of the reply is in the log (written as it came: ms=0)
            if event.type == "text.delta" and event.data["text"] == "w3 ":
                break
        await rt1.close()  # lets go, as a crash would: the interaction goes on server-side

        async with await Runtime.start(store=url, agents={"a": agent()}) as rt2:
            result = await (await rt2.session(h.id)).get_turn(turn.submission_id).result()
            log = await rt2.store.load_events(h.id)
    finally:
        await server.close()
    assert not server.problems, server.problems
    whole = "[v1_int1] " + "".join(WORDS)
    assert result.text == whole
    assert len(server.creates) == 1  # one interaction, whatever closed
    [(again, resumed_after)] = server.reads  # the second runtime read on after the last event the first stored
    assert again == "v1_int1" and resumed_after is not None
    text = [e for e in log if e.type == "text.delta"]
    assert "".join(e.data["text"] for e in text) == whole  # nothing lost, nothing twice
    assert not [e for e in log if e.type == "reply.retracted"]
