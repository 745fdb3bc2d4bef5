"""``OpenAIChatModel``: the ``Model`` protocol over any server that speaks OpenAI's chat completions API.

That is OpenAI itself and the servers that copy its API: vLLM, Ollama, llama.cpp's server,
LiteLLM, OpenRouter. It streams by default, so text and reasoning reach listeners as they are
written; the engine only ever sees the final ``ModelResponse``, so a request that fails half-way
leaves nothing behind in the history: it is a ``ModelError``, and the run's error checkpoint says so.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

from repertory._extras import require
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.core.state import Usage
from repertory.errors import ModelError
from repertory.models._convert import response_format, to_openai_messages, to_openai_tools
from repertory.models._retry import backoff, retry_after, retryable_status
from repertory.models._stream import MalformedReply, MessageAssembler
from repertory.models.pricing import ModelPrice, cost_of, price_for

require("repertory.models", "openai")

import openai  # noqa: E402

__all__ = ["OpenAIChatModel"]

NO_KEY = "not-needed"
"""Sent as the API key to a self-hosted server when none is configured: the SDK insists on one,
and vLLM, Ollama or llama.cpp ignore it unless they were started with a key."""


class OpenAIChatModel:
    """A chat completions model: ``OpenAIChatModel("gpt-4o-mini")`` or any model of a compatible server.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; with a
    ``base_url`` and no key, a placeholder key is sent (local servers need none). ``pricing`` is a
    ``ModelPrice`` for this model, or a name-to-price mapping consulted before ``pricing.PRICES``.
    ``timeout`` bounds each wait on the server in seconds (connecting, and the gap between two
    streamed chunks), so a stalled server is a ``ModelError``, never a hang.

    Failed requests (429, 408, 409, 5xx, connection errors, timeouts) are retried at most
    ``max_retries`` times, after exponential backoff with jitter from ``retry_delay`` up to
    ``max_retry_delay`` seconds, or after the server's ``Retry-After`` when it gives one; a
    ``Retry-After`` longer than ``max_retry_after`` is not waited for (it means a spent quota, not
    a blip). A stream that breaks after it started is not retried: its deltas were already shown.

    ``structured_output`` sends ``settings.output_schema`` (set when an agent has an
    ``output_type``) as a ``json_schema`` response format; turn it off for servers that reject it,
    and the engine's validation feedback still steers the model to valid JSON. ``stream=False``
    asks for whole replies, for servers that stream tool calls badly; ``stream_usage=False`` drops
    ``stream_options`` for servers that reject it (usage is then whatever the server volunteers).
    ``settings.extra`` is merged into the request body (``top_p``, ``seed``, ``reasoning_effort``...).
    ``client`` supplies a configured ``openai.AsyncOpenAI`` (Azure, proxies); the model does not
    close a client it was given. ``retry_sleep`` is what the wait before a retry awaits (a test gives
    one that records the delays instead of waiting them).

    Each reply records the model name the server answered with (``ModelMessage.model``); usage
    counts cached prompt tokens as ``cache_read_tokens``. There is no ``count_tokens``: the chat
    completions API has no counting endpoint, servers that copy it tokenize differently, and a
    character estimate is not a count (callers that need one estimate for themselves).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        pricing: ModelPrice | Mapping[str, ModelPrice] | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        *,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
        max_retry_after: float = 60.0,
        structured_output: bool = True,
        stream: bool = True,
        stream_usage: bool = True,
        client: openai.AsyncOpenAI | None = None,
        retry_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not model:
            raise ValueError("model must name a model")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if retry_delay < 0 or max_retry_delay < 0 or max_retry_after < 0:
            raise ValueError("retry delays must be >= 0")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or (NO_KEY if self.base_url else None)
        self.pricing: dict[str, ModelPrice] = (
            {model: pricing} if isinstance(pricing, ModelPrice) else dict(pricing or {})
        )
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_retry_after = max_retry_after
        self.structured_output = structured_output
        self.stream = stream
        self.stream_usage = stream_usage
        self._given_client = client
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._sleep = retry_sleep

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIChatModel({self.model!r}{where})"

    # -- the Model protocol -----------------------------------------------------------------------

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Send one chat completions request; yield its deltas, then one ``ModelResponse``."""
        params = self.request_body(messages, tools, settings)
        reply = await self._send(params)
        assembler = MessageAssembler()
        try:
            if not self.stream:
                for event in assembler.feed_completion(reply):
                    yield event
            else:
                try:
                    chunks = aiter(reply)
                    while True:
                        try:
                            chunk = await anext(chunks)
                        except StopAsyncIteration:
                            break
                        except Exception as exc:
                            raise self._stream_failure(exc) from exc
                        for event in assembler.feed(chunk):
                            yield event
                finally:
                    await reply.close()
            message = assembler.message().model_copy(update={"model": assembler.served_by or self.model})
        except MalformedReply as exc:
            raise self._failure(str(exc), None, 1) from None
        usage = assembler.usage or Usage(requests=1)
        names = [self.model] + ([assembler.served_by] if assembler.served_by else [])
        cost = cost_of(price_for(names, self.pricing), usage)
        yield ModelResponse(message=message, usage=usage, cost=cost)

    def request_body(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this request (the JSON body, mostly)."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            "stream": self.stream,
        }
        if tools:
            params["tools"] = to_openai_tools(tools)
        if self.stream and self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            params["max_tokens"] = settings.max_tokens
        if settings.output_schema is not None and self.structured_output:
            params["response_format"] = response_format(settings.output_schema)
        if settings.extra:
            params["extra_body"] = dict(settings.extra)
        return params

    # -- transport --------------------------------------------------------------------------------

    @property
    def client(self) -> openai.AsyncOpenAI | None:
        """The SDK client requests go through: the one given, else the one made for the last loop used.

        ``None`` before the first request. A connection pool belongs to the event loop it was
        opened on, so a request from another loop makes a new client.
        """
        return self._given_client if self._given_client is not None else self._client

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._given_client is not None:
            return self._given_client
        if self._api_key is None:
            raise ModelError(
                f"no API key for model {self.model!r}: pass api_key=, set OPENAI_API_KEY, "
                "or give a base_url for a server that needs none"
            )
        loop = asyncio.get_running_loop()
        # An HTTP connection pool belongs to the event loop it was opened on; a model shared across
        # loops (one asyncio.run() after another) gets a fresh client on each.
        if self._client is None or self._client_loop is None or self._client_loop() is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
            self._client_loop = weakref.ref(loop)
        return self._client

    async def _send(self, params: dict[str, Any]) -> Any:
        """Open the request, retrying what may succeed next time; the last failure is a ``ModelError``."""
        client = self._get_client()
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                return await client.chat.completions.create(**params)
            except openai.APIStatusError as exc:
                status = exc.status_code
                wait = retry_after(exc.response.headers)
                if not retryable_status(status):
                    raise self._failure(
                        f"the server refused the request ({status}): {exc.message}", status, attempt + 1
                    ) from exc
                if wait is not None and wait > self.max_retry_after:
                    raise self._failure(
                        f"the server answered {status} and asked to wait {wait:.0f} s, more than "
                        f"max_retry_after={self.max_retry_after:.0f} s: {exc.message}",
                        status,
                        attempt + 1,
                    ) from exc
                if attempt + 1 == attempts:
                    raise self._failure(
                        f"the server answered {status} to all {attempts} attempts: {exc.message}", status, attempts
                    ) from exc
            except openai.APITimeoutError as exc:
                wait = None
                if attempt + 1 == attempts:
                    raise self._failure(
                        f"no answer within timeout={self.timeout} s, {attempts} attempts", None, attempts
                    ) from exc
            except openai.APIConnectionError as exc:
                wait = None
                if attempt + 1 == attempts:
                    raise self._failure(
                        f"could not reach the server ({exc.message}), {attempts} attempts", None, attempts
                    ) from exc
            except openai.OpenAIError as exc:  # anything else the SDK raises before a reply: not retryable
                raise self._failure(f"the request failed: {exc}", None, attempt + 1) from exc
            await self._sleep(wait if wait is not None else backoff(attempt, self.retry_delay, self.max_retry_delay))
        raise AssertionError("unreachable")  # pragma: no cover

    def _failure(self, what: str, status: int | None, attempts: int) -> ModelError:
        return ModelError(f"model {self.model!r}: {what}", model=self.model, status_code=status, attempts=attempts)

    def _stream_failure(self, exc: Exception) -> ModelError:
        if isinstance(exc, openai.APITimeoutError) or "Timeout" in type(exc).__name__:
            what = f"the stream stalled for more than timeout={self.timeout} s"
        elif isinstance(exc, ValueError):  # json.JSONDecodeError included
            what = f"malformed chunk in the stream: {exc}"
        elif isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            what = f"the server reported an error in the stream: {exc.message}"
        else:
            cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
            what = f"the stream broke off: {type(cause).__name__}: {cause}"
        return self._failure(what, None, 1)

    # -- lifecycle --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client this model opened (not one it was given)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
