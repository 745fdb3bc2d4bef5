"""Tool calls inside a step: finding the unanswered ones and running them.

Every model request must pair each tool call with exactly one result, so the helpers here are the
single place that decides what an unanswered call gets: its tool's real result, an error the model
can read (unknown tool, invalid arguments, a raising tool, a rejection, "outcome unknown" after a
crash), or a note that the tool suspended the run.
"""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import dataclass
from typing import Any

from repertory.core.messages import ModelMessage, Origin, ToolCallPart, ToolResultPart
from repertory.core.trusted import trusted
from repertory.errors import SuspendSignal, ToolError
from repertory.runtime.tools import Tool, ToolContext
from repertory.tracing import tool_span

__all__ = ["CallOutcome", "error_result", "run_calls", "tool_message", "unanswered_calls"]

TOOL_ORIGIN = Origin(kind="tool")


@dataclass(slots=True)
class CallOutcome:
    """The result of one call, and the suspension it asked for, if any."""

    result: ToolResultPart
    suspend: SuspendSignal | None = None
    error_type: str | None = None  # the exception behind an error result, for its span


def unanswered_calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    """Calls of the last assistant message that have no result yet, in call order."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            return [c for c in message.tool_calls if c.tool_call_id not in answered]
        for part in message.tool_results:
            answered.add(part.tool_call_id)
    return []


def error_result(call: ToolCallPart, message: str) -> ToolResultPart:
    """An error result the model reads in place of the tool's output."""
    return trusted(
        ToolResultPart,
        type="tool-result",
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        result=message,
        is_error=True,
        ran_with=None,
    )


def tool_message(results: list[ToolResultPart]) -> ModelMessage:
    """One tool-role message carrying results, stamped with the tool origin."""
    # Results are records already (a tool's value was made JSON where it ran): only the wrapper is new.
    return trusted(ModelMessage, role="tool", parts=list(results), origin=TOOL_ORIGIN, model=None, boundary=False)


async def _run_one(tool: Tool, call: ToolCallPart, args: dict[str, Any], ctx: ToolContext) -> CallOutcome:
    """One call inside its ``execute_tool`` span (``repertory.tracing``)."""
    with tool_span(tool.name, call.tool_call_id, args) as span:
        outcome = await _invoke(tool, call, args, ctx)
        span.outcome(outcome.result, outcome.error_type, outcome.suspend is not None)
    return outcome


async def _invoke(tool: Tool, call: ToolCallPart, args: dict[str, Any], ctx: ToolContext) -> CallOutcome:
    try:
        value = await tool.invoke(args, ctx)
    except SuspendSignal as signal:
        note = "suspended: waiting for input" + (f" ({signal.reason})" if signal.reason else "")
        # Kept without its traceback: from Python 3.12 on a finished frame keeps its caller's, so the
        # traceback would reach ``_run_one``'s frame, which holds this outcome: a cycle per suspension.
        return CallOutcome(
            ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, result=note),
            signal.with_traceback(None),
        )
    except ToolError as exc:
        return CallOutcome(error_result(call, exc.message), error_type=type(exc).__name__)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool's failure is the model's to handle, never the run's
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return CallOutcome(
            error_result(call, f"tool {call.tool_name!r} failed: {detail}"), error_type=type(exc).__name__
        )
    if type(tool).invoke is not Tool.invoke:  # another invoke (MCP, a user's subclass) is input: validated
        return CallOutcome(ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, result=value))
    # ``Tool.invoke`` made ``value`` JSON (``to_jsonable_python``) and the ids are the validated call's:
    # validating the part again re-walked the whole result on every tool call.
    return CallOutcome(
        trusted(
            ToolResultPart,
            type="tool-result",
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            result=value,
            is_error=False,
            ran_with=None,  # every field given: no default resolved per call
        )
    )


async def run_calls(jobs: list[tuple[Tool, ToolCallPart, dict[str, Any], ToolContext]]) -> list[CallOutcome]:
    """Run calls concurrently; outcomes come back in the order of ``jobs`` (call order)."""
    if len(jobs) == 1:
        return [await _run_one(*jobs[0])]
    return list(await asyncio.gather(*(_run_one(*job) for job in jobs)))
