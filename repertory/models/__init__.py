"""Real model adapters: ``OpenAIChatModel`` for any OpenAI-compatible server, ``OpenAIResponsesModel``
for OpenAI's Responses API, ``AnthropicModel`` for Anthropic's Messages API, ``GeminiModel`` for
Google's Gemini API, ``FallbackModel`` to chain them, and ``infer_model``.

``OpenAIChatModel`` and ``OpenAIResponsesModel`` need the ``openai`` extra (``pip install 'repertory[openai]'``),
``AnthropicModel`` the ``anthropic`` extra and ``GeminiModel`` the ``google`` extra; the last two are
imported on first use, so this package works without their SDKs. The engine never imports this package until an agent is
given a model string, so repertory without either SDK still works.
"""

from typing import TYPE_CHECKING, Any

from repertory.models._infer import PROVIDERS, infer_model
from repertory.models.fallback import FallbackModel
from repertory.models.openai_chat import OpenAIChatModel
from repertory.models.openai_responses import OpenAIResponsesModel
from repertory.models.pricing import PRICES, ModelPrice, cost_of, price_for

if TYPE_CHECKING:
    from repertory.models.anthropic_messages import AnthropicModel
    from repertory.models.gemini import GeminiModel

__all__ = [
    "PRICES",
    "PROVIDERS",
    "AnthropicModel",
    "FallbackModel",
    "GeminiModel",
    "ModelPrice",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "cost_of",
    "infer_model",
    "price_for",
]


def __getattr__(name: str) -> Any:
    # AnthropicModel imports the anthropic SDK, which only the `anthropic` extra installs.
    if name == "AnthropicModel":
        from repertory.models.anthropic_messages import AnthropicModel

        return AnthropicModel
    if name == "GeminiModel":  # the google extra's SDK, likewise
        from repertory.models.gemini import GeminiModel

        return GeminiModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
