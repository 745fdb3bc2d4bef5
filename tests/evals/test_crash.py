"""A crash mid-eval: the process running ``run_eval`` is SIGKILLed while forks' turns run, then run again.

The second process (a fresh runtime on the same SQLite file) runs the eval of the same name: every
case ends with exactly one fork holding one finished turn, the forks the dead process made are the
ones it reads or drives on, and the non-idempotent ledger was never invoked by either process.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from repertory import Runtime
from repertory.evals import load_dataset

from .world import count_lines, make_agents

ROOT = Path(__file__).resolve().parents[2]


def _worker(db: Path, folder: Path, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.evals._eval_worker", str(db), str(folder), mode],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> list[str]:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode(errors="replace")
    return out.decode().splitlines()


async def _forks(db: Path, folder: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """Per case: its forks of the eval ``crash``, each with its turns' statuses (read without driving anything)."""
    dataset = load_dataset(folder / "dataset.yaml")
    found: dict[str, list[tuple[str, list[str]]]] = {}
    async with await Runtime.start(store=f"sqlite:///{db}", agents=make_agents(folder), recover=False) as rt:
        for case in dataset.cases:
            forks: list[tuple[str, list[str]]] = []
            for child in await rt.store.list_sessions():  # every session: a fork is a tree of its own
                if child.metadata.get("eval") == "crash" and child.metadata.get("eval_case") == case.inputs.turn_id:
                    turns = await rt.store.list_turns(child.session_id)
                    forks.append((child.session_id, [str(t.status) for t in turns]))
            found[case.name or ""] = forks
    return found


def test_an_eval_killed_mid_run_resumes_with_one_fork_per_case(tmp_path: Path) -> None:
    db = tmp_path / "world.db"
    assert _finish(_worker(db, tmp_path, "build")) == ["built"]
    ledger = count_lines(tmp_path / "ledger.log")
    assert ledger == 1

    proc = _worker(db, tmp_path, "hang")
    assert proc.stdout is not None
    hung = [proc.stdout.readline().decode().strip() for _ in range(2)]
    assert all(line.startswith("hang ") for line in hung), (hung, proc.stderr.read() if proc.stderr else b"")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    before = asyncio.run(_forks(db, tmp_path))
    made = {name: forks for name, forks in before.items() if forks}
    assert all(len(forks) == 1 for forks in made.values())
    statuses = [status for forks in made.values() for _, turns in forks for status in turns]
    assert statuses.count("done") == 1 and statuses.count("running") == 2  # one case answered, two cut off
    assert len(made) == 3 and len(before) == 4  # the last case was never forked

    lines = _finish(_worker(db, tmp_path, "resume"))
    assert not [line for line in lines if line.startswith("failed")], lines
    after = asyncio.run(_forks(db, tmp_path))
    assert set(after) == set(before)
    for name, forks in after.items():
        [(fork_id, turns)] = forks  # exactly one fork per case, with one turn, finished
        assert turns == ["done"], (name, turns)
        if name in made:
            assert fork_id == made[name][0][0]  # the fork the killed process made, driven on
        assert f"case {name} done {fork_id}" in lines
    assert count_lines(tmp_path / "ledger.log") == ledger
