"""Child process for ``test_crash.py``: an eval run in its own process, killed and run again.

``python -m tests.evals._eval_worker DB DIR MODE``

- ``build``: a runtime on DB makes the stored world (``world.py``), saves the dataset of the ``ops``
  sessions to DIR/dataset.yaml and prints ``built``.
- ``hang``: runs the eval ``crash`` on that dataset with two cases at a time. The variant's model
  answers the first case it is asked for and then never answers again: each later request prints
  ``hang`` and waits for ever, so the test kills the process while turns of forks are running.
- ``resume``: a fresh runtime (``recover=False``: the eval drives its own forks again) runs the eval
  ``crash`` again with a model that answers, and prints ``case <name> <status> <fork id>`` per case.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from repertory import ModelMessage, Runtime, ToolSpec
from repertory.evals import dataset_from_sessions, load_dataset, run_eval
from repertory.evals.select import SessionSelect
from repertory.testing import ScriptedModel

from .world import build_world, make_agents, ops_script


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(db: Path, folder: Path, mode: str) -> None:
    url = f"sqlite:///{db}"
    if mode == "build":
        async with await Runtime.start(store=url, agents=make_agents(folder)) as rt:
            await build_world(rt)
            dataset = await dataset_from_sessions(rt.store, SessionSelect(agent="ops"), agents=rt.agents)
            dataset.to_file(folder / "dataset.yaml")
        _say("built")
        return
    dataset = load_dataset(folder / "dataset.yaml")
    async with await Runtime.start(store=url, agents=make_agents(folder), recover=False) as rt:
        if mode == "hang":
            answered: list[str] = []

            async def first_case_only(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
                said = [m.text for m in messages if m.role == "user"][-1]
                if not answered or said == answered[0]:
                    answered[:1] = [said]
                    return ops_script(messages, tools)
                _say(f"hang {said}")
                await asyncio.Event().wait()
                raise AssertionError("unreachable")

            await run_eval(rt, dataset, name="crash", model=ScriptedModel(first_case_only), concurrency=2)
            _say("finished")  # the test kills the process before this
            return
        report = await run_eval(rt, dataset, name="crash", model=ScriptedModel(ops_script), concurrency=2)
        for case in report.cases:
            _say(f"case {case.name} {case.output.status} {case.output.session_id}")
        for failure in report.failures:
            _say(f"failed {failure.name} {failure.error_message}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
