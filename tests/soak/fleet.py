"""A small real fleet for the checker's tests: it writes a run folder the way the chaos workload does.

Delegation through ``agent_tool``, a non-idempotent tool with and without approval, an approval
approved, one rejected and one approved with edited arguments (decided at the root, as the
soak's approver does), an idempotent tool, a fork that goes on talking, an analyst publishing on
the demo's MCP server, and the Parquet export. Every side effect goes to ``ledger.jsonl`` from
inside the tool (the MCP server's ``publish_figures`` writes its own line, keyed by the call id
repertory sends in ``_meta``), every accepted turn to ``accepted.jsonl`` and every accepted
decision to ``decisions.jsonl``, as the workload writes them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from repertory import Agent, Runtime, SessionHandle, ToolContext, agent_tool, tool
from repertory.core.messages import ModelMessage
from repertory.core.state import SuspendReason
from repertory.demo.mcp_server import LEDGER_ENV
from repertory.mcp import MCPServer
from repertory.storage.export import export_parquet
from repertory.testing import ScriptedModel

__all__ = ["build_run"]


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def _now() -> int:
    return int(time.time() * 1000)


def _prompt(messages: list[ModelMessage]) -> tuple[str, int]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i].text, sum(1 for m in messages[i + 1 :] if m.role == "assistant")
    return "", 0


def _boss(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    prompt, replies = _prompt(messages)
    usage = {"input_tokens": 10 * len(messages), "output_tokens": 7}
    if replies == 0 and prompt.startswith("delegate"):
        return {
            "tools": [
                {"tool": "worker", "args": {"task": f"pay {prompt.split()[-1]}"}},
                {"tool": "lookup", "args": {"q": prompt}},
            ],
            "usage": usage,
        }
    if replies == 0 and prompt.startswith("email"):
        return {"tool": "send_email", "args": {"to": "team@example.com"}, "usage": usage}
    last = messages[-1]
    results = " | ".join(str(p.result) for p in last.tool_results) if last.role == "tool" else ""
    return {"text": f"done: {prompt} {results}", "usage": usage}


def _worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    prompt, replies = _prompt(messages)
    usage = {"input_tokens": 5 * len(messages), "output_tokens": 3}
    if replies == 0 and prompt.startswith("pay"):
        return {"tool": "charge", "args": {"account": "acct", "amount": int(prompt.split()[-1])}, "usage": usage}
    return {"text": f"worker: {prompt}", "usage": usage}


def _analyst(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    prompt, replies = _prompt(messages)
    usage = {"input_tokens": 4 * len(messages), "output_tokens": 2}
    if replies == 0:
        return {"tool": "publish_figures", "args": {"topic": prompt, "summary": "up 4%"}, "usage": usage}
    return {"text": f"published: {prompt}", "usage": usage}


def _agents(run_dir: Path) -> dict[str, Agent]:
    ledger = run_dir / "ledger.jsonl"

    def record(ctx: ToolContext, args: dict[str, Any]) -> None:
        _append(
            ledger,
            {
                "session_id": ctx.thread_id,
                "run_id": ctx.run_id,
                "tool_call_id": ctx.call_id,
                "tool": ctx.tool_name,
                "args": args,
                "pid": os.getpid(),
                "at_ms": _now(),
            },
        )

    @tool(idempotent=True)
    def lookup(q: str) -> str:
        """Look something up (idempotent, no ledger)."""
        return f"found {q}"

    @tool(requires_approval=True)
    def charge(ctx: ToolContext, account: str, amount: int) -> str:
        """Charge an account (non-idempotent, approved first)."""
        record(ctx, {"account": account, "amount": amount})
        return f"charged {amount} to {account}"

    @tool
    def send_email(ctx: ToolContext, to: str) -> str:
        """Send an email (non-idempotent, no approval)."""
        record(ctx, {"to": to})
        return f"sent to {to}"

    figures = MCPServer.stdio(
        sys.executable, ["-m", "repertory.demo.mcp_server"], env={LEDGER_ENV: str(ledger)}, name="figures"
    )
    return {
        "boss": Agent(name="boss", model=ScriptedModel(_boss), tools=[agent_tool("worker"), lookup, send_email]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker), tools=[charge]),
        "analyst": Agent(name="analyst", model=ScriptedModel(_analyst), tools=[figures]),
    }


async def _pending(root: SessionHandle) -> SuspendReason:
    async with asyncio.timeout(10):
        while True:
            pending = await root.pending_approvals(tree=True)
            if pending:
                return pending[0]
            await asyncio.sleep(0.02)


async def _turn(run_dir: Path, handle: SessionHandle, text: str, decision: str | None = None) -> None:
    """Send one accepted turn; decide the approval it raises in its tree (if any); wait for its end."""
    turn = await handle.send(text)
    _append(
        run_dir / "accepted.jsonl",
        {"session_id": handle.id, "submission_id": turn.submission_id, "kind": "message", "at_ms": _now()},
    )
    if decision is not None:
        reason = await _pending(handle)
        line: dict[str, Any] = {"session_id": reason.session_id, "token": reason.token, "decision": decision}
        if decision == "approve":
            await handle.approve(reason.token)
        elif decision == "reject":
            await handle.reject(reason.token, reason="no")
        else:
            payload = reason.payload if isinstance(reason.payload, dict) else {}
            asked = payload.get("args")
            args: dict[str, Any] = dict(asked) if isinstance(asked, dict) else {}
            args["amount"] = 1
            await handle.approve(reason.token, args=args)
            line["args"] = args
        line.update({"tool_call_id": reason.tool_call_id, "tool": "charge", "at_ms": _now()})
        _append(run_dir / "decisions.jsonl", line)
    async with asyncio.timeout(20):
        await turn.result()


async def build_run(store_url: str, run_dir: Path) -> dict[str, str]:
    """Run the fleet on ``store_url``, export, write ``run.json``; the ids the tests corrupt by."""
    run_dir.mkdir(parents=True, exist_ok=True)
    started = _now()
    async with await Runtime.start(store=store_url, backend="local", agents=_agents(run_dir)) as rt:
        a = await rt.create_session(agent="boss", title="a")
        b = await rt.create_session(agent="boss", title="b")
        c = await rt.create_session(agent="analyst", title="c")
        await _turn(run_dir, a, "delegate 5", "approve")
        await _turn(run_dir, a, "email the team")
        await _turn(run_dir, b, "delegate 7", "reject")
        await _turn(run_dir, b, "delegate 9", "edit")
        fork = await a.fork(title="a, later")
        await _turn(run_dir, fork, "email from the fork")
        await _turn(run_dir, a, "say hi")
        await _turn(run_dir, c, "q3 figures")
        await export_parquet(rt.store, run_dir / "export")
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "store_url": store_url,
                "backend": "local",
                "seed": 0,
                "minutes": 0,
                "started_ms": started,
                "ended_ms": _now(),
                "export_dir": str(run_dir / "export"),
                "ledger_tools": ["charge", "send_email", "publish_figures"],
            }
        )
    )
    return {"a": a.id, "b": b.id, "c": c.id, "fork": fork.id}
