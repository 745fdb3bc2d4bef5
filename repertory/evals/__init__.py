"""Evals from stored sessions: datasets of real conversations, variants replayed without side effects, scores.

Needs the ``evals`` extra (pydantic-evals, and the analytics extra for the Parquet results).
"""

from repertory._extras import require

require("repertory.evals", "evals")

__all__: list[str] = []
