"""``infer_model``: a model from a ``"provider:name"`` string, so configuration can stay plain text."""

from __future__ import annotations

from typing import Any

from repertory.core.model import Model

__all__ = ["PROVIDERS", "infer_model"]

PROVIDERS = ("anthropic", "google", "openai", "openai-responses")
"""The prefixes ``infer_model`` understands. ``openai`` covers every server with OpenAI's chat
completions API (point it elsewhere with ``OPENAI_BASE_URL`` or ``base_url=``); ``anthropic`` is
Anthropic's native Messages API (``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``); ``google`` is the Gemini
API through google-genai (``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``, ``GOOGLE_GEMINI_BASE_URL``);
``openai-responses`` is OpenAI's Responses API (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""


def infer_model(name: str, **options: Any) -> Model:
    """The model a ``"provider:model"`` string names: ``infer_model("anthropic:claude-sonnet-4-5")``.

    ``options`` go to the adapter's constructor (``base_url=``, ``pricing=``, ``timeout=``...).
    An unknown provider or a missing model name is a ``ValueError`` that lists the known providers.
    The provider's SDK is imported only here, when a model of that provider is asked for.
    """
    provider, sep, model = name.partition(":")
    known = ", ".join(PROVIDERS)
    if not sep or not model:
        raise ValueError(
            f"model string {name!r} must look like 'provider:model', e.g. 'openai:gpt-4o-mini'; "
            f"known providers: {known}"
        )
    if provider == "openai":
        from repertory.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(model, **options)
    if provider == "openai-responses":
        from repertory.models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(model, **options)
    if provider == "anthropic":
        from repertory.models.anthropic_messages import AnthropicModel

        return AnthropicModel(model, **options)
    if provider == "google":
        from repertory.models.gemini import GeminiModel

        return GeminiModel(model, **options)
    raise ValueError(f"unknown model provider {provider!r} in {name!r}; known providers: {known}")
