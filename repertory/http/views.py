"""Threads, states, runs, interrupts and assistants in the LangGraph API's JSON shapes.

Mapping: an assistant is an agent (``assistant_id`` = ``graph_id`` = the agent's name), a thread
is a session (``thread_id`` = session id), a run is a turn's run (``run_id`` = the engine's run
id). A checkpoint is a history revision: each revision adds one message on top of its parent, so
``checkpoint_id`` is the revision id and ``parent_checkpoint`` its parent, and a thread's history
is its head's lineage, oldest last, ending (as LangGraph's does) with the empty state before the
first message, whose id is ``EMPTY_CHECKPOINT``: a run from it starts the thread over (the
history stays; see ``runbook``). A pending approval or suspension is an interrupt, shown as
``values["__interrupt__"]`` and under the head state's ``tasks``, with the value agent-chat-ui's
approval card reads: ``{"action_requests": [...], "review_configs": [...]}`` (langchain's
``HumanInTheLoopMiddleware`` request). Resume tokens never appear: an interrupt's id is the id of
the tool call it holds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, Literal

from repertory.core.history import MessageHistory
from repertory.core.state import PendingCall, RunState
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord, TurnRecord, TurnStatus
from repertory.http.convert import iso, lineage, message_dicts, with_edits
from repertory.runtime import Agent

__all__ = [
    "RESERVED_PREFIX",
    "UNBOUND",
    "EMPTY_CHECKPOINT",
    "ThreadStatus",
    "approval_request",
    "assistant_view",
    "interrupts_of",
    "is_unbound",
    "nested_wait",
    "until_rest",
    "run_status",
    "run_view",
    "states_view",
    "thread_metadata",
    "thread_status",
    "thread_view",
    "values_view",
]

Dict = dict[str, Any]
EMPTY_CHECKPOINT = "0" * 26
"""The checkpoint id of a thread's state before its first message (no revision id is all zeros)."""
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RESERVED_PREFIX = "repertory:"
"""Metadata keys the server keeps for itself on a session's record; never shown, never settable."""
UNBOUND = "repertory:unbound"
"""Marks a thread created without an assistant: its first run binds it (``SessionHandle.amend``)."""
DECISIONS = ["approve", "edit", "reject"]
_RUN_STATUS: dict[TurnStatus, str] = {
    "queued": "pending",
    "running": "running",
    "suspended": "interrupted",
    "done": "success",
    "error": "error",
    "cancelled": "interrupted",
}


def approval_request(calls: list[PendingCall], agent: Agent | None) -> Dict:
    """The HITL request for the approvals a step waits for, in the order they are decided."""
    actions, configs, seen = [], [], set()
    for call in calls:
        tool = agent.tools.get(call.tool_name) if agent is not None else None
        actions.append(
            {
                "name": call.tool_name,
                "args": call.args,
                "arguments": call.args,  # the older HumanInTheLoopMiddleware spelling
                "description": call.reason or f"tool {call.tool_name!r} requires approval",
                "tool_call_id": call.tool_call_id,
            }
        )
        if call.tool_name not in seen:
            seen.add(call.tool_name)
            config: Dict = {"action_name": call.tool_name, "allowed_decisions": list(DECISIONS)}
            if tool is not None:
                schema = tool.spec().parameters
                config.update(description=tool.description, args_schema=schema, arguments_schema=schema)
            configs.append(config)
    return {"action_requests": actions, "review_configs": configs}


def interrupts_of(run: RunState | None, agent: Agent | None) -> list[Dict]:
    """The run's live interrupt as a list of LangGraph ``Interrupt`` objects (empty unless suspended)."""
    if run is None or run.status != "suspended" or run.suspended_on is None:
        return []
    on = run.suspended_on
    ident = on.tool_call_id or run.run_id
    if on.kind == "approval":
        calls = [p for p in run.pending if p.kind == "approval"]
        return [{"value": approval_request(calls, agent), "id": ident}]
    return [{"value": on.payload if on.payload is not None else on.reason, "id": ident}]


async def nested_wait(store: TreeStore, session_id: str) -> tuple[RunState, SessionRecord] | None:
    """The first suspended run among a session's descendants (breadth-first), with its session.

    A parent whose model delegated (``agent_tool``) stays busy while its child waits for a human:
    the child's interrupt is what the parent's thread waits for, so it is shown (and answered) there.
    """
    frontier = [session_id]
    while frontier:
        children = [c for sid in frontier for c in await store.list_children(sid)]
        for child in children:
            runs = await store.list_runs(child.session_id, statuses=("suspended",), limit=1)
            if runs and runs[0].suspended_on is not None:
                return runs[0], child
        frontier = [c.session_id for c in children]
    return None


async def until_rest(store: TreeStore, session_id: str, resting: Awaitable[None]) -> None:
    """Wait for ``resting`` (a turn's ``wait()``), or until one of the session's descendants waits for a human.

    A turn waiting in a delegation for a child's human is at rest too, but no event of this session
    says so (the child's own log does): the tree is read, more and more rarely, while it waits.
    """
    waiting = asyncio.ensure_future(resting)
    try:
        delay = 0.05
        while not (await asyncio.wait({waiting}, timeout=delay))[0]:
            if await nested_wait(store, session_id) is not None:
                return
            delay = min(delay * 2, 1.0)
        waiting.result()
    finally:
        waiting.cancel()


def values_view(messages: list[Dict], interrupts: list[Dict]) -> Dict:
    """Thread values: the messages, plus ``__interrupt__`` while the thread waits for a human."""
    values: Dict = {"messages": with_edits(messages)}
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


async def thread_status(store: TreeStore, record: SessionRecord) -> tuple[ThreadStatus, RunState | None]:
    """The thread's status from the store (busy, interrupted, error or idle) and its latest run."""
    runs = await store.list_runs(record.session_id, limit=1)
    latest = runs[0] if runs else None
    if await store.list_turns(record.session_id, ["queued", "running"]):
        return "busy", latest
    if latest is not None and latest.status == "suspended":
        return "interrupted", latest
    if latest is not None and latest.status == "error":
        return "error", latest
    return "idle", latest


def is_unbound(record: SessionRecord) -> bool:
    """Whether the thread was created without an assistant and has not run yet."""
    return record.metadata.get(UNBOUND) is True


def thread_metadata(record: SessionRecord) -> Dict:
    """The thread's metadata as clients see it: once bound, with its assistant under ``graph_id`` and ``assistant_id``.

    Those two keys are what LangGraph's server merges in on every run and what agent-chat-ui's
    sidebar searches by; a thread created without an assistant shows neither until its first run.
    """
    shown = {k: v for k, v in record.metadata.items() if not k.startswith(RESERVED_PREFIX)}
    if is_unbound(record):
        return shown
    return {**shown, "graph_id": record.agent, "assistant_id": record.agent}


def thread_view(record: SessionRecord, status: ThreadStatus, values: Dict) -> Dict:
    """A LangGraph ``Thread`` object."""
    interrupts = values.get("__interrupt__", [])
    return {
        "thread_id": record.session_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "state_updated_at": iso(record.updated_at),
        "metadata": thread_metadata(record),
        "status": status,
        "values": values,
        "interrupts": {i["id"]: [i] for i in interrupts},
        "config": {},
        "error": None,
    }


def _checkpoint(thread_id: str, revision_id: str | None) -> Dict:
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": revision_id, "checkpoint_map": None}


def _head_tasks(status: ThreadStatus, run: RunState | None, interrupts: list[Dict]) -> tuple[list[str], list[Dict]]:
    """``next`` and ``tasks`` of the head state: what the thread waits for, or what failed."""
    task = {"checkpoint": None, "state": None, "result": None}
    if status == "interrupted" and interrupts:
        return ["tools"], [
            {**task, "id": interrupts[0]["id"], "name": "tools", "error": None, "interrupts": interrupts}
        ]
    if status == "error" and run is not None and run.error is not None:
        error = json.dumps({"error": run.error.type or "Error", "message": run.error.message})
        return ["model"], [{**task, "id": run.run_id, "name": "model", "error": error, "interrupts": []}]
    return (["model"], []) if status == "busy" else ([], [])


def states_view(
    thread_id: str,
    history: MessageHistory | None,
    status: ThreadStatus,
    run: RunState | None,
    agent: Agent | None,
    *,
    limit: int,
    before: str | None = None,
    at: str | None = None,
) -> list[Dict]:
    """The thread's states, newest first: one per history revision, the head's with its interrupts.

    ``before`` starts below that checkpoint; ``at`` is that one checkpoint alone (nothing when it
    is not on the thread's lineage).
    """
    interrupts = interrupts_of(run, agent)
    pairs = lineage(history) if history is not None else []
    if not pairs:
        nxt, tasks = _head_tasks(status, run, interrupts)
        if before is not None or at is not None:
            return []
        return [
            {
                "values": values_view([], interrupts),
                "next": nxt,
                "tasks": tasks,
                "metadata": {},
                "checkpoint": _checkpoint(thread_id, None),
                "parent_checkpoint": None,
                "created_at": None,
                "interrupts": interrupts,
            }
        ]
    per_revision = [message_dicts(entry.id, entry.message) for _, entry in pairs]
    end = len(pairs)
    ids = [rev.id for rev, _ in pairs]
    if at is not None:
        if at not in ids:
            return []
        end, limit = ids.index(at) + 1, 1
    elif before is not None:
        if before not in ids:
            return []
        end = ids.index(before)
    out: list[Dict] = []
    for i in range(end - 1, max(end - limit, 0) - 1, -1):
        rev, entry = pairs[i]
        head = i == len(pairs) - 1
        messages = [m for chunk in per_revision[: i + 1] for m in chunk]
        nxt, tasks = _head_tasks(status, run, interrupts) if head else ([], [])
        out.append(
            {
                "values": values_view(messages, interrupts if head else []),
                "next": nxt,
                "tasks": tasks,
                "metadata": {
                    "source": "input" if entry.message.role == "user" else "loop",
                    "step": i,
                    "parents": {},
                    "writes": None,
                },
                "checkpoint": _checkpoint(thread_id, rev.id),
                "parent_checkpoint": _checkpoint(thread_id, rev.parent_id or EMPTY_CHECKPOINT),
                "created_at": iso(rev.created_at),
                "interrupts": interrupts if head else [],
            }
        )
    if len(out) < limit and end - len(out) == 0:
        # The window reached the first message: the empty state before it comes last, as in LangGraph.
        out.append(
            {
                "values": values_view([], []),
                "next": [],
                "tasks": [],
                "metadata": {"source": "input", "step": -1, "parents": {}, "writes": None},
                "checkpoint": _checkpoint(thread_id, EMPTY_CHECKPOINT),
                "parent_checkpoint": None,
                "created_at": iso(pairs[0][0].created_at),
                "interrupts": [],
            }
        )
    return out


def run_status(status: TurnStatus) -> str:
    """A turn's status in LangGraph's words (a cancelled run and a waiting one are both interrupted)."""
    return _RUN_STATUS[status]


def run_view(
    turn: TurnRecord,
    assistant_id: str,
    metadata: Dict | None = None,
    multitask_strategy: str = "enqueue",
    kwargs: Dict | None = None,
) -> Dict:
    """A LangGraph ``Run`` object for a turn's run."""
    return {
        "run_id": turn.run_id,
        "thread_id": turn.session_id,
        "assistant_id": assistant_id,
        "created_at": iso(turn.created_at),
        "updated_at": iso(turn.updated_at),
        "status": run_status(turn.status),
        "metadata": metadata or {},
        "multitask_strategy": multitask_strategy,
        "kwargs": kwargs or {},
        "cancel_reason": None if turn.status != "cancelled" else "cancelled",
    }


def assistant_view(name: str, agent: Agent, created_at: int) -> Dict:
    """A LangGraph ``Assistant`` object for an agent (one version, never changes while served)."""
    at = iso(created_at)
    return {
        "assistant_id": name,
        "graph_id": name,
        "name": name,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {"tools": sorted(agent.tools)},
        "version": 1,
        "created_at": at,
        "updated_at": at,
    }
