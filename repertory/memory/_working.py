"""The built-in ``update_working_memory`` tool a ``StoreMemory`` contributes to every run it serves.

The model replaces the whole document each time (no patch language to get wrong), so a call is
idempotent: run twice after a crash, it leaves the same document. With a schema, the tool's
parameter *is* the schema, so the model sees the shape it must send, and a document that does not
fit comes back to it as an error result (the tool never runs) which it can read and correct.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, JsonValue
from pydantic_core import to_jsonable_python

from repertory.runtime.tools import Tool

__all__ = ["WORKING_MEMORY_TOOL", "WorkingMemory", "document_json", "working_memory_tool"]

WORKING_MEMORY_TOOL = "update_working_memory"

_DESCRIPTION = (
    "Replace your working memory about this user: one JSON document shown to you at the start of every "
    "conversation, under 'Working memory'. Send the whole document each time (it replaces the previous one): "
    "keep what still matters, drop what is stale. Use it for lasting facts, preferences and open tasks, "
    "not for a transcript of the conversation."
)


class WorkingMemory(Protocol):
    """Where the tool writes: one resource's working memory (``StoreMemory``)."""

    @property
    def working_memory_schema(self) -> type[BaseModel] | None:
        """The document's schema, or ``None`` for any JSON object."""
        ...

    async def set_working_memory(self, document: Any) -> JsonValue:
        """Replace the document; returns it as stored (``ToolError``, which the model reads, if it does not fit)."""
        ...


def working_memory_tool(memory: WorkingMemory) -> Tool:
    """The tool bound to ``memory``'s resource (never to a thread: working memory is per resource)."""
    schema = memory.working_memory_schema

    async def update_working_memory(document: Any) -> dict[str, JsonValue]:
        stored = await memory.set_working_memory(document)
        return {"status": "saved", "document": stored}

    # The parameter's type is what the model is shown and what arguments are validated against.
    update_working_memory.__annotations__ = {
        "document": schema if schema is not None else dict[str, Any],
        "return": dict[str, JsonValue],
    }
    description = _DESCRIPTION
    if schema is not None:
        description += f" The document must match the {schema.__name__} schema of the 'document' parameter."
    return Tool(update_working_memory, name=WORKING_MEMORY_TOOL, description=description, idempotent=True)


def document_json(schema: type[BaseModel] | None, document: Any) -> JsonValue:
    """The document as JSON, validated by ``schema`` when there is one (``ValidationError`` if it does not fit)."""
    if schema is not None:
        model = document if isinstance(document, schema) else schema.model_validate(document)
        data: JsonValue = model.model_dump(mode="json")
        return data
    data = to_jsonable_python(document)
    if not isinstance(data, dict):
        raise ValueError(f"working memory must be a JSON object, not {type(data).__name__}")
    return data
