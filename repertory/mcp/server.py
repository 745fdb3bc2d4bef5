"""``MCPServer``: the tools of a Model Context Protocol server, as tools of an agent.

Put one in an agent's ``tools`` and all its tools join the agent's when they are first needed::

    files = MCPServer.stdio("python", ["-m", "my_server"], name="files", approval="destructive")
    web = MCPServer.http("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."}, name="web")
    agent = Agent(name="a", model=model, tools=[lookup, files, web])

An ``MCPServer`` is configuration: it pickles (an agent carrying it travels to Ray hosts) and holds
no connection. The connection is per process (per event loop), shared by every session and every
``MCPServer`` naming the same command or URL, started on first use, reconnected after the server
went away, and closed by ``aclose()`` (a ``Runtime`` closes its agents' servers when it closes).

Two policies turn MCP's tool annotations into the engine's rules (the annotations are hints a
server gives about itself: trust them as far as you trust the server):

- ``approval``: ``"never"``, ``"always"``, ``"destructive"`` (asked unless the tool says
  ``readOnlyHint: true`` or ``destructiveHint: false``; a tool with no annotations is asked, as
  the MCP defaults are ``readOnlyHint: false`` and ``destructiveHint: true``), a collection of
  tool names, or a callable ``(tool_name, args) -> bool`` decided per call;
- ``idempotent``: ``None`` (from the annotations: ``readOnlyHint`` or ``idempotentHint`` true),
  ``True``, ``False``, or a collection of tool names. A non-idempotent call is committed before it
  is sent and, after a crash, gets an "outcome unknown" result instead of a second call; an
  idempotent one is sent again.

Tool names in a collection may be the server's names or the prefixed ones; the callable gets
the server's name. ``include`` keeps only the named tools (server names); ``prefix`` is put before
every name the model sees.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import mcp_types

from repertory.mcp._connection import Connection, close_loop_connections, connection_for
from repertory.mcp._transport import HttpTransport, StdioTransport, Transport
from repertory.mcp.tool import MCPTool
from repertory.runtime.tools import ApprovalPolicy

__all__ = ["ApprovalSetting", "IdempotentSetting", "MCPServer"]

ApprovalSetting = Literal["never", "always", "destructive"] | Collection[str] | Callable[[str, dict[str, Any]], bool]
"""Which calls wait for a human: see the module docstring."""

IdempotentSetting = bool | Collection[str] | None
"""Which tools may be called again after a crash: see the module docstring."""

_APPROVAL_WORDS = ("never", "always", "destructive")


class MCPServer:
    """An MCP server whose tools an agent may call; build one with ``MCPServer.stdio`` or ``MCPServer.http``.

    ``timeout`` bounds each ``tools/call`` (the call is then cancelled and the model reads an error
    result); ``connect_timeout`` bounds starting the server and listing its tools.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str | None = None,
        approval: ApprovalSetting = "never",
        idempotent: IdempotentSetting = None,
        include: Collection[str] | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeout and connect_timeout must be > 0 seconds")
        self.transport = transport
        self.name = name or transport.default_name()
        self.approval = _checked_approval(approval)
        self.idempotent = _checked_idempotent(idempotent)
        self.include = None if include is None else frozenset(_names("include", include))
        self.prefix = prefix or ""
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self._built: tuple[list[mcp_types.Tool], list[MCPTool]] | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        approval: ApprovalSetting = "never",
        idempotent: IdempotentSetting = None,
        include: Collection[str] | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
    ) -> MCPServer:
        """A server this process starts as a child (``command args``) and talks to over stdio.

        ``env`` is added to the small environment the MCP SDK gives every server (``HOME``,
        ``PATH``, ``USER``...), not to this process's whole environment; ``cwd`` is its directory.
        """
        if isinstance(args, str):
            raise TypeError("args is a list of arguments, not one string")
        transport = StdioTransport(
            command=command,
            args=tuple(args),
            env=None if env is None else tuple(sorted(env.items())),
            cwd=None if cwd is None else str(cwd),
        )
        return cls(
            transport,
            name=name,
            approval=approval,
            idempotent=idempotent,
            include=include,
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        approval: ApprovalSetting = "never",
        idempotent: IdempotentSetting = None,
        include: Collection[str] | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
    ) -> MCPServer:
        """A server at a streamable-HTTP endpoint; ``headers`` are sent with every request."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"an MCP server URL starts with http:// or https://, not {url!r}")
        transport = HttpTransport(url=url, headers=tuple(sorted((headers or {}).items())))
        return cls(
            transport,
            name=name,
            approval=approval,
            idempotent=idempotent,
            include=include,
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    # -- the ToolSource protocol ------------------------------------------------------------------------

    def connection(self) -> Connection:
        """This process's connection to the server (shared; connected on first use)."""
        return connection_for(self.transport, f"MCP server {self.name!r}")

    async def list_tools(self) -> list[MCPTool]:
        """The server's tools after ``include`` and ``prefix``, with this server's policies applied.

        Connects on first use (``ToolError`` naming the command and its stderr tail if the server
        cannot start); later calls answer from the connection's cached listing, returning the same
        list object until the server's list changes.
        """
        remote = await self.connection().list_tools(self.connect_timeout)
        built = self._built
        if built is not None and built[0] is remote:
            return built[1]
        tools = [self._tool(t) for t in remote if self.include is None or t.name in self.include]
        self._built = (remote, tools)
        return tools

    async def aclose(self) -> None:
        """Close this process's connection to the server (the child is stopped); it reopens on next use."""
        await close_loop_connections(self.transport)

    async def __aenter__(self) -> MCPServer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- policies ---------------------------------------------------------------------------------------

    def _tool(self, remote: mcp_types.Tool) -> MCPTool:
        name = self.prefix + remote.name
        return MCPTool(
            self,
            remote,
            name=name,
            requires_approval=self._approval_for(remote, name),
            idempotent=self._idempotent_for(remote, name),
        )

    def _approval_for(self, remote: mcp_types.Tool, name: str) -> ApprovalPolicy:
        policy = self.approval
        if policy == "never":
            return False
        if policy == "always":
            return True
        if policy == "destructive":
            hints = remote.annotations
            harmless = hints is not None and (hints.read_only_hint is True or hints.destructive_hint is False)
            return not harmless
        if callable(policy):
            return functools.partial(_ask, policy, remote.name)
        assert isinstance(policy, frozenset)
        return remote.name in policy or name in policy

    def _idempotent_for(self, remote: mcp_types.Tool, name: str) -> bool:
        setting = self.idempotent
        if setting is None:
            hints = remote.annotations
            return hints is not None and (hints.read_only_hint is True or hints.idempotent_hint is True)
        if isinstance(setting, bool):
            return setting
        return remote.name in setting or name in setting

    # -- configuration that pickles ------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_built"] = None  # tools built for one process's listing
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {self.transport!r})"


def _ask(policy: Callable[[str, dict[str, Any]], bool], tool_name: str, args: dict[str, Any]) -> bool:
    """A server's approval callable, asked about one call of one of its tools."""
    return bool(policy(tool_name, args))


def _names(what: str, value: Collection[str]) -> list[str]:
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must be a collection of tool names (strings)")
    return names


def _checked_approval(value: Any) -> Any:
    if isinstance(value, str):
        if value not in _APPROVAL_WORDS:
            raise ValueError(
                f"approval must be 'never', 'always', 'destructive', a collection of tool names or a callable, "
                f"not {value!r}"
            )
        return value
    if callable(value):
        return value
    if isinstance(value, bool):
        return "always" if value else "never"
    if isinstance(value, Collection):
        return frozenset(_names("approval", value))
    raise TypeError(f"approval must be a word, a collection of tool names or a callable, not {type(value).__name__}")


def _checked_idempotent(value: Any) -> bool | frozenset[str] | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        raise TypeError("idempotent is None, True, False or a collection of tool names, not one string")
    if isinstance(value, Collection):
        return frozenset(_names("idempotent", value))
    raise TypeError(f"idempotent must be None, a bool or a collection of tool names, not {type(value).__name__}")
