"""An MCP ``CallToolResult`` as the JSON result of a repertory tool call.

- ``structuredContent``, where present, is the result (a JSON object; the text beside it is, by the
  MCP spec, only its serialisation for clients that cannot read structure);
- otherwise, content that is all text becomes one string, its blocks joined by newlines;
- content with anything else (images, audio, resource links, embedded resources) becomes the list
  of its parts, each a typed JSON object (``{"type": "image", "mime_type": ..., "data": ...}``) in
  the server's order: kept whole in the history, never folded into the text. The model adapters
  show binary payloads to a model as a short description, not as base64
  (``repertory.core.content``);
- ``isError`` marks the result as an error; its text is the message the model reads.
"""

from __future__ import annotations

import json
from typing import cast

from mcp_types import CallToolResult, TextContent
from pydantic import JsonValue

from repertory.core.content import readable

__all__ = ["convert_result"]


def convert_result(result: CallToolResult) -> tuple[JsonValue, bool]:
    """``(result, is_error)`` for a ``tools/call`` answer."""
    content = result.content or []
    texts = [c.text for c in content if isinstance(c, TextContent)]
    if result.is_error:
        if len(texts) == len(content):
            return "\n".join(texts) or "the tool reported an error and said nothing more", True
        return json.dumps(readable(_parts(result)), ensure_ascii=False), True
    if result.structured_content is not None:
        return cast(JsonValue, result.structured_content), False
    if len(texts) == len(content):
        return "\n".join(texts), False
    return cast(JsonValue, _parts(result)), False


def _parts(result: CallToolResult) -> list[JsonValue]:
    """Every content block as a typed JSON object (snake_case keys, nothing left out but empty fields)."""
    return [cast(JsonValue, c.model_dump(mode="json", exclude_none=True)) for c in result.content or []]
