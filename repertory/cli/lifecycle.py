"""``repertory sessions delete`` and ``repertory retention``: sessions leave the store.

Both delete through ``Runtime.delete_session`` (each session's actor stopped, then one store
transaction) on a runtime that is never started: starting one finishes the turns another process
left open, which a delete must not do. That runtime hosts nothing, so it cannot stop a turn that a
server is running right now: ``sessions delete`` refuses a tree with a turn queued or running
unless ``--force`` (delete it through that server instead: ``DELETE /threads/{id}``), and
retention never picks a busy tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

import typer

from repertory.cli._options import DEFAULT_STORE, StoreOption, WideOption, stdout_console
from repertory.cli._tables import Field, Layout, fit_table
from repertory.cli.sessions import sessions_app
from repertory.core.store import DeletedRows, TreeStore
from repertory.errors import RecordUnreadable, RepertoryError, SessionNotFound
from repertory.runtime import LocalHost
from repertory.tree.retention import MAX_IDLE_DAYS, IdleTree, delete_idle_trees, idle_trees
from repertory.tree.runtime import Runtime

__all__ = ["register", "retention", "sessions_delete"]

_T = TypeVar("_T")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _with_runtime(url: str, work: Callable[[Runtime], Awaitable[_T]]) -> _T:
    from repertory.cli._store import open_existing_store

    store = await open_existing_store(url)
    try:
        if not isinstance(store, TreeStore):
            raise RepertoryError(f"{url} does not hold sessions")
        # Not started (see the module docstring): it stops nothing and re-drives nothing.
        runtime = Runtime(store, LocalHost(store, {}), "local", owns_store=False)
        return await work(runtime)
    finally:
        await store.close()


def _summary(rows: DeletedRows) -> str:
    return (
        f"deleted {rows.sessions} session(s), {rows.runs} run(s), {rows.turns} turn(s), {rows.events} event(s), "
        f"{rows.memory_records} memory record(s); collected {rows.revisions} history revision(s) and "
        f"{rows.entries} entr{'y' if rows.entries == 1 else 'ies'} no other session uses"
    )


def sessions_delete(
    session_id: str,
    store: StoreOption = DEFAULT_STORE,
    forks: Annotated[bool, typer.Option("--forks", help="Delete its forks too (by default they survive).")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Delete even while a turn is queued or running (in a server?).")
    ] = False,
) -> None:
    """Delete a session with what it spawned: runs, turns, events, memory records; forks survive unless --forks."""

    async def main(rt: Runtime) -> DeletedRows:
        try:
            record = await rt.store.load_session(session_id)
        except RecordUnreadable as exc:  # no tree to walk: with --force, its rows go by id alone
            if not force:
                raise RepertoryError(f"{exc}; pass --force to delete its rows by id (sessions it made stay)") from None
            return await rt.store.delete_sessions([session_id])
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}")
        if not force:
            open_turns = {t.session_id for t in await rt.store.list_open_turns()}
            tree = [r for r in await rt.store.list_sessions() if r.root_id == record.root_id]
            busy = sorted(r.session_id for r in tree if r.session_id in open_turns)
            if busy:
                raise RepertoryError(
                    f"session(s) {', '.join(busy)} of this tree have a turn queued or running: stop it where it "
                    "runs, delete through that server (DELETE /threads/{id}), or pass --force"
                )
        return await rt.delete_session(session_id, forks=forks)

    stdout_console().print(_summary(asyncio.run(_with_runtime(store, main))))


_TREE_FIELDS = (Field("root", "id"), Field("sessions", "number"), Field("last active"), Field("root exists"))
_TREE_LAYOUTS = (
    Layout(("root", "sessions", "last active", "root exists")),
    Layout(("root", "sessions", "last active", "root exists"), whole_ids=False),
    Layout(("root", "sessions", "last active")),
)


def retention(
    idle_days: Annotated[
        float, typer.Option("--idle-days", min=0, max=MAX_IDLE_DAYS, help="Delete trees idle this many days or more.")
    ],
    store: StoreOption = DEFAULT_STORE,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the trees, delete nothing.")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm an --idle-days below 1 (it reaches sessions in use today).")
    ] = False,
    wide: WideOption = False,
) -> None:
    """Delete whole session trees (forks included) nobody has written to for --idle-days days."""
    if idle_days < 1 and not dry_run and not yes:
        # --idle-days 0 is every tree in the store: a slip of the finger must not be a wipe.
        raise RepertoryError(
            f"--idle-days {idle_days:g} deletes trees used within the last day (0: every tree); "
            "look with --dry-run first, then add --yes to confirm"
        )

    async def main(rt: Runtime) -> tuple[list[IdleTree], DeletedRows | None]:
        found = await idle_trees(rt, idle_days=idle_days)
        return found, None if dry_run else await delete_idle_trees(rt, found)

    found, deleted = asyncio.run(_with_runtime(store, main))
    title = f"trees idle for {idle_days:g} day(s) or more" + (" (dry run: nothing deleted)" if dry_run else "")
    rows = [
        (tree.root_id, str(len(tree.session_ids)), _iso(tree.last_active), "yes" if tree.root_exists else "no")
        for tree in found
    ]
    console = stdout_console()
    console.print(fit_table(console, title, _TREE_FIELDS, rows, _TREE_LAYOUTS, wide=wide))
    if deleted is not None:
        console.print(_summary(deleted))


def register(app: typer.Typer) -> None:
    """Attach ``sessions delete`` and ``retention``."""
    sessions_app.command("delete", short_help="Delete a session and what it spawned (forks survive).")(sessions_delete)
    app.command("retention", short_help="Delete session trees idle for --idle-days days.")(retention)
