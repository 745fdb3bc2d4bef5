"""``ReplayModel``: replays a recorded conversation's assistant messages, for regression tests and evals.

Record once against a real model, then replay the stored history with no model and no network:

    history = await rt.store.load_history(run.history_revision_id)
    replay = ReplayModel.from_history(history)
    agent = Agent(name="ops", model=replay, tools=[...])   # the same tools, fresh state

Each request must follow the recording: the request's messages are matched against the recorded
ones in order, and the reply is the recorded assistant message that came next. A request that
leaves the recorded path (a tool now returns something else, the prompt changed, the agent asks
at a point where the recording has no reply) raises ``ModelError`` naming the first recorded
index that differs, so a changed agent fails loudly where it changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart, TextPart
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ReasoningDelta, TextDelta, ToolSpec
from repertory.core.state import Usage
from repertory.errors import ModelError

__all__ = ["ReplayModel"]


def _same(a: ModelMessage, b: ModelMessage) -> bool:
    # Content only: origins are stamped by the runtime and the model name by whoever wrote it.
    return a.role == b.role and a.parts == b.parts


def _describe(message: ModelMessage) -> str:
    what = message.text or ", ".join(
        [f"call {c.tool_name}" for c in message.tool_calls] + [f"result of {r.tool_name}" for r in message.tool_results]
    )
    return f"{message.role} message {what[:80]!r}"


class ReplayModel:
    """A model that answers with the assistant messages of a recording, in their recorded order.

    The reply to a request is the recorded assistant message that follows the request's messages.
    System messages of the request that the recording does not hold at that point (the agent's
    instructions, recalled memory: added to every request, never stored in the history) are
    skipped; every other message must equal the recorded one (role and parts; origins and model
    names are not compared). Replies keep their recorded parts, tool call ids and ``model``. Like
    ``ScriptedModel`` it keeps no position of its own, so one recording serves any number of
    sessions and survives restarts. Usage is one request and no tokens (the history has none).
    """

    def __init__(self, messages: Sequence[ModelMessage]) -> None:
        self.recorded: tuple[ModelMessage, ...] = tuple(messages)
        if not any(m.role == "assistant" for m in self.recorded):
            raise ValueError("the recording holds no assistant message to replay")
        self.model = "replay"
        self.requests = 0

    @classmethod
    def from_history(cls, history: MessageHistory | Sequence[ModelMessage]) -> ReplayModel:
        """A replay of a stored ``MessageHistory`` (what ``store.load_history`` returns), or of its messages."""
        return cls(history.messages if isinstance(history, MessageHistory) else history)

    def position(self, messages: list[ModelMessage]) -> int:
        """The recorded index of the reply to a request of ``messages``; ``ModelError`` off the recorded path."""
        recorded = self.recorded
        j = 0
        for i, message in enumerate(messages):
            if j < len(recorded) and _same(message, recorded[j]):
                j += 1
            elif message.role != "system" and j >= len(recorded):
                raise ModelError(
                    f"ReplayModel: the recording ends at message {j}: the request goes on with "
                    f"{_describe(message)} (request message {i})",
                    index=j,
                )
            elif message.role != "system":
                raise ModelError(
                    f"ReplayModel: the request leaves the recorded path at recorded message {j}: it sends "
                    f"{_describe(message)} (request message {i}) where the recording has {_describe(recorded[j])}",
                    index=j,
                )
        if j >= len(recorded):
            raise ModelError(
                f"ReplayModel: the recording ends at message {len(recorded)}; nothing recorded answers this request",
                index=j,
            )
        if recorded[j].role != "assistant":
            raise ModelError(
                f"ReplayModel: the request leaves the recorded path at recorded message {j}: it asks for a reply "
                f"where the recording has {_describe(recorded[j])}",
                index=j,
            )
        return j

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Yield the recorded reply's text and reasoning as deltas, then the reply itself."""
        self.requests += 1
        reply = self.recorded[self.position(messages)]
        for part in reply.parts:
            if isinstance(part, ReasoningPart) and part.text:
                yield ReasoningDelta(text=part.text)
            elif isinstance(part, TextPart) and part.text:
                yield TextDelta(text=part.text)
        yield ModelResponse(message=reply, usage=Usage(requests=1))
