"""``repertory sessions cancel ID [--tree]``: the kill switch from the command line, through the session tree."""

from __future__ import annotations

from pathlib import Path

from repertory import Runtime, SqliteSessionStore
from tests.cli.test_front_door import _cli, served
from tests.cli.test_session_commands import AGENTS, make_agents

__all__ = ["served"]  # the fixture, imported so pytest finds it here


async def _suspended_tree(url: str) -> tuple[str, str, str]:
    """A root, its child and its grandchild, each with a turn waiting for a human: their ids."""
    async with await Runtime.start(store=url, agents=make_agents()) as rt:
        root = await rt.create_session(agent="ops", title="root")
        child = await root.spawn(title="child")
        grandchild = await child.spawn(title="grandchild")
        for handle, prompt in ((root, "deploy it"), (child, "ask me"), (grandchild, "deploy it")):
            assert (await handle.run(prompt)).status == "suspended"
        return root.id, child.id, grandchild.id


async def _statuses(path: Path, *session_ids: str) -> list[list[str]]:
    async with await SqliteSessionStore.open(path) as store:
        return [[t.status for t in await store.list_turns(sid)] for sid in session_ids]


async def test_cancel_tree_closes_every_waiting_turn_of_the_tree_and_plain_cancel_one_session(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cancel.db"
    url = f"sqlite:///{path}"
    first = await _suspended_tree(url)
    second = await _suspended_tree(url)

    code, out, err = await _cli("sessions", "cancel", second[0], "--store", url, "--agents", AGENTS)
    assert code == 0, err
    assert f"cancelled session {second[0]}" in out
    assert await _statuses(path, *second) == [["cancelled"], ["suspended"], ["suspended"]]

    code, out, err = await _cli("sessions", "cancel", first[0], "--tree", "--store", url, "--agents", AGENTS)
    assert code == 0, err
    assert f"cancelled the tree of session {first[0]}" in out
    assert await _statuses(path, *first) == [["cancelled"]] * 3
    async with await SqliteSessionStore.open(path) as store:
        for session_id in first:
            [run] = await store.list_runs(session_id)
            assert run.status == "cancelled"

    code, _, err = await _cli("sessions", "cancel", "no-such-session", "--tree", "--store", url, "--agents", AGENTS)
    assert code == 2 and "no session" in err


async def test_cancel_refuses_while_a_server_drives_the_store_and_names_its_route(
    served: tuple[Path, str, list[str]],
) -> None:
    path, _, _ = served
    async with await Runtime.start(store=f"sqlite:///{path}", agents=make_agents(), recover=False) as rt:
        root = await rt.create_session(agent="ops", title="root")
    code, _, err = await _cli(
        "sessions", "cancel", root.id, "--tree", "--store", f"sqlite:///{path}", "--agents", AGENTS
    )
    assert code == 2
    assert f"POST /threads/{root.id}/cancel?tree=true" in err
