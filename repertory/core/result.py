"""``RunResult``: what ``start()``, ``resume()`` and the decisions return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repertory.core.state import RunState, RunStatus

__all__ = ["RunResult"]


@dataclass(frozen=True)
class RunResult:
    """The status a run settled in for this call, its checkpoint, and the reply when ``done``.

    ``text`` is the last assistant text once the run is ``done`` (``None`` while suspended);
    ``output`` is the validated output-type instance when the run had one.
    """

    run_id: str
    status: RunStatus
    state: RunState
    text: str | None = None
    output: Any = None
