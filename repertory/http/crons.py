"""LangGraph's cron routes over repertory's schedules, so ``langgraph-sdk``'s ``crons`` client works unchanged.

- ``POST /threads/{thread_id}/runs/crons``: a schedule on the thread (``handle.schedule``): each
  fire time sends the run's input as one durable turn of that thread.
- ``POST /runs/crons``: a stateless cron: each fire time runs on a new thread of the assistant,
  which is kept (``on_run_completed="delete"`` is refused: repertory keeps every session).
- ``POST /runs/crons/search``, ``POST /runs/crons/count``, ``DELETE /runs/crons/{cron_id}``.
- ``PATCH /runs/crons/{cron_id}`` (``crons.update``): the schedule changed in place
  (``Schedule.update``); a new expression, time zone or end, or enabling it again, times it anew
  from now.

A cron is a ``Schedule``; its ``cron_id`` is the schedule id, ``next_run_date`` its ``next_at``.
What LangGraph's cron object holds beyond the schedule (the payload, the creating user, its
metadata) is kept in the schedule's ``metadata``. A caller sees the crons it created (with API keys
on, a cron belongs to the principal whose key created it); thread crons also need the thread.
A cron's ``webhook`` is posted after each firing's run, as a run's is: the host that fires it
writes the delivery (``FiringWebhook``) and the server delivers it. ``interrupt_before``/
``interrupt_after`` are refused with 422, as on runs.

Crons are bounded per tenant (``ServerLimits``): an owner keeps at most ``max_crons_per_owner``
(422 past it, counted through the store's index on the owner, ``TimeStore.count_schedules``),
and two firings of one cron are at least ``min_cron_interval_s`` apart (422 naming ``schedule``
otherwise: ``* * * * * *`` would make 86,400 threads and webhooks a day).
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from types import EllipsisType
from typing import Annotated, Any, ClassVar, Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from repertory.core.timing import FiringWebhook, ScheduleRecord
from repertory.errors import ScheduleNotFound
from repertory.http.auth import Caller
from repertory.http.convert import input_text, iso
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway, contains
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits
from repertory.http.webhooks import Webhooks
from repertory.runtime import next_fire
from repertory.tree.schedules import Schedule, time_store

__all__ = ["CronCount", "CronCreate", "CronSearch", "CronUpdate", "cron_routes", "cron_view"]

Dict = dict[str, Any]


class _CronBody(BaseModel):
    """Unknown fields ignored (a newer client keeps working); text must be encodable (no lone surrogates)."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        try:
            json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("the body holds a lone surrogate, which is not text") from None
        return data


class _CronRunFields(_CronBody):
    """What a cron's runs are made of, on creation and update; what repertory does not serve is refused."""

    input: JsonValue = None
    metadata: dict[str, JsonValue] | None = None
    config: dict[str, JsonValue] | None = None
    context: dict[str, JsonValue] | None = None
    interrupt_before: JsonValue = None
    interrupt_after: JsonValue = None
    webhook: str | None = None
    end_time: datetime | None = None
    timezone: str | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    stream_mode: JsonValue = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None

    @model_validator(mode="after")
    def _served(self) -> "_CronRunFields":
        if self.interrupt_before or self.interrupt_after:
            raise ValueError("interrupt_before/interrupt_after are not supported on crons")
        if self.on_run_completed == "delete":
            raise ValueError("on_run_completed='delete' is not supported: repertory keeps every cron's threads")
        if self.end_time is not None and self.end_time.tzinfo is None:
            raise ValueError("end_time needs a time zone (an ISO 8601 time with an offset)")
        if self.input is not None or self._input_required:
            try:
                input_text(self.input)
            except HttpError as exc:
                raise ValueError(str(exc)) from None
        return self

    _input_required: ClassVar[bool] = True


class CronCreate(_CronRunFields):
    """``POST /threads/{thread_id}/runs/crons`` and ``POST /runs/crons``, as ``langgraph-sdk`` sends them."""

    schedule: str = Field(min_length=1, max_length=256)
    assistant_id: str = Field(min_length=1, max_length=256)
    checkpoint_during: bool | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    enabled: bool = True


class CronUpdate(_CronRunFields):
    """``PATCH /runs/crons/{cron_id}``, as ``langgraph-sdk``'s ``crons.update`` sends it: what is absent stays.

    ``end_time: null`` removes the end (the SDK sends it only when asked to).
    """

    schedule: str | None = Field(None, min_length=1, max_length=256)
    enabled: bool | None = None

    _input_required: ClassVar[bool] = False


class CronSearch(_CronBody):
    """``POST /runs/crons/search``."""

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, JsonValue] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: (
        Literal["cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"] | None
    ) = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class CronCount(_CronBody):
    """``POST /runs/crons/count``."""

    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, JsonValue] | None = None


def cron_view(record: ScheduleRecord) -> Dict:
    """A LangGraph ``Cron`` object for a schedule."""
    meta = record.metadata
    payload = meta.get("payload")
    user = meta.get("user_id")
    cron_meta = meta.get("metadata")
    return {
        "cron_id": record.schedule_id,
        "assistant_id": record.agent,
        "thread_id": record.session_id,
        "on_run_completed": None if record.session_id is not None else "keep",
        "end_time": iso(record.end_at),
        "schedule": record.cron,
        "timezone": record.tz,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "payload": payload if isinstance(payload, dict) else {},
        "user_id": user if isinstance(user, str) else None,
        "next_run_date": iso(record.next_at),
        "metadata": cron_meta if isinstance(cron_meta, dict) else {},
        "enabled": record.enabled,
    }


SAMPLED_FIRINGS = 100
"""How many upcoming firings of an expression are compared when its shortest interval is checked."""


def shortest_interval_ms(cron: str, tz: str, after_ms: int, firings: int = SAMPLED_FIRINGS) -> int | None:
    """The shortest time between consecutive firings among the next ``firings`` after ``after_ms``.

    ``None`` when it fires fewer than twice. A cron's gaps come from the sets in its fields, which
    recur whenever the other fields match, so a short gap shows within its first firings (every
    five-field expression is at least a minute apart; ``*/5 * * * * *`` shows 5 s at once).
    ``ValueError`` for a bad expression or zone.
    """
    shortest: int | None = None
    at = next_fire(cron, tz, after_ms)
    for _ in range(firings - 1):
        try:
            following = next_fire(cron, tz, at)
        except ValueError:  # fires no more
            break
        gap = following - at
        shortest = gap if shortest is None else min(shortest, gap)
        at = following
    return shortest


async def check_interval(cron: str, tz: str, now_ms: int, minimum_s: int) -> None:
    """422 naming ``schedule`` when two firings of ``cron`` come closer than ``minimum_s`` seconds.

    The firings are computed on a worker thread: a long expression costs milliseconds of CPU.
    """
    if minimum_s <= 0:
        return
    try:
        gap = await asyncio.to_thread(shortest_interval_ms, cron, tz, now_ms)
    except ValueError as exc:
        raise HttpError(str(exc), status=422) from None
    if gap is not None and gap < minimum_s * 1000:
        raise HttpError(
            f"schedule {cron!r} fires {gap / 1000:g} s apart; this server's shortest interval between two "
            f"firings is {minimum_s} s",
            status=422,
        )


def cron_routes(
    gw: Gateway, auth: Callable[..., Awaitable[Caller]], hooks: Webhooks, limits: ServerLimits = DEFAULT_LIMITS
) -> APIRouter:
    """The cron routes, bound to one gateway; ``hooks`` makes a cron's webhook (and refuses one it cannot sign).

    ``limits`` bounds each owner's crons (``max_crons_per_owner``) and how often one fires
    (``min_cron_interval_s``).
    """
    router = APIRouter(tags=["crons"])
    CallerDep = Annotated[Caller, Depends(auth)]
    # Counting an owner's crons and adding one are a pair: two creations at once must not both see
    # room for one. (Servers sharing a store each hold their own lock, so there a burst may pass
    # the bound by at most one cron per server.)
    creating = asyncio.Lock()

    async def check_quota(owner: str | None) -> None:
        held = await time_store(gw.runtime).count_schedules(owner)
        if held >= limits.max_crons_per_owner:
            raise HttpError(
                f"{'this owner' if owner is None else repr(owner)} keeps {held} crons, the most this server allows "
                f"(max_crons_per_owner={limits.max_crons_per_owner}): delete one first",
                status=422,
            )

    async def create(caller: Caller, thread_id: str | None, body: CronCreate) -> JSONResponse:
        principal = caller.principal
        gw.agent(body.assistant_id)
        await check_interval(
            body.schedule, body.timezone or "UTC", gw.runtime.clock.now_ms(), limits.min_cron_interval_s
        )
        if thread_id is not None:
            record = await gw.record(thread_id, caller)
            if record.agent != body.assistant_id:
                raise HttpError(
                    f"thread {thread_id!r} runs assistant {record.agent!r}, not {body.assistant_id!r}", status=409
                )
        payload = body.model_dump(mode="json", exclude_none=True, exclude={"metadata"})
        metadata: dict[str, JsonValue] = {
            "payload": payload,
            "user_id": principal.id,
            "owner": caller.owner,
            "metadata": dict(body.metadata or {}),
        }
        end_at = None if body.end_time is None else int(body.end_time.timestamp() * 1000)
        webhook = None
        if body.webhook:
            webhook = await hooks.for_firings(
                body.webhook, assistant_id=body.assistant_id, metadata=dict(body.metadata or {})
            )
        try:
            async with creating:
                await check_quota(caller.owner)
                schedule = await gw.runtime.create_schedule(
                    body.schedule,
                    input_text(body.input),
                    agent=body.assistant_id,
                    session_id=thread_id,
                    tz=body.timezone or "UTC",
                    principal=principal,
                    end_at=end_at,
                    enabled=body.enabled,
                    metadata=metadata,
                    owner=caller.owner,
                    webhook=webhook,
                )
        except ValueError as exc:
            raise HttpError(str(exc), status=422) from None
        return JSONResponse(cron_view(schedule.record))

    async def visible(caller: Caller) -> list[Schedule]:
        """The crons this caller may see: its own, and of thread crons only those whose thread it sees."""
        out: list[Schedule] = []
        # A tenant's crons come through the store's owner index: never a read of another's rows.
        owner = None if caller.admin else caller.owner
        for schedule in await gw.runtime.schedules(owner=owner):
            meta = schedule.record.metadata
            if caller.owner is None and not caller.admin and meta.get("user_id") != caller.principal.id:
                continue
            if schedule.session_id is not None:
                try:
                    await gw.record(schedule.session_id, caller)
                except HttpError:
                    continue
            out.append(schedule)
        return out

    def matches(view: Dict, assistant_id: str | None, thread_id: str | None, metadata: Dict | None) -> bool:
        if assistant_id is not None and view["assistant_id"] != assistant_id:
            return False
        if thread_id is not None and view["thread_id"] != thread_id:
            return False
        return not metadata or contains(view["metadata"], metadata)

    @router.post("/threads/{thread_id}/runs/crons", summary="Create a cron on a thread (a schedule of the session)")
    async def create_for_thread(thread_id: str, body: CronCreate, caller: CallerDep) -> JSONResponse:
        return await create(caller, thread_id, body)

    @router.post("/runs/crons", summary="Create a stateless cron (each firing on a new thread)")
    async def create_stateless(body: CronCreate, caller: CallerDep) -> JSONResponse:
        return await create(caller, None, body)

    @router.post("/runs/crons/search", summary="Search crons")
    async def search(body: CronSearch, caller: CallerDep) -> JSONResponse:
        views = [cron_view(s.record) for s in await visible(caller)]
        views = [v for v in views if matches(v, body.assistant_id, body.thread_id, body.metadata)]
        if body.enabled is not None:
            views = [v for v in views if v["enabled"] == body.enabled]
        key = body.sort_by or "created_at"
        views.sort(key=lambda v: (v[key] is None, str(v[key] or "")), reverse=body.sort_order == "desc")
        page = views[body.offset : body.offset + body.limit]
        if body.select:
            page = [{k: v for k, v in view.items() if k in body.select} for view in page]
        return JSONResponse(page)

    @router.post("/runs/crons/count", summary="Count crons")
    async def count(body: CronCount, caller: CallerDep) -> JSONResponse:
        views = [cron_view(s.record) for s in await visible(caller)]
        return JSONResponse(sum(matches(v, body.assistant_id, body.thread_id, body.metadata) for v in views))

    @router.patch("/runs/crons/{cron_id}", summary="Update a cron (what the body leaves out stays)")
    async def update(cron_id: str, body: CronUpdate, caller: CallerDep) -> JSONResponse:
        mine = {s.id: s for s in await visible(caller)}
        schedule = mine.get(cron_id)
        if schedule is None:
            raise HttpError(f"no cron {cron_id!r}", status=404)
        given = body.model_fields_set
        meta = dict(schedule.record.metadata)
        payload = meta.get("payload")
        payload = dict(payload) if isinstance(payload, dict) else {}
        payload.update(body.model_dump(mode="json", exclude_none=True, exclude={"metadata", "end_time"}))
        if "end_time" in given:
            payload["end_time"] = None if body.end_time is None else body.end_time.isoformat()
        meta["payload"] = payload
        if body.metadata is not None:
            meta["metadata"] = dict(body.metadata)
        end_at: int | EllipsisType | None = ...
        if "end_time" in given:
            end_at = None if body.end_time is None else int(body.end_time.timestamp() * 1000)
        webhook: FiringWebhook | EllipsisType | None = ...
        current = schedule.record.webhook
        url = body.webhook if "webhook" in given else (None if current is None else current.url)
        if url and ("webhook" in given or body.metadata is not None):  # the cron's metadata goes with each delivery
            cron_meta = meta.get("metadata")
            run_meta = dict(cron_meta) if isinstance(cron_meta, dict) else {}
            webhook = await hooks.for_firings(url, assistant_id=schedule.record.agent, metadata=run_meta)
        elif "webhook" in given:
            webhook = None
        if body.schedule is not None or body.timezone is not None:
            cron, tz = body.schedule or schedule.record.cron, body.timezone or schedule.record.tz
            await check_interval(cron, tz, gw.runtime.clock.now_ms(), limits.min_cron_interval_s)
        try:
            await schedule.update(
                cron=body.schedule,
                tz=body.timezone,
                message=None if body.input is None else input_text(body.input),
                principal=caller.principal,
                end_at=end_at,
                enabled=body.enabled,
                metadata=meta,
                webhook=webhook,
            )
        except ValueError as exc:
            raise HttpError(str(exc), status=422) from None
        except ScheduleNotFound:
            raise HttpError(f"no cron {cron_id!r}", status=404) from None
        return JSONResponse(cron_view(schedule.record))

    @router.delete("/runs/crons/{cron_id}", status_code=204, summary="Delete a cron")
    async def delete(cron_id: str, caller: CallerDep) -> Response:
        mine = {s.id: s for s in await visible(caller)}
        schedule = mine.get(cron_id)
        if schedule is None:
            raise HttpError(f"no cron {cron_id!r}", status=404)
        try:
            await schedule.cancel()
        except ScheduleNotFound:
            raise HttpError(f"no cron {cron_id!r}", status=404) from None
        return Response(status_code=204)

    return router
