"""Prices per million tokens, so a run's ``cost`` adds up as it goes.

Prices change and every deployment has its own (a self-hosted vLLM costs what its machine costs),
so the table is data the user owns: ``PRICES`` is a plain module-level dict to extend or edit, and
each adapter's ``pricing=`` (``OpenAIChatModel``, ``AnthropicModel``, ``GeminiModel``) overrides it for
one model. A model with no price gets ``cost=None`` (unknown), never ``0.0``, so "free" and "unpriced" stay
distinguishable.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from repertory.core.state import Usage

__all__ = ["PRICES", "ModelPrice", "cost_of", "price_for"]


class ModelPrice(BaseModel):
    """What a model charges, in currency units (USD in ``PRICES``) per million tokens.

    ``cache_read_per_million`` is the rate of input tokens served from the prompt cache and
    ``cache_write_per_million`` the rate of input tokens written to it (Anthropic's 5-minute cache
    write); either left ``None`` is charged at ``input_per_million``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    cache_read_per_million: float | None = Field(default=None, ge=0)
    cache_write_per_million: float | None = Field(default=None, ge=0)


def _openai(inp: float, cached: float, out: float) -> ModelPrice:
    return ModelPrice(input_per_million=inp, output_per_million=out, cache_read_per_million=cached)


def _gemini(inp: float, cached: float, out: float) -> ModelPrice:
    return ModelPrice(input_per_million=inp, output_per_million=out, cache_read_per_million=cached)


def _claude(inp: float, write: float, read: float, out: float) -> ModelPrice:
    return ModelPrice(
        input_per_million=inp, output_per_million=out, cache_read_per_million=read, cache_write_per_million=write
    )


_SONNET_5 = _claude(2.00, 2.50, 0.20, 10.00)
_SONNET_4 = _claude(3.00, 3.75, 0.30, 15.00)
_OPUS_4 = _claude(15.00, 18.75, 1.50, 75.00)
_OPUS_45 = _claude(5.00, 6.25, 0.50, 25.00)
_HAIKU_45 = _claude(1.00, 1.25, 0.10, 5.00)
_HAIKU_35 = _claude(0.80, 1.00, 0.08, 4.00)

PRICES: dict[str, ModelPrice] = {
    # OpenAI list prices (USD per 1M tokens: input, cached input, output) when this table was written.
    "gpt-4o": _openai(2.50, 1.25, 10.00),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
    "gpt-4.1": _openai(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
    "o3-mini": _openai(1.10, 0.55, 4.40),
    "o4-mini": _openai(1.10, 0.275, 4.40),
    "gpt-3.5-turbo": ModelPrice(input_per_million=0.50, output_per_million=1.50),
    # Anthropic list prices (USD per 1M tokens: input, 5-minute cache write, cache read, output), under
    # the model ids the API answers with; an alias that names a dated model is listed beside it.
    # Tiered prices (Haiku 5.5 charges more past a prompt length) are not modelled: price those yourself.
    "claude-opus-5": _OPUS_45,
    "claude-sonnet-5": _SONNET_5,
    "claude-sonnet-5-5": _SONNET_5,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-5-20251101": _OPUS_45,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-haiku-4-5": _HAIKU_45,
    "claude-haiku-4-5-20251001": _HAIKU_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-1-20250805": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4-20250514": _OPUS_4,
    "claude-sonnet-4-0": _SONNET_4,
    "claude-sonnet-4-20250514": _SONNET_4,
    "claude-3-7-sonnet-latest": _SONNET_4,
    "claude-3-7-sonnet-20250219": _SONNET_4,
    "claude-3-5-haiku-latest": _HAIKU_35,
    "claude-3-5-haiku-20241022": _HAIKU_35,
    # Google Gemini API list prices (USD per 1M tokens: input, cached input, output; thinking is output)
    # for prompts up to 200k tokens; the higher tier past that, and cache storage, are not modelled.
    "gemini-3-pro-preview": _gemini(2.00, 0.20, 12.00),
    "gemini-2.5-pro": _gemini(1.25, 0.125, 10.00),
    "gemini-2.5-flash": _gemini(0.30, 0.03, 2.50),
    "gemini-2.5-flash-lite": _gemini(0.10, 0.01, 0.40),
}
"""Default prices by model name, edit or extend freely. Looked up at each request, so edits take effect at once."""


def price_for(names: list[str], overrides: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of the first of ``names`` found in ``overrides``, then in ``PRICES``; ``None`` if unpriced.

    Several names because a server may answer under a dated alias (``gpt-4o-mini-2024-07-18``)
    of the name that was asked for; the asked-for name is tried first.
    """
    for table in (overrides or {}, PRICES):
        for name in names:
            price = table.get(name)
            if price is not None:
                return price
    return None


def cost_of(price: ModelPrice | None, usage: Usage) -> float | None:
    """The cost of ``usage`` at ``price``, or ``None`` when the model has no price.

    ``usage.input_tokens`` includes the cached tokens, so the uncached rest is what is left once
    ``cache_read_tokens`` and ``cache_write_tokens`` are taken out; each part is charged its own rate.
    """
    if price is None:
        return None
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    plain = max(0, usage.input_tokens - cached)
    read_rate = price.input_per_million if price.cache_read_per_million is None else price.cache_read_per_million
    write_rate = price.input_per_million if price.cache_write_per_million is None else price.cache_write_per_million
    return (
        plain * price.input_per_million
        + usage.cache_read_tokens * read_rate
        + usage.cache_write_tokens * write_rate
        + usage.output_tokens * price.output_per_million
    ) / 1e6
