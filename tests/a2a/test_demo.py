"""The demo's A2A sub-task: the first orchestrator asks the reviewer, served by ``a2a-sdk`` in the demo, over A2A."""

from __future__ import annotations

from repertory import Runtime
from repertory.demo.a2a_agent import serve_reviewer
from repertory.demo.agents import REMOTE_TOOL, make_agents
from repertory.demo.fleet import run_fleet


async def test_one_orchestrator_delegates_one_sub_task_over_a2a_and_the_summary_counts_it() -> None:
    async with (
        serve_reviewer() as url,
        await Runtime.start(store="memory://", agents=make_agents(delay=0.0, a2a_url=url)) as rt,
    ):
        stats = await run_fleet(rt, 2, kill_host_at=None)
        assert stats.errors == [] and stats.projects_done == 2
        assert stats.a2a_calls == 1  # project 0's orchestrator only
        assert stats.delegations == stats.children == 6  # the A2A call spawned no child session
        titles = {sid: (await rt.store.load_session(sid)) for sid in stats.root_ids}
        [project0] = [sid for sid, record in titles.items() if record is not None and record.title == "project 0"]
        first = await rt.store.load_thread(project0)
        assert first is not None and first.history_revision_id is not None
        history = await rt.store.load_history(first.history_revision_id)
        assert history is not None
    [answer] = [p for m in history.messages for p in m.tool_results if p.tool_name == REMOTE_TOOL]
    assert not answer.is_error
    assert answer.result == "second opinion on review the plan for project 0: sound, one risk to watch"


async def test_without_a_url_the_orchestrator_has_no_remote_tool() -> None:
    assert REMOTE_TOOL not in make_agents(delay=0.0)["orchestrator"].tools
