"""Tools: ``@tool`` turns a function into something the model can call, safely.

Arguments are validated by pydantic from the function's signature, so a model's malformed call
becomes an error result it can read and correct, not a crash. A tool is run at most once per call
unless it says it is ``idempotent``: after a crash the engine re-runs only those.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, cast, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, create_model
from pydantic_core import to_jsonable_python

from repertory.core.model import ToolSpec
from repertory.core.state import Delegation
from repertory.errors import SuspendSignal, ToolError

if TYPE_CHECKING:
    from repertory.runtime.services import SessionServices

__all__ = ["Tool", "ToolContext", "suspend", "tool"]


@dataclass
class ToolContext:
    """What a running tool may know about its call: ids, the approval payload and the run's scratch.

    ``scratch`` is the run's own JSON bag: changes made here are persisted with the next checkpoint.
    ``services`` is the session tree where a runtime hosts the session (``None`` in a bare
    ``Session``); ``delegation`` holds the child session and turn ids committed with this call,
    for a tool that delegates (``Tool.delegates_to``). ``detaching()`` is true once the host is
    letting go of the run (shutting down) rather than cancelling it: a tool cancelled then leaves
    the work it started elsewhere alone, because the run is driven again at the next start.
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


def suspend(reason: str | None = None, payload: Any = None) -> NoReturn:
    """Pause the run from inside a tool; the resume value arrives later as a user message."""
    raise SuspendSignal(reason=reason, payload=payload)


class Tool:
    """A callable the model may invoke, with its argument model and durability flags.

    ``delegates_to`` names the agent of the child session a call of this tool runs a turn in
    (``repertory.agent_tool`` sets it; ``None`` for every other tool). The step loop treats such a
    call as a side effect whatever ``idempotent`` says: it mints the child's ids, commits them with
    the call before the tool runs, and after a crash runs the call again with the same ids.
    """

    delegates_to: str | None = None

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        idempotent: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = (description if description is not None else inspect.getdoc(fn) or "").strip()
        self.requires_approval = requires_approval
        self.idempotent = idempotent
        self.is_async = inspect.iscoroutinefunction(fn)
        self._ctx_param, self.args_model = _args_model(fn, self.name)

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


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function (sync or async) a tool; use bare or with options.

    ``requires_approval`` pauses the run for a human decision before the tool runs; ``idempotent``
    allows a re-run after a crash (otherwise an interrupted call gets an "outcome unknown" result).
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, requires_approval=requires_approval, idempotent=idempotent)

    return wrap(fn) if fn is not None else wrap
