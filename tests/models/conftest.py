"""Fixtures for the model adapter tests: the scripted loopback server and models pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from repertory.models import OpenAIChatModel

from .server import FakeOpenAI

ModelFactory = Callable[..., OpenAIChatModel]


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
        slept: list[float] = []

        async def record(seconds: float) -> None:
            slept.append(seconds)
            await asyncio.sleep(0)

        model = OpenAIChatModel(name, retry_sleep=record, **options)
        model.slept = slept  # type: ignore[attr-defined]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()
