"""The driver process: runs the fleet's runtime, starts projects, records every accepted turn.

    python -m tests.soak.driver RUN_DIR STORE_URL BACKEND SEED INCARNATION [RAY_ADDRESS]

The conductor starts it, SIGKILLs it on the fault schedule and starts it again (a new incarnation).
Each start opens the store with a runtime, which re-drives every turn the killed one left open;
then it watches the turns accepted before it (from ``accepted.jsonl``) and carries on with new
projects, numbered after the last one ``roots.jsonl`` holds. A project is one root orchestrator
session: its plan turn, and, drawn per project from the seed, a follow-up sent while the plan
runs (``if_busy="enqueue"``), a notification, a worker the driver spawns itself with a task of
its own, and a fork of the root asked to summarise once the plan is done.

Every turn ``send()`` returned is appended to ``accepted.jsonl`` at once (it is durable from then
on), and each one's end to ``served.jsonl``. When ``quiesce`` appears the driver starts nothing
new, waits until every accepted turn (of every incarnation) has ended, writes ``quiesced`` and
exits 0. Calls that fail through a fault are retried with backoff (``tests.soak.retry``).

On the local backend the driver also serves its runtime over HTTP on loopback (``create_app``:
the Agent Protocol API and the web UI), and writes the address to ``driver-url`` once it listens:
the approver decides through the web UI's ``/ui/decide``, as a person would, so each decision runs
in this process, in the session's mailbox, and never in a second process beside this one (the
local backend drives a session in one process at a time; see ``tests.soak.approver``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import sys
from pathlib import Path
from typing import Any

from repertory import Runtime
from repertory.tree.handle import SessionHandle, TurnHandle
from tests.soak.records import RunPaths, append_line, now_ms, read_lines
from tests.soak.retry import retrying, transient
from tests.soak.workload import make_agents, ray_options

__all__ = ["CONCURRENT_PROJECTS", "main", "serve_http", "url_file"]

CONCURRENT_PROJECTS = 4
"""Projects in flight at once (each is a tree of four to seven sessions)."""
_ENDED = ("done", "error", "cancelled")
_POLL_S = 0.2


def url_file(paths: RunPaths) -> Path:
    """Where the driver writes the address it serves HTTP on (rewritten by each incarnation)."""
    return paths.root / "driver-url"


async def serve_http(rt: Runtime, paths: RunPaths) -> tuple[asyncio.Task[None], Any]:
    """Serve ``rt`` on a free loopback port; returns once it listens, after writing ``driver-url``.

    The address is written to a temporary file and renamed over the old one, so the approver reads
    a whole address: the previous incarnation's (refused: it is dead) or this one's.
    """
    import uvicorn

    from repertory.http import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(rt), log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.05)
    target = url_file(paths)
    tmp = target.with_suffix(f".{os.getpid()}")
    tmp.write_text(f"http://127.0.0.1:{port}")
    os.replace(tmp, target)
    return task, server


class Driver:
    """One incarnation of the driver: its runtime, the turns it watches, the projects it runs."""

    def __init__(self, rt: Runtime, paths: RunPaths, seed: int, incarnation: int) -> None:
        self.rt = rt
        self.paths = paths
        self.seed = seed
        self.who = f"driver-{incarnation}"
        self.watchers: dict[str, asyncio.Task[str]] = {}
        # Turns already seen ending (by this incarnation or an earlier one): never recorded twice.
        self.ended = {line["submission_id"] for line in read_lines(paths.served)}

    async def _retry(self, what: str, call: Any) -> Any:
        return await retrying(what, call, journal=self.paths.errors, who=self.who)

    def watch(self, session_id: str, submission_id: str) -> asyncio.Task[str] | None:
        """A task that ends with the turn's final status (read from the store, whoever runs it).

        ``None`` for a turn an earlier incarnation already saw ending.
        """
        if submission_id in self.ended and submission_id not in self.watchers:
            return None
        task = self.watchers.get(submission_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._until_ended(session_id, submission_id))
            self.watchers[submission_id] = task
        return task

    async def _until_ended(self, session_id: str, submission_id: str) -> str:
        while True:
            try:
                turn = await self.rt.store.load_turn(submission_id)
            except Exception as exc:
                if not transient(exc):
                    raise
                turn = None
            if turn is not None and turn.status in _ENDED:
                self.ended.add(submission_id)
                append_line(
                    self.paths.served,
                    {
                        "session_id": session_id,
                        "submission_id": submission_id,
                        "status": turn.status,
                        "at_ms": now_ms(),
                    },
                )
                return turn.status
            await asyncio.sleep(_POLL_S)

    async def send(self, handle: SessionHandle, text: str, *, notify: bool = False) -> asyncio.Task[str]:
        """Send (retrying through faults), record the accepted turn at once, watch it."""
        if notify:
            title, _, body = text.partition("\n\n")
            turn: TurnHandle = await self._retry("notify", lambda: handle.notify(title=title, body=body))
        else:
            turn = await self._retry("send", lambda: handle.send(text, if_busy="enqueue"))
        append_line(
            self.paths.accepted,
            {
                "session_id": handle.id,
                "submission_id": turn.submission_id,
                "kind": "notification" if notify else "message",
                "at_ms": now_ms(),
            },
        )
        watcher = self.watch(handle.id, turn.submission_id)
        assert watcher is not None  # a new submission id: nobody saw it end yet
        return watcher

    async def project(self, n: int) -> None:
        """One root's work: plan, maybe a follow-up, a notification, a spawned worker, a fork."""
        draw = random.Random(f"{self.seed}-project-{n}")
        root: SessionHandle = await self._retry(
            "create", lambda: self.rt.create_session(agent="orchestrator", title=f"project {n}")
        )
        append_line(self.paths.roots, {"session_id": root.id, "project": n, "at_ms": now_ms()})
        turns = [await self.send(root, f"plan project {n}")]
        # A plan that waits on a timer gets no second turn: a turn queued behind it would start
        # while the plan sleeps and supersede it (a new turn on a suspended session cancels its run).
        sleeps = n % 3 == 1
        if draw.random() < 0.5 and not sleeps:
            turns.append(await self.send(root, f"follow-up {n}: keep the budget under 10k"))
        if draw.random() < 0.3 and not sleeps:
            turns.append(await self.send(root, f"status {n}\n\nthe auditors asked for the figures", notify=True))
        if draw.random() < 0.3:
            child: SessionHandle = await self._retry(
                "spawn", lambda: root.spawn(agent="worker", title=f"notes for project {n}")
            )
            turns.append(await self.send(child, f"draft notes for project {n}"))
        forks = draw.random() < 0.3
        # Shielded: cancelling this project (at quiesce) must not cancel the watchers quiesce waits on.
        await asyncio.shield(turns[0])
        if forks:
            alt: SessionHandle = await self._retry("fork", lambda: root.fork(title=f"project {n}, late"))
            turns.append(await self.send(alt, f"summarise project {n} assuming a two-week delay"))
        await asyncio.gather(*(asyncio.shield(t) for t in turns))

    async def run(self) -> None:
        """Watch what earlier incarnations accepted, run projects until told to quiesce, then wait."""
        for line in read_lines(self.paths.accepted):
            self.watch(line["session_id"], line["submission_id"])
        projects = [int(line["project"]) for line in read_lines(self.paths.roots)]
        next_project = max(projects, default=-1) + 1
        running: set[asyncio.Task[None]] = set()
        while not self.paths.quiesce.exists():
            while len(running) < CONCURRENT_PROJECTS:
                task = asyncio.get_running_loop().create_task(self._project_logged(next_project))
                running.add(task)
                task.add_done_callback(running.discard)
                next_project += 1
            await asyncio.sleep(_POLL_S)
        for task in list(running):  # they only send and wait: every turn they sent is in accepted.jsonl
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await self.quiesce()

    async def _project_logged(self, n: int) -> None:
        try:
            await self.project(n)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a project given up on: its accepted turns are still waited for
            append_line(
                self.paths.errors,
                {"who": self.who, "what": f"project {n} abandoned", "error": f"{type(exc).__name__}: {exc}"[:300]},
            )

    async def quiesce(self) -> None:
        """Wait until every accepted turn of every incarnation has ended, then say so."""
        for line in read_lines(self.paths.accepted):
            self.watch(line["session_id"], line["submission_id"])
        await asyncio.gather(*self.watchers.values())  # a watcher's errors are store errors it retried through
        self.paths.quiesced.write_text(str(len(self.watchers)))


async def _main(run_dir: Path, store_url: str, backend: str, seed: int, incarnation: int, address: str | None) -> None:
    paths = RunPaths(run_dir)
    agents = make_agents(run_dir, seed)
    options: dict[str, Any] = {"poll_interval": 1.0}
    if backend == "ray":
        options |= ray_options(address)
    rt: Runtime = await retrying(
        "start",
        lambda: Runtime.start(store=store_url, backend=backend, agents=agents, **options),
        journal=paths.errors,
        who=f"driver-{incarnation}",
    )
    served: tuple[asyncio.Task[None], Any] | None = None
    try:
        if backend == "local":
            served = await serve_http(rt, paths)
        await Driver(rt, paths, seed, incarnation).run()
    finally:
        if served is not None:
            task, server = served
            server.should_exit = True
            with contextlib.suppress(Exception):
                await task
        with contextlib.suppress(Exception):
            await rt.close()


def main(argv: list[str] | None = None) -> None:
    """Parse the positional arguments the conductor passes, and drive."""
    args = sys.argv[1:] if argv is None else argv
    run_dir, store_url, backend, seed, incarnation = args[:5]
    address = args[5] if len(args) > 5 else None
    asyncio.run(_main(Path(run_dir), store_url, backend, int(seed), int(incarnation), address))


if __name__ == "__main__":
    main()
