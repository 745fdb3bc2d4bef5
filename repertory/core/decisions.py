"""Decisions on a suspended run, as one typed union: ``Approve``, ``Reject`` or ``Resume``.

A decision is what a handle's ``approve``/``reject``/``resume`` hands its backend: the token it
redeems and what that kind of decision carries. One record per kind, discriminated on ``kind``,
rather than a kind string and a dict of parameters, so a backend cannot receive an approval
without its token or a rejection with a value, and mypy sees every case of a ``match``. The
records are plain pydantic models: they pickle (the Ray backend sends them to a host process)
and round-trip through JSON (``parse_decision``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = ["Approve", "Decision", "Reject", "Resume", "parse_decision"]


class Approve(BaseModel):
    """Run the pending tool call once; ``approval`` reaches it as ``ctx.approval``, ``args`` replace its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["approve"] = "approve"
    token: str
    approval: Any = None
    args: dict[str, Any] | None = None


class Reject(BaseModel):
    """Do not run the pending tool call; the model reads ``reason`` as its error result."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["reject"] = "reject"
    token: str
    reason: str = "not approved"


class Resume(BaseModel):
    """Answer a ``suspend()``: ``value`` arrives as a message from the deciding principal."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["resume"] = "resume"
    token: str
    value: Any = None


Decision = Approve | Reject | Resume
"""Any decision on a suspended run."""

_ADAPTER: TypeAdapter[Decision] = TypeAdapter(Annotated[Decision, Field(discriminator="kind")])


def parse_decision(data: Any) -> Decision:
    """A decision from its JSON form (a dict with ``kind``); a ``pydantic.ValidationError`` names what is wrong."""
    return _ADAPTER.validate_python(data)
