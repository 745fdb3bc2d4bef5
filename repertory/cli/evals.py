"""``repertory eval build|run|report``: evals from stored sessions (``repertory.evals``) on the command line.

    repertory eval build shop.yaml --store sqlite:///runs.db --agent support --agents app:agents
    repertory eval run shop.yaml --name mini --model openai:gpt-5-mini --store ... --agents app:agents --out analytics/
    repertory eval report --out analytics/ --eval recorded --against mini

``build`` saves a pydantic-evals dataset (YAML or JSON by the file's suffix). ``run`` starts a
runtime on the store without recovering anything (``recover=False``: a server may be running the
fleet on it) and runs the variant, with pydantic-evals' progress bar, then prints its report.
``report`` reads the Parquet results: a summary per eval, or two evals side by side.
"""

from __future__ import annotations

import asyncio
import importlib
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from repertory.cli._options import DEFAULT_AGENTS, DEFAULT_STORE, AgentsOption, StoreOption, load_agents, stdout_console
from repertory.cli._tables import Field, Layout, fit_table
from repertory.core.budget import Budget, parse_owner_budget
from repertory.core.model import Model
from repertory.core.store import TreeStore
from repertory.errors import RepertoryError

__all__ = ["eval_app", "register"]

eval_app = typer.Typer(
    help="Evals from stored sessions: build a dataset of real turns, run a variant on it, report the scores.",
    short_help="Evals from stored sessions: build a dataset, run a variant, report.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _epoch_ms(text: str | None, option: str) -> int | None:
    """An ``--after``/``--before`` value: epoch milliseconds, or an ISO 8601 time (UTC unless it says)."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RepertoryError(f"{option} {text!r} is neither epoch milliseconds nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.now().astimezone().tzinfo).astimezone()
    return int(moment.timestamp() * 1000)


async def _open_tree(url: str) -> TreeStore:
    from repertory.cli._store import open_existing_store

    store = await open_existing_store(url)
    if not isinstance(store, TreeStore):
        await store.close()
        raise RepertoryError(f"{url} does not hold sessions")
    return store


@eval_app.command("build", short_help="Save a dataset of stored user turns (YAML or JSON).")
def eval_build(
    dataset: Annotated[Path, typer.Argument(help="The dataset file to write: .yaml or .json.")],
    store: StoreOption = DEFAULT_STORE,
    agent: Annotated[str | None, typer.Option("--agent", help="Only sessions of this agent.")] = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Only sessions of this owner.")] = None,
    session: Annotated[list[str] | None, typer.Option("--session", help="This session (repeatable).")] = None,
    sql: Annotated[
        str | None, typer.Option("--sql", help="A DuckDB query over --export-dir whose first column is session ids.")
    ] = None,
    export_dir: Annotated[Path | None, typer.Option("--export-dir", help="The Parquet export --sql reads.")] = None,
    after: Annotated[str | None, typer.Option("--after", help="Sessions created at or after (ISO or ms).")] = None,
    before: Annotated[str | None, typer.Option("--before", help="Sessions created before (ISO or ms).")] = None,
    last: Annotated[bool, typer.Option("--last", help="Only each session's last user turn.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="The dataset's name (default: the file's stem).")] = None,
    agents: Annotated[
        str | None, typer.Option("--agents", help="module:attr of the agents, to record which tools are idempotent.")
    ] = None,
) -> None:
    """Build a dataset whose cases are the user turns of the selected sessions, and save it."""
    from repertory.evals import SessionSelect, dataset_from_sessions

    if dataset.suffix not in (".yaml", ".yml", ".json"):
        raise RepertoryError(f"{dataset}: the dataset file must end in .yaml, .yml or .json")
    try:
        select = SessionSelect(
            agent=agent,
            owner=owner,
            session_ids=session or None,
            sql=sql,
            export_dir=None if export_dir is None else str(export_dir),
            created_after=_epoch_ms(after, "--after"),
            created_before=_epoch_ms(before, "--before"),
            turns="last" if last else "each",
        )
    except ValueError as exc:
        raise RepertoryError(f"{' '.join(str(exc).split())}") from None
    registered = None if agents is None else load_agents(agents)

    async def main() -> int:
        opened = await _open_tree(store)
        try:
            built = await dataset_from_sessions(opened, select, name=name or dataset.stem, agents=registered)
        finally:
            await opened.close()
        built.to_file(dataset)
        return len(built.cases)

    cases = asyncio.run(main())
    stdout_console().print(f"{cases} cases -> {dataset}")


def _model(spec: str) -> Model:
    """``module:attr`` naming a ``Model`` (or a function returning one), else a ``provider:model`` string."""
    module, _, attr = spec.partition(":")
    obj: Any = None
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        obj = None
    if obj is not None and callable(obj) and not isinstance(obj, Model):
        try:
            obj = obj()
        except Exception as exc:
            raise RepertoryError(f"--model {spec!r}: calling it raised {type(exc).__name__}: {exc}") from None
    if isinstance(obj, Model):
        return obj
    from repertory.models import infer_model

    try:
        return infer_model(spec)
    except ValueError as exc:
        raise RepertoryError(f"--model {spec!r}: {exc}") from None


def _budget(spec: str | None) -> Budget | None:
    if spec is None:
        return None
    try:
        return parse_owner_budget(f"case={spec}")[1]
    except ValueError as exc:
        raise RepertoryError(f"--budget {spec!r}: {str(exc).split(': ', 1)[-1]}") from None


@eval_app.command("run", short_help="Run a variant on every case of a dataset, each in a fork.")
def eval_run(
    dataset: Annotated[Path, typer.Argument(help="A dataset saved by `repertory eval build`.")],
    name: Annotated[str, typer.Option("--name", help="The eval's name: its forks are found by it (resumable).")],
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
    agent: Annotated[
        str | None, typer.Option("--agent", help="The agent the variant is made from (default: each case's).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="provider:model, or module:attr of a Model (default: the agent's)."),
    ] = None,
    instructions: Annotated[str | None, typer.Option("--instructions", help="The variant's instructions.")] = None,
    tools: Annotated[str, typer.Option("--tools", help="replay (nothing runs) or live (idempotent tools run).")] = (
        "replay"
    ),
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Cases run at once.")] = 4,
    budget: Annotated[
        str | None, typer.Option("--budget", help="Each case's cap: max_cost=0.5,max_model_requests=10.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write eval_runs/eval_scores Parquet here.")] = None,
) -> None:
    """Fork each case's session at its revision, run the variant there, score it and print the report."""
    from repertory.evals import Latency, ReplyEquals, TokensAndCost, ToolTrajectory, load_dataset, run_eval
    from repertory.tree import Runtime

    if tools not in ("replay", "live"):
        raise RepertoryError(f"--tools must be replay or live, not {tools!r}")
    loaded = load_dataset(dataset)
    registered = load_agents(agents)
    variant_model = None if model is None else _model(model)
    cap = _budget(budget)

    async def main() -> Any:
        opened = await _open_tree(store)
        try:
            async with await Runtime.start(store=opened, agents=registered, recover=False) as rt:
                return await run_eval(
                    rt,
                    loaded,
                    name=name,
                    agent=agent,
                    model=variant_model,
                    instructions=instructions,
                    tools="live" if tools == "live" else "replay",
                    concurrency=concurrency,
                    budget=cap,
                    evaluators=[ReplyEquals(), ToolTrajectory(), Latency(), TokensAndCost()],
                    out_dir=out,
                    progress=True,
                )
        finally:
            await opened.close()

    report = asyncio.run(main())
    console = stdout_console()
    report.print(console=console, include_input=False, include_output=False)
    if report.failures:
        console.print(f"{len(report.failures)} case(s) failed to run:")
        for failure in report.failures:
            console.print(f"  {failure.name}: {failure.error_message}")


_SUMMARY = (Field("eval"), Field("result"), Field("kind"), Field("cases", "number"), Field("mean", "number"))
_SIDE = (
    Field("case", "id"),
    Field("result"),
    Field("a", "number"),
    Field("b", "number"),
    Field("delta", "number"),
)


def _number(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4g}"


@eval_app.command("report", short_help="Scores of the evals written to an export folder.")
def eval_report(
    out: Annotated[Path, typer.Option("--out", help="The folder `eval run --out` wrote to.")],
    eval_name: Annotated[
        str | None, typer.Option("--eval", help="Only this eval (with --against: the baseline).")
    ] = None,
    against: Annotated[str | None, typer.Option("--against", help="Set this eval beside --eval, case by case.")] = None,
) -> None:
    """A summary per eval and result; with --eval A --against B, each case's results side by side (B - A)."""
    from repertory.evals import connect

    if not out.is_dir():
        raise RepertoryError(f"no results at {out}: run `repertory eval run ... --out {out}` first")
    con = connect(out)
    console = stdout_console()
    try:
        if against is not None:
            if eval_name is None:
                raise RepertoryError("--against needs --eval: the eval it is compared with")
            rows = con.execute(
                "SELECT case_name, name, a_value, b_value, delta FROM compare_variants(?, ?)", [eval_name, against]
            ).fetchall()
            table = [(str(r[0]), str(r[1]), _number(r[2]), _number(r[3]), _number(r[4])) for r in rows]
            title = f"{against} against {eval_name}"
            console.print(fit_table(console, title, _SIDE, table, (Layout(("case", "result", "a", "b", "delta")),)))
            return
        query = "SELECT eval, name, kind, cases, mean FROM eval_summary"
        params: list[Any] = []
        if eval_name is not None:
            query += " WHERE eval = ?"
            params.append(eval_name)
        summary = [
            (str(r[0]), str(r[1]), str(r[2]), str(r[3]), _number(r[4])) for r in con.execute(query, params).fetchall()
        ]
        layouts = (Layout(("eval", "result", "kind", "cases", "mean")),)
        console.print(fit_table(console, "eval results", _SUMMARY, summary, layouts))
    finally:
        con.close()


def register(app: typer.Typer) -> None:
    """Add ``repertory eval`` to ``app``."""
    app.add_typer(eval_app, name="eval")
