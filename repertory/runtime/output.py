"""``parse_output``: a final reply validated into an agent's ``output_type``.

The step loop validates with it (and feeds the errors back to the model); a run read back from the
store (``continue_run`` of a finished run, a handle's result) rebuilds its ``output`` with it too, so
a stored reply parses the same way wherever it is read.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

__all__ = ["parse_output"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_output(output_type: type[BaseModel], text: str) -> BaseModel:
    """Validate a final reply into ``output_type``, tolerating a Markdown code fence around the JSON."""
    match = _FENCE.match(text)
    return output_type.model_validate_json(match.group(1) if match else text)
