"""Binary payloads inside JSON tool results, and how a text-only reader is shown them.

A tool result may carry typed parts with base64 payloads (an MCP tool's image, audio or embedded
blob: ``{"type": "image", "mime_type": "image/png", "data": "..."}``, ``{"blob": "..."}``). The
history keeps them whole, but base64 means nothing to a text model and costs it tokens, so what a
model adapter sends is ``readable(result)``: the same JSON with each payload replaced by a short
description of what it was.
"""

from __future__ import annotations

from pydantic import JsonValue

__all__ = ["BINARY_PART_TYPES", "readable"]

BINARY_PART_TYPES = frozenset({"image", "audio"})
"""Part types whose ``data`` is base64 (MCP's image and audio content)."""


def readable(value: JsonValue) -> JsonValue:
    """``value`` with every base64 payload described instead of included; anything else unchanged."""
    if isinstance(value, list):
        return [readable(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, JsonValue] = {}
    for key, item in value.items():
        if isinstance(item, str) and (key == "blob" or (key == "data" and value.get("type") in BINARY_PART_TYPES)):
            mime = value.get("mime_type") or value.get("mimeType") or "binary data"
            out[key] = f"<{mime}, about {len(item) * 3 // 4:,} bytes, not shown>"
        else:
            out[key] = readable(item)
    return out
