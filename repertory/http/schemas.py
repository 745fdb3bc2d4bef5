"""Request bodies, as ``langgraph-sdk`` sends them, validated before anything runs.

Fields the LangGraph API defines and repertory does not serve (delayed runs,
``interrupt_before``, supersteps, TTLs) are declared, so a request that uses one is answered 422
with a sentence saying so instead of being half-obeyed. Unknown fields are ignored, as the
LangGraph server does, so a newer client keeps working. Strings with lone surrogates (valid JSON
escapes, but not text any store can hold) are refused here, not by the database.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from repertory.http.convert import input_text
from repertory.http.errors import HttpError
from repertory.http.gateway import check_new_thread_id
from repertory.http.webhooks import check_webhook_url

__all__ = [
    "END",
    "STREAM_MODES",
    "AssistantSearch",
    "Command",
    "HistoryQuery",
    "RunCreate",
    "StateAtCheckpoint",
    "StreamMode",
    "ThreadCount",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadPrune",
    "ThreadSearch",
    "normalize_stream_modes",
]

StreamMode = Literal["values", "updates", "messages", "messages-tuple", "custom"]
STREAM_MODES: tuple[str, ...] = ("values", "updates", "messages", "messages-tuple", "custom")
_LANGGRAPH_ONLY_MODES = ("debug", "events", "tasks", "checkpoints", "tools", "lifecycle")
ThreadStatusFilter = Literal["idle", "busy", "interrupted", "error"]
Metadata = dict[str, JsonValue]
END = "__end__"
"""LangGraph's end node: ``command.goto`` to it ends a waiting run (see ``Command``)."""


def _check_text(value: Any, path: str = "body") -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{path} holds a lone surrogate, which is not text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, path)
            _check_text(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_text(item, f"{path}[{i}]")


class _Body(BaseModel):
    """Common rules: unknown fields ignored, text must be encodable."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        _check_text(data)
        return data


def normalize_stream_modes(value: str | list[str] | None) -> tuple[str, ...]:
    """Stream modes as a tuple without repeats; an unsupported one is a ``ValueError`` naming it."""
    raw = [value] if isinstance(value, str) else list(value or [])
    modes: list[str] = []
    for mode in raw:
        if not mode:
            continue
        if mode in _LANGGRAPH_ONLY_MODES:
            supported = ", ".join(STREAM_MODES)
            raise ValueError(f"stream_mode {mode!r} is not supported by repertory (supported: {supported})")
        if mode not in STREAM_MODES:
            raise ValueError(f"unknown stream_mode {mode!r} (supported: {', '.join(STREAM_MODES)})")
        if mode not in modes:
            modes.append(mode)
    return tuple(modes)


class ThreadCreate(_Body):
    """``POST /threads``: the assistant comes from ``metadata.graph_id`` (or ``assistant_id``), else the default."""

    thread_id: str | None = None
    metadata: Metadata | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[JsonValue] | None = None
    ttl: JsonValue | None = None

    @field_validator("thread_id")
    @classmethod
    def _safe_id(cls, value: str | None) -> str | None:
        # A safe alphabet (``gateway.check_new_thread_id``); whether the id is free, or one of the
        # server's, the gateway answers, in one sentence for both.
        return None if value is None else check_new_thread_id(value)

    @model_validator(mode="after")
    def _served(self) -> ThreadCreate:
        if self.supersteps:
            raise ValueError("supersteps (replaying another deployment's state) are not supported by repertory")
        if self.ttl is not None:
            raise ValueError("thread TTLs are not supported by repertory: sessions are kept until deleted")
        return self


class ThreadSearch(_Body):
    """``POST /threads/search``: metadata and values match by containment, status exactly."""

    metadata: Metadata | None = None
    values: Metadata | None = None
    ids: list[str] | None = Field(None, max_length=1000)
    status: ThreadStatusFilter | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None
    extract: JsonValue | None = None

    @model_validator(mode="after")
    def _served(self) -> ThreadSearch:
        if self.extract:
            raise ValueError("extract is not supported by repertory; use select")
        return self


class ThreadPatch(_Body):
    """``PATCH /threads/{thread_id}``: metadata merged into the thread's (LangGraph's rule)."""

    metadata: Metadata | None = None
    ttl: JsonValue | None = None

    @model_validator(mode="after")
    def _served(self) -> ThreadPatch:
        if self.ttl is not None:
            raise ValueError("thread TTLs are not supported by repertory: use repertory retention --idle-days")
        return self


class ThreadCount(_Body):
    """``POST /threads/count``: how many threads a search with these filters finds."""

    metadata: Metadata | None = None
    values: Metadata | None = None
    status: ThreadStatusFilter | None = None


class ThreadPrune(_Body):
    """``POST /threads/prune``: delete threads by id (the ``delete`` strategy; ``keep_latest`` is not served)."""

    thread_ids: list[str] = Field(max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"

    @model_validator(mode="after")
    def _served(self) -> ThreadPrune:
        if self.strategy != "delete":
            raise ValueError("prune strategy 'keep_latest' is not supported: history is immutable, nothing is pruned")
        return self


class StateAtCheckpoint(_Body):
    """``POST /threads/{thread_id}/state/checkpoint``: the state at one checkpoint."""

    checkpoint: dict[str, JsonValue]
    subgraphs: bool | None = None

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint's id (422 when the body names none)."""
        found = self.checkpoint.get("checkpoint_id")
        if not isinstance(found, str) or not found:
            raise HttpError("checkpoint.checkpoint_id is required", status=422)
        return found


class HistoryQuery(_Body):
    """``POST /threads/{thread_id}/history``: states newest first, optionally before a checkpoint."""

    limit: int = Field(10, ge=1, le=1000)
    before: str | dict[str, JsonValue] | None = None
    metadata: Metadata | None = None
    checkpoint: dict[str, JsonValue] | None = None
    select: list[str] | None = None


class AssistantSearch(_Body):
    """``POST /assistants/search``."""

    metadata: Metadata | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class Command(_Body):
    """A run's ``command``: ``resume`` answers the thread's interrupt; ``goto: "__end__"`` ends the waiting run.

    ``goto`` to LangGraph's end node (agent-chat-ui's "Mark as Resolved") means: the run waiting
    for a human ends now, without the model running again. It is cancelled (its pending calls get
    error results saying so, its token dies) and the thread is idle; the run's status reads
    ``interrupted``, as every cancelled run's does. Any other node is LangGraph's graph routing,
    which an agent does not have (422), and so is ``update``.
    """

    resume: JsonValue = None
    update: JsonValue = None
    goto: JsonValue = None

    @model_validator(mode="after")
    def _served(self) -> Command:
        if self.update is not None:
            raise ValueError("command.update is not supported by repertory: use command.resume")
        if self.goto is not None:
            if self.goto not in (END, [END]):
                raise ValueError(
                    f"command.goto may only be {END!r} (end the waiting run): an agent has no graph nodes to route to"
                )
            if "resume" in self.model_fields_set:
                raise ValueError("give command.resume or command.goto, not both")
        elif "resume" not in self.model_fields_set:
            raise ValueError("command needs resume: the value, or the decisions, that answer the interrupt")
        return self

    @property
    def ends(self) -> bool:
        """Whether this command ends the waiting run (``goto: "__end__"``)."""
        return self.goto is not None


class RunCreate(_Body):
    """A run on a thread (or a stateless one): one human message as ``input``, or a ``command``."""

    assistant_id: str = Field(min_length=1, max_length=256)
    input: JsonValue = None
    command: Command | None = None
    metadata: Metadata | None = None
    config: dict[str, JsonValue] | None = None
    context: dict[str, JsonValue] | None = None
    checkpoint: dict[str, JsonValue] | None = None
    checkpoint_id: str | None = None
    checkpoint_during: bool | None = None
    interrupt_before: JsonValue = None
    interrupt_after: JsonValue = None
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    feedback_keys: list[str] | None = None
    webhook: str | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: float | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    strict_resume: bool | None = None
    langsmith_tracer: JsonValue = None

    @model_validator(mode="after")
    def _served(self) -> RunCreate:
        if self.command is not None and self.input in ({}, {"messages": []}):
            # agent-chat-ui and LangGraph's JS client send ``input: {}`` beside every command:
            # an empty input is no input.
            self.input = None
        if self.command is not None and self.input is not None:
            raise ValueError("give input or command, not both")
        if self.command is None and self.input is None and self.checkpoint_revision is None:
            raise ValueError(
                "a run needs input ({'messages': [...]}), command ({'resume': ...}), or a checkpoint to regenerate from"
            )
        if self.interrupt_before or self.interrupt_after:
            raise ValueError(
                "interrupt_before/interrupt_after are not supported: tools that need a human use "
                "@tool(requires_approval=True) or suspend()"
            )
        if self.webhook:
            check_webhook_url(self.webhook)  # repertory.http.webhooks POSTs the run's end there
        if self.after_seconds:
            raise ValueError("delayed runs (after_seconds) are not supported by repertory")
        if self.feedback_keys:
            raise ValueError("feedback_keys (LangSmith feedback) are not supported by repertory")
        if self.on_completion == "delete":
            raise ValueError("on_completion='delete' is not supported: repertory keeps every session")
        normalize_stream_modes(self.stream_mode)
        if self.command is None and self.input is not None:
            try:
                input_text(self.input)  # refused before a stateless run creates its thread
            except HttpError as exc:
                raise ValueError(str(exc)) from None
        return self

    @property
    def modes(self) -> tuple[str, ...]:
        """The requested stream modes (``values`` when none is named)."""
        return normalize_stream_modes(self.stream_mode) or ("values",)

    @property
    def checkpoint_revision(self) -> str | None:
        """The checkpoint the run starts from, if it named one (``checkpoint_id`` or ``checkpoint.checkpoint_id``)."""
        if self.checkpoint_id:
            return self.checkpoint_id
        value = (self.checkpoint or {}).get("checkpoint_id")
        return value if isinstance(value, str) and value else None
