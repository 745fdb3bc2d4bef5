"""Thread routes: create, get, search, count, patch, delete, prune, cancel, state (at the head or a
checkpoint), history, copy.

Every route answers only for threads the caller may see (``Caller.sees``); another owner's thread
is a 404, exactly like one that does not exist.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse

from repertory.http.auth import Caller
from repertory.http.docs import ERRORS, ThreadOut, ThreadStateOut, responses
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway, contains
from repertory.http.schemas import (
    HistoryQuery,
    StateAtCheckpoint,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
)
from repertory.http.views import states_view

__all__ = ["thread_routes"]


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
        caller: Caller,
        thread_id: str,
        limit: int,
        before: str | None,
        metadata: dict[str, Any] | None,
        select: list[str] | None = None,
    ) -> JSONResponse:
        record = await gw.record(thread_id, caller)
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
        record = await gw.create_thread(
            caller, thread_id=body.thread_id, metadata=body.metadata, if_exists=body.if_exists
        )
        return JSONResponse(await gw.thread_json(record))

    @router.post(
        "/threads/search",
        responses=responses(list[ThreadOut]),
        summary="Search threads by metadata, values, ids and status",
    )
    async def search_threads(body: ThreadSearch, caller: CallerDep) -> JSONResponse:
        found = await gw.search(
            caller,
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

    @router.post("/threads/count", responses=responses(int), summary="Count the threads a search would find")
    async def count_threads(body: ThreadCount, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await gw.count(caller, metadata=body.metadata, values=body.values, status=body.status))

    @router.post(
        "/threads/prune",
        responses=responses(dict[str, int]),
        summary="Delete threads by id (strategy 'delete'); ids the caller cannot see are skipped",
    )
    async def prune_threads(body: ThreadPrune, caller: CallerDep) -> JSONResponse:
        pruned = 0
        for thread_id in dict.fromkeys(body.thread_ids):
            try:
                record = await gw.record(thread_id, caller)
                await gw.delete_thread(record)
            except HttpError as exc:
                if exc.status != 404:
                    raise
                continue
            pruned += 1
        return JSONResponse({"pruned_count": pruned})

    @router.get("/threads/{thread_id}", responses=responses(ThreadOut), summary="Get a thread")
    async def get_thread(thread_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await gw.thread_json(await gw.record(thread_id, caller)))

    @router.patch(
        "/threads/{thread_id}",
        responses=responses(ThreadOut),
        summary="Merge metadata into a thread's (keys given are replaced, the rest stay)",
    )
    async def patch_thread(thread_id: str, body: ThreadPatch, caller: CallerDep) -> JSONResponse:
        record = await gw.record(thread_id, caller)
        if body.metadata is not None:
            record = await gw.patch_thread(record, body.metadata, caller)
        return JSONResponse(await gw.thread_json(record))

    @router.delete(
        "/threads/{thread_id}",
        status_code=204,
        responses=ERRORS,
        summary="Delete a thread with the sessions it spawned (a running run is cancelled first; forks stay)",
    )
    async def delete_thread(thread_id: str, caller: CallerDep) -> Response:
        await gw.delete_thread(await gw.record(thread_id, caller))
        return Response(status_code=204)

    @router.post(
        "/threads/{thread_id}/cancel",
        status_code=204,
        responses=ERRORS,
        summary="Cancel the thread's queued, running and suspended turns (tree=true: every descendant's too)",
    )
    async def cancel_thread(thread_id: str, caller: CallerDep, tree: Annotated[bool, Query()] = False) -> Response:
        # Answered once nothing is left running: with tree=true, no model request or tool call of
        # the tree starts after the 204 (SessionHandle.cancel). Descendants share the thread's owner.
        record = await gw.record(thread_id, caller)
        handle = await gw.runtime.session(record.session_id, caller.principal)
        await handle.cancel(tree=tree)
        return Response(status_code=204)

    async def state_at(caller: Caller, thread_id: str, checkpoint_id: str | None) -> JSONResponse:
        record = await gw.record(thread_id, caller)
        snap = await gw.snapshot(record)
        run, agent = gw.interrupt_source(snap)  # its own interrupt, or a delegated child's
        states = states_view(thread_id, snap.history, snap.status, run, agent, limit=1, at=checkpoint_id)
        if not states:
            raise HttpError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}", status=404)
        return JSONResponse(states[0])

    @router.get(
        "/threads/{thread_id}/state",
        responses=responses(ThreadStateOut),
        summary="The thread's current state (its head checkpoint)",
    )
    async def get_state(thread_id: str, caller: CallerDep) -> JSONResponse:
        return await state_at(caller, thread_id, None)

    @router.post(
        "/threads/{thread_id}/state/checkpoint",
        responses=responses(ThreadStateOut),
        summary="The thread's state at one of its checkpoints (a revision on its lineage)",
    )
    async def post_state_at(thread_id: str, body: StateAtCheckpoint, caller: CallerDep) -> JSONResponse:
        return await state_at(caller, thread_id, body.checkpoint_id)

    @router.get(
        "/threads/{thread_id}/state/{checkpoint_id}",
        responses=responses(ThreadStateOut),
        summary="The thread's state at one of its checkpoints (a revision on its lineage)",
    )
    async def get_state_at(thread_id: str, checkpoint_id: str, caller: CallerDep) -> JSONResponse:
        return await state_at(caller, thread_id, checkpoint_id)

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
        return await history(caller, thread_id, limit, before, None)

    @router.post(
        "/threads/{thread_id}/history",
        responses=responses(list[ThreadStateOut]),
        summary="The thread's states, newest first",
    )
    async def post_history(thread_id: str, body: HistoryQuery, caller: CallerDep) -> JSONResponse:
        return await history(caller, thread_id, body.limit, _before(body.before), body.metadata, body.select)

    @router.post(
        "/threads/{thread_id}/copy",
        responses=responses(ThreadOut),
        summary="Copy a thread: a fork sharing its history (O(1))",
    )
    async def copy_thread(thread_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await gw.thread_json(await gw.copy_thread(thread_id, caller)))

    return router
