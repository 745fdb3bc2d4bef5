"""``metadata()``: title, model, cwd, times, and a status that follows the session's real state."""

from __future__ import annotations

import pytest

from repertory.errors import ModelError
from repertory.runtime.tools import ToolContext, tool
from repertory.testing.conformance.backend.doubles import Script, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["MetadataConformance"]


@tool(requires_approval=True)
def deploy(ctx: ToolContext, target: str) -> str:
    """Deploy somewhere (needs a human's yes)."""
    return f"deployed {target}"


class MetadataConformance(BackendSuite):
    """``metadata()``: title, model, cwd, times, and a status that follows the session's real state."""

    async def test_metadata_holds_title_model_cwd_and_times(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant", title="Planning", model="gpt-x", cwd="/srv/app")
        meta = await h.metadata()
        assert (meta.title, meta.model, meta.cwd, meta.status) == ("Planning", "gpt-x", "/srv/app", "idle")
        assert isinstance(meta.created_at, int) and isinstance(meta.updated_at, int)
        assert meta.created_at <= meta.updated_at

        bare = await rt.create_session(agent="assistant")
        meta = await bare.metadata()
        assert (meta.title, meta.model, meta.cwd, meta.status) == (None, None, None, "idle")
        same = await (await rt.session(h.id)).metadata()
        assert (same.title, same.model, same.cwd) == ("Planning", "gpt-x", "/srv/app")

    async def test_status_moves_through_running_suspended_error_and_back_to_idle(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script(
            {
                "ship it": [{"tool": "deploy", "args": {"target": "prod"}}, {"text": "shipped"}],
                "fail": [ModelError("boom")],
            }
        )
        gate = script.hold("slow")
        rt = await make_runtime(script.agent(tools=[deploy]))
        h = await rt.create_session(agent="assistant")
        assert (await h.metadata()).status == "idle"

        slow = await h.send("slow")
        await gate.reached()
        assert (await h.metadata()).status == "running"
        gate.release()
        await within(slow.result())
        assert (await h.metadata()).status == "idle"

        suspended = await within(h.run("ship it"))
        assert suspended.status == "suspended"
        assert (await h.metadata()).status == "suspended"
        [pending] = await h.pending_approvals()
        approved = await within(h.approve(pending.token))
        assert approved.status == "done"
        assert (await h.metadata()).status == "idle"

        with pytest.raises(ModelError):
            await within(h.run("fail"))
        assert (await h.metadata()).status == "error"

        await within(h.run("fine again"))
        assert (await h.metadata()).status == "idle"

        cancelled_gate = script.hold("to cancel")
        doomed = await h.send("to cancel")
        await cancelled_gate.reached()
        await within(doomed.cancel())
        assert (await h.metadata()).status == "idle"  # the last run ended cancelled
