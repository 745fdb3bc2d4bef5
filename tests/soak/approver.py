"""The approver process: a human's inbox, as a separate process the conductor SIGKILLs and starts again.

    python -m tests.soak.approver RUN_DIR STORE_URL BACKEND SEED INCARNATION [RAY_ADDRESS]

Each decision is drawn from the token and the seed: most are approved, some rejected, some
approved with edited arguments (the tool runs with those). A decision the store holds is
appended to ``decisions.jsonl`` once. It exits when ``stop-approver`` appears.

Local backend: it decides as a person does, through the driver's web UI (``driver-url``, which each
driver incarnation rewrites): it reads the inbox (``/ui/approvals/list``, every pending approval of
every session) and posts each card's form to ``/ui/decide``, so the decision runs in the driver's
process, in the session's mailbox. A second process deciding with a runtime of its own drove the
run on there while the driver still held the session (its event numbering, its queue) in memory:
the soak saw ``CommitConflict`` on event seqs, and approvals left undecided after a driver restart
(issue 26). The local backend drives a session in one process at a time; a second process reads.
This one reads the store only for what the checker needs and a page does not show (the token a
decision redeems) and to see whether a decision landed: the page answers before the commit when
the session is slow, and a driver killed mid-request leaves it unknown.

Ray backend: a runtime of its own (a Ray client) lists ``pending_approvals(tree=True)`` of every
root the driver created (``roots.jsonl``) and decides there: the decision goes to the host that
runs the session, which is the one process driving it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from repertory import Runtime
from repertory.core.state import RunState, SuspendReason
from repertory.core.store import TreeStore
from repertory.errors import InvalidResumeToken, NotSuspended, RepertoryError, WrongSuspensionKind
from tests.soak.driver import url_file
from tests.soak.records import RunPaths, append_line, now_ms, read_lines
from tests.soak.retry import retrying, transient
from tests.soak.workload import make_agents, ray_options

__all__ = ["APPROVE", "REJECT", "Card", "UiApprover", "draw", "edited_args", "inbox_cards", "main"]

APPROVE = 0.7
"""The share of approvals approved as asked."""
REJECT = 0.15
"""The share rejected; the rest are approved with edited arguments."""
_LOOK_S = 0.3
_LANDING_S = 30.0
"""How long a decision the page took is watched for in the store before it counts as lost."""
_LOST_S = 3.0
"""How long one whose request failed or was refused is (a decision in flight may still land)."""


def draw(seed: int, token: str) -> str:
    """The decision for one approval: ``approve``, ``reject`` or ``edit``, from the seed and the token."""
    x = random.Random(f"{seed}-{token}").random()
    return "approve" if x < APPROVE else "reject" if x < APPROVE + REJECT else "edit"


def edited_args(tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the approver changes when it edits a call: a smaller amount, a reviewed text."""
    out = dict(args)
    if tool_name == "charge":
        out["amount"] = max(1, int(out.get("amount", 1)) // 2)
    elif tool_name == "write_file":
        out["content"] = f"[reviewed] {out.get('content', '')}"
    elif tool_name == "publish_figures":
        out["summary"] = f"[reviewed] {out.get('summary', '')}"
    return out


class Approver:
    """Looks at every root's tree, decides each approval once, in the background."""

    def __init__(self, rt: Runtime, paths: RunPaths, seed: int, incarnation: int) -> None:
        self.rt = rt
        self.paths = paths
        self.seed = seed
        self.who = f"approver-{incarnation}"
        self.deciding: dict[str, asyncio.Task[None]] = {}

    async def look(self) -> None:
        """One pass over the roots: start a decision for every approval not being decided already."""
        for line in read_lines(self.paths.roots):
            root_id = line["session_id"]
            try:
                root = await self.rt.session(root_id)
                pending = await root.pending_approvals(tree=True)
            except Exception as exc:
                if not transient(exc):
                    raise
                append_line(self.paths.errors, {"who": self.who, "what": "list", "error": str(exc)[:300]})
                continue
            for reason in pending:
                if reason.kind == "approval" and reason.token not in self.deciding:
                    task = asyncio.get_running_loop().create_task(self.decide(root_id, reason))
                    self.deciding[reason.token] = task

    async def decide(self, root_id: str, reason: SuspendReason) -> None:
        """Approve, reject or edit one call (drawn from the seed and the token); record it once accepted."""
        decision = draw(self.seed, reason.token)
        payload = reason.payload if isinstance(reason.payload, dict) else {}
        tool_name = str(payload.get("tool_name", ""))
        args = payload.get("args")
        root = await self.rt.session(root_id)
        try:
            if decision == "approve":
                await retrying("approve", lambda: root.approve(reason.token), journal=self.paths.errors, who=self.who)
            elif decision == "reject":
                await retrying(
                    "reject",
                    lambda: root.reject(reason.token, reason="the approver said no"),
                    journal=self.paths.errors,
                    who=self.who,
                )
            else:
                new = edited_args(tool_name, args if isinstance(args, dict) else {})
                await retrying(
                    "edit", lambda: root.approve(reason.token, args=new), journal=self.paths.errors, who=self.who
                )
        except (InvalidResumeToken, NotSuspended, WrongSuspensionKind):
            return  # decided already (a retry after the first attempt landed), or the run asked again
        except RepertoryError as exc:
            # Either the decision landed and the run it drove on ended in error (approve() raises
            # the run's ModelError), or it never landed (the store stayed away through every retry,
            # or the tool's MCP server could not start before the decision was recorded: ToolError,
            # the token still live). The token still pending tells them apart.
            if transient(exc) or await self._still_pending(root_id, reason.token):
                append_line(
                    self.paths.errors,
                    {"who": self.who, "what": "not decided", "error": f"{type(exc).__name__}: {exc}"[:300]},
                )
                self.deciding.pop(reason.token, None)  # look again on the next pass
                return
            append_line(
                self.paths.errors, {"who": self.who, "what": "decided; run failed", "error": f"{type(exc).__name__}"}
            )
        except Exception as exc:
            append_line(
                self.paths.errors, {"who": self.who, "what": "decide", "error": f"{type(exc).__name__}: {exc}"[:300]}
            )
            self.deciding.pop(reason.token, None)  # look again on the next pass
            return
        line: dict[str, Any] = {
            "session_id": reason.session_id,
            "token": reason.token,
            "decision": decision,
            "at_ms": now_ms(),
            "tool_call_id": reason.tool_call_id,
            "tool": tool_name,
        }
        if decision == "edit":
            line["args"] = new
        append_line(self.paths.decisions, line)

    async def _still_pending(self, root_id: str, token: str) -> bool:
        """Whether ``token`` is still waiting for a decision (read again, retrying through faults)."""
        root = await self.rt.session(root_id)
        pending = await retrying(
            "list", lambda: root.pending_approvals(tree=True), journal=self.paths.errors, who=self.who
        )
        return any(p.token == token for p in pending)

    async def run(self) -> None:
        """Look every few hundred milliseconds until told to stop."""
        while not self.paths.stop_approver.exists():
            await self.look()
            await asyncio.sleep(_LOOK_S)
        for task in self.deciding.values():
            task.cancel()
        await asyncio.gather(*self.deciding.values(), return_exceptions=True)


@dataclass(frozen=True)
class Card:
    """One live approval card of the web UI's inbox: what its form posts back."""

    session_id: str
    run_id: str
    tool_call_id: str
    csrf: str


class _Forms(HTMLParser):
    """Collects the hidden inputs of every ``/decide`` form on a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, str]] = []
        self._form: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if tag == "form" and attr.get("action", "").endswith("/decide"):
            self._form = {}
        elif tag == "input" and self._form is not None and attr.get("type") == "hidden" and "name" in attr:
            self._form[attr["name"]] = attr.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._form is not None:
            self.forms.append(self._form)
            self._form = None


def inbox_cards(html: str) -> list[Card]:
    """The live cards of an inbox page (a card waiting behind another call of its step has no form)."""
    parser = _Forms()
    parser.feed(html)
    keys = ("session_id", "run_id", "tool_call_id", "csrf")
    return [Card(*(form[k] for k in keys)) for form in parser.forms if all(form.get(k) for k in keys)]


def _decided(run: RunState | None, tool_call_id: str) -> str | None:
    """How the run's approval record of the call was decided (``approved``, ``rejected``, ...), or ``None``."""
    if run is None:
        return None
    record = next((a for a in run.approvals if a.tool_call_id == tool_call_id), None)
    return None if record is None else record.decision


class UiApprover:
    """The local backend's approver: reads the driver's web UI inbox, decides each card through its form."""

    def __init__(self, store: TreeStore, paths: RunPaths, seed: int, incarnation: int) -> None:
        import httpx

        self.store = store
        self.paths = paths
        self.seed = seed
        self.who = f"approver-{incarnation}"
        self.client = httpx.AsyncClient(timeout=30.0)  # keeps the UI's CSRF cookie, as a browser does
        self.deciding: dict[str, asyncio.Task[None]] = {}
        self.finished: set[str] = {str(line.get("tool_call_id")) for line in read_lines(paths.decisions)}

    def _note(self, what: str, exc: BaseException | str) -> None:
        error = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        append_line(self.paths.errors, {"who": self.who, "what": what, "error": error[:300], "at_ms": now_ms()})

    def _base(self) -> str | None:
        target = url_file(self.paths)
        return target.read_text().strip() if target.exists() else None

    async def look(self) -> None:
        """One look at the inbox: start a decision for every card not decided or being decided."""
        import httpx

        base = self._base()
        if base is None:
            return  # the driver does not serve yet
        try:
            page = await self.client.get(f"{base}/ui/approvals/list")
            page.raise_for_status()
        except httpx.HTTPError as exc:  # the driver is down (killed, starting again) or its store is away
            self._note("inbox", exc)
            return
        for card in inbox_cards(page.text):
            if card.tool_call_id in self.finished or card.tool_call_id in self.deciding:
                continue
            task = asyncio.get_running_loop().create_task(self._decide_logged(base, card))
            self.deciding[card.tool_call_id] = task

    async def _decide_logged(self, base: str, card: Card) -> None:
        try:
            await self.decide(base, card)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._note("decide", exc)
        finally:
            self.deciding.pop(card.tool_call_id, None)

    async def _run(self, run_id: str) -> RunState | None:
        run: RunState | None = await retrying(
            "read run", lambda: self.store.load_run(run_id), journal=self.paths.errors, who=self.who
        )
        return run

    async def decide(self, base: str, card: Card) -> None:
        """Post one card's decision, then watch the store until it holds a decision of the call (or not)."""
        import httpx

        run = await self._run(card.run_id)
        on = run.suspended_on if run is not None and run.status == "suspended" else None
        if run is None or on is None or on.kind != "approval" or on.tool_call_id != card.tool_call_id:
            return  # decided or gone since the page was drawn: the next look shows what still waits
        pending = next(p for p in run.pending if p.tool_call_id == card.tool_call_id)
        decision = draw(self.seed, on.token)
        form = {
            "csrf": card.csrf,
            "session_id": card.session_id,
            "run_id": card.run_id,
            "tool_call_id": card.tool_call_id,
            "action": "reject" if decision == "reject" else "approve",
            "reason": "the approver said no",
            "back": "approvals",
        }
        new: dict[str, Any] | None = None
        if decision == "edit":
            new = edited_args(pending.tool_name, dict(pending.args))
            form["args"] = json.dumps(new)
        try:
            answer = await self.client.post(f"{base}/ui/decide", data=form)
            said = f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:  # killed mid-request: the decision may or may not have landed
            said = f"{type(exc).__name__}: {exc}"
        # The store says what happened: the page answers before the commit when the session is slow
        # (or times out waiting for it), and a dead driver cannot answer at all.
        want = "rejected" if decision == "reject" else "approved"
        # A page that took the decision is given long to land it; a lost or refused request a moment
        # (a decision already in flight in the driver still lands; a dead driver's never does).
        wait = _LANDING_S if said == "HTTP 200" else _LOST_S
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            run = await self._run(card.run_id)
            held = _decided(run, card.tool_call_id)
            if held is not None:
                break
            still = run is not None and run.suspended_on is not None and run.suspended_on.token == on.token
            if not still or asyncio.get_running_loop().time() > deadline:
                self._note("not decided", f"{said}; the call is {'still waiting' if still else 'gone'}")
                return  # the next look decides it again, if it still waits
            await asyncio.sleep(_LOOK_S)
        if held != want:
            self._note("decided otherwise", f"{said}; the store holds {held}, not {want}")
            return  # cancelled with its run (superseded), or decided by someone else: not ours
        if card.tool_call_id in {str(line.get("tool_call_id")) for line in read_lines(self.paths.decisions)}:
            self.finished.add(card.tool_call_id)
            return  # an earlier incarnation's decision, already recorded
        line: dict[str, Any] = {
            "session_id": card.session_id,
            "token": on.token,
            "decision": decision,
            "at_ms": now_ms(),
            "tool_call_id": card.tool_call_id,
            "tool": pending.tool_name,
            "via": "ui",
        }
        if new is not None:
            line["args"] = new
        append_line(self.paths.decisions, line)
        self.finished.add(card.tool_call_id)

    async def run(self) -> None:
        """Look every few hundred milliseconds until told to stop."""
        try:
            while not self.paths.stop_approver.exists():
                await self.look()
                await asyncio.sleep(_LOOK_S)
        finally:
            for task in list(self.deciding.values()):
                task.cancel()
            await asyncio.gather(*self.deciding.values(), return_exceptions=True)
            await self.client.aclose()


async def _main(run_dir: Path, store_url: str, backend: str, seed: int, incarnation: int, address: str | None) -> None:
    paths = RunPaths(run_dir)
    who = f"approver-{incarnation}"
    if backend == "local":
        from repertory.storage.url import open_store

        store = await retrying("open", lambda: open_store(store_url), journal=paths.errors, who=who)
        try:
            assert isinstance(store, TreeStore)
            await UiApprover(store, paths, seed, incarnation).run()
        finally:
            with contextlib.suppress(Exception):
                await store.close()
        return
    rt: Runtime = await retrying(
        "start",
        lambda: Runtime.start(
            store=store_url, backend=backend, agents=make_agents(run_dir, seed), **ray_options(address)
        ),
        journal=paths.errors,
        who=who,
    )
    try:
        await Approver(rt, paths, seed, incarnation).run()
    finally:
        with contextlib.suppress(Exception):
            await rt.close()


def main(argv: list[str] | None = None) -> None:
    """Parse the positional arguments the conductor passes, and decide."""
    args = sys.argv[1:] if argv is None else argv
    run_dir, store_url, backend, seed, incarnation = args[:5]
    address = args[5] if len(args) > 5 else None
    asyncio.run(_main(Path(run_dir), store_url, backend, int(seed), int(incarnation), address))


if __name__ == "__main__":
    main()
