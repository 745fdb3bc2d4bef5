"""``variant_agent``: the agent an eval runs, made from the original with another model, prompt or budget.

It has the original's tools by name and spec, wrapped for the eval's tool mode:

- ``"replay"``: every tool is a ``ReplayTool``; nothing runs, every call is answered from the
  recording of its case (a call the original never made gets ``not recorded``);
- ``"live"``: a tool that is idempotent, needs no approval, delegates to no agent and re-attaches
  to nothing runs for real; every other tool replays. So a non-idempotent tool (a payment, a
  ledger entry, a delegation that would spawn a child) is never invoked by an eval.

Everything else is the original's (output type, compaction, guardrails, step bound) unless given.
``budget`` becomes the variant's run budget (``run_eval``'s own ``budget`` caps each case's tree,
which is the fork's own, never the production tree: see ``repertory.evals.forks``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from repertory.core.budget import Budget
from repertory.core.model import Model
from repertory.core.store import TreeStore
from repertory.evals.replay import Recordings, ReplayTool
from repertory.runtime import Agent, Tool

__all__ = ["ToolMode", "runs_live", "variant_agent", "variant_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
"""What an agent's name may not hold on every face (an MCP tool name's alphabet)."""

ToolMode = Literal["replay", "live"]
"""How a variant's tools answer: all from the recording, or idempotent ones for real."""


def variant_name(original: str, eval_name: str) -> str:
    """The name a variant of agent ``original`` is registered under for the eval ``eval_name``.

    ``<agent>.eval.<name>``, in the characters every face accepts for an agent's name (an MCP tool
    name: A-Z a-z 0-9 . _ -), so a server built on a runtime that runs evals serves it like any
    agent; a name that needed changing gets a short digest of the original, so two evals whose
    names differ only there never share a variant.
    """
    slug = _UNSAFE.sub("-", eval_name)
    if slug != eval_name:
        slug = f"{slug}-{hashlib.sha256(eval_name.encode()).hexdigest()[:8]}"
    return f"{original}.eval.{slug}"[:128]


def runs_live(tool: Tool, mode: ToolMode) -> bool:
    """Whether ``tool`` runs for real in ``mode``: live mode, idempotent, no approval, no side effect elsewhere."""
    return (
        mode == "live"
        and tool.idempotent
        and tool.requires_approval is False
        and tool.delegates_to is None
        and not tool.reattaches
    )


async def variant_agent(
    original: Agent,
    *,
    name: str,
    store: TreeStore,
    model: Model | None = None,
    instructions: str | None = None,
    tools: ToolMode = "replay",
    budget: Budget | None = None,
) -> Agent:
    """An agent called ``name``: ``original`` with ``model``/``instructions``/``budget`` where given, tools wrapped.

    Lists the original's tool sources first (an MCP server's tools are replayed like any other).
    ``store`` is where the replay tools read their forks' recordings.
    """
    if tools not in ("replay", "live"):
        raise ValueError(f"tools must be 'replay' or 'live', not {tools!r}")
    await original.refresh_tools()
    recordings = Recordings(store)
    wrapped: list[Tool] = [t if runs_live(t, tools) else ReplayTool(t, recordings) for t in original.tools.values()]
    return Agent(
        name=name,
        model=model if model is not None else original.model,
        instructions=instructions if instructions is not None else original.instructions,
        tools=wrapped,
        max_steps=original.max_steps,
        output_type=original.output_type,
        settings=original.settings,
        compaction=original.compaction,
        input_guardrails=original.input_guardrails,
        output_guardrails=original.output_guardrails,
        delta_window=original.delta_window,
        description=original.description,
        budget=budget if budget is not None else original.budget,
    )
