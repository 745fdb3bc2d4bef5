"""Guardrails in a bare ``Session`` (every store), and a delegating tool where there is no session tree.

Input guardrails run before the first model request, output guardrails on the reply that would end
the run; a string trips one: the run is committed ``error`` with ``GuardrailTripped`` and the call
raises it. ``agent_tool`` needs a ``Runtime``: a bare session that meets its call raises ``ValueError``.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import BaseModel

from repertory import Agent, GuardrailContext, GuardrailTripped, InMemorySessionStore, Runtime, Session, agent_tool
from repertory.core.tree import SessionRecord
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel

from .helpers import CheckedModel, call, run_history, stored, text_step, thread_history


class Verdict(BaseModel):
    ok: bool


def _agent(model: Any, **kw: Any) -> Agent:
    return Agent(name="guarded", model=model, **kw)


async def test_a_passing_guardrail_sees_the_input_and_its_context(store: SessionStore) -> None:
    seen: list[tuple[str, str, str, int]] = []

    def watch(ctx: GuardrailContext, text: str) -> None:
        seen.append((ctx.stage, ctx.agent, text, len(ctx.messages)))

    model = CheckedModel([text_step("fine")])
    sess = Session(store=store, agent=_agent(model, input_guardrails=[watch], output_guardrails=[watch]))
    result = await sess.start("hello there")

    assert result.text == "fine"
    assert seen == [("input", "guarded", "hello there", 1), ("output", "guarded", "fine", 2)]


async def test_a_tripped_input_guardrail_commits_an_error_before_any_model_request(store: SessionStore) -> None:
    async def refuse(ctx: GuardrailContext, text: str) -> str | None:
        return "no politics" if "election" in text else None

    model = CheckedModel([text_step("never sent")])
    sess = Session(store=store, agent=_agent(model, input_guardrails=[refuse]))

    with pytest.raises(GuardrailTripped, match="no politics") as caught:
        await sess.start("who wins the election?")

    assert caught.value.details == {"guardrail": "refuse", "stage": "input"}
    assert model.seen == []  # no tokens spent on a refused input
    run = await stored(store, sess.state.run_id if sess.state else "")
    assert run.status == "error" and run.error is not None
    assert (run.error.type, run.error.message) == ("GuardrailTripped", "no politics")
    assert run.step_index == 0
    clone = pickle.loads(pickle.dumps(caught.value))  # it crosses Ray hosts as a turn's error
    assert clone.details == caught.value.details and str(clone) == "no politics"


async def test_a_refused_input_leaves_the_thread(store: SessionStore) -> None:
    """The refused text is not part of the thread afterwards: the next run starts where the refused one began."""
    seen: list[str] = []

    def no_passwords(ctx: GuardrailContext, text: str) -> str | None:
        seen.append(text)
        return "no passwords" if "password" in text else None

    model = CheckedModel([text_step("first reply"), text_step("second reply")])
    sess = Session(store=store, agent=_agent(model, input_guardrails=[no_passwords]))
    await sess.start("hello")
    head = await store.load_thread(sess.thread_id)
    assert head is not None
    with pytest.raises(GuardrailTripped):
        await sess.start("my password is x")
    refused = await stored(store, sess.state.run_id if sess.state else "")
    assert refused.status == "error" and refused.history_revision_id == head.history_revision_id
    after = await store.load_thread(sess.thread_id)
    assert after is not None and after.history_revision_id == head.history_revision_id
    result = await sess.start("hello again")
    assert result.text == "second reply"
    assert seen == ["hello", "my password is x", "hello again"]  # judged alone, not after the refused text
    assert all("password" not in m.text for request in model.seen for m in request)
    assert [m.text for m in await thread_history(store, sess.thread_id)] == [
        "hello",
        "first reply",
        "hello again",
        "second reply",
    ]
    # On a new thread whose first input is refused, the thread stays empty.
    fresh = Session(store=store, agent=_agent(CheckedModel([text_step("hi")]), input_guardrails=[no_passwords]))
    with pytest.raises(GuardrailTripped):
        await fresh.start("password first")
    await fresh.start("now hi")
    assert [m.text for m in await thread_history(store, fresh.thread_id)] == ["now hi", "hi"]


async def test_a_tripped_output_guardrail_refuses_the_final_reply(store: SessionStore) -> None:
    model = CheckedModel([call("lookup", q="x"), text_step("the secret is 42")])
    calls: list[str] = []

    def lookup(q: str) -> str:
        calls.append(q)
        return "found"

    def no_secrets(ctx: GuardrailContext, text: str) -> str | None:
        return "the reply leaks a secret" if "secret" in text else None

    sess = Session(store=store, agent=Agent(name="g", model=model, tools=[lookup], output_guardrails=[no_secrets]))
    with pytest.raises(GuardrailTripped, match="leaks a secret"):
        await sess.start("go")

    assert calls == ["x"]  # tool calls are not replies: only the final reply is judged
    assert sess.state is not None
    run = await stored(store, sess.state.run_id)
    assert run.status == "error" and run.result is None
    assert run.usage.requests == 2  # the refused reply's request was made and counts
    kept = await run_history(store, run.run_id)
    assert [m.role for m in kept] == ["user", "assistant", "tool"]  # the refused reply never entered the history
    assert all("secret" not in m.text for m in kept)


async def test_output_guardrails_judge_the_reply_that_validated(store: SessionStore) -> None:
    judged: list[str] = []

    def judge(ctx: GuardrailContext, text: str) -> None:
        judged.append(text)

    model = CheckedModel([text_step("not json"), {"json": {"ok": True}}])
    sess = Session(store=store, agent=_agent(model, output_type=Verdict, output_guardrails=[judge]))
    result = await sess.start("decide")

    assert result.output == Verdict(ok=True)
    assert judged == ['{"ok": true}']  # the invalid reply went back to the model, unjudged


async def test_a_guardrail_that_fails_or_answers_nonsense_fails_the_run(store: SessionStore) -> None:
    def broken(ctx: GuardrailContext, text: str) -> str | None:
        raise RuntimeError("the moderation service is down")

    def confused(ctx: GuardrailContext, text: str) -> Any:
        return 3

    for guardrail, error in ((broken, RuntimeError), (confused, TypeError)):
        sess = Session(store=store, agent=_agent(ScriptedModel([text_step("x")]), input_guardrails=[guardrail]))
        with pytest.raises(error):
            await sess.start("hi")
        assert sess.state is not None and sess.state.status == "error"


def test_a_guardrail_must_be_callable() -> None:
    with pytest.raises(TypeError, match="guardrail"):
        Agent(name="g", model=ScriptedModel([]), input_guardrails=["not callable"])  # type: ignore[list-item]


async def test_a_bare_session_calling_a_delegating_tool_raises_value_error(store: SessionStore) -> None:
    model = CheckedModel([call("worker", task="do it"), text_step("unreachable")])
    sess = Session(store=store, agent=Agent(name="boss", model=model, tools=[agent_tool("worker")]))

    with pytest.raises(ValueError, match="Runtime"):
        await sess.start("go")

    assert sess.state is not None
    run = await stored(store, sess.state.run_id)
    assert run.status == "error" and run.error is not None and run.error.type == "ValueError"
    assert run.delegations == []  # nothing was reserved: no child can have been spawned


def test_agent_tool_describes_itself_to_the_model() -> None:
    spec = agent_tool("researcher").spec()
    assert spec.name == "researcher" and "researcher" in spec.description
    assert spec.parameters["required"] == ["task"]
    assert spec.parameters["properties"]["task"]["type"] == "string"
    named = agent_tool("researcher", name="ask_research", description="Ask the research team.")
    assert (named.name, named.delegates_to) == ("ask_research", "researcher")
    assert named.description == "Ask the research team."
    with pytest.raises(ValueError):
        agent_tool("")


class _WatchingStore(InMemorySessionStore):
    """Records, at each child's creation, what its parent's stored run already says about it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen_at_creation: list[tuple[str, bool, bool]] = []

    async def create_session(self, session: SessionRecord, *, head: str | None = None) -> None:
        parent = session.lineage.parent_id
        if parent is not None:
            [run] = await self.list_runs(parent, limit=1)
            reserved = any(d.session_id == session.session_id for d in run.delegations)
            history = await self.load_history(run.history_revision_id) if run.history_revision_id else None
            call_committed = history is not None and bool(history.messages[-1].tool_calls)
            self.seen_at_creation.append((session.session_id, reserved, call_committed))
        await super().create_session(session, head=head)


async def test_a_delegation_is_committed_with_its_child_ids_before_the_child_exists_even_if_idempotent() -> None:
    delegate = agent_tool("worker")
    delegate.idempotent = True  # the engine commits a delegating call first whatever this flag says
    agents = {
        "boss": Agent(name="boss", model=ScriptedModel([call("worker", task="t"), text_step("ok")]), tools=[delegate]),
        "worker": Agent(name="worker", model=ScriptedModel([text_step("done")])),
    }
    store = _WatchingStore()
    async with await Runtime.start(store=store, agents=agents) as rt:
        root = await rt.create_session(agent="boss")
        assert (await root.run("go")).text == "ok"
        [child] = await root.children()
    assert store.seen_at_creation == [(child.id, True, True)]
    await store.close()
