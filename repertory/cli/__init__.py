"""The ``repertory`` command line: durable LLM agent sessions, run, served, decided, inspected, exported.

    repertory demo                      # a fleet of agent sessions on this machine
    repertory serve                     # the runtime over HTTP, with the web UI at /ui/
    repertory approvals list            # tool calls waiting for a decision
    repertory export --store sqlite:///runs.db --out analytics/

Commands are functions on ``app`` (a typer app); a new one is one more ``@app.command()``. Every
command shares one error rule: bad input (a missing option, a store that cannot be opened, an
export directory that belongs to another store, a command whose extra is not installed) prints one
line, ``error: ...``, on stderr and exits with code 2. Anything else is a bug and keeps its traceback.

Every table fits the terminal it prints on (``repertory.cli._tables``), and help is click's plain
text (``rich_markup_mode=None``), which wraps at any width where rich's help panels cut defaults.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from repertory.cli._options import stdout_console
from repertory.cli._tables import Field, Layout, fit_table
from repertory.errors import MissingExtra, RepertoryError

__all__ = ["app"]

USAGE_ERROR = 2


def _fail(message: str) -> None:
    """One line on stderr (whatever the message's own line breaks), then exit 2."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    sys.exit(USAGE_ERROR)


def _is_text(arg: str) -> bool:
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Commands(TyperGroup):
    """The command group: turns usage errors and repertory's faults into one line on stderr."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        for arg in sys.argv[1:] if args is None else args:
            if not _is_text(arg):
                # Bytes that are not UTF-8 reach Python as lone surrogates, which no store can hold.
                _fail(f"argument {arg!a} is not valid UTF-8 text")
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (RepertoryError, MissingExtra) as exc:
            # A missing extra is bad input too: the message says what to install.
            _fail(str(exc))
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        except Exception as exc:
            # Click's usage errors (typer vendors click, so match its interface, not its class).
            code = getattr(exc, "exit_code", None)
            if hasattr(exc, "format_message") and isinstance(code, int):
                message = exc.format_message()
                if not message:  # `repertory` alone: the help was printed, there is nothing wrong to say
                    sys.exit(code)
                _fail(message)
            raise
        if standalone_mode:
            sys.exit(result if isinstance(result, int) else 0)
        return result


HELP = "Durable LLM agent sessions: run, serve over HTTP, approve, inspect, export."
"""What ``repertory --help`` says the tool is, in one line."""

app = typer.Typer(
    cls=_Commands,
    name="repertory",
    help=HELP,
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    """``--version``: the installed package's version (``repertory.__version__``), then exit 0."""
    if asked:
        from repertory import __version__

        typer.echo(f"repertory {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Durable LLM agent sessions: run, serve over HTTP, approve, inspect, export."""


async def _export(url: str, out: Path) -> Any:
    from repertory.cli._store import open_existing_store
    from repertory.storage.export import export_parquet

    store = await open_existing_store(url)
    try:
        return await export_parquet(store, out)
    finally:
        await store.close()


_EXPORT_FIELDS = (Field("table"), Field("rows written", "number"), Field("total rows", "number"), Field("file"))
_EXPORT_LAYOUTS = (
    Layout(("table", "rows written", "total rows", "file")),
    Layout(("table", "rows written", "total rows")),
)


@app.command("export", short_help="Export a store's tables to Parquet for analytics (DuckDB).")
def export(
    store: Annotated[str, typer.Option("--store", help="Store URL: sqlite:///runs.db, postgresql://..., a path.")],
    out: Annotated[Path, typer.Option("--out", help="Export directory (created; later runs add what changed).")],
) -> None:
    """Export every table of a store to Parquet under OUT, incrementally (see docs/guides/analytics.md)."""
    report = asyncio.run(_export(store, out))
    rows = [
        (name, f"{t.rows:,}", f"{t.total_rows:,}", Path(t.file).name if t.file else "-")
        for name, t in report.tables.items()
    ]
    title = f"export generation {report.generation} -> {report.out_dir}"
    console = stdout_console()
    console.print(fit_table(console, title, _EXPORT_FIELDS, rows, _EXPORT_LAYOUTS))
    console.print(f"{report.rows:,} rows in {report.elapsed_s:.2f}s ({report.rows_per_s:,.0f} rows/s)")


def _register_session_commands() -> None:
    """demo has a module of its own; sessions, approvals, resume and recover one; sessions delete and retention one."""
    from repertory.cli.demo import register as register_demo
    from repertory.cli.lifecycle import register as register_lifecycle
    from repertory.cli.sessions import register

    register_demo(app)
    register(app)
    register_lifecycle(app)


def _register_schedule_commands() -> None:
    """schedules (list, cancel, timers) live in their own module."""
    from repertory.cli.schedules import register

    register(app)


def _register_serve_command() -> None:
    """serve (the HTTP server) lives in its own module; FastAPI is imported only when it runs."""
    from repertory.cli.serve import register

    register(app)


def _register_mcp_command() -> None:
    """mcp (the MCP server over stdio) lives in its own module; the SDK is imported only when it runs."""
    from repertory.cli.mcp import register

    register(app)


def _register_eval_commands() -> None:
    """eval (build, run, report) lives in its own module; pydantic-evals is imported only when one runs."""
    from repertory.cli.evals import register

    register(app)


_register_session_commands()
_register_schedule_commands()
_register_serve_command()
_register_mcp_command()
_register_eval_commands()
