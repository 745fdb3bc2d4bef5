"""Child process for ``test_processes.py``: one step of a run's life, exporting its spans over OTLP/HTTP.

``python -m tests.tracing._worker MODE DB [ARGS]``, with ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set
to the test's collector (``repertory.tracing.configure_from_env`` does the rest, as a host does):

- ``suspend DB``: start a run that waits for approval, under a root span ``asker``; print
  ``{"run_id", "token"}`` as JSON.
- ``approve DB RUN_ID TOKEN``: approve it from the store alone, under a root span ``approver``.
- ``hang DB``: start a run whose (not idempotent) tool prints ``started`` and never returns;
  the test SIGKILLs this process there.
- ``recover DB RUN_ID``: recover the run the killed process left ``running``.

Each prints its result's status last and flushes its spans before exiting.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry import trace

from repertory import Agent, Session, SqliteSessionStore, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel
from repertory.tracing import configure_from_env


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money (needs approval)."""
    return f"sent {amount}"


@tool
async def hang(n: int) -> str:
    """Never returns: the process is killed while it waits."""
    print("started", flush=True)
    await asyncio.Event().wait()
    return "never"


def _hang_step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    last = messages[-1]
    return {"tool": "hang", "args": {"n": 1}} if last.role == "user" else {"text": f"after: {last.text}"}


def approval_agent() -> Agent:
    """The agent of the suspend / approve pair."""
    return Agent(
        name="clerk", model=ScriptedModel([{"tool": "wire", "args": {"amount": 5}}, {"text": "ok"}]), tools=[wire]
    )


def hang_agent() -> Agent:
    """The agent of the hang / recover pair."""
    return Agent(name="hanger", model=ScriptedModel(_hang_step), tools=[hang])


async def main(mode: str, db: str, *args: str) -> None:
    provider = configure_from_env()
    assert provider is not None, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not set"
    tracer = trace.get_tracer("tests.worker")
    store = await SqliteSessionStore.open(db)
    try:
        if mode == "suspend":
            with tracer.start_as_current_span("asker"):
                r = await Session(store=store, agent=approval_agent()).start("pay")
            assert r.state.suspended_on is not None
            print(json.dumps({"run_id": r.run_id, "token": r.state.suspended_on.token}), flush=True)
        elif mode == "approve":
            run_id, token = args
            with tracer.start_as_current_span("approver"):
                r = await Session.approve_suspended(
                    store=store, agent=approval_agent(), run_id=run_id, resume_token=token
                )
        elif mode == "hang":
            r = await Session(store=store, agent=hang_agent()).start("go")
        elif mode == "recover":
            (run_id,) = args
            r = await Session.recover(store=store, agent=hang_agent(), run_id=run_id)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        print(r.status, flush=True)
    finally:
        await store.close()
        provider.shutdown()  # exports what is left


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
