"""The soak's agents: orchestrators that delegate, workers that pay and write, analysts on an MCP server.

Every model is a ``ScriptedModel`` step function, so the fleet needs no network, and each answer
depends only on the conversation: a turn re-driven after a crash asks the same question and gets
the same answer. What the model does, by the prompt that opened the turn:

- ``plan project N`` (a root): for every third project first waits on a durable timer
  (``wait_a_bit``, ``repertory.sleep``; the driver sends such a root no second turn, which would
  supersede the sleeping run), then delegates three tasks in one step (``agent_tool``: two workers and an
  analyst, run concurrently in spawned child sessions), then summarises what they answered;
- ``follow-up N: ...`` (sent while the plan turn runs, ``if_busy="enqueue"``): sends an email (a
  non-idempotent tool that needs no approval), then acknowledges; a notification is acknowledged;
- ``summarise project N ...`` (sent to a fork of the root): a reply from the shared history;
- a worker ``collect sources`` searches (idempotent); ``pay invoice`` charges a card and ``draft
  notes`` writes a file (both non-idempotent and approved, rejected or edited by the approver);
- the analyst looks figures up on the demo's stdio MCP server (read-only: idempotent, never asked)
  and publishes them there (destructive: asked, never sent twice).

Replies are seeded from the conversation: some are slow, some fail. A failure is a ``ModelError``
from the primary model, which ``FallbackModel`` hands to a backup; the backup fails too, now and
then, and that run ends ``error`` (a turn may end in error; it may never be lost). Every side
effect of a non-idempotent tool is appended to the ledger by the tool itself before it returns:
the MCP server's ``publish_figures`` too, keyed by the call id repertory sends it in the request's
``_meta`` (the server is told the ledger's path through ``REPERTORY_FIGURES_LEDGER``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from repertory import Agent, ToolContext, agent_tool, sleep, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelSettings, ToolSpec
from repertory.errors import ModelError
from repertory.models import FallbackModel
from repertory.testing import ScriptedModel
from tests.soak.records import RunPaths, append_line, now_ms

__all__ = ["PRIMARY_FAILS", "make_agents", "ray_options", "turn_prompt"]

PRIMARY_FAILS = 0.08
"""The share of requests the primary model fails (the backup answers them)."""
BACKUP_FAILS = 0.10
"""The share of the backup's requests that fail too: that run ends ``error``."""
SLOW = 0.15
"""The share of requests that take 0.3-1.2 s instead of 20-80 ms."""

_PROMPT = re.compile(
    r"^(plan project|follow-up|status|summarise project|collect sources|pay invoice|draft notes|check the numbers)"
)


def _unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (seeded, reproducible across restarts)."""
    digest = hashlib.blake2b("|".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def turn_prompt(messages: list[ModelMessage]) -> tuple[str, int]:
    """The prompt that opened the current turn, and how many replies the model gave since."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role in ("user", "system") and _PROMPT.match(m.text):
            return m.text, sum(1 for later in messages[i + 1 :] if later.role == "assistant")
    return "", sum(1 for m in messages if m.role == "assistant")


def _project(prompt: str) -> int:
    found = re.search(r"project (\d+)", prompt)
    return int(found.group(1)) if found else 0


def _results(messages: list[ModelMessage]) -> str:
    last = messages[-1]
    return " | ".join(str(p.result)[:50] for p in last.tool_results) if last.role == "tool" else ""


def orchestrator_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Plan: maybe wait on a timer, delegate three tasks at once, summarise; acknowledge the rest."""
    prompt, replies = turn_prompt(messages)
    n = _project(prompt)
    usage = {"input_tokens": 20 * len(messages), "output_tokens": 30}
    if prompt.startswith("plan project"):
        waits = n % 3 == 1
        if waits and replies == 0:
            return {"tool": "wait_a_bit", "args": {"seconds": 1.0}, "usage": usage}
        if replies == int(waits):
            return {
                "tools": [
                    {"tool": "worker", "args": {"task": f"collect sources for project {n}"}},
                    {"tool": "worker", "args": {"task": f"pay invoice for project {n}"}},
                    {"tool": "analyst", "args": {"task": f"check the numbers for project {n}"}},
                ],
                "usage": usage,
            }
        return {"text": f"project {n} planned: {_results(messages)}", "usage": usage}
    if prompt.startswith("follow-up") and replies == 0:
        return {"tool": "send_email", "args": {"to": f"team{n}@example.com", "subject": prompt[:60]}, "usage": usage}
    return {"text": f"noted ({prompt[:40]}) {_results(messages)}", "usage": usage}


def worker_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Collect (search), pay (charge, approved) or draft (search, then write, approved); then report."""
    prompt, replies = turn_prompt(messages)
    n = _project(prompt)
    usage = {"input_tokens": 15 * len(messages), "output_tokens": 25}
    if prompt.startswith("pay invoice") and replies == 0:
        return {"tool": "charge", "args": {"account": f"acct-{n}", "amount": 100 + n}, "usage": usage}
    if prompt.startswith("draft notes") and replies == 1:
        return {"tool": "write_file", "args": {"path": f"notes-{n}.md", "content": prompt}, "usage": usage}
    if replies == 0:
        return {"tool": "search", "args": {"query": prompt}, "usage": usage}
    return {"text": f"{prompt}: done ({_results(messages)})", "usage": usage}


def analyst_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Look the figures up on the MCP server, publish them there (approved), then report."""
    prompt, replies = turn_prompt(messages)
    usage = {"input_tokens": 15 * len(messages), "output_tokens": 20}
    if replies == 0:
        return {"tool": "lookup_figures", "args": {"topic": prompt}, "usage": usage}
    if replies == 1:
        return {"tool": "publish_figures", "args": {"topic": prompt, "summary": _results(messages)}, "usage": usage}
    return {"text": f"{prompt}: checked ({_results(messages)})", "usage": usage}


class _Seeded(ScriptedModel):
    """A scripted model whose replies are slow or fail by a seeded draw on the conversation."""

    def __init__(self, step: Any, *, seed: int, name: str, fails: float) -> None:
        super().__init__(step, name=name)
        self.seed = seed
        self.fails = fails

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Wait a seeded while, maybe fail with ``ModelError``, else answer from the script."""
        key = (self.seed, self.model, len(messages), messages[-1].text, _results(messages), messages[0].text)
        draw, pace = _unit(*key, "fail"), _unit(*key, "pace")
        slow = _unit(*key, "slow") < SLOW
        await asyncio.sleep(0.3 + 0.9 * pace if slow else 0.02 + 0.06 * pace)
        if draw < self.fails:
            raise ModelError(f"{self.model}: injected failure (seeded)")
        async for event in super().request(messages, tools, settings):
            yield event


def _model(step: Any, seed: int) -> FallbackModel:
    primary = _Seeded(step, seed=seed, name="primary", fails=PRIMARY_FAILS)
    return FallbackModel(primary, _Seeded(step, seed=seed, name="backup", fails=BACKUP_FAILS))


def make_agents(run_dir: Path, seed: int) -> dict[str, Agent]:
    """The orchestrator, worker and analyst agents; their side effects go to ``run_dir``'s ledger."""
    ledger = RunPaths(run_dir).ledger

    def record(ctx: ToolContext, args: dict[str, Any]) -> None:
        # ToolContext has the run id and the call id (``call_id``, the ToolCallPart's tool_call_id);
        # the session id is the thread id (a session owns exactly one thread).
        append_line(
            ledger,
            {
                "session_id": ctx.thread_id,
                "run_id": ctx.run_id,
                "tool_call_id": ctx.call_id,
                "tool": ctx.tool_name,
                "args": args,
                "pid": os.getpid(),
                "at_ms": now_ms(),
            },
        )

    @tool(idempotent=True)
    def search(query: str) -> str:
        """Search the knowledge base (idempotent: run again after a crash)."""
        return f"3 documents about {query[:40]!r}"

    @tool(requires_approval=True)
    def charge(ctx: ToolContext, account: str, amount: int) -> str:
        """Charge an account (a payment: never twice, and only once approved)."""
        record(ctx, {"account": account, "amount": amount})
        return f"charged {amount} to {account}"

    @tool(requires_approval=True)
    def write_file(ctx: ToolContext, path: str, content: str) -> str:
        """Write a file in the workspace (needs approval)."""
        record(ctx, {"path": path, "content": content})
        return f"wrote {len(content)} bytes to {path}"

    @tool
    def send_email(ctx: ToolContext, to: str, subject: str) -> str:
        """Send an email (not idempotent, no approval)."""
        record(ctx, {"to": to, "subject": subject})
        return f"sent {subject!r} to {to}"

    @tool
    def wait_a_bit(seconds: float) -> str:
        """Wait on a durable timer before going on."""
        sleep(seconds=seconds)

    from repertory.demo.mcp_server import LEDGER_ENV
    from repertory.mcp import MCPServer

    figures = MCPServer.stdio(
        sys.executable,
        ["-m", "repertory.demo.mcp_server"],
        env={LEDGER_ENV: str(ledger)},
        name="figures",
        approval="destructive",
    )
    return {
        "orchestrator": Agent(
            name="orchestrator",
            model=_model(orchestrator_step, seed),
            tools=[
                agent_tool("worker", description="Delegate one task to a worker."),
                agent_tool("analyst", description="Have an analyst check the figures."),
                send_email,
                wait_a_bit,
            ],
            instructions="Plan, delegate, summarise.",
        ),
        "worker": Agent(
            name="worker",
            model=_model(worker_step, seed),
            tools=[search, charge, write_file],
            instructions="Do the task; ask before paying or writing.",
        ),
        "analyst": Agent(
            name="analyst",
            model=_model(analyst_step, seed),
            tools=[figures],
            instructions="Check the figures on the figures server.",
        ),
    }


def ray_options(address: str | None) -> dict[str, Any]:
    """``Runtime.start`` options of a process joining the soak's cluster (the driver's and the approver's).

    The hosts are detached and kept (``keep_hosts``), so a killed driver's successor finds them
    running its sessions; they sit on the worker nodes (``tests.soak.cluster``). This package
    (the agents' models and tools) is pickled by value: the hosts need not import it.
    """
    import ray

    from tests.soak.cluster import HOST_OPTIONS

    cloudpickle: Any = ray.cloudpickle  # untyped
    cloudpickle.register_pickle_by_value(sys.modules["tests.soak"])
    return {"address": address, "keep_hosts": True, "hosts": 2, "host_options": HOST_OPTIONS}
