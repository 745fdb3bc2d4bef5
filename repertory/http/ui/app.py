"""``WebUI``: the pages under ``/ui`` (sessions, a session, approvals, runs needing attention, activity).

Why one module past 600 lines: it is the routing table of the UI, one concept (each route a few
lines that read, then render); what it reads and renders lives beside it (``reads``,
``conversation``, ``decisions``, ``live``, ``plots``, ``access``).

Server-rendered Jinja2 templates with htmx (vendored under ``static/``) for the few actions that
update a part of a page, and server-sent events for a running turn. Every page reads without
JavaScript; with it, a decision or a message updates its panel in place. Templates autoescape
everything (a message holding ``<script>`` shows as text) and the Content-Security-Policy allows
scripts and styles from this server only.

Routes, relative to where the app is mounted (``/ui``): ``/`` sessions, ``/sessions/{id}`` (plus
``/conversation`` and ``/panel`` fragments and the ``/live`` stream), ``/approvals`` (and its
``/list`` fragment), ``/runs`` runs needing attention, ``/activity`` plots, ``/evals`` the evals
in the store and ``/evals/{name}`` an eval's cases side by side (``eval_reads``), ``/login``; posts:
``/login``, ``/logout``, ``/decide``, ``/sessions/{id}/send``, ``/sessions/{id}/fork``,
``/sessions/{id}/cancel`` (the kill switch: the session's and its descendants' turns, once confirmed),
``/runs/{run_id}/recover``.

Tenancy (``access``): every route shows and acts on only what the logged-in key's ``Caller`` sees;
another owner's session, its stream, its decisions and its runs are 404 as if they did not exist,
and lists, counts, the inbox and the plots leave them out; a ``before=`` cursor or a fork's
revision naming another owner's session answers what a missing one does.

Bounds (``ServerLimits``): a request body is at most ``max_body_bytes`` (413, checked before a
form is read; ``ui_only_app`` wraps the app in ``BodyLimit`` as ``create_app`` does); a live view
holds one of its key's ``max_streams_per_key`` stream slots, shared with the API's streams (the
one past it is refused with a ``refused`` event the page shows); logins are server-side sessions
(``access``, ``logins``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from repertory._extras import require
from repertory.core.ids import now_ms
from repertory.core.json_limits import JsonRefused, parse_json
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import RunState
from repertory.core.tree import SessionRecord, SessionStatus
from repertory.errors import RepertoryError, RevisionNotFound, RunNotFound, SessionNotFound
from repertory.http.auth import ApiKeys, BodyLimit, StreamSlots
from repertory.http.errors import HttpError, status_for
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits
from repertory.http.sse import SlotStream
from repertory.http.ui import plots
from repertory.http.ui.access import CSRF_COOKIE, SESSION_COOKIE, Access, Viewer
from repertory.http.ui.conversation import MessageView, accepted_input, conversation, origin_label, pretty
from repertory.http.ui.decisions import RECORD_WAIT_S, Action, Decider, Outcome
from repertory.http.ui.eval_reads import EVAL_CASES, EVAL_SCAN, eval_cases, eval_summaries, read_scores
from repertory.http.ui.live import live_events, refused, reply_start, resume_point
from repertory.http.ui.reads import (
    ACTIVITY_RUNS,
    inbox,
    session_row,
    session_rows,
    session_tree,
    stale_runs,
    subtree_open,
    thread_history,
    visible_runs,
)
from repertory.runtime import Agent, Session
from repertory.tree.fleet import running_turns
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["STALE_AFTER_MS", "WebUI", "ui_only_app"]

_log = logging.getLogger("repertory.http.ui")
_HERE = Path(__file__).parent
_STATIC = {
    "htmx.min.js": "text/javascript",
    "ui.js": "text/javascript",
    "ui.css": "text/css",
    "htmx-LICENSE.txt": "text/plain",
}
STALE_AFTER_MS = 60_000
"""A ``running`` run without a checkpoint for this long, and driven by no session here, needs attention."""
_STATUSES: tuple[SessionStatus, ...] = ("running", "suspended", "error", "idle")
_CANCELLED = {
    "kind": "ok",
    "message": "Cancelled: no turn of this session or its descendants is left queued, running or waiting.",
}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _iso(ms: int | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def _tokens(n: int) -> str:
    return f"{n:,}"


def _cost(c: float | None) -> str:
    return "" if c is None else f"${c:,.4f}"


def _ago(ms: int | None) -> str:
    if ms is None:
        return ""
    s = max(now_ms() - ms, 0) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size} {unit} ago"
    return f"{s} s ago"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("repertory.http.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, iso=_iso, tokens=_tokens, cost=_cost, ago=_ago, pretty=pretty)
    env.globals.update(origin_label=origin_label, statuses=_STATUSES)
    return env


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


async def _form(request: Request) -> dict[str, str]:
    """The posted form (``application/x-www-form-urlencoded``, what every form here sends).

    Its size was checked before it is read: ``BodyLimit`` wraps every app this UI is served in.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ("application/x-www-form-urlencoded", ""):
        raise HttpError("forms are posted as application/x-www-form-urlencoded", status=415)
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _safe_next(target: str | None, base: str) -> str:
    """Only a path of this UI (never another site) is a place to go after login."""
    if target and target.startswith(base + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return base + "/"


class _LoginNeeded(Exception):
    pass


async def _nothing() -> None:
    return None


class WebUI:
    """The web UI over one runtime; ``app`` is the ASGI app to mount (``create_app`` mounts it at ``/ui``).

    ``slots`` counts its live views against the same per-key bound as the API's streams (the one
    ``create_app`` holds); without one the UI counts its own, ``limits.max_streams_per_key`` a key.
    ``export_dir``: the folder evals wrote their Parquet results to (``run_eval(out_dir=)``), whose
    ``eval_scores`` an eval's page shows beside each case; without it the page shows what the
    store holds (replies, tool calls, usage). Reading it needs the ``analytics`` extra.
    """

    def __init__(
        self,
        runtime: Runtime,
        keys: ApiKeys,
        *,
        limits: ServerLimits = DEFAULT_LIMITS,
        slots: StreamSlots | None = None,
        export_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if export_dir is not None:
            require("the web UI's eval scores", "analytics")
        self.runtime = runtime
        self.export_dir = None if export_dir is None else Path(export_dir)
        self.access = Access(keys, limits)
        self.slots = slots if slots is not None else StreamSlots(limits.max_streams_per_key)
        self.decider = Decider(runtime, limits.max_json_depth)
        self.max_json_depth = limits.max_json_depth
        self.env = _environment()
        self._background: set[asyncio.Task[Any]] = set()
        fork = inspect.signature(SessionHandle.fork).parameters
        self.fork_at_revision = "at_revision" in fork  # "fork here" on a message, once forks at a revision exist
        self.app = self._build()

    async def close(self) -> None:
        """Stop waiting on decisions and recoveries in flight (they go on in their sessions)."""
        await self.decider.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # -- rendering ------------------------------------------------------------------------------------

    def _html(self, request: Request, viewer: Viewer | None, template: str, code: int = 200, **ctx: Any) -> Response:
        base = request.scope.get("root_path", "")
        page = self.env.get_template(template).render(
            base=base, viewer=viewer, login_required=self.access.login_required, request_path=request.url.path, **ctx
        )
        response = HTMLResponse(page, status_code=code)
        self._headers(response, request, viewer)
        return response

    def _headers(self, response: Response, request: Request, viewer: Viewer | None) -> None:
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"
        if viewer is not None and viewer.new_csrf_cookie is not None:
            self._cookie(response, request, CSRF_COOKIE, viewer.new_csrf_cookie)

    def _cookie(self, response: Response, request: Request, name: str, value: str) -> None:
        response.set_cookie(
            name,
            value,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=request.scope.get("root_path", "") or "/",
        )

    def _items_html(self, items: list[MessageView]) -> str:
        return self.env.get_template("_items.html").render(items=items, fork_at_revision=self.fork_at_revision)

    # -- who is asking --------------------------------------------------------------------------------

    def _viewer(self, request: Request) -> Viewer:
        viewer = self.access.viewer(request.cookies)
        if viewer is None:
            raise _LoginNeeded
        return viewer

    async def _posted(self, request: Request) -> tuple[Viewer, dict[str, str]]:
        """The viewer and its form; a post from nobody logged in is refused before its body is read."""
        viewer = self._viewer(request)
        form = await _form(request)
        self.access.check_post(request.headers, form.get("csrf"), viewer.csrf)
        return viewer, form

    async def _record(self, viewer: Viewer, session_id: str) -> SessionRecord:
        """The session's record; ``SessionNotFound`` (404) when there is none or the viewer may not see it."""
        record = await self.runtime.store.load_session(session_id)
        if record is None or not viewer.sees(record):
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return record

    async def _handle(self, viewer: Viewer, session_id: str) -> SessionHandle:
        await self._record(viewer, session_id)
        return await self.runtime.session(session_id, principal=viewer.principal)

    # -- the app --------------------------------------------------------------------------------------

    def _build(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        @app.exception_handler(_LoginNeeded)
        async def login_needed(request: Request, _: _LoginNeeded) -> Response:
            base = request.scope.get("root_path", "")
            if _is_htmx(request) or request.method != "GET" or request.url.path.endswith("/live"):
                response: Response = Response("log in again", status_code=401, headers={"HX-Redirect": base + "/login"})
            else:
                here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                response = RedirectResponse(f"{base}/login?{urlencode({'next': here})}", status_code=303)
            return response

        @app.exception_handler(RepertoryError)
        async def failed(request: Request, exc: RepertoryError) -> Response:
            status = status_for(exc)
            if isinstance(exc, SessionNotFound):
                status = 404
            viewer = self.access.viewer(request.cookies)
            return self._html(request, viewer, "error.html", code=status, message=str(exc) or type(exc).__name__)

        @app.get("/static/{name}", include_in_schema=False)
        async def static(name: str) -> Response:
            # nosniff: a browser runs these only as the type they are served as.
            if name not in _STATIC:
                return Response("not found", status_code=404, headers={"X-Content-Type-Options": "nosniff"})
            headers = {"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"}
            return FileResponse(_HERE / "static" / name, media_type=_STATIC[name], headers=headers)

        @app.get("/login")
        async def login_form(request: Request, next: str | None = None) -> Response:
            viewer = self.access.anonymous_viewer(request.cookies)
            if not self.access.login_required:
                return RedirectResponse(request.scope.get("root_path", "") + "/", status_code=303)
            return self._html(request, viewer, "login.html", next=next or "", error=None, anonymous=True)

        @app.post("/login")
        async def login(request: Request) -> Response:
            form = await _form(request)
            self.access.check_post(request.headers, form.get("csrf"), self.access.login_token(request.cookies))
            base = request.scope.get("root_path", "")
            key = form.get("key", "").strip()
            try:
                session_id = self.access.log_in(key, request.client.host if request.client else None)
            except HttpError as exc:
                viewer = self.access.anonymous_viewer(request.cookies)
                blocked = exc.status == 429  # too many wrong keys from this address: say so, and for how long
                response = self._html(
                    request,
                    viewer,
                    "login.html",
                    code=429 if blocked else 403,
                    next=form.get("next", ""),
                    error=str(exc) if blocked else "That key is not valid.",
                    anonymous=True,
                )
                if blocked and isinstance(exc.details.get("retry_after"), int):
                    response.headers["Retry-After"] = str(exc.details["retry_after"])
                return response
            response = RedirectResponse(_safe_next(form.get("next"), base), status_code=303)
            self._cookie(response, request, SESSION_COOKIE, session_id)
            # A new browser secret: the token this browser was shown before logging in is void now.
            self._cookie(response, request, CSRF_COOKIE, self.access.new_browser_secret())
            return response

        @app.post("/logout")
        async def logout(request: Request) -> Response:
            await self._posted(request)
            self.access.log_out(request.cookies)  # the session is closed here, not only forgotten by the browser
            base = request.scope.get("root_path", "")
            response = RedirectResponse(f"{base}/login", status_code=303)
            response.delete_cookie(SESSION_COOKIE, path=base or "/", httponly=True, samesite="strict")
            return response

        @app.get("/")
        async def sessions(
            request: Request,
            scope: str = "roots",
            status: str = "",
            agent: str = "",
            q: str = "",
            before: str | None = None,
            limit: int = 50,
        ) -> Response:
            viewer = self._viewer(request)
            store = self.runtime.store
            limit = min(max(limit, 1), 200)
            wanted: SessionStatus | None = next((s for s in _STATUSES if s == status), None)
            records: list[SessionRecord] = []
            # A cursor naming a session this viewer does not see pages like one naming no session
            # (nothing before it), so the listing never tells another owner's ids from missing ones.
            if not before or viewer.sees(await store.load_session(before)):
                records = await store.page_sessions(
                    before=before or None,
                    limit=limit + 1,
                    roots_only=scope != "all",
                    agent=agent or None,
                    status=wanted,
                    search=q.strip() or None,
                    owner=viewer.owner,
                )
            more = len(records) > limit
            records = records[:limit]
            rows, counts = await asyncio.gather(session_rows(store, records), store.session_counts(owner=viewer.owner))
            query = {"scope": scope, "status": status, "agent": agent, "q": q, "limit": str(limit)}
            query = {k: v for k, v in query.items() if v and not (k == "limit" and v == "50")}
            next_url = f"?{urlencode({**query, 'before': records[-1].session_id})}" if more and records else None
            return self._html(
                request,
                viewer,
                "sessions.html",
                rows=rows,
                counts=counts,
                agents=sorted(self.runtime.agents),
                scope=scope,
                status=status,
                agent=agent,
                q=q,
                before=before,
                next_url=next_url,
                first_url=f"?{urlencode(query)}" if before else None,
            )

        @app.get("/sessions/{session_id}")
        async def session_page(request: Request, session_id: str, done: str | None = None) -> Response:
            viewer = self._viewer(request)
            # ``done``: what a post just did, for its notice after the redirect (a fixed text, never echoed).
            flash = _CANCELLED if done == "cancelled" else None
            ctx = await self._session_context(viewer, session_id)
            return self._html(request, viewer, "session.html", flash=flash, **ctx)

        @app.get("/sessions/{session_id}/conversation")
        async def conversation_fragment(request: Request, session_id: str, after: str | None = None) -> Response:
            # ``after``: the page holds the conversation up to that revision, settled; only what follows is sent.
            viewer = self._viewer(request)
            ctx = await self._session_context(viewer, session_id, after=after or None)
            return self._html(request, viewer, "_conversation.html", **ctx)

        @app.get("/sessions/{session_id}/panel")
        async def panel_fragment(request: Request, session_id: str) -> Response:
            viewer = self._viewer(request)
            ctx = await self._session_context(viewer, session_id, items=False)
            return self._html(request, viewer, "_panel.html", **ctx)

        @app.get("/sessions/{session_id}/live")
        async def live(request: Request, session_id: str, after: int = 0) -> Response:
            viewer = self._viewer(request)
            handle = await self._handle(viewer, session_id)
            start = resume_point(request.headers.get("last-event-id"), after)
            who = viewer.caller.who
            try:
                self.slots.take(who)
            except HttpError:
                return refused(
                    f"Live updates are off: your key already holds {self.slots.limit} open streams (live views "
                    "and API streams together). Close one, then reload this page."
                )
            return SlotStream(
                live_events(handle, self.runtime.store, start, self._items_html), lambda: self.slots.give_back(who)
            )

        @app.post("/sessions/{session_id}/send")
        async def send(request: Request, session_id: str) -> Response:
            viewer, form = await self._posted(request)
            handle = await self._handle(viewer, session_id)
            text = form.get("message", "").strip()
            base = request.scope.get("root_path", "")
            if not text:
                notice = "Type a message first."
            else:
                await handle.send(text)
                notice = "Sent; it runs after any turn already queued."
            if _is_htmx(request):
                ctx = await self._session_context(viewer, session_id, items=False)
                response = self._html(request, viewer, "_send.html", notice=notice, sent=bool(text), **ctx)
                response.headers["HX-Trigger"] = "repertory-panel"  # the queue changed: ui.js reloads the panel
                return response
            return RedirectResponse(f"{base}/sessions/{quote(session_id)}", status_code=303)

        @app.post("/sessions/{session_id}/cancel")
        async def cancel(request: Request, session_id: str) -> Response:
            viewer, form = await self._posted(request)
            handle = await self._handle(viewer, session_id)
            if form.get("confirmed") != "1":
                # Posted without the browser's confirmation (no JavaScript): ask on the page, then post again.
                ctx = await self._session_context(viewer, session_id)
                return self._html(request, viewer, "session.html", confirm_cancel=True, **ctx)
            # Returns once no turn of the tree is left queued, running or waiting (SessionHandle.cancel).
            await handle.cancel(tree=True)
            target = f"{request.scope.get('root_path', '')}/sessions/{quote(session_id)}?done=cancelled"
            if _is_htmx(request):
                return Response(status_code=204, headers={"HX-Redirect": target})
            return RedirectResponse(target, status_code=303)

        @app.post("/sessions/{session_id}/fork")
        async def fork(request: Request, session_id: str) -> Response:
            viewer, form = await self._posted(request)
            handle = await self._handle(viewer, session_id)
            title = form.get("title", "").strip() or None
            revision = form.get("revision") or None
            try:
                if revision is not None and self.fork_at_revision:
                    child = await handle.fork(title=title, at_revision=revision)  # type: ignore[call-arg, unused-ignore]
                else:
                    child = await handle.fork(title=title)
            except RevisionNotFound:
                # One answer whether the revision is unknown or another session's (another owner's, maybe).
                raise RevisionNotFound(f"this session has no revision {revision!r}") from None
            base = request.scope.get("root_path", "")
            target = f"{base}/sessions/{quote(child.id)}"
            if _is_htmx(request):
                return Response(status_code=204, headers={"HX-Redirect": target})
            return RedirectResponse(target, status_code=303)

        @app.get("/approvals")
        async def approvals(request: Request) -> Response:
            viewer = self._viewer(request)
            items = await inbox(self.runtime.store, viewer.sees)
            return self._html(request, viewer, "approvals.html", items=items, flash=None)

        @app.get("/approvals/list")
        async def approvals_list(request: Request) -> Response:
            viewer = self._viewer(request)
            items = await inbox(self.runtime.store, viewer.sees)
            return self._html(request, viewer, "_inbox.html", items=items, back="approvals")

        @app.post("/decide")
        async def decide(request: Request) -> Response:
            viewer, form = await self._posted(request)
            return await self._decide(request, viewer, form)

        @app.get("/runs")
        async def attention(request: Request) -> Response:
            viewer = self._viewer(request)
            return self._html(request, viewer, "runs.html", flash=None, **await self._attention(viewer))

        @app.post("/runs/{run_id}/recover")
        async def recover(request: Request, run_id: str) -> Response:
            viewer, _ = await self._posted(request)
            flash = await self._recover(viewer, run_id)
            return self._html(request, viewer, "runs.html", flash=flash, **await self._attention(viewer))

        @app.get("/activity")
        async def activity(request: Request) -> Response:
            viewer = self._viewer(request)
            runs = await self.runtime.store.list_runs(limit=ACTIVITY_RUNS)
            if viewer.owner is not None:
                # The latest runs of every owner, narrowed to this one's (runs carry no owner of their own).
                runs = await visible_runs(self.runtime.store, runs, viewer.sees)
            tokens, cost = plots.usage_series(runs)
            by_status: dict[str, int] = {}
            for run in runs:
                by_status[run.status] = by_status.get(run.status, 0) + 1
            order = ("running", "suspended", "done", "error", "cancelled")
            decided, waiting = plots.wait_times(runs, now_ms())
            charts = {
                "tokens": plots.line_chart("Tokens over time", [tokens]),
                "cost": plots.line_chart("Cost over time (USD)", [cost]),
                "status": plots.bars("Runs by status", [plots.Bar(s, by_status.get(s, 0), f"st-{s}") for s in order]),
                "waits": plots.histogram("Approval wait times (decided)", decided, plots.WAIT_EDGES, plots.WAIT_LABELS),
                "open": plots.histogram(
                    "Approvals still waiting, so far", waiting, plots.WAIT_EDGES, plots.WAIT_LABELS
                ),
            }
            # Every chart is built from escaped labels and numbers formatted here (see plots.py).
            safe = {k: Markup(v) for k, v in charts.items()}
            return self._html(request, viewer, "activity.html", charts=safe, runs=len(runs), limit=ACTIVITY_RUNS)

        @app.get("/evals")
        async def evals(request: Request) -> Response:
            viewer = self._viewer(request)
            found = await eval_summaries(self.runtime.store, viewer.owner, viewer.sees)
            return self._html(request, viewer, "evals.html", evals=found, scan=EVAL_SCAN)

        @app.get("/evals/{name:path}")
        async def eval_page(request: Request, name: str) -> Response:
            viewer = self._viewer(request)
            cases, total = await eval_cases(self.runtime.store, name, viewer.owner, viewer.sees)
            if not cases:
                # An eval with no case this viewer sees answers as one that does not exist.
                raise HttpError(f"no eval {name!r}", status=404)
            if self.export_dir is not None:
                await asyncio.to_thread(read_scores, self.export_dir, name, cases)
            return self._html(
                request,
                viewer,
                "eval.html",
                name=name,
                cases=cases,
                total=total,
                limit=EVAL_CASES,
                scores=self.export_dir is not None,
            )

        return app

    # -- page data ------------------------------------------------------------------------------------

    async def _session_context(
        self, viewer: Viewer, session_id: str, *, items: bool = True, after: str | None = None
    ) -> dict[str, Any]:
        """What a session's page (or one of its fragments) shows.

        ``items=False``: without the conversation (the panel and the send form do not show it,
        and it is the costly part). ``after``: only the conversation after that revision, when it
        is on the session's lineage (``after`` is then in the context; else the whole).
        """
        store = self.runtime.store
        record = await self._record(viewer, session_id)
        row, history, pending, queued, last_seq = await asyncio.gather(
            session_row(store, record),
            thread_history(store, session_id) if items else _nothing(),
            inbox(store, viewer.sees, session_id),
            store.list_turns(session_id, ["queued"]),
            store.last_event_seq(session_id),
        )
        tree, cut = await session_tree(store, record.root_id, viewer.sees)
        parent = await store.load_session(record.lineage.parent_id) if record.lineage.parent_id else None
        parent = parent if viewer.sees(parent) else None
        shown: list[MessageView] = []
        if items:
            after = after if history is not None and after is not None and history.reaches(after) else None
            shown = conversation(history, row.runs, after=after) + await self._accepted_inputs(session_id)
        return {
            "record": record,
            "row": row,
            "items": shown,
            "after": after,
            "pending": pending,
            "queued": queued,
            "tree": tree,
            "tree_cut": cut,
            # The Cancel button: this session or a descendant has a turn queued, running or waiting.
            "tree_open": row.status in ("running", "suspended") or subtree_open(tree, session_id),
            "parent": parent,
            # Mid-reply, the live feed starts before the reply's deltas: the page shows its text so far.
            "last_seq": await reply_start(store, session_id, last_seq),
            "fork_at_revision": self.fork_at_revision,
            "back": "session",
            "page_id": session_id,  # a card of a descendant's call decides there and shows this page again
        }

    async def _accepted_inputs(self, session_id: str) -> list[MessageView]:
        """The inputs of running turns whose run has not committed yet (so its history lacks them)."""
        store = self.runtime.store
        running = await store.list_turns(session_id, ["running"])
        return [accepted_input(t) for t in running if await store.load_run(t.run_id) is None]

    async def _decide(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        session_id = form.get("session_id", "")
        run_id, call_id = form.get("run_id", ""), form.get("tool_call_id", "")
        action = form.get("action", "")
        back = "session" if form.get("back") == "session" else "approvals"
        if action not in ("approve", "reject", "resume"):
            raise HttpError("the form names no decision (approve, reject or resume)", status=422)
        chosen: Action = "approve" if action == "approve" else "reject" if action == "reject" else "resume"
        handle = await self._handle(viewer, session_id)
        value: Any = form.get("value", "")
        if chosen == "resume" and form.get("value_json"):
            try:
                value = parse_json(str(value), max_depth=self.max_json_depth, root="value")
            except json.JSONDecodeError as exc:
                outcome = Outcome("invalid", f"The value is not JSON: {exc.msg}")
                return await self._decided(request, viewer, form, back, outcome)
            except JsonRefused as exc:  # too deep to store and read back, or NaN/Infinity
                outcome = Outcome("invalid", f"The value cannot be kept: {exc}")
                return await self._decided(request, viewer, form, back, outcome)
        outcome = await self.decider.decide(
            handle,
            run_id,
            call_id,
            chosen,
            args_text=form.get("args") if chosen == "approve" else None,
            reason=form.get("reason", ""),
            value=value,
        )
        return await self._decided(request, viewer, form, back, outcome)

    async def _decided(
        self, request: Request, viewer: Viewer, form: dict[str, str], back: str, outcome: Outcome
    ) -> Response:
        """The answer to a decision: in place with htmx, else the whole page with a notice."""
        session_id = form.get("page") or form.get("session_id", "")  # the page the card was on
        card_id = f"card-{form.get('run_id', '')}-{form.get('tool_call_id', '')}"
        typed: dict[str, Any] = {}
        if outcome.kind == "invalid":
            # Keep what the person typed, with the reason it does not fit, in the same card.
            typed = {"typed": form, "error": outcome.message}
            if _is_htmx(request):
                wanted = form.get("tool_call_id")
                found = await inbox(self.runtime.store, viewer.sees, session_id)
                items = [i for i in found if i.call.tool_call_id == wanted]
                response = self._html(
                    request,
                    viewer,
                    "_card.html",
                    item=items[0] if items else None,
                    back=back,
                    page_id=session_id,
                    **typed,
                )
                response.headers["HX-Retarget"] = f"#{card_id}"
                response.headers["HX-Reswap"] = "outerHTML"
                return response
        flash = {"kind": outcome.kind, "message": outcome.message}
        ctx: dict[str, Any]
        if back == "session":
            ctx = await self._session_context(viewer, session_id, items=not _is_htmx(request))
            template = "_panel.html" if _is_htmx(request) else "session.html"
        else:
            ctx = {"items": await inbox(self.runtime.store, viewer.sees), "back": "approvals"}
            template = "_inbox.html" if _is_htmx(request) else "approvals.html"
        ctx.update(typed)
        code = 200 if _is_htmx(request) else {"ok": 200, "raced": 409, "invalid": 422}[outcome.kind]
        return self._html(request, viewer, template, code=code, flash=flash, **ctx)

    async def _attention(self, viewer: Viewer) -> dict[str, Any]:
        store = self.runtime.store
        failed = await store.page_sessions(status="error", limit=100, owner=viewer.owner)
        rows = await session_rows(store, failed)
        stale: list[tuple[RunState, str]] = []
        found = await stale_runs(store, STALE_AFTER_MS, now_ms())
        if viewer.owner is not None:
            found = await visible_runs(store, found, viewer.sees)
        for run in found:
            if await self._driven_here(run):
                continue
            stale.append((run, "" if run.agent in self.runtime.agents else f"agent {run.agent!r} is not served here"))
        # Every open turn the viewer's tenancy covers, with its tree's spend (its owner's trees only).
        running = await running_turns(store, owner=viewer.owner)
        return {"failed": rows, "stale": stale, "stale_after_s": STALE_AFTER_MS // 1000, "running": running}

    async def _recover_run(self, run: RunState, agent: Agent) -> RunResult:
        """Drive a stale run on: a session's through the tree (its turn ends with it), a bare run's alone."""
        store = self.runtime.store
        if await store.load_session(run.thread_id) is None:
            return await Session.recover(store=store, agent=agent, run_id=run.run_id)
        handle = await self.runtime.session(run.thread_id)
        for turn in await handle.recover():
            record = await store.load_turn(turn.submission_id)
            if record is not None and record.run_id == run.run_id:
                return await turn.result()
        # No open turn holds this run: it was left running by a drive outside the tree.
        raise RepertoryError(f"run {run.run_id!r} has no open turn to drive on; its session has moved on")

    async def _driven_here(self, run: RunState) -> bool:
        """True when a session of this runtime is driving ``run`` right now (so it is not stale)."""
        if await self.runtime.store.load_session(run.thread_id) is None:
            return False
        handle = await self.runtime.session(run.thread_id)
        return (await handle.metadata()).status == "running"

    async def _recover(self, viewer: Viewer, run_id: str) -> dict[str, str]:
        store = self.runtime.store
        run = await store.load_run(run_id)
        # A bare Session's run has no session, so no owner: only those who see everything see it.
        if run is None or (viewer.owner is not None and not viewer.sees(await store.load_session(run.thread_id))):
            raise RunNotFound(f"no run {run_id!r}")
        now = now_ms()
        if run.status != "running" or now - run.updated_at < STALE_AFTER_MS:
            return {"kind": "raced", "message": "That run is no longer stale: nothing to recover."}
        if await self._driven_here(run):
            return {"kind": "raced", "message": "A session here is driving that run again."}
        agent = self.runtime.agents.get(run.agent or "")
        if agent is None:
            return {"kind": "invalid", "message": f"Cannot recover: agent {run.agent!r} is not served here."}

        async def drive() -> str:
            try:
                result = await self._recover_run(run, agent)
            except RepertoryError as exc:
                _log.warning("recovering run %s from the web UI failed: %s", run_id, exc)
                return f"failed again: {type(exc).__name__}: {exc}"
            return f"it is {result.status} now"

        task = asyncio.get_running_loop().create_task(drive())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        # A short recovery is answered with its outcome; a long one goes on after the page is shown.
        done, _ = await asyncio.wait({task}, timeout=RECORD_WAIT_S)
        if done:
            return {"kind": "ok", "message": f"Recovered run {run_id}: {task.result()}."}
        return {"kind": "ok", "message": f"Recovering run {run_id}: it goes on from its last checkpoint."}


def ui_only_app(
    runtime: Runtime,
    api_keys: Mapping[str, Principal] | Iterable[str] | None = None,
    *,
    admin_keys: Mapping[str, Principal] | Iterable[str] | None = None,
    limits: ServerLimits | None = None,
    export_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """An ASGI app serving the web UI alone at ``/ui`` (what ``repertory ui`` runs), ``/`` redirecting there.

    ``api_keys`` and ``admin_keys`` as ``create_app`` takes them (a key sees its owner's sessions,
    an admin key every session); the HTTP API's routes are not served. ``limits`` as
    ``create_app`` takes them: a body over ``max_body_bytes`` is 413 before it is read, and a key
    holds at most ``max_streams_per_key`` live views. ``export_dir``: where evals wrote their
    scores (``WebUI``).
    """
    limits = limits or DEFAULT_LIMITS
    keys = ApiKeys(api_keys, admin_keys, limits=limits)
    ui = WebUI(runtime, keys, limits=limits, export_dir=export_dir)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await ui.close()

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)

    @app.get("/", include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse("/ui/", status_code=307)

    app.mount("/ui", ui.app)
    return BodyLimit(app, limits.max_body_bytes)
