"""The ``repertory`` commands that look into and act on sessions: sessions, approvals, resume, recover.

Acting on a run (approve, reject, resume, recover) drives it on, so it needs the run's agent: the
``--agents module:attr`` option names a dict of agents, a function returning one, or one agent
(default: the demo's agents). Every mistake a user can make (an unknown session, a used or
malformed token, invalid JSON) is one ``error: ...`` line on stderr and exit code 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar, assert_never

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from repertory.cli._options import (
    DEFAULT_AGENTS,
    DEFAULT_STORE,
    AgentsOption,
    StoreOption,
    WideOption,
    load_agents,
)
from repertory.cli._options import stdout_console as _console
from repertory.cli._running import running_table
from repertory.cli._tables import Field, Layout, fit_table
from repertory.core.clock import iso_ms
from repertory.core.decisions import Approve, Decision, Reject, Resume
from repertory.core.ids import now_ms
from repertory.core.inbox import DecisionInbox
from repertory.core.json_limits import JsonRefused, parse_json
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import ApprovalRecord, RunState, Usage
from repertory.core.store import TreeStore
from repertory.core.tree import TurnStatus
from repertory.errors import InvalidResumeToken, RepertoryError, SessionNotFound
from repertory.runtime import Agent, Session
from repertory.tree.fleet import running_turns
from repertory.tree.outside import decide_on_store, live_hosts
from repertory.tree.runtime import Runtime

__all__ = ["approvals_app", "register", "sessions_app"]

_T = TypeVar("_T")
_OPEN: tuple[TurnStatus, ...] = ("queued", "running", "suspended")

sessions_app = typer.Typer(
    help="Look at sessions and act on them: list, tree, show, top, cancel.", no_args_is_help=True, rich_markup_mode=None
)
approvals_app = typer.Typer(
    help="Pending tool approvals: list, approve, reject.", no_args_is_help=True, rich_markup_mode=None
)


def _run(fn: Callable[[TreeStore], Awaitable[_T]], url: str) -> _T:
    async def main() -> _T:
        from repertory.cli._store import open_existing_store

        store = await open_existing_store(url)
        try:
            if not isinstance(store, TreeStore):
                raise RepertoryError(f"{url} does not hold sessions")
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _json(text: str | None, what: str) -> Any:
    """``text`` as JSON, through the server's own guard (``core.json_limits``): refused, it is one ``error:`` line."""
    if text is None:
        return None
    try:
        return parse_json(text, root=what)
    except JsonRefused as exc:
        raise RepertoryError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise RepertoryError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None


async def _status(store: TreeStore, session_id: str) -> str:
    runs = await store.list_runs(session_id, limit=1)
    return runs[0].status if runs else "new"


_SESSION_FIELDS = (
    Field("id", "id"),
    Field("agent"),
    Field("title", "text", min_width=12),
    Field("lineage"),
    Field("parent", "id"),
    Field("latest run"),
)
_SESSION_LAYOUTS = (
    Layout(("id", "agent", "title", "lineage", "parent", "latest run")),
    Layout(("id", "agent", "title", "lineage", "parent", "latest run"), whole_ids=False),
    Layout(("id", "agent", "title", "parent", "latest run"), whole_ids=False),
    Layout(("id", "title", "parent", "latest run"), whole_ids=False),
    Layout(("id", "agent", "title", "latest run")),
    Layout(("id", "title", "latest run")),
)


OwnerOption = Annotated[
    str | None, typer.Option("--owner", help="Only the turns of this owner's sessions (the HTTP server's tenant).")
]


@sessions_app.command("list", short_help="List sessions (--running: every turn that runs now).")
def sessions_list(
    store: StoreOption = DEFAULT_STORE,
    roots: bool = typer.Option(False, help="Only roots."),
    limit: int = typer.Option(100, min=1, max=1_000_000, help="At most this many."),
    running: bool = typer.Option(
        False, "--running", help="Every queued or running turn instead, with its tree's spend and budget."
    ),
    owner: OwnerOption = None,
    wide: WideOption = False,
) -> None:
    """Sessions, oldest first: id, agent, title, lineage and the status of the latest run.

    With ``--running``: every queued or running turn of the store, oldest first, with what its
    whole session tree has spent (tokens, model requests, tool calls, cost) and the tree's budget;
    ``repertory sessions cancel ROOT --tree`` stops a tree.
    """
    if running:
        console = _console()
        console.print(_run(lambda s: _running_now(s, console, owner, wide), store))
        return
    if owner is not None:
        raise RepertoryError("--owner narrows --running (or sessions top); add --running")

    async def main(s: TreeStore) -> list[tuple[str, ...]]:
        return [
            (
                record.session_id,
                record.agent,
                record.title or "",
                record.lineage.kind,
                record.lineage.parent_id or "",
                await _status(s, record.session_id),
            )
            for record in await s.list_sessions(roots_only=roots, limit=limit)
        ]

    rows = _run(main, store)
    console = _console()
    console.print(fit_table(console, "sessions", _SESSION_FIELDS, rows, _SESSION_LAYOUTS, wide=wide))


async def _running_now(store: TreeStore, console: Console, owner: str | None, wide: bool) -> Table:
    """The table of every open turn (``owner``: of that owner's sessions), laid out for ``console``."""
    return running_table(console, await running_turns(store, owner=owner), now_ms(), wide=wide)


@sessions_app.command("top", short_help="What runs now and what its trees spent, redrawn live.")
def sessions_top(
    store: StoreOption = DEFAULT_STORE,
    interval: float = typer.Option(2.0, min=0.1, help="Seconds between refreshes."),
    owner: OwnerOption = None,
    iterations: int | None = typer.Option(None, min=1, hidden=True, help="Stop after this many refreshes."),
    wide: WideOption = False,
) -> None:
    """``sessions list --running``, read again every --interval seconds until Ctrl-C.

    On a terminal the table is redrawn in place; in a pipe or a file each refresh is printed after
    the one before, so a log keeps every one.
    """
    console = _console()

    async def main(s: TreeStore) -> None:
        done = 0
        with contextlib.ExitStack() as stack:
            live = stack.enter_context(Live(console=console, auto_refresh=False)) if console.is_terminal else None
            while True:
                table = await _running_now(s, console, owner, wide)
                if live is not None:
                    live.update(table, refresh=True)
                else:
                    console.print(table)
                done += 1
                if iterations is not None and done >= iterations:
                    return
                await asyncio.sleep(interval)  # the refresh period: nothing to await instead

    try:
        _run(main, store)
    except KeyboardInterrupt:  # Ctrl-C is how top ends: the store was closed as main was cancelled
        pass


@sessions_app.command("tree", short_help="Show the spawn/fork tree under a session.")
def sessions_tree(session_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """The spawn/fork tree under a session, with each session's latest run status."""

    async def main(s: TreeStore) -> Tree:
        root = await s.load_session(session_id)
        if root is None:
            raise SessionNotFound(f"no session {session_id!r}")

        async def label(sid: str, title: str | None, kind: str) -> Text:
            # Text, not markup: "[spawned]" and a title's own brackets are shown as written.
            return Text(f"{sid} [{kind}] {title or ''} ({await _status(s, sid)})")

        tree = Tree(await label(root.session_id, root.title, root.lineage.kind))
        pending = [(root.session_id, tree)]
        while pending:
            sid, node = pending.pop(0)
            for child in await s.list_children(sid):
                pending.append(
                    (child.session_id, node.add(await label(child.session_id, child.title, child.lineage.kind)))
                )
        return tree

    _console().print(_run(main, store))


_MESSAGE_FIELDS = (
    Field("#", "number"),
    Field("role"),
    Field("origin"),
    Field("model"),
    Field("content", "text", min_width=30),
)
_MESSAGE_LAYOUTS = (
    Layout(("#", "role", "origin", "model", "content")),
    Layout(("#", "role", "model", "content")),
    Layout(("#", "role", "content")),
)


@sessions_app.command("show", short_help="Show a session's conversation, runs and token usage.")
def sessions_show(session_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """A session's whole conversation (each reply's model, compaction summaries marked), its runs and its usage."""

    async def main(s: TreeStore) -> tuple[str, list[tuple[str, ...]], str]:
        record = await s.load_session(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}")
        thread = await s.load_thread(session_id)
        history = await s.load_history(thread.history_revision_id) if thread and thread.history_revision_id else None
        runs = await s.list_runs(session_id)
        rows: list[tuple[str, ...]] = []
        for i, message in enumerate(history.messages if history else [], start=1):
            parts = [message.text] if message.text else []
            parts += [f"call {c.tool_name}({json.dumps(c.args)[:80]})" for c in message.tool_calls]
            parts += [
                f"{'error ' if r.is_error else ''}result {json.dumps(r.result)[:80]}" for r in message.tool_results
            ]
            origin = message.origin
            source = "" if origin is None else f"{origin.kind}:{origin.id}" if origin.id else origin.kind
            # A compaction's summary is shown where it sits, marked: every message is still here.
            role = f"{message.role} [context boundary]" if message.boundary else message.role
            rows.append((str(i), role, source, message.model or "", " | ".join(parts)[:160]))
        usage = sum((r.usage for r in runs), Usage())
        statuses = ", ".join(f"{r.run_id[-6:]}={r.status}" for r in runs[:10])
        cached = f"cache read {usage.cache_read_tokens:,}, cache written {usage.cache_write_tokens:,}"
        summary = f"runs: {len(runs)} ({statuses}); tokens: {usage.total_tokens:,} ({cached})"
        decisions = [_decision_line(a) for r in reversed(runs) for a in r.approvals]
        if decisions:
            summary += "\napprovals:\n" + "\n".join(decisions)
        return f"session {session_id} ({record.agent}, {record.lineage.kind})", rows, summary

    title, rows, summary = _run(main, store)
    console = _console()
    console.print(fit_table(console, title, _MESSAGE_FIELDS, rows, _MESSAGE_LAYOUTS))
    console.print(Text(summary))


def _decision_line(record: ApprovalRecord) -> str:
    """``  deploy: approved by user:alice at 2026-12-06T10:00:00.000Z (arguments replaced)``, or ``waiting``."""
    if record.decision is None:
        return f"  {record.tool_name}: waiting since {iso_ms(record.requested_at)}"
    line = f"  {record.tool_name}: {record.decision}"
    if record.decided_by is not None:
        line += f" by {record.decided_by}"
    if record.decided_at is not None:
        line += f" at {iso_ms(record.decided_at)}"
    if record.args_replaced:
        line += " (arguments replaced)"
    if record.reason:
        line += f": {record.reason}"
    return line


async def _suspended(store: TreeStore) -> list[RunState]:
    return [r for r in await store.list_runs(statuses=("suspended",)) if r.suspended_on is not None]


async def _run_for_token(store: TreeStore, token: str) -> RunState:
    for run in await _suspended(store):
        if run.suspended_on is not None and run.suspended_on.token == token:
            return run
    raise InvalidResumeToken("no suspended run holds that token (it is wrong, or already used)")


_APPROVAL_FIELDS = (
    Field("root", "id"),
    Field("session", "id"),
    Field("run", "id"),
    Field("tool"),
    Field("args", "text", min_width=16),
    Field("call", "text", min_width=24),
    Field("token", "key"),
)
# The token is what `approve` and `reject` take: every layout shows it whole; the call merges tool and args.
_APPROVAL_LAYOUTS = (
    Layout(("root", "session", "run", "tool", "args", "token")),
    Layout(("root", "session", "run", "tool", "args", "token"), whole_ids=False),
    Layout(("session", "run", "call", "token"), whole_ids=False),
    Layout(("session", "call", "token"), whole_ids=False),
    Layout(("session", "call", "token")),
    Layout(("call", "token")),
)


@approvals_app.command("list", short_help="List tool calls waiting for a decision, with tokens.")
def approvals_list(
    store: StoreOption = DEFAULT_STORE,
    tree: str | None = typer.Option(
        None, "--tree", help="Only the approvals of session ID and its descendants (delegated children too)."
    ),
    wide: WideOption = False,
) -> None:
    """Runs waiting for a tool approval, with the root of each session's tree and the token that decides each.

    A delegated child's approval is listed with its root: the root's handle decides it
    (``approve``/``reject`` on any ancestor accept a descendant's token).
    """

    async def main(s: TreeStore) -> list[tuple[str, ...]]:
        within = None if tree is None else await _subtree(s, tree)
        rows: list[tuple[str, ...]] = []
        for run in await _suspended(s):
            on = run.suspended_on
            if on is None or on.kind != "approval" or (within is not None and run.thread_id not in within):
                continue
            record = await s.load_session(run.thread_id)
            payload = on.payload if isinstance(on.payload, dict) else {}
            tool_name = str(payload.get("tool_name", ""))
            args = json.dumps(payload.get("args", {}))
            args = args if len(args) <= 60 else f"{args[:59]}…"  # cut, and says so
            root = record.root_id if record is not None else ""
            rows.append((root, run.thread_id, run.run_id, tool_name, args, f"{tool_name}({args})", on.token))
        return rows

    rows = _run(main, store)
    console = _console()
    console.print(fit_table(console, "pending approvals", _APPROVAL_FIELDS, rows, _APPROVAL_LAYOUTS, wide=wide))


async def _subtree(store: TreeStore, session_id: str) -> set[str]:
    """A session and all its descendants; ``SessionNotFound`` for an unknown id."""
    if await store.load_session(session_id) is None:
        raise SessionNotFound(f"no session {session_id!r}")
    found, frontier = {session_id}, [session_id]
    while frontier:
        frontier = [c.session_id for sid in frontier for c in await store.list_children(sid)]
        found.update(frontier)
    return found


@sessions_app.command("cancel", short_help="Cancel a session's turns (--tree: and every descendant's).")
def sessions_cancel(
    session_id: str,
    tree: Annotated[bool, typer.Option("--tree", help="Cancel the session's descendants too.")] = False,
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
) -> None:
    """Cancel SESSION_ID's queued and suspended turns (with --tree, every descendant's too) through the tree.

    While a process serves the store (``repertory serve``), that process drives the turns and
    only it can stop them, so this refuses and names its route instead of writing behind its back.
    """
    registry = load_agents(agents)

    async def main(s: TreeStore) -> list[tuple[str, str]]:
        if await s.load_session(session_id) is None:
            raise SessionNotFound(f"no session {session_id!r}")
        if isinstance(s, DecisionInbox) and await live_hosts(s):
            raise RepertoryError(
                "a process is serving this store (repertory serve?): it drives these turns, so cancel them "
                f"there: POST /threads/{session_id}/cancel" + ("?tree=true" if tree else "")
            )
        # recover=False: this process drives nothing of the store, it only stops what it is told to.
        async with await Runtime.start(store=s, agents=registry, recover=False) as runtime:
            handle = await runtime.session(session_id, cli_principal())
            await handle.cancel(tree=tree)
        ids = await _subtree(s, session_id) if tree else {session_id}
        return [(t.submission_id, t.status) for sid in sorted(ids) for t in await s.list_turns(sid, _OPEN)]

    left = _run(main, store)
    console = _console()
    if left:
        for submission_id, status in left:
            console.print(f"turn {submission_id} is still {status} (no process drives it here)")
        raise typer.Exit(1)
    console.print(f"cancelled {'the tree of ' if tree else ''}session {session_id}")


def _decide(store_url: str, agents_path: str, token: str, decision: Decision) -> None:
    """Find the run TOKEN decides and apply ``decision`` to it through the front door that owns it.

    A run of a session of the tree is decided through the tree (``repertory.tree.outside``): by
    the process serving the store, if one is, else by a runtime of this process; either way the
    run and its turn end together. A bare ``Session``'s run (no session of the tree) is decided by
    the bare session API, as it was made.
    """
    agents = load_agents(agents_path)

    async def main(s: TreeStore) -> RunResult:
        run = await _run_for_token(s, token)
        if await s.load_session(run.thread_id) is not None:
            return await decide_on_store(s, agents, run.thread_id, decision, cli_principal())
        agent = agents.get(run.agent or "")
        if agent is None:
            raise RepertoryError(f"run {run.run_id} needs agent {run.agent!r}, which --agents does not provide")
        match decision:
            case Approve():
                return await Session.approve_suspended(
                    store=s, agent=agent, run_id=run.run_id, resume_token=token, approval=decision.approval,
                    args=decision.args,
                )  # fmt: skip
            case Reject():
                return await Session.reject_suspended(
                    store=s, agent=agent, run_id=run.run_id, resume_token=token, reason=decision.reason
                )
            case Resume():
                return await Session.resume_suspended(
                    store=s, agent=agent, run_id=run.run_id, resume_token=token, value=decision.value
                )
            case _:
                assert_never(decision)

    result = _run(main, store_url)
    _console().print(f"run {result.run_id}: {result.status}" + (f": {result.text}" if result.text else ""))


def cli_principal() -> Principal:
    """Who decides from this command line: the user logged in here (``user:<login>`` on the record)."""
    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (a container's uid without an entry)
        login = f"uid-{os.getuid()}"
    return Principal.user(login)


@approvals_app.command("approve", short_help="Approve the tool call TOKEN decides (it runs once).")
def approvals_approve(
    token: str,
    json_payload: Annotated[str | None, typer.Option("--json", help="Approval payload (JSON).")] = None,
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
) -> None:
    """Approve the pending tool call that TOKEN decides; the tool runs once and the run goes on."""
    payload = _json(json_payload, "--json")
    _decide(store, agents, token, Approve(token=token, approval=payload))


@approvals_app.command("reject", short_help="Reject the tool call TOKEN decides (the model is told).")
def approvals_reject(
    token: str,
    reason: str = typer.Option("not approved", help="What the model is told."),
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
) -> None:
    """Reject the pending tool call that TOKEN decides; the model reads REASON as an error result."""
    _decide(store, agents, token, Reject(token=token, reason=reason))


def resume(
    token: str,
    value: str,
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
    json_value: bool = typer.Option(False, "--json", help="Parse VALUE as JSON."),
) -> None:
    """Answer a suspended run: VALUE becomes a user message (a string, or JSON with --json)."""
    answer = _json(value, "VALUE") if json_value else value
    _decide(store, agents, token, Resume(token=token, value=answer))


def recover(store: StoreOption = DEFAULT_STORE, agents: AgentsOption = DEFAULT_AGENTS) -> None:
    """Re-drive every turn and run a crashed process left running (non-idempotent calls are never repeated).

    The sessions' turns are finished through the session tree (each run and its turn together);
    a bare ``Session``'s run by the bare session API. While a process serves the store it
    recovers its own runs, so this refuses to drive them a second time.
    """
    registry = load_agents(agents)

    async def main(s: TreeStore) -> list[tuple[str, str]]:
        if isinstance(s, DecisionInbox) and await live_hosts(s):
            raise RepertoryError(
                "a process is serving this store (repertory serve?): it re-drives its sessions' open turns "
                "itself; stop it first to recover from here"
            )
        out = await _recover_turns(s, registry)
        for run in await s.list_runs(statuses=("running",)):
            if await s.load_session(run.thread_id) is not None:
                continue  # a session's run: its turn was finished above, or it has none to finish
            agent = registry.get(run.agent or "")
            if agent is None:
                out.append((run.run_id, f"skipped: agent {run.agent!r} not provided"))
                continue
            try:
                result = await Session.recover(store=s, agent=agent, run_id=run.run_id)
                out.append((run.run_id, result.status))
            except RepertoryError as exc:
                out.append((run.run_id, f"{type(exc).__name__}: {exc}"))
        return out

    results = _run(main, store)
    console = _console()
    if not results:
        console.print("no run was left running")
    for run_id, outcome in results:
        console.print(f"{run_id}: {outcome}")


async def _recover_turns(store: TreeStore, agents: dict[str, Agent]) -> list[tuple[str, str]]:
    """Finish the tree's open turns through a runtime of this process; ``(run id, how it ended)`` each.

    Starting a runtime re-drives every turn left queued or running (what a restarted server
    does); this waits for each to rest. It drives all of them or none: a turn whose agent
    ``--agents`` lacks is refused before anything runs.
    """
    open_turns = await store.list_open_turns()
    if not open_turns:
        return []
    records = [await store.load_session(t.session_id) for t in open_turns]
    missing = sorted({r.agent for r in records if r is not None and r.agent not in agents})
    if missing:
        raise RepertoryError(
            f"open turns need agent(s) {', '.join(map(repr, missing))}, which --agents does not provide; "
            "nothing was recovered"
        )
    out: list[tuple[str, str]] = []
    runtime = await Runtime.start(store=store, agents=agents)
    try:
        for turn in open_turns:
            handle = await runtime.session(turn.session_id)
            try:
                result = await handle.get_turn(turn.submission_id).result()
                out.append((result.run_id, result.status))
            except RepertoryError as exc:
                out.append((turn.run_id or turn.submission_id, f"{type(exc).__name__}: {exc}"))
    finally:
        await runtime.close()
    return out


def register(app: typer.Typer) -> None:
    """Attach these commands to the ``repertory`` app."""
    app.add_typer(sessions_app, name="sessions")
    app.add_typer(approvals_app, name="approvals")
    app.command("resume", short_help="Answer a suspended run: VALUE becomes a user message.")(resume)
    app.command("recover", short_help="Re-drive the turns and runs a crashed process left running.")(recover)
