"""The approver process: a human's inbox, as a separate process with a runtime of its own on the store.

    python -m benchmarks.chaos.approver RUN_DIR STORE_URL BACKEND SEED INCARNATION [RAY_ADDRESS]

It lists the approvals of every root the driver created (``roots.jsonl``), with
``pending_approvals(tree=True)``, so a worker's or an analyst's request is seen and decided at its
root. Each decision is drawn from the token and the seed: most are approved, some rejected, some
approved with edited arguments (``approve(token, args=...)``: the tool runs with those). A
decision the runtime accepted is appended to ``decisions.jsonl``. It exits when ``stop-approver``
appears. The conductor SIGKILLs it on the fault schedule and starts it again.

On the local backend its runtime starts with ``recover=False``: the driver process runs the
fleet's turns, and a second process re-driving them would run them twice at once. A decision
made here drives that one run on, here, to its rest (the local backend's rule); on Ray the
decision goes to the host that runs the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from pathlib import Path
from typing import Any

from benchmarks.chaos.records import RunPaths, append_line, now_ms, read_lines
from benchmarks.chaos.retry import retrying, transient
from benchmarks.chaos.workload import make_agents, ray_options
from repertory import Runtime
from repertory.core.state import SuspendReason
from repertory.errors import InvalidResumeToken, NotSuspended, RepertoryError, WrongSuspensionKind

__all__ = ["APPROVE", "REJECT", "edited_args", "main"]

APPROVE = 0.7
"""The share of approvals approved as asked."""
REJECT = 0.15
"""The share rejected; the rest are approved with edited arguments."""
_LOOK_S = 0.3


def edited_args(tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the approver changes when it edits a call: a smaller amount, a reviewed text."""
    out = dict(args)
    if tool_name == "charge":
        out["amount"] = max(1, int(out.get("amount", 1)) // 2)
    elif tool_name == "write_file":
        out["content"] = f"[reviewed] {out.get('content', '')}"
    elif tool_name == "publish_figures":
        out["summary"] = f"[reviewed] {out.get('summary', '')}"
    return out


class Approver:
    """Looks at every root's tree, decides each approval once, in the background."""

    def __init__(self, rt: Runtime, paths: RunPaths, seed: int, incarnation: int) -> None:
        self.rt = rt
        self.paths = paths
        self.seed = seed
        self.who = f"approver-{incarnation}"
        self.deciding: dict[str, asyncio.Task[None]] = {}

    async def look(self) -> None:
        """One pass over the roots: start a decision for every approval not being decided already."""
        for line in read_lines(self.paths.roots):
            root_id = line["session_id"]
            try:
                root = await self.rt.session(root_id)
                pending = await root.pending_approvals(tree=True)
            except Exception as exc:
                if not transient(exc):
                    raise
                append_line(self.paths.errors, {"who": self.who, "what": "list", "error": str(exc)[:300]})
                continue
            for reason in pending:
                if reason.kind == "approval" and reason.token not in self.deciding:
                    task = asyncio.get_running_loop().create_task(self.decide(root_id, reason))
                    self.deciding[reason.token] = task

    async def decide(self, root_id: str, reason: SuspendReason) -> None:
        """Approve, reject or edit one call (drawn from the seed and the token); record it once accepted."""
        draw = random.Random(f"{self.seed}-{reason.token}").random()
        payload = reason.payload if isinstance(reason.payload, dict) else {}
        tool_name = str(payload.get("tool_name", ""))
        args = payload.get("args")
        root = await self.rt.session(root_id)
        decision: str
        try:
            if draw < APPROVE:
                decision = "approve"
                await retrying("approve", lambda: root.approve(reason.token), journal=self.paths.errors, who=self.who)
            elif draw < APPROVE + REJECT:
                decision = "reject"
                await retrying(
                    "reject",
                    lambda: root.reject(reason.token, reason="the approver said no"),
                    journal=self.paths.errors,
                    who=self.who,
                )
            else:
                decision = "edit"
                new = edited_args(tool_name, args if isinstance(args, dict) else {})
                await retrying(
                    "edit", lambda: root.approve(reason.token, args=new), journal=self.paths.errors, who=self.who
                )
        except (InvalidResumeToken, NotSuspended, WrongSuspensionKind):
            return  # decided already (a retry after the first attempt landed), or the run asked again
        except RepertoryError as exc:
            # Either the decision landed and the run it drove on ended in error (approve() raises
            # the run's ModelError), or it never landed (the store stayed away through every retry,
            # or the tool's MCP server could not start before the decision was recorded: ToolError,
            # the token still live). The token still pending tells them apart.
            if transient(exc) or await self._still_pending(root_id, reason.token):
                append_line(
                    self.paths.errors,
                    {"who": self.who, "what": "not decided", "error": f"{type(exc).__name__}: {exc}"[:300]},
                )
                self.deciding.pop(reason.token, None)  # look again on the next pass
                return
            append_line(
                self.paths.errors, {"who": self.who, "what": "decided; run failed", "error": f"{type(exc).__name__}"}
            )
        except Exception as exc:
            append_line(
                self.paths.errors, {"who": self.who, "what": "decide", "error": f"{type(exc).__name__}: {exc}"[:300]}
            )
            self.deciding.pop(reason.token, None)  # look again on the next pass
            return
        line: dict[str, Any] = {
            "session_id": reason.session_id,
            "token": reason.token,
            "decision": decision,
            "at_ms": now_ms(),
            "tool_call_id": reason.tool_call_id,
            "tool": tool_name,
        }
        if decision == "edit":
            line["args"] = new
        append_line(self.paths.decisions, line)

    async def _still_pending(self, root_id: str, token: str) -> bool:
        """Whether ``token`` is still waiting for a decision (read again, retrying through faults)."""
        root = await self.rt.session(root_id)
        pending = await retrying(
            "list", lambda: root.pending_approvals(tree=True), journal=self.paths.errors, who=self.who
        )
        return any(p.token == token for p in pending)

    async def run(self) -> None:
        """Look every few hundred milliseconds until told to stop."""
        while not self.paths.stop_approver.exists():
            await self.look()
            await asyncio.sleep(_LOOK_S)
        for task in self.deciding.values():
            task.cancel()
        await asyncio.gather(*self.deciding.values(), return_exceptions=True)


async def _main(run_dir: Path, store_url: str, backend: str, seed: int, incarnation: int, address: str | None) -> None:
    paths = RunPaths(run_dir)
    options: dict[str, Any] = {"recover": False}
    if backend == "ray":
        options = ray_options(address)
    rt: Runtime = await retrying(
        "start",
        lambda: Runtime.start(store=store_url, backend=backend, agents=make_agents(run_dir, seed), **options),
        journal=paths.errors,
        who=f"approver-{incarnation}",
    )
    try:
        await Approver(rt, paths, seed, incarnation).run()
    finally:
        with contextlib.suppress(Exception):
            await rt.close()


def main(argv: list[str] | None = None) -> None:
    """Parse the positional arguments the conductor passes, and decide."""
    args = sys.argv[1:] if argv is None else argv
    run_dir, store_url, backend, seed, incarnation = args[:5]
    address = args[5] if len(args) > 5 else None
    asyncio.run(_main(Path(run_dir), store_url, backend, int(seed), int(incarnation), address))


if __name__ == "__main__":
    main()
