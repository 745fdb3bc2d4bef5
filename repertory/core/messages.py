"""Messages and their parts: what a conversation is made of.

Parts form a discriminated union on ``type`` whose values are exactly ``"text"``,
``"reasoning"``, ``"tool-call"`` and ``"tool-result"`` in Python and in JSON, so a stored message
reads back as the same classes. Messages are frozen: a message is written once into the history
graph and shared by every thread that reaches it, so nobody may edit it in place.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from repertory.core.trusted import trusted

__all__ = [
    "Origin",
    "OriginKind",
    "ModelMessage",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
]

Role = Literal["system", "user", "assistant", "tool"]
OriginKind = Literal["user", "system", "mod", "session", "model", "tool"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class TextPart(BaseModel):
    """Plain text said by the message's author."""

    model_config = _FROZEN
    type: Literal["text"] = "text"
    text: str


def _is_none(value: object) -> bool:
    return value is None


def _is_false(value: object) -> bool:
    return value is False


class ReasoningPart(BaseModel):
    """The model's visible reasoning; kept in history, never counted as the reply's text.

    ``signature`` is the provider's opaque proof that it wrote this reasoning (Anthropic's thinking
    signature): a provider that signs its reasoning demands it back unchanged in a tool turn, so it
    is stored with the text. ``redacted`` marks reasoning the provider sent encrypted: ``text`` is
    empty and ``signature`` holds the encrypted data. Adapters that cannot use either drop the part.
    """

    model_config = _FROZEN
    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = Field(default=None, exclude_if=_is_none)
    redacted: bool = Field(default=False, exclude_if=_is_false)


_LEGACY_INVALID_ARGS_KEY = "__invalid_json__"
"""Where history written before ``invalid_args`` existed kept unparsable argument text, inside ``args``."""


class ToolCallPart(BaseModel):
    """A model's request to run one tool; ``tool_call_id`` pairs it with exactly one result.

    ``invalid_args`` is the argument text a model sent that is not a JSON object (``args`` is then
    empty). Such a call never runs and is never put to a human: the step loop answers it with an
    error result quoting the text, so the model reads what went wrong and can call again instead of
    the run failing. It is left out of the JSON when ``None``, so a well-formed call is stored in the
    same shape as before the field existed; history stored before it (the text under the key
    ``"__invalid_json__"`` of ``args``) loads into the field.
    """

    model_config = _FROZEN
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    invalid_args: str | None = Field(default=None, exclude_if=_is_none)

    @model_validator(mode="after")
    def _check_invalid_args(self) -> ToolCallPart:
        # An "after" validator costs a dict lookup per call part; a "before" one made every stored
        # tool call load at about half the speed (measured: 1.1 ms against 2.1 ms per 1,000).
        if self.invalid_args is None and _LEGACY_INVALID_ARGS_KEY in self.args:
            # The record is frozen, but this is its construction: nobody holds it yet.
            object.__setattr__(self, "invalid_args", str(self.args[_LEGACY_INVALID_ARGS_KEY]))
            object.__setattr__(self, "args", {})
            self.__pydantic_fields_set__.add("invalid_args")
        elif self.invalid_args is not None and self.args:
            raise ValueError("a tool call with invalid_args has no args: its arguments never parsed")
        return self

    @classmethod
    def from_arguments_text(cls, *, tool_call_id: str, tool_name: str, arguments: str) -> ToolCallPart:
        """A call from its arguments as the model sent them (JSON text), as every adapter receives them.

        Empty text means no arguments (servers send ``""`` for parameterless tools). Text that is not
        a JSON object goes to ``invalid_args`` verbatim, for the step loop to answer with an error.
        """
        if not arguments.strip():
            return cls(tool_call_id=tool_call_id, tool_name=tool_name)
        try:
            value: JsonValue = json.loads(arguments)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            return cls(tool_call_id=tool_call_id, tool_name=tool_name, invalid_args=arguments)
        return cls(tool_call_id=tool_call_id, tool_name=tool_name, args=value)


class ToolResultPart(BaseModel):
    """The outcome of one tool call; ``is_error`` marks results the model should treat as failures."""

    model_config = _FROZEN
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    result: JsonValue = None
    is_error: bool = False
    # The arguments the call ran with when a human's decision replaced the model's (the call in the
    # history keeps what the model asked for). Left out of the JSON while unset.
    ran_with: dict[str, JsonValue] | None = Field(default=None, exclude_if=lambda v: v is None)


Part = Annotated[TextPart | ReasoningPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Origin(BaseModel):
    """Who produced a message, stamped by the runtime from the caller's principal, never by the caller."""

    model_config = _FROZEN
    kind: OriginKind
    id: str | None = None

    @property
    def label(self) -> str:
        """``kind:id`` (``user:alice``, ``session:4f2a...``), or the kind alone when there is no id."""
        return self.kind if self.id is None else f"{self.kind}:{self.id}"


class ModelMessage(BaseModel):
    """One message of a conversation: a role, its parts and where it came from.

    ``model`` names the model that wrote an assistant message (as its server reported it, else as
    it was asked for), so a conversation served by a ``FallbackModel`` says who answered each step.

    ``boundary`` marks a context boundary: the summary a compaction wrote of everything before it
    (``repertory.Compaction``). The model sees a thread from its latest boundary on
    (``MessageHistory.context_messages()``); every message before it stays in the history. It is
    left out of the JSON when ``False``, so an ordinary message is stored as before the field existed.
    """

    model_config = _FROZEN
    role: Role
    parts: list[Part] = Field(default_factory=list)
    origin: Origin | None = None
    model: str | None = Field(default=None, exclude_if=_is_none)
    boundary: bool = Field(default=False, exclude_if=_is_false)

    @property
    def text(self) -> str:
        """The message's text parts concatenated with no separator (reasoning is not text)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls this message makes, in call order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results this message carries, in order."""
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @classmethod
    def user(cls, text: str, origin: Origin | None = None) -> ModelMessage:
        """A user message holding one text part."""
        return cls._one_text("user", text, origin)

    @classmethod
    def system(cls, text: str, origin: Origin | None = None) -> ModelMessage:
        """A system message holding one text part."""
        return cls._one_text("system", text, origin)

    @classmethod
    def assistant(cls, text: str, origin: Origin | None = None) -> ModelMessage:
        """An assistant message holding one text part."""
        return cls._one_text("assistant", text, origin)

    @classmethod
    def _one_text(cls, role: Role, text: str, origin: Origin | None) -> ModelMessage:
        # A str and an Origin record (or None) are all there is to check: built without the
        # validator, which the engine paid for every message it said (a resume, an input).
        if cls is ModelMessage and isinstance(text, str) and (origin is None or isinstance(origin, Origin)):
            part = trusted(TextPart, type="text", text=text)
            return trusted(ModelMessage, role=role, parts=[part], origin=origin, model=None, boundary=False)
        return cls(role=role, parts=[TextPart(text=text)], origin=origin)
