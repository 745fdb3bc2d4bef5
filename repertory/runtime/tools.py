"""Tools: ``@tool`` turns a function into something the model can call, safely.

Arguments are validated by pydantic from the function's signature, so a model's malformed call
becomes an error result it can read and correct, not a crash. A tool is run at most once per call
unless it says it is ``idempotent``: after a crash the engine re-runs only those.

Tools may also come from a ``ToolSource`` (an MCP server, for one): the agent lists its tools when
they are first needed, so the engine never imports what provides them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast, get_type_hints, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, create_model
from pydantic_core import to_jsonable_python

from repertory.core.model import ToolSpec
from repertory.core.state import Delegation, RunState
from repertory.errors import SleepSignal, SuspendSignal, ToolError

if TYPE_CHECKING:
    from repertory.runtime.services import SessionServices

__all__ = ["ApprovalPolicy", "Tool", "ToolContext", "ToolSource", "abandon_calls", "sleep", "suspend", "tool"]

ApprovalPolicy = bool | Callable[[dict[str, Any]], bool]
"""``requires_approval``: always (``True``), never (``False``), or decided per call from its arguments."""

_log = logging.getLogger(__name__)


@dataclass
class ToolContext:
    """What a running tool may know about its call: ids, the approval payload and the run's scratch.

    ``scratch`` is the run's own JSON bag: changes made here are persisted with the next checkpoint.
    ``services`` is the session tree where a runtime hosts the session (``None`` in a bare
    ``Session``); ``delegation`` holds the child session and turn ids committed with this call,
    for a tool that delegates (``Tool.delegates_to``). ``detaching()`` is true once the host is
    letting go of the run (shutting down) rather than cancelling it: a tool cancelled then leaves
    the work it started elsewhere alone, because the run is driven again at the next start.
    ``answer`` is the value the run was resumed with when this call asked with
    ``suspend(rerun=True)`` and now runs again (``None`` otherwise).
    """

    call_id: str
    tool_name: str
    run_id: str
    thread_id: str
    approval: Any = None
    scratch: dict[str, JsonValue] = field(default_factory=dict)
    services: SessionServices | None = None
    delegation: Delegation | None = None
    detaching: Callable[[], bool] = field(default=lambda: False)
    answer: JsonValue | None = None  # the value a ``suspend(rerun=True)`` of this call was resumed with


def suspend(reason: str | None = None, payload: Any = None, *, rerun: bool = False) -> NoReturn:
    """Pause the run from inside a tool; the resume value arrives later as a user message.

    With ``rerun`` the call has no result yet: once the run is resumed, the same call runs again
    with the resume value as ``ctx.answer`` (a tool that relays a question and must deliver its
    answer itself, such as a remote agent's). Its result is then the call's result.
    """
    raise SuspendSignal(reason=reason, payload=payload, rerun=rerun)


def sleep(seconds: float | None = None, until_ms: int | None = None) -> NoReturn:
    """Suspend the run on a durable timer: for ``seconds``, or until the epoch-millisecond ``until_ms``.

    The run suspends with ``SuspendReason(kind="timer", wake_at=...)`` and the runtime wakes it once
    at that time, also after a restart (an overdue timer fires at start). The call's result, which
    the model reads, says when it woke. A human may wake it early with ``resume(token, value)``.
    Give exactly one argument; a bad one raises ``ValueError`` (the model reads it as the tool's
    error). Inside a bare ``Session`` nothing wakes the run but ``Session.wake`` or ``resume``.
    """
    if (seconds is None) == (until_ms is None):
        raise ValueError("sleep() takes exactly one of seconds= or until_ms=")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise ValueError(f"sleep(seconds=...) needs a finite number, not {seconds!r}")
        if seconds < 0:
            raise ValueError(f"sleep(seconds=...) cannot be negative, got {seconds!r}")
    elif isinstance(until_ms, bool) or not isinstance(until_ms, int) or until_ms < 0:
        raise ValueError(f"sleep(until_ms=...) needs epoch milliseconds (an int >= 0), not {until_ms!r}")
    raise SleepSignal(seconds=seconds, until_ms=until_ms)


class Tool:
    """A callable the model may invoke, with its argument model and durability flags.

    ``delegates_to`` names the agent of the child session a call of this tool runs a turn in
    (``repertory.agent_tool`` sets it; ``None`` for every other tool). The step loop treats such a
    call as a side effect whatever ``idempotent`` says: it mints the child's ids, commits them with
    the call before the tool runs, and after a crash runs the call again with the same ids.

    ``reattaches`` marks a tool whose side effect lives elsewhere and can be found again from the
    call's ids (``run_id``, ``call_id``): its call is committed before it runs, as a side effect
    is, and after a crash it runs again (never "outcome unknown"), to find and follow the work its
    first attempt started instead of starting it twice (``repertory.a2a``'s remote tasks).
    """

    delegates_to: str | None = None
    reattaches: bool = False

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: ApprovalPolicy = False,
        idempotent: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = (description if description is not None else inspect.getdoc(fn) or "").strip()
        self.requires_approval = requires_approval
        self.idempotent = idempotent
        self.is_async = inspect.iscoroutinefunction(fn)
        self._ctx_param, self.args_model = _args_model(fn, self.name)

    async def abandon(self, run_id: str, call_id: str, scratch: Mapping[str, JsonValue]) -> None:
        """The run suspended on this call (``suspend()``) was cancelled: let go of what the call holds elsewhere.

        Called once the cancel is committed, with the run's scratch as it was suspended; a failure
        is logged, never raised (the run is cancelled whatever the remote says). The default holds
        nothing; ``repertory.a2a``'s tool cancels the remote task that was waiting for an answer.
        """
        return None

    def needs_approval(self, args: dict[str, Any]) -> bool:
        """Whether this call waits for a human: the flag, or the policy's verdict on these arguments.

        A policy that raises asks (it fails closed): a call nobody could clear is put to a human,
        who may still reject it, rather than run unasked.
        """
        policy = self.requires_approval
        if not callable(policy):
            return bool(policy)
        try:
            return bool(policy(dict(args)))
        except Exception:
            _log.warning("the approval policy of tool %r raised; the call is put to a human", self.name, exc_info=True)
            return True

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate raw arguments; raises ``ToolError`` with pydantic's explanation."""
        try:
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for tool {self.name!r}: {exc}") from None
        return {k: getattr(model, k) for k in type(model).model_fields}

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> JsonValue:
        """Validate and run the tool; the result is converted to JSON. Sync tools run in a thread."""
        kwargs = self.validate(args)
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        if self.is_async:
            result = await self.fn(**kwargs)
        else:
            result = await asyncio.to_thread(self.fn, **kwargs)
        return cast(JsonValue, to_jsonable_python(result))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in tests)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flags = [f for f, on in (("approval", self.requires_approval), ("idempotent", self.idempotent)) if on]
        return f"Tool({self.name!r}{', ' + ', '.join(flags) if flags else ''})"


def _args_model(fn: Callable[..., Any], name: str) -> tuple[str | None, type[BaseModel]]:
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = {}
    ctx_param: str | None = None
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        annotation = hints.get(pname, param.annotation)
        if annotation is ToolContext or (annotation is inspect.Parameter.empty and pname == "ctx"):
            ctx_param = pname
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be described to a model")
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, default)
    model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return ctx_param, cast(type[BaseModel], model)


@runtime_checkable
class ToolSource(Protocol):
    """Something in an agent's ``tools`` that contributes several tools, listed when first needed.

    ``repertory.mcp.MCPServer`` is one. The agent calls ``list_tools()`` before each drive and each
    model request, so a source answers from its own cache and returns the *same* sequence object
    while its listing has not changed (the agent then skips rebuilding its tools). ``aclose()``
    releases what the source holds open (a connection, a child process); the next ``list_tools()``
    may open it again. ``name`` names the source in errors (a clash of tool names, for one).
    """

    name: str

    async def list_tools(self) -> Sequence[Tool]:
        """The tools this source offers now."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds open."""
        ...


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: ApprovalPolicy = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: ApprovalPolicy = False,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function (sync or async) a tool; use bare or with options.

    ``requires_approval`` pauses the run for a human decision before the tool runs: ``True``, or a
    callable that gets the call's arguments (a dict) and decides for that call alone; ``idempotent``
    allows a re-run after a crash (otherwise an interrupted call gets an "outcome unknown" result).
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, requires_approval=requires_approval, idempotent=idempotent)

    return wrap(fn) if fn is not None else wrap


async def abandon_calls(tools: Mapping[str, Tool], run: RunState) -> None:
    """Tell each tool a suspended ``run`` was waiting on that the run is cancelled (``Tool.abandon``)."""
    for pending in run.pending:
        found = tools.get(pending.tool_name)
        if found is None or pending.kind != "suspend":
            continue
        try:
            await found.abandon(run.run_id, pending.tool_call_id, run.scratch)
        except Exception:
            _log.warning("tool %r could not let go of call %s", found.name, pending.tool_call_id, exc_info=True)
