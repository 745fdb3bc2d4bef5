"""``Agent``: a model, instructions and tools; the configuration a session drives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from repertory.core.budget import Budget
from repertory.core.model import Model, ModelSettings, ToolSpec
from repertory.runtime.compaction import Compaction
from repertory.runtime.deltas import DEFAULT_WINDOW, DeltaWindow
from repertory.runtime.guardrails import Guardrail
from repertory.runtime.tools import Tool, ToolSource, tool

_log = logging.getLogger(__name__)


async def _listing(source: ToolSource) -> Sequence[Tool] | Exception:
    """The source's tools, or the error it listed with (cancellation still propagates)."""
    try:
        return await source.list_tools()
    except Exception as exc:
        return exc


__all__ = ["Agent"]


class Agent:
    """What a session runs: ``model`` answers, ``tools`` act, ``instructions`` lead every request.

    ``max_steps`` bounds the model requests of one run (the next one raises
    ``StepBudgetExceeded``). ``output_type`` validates every final reply into that pydantic model,
    sending validation errors back to the model at most twice before ``OutputValidationError``.
    Instructions are sent with each request and never written into the history. ``model`` may
    be a ``"provider:model"`` string such as ``"openai:gpt-4o-mini"`` (see ``repertory.models.infer_model``).
    ``tools`` may also hold ``ToolSource``s (an MCP server): their tools join ``tools`` once listed,
    before the first drive that needs them (``refresh_tools``).
    ``compaction`` keeps every request within a token budget by summarising older messages into a
    context boundary, deleting nothing (``repertory.Compaction``); without it every request carries
    the whole conversation.
    ``input_guardrails`` check a run's input before its first model request, ``output_guardrails``
    its final reply: callables ``(ctx, text) -> str | None``, sync or async, where a string ends
    the run ``error`` with ``GuardrailTripped`` (see ``repertory.runtime.guardrails``).
    ``delta_window`` gathers the reply's text and reasoning deltas into stored events, so a reader
    that reconnects (or outlives the server) replays the partial reply (``repertory.DeltaWindow``);
    ``None`` streams them live only.
    ``description`` says what the agent is for, to whoever picks an agent from outside (the A2A
    agent card, ``repertory.http``); it never reaches the model, which reads ``instructions``.
    ``budget`` caps what each run of the agent may spend (``repertory.Budget``: cost, tokens,
    model requests, tool calls); past a cap the run ends ``error`` with ``BudgetExceeded`` before
    the next request or tool call starts. A whole session tree's budget is set where the tree is
    created (``Runtime.create_session(budget=...)``).
    """

    def __init__(
        self,
        *,
        name: str,
        model: Model | str,
        instructions: str | None = None,
        tools: Sequence[Tool | Any] = (),
        max_steps: int = 100,
        output_type: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
        compaction: Compaction | None = None,
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        delta_window: DeltaWindow | None = DEFAULT_WINDOW,
        description: str | None = None,
        budget: Budget | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.name = name
        if isinstance(model, str):
            # Imported here so the engine never loads a model SDK unless a model string asks for one.
            from repertory.models import infer_model

            model = infer_model(model)
        self.model: Model = model
        self.instructions = instructions
        self.description = description
        self.max_steps = max_steps
        self.output_type = output_type
        self.settings = settings or ModelSettings()
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(f"compaction must be a Compaction, got {type(compaction).__name__}")
        self.compaction = compaction
        for guardrail in (*input_guardrails, *output_guardrails):
            if not callable(guardrail):
                raise TypeError(f"agent {name!r}: a guardrail is a callable (ctx, text) -> str | None: {guardrail!r}")
        self.input_guardrails: tuple[Guardrail, ...] = tuple(input_guardrails)
        self.output_guardrails: tuple[Guardrail, ...] = tuple(output_guardrails)
        if delta_window is not None and not isinstance(delta_window, DeltaWindow):
            raise TypeError(f"delta_window must be a DeltaWindow or None, got {type(delta_window).__name__}")
        self.delta_window = delta_window
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget or None, got {type(budget).__name__}")
        self.budget = budget
        self.tools: dict[str, Tool] = {}
        sources: list[ToolSource] = []
        for t in tools:
            if not isinstance(t, Tool) and isinstance(t, ToolSource):
                sources.append(t)
                continue
            t = t if isinstance(t, Tool) else tool(t)
            if t.name in self.tools:
                raise ValueError(f"agent {name!r} has two tools named {t.name!r}")
            self.tools[t.name] = t
        self._specs = [t.spec() for t in self.tools.values()]
        # Tool sources (MCP servers): ``tools`` is rebuilt from ``_own_tools`` and their listings
        # whenever one of those listings is a new object (see ``ToolSource``).
        self.tool_sources: tuple[ToolSource, ...] = tuple(sources)
        self._own_tools = dict(self.tools)
        self._listings: tuple[Sequence[Tool], ...] | None = None

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """The tools as the model sees them (computed once)."""
        return self._specs

    async def refresh_tools(self) -> None:
        """Bring ``tools`` up to date with the tool sources' listings (each source caches its own).

        Costs one cached lookup per source when nothing changed. Two tools of one name raise
        ``ValueError`` naming both sources. A source that cannot list raises its own error the first
        time (a server that cannot start fails the turn before anything is written); once it has
        listed, a failure keeps its last listing (the run goes on: API section 8).
        """
        if not self.tool_sources:
            return
        sources = self.tool_sources
        # Listing is a cached lookup after the first time: only several sources are worth a gather.
        if len(sources) == 1:
            got: list[Sequence[Tool] | BaseException] = [await _listing(sources[0])]
        else:
            got = list(await asyncio.gather(*(_listing(s) for s in sources)))
        listed: list[Sequence[Tool]] = []
        for i, (source, listing) in enumerate(zip(sources, got, strict=True)):
            if not isinstance(listing, BaseException):
                listed.append(listing)
            elif self._listings is None:
                raise listing  # never listed: a server that cannot start fails the turn before anything is written
            else:
                # Listed before and unreachable now (killed, restarting): the run goes on with its last
                # listing, and a call to one of its tools reconnects or gives the model an error result.
                _log.warning(
                    "tool source %r could not list its tools (%s); using its last listing", source.name, listing
                )
                listed.append(self._listings[i])
        listings = tuple(listed)
        if self._listings is not None and all(a is b for a, b in zip(listings, self._listings, strict=True)):
            return
        tools = dict(self._own_tools)
        owners = {n: f"the agent's own tool {n!r}" for n in tools}
        for source, listing in zip(self.tool_sources, listings, strict=True):
            where = f"{type(source).__name__} {source.name!r}"
            for t in listing:
                if t.name in tools:
                    raise ValueError(
                        f"agent {self.name!r} has two tools named {t.name!r}: {owners[t.name]} and one from {where} "
                        "(give a server a prefix= or an include= list)"
                    )
                tools[t.name] = t
                owners[t.name] = f"one from {where}"
        self.tools, self._specs, self._listings = tools, [t.spec() for t in tools.values()], listings

    async def aclose(self) -> None:
        """Close what the tool sources hold open (MCP connections); they reopen on next use."""
        await asyncio.gather(*(s.aclose() for s in self.tool_sources))

    def with_tools(self, extra: Sequence[Tool]) -> tuple[dict[str, Tool], list[ToolSpec]]:
        """The tools and specs of one run: the agent's plus ``extra`` (those its memory contributes).

        A name in both is a ``ValueError``: the model must never be unsure which tool it called.
        """
        if not extra:
            return self.tools, self._specs
        tools = dict(self.tools)
        for t in extra:
            if t.name in tools:
                raise ValueError(f"agent {self.name!r} already has a tool named {t.name!r}, which its memory adds")
            tools[t.name] = t
        return tools, self._specs + [t.spec() for t in extra]

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={list(self.tools)})"
