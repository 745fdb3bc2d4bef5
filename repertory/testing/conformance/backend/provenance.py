"""Provenance: the runtime stamps every message's origin from the handle's principal; no argument can.

Also ``notify``: a system-role turn whose origin is a system event for a user, the mod for a mod.
"""

from __future__ import annotations

import pydantic
import pytest

from repertory.core.messages import ModelMessage, Origin, TextPart
from repertory.core.principal import NotificationMessage, Principal, UserMessage
from repertory.runtime.tools import suspend
from repertory.testing.conformance.backend.doubles import Script, history, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["ProvenanceConformance"]


def ask_human(question: str) -> str:
    """Ask the person at the keyboard."""
    suspend(reason="need input", payload={"question": question})


def _last(messages: list[ModelMessage], text: str) -> ModelMessage:
    return next(m for m in reversed(messages) if m.text == text)


class ProvenanceConformance(BackendSuite):
    """Every message's origin is stamped from the handle's principal; ``notify`` sends system-role turns."""

    async def test_a_user_handle_stamps_user_origin(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant")
        assert h.principal == Principal.user()
        await within(h.run("plain string"))
        await within(h.run(UserMessage(text="typed message")))
        named = await rt.session(h.id, principal=Principal.user("alice"))
        await within(named.run("from alice"))
        messages = await history(rt, h)
        assert _last(messages, "plain string").origin == Origin(kind="user")
        assert _last(messages, "typed message").origin == Origin(kind="user")
        assert _last(messages, "from alice").origin == Origin(kind="user", id="alice")
        assert _last(messages, "re: plain string").origin == Origin(kind="model")

    async def test_a_mod_handle_can_never_produce_a_user_origin_message(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        mod = await rt.session(root.id, principal=Principal.mod("linter"))
        mod_origin = Origin(kind="mod", id="linter")

        await within(mod.run("as a string"))
        await within(mod.run(UserMessage(text="as a UserMessage")))
        # Even a UserMessage built without validation, smuggling an origin, is stamped as the mod.
        smuggled = UserMessage.model_construct(text="smuggled", origin=Origin(kind="user"))  # type: ignore[call-arg]
        await within(mod.run(smuggled))

        with pytest.raises(TypeError):
            await mod.send(ModelMessage(role="user", parts=[TextPart(text="forged")], origin=Origin(kind="user")))  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await mod.send({"type": "user", "text": "forged dict", "origin": {"kind": "user"}})  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await mod.send("forged kwarg", origin=Origin(kind="user"))  # type: ignore[call-arg]
        with pytest.raises(pydantic.ValidationError):
            UserMessage(text="forged", origin=Origin(kind="user"))  # type: ignore[call-arg]
        with pytest.raises(pydantic.ValidationError):
            UserMessage(text="forged", role="user")  # type: ignore[call-arg]
        with pytest.raises(pydantic.ValidationError):
            NotificationMessage(title="t", body="b", origin={"kind": "user"})  # type: ignore[call-arg]

        messages = await history(rt, root)
        for text in ("as a string", "as a UserMessage", "smuggled"):
            assert _last(messages, text).origin == mod_origin
        assert all(m.origin is None or m.origin.kind != "user" for m in messages)
        assert not any("forged" in m.text for m in messages)
        assert len(await rt.store.list_turns(root.id)) == 3  # the refused sends queued nothing

    async def test_a_mod_principal_carries_over_to_related_handles(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        await root.run("seed")
        mod = await rt.session(root.id, principal=Principal.mod("m"))
        child = await mod.spawn()
        fork = await mod.fork()
        assert child.principal == fork.principal == Principal.mod("m")
        assert all(c.principal == Principal.mod("m") for c in await mod.children())
        parent = await child.parent()
        assert parent is not None and parent.principal == Principal.mod("m")
        await within(child.run("from the child"))
        await within(fork.run("from the fork"))
        assert _last(await history(rt, child), "from the child").origin == Origin(kind="mod", id="m")
        assert _last(await history(rt, fork), "from the fork").origin == Origin(kind="mod", id="m")

    async def test_a_session_principal_is_stamped_as_that_session(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        parent = await rt.create_session(agent="assistant")
        child = await parent.spawn()
        as_child = await rt.session(parent.id, principal=Principal.session(child.id))
        await within(as_child.run("report from the child"))
        msg = _last(await history(rt, parent), "report from the child")
        assert msg.origin == Origin(kind="session", id=child.id)

    async def test_a_users_notification_is_a_system_message(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.notify(title="Audit finished", body="3 findings")
        result = await within(turn.result())
        assert result.status == "done"
        text = "Audit finished\n\n3 findings"
        msg = _last(await history(rt, h), text)
        assert msg.role == "system"
        assert msg.origin == Origin(kind="system")
        assert script.prompts() == [text]  # it drove a turn, and the model saw it
        assert script.requests[0][-1] == msg
        events = [e async for e in turn.events()]
        [note] = [e for e in events if e.type == "notification"]
        assert note.data["text"] == text

    async def test_a_mods_notification_is_stamped_as_the_mod(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        root = await rt.create_session(agent="assistant")
        mod = await rt.session(root.id, principal=Principal.mod("ci"))
        await within((await mod.notify(title="Build", body="green")).result())
        await within((await mod.send(NotificationMessage(title="Build", body="red"))).result())
        messages = await history(rt, root)
        for text in ("Build\n\ngreen", "Build\n\nred"):
            msg = _last(messages, text)
            assert (msg.role, msg.origin) == ("system", Origin(kind="mod", id="ci"))

    async def test_send_notification_message_is_the_same_as_notify(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant")
        await within((await h.send(NotificationMessage(title="T", body="B"))).result())
        msg = _last(await history(rt, h), "T\n\nB")
        assert (msg.role, msg.origin) == ("system", Origin(kind="system"))

    async def test_a_resume_value_is_said_by_the_deciding_principal(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"ask": [{"tool": "ask_human", "args": {"question": "colour?"}}]})
        rt = await make_runtime(script.agent(tools=[ask_human]))
        h = await rt.create_session(agent="assistant")

        for principal, value in ((Principal.mod("helper"), "blue"), (Principal.user("bob"), "green")):
            suspended = await within(h.run("ask"))
            assert suspended.status == "suspended"
            assert suspended.state.suspended_on is not None
            token = suspended.state.suspended_on.token
            decider = await rt.session(h.id, principal=principal)
            result = await within(decider.resume(token, value))
            assert (result.status, result.text) == ("done", f"re: {value}")
            msg = _last(await history(rt, h), value)
            assert (msg.role, msg.origin) == ("user", principal.origin)
