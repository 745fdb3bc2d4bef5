"""Thread routes: create, get, search, state, history, copy (a fork, O(1))."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from repertory.core.principal import Principal
from repertory.http.docs import ThreadOut, ThreadStateOut, responses
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway, contains
from repertory.http.schemas import HistoryQuery, ThreadCreate, ThreadSearch
from repertory.http.views import states_view

__all__ = ["thread_routes"]

Caller = tuple[Principal, str]


def _select(items: list[dict[str, Any]], fields: list[str] | None) -> list[dict[str, Any]]:
    if not fields:
        return items
    return [{k: v for k, v in item.items() if k in fields} for item in items]


def _before(value: str | dict[str, Any] | None) -> str | None:
    """``before`` as a checkpoint id: a string, a checkpoint, or a config holding one."""
    if value is None or isinstance(value, str):
        return value
    inner = value.get("configurable", value)
    found = inner.get("checkpoint_id") if isinstance(inner, dict) else None
    if not isinstance(found, str):
        raise HttpError("before must be a checkpoint id or a checkpoint with checkpoint_id", status=422)
    return found


def thread_routes(gw: Gateway, auth: Callable[..., Awaitable[Caller]]) -> APIRouter:
    """The thread routes, bound to one gateway."""
    router = APIRouter(tags=["threads"])
    CallerDep = Annotated[Caller, Depends(auth)]

    async def history(
        thread_id: str, limit: int, before: str | None, metadata: dict[str, Any] | None, select: list[str] | None = None
    ) -> JSONResponse:
        record = await gw.record(thread_id)
        snap = await gw.snapshot(record)
        run, agent = gw.interrupt_source(snap)
        states = states_view(thread_id, snap.history, snap.status, run, agent, limit=limit, before=before)
        if metadata:
            states = [s for s in states if contains(s["metadata"], metadata)]
        return JSONResponse(_select(states, select))

    @router.post(
        "/threads",
        responses=responses(ThreadOut),
        summary="Create a thread (a session running the assistant its metadata names)",
    )
    async def create_thread(body: ThreadCreate, caller: CallerDep) -> JSONResponse:
        record = await gw.create_thread(thread_id=body.thread_id, metadata=body.metadata, if_exists=body.if_exists)
        return JSONResponse(await gw.thread_json(record))

    @router.post(
        "/threads/search",
        responses=responses(list[ThreadOut]),
        summary="Search threads by metadata, values, ids and status",
    )
    async def search_threads(body: ThreadSearch, caller: CallerDep) -> JSONResponse:
        found = await gw.search(
            metadata=body.metadata,
            values=body.values,
            ids=body.ids,
            status=body.status,
            sort_by=body.sort_by or "created_at",
            descending=body.sort_order != "asc",
            offset=body.offset,
            limit=body.limit,
        )
        return JSONResponse(_select(found, body.select))

    @router.get("/threads/{thread_id}", responses=responses(ThreadOut), summary="Get a thread")
    async def get_thread(thread_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await gw.thread_json(await gw.record(thread_id)))

    @router.get(
        "/threads/{thread_id}/state",
        responses=responses(ThreadStateOut),
        summary="The thread's current state (its head checkpoint)",
    )
    async def get_state(thread_id: str, caller: CallerDep) -> JSONResponse:
        record = await gw.record(thread_id)
        snap = await gw.snapshot(record)
        states = states_view(thread_id, snap.history, snap.status, *gw.interrupt_source(snap), limit=1)
        return JSONResponse(states[0])

    @router.get(
        "/threads/{thread_id}/history",
        responses=responses(list[ThreadStateOut]),
        summary="The thread's states, newest first",
    )
    async def get_history(
        thread_id: str,
        caller: CallerDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        before: Annotated[str | None, Query()] = None,
    ) -> JSONResponse:
        return await history(thread_id, limit, before, None)

    @router.post(
        "/threads/{thread_id}/history",
        responses=responses(list[ThreadStateOut]),
        summary="The thread's states, newest first",
    )
    async def post_history(thread_id: str, body: HistoryQuery, caller: CallerDep) -> JSONResponse:
        return await history(thread_id, body.limit, _before(body.before), body.metadata, body.select)

    @router.post(
        "/threads/{thread_id}/copy",
        responses=responses(ThreadOut),
        summary="Copy a thread: a fork sharing its history (O(1))",
    )
    async def copy_thread(thread_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await gw.thread_json(await gw.copy_thread(thread_id)))

    return router
