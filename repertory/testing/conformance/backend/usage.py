"""``usage(tree=...)``: a session's own token usage, and the sum over its whole subtree."""

from __future__ import annotations

import asyncio

from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.state import Usage
from repertory.testing.conformance.backend.doubles import Script, prompt_of, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.testing.scripted import Step
from repertory.tree.handle import SessionHandle

__all__ = ["UsageConformance"]


def _usage_script() -> Script:
    """Every reply to a prompt ``"<name> <n>"`` costs n input and 2n output tokens."""

    class Costed(Script):
        async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> Step:
            step = await super().__call__(messages, tools)
            n = int(prompt_of(messages)[0].rsplit(" ", 1)[1])
            return {**step, "usage": {"input_tokens": n, "output_tokens": 2 * n}}

    return Costed()


def _u(n: int, requests: int = 1) -> Usage:
    return Usage(input_tokens=n, output_tokens=2 * n, total_tokens=3 * n, requests=requests)


class UsageConformance(BackendSuite):
    """``usage(tree=...)``: a session's own token usage, and the sum over its whole subtree."""

    async def test_usage_of_one_session_sums_its_runs(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_usage_script().agent())
        h = await rt.create_session(agent="assistant")
        assert await h.usage() == Usage()
        await within(h.run("a 5"))
        await within(h.run("b 7"))
        assert await h.usage() == _u(12, requests=2)
        assert await h.usage(tree=True) == _u(12, requests=2)  # no descendants

    async def test_usage_tree_sums_a_spawn_tree_of_depth_three_run_in_parallel(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(_usage_script().agent())
        root = await rt.create_session(agent="assistant")
        await within(root.run("root 1"))

        async def grow(parent: SessionHandle, label: str, depth: int) -> None:
            child = await parent.spawn(title=label)
            await child.run(f"{label} {10**depth}")
            if depth < 3:
                await asyncio.gather(*(grow(child, f"{label}.{i}", depth + 1) for i in range(2)))

        # root -> 3 children (10 each) -> 2 grandchildren each (100) -> 2 great-grandchildren each (1000)
        await within(asyncio.gather(*(grow(root, f"c{i}", 1) for i in range(3))), 30)
        # A fork counts its own runs only, never the history it shares with its parent.
        fork = await root.fork()
        await within(fork.run("fork 10000"))

        levels = [(1, 1), (3, 10), (6, 100), (12, 1000), (1, 10000)]
        expected = Usage(
            input_tokens=sum(c * n for c, n in levels),
            output_tokens=sum(2 * c * n for c, n in levels),
            total_tokens=sum(3 * c * n for c, n in levels),
            requests=sum(c for c, _ in levels),
        )
        assert await root.usage(tree=True) == expected
        assert await root.usage() == _u(1)
        assert await fork.usage(tree=True) == _u(10000)

        [c0] = [c for c in await root.children() if (await c.metadata()).title == "c0"]
        # c0 + its 2 children + their 4 children
        assert await c0.usage(tree=True) == Usage(
            input_tokens=10 + 200 + 4000,
            output_tokens=2 * (10 + 200 + 4000),
            total_tokens=3 * (10 + 200 + 4000),
            requests=7,
        )
        assert await c0.usage() == _u(10)
