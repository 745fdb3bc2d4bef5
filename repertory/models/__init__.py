"""Real model adapters: ``OpenAIChatModel`` for any OpenAI-compatible server, and ``infer_model``.

Needs the ``openai`` extra (``pip install 'repertory[openai]'``). The engine itself never imports
this package until an agent is given a model string, so repertory without the SDK still works.
"""

from repertory.models._infer import PROVIDERS, infer_model
from repertory.models.openai_chat import OpenAIChatModel
from repertory.models.pricing import PRICES, ModelPrice, cost_of, price_for

__all__ = [
    "PRICES",
    "PROVIDERS",
    "ModelPrice",
    "OpenAIChatModel",
    "cost_of",
    "infer_model",
    "price_for",
]
