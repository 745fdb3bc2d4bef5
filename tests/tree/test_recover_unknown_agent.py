"""A restart that does not serve an agent leaves that agent's open turns open and serves the rest.

An eval's variant, or an agent retired from a deployment, may have a turn a crash left open. The
runtime that starts without it used to fail its start for every session; it now logs those turns,
leaves them as they are (a runtime with the agent finishes them) and recovers the others.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from repertory import Runtime
from repertory.testing.conformance.backend.doubles import Script, within


async def test_open_turns_of_an_agent_not_served_here_wait_and_the_rest_recover(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    script = Script()
    held = [script.hold("retired work"), script.hold("kept work")]
    agents = {"retired": script.agent("retired"), "kept": script.agent("kept")}
    rt = await Runtime.start(store=url, agents=agents)
    retired = await rt.create_session(agent="retired")
    kept = await rt.create_session(agent="kept")
    turns = [await retired.send("retired work"), await kept.send("kept work")]
    for gate in held:
        await gate.reached()
    await rt.close()  # the turns stay open, as after a crash

    with caplog.at_level(logging.WARNING, logger="repertory.runtime.host"):
        again = await Runtime.start(store=url, agents={"kept": script.agent("kept")})
    try:
        assert (
            await within((await again.session(kept.id)).get_turn(turns[1].submission_id).result())
        ).text == "re: kept work"
        assert await (await again.session(retired.id)).get_turn(turns[0].submission_id).status() == "running"
        assert any("not served here" in r.getMessage() and retired.id in r.getMessage() for r in caplog.records)
    finally:
        await again.close()

    last = await Runtime.start(store=url, agents=agents)  # a runtime with the agent finishes its turn
    try:
        assert (
            await within((await last.session(retired.id)).get_turn(turns[0].submission_id).result())
        ).text == "re: retired work"
    finally:
        await last.close()
