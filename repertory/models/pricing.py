"""Prices per million tokens, so a run's ``cost`` adds up as it goes.

Prices change and every deployment has its own (a self-hosted vLLM costs what its machine costs),
so the table is data the user owns: ``PRICES`` is a plain module-level dict to extend or edit, and
``OpenAIChatModel(pricing=...)`` overrides it for one model. A model with no price gets
``cost=None`` (unknown), never ``0.0``, so "free" and "unpriced" stay distinguishable.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from repertory.core.state import Usage

__all__ = ["PRICES", "ModelPrice", "cost_of", "price_for"]


class ModelPrice(BaseModel):
    """What a model charges, in currency units (USD for OpenAI) per million input and output tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


PRICES: dict[str, ModelPrice] = {
    # OpenAI list prices (USD per 1M tokens) when this table was written; edit or extend it freely.
    "gpt-4o": ModelPrice(input_per_million=2.50, output_per_million=10.00),
    "gpt-4o-mini": ModelPrice(input_per_million=0.15, output_per_million=0.60),
    "gpt-4.1": ModelPrice(input_per_million=2.00, output_per_million=8.00),
    "gpt-4.1-mini": ModelPrice(input_per_million=0.40, output_per_million=1.60),
    "gpt-4.1-nano": ModelPrice(input_per_million=0.10, output_per_million=0.40),
    "o3-mini": ModelPrice(input_per_million=1.10, output_per_million=4.40),
    "o4-mini": ModelPrice(input_per_million=1.10, output_per_million=4.40),
    "gpt-3.5-turbo": ModelPrice(input_per_million=0.50, output_per_million=1.50),
}
"""Default prices by model name. Looked up at each request, so edits take effect at once."""


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
    """The cost of ``usage`` at ``price``, or ``None`` when the model has no price."""
    if price is None:
        return None
    return (usage.input_tokens * price.input_per_million + usage.output_tokens * price.output_per_million) / 1e6
