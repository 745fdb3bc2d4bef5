"""``ReplayTool``: a tool that answers from a case's recording and never runs anything.

A variant's tools are replaced by replay tools of the same names and specs (the model sees the
original's description and schema, and its arguments are validated the same way). A call answers
with the result the original conversation got for the same tool and the same arguments
(``call_key``: canonical JSON, so argument order does not matter), as an error result when the
recorded one was; a call the original never made gets the error result ``not recorded: ...``.

The recordings live in the fork's own metadata (``RECORDED_KEY``), written when the fork is made,
so a replay needs nothing in memory: a fork driven again after a crash, in another process,
answers the same. A call repeated with the same arguments gets the next recorded result for them
(the count is kept in the run's scratch, which its checkpoints persist), and the last one again
once they run out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from repertory.core.store import TreeStore
from repertory.core.toolspec import ToolSpec
from repertory.errors import ToolError
from repertory.evals.records import RecordedCall, call_key
from repertory.runtime import Tool, ToolContext

__all__ = ["NOT_RECORDED", "RECORDED_KEY", "ReplayTool", "Recordings", "recordings_of"]

RECORDED_KEY = "eval_recorded"
"""The fork metadata key holding its case's recorded results: ``{call_key: [[result, is_error], ...]}``."""

NOT_RECORDED = "not recorded"
"""How the error result of a call the original conversation never made begins."""

_SEEN = "eval_replay_seen"
"""The run's scratch key counting replayed calls per ``call_key``."""

_CACHE = 1024


def recordings_of(calls: Sequence[RecordedCall]) -> dict[str, JsonValue]:
    """The recordings a fork keeps in its metadata: each answered call's result by its key, in call order."""
    out: dict[str, list[JsonValue]] = {}
    for call in calls:
        if call.answered:
            out.setdefault(call.key, []).append([call.result, call.is_error])
    return dict(out.items())


class Recordings:
    """Reads the recordings of a fork from its session's metadata, once per session.

    The metadata of a fork does not change once made, so a read is kept (up to ``_CACHE``
    sessions; then the cache starts over).
    """

    def __init__(self, store: TreeStore) -> None:
        self.store = store
        self._by_session: dict[str, dict[str, JsonValue]] = {}

    async def of(self, session_id: str) -> dict[str, JsonValue]:
        """The recordings of the fork ``session_id`` (empty for a session without any)."""
        cached = self._by_session.get(session_id)
        if cached is not None:
            return cached
        record = await self.store.load_session(session_id)
        raw = None if record is None else record.metadata.get(RECORDED_KEY)
        found = raw if isinstance(raw, dict) else {}
        if len(self._by_session) >= _CACHE:
            self._by_session.clear()
        self._by_session[session_id] = found
        return found


class ReplayTool(Tool):
    """Stands in for ``original``: same name, description and argument schema; answers from the recording.

    It is idempotent (it has no side effect) and never asks for an approval: the recorded result
    already holds the decision a human took on the original call.
    """

    def __init__(self, original: Tool, recordings: Recordings) -> None:
        self.original = original
        self.recordings = recordings
        self.name = original.name
        self.description = original.description
        self.requires_approval = False
        self.idempotent = True
        self.fn = self._direct
        self.is_async = True
        self._ctx_param = None
        self.args_model = original.args_model
        self._spec = original.spec()

    def spec(self) -> ToolSpec:
        """The original tool's spec, unchanged."""
        return self._spec

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The original's validation: a call it would refuse is refused the same way."""
        return self.original.validate(args)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> JsonValue:
        """The recorded result of this call (an error result where it was one), or ``not recorded``."""
        self.validate(args)
        key = call_key(self.name, args)
        recorded = (await self.recordings.of(ctx.thread_id)).get(key)
        if not isinstance(recorded, list) or not recorded:
            raise ToolError(
                f"{NOT_RECORDED}: the original conversation made no call of {self.name!r} with these arguments"
            )
        seen = ctx.scratch.setdefault(_SEEN, {})
        assert isinstance(seen, dict)
        n = seen.get(key, 0)
        index = n if isinstance(n, int) else 0
        seen[key] = index + 1
        entry = recorded[min(index, len(recorded) - 1)]
        result, is_error = entry if isinstance(entry, list) and len(entry) == 2 else (entry, False)
        if is_error is True:
            raise ToolError(result if isinstance(result, str) else json.dumps(result))
        return result

    async def _direct(self, **arguments: Any) -> JsonValue:
        raise ToolError(f"{NOT_RECORDED}: a replay tool answers only inside an eval's fork")

    def __repr__(self) -> str:
        return f"ReplayTool({self.name!r})"
