"""``infer_model``: a model from a ``"provider:name"`` string, so configuration can stay plain text."""

from __future__ import annotations

from typing import Any

from repertory.core.model import Model

__all__ = ["PROVIDERS", "infer_model"]

PROVIDERS = ("openai",)
"""The prefixes ``infer_model`` understands. ``openai`` covers every server with OpenAI's chat
completions API: point it elsewhere with ``OPENAI_BASE_URL`` or ``base_url=``."""


def infer_model(name: str, **options: Any) -> Model:
    """The model a ``"provider:model"`` string names: ``infer_model("openai:gpt-4o-mini")``.

    ``options`` go to the adapter's constructor (``base_url=``, ``pricing=``, ``timeout=``...).
    An unknown provider or a missing model name is a ``ValueError`` that lists what is known.
    """
    provider, sep, model = name.partition(":")
    if not sep or not model:
        raise ValueError(f"model string {name!r} must look like 'provider:model', e.g. 'openai:gpt-4o-mini'")
    if provider == "openai":
        from repertory.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(model, **options)
    raise ValueError(f"unknown model provider {provider!r} in {name!r}; known: {', '.join(PROVIDERS)}")
