"""Fixtures for the model adapter tests: the scripted loopback server and models pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest

from repertory.models import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel

from .anthropic_server import FakeAnthropic
from .gemini_server import FakeGemini
from .responses_server import FakeResponses
from .server import FakeOpenAI

if TYPE_CHECKING:
    from repertory.models import GeminiModel

ModelFactory = Callable[..., OpenAIChatModel]


def _sleep_recorder() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    """A retry sleep that records each wait instead of waiting it (yielding once), and the list it records in."""
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0)

    return slept, record


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    """A fresh scripted server on a free loopback port; a test fails if it asked for unscripted replies."""
    server = await FakeOpenAI().start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


@pytest.fixture
async def make_model(fake: FakeOpenAI) -> AsyncIterator[ModelFactory]:
    """Build models aimed at ``fake``; retry waits are recorded in ``model.slept`` instead of waited."""
    made: list[OpenAIChatModel] = []

    def make(name: str = "test-model", **options: Any) -> OpenAIChatModel:
        options.setdefault("base_url", fake.url)
        options.setdefault("api_key", "sk-test")
        options.setdefault("timeout", 10.0)
        slept, record = _sleep_recorder()
        model = OpenAIChatModel(name, retry_sleep=record, **options)
        model.slept = slept  # type: ignore[attr-defined]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


AnthropicFactory = Callable[..., AnthropicModel]


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    """A fresh scripted Messages API server; a test fails if it asked for unscripted replies."""
    server = await FakeAnthropic().start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


@pytest.fixture
async def make_anthropic(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicFactory]:
    """Build Anthropic models aimed at ``fake_anthropic``; retry waits are recorded in ``model.slept``."""
    made: list[AnthropicModel] = []

    def make(name: str = "claude-test-4-5", **options: Any) -> AnthropicModel:
        options.setdefault("base_url", fake_anthropic.url)
        options.setdefault("api_key", "sk-ant-test")
        options.setdefault("timeout", 10.0)
        model = AnthropicModel(name, **options)
        slept, record = _sleep_recorder()
        model._sleep = record
        model.slept = slept  # type: ignore[attr-defined]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


GeminiFactory = Callable[..., "GeminiModel"]


@pytest.fixture
async def fake_gemini() -> AsyncIterator[FakeGemini]:
    """A fresh scripted Gemini API server; a test fails if it asked for unscripted replies."""
    server = await FakeGemini().start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


@pytest.fixture
async def make_gemini(fake_gemini: FakeGemini) -> AsyncIterator[GeminiFactory]:
    """Build Gemini models aimed at ``fake_gemini`` through the SDK; retry waits are recorded in ``model.slept``."""
    from repertory.models import GeminiModel

    made: list[GeminiModel] = []

    def make(name: str = "gemini-test", **options: Any) -> GeminiModel:
        options.setdefault("base_url", fake_gemini.url)
        options.setdefault("api_key", "gm-test")
        options.setdefault("timeout", 10.0)
        model = GeminiModel(name, **options)
        slept, record = _sleep_recorder()
        model._sleep = record
        model.slept = slept  # type: ignore[attr-defined]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


ResponsesFactory = Callable[..., OpenAIResponsesModel]


@pytest.fixture
async def fake_responses() -> AsyncIterator[FakeResponses]:
    """A fresh scripted Responses API server; a test fails if it asked for unscripted replies."""
    server = await FakeResponses().start()
    try:
        yield server
    finally:
        await server.close()
    assert not server.problems, server.problems


@pytest.fixture
async def make_responses(fake_responses: FakeResponses) -> AsyncIterator[ResponsesFactory]:
    """Build Responses models aimed at ``fake_responses``; retry waits are recorded in ``model.slept``."""
    made: list[OpenAIResponsesModel] = []

    def make(name: str = "gpt-test", **options: Any) -> OpenAIResponsesModel:
        options.setdefault("base_url", fake_responses.url)
        options.setdefault("api_key", "sk-test")
        options.setdefault("timeout", 10.0)
        slept, record = _sleep_recorder()
        model = OpenAIResponsesModel(name, retry_sleep=record, **options)
        model.slept = slept  # type: ignore[attr-defined]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()
