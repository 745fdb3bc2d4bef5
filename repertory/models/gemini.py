"""``GeminiModel``: the ``Model`` protocol over Google's Gemini API, through the official ``google-genai`` SDK.

Native rather than Gemini's OpenAI-compatible endpoint, which drops thought signatures (Gemini 3
refuses a function-call turn replayed without them) and cached-token counts. Here replies stream
(text and thought summaries reach listeners as they are written), each thought signature is kept
with the part that carried it and sent back with it, the usage says what the context cache served
and what thinking cost, and safety blocks and finish reasons other than a plain stop are typed
``ModelError``s. As with every adapter, the engine only sees the final ``ModelResponse``: a request
that fails half-way leaves nothing in the history.

With ``background=True`` a request is an interaction of Google's Interactions API run in background
mode instead: the server generates it whether or not anyone reads, and a reader that lost it reads
on after the last event it saw (``last_event_id``). The adapter says where its interaction can be
found (a ``ModelCall`` with the interaction id once it exists, and the last event id after each
delta); the session commits the first before reading on and keeps the last with the stored deltas,
so a run recovered in any process re-attaches instead of asking again: one generation per model
step, whatever crashed. A cancelled run cancels the interaction (``cancel_call``).

Why one module past 600 lines: it is one adapter class, whose two request paths (a streamed
``generate_content`` and a background interaction) share its client, its retries and its mapping of
the SDK's errors; the wire conversion, the stream's assembly and the interaction's live beside it
(``_gemini_wire``, ``_gemini_stream``, ``_gemini_interactions``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from repertory._extras import require
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelCall, ModelEvent, ModelResponse, ModelSettings, StreamRestart, ToolSpec
from repertory.errors import ModelError
from repertory.models._gemini_interactions import ANSWERED, InteractionAssembler, message_of, usage_of
from repertory.models._gemini_stream import ReplyAssembler
from repertory.models._gemini_wire import (
    to_gemini_contents,
    to_gemini_tools,
    to_interaction_input,
    to_interaction_tools,
)
from repertory.models._retry import backoff, retry_after, retryable_status
from repertory.models._stream import MalformedReply
from repertory.models.pricing import ModelPrice, cost_of, price_for

require("repertory.models.GeminiModel", "google")

from google import genai  # noqa: E402
from google.genai import _interactions as genai_interactions  # noqa: E402  (the SDK's own error surface for them)
from google.genai import errors as genai_errors  # noqa: E402
from google.genai import types as genai_types  # noqa: E402

__all__ = ["BLOCKED", "GeminiModel", "model_family"]

NO_KEY = "not-needed"
"""Sent as the API key to a server given by ``base_url`` when no key is configured (the SDK insists on one)."""

BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        "ESCALATION",
        "PUP_LIMITED_DISABLED",
    }
)
"""Finish reasons that mean a filter stopped the reply: the ``ModelError`` says which, and its categories."""

_FINISHED = frozenset({"STOP"})


def _transport_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """What a failed connection and a timeout raise, whichever HTTP client the SDK picked (httpx or httpx2)."""
    transport: list[type[Exception]] = [OSError]  # TimeoutError is one
    timeout: list[type[Exception]] = [TimeoutError]
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        transport.append(module.TransportError)
        timeout.append(module.TimeoutException)
    return tuple(transport), tuple(timeout)


_TRANSPORT, _TIMEOUT = _transport_errors()
_TIMEOUT = (*_TIMEOUT, genai_interactions.APITimeoutError)
_log = logging.getLogger("repertory.models")
_T = TypeVar("_T")
_VERSIONED = re.compile(r"(-\d{3}|-latest|-preview(-\d{2}-\d{4})?|-exp(-\d{4})?)$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


class GeminiModel:
    """A Gemini model over the Gemini API: ``GeminiModel("gemini-2.5-flash")``.

    ``api_key`` defaults to ``GOOGLE_API_KEY`` then ``GEMINI_API_KEY``, ``base_url`` to
    ``GOOGLE_GEMINI_BASE_URL`` (the SDK's own variable); with a ``base_url`` and no key a placeholder
    key is sent. ``thinking_budget`` caps thinking tokens (``0`` turns thinking off where the model
    allows it, ``-1`` lets the model decide) and ``thinking_level`` (``"low"``, ``"high"``...) is
    Gemini 3's coarser setting; left ``None`` the model's default applies. ``include_thoughts``
    asks for thought summaries, streamed as ``reasoning.delta`` and stored as ``ReasoningPart``s;
    turn it off for a model that does not think (the API refuses a thinking config there).

    Thought signatures are kept on the part that carried them and sent back only to the model that
    wrote them. Usage counts thought tokens as output (they are billed so) and the context cache's
    tokens as ``cache_read_tokens``; ``pricing`` (a ``ModelPrice``, or a name-to-price mapping
    consulted before ``pricing.PRICES``) charges each its rate. An agent's ``output_type`` is asked
    for as a JSON response schema. ``settings.extra`` is merged into the request's config
    (``top_p``, ``seed``, ``safety_settings``...: the SDK's ``GenerateContentConfig`` field names).

    A reply stopped by a safety or other filter, a prompt the API blocked, a reply cut by
    ``max_output_tokens``, and a malformed or unexpected function call are ``ModelError``s whose
    ``stop_reason`` is the finish reason (``blocked_categories`` lists the categories a filter
    named). Failed requests (429, 408, 409, 5xx, connection errors, timeouts, and an error in the
    stream before it showed anything) are retried at most ``max_retries`` times, after the delay the
    server advised (``Retry-After``, or the ``RetryInfo`` of a 429's body) or else exponential backoff
    with jitter from ``retry_delay`` up to ``max_retry_delay`` seconds; advice longer than
    ``max_retry_after`` is not waited for (it means a spent quota, not a blip). A stream that broke
    after it showed text is not retried. ``timeout`` bounds each wait on the server in seconds.
    ``client`` supplies a configured ``genai.Client`` (Vertex AI, proxies; not closed by this model).

    ``background=True`` sends each request as a background interaction (Interactions API, stored
    server-side) and re-attaches to it after a crash (see the module's docstring); a stream that
    breaks mid-way is read on from its last event too, within ``max_retries``, not asked again.
    That API takes ``thinking_level``, not ``thinking_budget`` (refused with ``background``);
    ``settings.extra`` goes into its ``generation_config`` (``top_p``, ``seed``, ``stop_sequences``).
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        thinking_budget: int | None = None,
        pricing: ModelPrice | Mapping[str, ModelPrice] | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        *,
        thinking_level: str | None = None,
        include_thoughts: bool = True,
        max_output_tokens: int | None = None,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
        max_retry_after: float = 60.0,
        client: genai.Client | None = None,
        background: bool = False,
    ) -> None:
        if not model:
            raise ValueError("model must name a model")
        if background and thinking_budget is not None:
            raise ValueError("the Interactions API (background=True) takes thinking_level, not thinking_budget")
        if thinking_budget is not None and thinking_budget < -1:
            raise ValueError(f"thinking_budget must be -1 (dynamic), 0 (off) or a token count, got {thinking_budget}")
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if retry_delay < 0 or max_retry_delay < 0 or max_retry_after < 0:
            raise ValueError("retry delays must be >= 0")
        self.model = model.removeprefix("models/")
        self.base_url = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
        self._api_key = (
            api_key
            or os.environ.get("GOOGLE_API_KEY")
            or os.environ.get("GEMINI_API_KEY")
            or (NO_KEY if self.base_url else None)
        )
        self.thinking_budget = thinking_budget
        self.thinking_level = thinking_level
        self.include_thoughts = include_thoughts
        self.max_output_tokens = max_output_tokens
        self.background = background
        self.pricing: dict[str, ModelPrice] = (
            {self.model: pricing} if isinstance(pricing, ModelPrice) else dict(pricing or {})
        )
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_retry_after = max_retry_after
        self._given_client = client
        self._client: genai.Client | None = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._served: set[str] = {model_family(self.model)}
        # Waiting between retries goes through here, so tests can see the delays without waiting them.
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"GeminiModel({self.model!r}{where}{', background=True' if self.background else ''})"

    # -- the Model protocol -----------------------------------------------------------------------

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Send one streamed ``generateContent`` request; yield its deltas, then one ``ModelResponse``.

        With ``background`` it is a background interaction instead, or the one ``settings.attach`` names.
        """
        if self.background:
            async for event in self._interaction(messages, tools, settings):
                yield event
            return
        body, options = self.request_body(messages, tools, settings)
        if not body:
            raise ModelError(f"model {self.model!r}: nothing to send: Gemini needs a user turn", model=self.model)
        try:
            contents = [genai_types.Content.model_validate(c) for c in body]
            config = genai_types.GenerateContentConfig.model_validate(options)
        except ValueError as exc:  # pydantic's verdict: a key of settings.extra the SDK does not know, say
            raise ModelError(f"model {self.model!r}: the SDK refused the request: {exc}", model=self.model) from exc
        models = self._get_client().aio.models
        attempts = self.max_retries + 1
        attempt = 0
        while True:
            assembler = ReplyAssembler()
            shown = False
            wait: float | None = None
            stream: AsyncIterator[genai_types.GenerateContentResponse] | None = None
            try:
                stream = await models.generate_content_stream(model=self.model, contents=contents, config=config)
                while True:
                    try:
                        chunk = await anext(stream)
                    except StopAsyncIteration:
                        break
                    except genai_errors.APIError as exc:  # an error status, or an error in the stream
                        if shown:
                            raise self._failure(
                                f"the server reported an error in the stream ({exc.code}): {_what(exc)}",
                                exc.code,
                                attempt + 1,
                            ) from exc
                        advised = _advised_wait(getattr(exc.response, "headers", None), exc.details)
                        wait = self._retry_wait(exc, exc.code, _what(exc), advised, attempt, attempts)
                        break
                    except _TRANSPORT as exc:
                        if shown:
                            raise self._stream_failure(exc, attempt + 1) from exc
                        wait = self._connection_wait(exc, attempt, attempts)
                        break
                    except Exception as exc:
                        raise self._stream_failure(exc, attempt + 1) from exc
                    for delta in assembler.feed(chunk):
                        shown = True
                        yield delta
            except MalformedReply as exc:
                raise self._failure(str(exc), None, attempt + 1) from None
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            if wait is None:
                break
            await self._sleep(wait)
            attempt += 1
        self._check_finish(assembler, attempt + 1)
        try:
            message = assembler.message(self.model)
        except MalformedReply as exc:
            raise self._failure(str(exc), None, attempt + 1) from None
        if assembler.served_by:
            self._served.add(model_family(assembler.served_by))
        usage = assembler.usage()
        names = [self.model] + ([assembler.served_by] if assembler.served_by else [])
        yield ModelResponse(message=message, usage=usage, cost=cost_of(price_for(names, self.pricing), usage))

    def request_body(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The ``contents`` and the ``config`` (a ``GenerateContentConfig`` as a dict) of this request."""
        system, contents = to_gemini_contents(messages, self._signed_by_us)
        # The engine runs the tools: the SDK must never call a function itself.
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if system is not None:
            config["system_instruction"] = system
        wire_tools = to_gemini_tools(tools)
        if wire_tools:
            config["tools"] = wire_tools
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        max_tokens = settings.max_tokens or self.max_output_tokens
        if max_tokens is not None:
            config["max_output_tokens"] = max_tokens
        if settings.output_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = settings.output_schema
        thinking: dict[str, Any] = {}
        if self.include_thoughts:
            thinking["include_thoughts"] = True
        if self.thinking_budget is not None:
            thinking["thinking_budget"] = self.thinking_budget
        if self.thinking_level is not None:
            thinking["thinking_level"] = self.thinking_level
        if thinking:
            config["thinking_config"] = thinking
        config.update(settings.extra)
        return contents, config

    def interaction_body(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``interactions.create`` for this request: a streamed background interaction."""
        system, steps = to_interaction_input(messages, self._signed_by_us)
        if not steps:
            raise ModelError(f"model {self.model!r}: nothing to send: Gemini needs a user turn", model=self.model)
        # Stored, or it could not be read again; streamed, so the reply shows as it is written.
        params: dict[str, Any] = {"model": self.model, "input": steps, "background": True, "store": True}
        params["stream"] = True
        if system is not None:
            params["system_instruction"] = system
        if tools:
            params["tools"] = to_interaction_tools(tools)
        generation: dict[str, Any] = {}
        if settings.temperature is not None:
            generation["temperature"] = settings.temperature
        max_tokens = settings.max_tokens or self.max_output_tokens
        if max_tokens is not None:
            generation["max_output_tokens"] = max_tokens
        if self.include_thoughts:
            generation["thinking_summaries"] = "auto"
        if self.thinking_level is not None:
            generation["thinking_level"] = self.thinking_level
        generation.update(settings.extra)
        if generation:
            params["generation_config"] = generation
        if settings.output_schema is not None:
            params["response_format"] = {
                "type": "text",
                "mime_type": "application/json",
                "schema": settings.output_schema,
            }
        return params

    async def _interaction(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Stream one background interaction (or read on in ``settings.attach``'s); deltas, then the response."""
        params = self.interaction_body(messages, tools, settings)
        interactions = self._get_client().aio.interactions
        attempts, attempt = self.max_retries + 1, 0
        assembler = InteractionAssembler()
        stream: Any = None
        at = _position(settings.attach)
        if at is not None:
            stream, attempt = await self._read_on(at, attempt, attempts)
            if stream is None:  # expired, or never was: ask again, and what was shown is no reply
                yield StreamRestart(reason=f"background interaction {at[0]} can no longer be read")
            else:
                assembler = InteractionAssembler(*at)
        announced = stream is not None  # a re-attached interaction was announced by the drive that created it
        if stream is None:
            stream, attempt = await self._send(lambda: interactions.create(**params), attempt, attempts)
        while True:
            broke: Exception | None = None
            try:
                events = aiter(stream)
                while assembler.ended is None:
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        broke = exc
                        break
                    delta = assembler.feed(event)
                    if not announced and assembler.interaction_id is not None:
                        announced = True
                        yield ModelCall(state=assembler.state())  # committed before the reply is read on
                    if delta is not None:
                        yield delta
                        yield ModelCall(state=assembler.state())  # covers the delta just yielded
            except MalformedReply as exc:
                raise self._failure(str(exc), None, attempt + 1) from None
            finally:
                await stream.close()
            if assembler.ended is not None:
                break
            failure = self._stream_failure(broke, attempt + 1)
            fatal = isinstance(broke, genai_interactions.APIError) and not isinstance(
                broke, genai_interactions.APIConnectionError
            )
            if assembler.interaction_id is None or attempt + 1 >= attempts or fatal:
                raise failure from broke
            # A background interaction goes on server-side: read on after the last event seen, never ask again.
            await self._sleep(backoff(attempt, self.retry_delay, self.max_retry_delay))
            position = (assembler.interaction_id, assembler.last_event_id)
            reopened, attempt = await self._read_on(position, attempt + 1, attempts)
            if reopened is None:
                raise failure from broke
            stream = reopened
        yield await self._interaction_response(assembler, attempt, attempts)

    async def _interaction_response(
        self, assembler: InteractionAssembler, attempt: int, attempts: int
    ) -> ModelResponse:
        """The ``ModelResponse`` of an ended interaction, or the ``ModelError`` that says why it is none."""
        ended = assembler.ended
        assert ended is not None and assembler.interaction_id is not None
        if ended.status not in ANSWERED:
            self._interaction_failed(ended.status, ended.code, ended.detail, attempt + 1)
        usage = assembler.usage()
        try:
            if assembler.whole:
                message = assembler.message(self.model)
            else:  # joined half-way: the first steps were streamed to a reader that died; the store has them all
                interaction_id = assembler.interaction_id
                interactions = self._get_client().aio.interactions
                stored, attempt = await self._send(lambda: interactions.get(interaction_id), attempt, attempts)
                message = message_of(stored, self.model)
                if not assembler.reported_usage:
                    usage = usage_of(getattr(stored, "usage", None))
        except MalformedReply as exc:
            raise self._failure(str(exc), None, attempt + 1) from None
        served = message.model if message.model != self.model else None
        if served:
            self._served.add(model_family(served))
        names = [self.model] + ([served] if served else [])
        return ModelResponse(message=message, usage=usage, cost=cost_of(price_for(names, self.pricing), usage))

    def _interaction_failed(self, status: str, code: str | None, detail: str | None, attempts: int) -> None:
        if status == "error":
            what = f"the server reported an error in the stream ({code or 'no code'}): {detail or 'no message'}"
        elif status == "incomplete":
            what = "the reply is incomplete (max_output_tokens, or a filter stopped it)"
        elif status == "budget_exceeded":
            what = "the interaction exceeded its budget"
        else:
            what = f"the interaction ended {status!r}, not completed"
        raise ModelError(
            f"model {self.model!r}: {what}",
            model=self.model,
            status_code=None,
            attempts=attempts,
            stop_reason=status,
            code=code,
        )

    async def cancel_call(self, state: dict[str, Any]) -> None:
        """Cancel the background interaction ``state`` names (best effort: a failure is logged, not raised)."""
        interaction_id = state.get("interaction_id")
        if not isinstance(interaction_id, str) or not interaction_id:
            return
        try:
            await self._get_client().aio.interactions.cancel(interaction_id)
        except (genai_interactions.APIError, ModelError) as exc:
            _log.warning("cancelling background interaction %s of model %r failed: %s", interaction_id, self.model, exc)

    async def _read_on(self, at: tuple[str, str | None], attempt: int, attempts: int) -> tuple[Any | None, int]:
        """The stream of background interaction ``at[0]`` after event ``at[1]``; ``None`` if the server lost it."""
        interaction_id, after = at
        interactions = self._get_client().aio.interactions

        async def read() -> Any | None:
            try:
                if after is None:
                    return await interactions.get(interaction_id, stream=True)
                return await interactions.get(interaction_id, stream=True, last_event_id=after)
            except genai_interactions.NotFoundError:
                return None

        return await self._send(read, attempt, attempts)

    async def _send(self, send: Callable[[], Awaitable[_T]], attempt: int, attempts: int) -> tuple[_T, int]:
        """``send()`` to the Interactions API, retried while the failure may pass; its result and the attempt."""
        while True:
            try:
                return await send(), attempt
            except genai_interactions.APIStatusError as exc:
                body = exc.body if isinstance(exc.body, dict) else {}
                error = body.get("error")
                message = error.get("message") if isinstance(error, dict) else None
                advised = _advised_wait(exc.response.headers, body)
                wait = self._retry_wait(exc, exc.status_code, str(message or exc), advised, attempt, attempts)
            except genai_interactions.APIConnectionError as exc:
                wait = self._connection_wait(exc, attempt, attempts)
            except genai_interactions.APIError as exc:  # anything else before a reply: not retryable
                raise self._failure(f"the request failed: {exc}", None, attempt + 1) from exc
            await self._sleep(wait)
            attempt += 1

    def _signed_by_us(self, name: str | None) -> bool:
        """Whether thought signatures on a message written by ``name`` may go back to this model.

        A signature binds thoughts to the model that wrote them; a message from before models were
        recorded (``None``) is taken to be ours.
        """
        return name is None or model_family(name) in self._served

    def _check_finish(self, assembler: ReplyAssembler, attempts: int) -> None:
        if assembler.block_reason is not None:
            why = f": {assembler.block_message}" if assembler.block_message else ""
            raise ModelError(
                f"model {self.model!r}: the API blocked the prompt ({assembler.block_reason}){why}",
                model=self.model,
                status_code=None,
                attempts=attempts,
                stop_reason=f"prompt:{assembler.block_reason}",
                blocked_categories=assembler.blocked_categories,
            )
        reason = assembler.finish_reason
        if reason in _FINISHED or reason is None:  # None: cut off, which message() reports
            return
        if reason in BLOCKED:
            named = ", ".join(assembler.blocked_categories) or "no category named"
            what = f"a filter stopped the reply (finish_reason {reason}; {named})"
        elif reason == "MAX_TOKENS":
            what = "the reply reached max_output_tokens before it was finished; raise max_output_tokens"
        elif reason in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"):
            what = f"the model's function call could not be used (finish_reason {reason})"
        elif reason == "MISSING_THOUGHT_SIGNATURE":
            what = "the API wants a thought signature a replayed turn lacks (a turn another model wrote?)"
        else:
            what = f"the reply stopped for a reason this adapter does not take as an answer: {reason}"
        if assembler.finish_message:
            what += f": {assembler.finish_message}"
        raise ModelError(
            f"model {self.model!r}: {what}",
            model=self.model,
            status_code=None,
            attempts=attempts,
            stop_reason=reason,
            blocked_categories=assembler.blocked_categories,
        )

    # -- transport --------------------------------------------------------------------------------

    def _get_client(self) -> genai.Client:
        if self._given_client is not None:
            return self._given_client
        if self._api_key is None:
            raise ModelError(
                f"no API key for model {self.model!r}: pass api_key=, set GOOGLE_API_KEY or GEMINI_API_KEY, "
                "or give a base_url for a server that needs none",
                model=self.model,
            )
        loop = asyncio.get_running_loop()
        # An HTTP connection pool belongs to the event loop it was opened on; a model shared across
        # loops (one asyncio.run() after another) gets a fresh client on each.
        if self._client is None or self._client_loop is None or self._client_loop() is not loop:
            options = genai_types.HttpOptions(
                base_url=self.base_url,
                timeout=max(1, round(self.timeout * 1000)),
                # Retries are ours (one policy on every SDK version, counted against max_retries); an
                # explicit retry option also stops the SDK's own silent retry of a failed connection.
                retry_options=genai_types.HttpRetryOptions(attempts=1),
            )
            self._client = genai.Client(api_key=self._api_key, http_options=options)
            self._client_loop = weakref.ref(loop)
        return self._client

    def _retry_wait(
        self, exc: Exception, status: Any, what: str, wait: float | None, attempt: int, attempts: int
    ) -> float:
        """How long to wait before the next attempt (``wait``: what the server advised), or the ``ModelError``."""
        if not isinstance(status, int) or not retryable_status(status):
            raise self._failure(f"the server refused the request ({status}): {what}", status, attempt + 1) from exc
        if wait is not None and wait > self.max_retry_after:
            raise self._failure(
                f"the server answered {status} and asked to wait {wait:.0f} s, more than "
                f"max_retry_after={self.max_retry_after:.0f} s: {what}",
                status,
                attempt + 1,
            ) from exc
        if attempt + 1 >= attempts:
            raise self._failure(
                f"the server answered {status} to all {attempts} attempts: {what}", status, attempts
            ) from exc
        return wait if wait is not None else backoff(attempt, self.retry_delay, self.max_retry_delay)

    def _connection_wait(self, exc: Exception, attempt: int, attempts: int) -> float:
        if attempt + 1 >= attempts:
            if isinstance(exc, _TIMEOUT):
                raise self._failure(
                    f"no answer within timeout={self.timeout} s, {attempts} attempts", None, attempts
                ) from exc
            raise self._failure(
                f"could not reach the server ({type(exc).__name__}: {exc}), {attempts} attempts", None, attempts
            ) from exc
        return backoff(attempt, self.retry_delay, self.max_retry_delay)

    def _failure(self, what: str, status: int | None, attempts: int) -> ModelError:
        return ModelError(f"model {self.model!r}: {what}", model=self.model, status_code=status, attempts=attempts)

    def _stream_failure(self, exc: Exception | None, attempts: int) -> ModelError:
        if exc is None:
            what = "the stream ended before the interaction finished"
        elif isinstance(exc, _TIMEOUT):
            what = f"the stream stalled for more than timeout={self.timeout} s"
        elif isinstance(exc, ValueError):  # unparsable JSON, and pydantic's verdict on a chunk of the wrong shape
            what = f"malformed chunk in the stream: {type(exc).__name__}: {exc}"
        elif isinstance(exc, genai_interactions.APIResponseValidationError):
            what = f"malformed event in the stream: {exc}"
        elif isinstance(exc, genai_interactions.APIError) and not isinstance(
            exc, genai_interactions.APIConnectionError
        ):
            what = f"the server reported an error in the stream: {exc}"
        else:
            what = f"the stream broke off: {type(exc).__name__}: {exc}"
        return self._failure(what, None, attempts)

    # -- lifecycle --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client this model opened (not one it was given)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.aio.aclose()
            client.close()

    async def __aenter__(self) -> GeminiModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def model_family(name: str) -> str:
    """A model name without ``models/`` and its version suffix: a name asked for and the version that answered agree.

    ``gemini-2.5-flash-001`` and ``gemini-2.5-flash-preview-09-2025`` are both ``gemini-2.5-flash``;
    ``gemini-2.5-flash-lite`` is a model of its own.
    """
    name = name.removeprefix("models/")
    while (stripped := _VERSIONED.sub("", name)) != name:
        name = stripped
    return name


def _what(exc: genai_errors.APIError) -> str:
    return f"{exc.status}: {exc.message}" if exc.status else str(exc.message or exc)


def _advised_wait(headers: Any, body: Any) -> float | None:
    """The delay the server advised: a ``Retry-After`` header, else the ``RetryInfo`` in the error body's details.

    Gemini's 429 says how long the quota needs in its body (``google.rpc.RetryInfo``, ``"retryDelay":
    "37s"``) and often sends no header at all.
    """
    wait = retry_after(headers) if isinstance(headers, Mapping) else None
    if wait is not None:
        return wait
    details = body if isinstance(body, dict) else {}
    error = details.get("error", details)
    for detail in (error.get("details") if isinstance(error, dict) else None) or []:
        if isinstance(detail, dict) and detail.get("@type") == _RETRY_INFO:
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _position(attach: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """The interaction id and last event id a ``ModelCall`` state holds, if it is one of ours."""
    if attach is None:
        return None
    interaction_id, after = attach.get("interaction_id"), attach.get("last_event_id")
    if not isinstance(interaction_id, str) or not interaction_id:
        return None
    return interaction_id, after if isinstance(after, str) and after else None
