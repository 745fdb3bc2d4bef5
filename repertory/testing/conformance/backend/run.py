"""``run(prompt)`` and ``run(prompt, output=Model)``: validated replies, bounded retries."""

from __future__ import annotations

import pytest

from repertory.core.result import RunResult
from repertory.errors import GuardrailTripped, OutputValidationError, RunSuspended
from repertory.runtime.guardrails import GuardrailContext
from repertory.runtime.tools import suspend
from repertory.testing.conformance.backend.doubles import Answer, Script, history, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["RunConformance"]


OSLO = {"city": "Oslo", "population": 709000}


def ask_human(question: str) -> str:
    """Ask the person at the keyboard."""
    suspend(reason="need input", payload={"question": question})


def no_passwords(ctx: GuardrailContext, text: str) -> str | None:
    """An input guardrail: a text naming a password is refused."""
    return "no passwords here" if "password" in text else None


def _script() -> Script:
    return Script(
        {
            "valid": [{"json": OSLO}],
            "fenced": [{"text": "```json\n" + '{"city": "Bergen", "population": 291000}' + "\n```"}],
            "fix twice": [{"text": "Oslo, about 700k"}, {"json": {"city": "Oslo"}}, {"json": OSLO}],
            "never": [{"text": "no"}, {"json": {"town": "Oslo"}}, {"text": "still no"}, {"json": OSLO}],
            "ask": [{"tool": "ask_human", "args": {"question": "which city?"}}],
        }
    )


class RunConformance(BackendSuite):
    """``run(prompt)`` and ``run(prompt, output=Model)``: validated replies, bounded retries."""

    async def test_run_returns_the_finished_answer(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        result = await within(h.run("hello"))
        assert isinstance(result, RunResult)
        assert (result.status, result.text, result.output) == ("done", "re: hello", None)
        assert result.state.status == "done" and result.state.thread_id == h.id
        assert result.state.usage.requests == 1

    async def test_run_with_output_returns_a_validated_instance(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        answer = await within(h.run("valid", output=Answer))
        assert answer == Answer(city="Oslo", population=709000)
        fenced = await within(h.run("fenced", output=Answer))
        assert fenced == Answer(city="Bergen", population=291000)
        assert script.count("valid") == 1 and script.count("fenced") == 1

    async def test_an_invalid_reply_is_sent_back_and_retried(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        answer = await within(h.run("fix twice", output=Answer))
        assert answer == Answer(**OSLO)
        assert script.count("fix twice") == 3
        # Each retry saw the validation error of the reply before it.
        for request, complaint in zip(script.requests[1:], ("Invalid JSON", "population"), strict=True):
            feedback = request[-1]
            assert feedback.role == "user" and feedback.origin is not None and feedback.origin.kind != "user"
            assert "Answer" in feedback.text and complaint in feedback.text
        assert (await h.metadata()).status == "idle"

    async def test_after_two_retries_it_is_output_validation_error(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        with pytest.raises(OutputValidationError):
            await within(h.run("never", output=Answer))
        assert script.count("never") == 3  # the first reply and two retries, never a fourth
        assert (await h.metadata()).status == "error"
        # The session goes on, and a later plain run is not validated.
        assert (await within(h.run("plain"))).text == "re: plain"

    async def test_the_output_type_applies_to_its_own_turn_only(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("valid", output=Answer)
        plain = await h.send("free text")
        assert (await within(turn.result())).output == Answer(**OSLO)
        result = await within(plain.result())
        assert (result.text, result.output) == ("re: free text", None)

    async def test_an_agent_output_type_is_the_default(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent(output_type=Answer))
        h = await rt.create_session(agent="assistant")
        with pytest.raises(OutputValidationError):
            await within(h.run("never"))
        result = await within(h.run("valid"))
        # Agent(output_type=M) validates every run's reply; RunResult.output holds the instance (docs/contract.md).
        assert isinstance(result, RunResult) and result.output == Answer(**OSLO)

    async def test_run_with_output_on_a_suspending_turn_raises_run_suspended(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(_script().agent(tools=[ask_human]))
        h = await rt.create_session(agent="assistant")
        with pytest.raises(RunSuspended):
            await within(h.run("ask", output=Answer))
        assert (await h.metadata()).status == "suspended"
        plain = await within(h.run("ask"))  # without output the result says it suspended
        assert plain.status == "suspended" and plain.text is None
        assert [m.text for m in await history(rt, h) if m.role == "user"] == ["ask", "ask"]

    async def test_a_refused_input_leaves_the_thread(self, make_runtime: RuntimeFactory) -> None:
        """An input an input guardrail refuses is not part of the thread afterwards (its run ends ``error``)."""
        script = _script()
        rt = await make_runtime(script.agent(input_guardrails=[no_passwords]))
        h = await rt.create_session(agent="assistant")
        await within(h.run("hello"))
        before = [m.text for m in await history(rt, h)]
        refused = await h.send("my password is hunter2")
        with pytest.raises(GuardrailTripped, match="no passwords here"):
            await within(refused.result())
        assert [m.text for m in await history(rt, h)] == before  # the head went back where the run began
        assert await refused.status() == "error"
        again = await within(h.run("and now"))
        assert again.text == "re: and now"
        # No model request ever carried the refused text, and the guardrail judged the new input alone.
        assert all("hunter2" not in m.text for request in script.requests for m in request)
        assert [m.text for m in await history(rt, h)] == [*before, "and now", "re: and now"]
        events = [e async for e in refused.events()]
        kinds = [e.type for e in events]
        assert "guardrail.tripped" in kinds and kinds[-1] == "turn.completed"
        assert all("hunter2" not in str(e.data) for e in events)
