"""``RunResult``: what ``start()``, ``resume()`` and the decisions return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repertory.core.state import RunState, RunStatus

__all__ = ["RunResult", "reply_text"]


def reply_text(run: RunState) -> str | None:
    """The run's final reply once it is ``done`` (what ``RunResult.text`` says), else ``None``."""
    return run.result if run.status == "done" and isinstance(run.result, str) else None


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

    @classmethod
    def of(cls, run: RunState, output: Any = None) -> RunResult:
        """The result of ``run`` as it rests: ``state`` is ``run`` itself, ``text`` its reply once ``done``.

        Every ``RunResult`` is built here, so what a caller reads from a drive, from the store
        or across a process is derived from the run the same way.
        """
        return cls(run_id=run.run_id, status=run.status, state=run, text=reply_text(run), output=output)
