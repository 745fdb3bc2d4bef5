"""Run routes: background runs, ``/wait``, ``/stream`` (SSE), join, cancel, and the stateless ones.

Every response that creates a run names it in ``Content-Location`` (``langgraph-sdk`` reads the
run id from there) and, where the SDK can reconnect, in ``Location``: a dropped ``/wait`` is
re-joined at ``/join``, a dropped ``/stream`` is resumed at the run's ``/stream`` with the last
event id it saw.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from repertory.core.principal import Principal
from repertory.http.auth import Caller, StreamSlots
from repertory.http.docs import ERRORS, SSE, RunOut, ValuesOut, responses
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.modes import StreamConverter
from repertory.http.runbook import HttpRun, RunBook
from repertory.http.schemas import RunCreate, normalize_stream_modes
from repertory.http.sse import EventFeed, SlotStream, parse_last_event_id, run_events

__all__ = ["Caller", "run_routes"]


def _run_path(run: HttpRun) -> str:
    return f"/threads/{quote(run.thread_id, safe='')}/runs/{quote(run.run_id, safe='')}"


async def _disconnected(request: Request) -> None:
    """Return when the client goes away (the body was already read, so only a disconnect can come)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def run_routes(gw: Gateway, runs: RunBook, slots: StreamSlots, auth: Callable[..., Awaitable[Caller]]) -> APIRouter:
    """The run routes, bound to one gateway."""
    router = APIRouter(tags=["runs"])
    CallerDep = Annotated[Caller, Depends(auth)]

    async def wait_for(request: Request, run: HttpRun, on_disconnect: str, principal: Principal) -> dict[str, Any]:
        if on_disconnect != "cancel":
            await runs.wait_rest(run)
            return await runs.outcome(run)
        resting = asyncio.ensure_future(runs.wait_rest(run))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({resting, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not resting.done():
            resting.cancel()
            gw.spawn(runs.cancel(principal, run, wait=False))
            raise HttpError("the client disconnected; the run was cancelled", status=499)
        resting.result()
        return await runs.outcome(run)

    async def stream(
        caller: Caller,
        run: HttpRun | None,
        thread_id: str | None,
        body: RunCreate | None,
        *,
        modes: tuple[str, ...],
        last_event_id: str | None,
        cancel_on_disconnect: bool,
    ) -> Response:
        resume_from = parse_last_event_id(last_event_id)
        principal, who = caller.principal, caller.who
        slots.take(who)
        feed: EventFeed | None = None
        try:
            if run is None:
                assert body is not None
                record = await runs.thread_for(caller, thread_id, body)
                handle = await gw.runtime.session(record.session_id, principal)
                feed = await EventFeed(handle, gw.store, await gw.store.last_event_seq(record.session_id)).open()
                run = await runs.start(caller, record, body, start_seq=feed.last_seq)
            else:
                handle = await gw.runtime.session(run.thread_id, principal)
                after = run.start_seq if resume_from is None else max(resume_from[0] - 1, 0)
                feed = await EventFeed(handle, gw.store, after).open()
        except BaseException:
            if feed is not None:
                feed.close()
            slots.give_back(who)
            raise
        started = run
        converter = StreamConverter(
            gw.store,
            gw.agents.get(started.assistant_id),
            thread_id=started.thread_id,
            run_id=started.run_id,
            modes=modes,
        )

        async def final_seq() -> int:
            return await gw.store.last_event_seq(started.thread_id)

        async def body_bytes() -> AsyncIterator[bytes]:
            finished = False
            try:
                async for chunk in run_events(
                    feed,
                    converter,
                    submission_id=started.submission_id,
                    rest=lambda: runs.wait_rest(started),
                    final_seq=final_seq,
                    failure=started.driver_error,
                    resume_from=resume_from,
                    run_id=started.run_id,
                ):
                    yield chunk
                finished = True
            finally:
                if not finished and cancel_on_disconnect:
                    gw.spawn(runs.cancel(principal, started, wait=False))

        path = _run_path(started)
        query = urlencode([("stream_mode", m) for m in modes])
        headers = {"Location": f"{path}/stream?{query}", "Content-Location": path}
        return SlotStream(body_bytes(), lambda: slots.give_back(who), headers)

    async def create(caller: Caller, thread_id: str | None, body: RunCreate) -> JSONResponse:
        record = await runs.thread_for(caller, thread_id, body)
        run = await runs.start(caller, record, body)
        return JSONResponse(await runs.view(run), headers={"Content-Location": _run_path(run)})

    async def wait(request: Request, caller: Caller, thread_id: str | None, body: RunCreate) -> JSONResponse:
        record = await runs.thread_for(caller, thread_id, body)
        run = await runs.start(caller, record, body)
        path = _run_path(run)
        values = await wait_for(request, run, body.on_disconnect, caller.principal)
        return JSONResponse(values, headers={"Location": f"{path}/join", "Content-Location": path})

    @router.post("/threads/{thread_id}/runs", responses=responses(RunOut), summary="Create a background run")
    async def create_run(thread_id: str, body: RunCreate, caller: CallerDep) -> JSONResponse:
        return await create(caller, thread_id, body)

    @router.post(
        "/threads/{thread_id}/runs/wait",
        responses=responses(ValuesOut),
        summary="Create a run and wait for its final values",
    )
    async def wait_run(thread_id: str, body: RunCreate, request: Request, caller: CallerDep) -> JSONResponse:
        return await wait(request, caller, thread_id, body)

    @router.post("/threads/{thread_id}/runs/stream", responses=SSE, summary="Create a run and stream it (SSE)")
    async def stream_run(thread_id: str, body: RunCreate, caller: CallerDep) -> Response:
        return await stream(
            caller,
            None,
            thread_id,
            body,
            modes=body.modes,
            last_event_id=None,
            cancel_on_disconnect=body.on_disconnect == "cancel",
        )

    @router.post("/runs", responses=responses(RunOut), summary="Create a stateless background run (on a new thread)")
    async def create_stateless(body: RunCreate, caller: CallerDep) -> JSONResponse:
        return await create(caller, None, body)

    @router.post(
        "/runs/wait", responses=responses(ValuesOut), summary="Create a stateless run and wait for its final values"
    )
    async def wait_stateless(body: RunCreate, request: Request, caller: CallerDep) -> JSONResponse:
        return await wait(request, caller, None, body)

    @router.post("/runs/stream", responses=SSE, summary="Create a stateless run and stream it (SSE)")
    async def stream_stateless(body: RunCreate, caller: CallerDep) -> Response:
        return await stream(
            caller,
            None,
            None,
            body,
            modes=body.modes,
            last_event_id=None,
            cancel_on_disconnect=body.on_disconnect == "cancel",
        )

    @router.get(
        "/threads/{thread_id}/runs", responses=responses(list[RunOut]), summary="List a thread's runs, newest first"
    )
    async def list_runs(
        thread_id: str,
        caller: CallerDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        offset: Annotated[int, Query(ge=0)] = 0,
        status: Annotated[
            Literal["pending", "running", "error", "success", "timeout", "interrupted"] | None, Query()
        ] = None,
    ) -> JSONResponse:
        return JSONResponse(await runs.list(caller, thread_id, limit=limit, offset=offset, status=status))

    @router.get("/threads/{thread_id}/runs/{run_id}", responses=responses(RunOut), summary="Get a run")
    async def get_run(thread_id: str, run_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(await runs.view(await runs.locate(caller, thread_id, run_id)))

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/join",
        responses=responses(ValuesOut),
        summary="Wait for a run and return the thread's values",
    )
    async def join_run(thread_id: str, run_id: str, request: Request, caller: CallerDep) -> JSONResponse:
        run = await runs.locate(caller, thread_id, run_id)
        return JSONResponse(await wait_for(request, run, "continue", caller.principal))

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/stream", responses=SSE, summary="Join a run's stream; Last-Event-ID resumes"
    )
    async def join_stream(
        thread_id: str,
        run_id: str,
        caller: CallerDep,
        stream_mode: Annotated[list[str] | None, Query()] = None,
        cancel_on_disconnect: Annotated[bool, Query()] = False,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> Response:
        try:
            asked = normalize_stream_modes(stream_mode)
        except ValueError as exc:
            raise HttpError(str(exc), status=422) from None
        run = await runs.locate(caller, thread_id, run_id)
        return await stream(
            caller,
            run,
            thread_id,
            None,
            modes=asked or run.modes,
            last_event_id=last_event_id,
            cancel_on_disconnect=cancel_on_disconnect,
        )

    @router.post(
        "/threads/{thread_id}/runs/{run_id}/cancel",
        status_code=204,
        responses=ERRORS,
        summary="Cancel a run (action=rollback cancels it too: history is immutable)",
    )
    async def cancel_run(
        thread_id: str,
        run_id: str,
        caller: CallerDep,
        wait: Annotated[bool, Query()] = False,
        action: Annotated[Literal["interrupt", "rollback"], Query()] = "interrupt",
    ) -> Response:
        run = await runs.locate(caller, thread_id, run_id)
        await runs.cancel(caller.principal, run, wait=wait)
        return Response(status_code=204)

    return router
