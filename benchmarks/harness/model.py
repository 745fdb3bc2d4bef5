"""``BenchModel``: the base of every typed report part (declared fields only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["BenchModel"]


class BenchModel(BaseModel):
    """Base of every report part: fields are declared, so a misspelt or stale figure is an error."""

    model_config = ConfigDict(extra="forbid")
