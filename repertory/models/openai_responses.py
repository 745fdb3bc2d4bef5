"""``OpenAIResponsesModel``: the ``Model`` protocol over OpenAI's Responses API, through the official SDK.

Responses is OpenAI's current API: reasoning models return reasoning items that must come back
with the next request (encrypted, when responses are not stored) or the model loses its reasoning
between tool calls; cached and reasoning tokens are reported; and a ``background`` response runs
server-side, numbering its events, so a client that lost it can read it again from where it was.

With ``background=True`` that is what a crash costs nothing with: the adapter says where its
response can be found (a ``ModelCall`` with the response id once it exists, and the sequence
number after each delta), the session commits the first before reading on and keeps the last with
the stored deltas, and a run recovered in any process re-attaches (``GET /responses/{id}`` streamed
from ``starting_after``) instead of asking again: one generation per model step, whatever crashed.
A cancelled run cancels the response (``cancel_call``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar

from repertory._extras import require
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelCall, ModelEvent, ModelResponse, ModelSettings, StreamRestart, ToolSpec
from repertory.errors import ModelError
from repertory.models._responses_stream import Finished, ResponseAssembler
from repertory.models._responses_wire import text_format, to_responses_input, to_responses_tools
from repertory.models._retry import backoff, retry_after, retryable_status
from repertory.models._stream import MalformedReply
from repertory.models.pricing import ModelPrice, cost_of, price_for

require("repertory.models", "openai")

import openai  # noqa: E402

__all__ = ["OpenAIResponsesModel", "ReasoningEffort"]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ReasoningSummary = Literal["auto", "concise", "detailed"]

NO_KEY = "not-needed"
"""Sent as the API key to a server given by ``base_url`` when no key is configured (the SDK insists on one)."""

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_COUNTED = frozenset({"model", "input", "tools", "text", "reasoning"})
"""What the input-tokens endpoint takes of a request body."""
_log = logging.getLogger("repertory.models")
_T = TypeVar("_T")


def _family(name: str) -> str:
    """A model name without its date: ``gpt-5-2025-08-07`` answers for ``gpt-5``."""
    return _DATED.sub("", name.removeprefix("openai/"))


class OpenAIResponsesModel:
    """A Responses API model: ``OpenAIResponsesModel("gpt-5")``, or ``infer_model("openai-responses:gpt-5")``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; with a
    ``base_url`` and no key a placeholder key is sent. ``reasoning_effort`` asks a reasoning model
    for that effort, with reasoning summaries (``reasoning_summary``, streamed as reasoning deltas
    and stored as ``ReasoningPart``s). Reasoning items are stored with their encrypted content and
    sent back in place: responses are not stored by OpenAI (``store=False``) unless ``background``
    asks for it (a background response is stored, or it could not be read again).

    ``background=True`` creates each response in the background and re-attaches to it after a
    crash (see the module's docstring); a stream that breaks mid-way is re-attached too, within
    ``max_retries``, instead of asking again. ``pricing`` is a ``ModelPrice`` for this model or a
    name-to-price mapping consulted before ``pricing.PRICES``; cached input is charged its rate,
    and reasoning tokens are output (they are counted and billed so). ``max_output_tokens`` bounds
    a reply unless ``settings.max_tokens`` does; ``settings.output_schema`` is asked for as a
    ``json_schema`` text format (``structured_output=False`` for servers without it);
    ``settings.extra`` is merged into the body.

    A refusal, a reply cut off (``incomplete``: ``max_output_tokens``, a content filter), a failed
    or cancelled response and an ``error`` event are ``ModelError``s whose ``stop_reason`` says
    which. Failed requests (429, 408, 409, 5xx, connection errors, timeouts) are retried at most
    ``max_retries`` times after exponential backoff with jitter (``retry_delay`` up to
    ``max_retry_delay`` seconds) or the server's ``Retry-After``, unless that is longer than
    ``max_retry_after``; a stream that broke after it showed text is not asked again. ``timeout``
    bounds each wait on the server in seconds. ``client`` supplies a configured
    ``openai.AsyncOpenAI`` (not closed by this model); ``retry_sleep`` is what a wait before a
    retry awaits. ``count_tokens`` asks the API's input-tokens endpoint.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        background: bool = False,
        reasoning_effort: ReasoningEffort | None = None,
        pricing: ModelPrice | Mapping[str, ModelPrice] | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        *,
        reasoning_summary: ReasoningSummary | None = "auto",
        max_output_tokens: int | None = None,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
        max_retry_after: float = 60.0,
        structured_output: bool = True,
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
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or (NO_KEY if self.base_url else None)
        self.background = background
        self.store = background  # a background response must be stored: it is read again from the store
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.max_output_tokens = max_output_tokens
        self.pricing: dict[str, ModelPrice] = (
            {model: pricing} if isinstance(pricing, ModelPrice) else dict(pricing or {})
        )
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_retry_after = max_retry_after
        self.structured_output = structured_output
        self._given_client = client
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._served: set[str] = {_family(model)}
        self._sleep = retry_sleep

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIResponsesModel({self.model!r}{where}{', background=True' if self.background else ''})"

    # -- the Model protocol -----------------------------------------------------------------------

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Stream one response (or re-attach to ``settings.attach``'s); yield its deltas, then a ``ModelResponse``."""
        params = self.request_body(messages, tools, settings)
        client = self._get_client()
        attempts, attempt = self.max_retries + 1, 0
        assembler = ResponseAssembler()
        stream: Any = None
        at = _position(settings.attach)
        if at is not None:
            stream, attempt = await self._retrieve(client, at, attempt, attempts)
            if stream is None:  # expired, or never was: ask again, and what was shown is no reply
                yield StreamRestart(reason=f"background response {at[0]} can no longer be read")
            else:
                assembler = ResponseAssembler(*at)
        # A re-attached response was announced by the drive that created it.
        announced = resumable = stream is not None
        if stream is None:
            stream, attempt = await self._call(lambda: client.responses.create(**params), attempt, attempts)
            resumable = self.background
        while True:
            broke: Exception | None = None
            try:
                events = aiter(stream)
                while assembler.finished is None:
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        broke = exc
                        break
                    delta = assembler.feed(event)
                    if resumable and not announced and assembler.response_id is not None:
                        announced = True
                        yield ModelCall(state=self._state(assembler))  # committed before the reply is read on
                    if delta is not None:
                        yield delta
                        if resumable:
                            yield ModelCall(state=self._state(assembler))  # covers the delta just yielded
            except MalformedReply as exc:
                raise self._failure(str(exc), None, attempt + 1) from None
            finally:
                await stream.close()
            if assembler.finished is not None:
                break
            failure = self._stream_failure(broke, attempt + 1)
            if not resumable or assembler.response_id is None or attempt + 1 >= attempts or _fatal(broke):
                raise failure from broke
            # A background response goes on server-side: read on from the last event seen, never ask again.
            await self._sleep(backoff(attempt, self.retry_delay, self.max_retry_delay))
            position = (assembler.response_id, assembler.sequence or 0)
            reopened, attempt = await self._retrieve(client, position, attempt + 1, attempts)
            if reopened is None:
                raise failure from broke
            stream = reopened
        yield self._response(assembler.finished, params, attempt + 1)

    def _response(self, finished: Finished, params: dict[str, Any], attempts: int) -> ModelResponse:
        """The ``ModelResponse`` of a finished response, or the ``ModelError`` that says why it is none."""
        if finished.status == "completed" and finished.reason != "refusal" and finished.message is not None:
            if finished.served_by:
                self._served.add(_family(finished.served_by))
            names = [self.model] + ([finished.served_by] if finished.served_by else [])
            cost = cost_of(price_for(names, self.pricing), finished.usage)
            return ModelResponse(message=finished.message, usage=finished.usage, cost=cost)
        reason, detail = finished.reason, finished.detail
        if reason == "refusal":
            what = f"the model refused to answer: {detail}"
        elif finished.status == "incomplete" and reason == "max_output_tokens":
            bound = params.get("max_output_tokens")
            what = f"the reply reached max_output_tokens={bound} before it was finished; raise it"
        elif finished.status == "incomplete" and reason == "content_filter":
            what = "a content filter stopped the reply"
        elif finished.status == "incomplete":
            what = f"the reply is incomplete ({reason or 'no reason given'})"
        elif finished.status == "failed":
            what = f"the response failed ({reason or 'no code'}): {detail or 'no message'}"
        elif finished.status == "error":
            what = f"the server reported an error in the stream ({reason or 'no code'}): {detail}"
        else:
            what = f"the response ended {finished.status!r}, not completed"
        stop = reason if finished.status in ("incomplete", "completed") else finished.status
        raise ModelError(
            f"model {self.model!r}: {what}",
            model=self.model,
            status_code=None,
            attempts=attempts,
            stop_reason=stop,
            code=reason if finished.status in ("failed", "error") else None,
        )

    @staticmethod
    def _state(assembler: ResponseAssembler) -> dict[str, Any]:
        return {"response_id": assembler.response_id, "sequence_number": assembler.sequence or 0}

    async def cancel_call(self, state: dict[str, Any]) -> None:
        """Cancel the background response ``state`` names (best effort: a failure is logged, not raised)."""
        response_id = state.get("response_id")
        if not isinstance(response_id, str) or not response_id:
            return
        try:
            await self._get_client().responses.cancel(response_id)
        except (openai.OpenAIError, ModelError) as exc:
            _log.warning("cancelling background response %s of model %r failed: %s", response_id, self.model, exc)

    async def count_tokens(self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings) -> int:
        """The input tokens this request would cost, from the API's input-tokens endpoint."""
        body = self.request_body(messages, tools, settings)
        params = {k: v for k, v in body.items() if k in _COUNTED}
        client = self._get_client()
        counted, attempt = await self._call(
            lambda: client.responses.input_tokens.count(**params), 0, self.max_retries + 1
        )
        n = getattr(counted, "input_tokens", None)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise self._failure(f"malformed token count from the server: {n!r}", None, attempt + 1)
        return n

    def request_body(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``responses.create`` for this request (the JSON body, mostly)."""
        params: dict[str, Any] = {
            "model": self.model,
            "input": to_responses_input(messages, self._ours, stored=self.store),
            "stream": True,
            "store": self.store,
        }
        if not self.store:  # the only way reasoning survives to the next request
            params["include"] = ["reasoning.encrypted_content"]
        if self.background:
            params["background"] = True
        if tools:
            params["tools"] = to_responses_tools(tools)
        if self.reasoning_effort is not None:
            reasoning: dict[str, Any] = {"effort": self.reasoning_effort}
            if self.reasoning_summary is not None:
                reasoning["summary"] = self.reasoning_summary
            params["reasoning"] = reasoning
        bound = settings.max_tokens or self.max_output_tokens
        if bound is not None:
            params["max_output_tokens"] = bound
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.output_schema is not None and self.structured_output:
            params["text"] = text_format(settings.output_schema)
        if settings.extra:
            params["extra_body"] = dict(settings.extra)
        return params

    def _ours(self, name: str | None) -> bool:
        """Whether reasoning in a message ``name`` wrote may go back (``None``: written before models were named)."""
        return name is None or _family(name) in self._served

    # -- transport --------------------------------------------------------------------------------

    @property
    def client(self) -> openai.AsyncOpenAI | None:
        """The SDK client requests go through: the one given, else the one made for the last loop used."""
        return self._given_client if self._given_client is not None else self._client

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._given_client is not None:
            return self._given_client
        if self._api_key is None:
            raise ModelError(
                f"no API key for model {self.model!r}: pass api_key=, set OPENAI_API_KEY, "
                "or give a base_url for a server that needs none",
                model=self.model,
            )
        loop = asyncio.get_running_loop()
        # A connection pool belongs to the event loop it was opened on: another loop gets a fresh client.
        if self._client is None or self._client_loop is None or self._client_loop() is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
            self._client_loop = weakref.ref(loop)
        return self._client

    async def _retrieve(
        self, client: openai.AsyncOpenAI, at: tuple[str, int], attempt: int, attempts: int
    ) -> tuple[Any | None, int]:
        """The stream of background response ``at[0]`` after event ``at[1]``; ``None`` if the server lost it."""
        response_id, after = at

        async def read() -> Any | None:
            try:
                return await client.responses.retrieve(response_id, stream=True, starting_after=after)
            except openai.NotFoundError:
                return None

        return await self._call(read, attempt, attempts)

    async def _call(self, send: Callable[[], Awaitable[_T]], attempt: int, attempts: int) -> tuple[_T, int]:
        """``send()``, retried while the failure may pass; returns its result and the attempt it succeeded on."""
        while True:
            try:
                return await send(), attempt
            except openai.APIStatusError as exc:
                wait = self._retry_wait(exc, attempt, attempts)
            except openai.APIConnectionError as exc:
                if attempt + 1 >= attempts:
                    if isinstance(exc, openai.APITimeoutError):
                        raise self._failure(
                            f"no answer within timeout={self.timeout} s, {attempts} attempts", None, attempts
                        ) from exc
                    raise self._failure(
                        f"could not reach the server ({exc.message}), {attempts} attempts", None, attempts
                    ) from exc
                wait = backoff(attempt, self.retry_delay, self.max_retry_delay)
            except openai.OpenAIError as exc:  # anything else the SDK raises before a reply: not retryable
                raise self._failure(f"the request failed: {exc}", None, attempt + 1) from exc
            await self._sleep(wait)
            attempt += 1

    def _retry_wait(self, exc: openai.APIStatusError, attempt: int, attempts: int) -> float:
        """How long to wait before the next attempt, or the ``ModelError`` that ends the request."""
        status = exc.status_code
        if not retryable_status(status):
            raise self._failure(f"the server refused the request ({status}): {exc.message}", status, attempt + 1)
        wait = retry_after(exc.response.headers)
        if wait is not None and wait > self.max_retry_after:
            raise self._failure(
                f"the server answered {status} and asked to wait {wait:.0f} s, more than "
                f"max_retry_after={self.max_retry_after:.0f} s: {exc.message}",
                status,
                attempt + 1,
            )
        if attempt + 1 >= attempts:
            raise self._failure(
                f"the server answered {status} to all {attempts} attempts: {exc.message}", status, attempts
            )
        return wait if wait is not None else backoff(attempt, self.retry_delay, self.max_retry_delay)

    def _failure(self, what: str, status: int | None, attempts: int) -> ModelError:
        return ModelError(f"model {self.model!r}: {what}", model=self.model, status_code=status, attempts=attempts)

    def _stream_failure(self, exc: Exception | None, attempts: int) -> ModelError:
        if exc is None:
            what = "the stream ended before the model finished its reply"
        elif isinstance(exc, openai.APITimeoutError) or "Timeout" in type(exc).__name__:
            what = f"the stream stalled for more than timeout={self.timeout} s"
        elif isinstance(exc, ValueError):  # json.JSONDecodeError included
            what = f"malformed event in the stream: {exc}"
        elif isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            what = f"the server reported an error in the stream: {exc.message}"
        else:
            cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
            what = f"the stream broke off: {type(cause).__name__}: {cause}"
        return self._failure(what, None, attempts)

    # -- lifecycle --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client this model opened (not one it was given)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIResponsesModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _position(attach: dict[str, Any] | None) -> tuple[str, int] | None:
    """The response id and sequence number a ``ModelCall`` state holds, if it is one of ours."""
    if attach is None:
        return None
    response_id, seq = attach.get("response_id"), attach.get("sequence_number")
    if not isinstance(response_id, str) or not response_id:
        return None
    return response_id, seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else 0


def _fatal(exc: Exception | None) -> bool:
    """A stream failure reading again would not mend: the server sent something malformed or an error frame."""
    if exc is None:
        return False
    if isinstance(exc, ValueError):
        return True
    return isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError)
