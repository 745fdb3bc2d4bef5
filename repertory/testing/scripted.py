"""``ScriptedModel``: a deterministic model for tests, demos and benchmarks (product code, not a mock).

With a list of steps, the request whose messages already hold n assistant messages gets
``steps[n]``: one script serves any number of sessions, survives restarts (a re-driven run asks
the same question and gets the same answer) and continues across turns.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import (
    ModelEvent,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    ToolSpec,
)
from repertory.core.state import Usage
from repertory.errors import ModelError

__all__ = ["ScriptedModel", "Step", "StepFunction"]

Step: TypeAlias = dict[str, Any]
StepFunction: TypeAlias = Callable[[list[ModelMessage], list[ToolSpec]], Step | Awaitable[Step]]

_KNOWN_KEYS = {"text", "tool", "args", "tools", "json", "reasoning", "usage", "cost", "chunks", "chunk_delay", "midway"}


class ScriptedModel:
    """A model that replies from a script.

    A step is a dict: ``{"text": "..."}`` (final reply), ``{"tool": "name", "args": {...}}`` (one
    call), ``{"tools": [{"tool": ..., "args": ...}, ...]}`` (parallel calls), ``{"json": {...}}``
    (a final reply whose text is that JSON document), optionally with ``"reasoning": "..."`` and
    ``"usage": {"input_tokens": n, "output_tokens": m}`` (also ``cache_read_tokens`` and
    ``cache_write_tokens``, parts of ``input_tokens``). Without ``usage`` the tokens are
    estimated at four characters a token, so analytics over scripted runs are not all zeros.
    ``"cost": x`` is the request's cost (as a priced model reports it); without it, none.
    ``"chunks": n`` streams each text and reasoning part as ``n`` deltas (``"chunk_delay"`` seconds
    apart), and ``"midway"``, a zero-argument async callable, is awaited once half of them are out:
    a reply caught mid-stream, for tests of what readers see of a partial reply.
    ``delay`` seconds pass before each reply. Running out of steps raises ``ModelError``.
    Every reply records ``name`` as the model that wrote it (``ModelMessage.model``).
    """

    def __init__(self, steps: Sequence[Step] | StepFunction, delay: float = 0.0, *, name: str = "scripted") -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.steps = steps
        self.delay = delay
        self.model = name
        self.requests = 0
        # By id of the last message of a request: (that message, prefix length, assistant count,
        # characters, sampled (index, message) pairs). The next request of the same conversation
        # scans only what was added since; the samples tell a different conversation that happens
        # to share its last message object apart.
        self._memo: dict[int, tuple[ModelMessage, int, int, int, tuple[tuple[int, ModelMessage], ...]]] = {}

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Reply with the scripted step for this point of the conversation."""
        self.requests += 1
        step = await self._step(messages, tools)
        if self.delay:
            await asyncio.sleep(self.delay)
        message, usage = self._build(step, messages)
        pieces: list[ModelEvent] = []
        n = max(1, int(step.get("chunks", 1)))
        for part in message.parts:
            if isinstance(part, ReasoningPart | TextPart):
                kind = ReasoningDelta if isinstance(part, ReasoningPart) else TextDelta
                pieces.extend(kind(text=chunk) for chunk in _split(part.text, n))
        pause, midway = float(step.get("chunk_delay", 0.0)), step.get("midway")
        for i, piece in enumerate(pieces):
            if midway is not None and i == len(pieces) // 2:
                await midway()
            elif pause and i:
                await asyncio.sleep(pause)
            yield piece
        cost = step.get("cost")
        yield ModelResponse(message=message, usage=usage, cost=None if cost is None else float(cost))

    async def _step(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> Step:
        if callable(self.steps):
            step = self.steps(messages, tools)
            if inspect.isawaitable(step):
                step = await step
        else:
            n = self._scan(messages)[0]
            if n >= len(self.steps):
                raise ModelError(
                    f"ScriptedModel ran out of steps: request with {n} assistant messages, "
                    f"script has {len(self.steps)} steps"
                )
            step = self.steps[n]
        if not isinstance(step, dict):
            raise ModelError(f"a scripted step must be a dict, got {type(step).__name__}")
        unknown = set(step) - _KNOWN_KEYS
        if unknown:
            raise ModelError(f"unknown keys in scripted step: {sorted(unknown)}")
        return step

    def _scan(self, messages: list[ModelMessage]) -> tuple[int, int]:
        """Assistant messages and text characters in ``messages``, reusing the last request's counts."""
        if not messages:
            return 0, 0
        start, count, chars = 0, 0, 0
        for i in range(len(messages), 0, -1):
            hit = self._memo.get(id(messages[i - 1]))
            if (
                hit is not None
                and hit[0] is messages[i - 1]
                and hit[1] == i
                and all(messages[j] is m or messages[j] == m for j, m in hit[4])
            ):
                start, count, chars = i, hit[2], hit[3]
                break
        for m in messages[start:]:
            count += m.role == "assistant"
            chars += len(m.text)
        if len(self._memo) >= 4096:
            self._memo.clear()
        n = len(messages)
        samples = tuple((j, messages[j]) for j in sorted({0, 1, 2, n // 4, n // 2, (3 * n) // 4, n - 2}) if 0 <= j < n)
        self._memo[id(messages[-1])] = (messages[-1], n, count, chars, samples)
        return count, chars

    def _build(self, step: Step, messages: list[ModelMessage]) -> tuple[ModelMessage, Usage]:
        parts: list[Part] = []
        if step.get("reasoning"):
            parts.append(ReasoningPart(text=str(step["reasoning"])))
        if "text" in step:
            parts.append(TextPart(text=str(step["text"])))
        if "json" in step:
            parts.append(TextPart(text=json.dumps(step["json"])))
        calls = list(step.get("tools", []))
        if "tool" in step:
            calls.insert(0, {"tool": step["tool"], "args": step.get("args", {})})
        for call in calls:
            if not isinstance(call, dict) or "tool" not in call:
                raise ModelError(f"a scripted tool call needs a 'tool' key: {call!r}")
            parts.append(
                ToolCallPart(tool_call_id=f"call_{new_id()}", tool_name=call["tool"], args=call.get("args", {}))
            )
        if not parts:
            raise ModelError(f"scripted step produces no reply: {step!r}")
        message = ModelMessage(role="assistant", parts=parts, model=self.model)
        raw = step.get("usage")
        read = write = 0
        if raw is not None:
            inp, out = int(raw.get("input_tokens", 0)), int(raw.get("output_tokens", 0))
            read, write = int(raw.get("cache_read_tokens", 0)), int(raw.get("cache_write_tokens", 0))
        else:
            inp = self._scan(messages)[1] // 4
            out = max(1, len(message.text) // 4)
        usage = Usage(
            input_tokens=inp,
            output_tokens=out,
            total_tokens=inp + out,
            requests=1,
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
        return message, usage


def _split(text: str, n: int) -> list[str]:
    """``text`` in ``n`` pieces of near-equal length (fewer when it is shorter), none empty."""
    if n <= 1 or len(text) <= 1:
        return [text] if text else []
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]
