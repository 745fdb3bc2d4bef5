"""``AnthropicModel``: the ``Model`` protocol over Anthropic's native Messages API, through the official SDK.

Native rather than Anthropic's OpenAI-compatible layer, which Anthropic itself calls unfit for
production: that layer has no prompt caching and returns no thinking. Here replies stream (text
and thinking reach listeners as they are written), thinking blocks are stored with their
signatures so a tool turn replays as the API demands, prompt caching is on by default and its
read and write token counts land in ``Usage``, and the price table charges cached input its own
rates. As with every adapter, the engine only sees the final ``ModelResponse``: a request that
fails half-way leaves nothing in the history.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Literal

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "repertory.models.AnthropicModel needs the anthropic SDK: pip install 'repertory[anthropic]'"
    ) from exc

from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.errors import ModelError
from repertory.models._anthropic_stream import EventAssembler
from repertory.models._anthropic_wire import (
    OUTPUT_TOOL,
    add_cache_breakpoints,
    model_family,
    output_tool,
    to_anthropic_messages,
    to_anthropic_tools,
)
from repertory.models._retry import backoff, retry_after, retryable_status
from repertory.models._stream import MalformedReply
from repertory.models.pricing import ModelPrice, cost_of, price_for

__all__ = ["ERROR_STATUS", "AnthropicModel", "OutputMode"]

NO_KEY = "not-needed"
"""Sent as the API key to a server given by ``base_url`` when no key is configured (the SDK insists on one)."""

OutputMode = Literal["json_schema", "tool"]

ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each documented error type stands for: an ``error`` event inside a stream that
answered 200 says only its type, and the retry policy speaks statuses."""

_FINISHED = frozenset({"end_turn", "tool_use", "stop_sequence"})
_COUNTED = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config"})
"""What the count_tokens endpoint takes of a request body."""


class AnthropicModel:
    """A Claude model over the Messages API: ``AnthropicModel("claude-sonnet-4-5")``.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``; with a
    ``base_url`` and no key a placeholder key is sent. ``max_tokens`` bounds each reply (the API
    requires it; ``settings.max_tokens`` overrides it per request). ``thinking_budget`` turns on
    extended thinking with that many tokens (at least 1024, less than ``max_tokens``); left ``None``
    no ``thinking`` parameter is sent, so the model's default applies (newer models think adaptively
    by default, and ``settings.extra={"thinking": {...}}`` sends any other setting). Thinking is
    streamed as ``reasoning.delta`` and stored as ``ReasoningPart``s with their signatures.

    ``cache=True`` puts prompt-cache breakpoints on the tool list, the instructions and the end of
    the conversation, so each step reads the previous step's prefix from the cache; the usage says
    what was read (``cache_read_tokens``) and written (``cache_write_tokens``), and ``pricing`` (a
    ``ModelPrice``, or a name-to-price mapping consulted before ``pricing.PRICES``) charges each its rate.

    An agent's ``output_type`` is asked for as a JSON schema (``output_mode="json_schema"``, the
    API's structured outputs), or through a tool the model must call (``output_mode="tool"``, for
    models without structured outputs; the API refuses it together with thinking).

    A reply cut off by ``max_tokens``, a refusal, or a conversation past the context window is a
    ``ModelError`` that says so (``stop_reason`` in its details). Failed requests (429, 529
    overloaded, 408, 409, 5xx, connection errors, timeouts, and an ``error`` event before the
    stream showed anything) are retried at most ``max_retries`` times, after exponential backoff
    with jitter from ``retry_delay`` up to ``max_retry_delay`` seconds, or the server's
    ``retry-after``; one longer than ``max_retry_after`` is not waited for. A stream that breaks
    after it showed text is not retried. ``timeout`` bounds each wait on the server in seconds.
    ``client`` supplies a configured ``anthropic.AsyncAnthropic`` (not closed by this model).
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        cache: bool = True,
        pricing: ModelPrice | Mapping[str, ModelPrice] | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        *,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
        max_retry_after: float = 60.0,
        output_mode: OutputMode = "json_schema",
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must name a model")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if thinking_budget is not None and not 1024 <= thinking_budget < max_tokens:
            raise ValueError(
                f"thinking_budget must be at least 1024 and less than max_tokens={max_tokens}, got {thinking_budget}"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if retry_delay < 0 or max_retry_delay < 0 or max_retry_after < 0:
            raise ValueError("retry delays must be >= 0")
        if output_mode not in ("json_schema", "tool"):
            raise ValueError(f"output_mode must be 'json_schema' or 'tool', not {output_mode!r}")
        self.model = model
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or (NO_KEY if self.base_url else None)
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.cache = cache
        self.pricing: dict[str, ModelPrice] = (
            {model: pricing} if isinstance(pricing, ModelPrice) else dict(pricing or {})
        )
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_retry_after = max_retry_after
        self.output_mode: OutputMode = output_mode
        self._given_client = client
        self._client: anthropic.AsyncAnthropic | None = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._served: set[str] = {model_family(model)}
        # Waiting between retries goes through here, so tests can see the delays without waiting them.
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"AnthropicModel({self.model!r}{where})"

    # -- the Model protocol -----------------------------------------------------------------------

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Send one streamed Messages request; yield its deltas, then one ``ModelResponse``."""
        params = self.request_body(messages, tools, settings)
        structured = settings.output_schema is not None and self.output_mode == "tool"
        client = self._get_client()
        attempts = self.max_retries + 1
        attempt = 0
        while True:
            stream, attempt = await self._open(client, params, attempt, attempts)
            assembler = EventAssembler(OUTPUT_TOOL if structured else None)
            shown = False
            wait: float | None = None
            try:
                events = aiter(stream)
                while True:
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                    except anthropic.APIStatusError as exc:  # an `error` event inside the stream
                        kind, what = _error_of(exc)
                        status = ERROR_STATUS.get(kind, 500)
                        if shown or not retryable_status(status):
                            raise self._failure(
                                f"the server reported {kind} in the stream: {what}", status, attempt + 1
                            ) from exc
                        wait = self._retry_wait(status, None, f"{kind} in the stream: {what}", attempt, attempts)
                        break
                    except Exception as exc:
                        raise self._stream_failure(exc, attempt + 1) from exc
                    for delta in assembler.feed(event):
                        shown = True
                        yield delta
            except MalformedReply as exc:
                raise self._failure(str(exc), None, attempt + 1) from None
            finally:
                await stream.close()
            if wait is not None:
                await self._sleep(wait)
                attempt += 1
                continue
            break
        try:
            message = assembler.message(self.model)
        except MalformedReply as exc:
            raise self._failure(str(exc), None, attempt + 1) from None
        self._check_stop(assembler.stop_reason, params["max_tokens"], attempt + 1)
        if assembler.served_by:
            self._served.add(model_family(assembler.served_by))
        usage = assembler.usage()
        names = [self.model] + ([assembler.served_by] if assembler.served_by else [])
        yield ModelResponse(message=message, usage=usage, cost=cost_of(price_for(names, self.pricing), usage))

    async def count_tokens(self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings) -> int:
        """The input tokens this request would cost, from the API's ``count_tokens`` endpoint.

        The same system, tools, messages and thinking setting as ``request`` would send; what the
        prompt cache would serve is counted too (a count, not a bill).
        """
        body = self.request_body(messages, tools, settings)
        params = {k: v for k, v in body.items() if k in _COUNTED}
        extra = {k: v for k, v in settings.extra.items() if k in _COUNTED}
        if extra:  # e.g. a thinking setting given through settings.extra; sampling settings count nothing
            params["extra_body"] = extra
        client = self._get_client()
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                counted = await client.messages.count_tokens(**params)
            except anthropic.APIStatusError as exc:
                _, what = _error_of(exc)
                wait = self._retry_wait(exc.status_code, exc.response.headers, what, attempt, attempts)
            except anthropic.APIConnectionError as exc:
                wait = self._connection_wait(exc, attempt, attempts)
            except anthropic.AnthropicError as exc:
                raise self._failure(f"counting tokens failed: {exc}", None, attempt + 1) from exc
            else:
                n = getattr(counted, "input_tokens", None)
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise self._failure(f"malformed token count from the server: {n!r}", None, attempt + 1)
                return n
            await self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def request_body(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this request (the JSON body, mostly)."""
        system, turns = to_anthropic_messages(messages, self._signed_by_us)
        wire_tools = to_anthropic_tools(tools)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "messages": turns,
            "stream": True,
        }
        schema = settings.output_schema
        if schema is not None and self.output_mode == "tool":
            if self.thinking_budget is not None:
                raise ModelError(
                    f"model {self.model!r}: output_mode='tool' forces a tool call, which the API refuses "
                    "with thinking on; use output_mode='json_schema'",
                    model=self.model,
                )
            if any(t.name == OUTPUT_TOOL for t in tools):
                raise ModelError(f"model {self.model!r}: a tool is named {OUTPUT_TOOL!r}, the structured-reply tool")
            wire_tools.append(output_tool(schema))
            # With other tools the model may still call them first; "any" makes it end with a tool call.
            params["tool_choice"] = {"type": "any"} if tools else {"type": "tool", "name": OUTPUT_TOOL}
        elif schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": _strict(schema)}}
        if self.cache:
            add_cache_breakpoints(system, wire_tools, turns)
        if system:
            params["system"] = system
        if wire_tools:
            params["tools"] = wire_tools
        if self.thinking_budget is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        # Through the body, not as keywords: newer SDKs dropped the sampling keywords (newer models
        # refuse non-default sampling), and the body reaches the API whatever the SDK version.
        extra: dict[str, Any] = {} if settings.temperature is None else {"temperature": settings.temperature}
        extra.update(settings.extra)
        if extra:
            params["extra_body"] = extra
        return params

    def _signed_by_us(self, name: str | None) -> bool:
        """Whether reasoning signed for a message written by ``name`` may go back to this model.

        Signatures bind thinking to the model that wrote it; a message from before models were
        recorded (``None``) is taken to be ours.
        """
        return name is None or model_family(name) in self._served

    def _check_stop(self, reason: str | None, max_tokens: int, attempts: int) -> None:
        if reason in _FINISHED:
            return
        if reason == "max_tokens":
            what = f"the reply reached max_tokens={max_tokens} before it was finished; raise max_tokens"
        elif reason == "refusal":
            what = "the model refused to answer (stop_reason 'refusal')"
        elif reason == "model_context_window_exceeded":
            what = "the conversation no longer fits the model's context window"
        elif reason == "pause_turn":
            what = "the server paused a long-running turn (pause_turn); this adapter runs no server tools"
        elif reason is None:
            what = "the stream ended without a stop_reason"
        else:
            what = f"the reply stopped for a reason this adapter does not know: {reason!r}"
        raise ModelError(
            f"model {self.model!r}: {what}", model=self.model, status_code=None, attempts=attempts, stop_reason=reason
        )

    # -- transport --------------------------------------------------------------------------------

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if self._given_client is not None:
            return self._given_client
        if self._api_key is None:
            raise ModelError(
                f"no API key for model {self.model!r}: pass api_key=, set ANTHROPIC_API_KEY, "
                "or give a base_url for a server that needs none",
                model=self.model,
            )
        loop = asyncio.get_running_loop()
        # An HTTP connection pool belongs to the event loop it was opened on; a model shared across
        # loops (one asyncio.run() after another) gets a fresh client on each.
        if self._client is None or self._client_loop is None or self._client_loop() is not loop:
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
            self._client_loop = weakref.ref(loop)
        return self._client

    async def _open(
        self, client: anthropic.AsyncAnthropic, params: dict[str, Any], attempt: int, attempts: int
    ) -> tuple[Any, int]:
        """Open the stream (the SDK raises here for an error status), retrying what may succeed next time.

        Returns the stream and the attempt it opened on, so retries inside the stream count against
        the same ``max_retries``.
        """
        while True:
            try:
                return await client.messages.create(**params), attempt
            except anthropic.APIStatusError as exc:
                _, what = _error_of(exc)
                wait = self._retry_wait(exc.status_code, exc.response.headers, what, attempt, attempts)
            except anthropic.APIConnectionError as exc:
                wait = self._connection_wait(exc, attempt, attempts)
            except anthropic.AnthropicError as exc:  # anything else the SDK raises before a reply: not retryable
                raise self._failure(f"the request failed: {exc}", None, attempt + 1) from exc
            await self._sleep(wait)
            attempt += 1

    def _retry_wait(
        self, status: int, headers: Mapping[str, str] | None, what: str, attempt: int, attempts: int
    ) -> float:
        """How long to wait before the next attempt, or the ``ModelError`` that ends the request."""
        if not retryable_status(status):
            raise self._failure(f"the server refused the request ({status}): {what}", status, attempt + 1)
        wait = retry_after(headers)
        if wait is not None and wait > self.max_retry_after:
            raise self._failure(
                f"the server answered {status} and asked to wait {wait:.0f} s, more than "
                f"max_retry_after={self.max_retry_after:.0f} s: {what}",
                status,
                attempt + 1,
            )
        if attempt + 1 >= attempts:
            raise self._failure(f"the server answered {status} to all {attempts} attempts: {what}", status, attempts)
        return wait if wait is not None else backoff(attempt, self.retry_delay, self.max_retry_delay)

    def _connection_wait(self, exc: anthropic.APIConnectionError, attempt: int, attempts: int) -> float:
        if attempt + 1 >= attempts:
            if isinstance(exc, anthropic.APITimeoutError):
                raise self._failure(f"no answer within timeout={self.timeout} s, {attempts} attempts", None, attempts)
            raise self._failure(f"could not reach the server ({exc.message}), {attempts} attempts", None, attempts)
        return backoff(attempt, self.retry_delay, self.max_retry_delay)

    def _failure(self, what: str, status: int | None, attempts: int) -> ModelError:
        return ModelError(f"model {self.model!r}: {what}", model=self.model, status_code=status, attempts=attempts)

    def _stream_failure(self, exc: Exception, attempts: int) -> ModelError:
        if isinstance(exc, anthropic.APITimeoutError) or "Timeout" in type(exc).__name__:
            what = f"the stream stalled for more than timeout={self.timeout} s"
        elif isinstance(exc, ValueError):  # json.JSONDecodeError included
            what = f"malformed event in the stream: {exc}"
        else:
            cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ else exc
            what = f"the stream broke off: {type(cause).__name__}: {cause}"
        return self._failure(what, None, attempts)

    # -- lifecycle --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client this model opened (not one it was given)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _error_of(exc: anthropic.APIStatusError) -> tuple[str, str]:
    """The error's type and message from its body (``{"type": "error", "error": {"type", "message"}}``)."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind, message = error.get("type"), error.get("message")
        return (kind if isinstance(kind, str) else "error"), (message if isinstance(message, str) else exc.message)
    return "error", exc.message


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as structured outputs accept it (``additionalProperties: false`` on objects...).

    The SDK's own transform does it; a schema it cannot transform goes as it is, and the engine's
    validation of the reply still stands.
    """
    try:
        return anthropic.transform_schema(schema)
    except (ValueError, TypeError):
        return schema
